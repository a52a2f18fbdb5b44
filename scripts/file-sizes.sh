#!/usr/bin/env bash
# Fails when a source file of any crate of the workspace has more than
# 400 lines before its tests (issue 11: small files, one concern each).
# A file's tests are what follows its first `#[cfg(test)]` line.
#
#   scripts/file-sizes.sh         # list the files over the limit; exit 1 if any
set -euo pipefail
cd "$(dirname "$0")/.."

limit=400
status=0
while IFS= read -r file; do
  lines=$(awk '/^#\[cfg\(test\)\]/ { exit } { n++ } END { print n + 0 }' "$file")
  if (( lines > limit )); then
    echo "$file: $lines lines before its tests (at most $limit)" >&2
    status=1
  fi
done < <(find src retry-*/src -name '*.rs' | sort)
exit "$status"
