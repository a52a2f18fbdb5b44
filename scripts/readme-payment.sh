#!/usr/bin/env bash
# Runs the payment example once and puts its summary in README.md, between
# the `<!-- payment-output -->` and `<!-- /payment-output -->` markers.
# Fails (and leaves the README alone) if the example fails.
set -euo pipefail
cd "$(dirname "$0")/.."

out="$(mktemp)"
trap 'rm -f "$out" README.md.new' EXIT
cargo run --quiet --example payment >"$out"
summary="$(sed -n '/^elapsed /,/^verdict /p' "$out")"
[ -n "$summary" ] || { echo "the example printed no summary" >&2; cat "$out" >&2; exit 1; }
grep -q '<!-- /payment-output -->' README.md || { echo "README.md has no payment-output markers" >&2; exit 1; }

awk -v summary="$summary" '
  /<!-- payment-output -->/ {print; print "```text"; print summary; print "```"; skip = 1; next}
  /<!-- \/payment-output -->/ {skip = 0}
  !skip {print}
' README.md >README.md.new
mv README.md.new README.md
echo "README.md: payment example output replaced with this run's:"
echo "$summary"
