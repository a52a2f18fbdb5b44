#!/usr/bin/env bash
# Fails when one successful call through a guarded configuration costs more
# than 10% more instructions than benches/instructions.baseline says (issue 18:
# no feature may slow the success path unnoticed). Instruction counts, not
# wall times: they are the same on every run of the same code.
#
#   scripts/instructions-check.sh            # measure the baseline's rows, compare (CI)
#   scripts/instructions-check.sh --update   # measure and rewrite the baseline
#
# A change that makes the success path cheaper passes (with a note); rewrite
# the baseline with --update and commit it to keep the gain.
#
# Then the same rows again, built with feature `redis` and their guards shared
# by a fleet (issue 16): the success path never touches the store, so each row
# must cost what it cost without the feature (within 2%) in this same run.
set -euo pipefail
cd "$(dirname "$0")/.."

baseline="benches/instructions.baseline"
# The rows a new baseline holds: every configuration of ours.
default_rows=(attribute_defaults breaker_budget_call breaker_budget_overridden breaker_budget_bulkhead breaker_budget_bulkhead_timeout
  breaker_budget_hedge breaker_budget_throttle breaker_budget_rate_limit breaker_budget_out_of_line_call
  breaker_budget_small_error_out_of_line_call
  policy_run)

update=false
case "${1:-}" in
  "") ;;
  --update) update=true ;;
  *) echo "usage: $0 [--update]" >&2; exit 2 ;;
esac

if $update; then
  rows=("${default_rows[@]}")
else
  mapfile -t rows < <(grep -v '^#' "$baseline" | awk 'NF { print $1 }')
fi

# The bare call too, for the "over bare" column; it is not checked (its cost
# is the compiler's and tokio's, not ours).
scripts/instructions.sh bare_call "${rows[@]}"

MEASURED="${CARGO_TARGET_DIR:-target}/instructions.json" BASELINE="$baseline" UPDATE="$update" \
  ROWS="${rows[*]}" python3 - <<'PY'
import json, os, sys

measured = json.load(open(os.environ["MEASURED"]))
rows = os.environ["ROWS"].split()
path = os.environ["BASELINE"]
limit = 1.10

if os.environ["UPDATE"] == "true":
    with open(path, "w") as f:
        f.write("# Instructions per successful call (benches/instructions.rs), the regression\n")
        f.write("# baseline of scripts/instructions-check.sh: CI fails when a row rises more than\n")
        f.write("# 10% above it. Rewrite with `scripts/instructions-check.sh --update`.\n")
        for row in rows:
            f.write(f"{row} {measured[row]['per_call']:.1f}\n")
    print(f"wrote {path}")
    sys.exit(0)

baseline = {}
for line in open(path):
    if line.strip() and not line.startswith("#"):
        row, count = line.split()
        baseline[row] = float(count)

failed = []
print(f"{'row':<34} {'baseline':>9} {'measured':>9} {'change':>8}")
for row, base in baseline.items():
    now = measured[row]["per_call"]
    change = now / base - 1
    verdict = ""
    if now > base * limit:
        failed.append(row)
        verdict = "  REGRESSION: more than 10% above the baseline"
    elif now < base / limit:
        verdict = "  cheaper: keep it with scripts/instructions-check.sh --update"
    print(f"{row:<34} {base:9.1f} {now:9.1f} {change:+8.1%}{verdict}")
if failed:
    sys.exit(f"instruction count regression in: {', '.join(failed)}")
print("no row more than 10% above the baseline")
PY

if $update; then exit 0; fi

echo "== the same rows with feature redis, their guards shared by a fleet"
fleet_out="${CARGO_TARGET_DIR:-target}/instructions-redis.json"
INSTRUCTIONS_FEATURES=redis INSTRUCTIONS_OUT="$fleet_out" scripts/instructions.sh "${rows[@]}"
PLAIN="${CARGO_TARGET_DIR:-target}/instructions.json" FLEET="$fleet_out" ROWS="${rows[*]}" python3 - <<'PY'
import json, os, sys

plain = json.load(open(os.environ["PLAIN"]))
fleet = json.load(open(os.environ["FLEET"]))
limit = 1.02
failed = []
print(f"{'row':<34} {'without':>9} {'with redis':>10} {'change':>8}")
for row in os.environ["ROWS"].split():
    a, b = plain[row]["per_call"], fleet[row]["per_call"]
    verdict = ""
    if b > a * limit:
        failed.append(row)
        verdict = "  the fleet costs the success path more than 2%"
    print(f"{row:<34} {a:9.1f} {b:10.1f} {b / a - 1:+8.1%}{verdict}")
if failed:
    sys.exit(f"feature redis changes the success path's cost: {', '.join(failed)}")
print("feature redis and a fleet leave the success path's cost unchanged (within 2%)")
PY
