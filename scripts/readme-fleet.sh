#!/usr/bin/env bash
# Runs the fleet simulation example (deterministic: seeded phases, virtual
# time) and writes its table into docs/fleet.md between the `fleet-table` markers.
set -euo pipefail
cd "$(dirname "$0")/.."

out="$(mktemp)"
trap 'rm -f "$out"' EXIT
cargo run --quiet --example fleet >"$out"
scripts/readme-block.sh fleet-table <"$out"
echo "docs/fleet.md: fleet table written:"
cat "$out"
