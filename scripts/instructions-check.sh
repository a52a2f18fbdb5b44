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
# It also holds the attribute to the floor, measured in the same run: the
# wrappers written by hand in benches/shared (`floor_budgeted`,
# `floor_guarded`) that do only what the contract requires of a plain call
# (the override, DEBUG and nesting tests, the nesting mark set with tokio's
# task id, and the guards' public calls). `#[resilient]` with a breaker and a
# budget may cost at most 20 instructions more than `floor_guarded`, and so
# may `#[resilient]` with defaults (which has the operation's own breaker and
# budget, issue 45), and a named budget alone at most 30 more than
# `floor_budgeted`: what the attribute adds of its own stays small whatever
# the floor costs on a given compiler or tokio. And the defaults' own
# breaker and budget may cost no more than named ones (`breaker_budget_call`).
#
# The tower layer's rows (`tower_*`: a request through `ResilientLayer`
# around a service that answers at once) are measured in a build with
# feature `tower`, held to the baseline's 10% as the others are (issue 45,
# item 6: the layer within a small margin of the attribute).
#
# Then the same rows again (the tower layer's aside), built with feature `redis`, twice: with their
# guards shared by a fleet (issue 16), and in the same binary without one
# (STORMPROOF_BENCH_FLEET=off). The success path never touches the store, so
# the fleet may add at most 2% to a row. Both runs are of one binary: two
# builds differ in what the compiler inlines (the redis build holds more
# code), which moves a row by several percent either way with no fleet work
# in it. The redis build's rows are held to the baseline's 10% as well.
# One difference between the builds is tokio's, not ours: the redis build's
# runtime has IO enabled (a fleet connects through it), and on such a
# runtime arming a timer earlier than the driver's next wake-up wakes the
# driver through mio's waker, a write(2) to an eventfd, where a runtime
# without IO flips an atomic. The hedge row arms its hedge's timer, so it
# counts about 35 instructions more there (1974 against 1939): the user-space
# half of that syscall, which every service on `enable_all()` pays for any
# timer it arms this way, fleet or none.
set -euo pipefail
cd "$(dirname "$0")/.."

baseline="benches/instructions.baseline"
# The rows a new baseline holds: every configuration of ours.
default_rows=(attribute_defaults budget_call breaker_budget_call breaker_budget_overridden breaker_budget_overridden_deadline breaker_budget_deadline breaker_budget_keyed breaker_per_key_call breaker_per_key_64_tenants_call breaker_budget_bulkhead breaker_budget_bulkhead_timeout
  breaker_budget_hedge breaker_budget_throttle breaker_budget_rate_limit breaker_budget_out_of_line_call
  breaker_budget_small_error_out_of_line_call
  policy_run policy_run_timed policy_run_keyed
  tower_cloning tower_cloning_timed tower_http)

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

# The tower layer's rows (`tower_*`) exist only in a build with feature
# `tower`: measured in a run of their own, with the bare service beside them.
attribute_rows=()
tower_rows=()
for row in "${rows[@]}"; do
  case "$row" in
    tower_*) tower_rows+=("$row") ;;
    *) attribute_rows+=("$row") ;;
  esac
done
rows=("${attribute_rows[@]}")

# The bare call too, for the "over bare" column; it is not checked (its cost
# is the compiler's and tokio's, not ours). The floors are checked against.
scripts/instructions.sh bare_call floor_call floor_budgeted_call floor_guarded_call "${rows[@]}"
tower_out="${CARGO_TARGET_DIR:-target}/instructions-tower.json"
if [ "${#tower_rows[@]}" -gt 0 ]; then
  INSTRUCTIONS_FEATURES=tower INSTRUCTIONS_OUT="$tower_out" scripts/instructions.sh tower_bare_cloning "${tower_rows[@]}"
fi

MEASURED="${CARGO_TARGET_DIR:-target}/instructions.json" MEASURED_TOWER="$tower_out" BASELINE="$baseline" \
  UPDATE="$update" ROWS="${rows[*]} ${tower_rows[*]:-}" python3 - <<'PY'
