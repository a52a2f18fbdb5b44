#!/usr/bin/env bash
# Runs the storm example (deterministic: seeded, virtual time) and writes its
# 100-client rows and its findings into README.md, between the
# `storm-table` and `storm-findings` markers.
set -euo pipefail
cd "$(dirname "$0")/.."

out="$(mktemp)"
trap 'rm -f "$out"' EXIT
cargo run --quiet --example storm >"$out"
{
  echo '```text'
  head -n 1 "$out"
  awk '$3 == 100' "$out"
  echo '```'
} | scripts/readme-block.sh storm-table
sed -n '/^findings /,/^$/{/^- /p}' "$out" | scripts/readme-block.sh storm-findings
echo "README.md: storm table and findings written:"
sed -n '/^findings /,/^$/p' "$out"
