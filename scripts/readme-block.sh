#!/usr/bin/env bash
# Replaces what README.md, BENCHMARKS.md or the page of docs/ that holds the block, holds
# between `<!-- NAME -->` and `<!-- /NAME -->` with standard input. Used by
# the scripts that write generated figures into the README and the guide
# (readme-payment.sh, readme-storm.sh, rust-version.sh, ...).
#
#   some-command | scripts/readme-block.sh NAME
set -euo pipefail
cd "$(dirname "$0")/.."
name="${1:?usage: scripts/readme-block.sh NAME < content}"
content="$(cat)"
[ -n "$content" ] || { echo "readme-block.sh: no content for $name" >&2; exit 1; }
file=""
for candidate in README.md BENCHMARKS.md docs/*.md; do
  if grep -qxF "<!-- $name -->" "$candidate" && grep -qxF "<!-- /$name -->" "$candidate"; then
    file="$candidate"
    break
  fi
done
[ -n "$file" ] || { echo "none of README.md, BENCHMARKS.md and docs/*.md has <!-- $name --> ... <!-- /$name --> markers" >&2; exit 1; }
trap 'rm -f "$file.new"' EXIT
# The content goes through the environment: awk -v would interpret backslashes.
CONTENT="$content" awk -v first="<!-- $name -->" -v last="<!-- /$name -->" '
  $0 == first {print; print ENVIRON["CONTENT"]; skip = 1; next}
  $0 == last {skip = 0}
  !skip {print}
'  "$file" >"$file.new"
mv "$file.new" "$file"
