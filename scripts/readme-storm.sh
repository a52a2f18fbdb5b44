#!/usr/bin/env bash
# Runs the storm example (deterministic: seeded, virtual time) and writes its
# 100-client rows of every model, its findings, and how `adaptive` fares on
# the targets of issue 15 into docs/simulation.md, between the `storm-table`,
# `storm-findings` and `storm-targets` markers.
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
{
  echo '```text'
  sed -n '/^targets /,/^$/{/^- /s/^- //p}' "$out"
  echo '```'
} | scripts/readme-block.sh storm-targets
echo "docs/simulation.md: storm table, findings and targets written:"
sed -n '/^findings /,/^$/p;/^targets /,/^$/p' "$out"