import json, os, sys

measured = json.load(open(os.environ["MEASURED"]))
if os.path.exists(os.environ["MEASURED_TOWER"]):
    measured.update(json.load(open(os.environ["MEASURED_TOWER"])))
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

# What the attribute adds over the floor written by hand (see the header).
for row, floor, allowed in [
    # 30, not the 25 a budget alone had over the unguarded floor: it was
    # +18 there (82 over 64); the budget's count and refill through the
    # guard set take 9 more than the floor's two public calls (27 over
    # floor_budgeted's 83). Folding those 9 is the redesign's (issue 42).
    ("budget_call", "floor_budgeted_call", 30),
    ("breaker_budget_call", "floor_guarded_call", 20),
    ("attribute_defaults", "floor_guarded_call", 20),
    # The operation's own breaker (a window of the last 100 calls, whose
    # successes are counted without its lock) and budget cost no more than
    # named ones (a breaker counting failures).
    ("attribute_defaults", "breaker_budget_call", 0),
]:
    if row not in measured or floor not in measured:
        continue
    # Whole instructions: a row's count per call is an average over 5,120
    # calls, and work done once in many calls (a timer wheel's turn, an
    # allocator's refill) leaves fractions that differ between machines. CI
    # once measured the defaults a fraction above the named guards (printed
    # "+0") and failed on it; less than half an instruction is not a cost.
    gap = round(measured[row]["per_call"] - measured[floor]["per_call"])
    verdict = ""
    if gap > allowed:
        failed.append(f"{row} over {floor}")
        verdict = f"  OVER THE FLOOR by more than {allowed}"
    print(f"{row} over {floor}: {gap:+.0f} (at most {allowed}){verdict}")
if failed:
    sys.exit(f"instruction count regression in: {', '.join(failed)}")
print("no row more than 10% above the baseline, and the attribute within its margin over the floor")
PY

if $update; then exit 0; fi

echo "== the same rows with feature redis: without a fleet, then their guards shared by one"
alone_out="${CARGO_TARGET_DIR:-target}/instructions-redis-alone.json"
fleet_out="${CARGO_TARGET_DIR:-target}/instructions-redis.json"
STORMPROOF_BENCH_FLEET=off INSTRUCTIONS_FEATURES=redis INSTRUCTIONS_OUT="$alone_out" scripts/instructions.sh "${rows[@]}"
INSTRUCTIONS_FEATURES=redis INSTRUCTIONS_OUT="$fleet_out" scripts/instructions.sh "${rows[@]}"
ALONE="$alone_out" FLEET="$fleet_out" BASELINE="$baseline" ROWS="${rows[*]}" python3 - <<'PY'
import json, os, sys

alone = json.load(open(os.environ["ALONE"]))
fleet = json.load(open(os.environ["FLEET"]))
baseline = {}
with open(os.environ["BASELINE"]) as f:
    for line in f:
        if line.strip() and not line.startswith("#"):
            name, count = line.split()
            baseline[name] = float(count)
failed = []
print(f"{'row':<34} {'baseline':>9} {'no fleet':>9} {'fleet':>9} {'change':>8}")
for row in os.environ["ROWS"].split():
    a, b = alone[row]["per_call"], fleet[row]["per_call"]
    verdict = ""
    if b > a * 1.02:
        failed.append(row)
        verdict = "  the fleet costs the success path more than 2%"
    elif b > baseline[row] * 1.10:
        failed.append(row)
        verdict = "  more than 10% above the baseline with feature redis"
    print(f"{row:<34} {baseline[row]:9.1f} {a:9.1f} {b:9.1f} {b / a - 1:+8.1%}{verdict}")
if failed:
    sys.exit(f"feature redis or a fleet changes the success path's cost: {', '.join(failed)}")
print("a fleet leaves the success path's cost unchanged (within 2%), and feature redis within 10% of the baseline")
PY
