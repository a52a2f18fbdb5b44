#!/usr/bin/env bash
# Runs the payment example once and writes its summary into docs/payment-example.md,
# between the `payment-output` markers. Fails, leaving the page alone, if
# the example fails.
set -euo pipefail
cd "$(dirname "$0")/.."

out="$(mktemp)"
trap 'rm -f "$out"' EXIT
cargo run --quiet --example payment >"$out"
summary="$(sed -n '/^elapsed /,/^verdict /p' "$out")"
[ -n "$summary" ] || { echo "the example printed no summary" >&2; cat "$out" >&2; exit 1; }
printf '```text\n%s\n```\n' "$summary" | scripts/readme-block.sh payment-output
echo "docs/payment-example.md: the example's output replaced with this run's:"
echo "$summary"
