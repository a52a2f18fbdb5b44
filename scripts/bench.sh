#!/usr/bin/env bash
# Runs both benchmarks of the same functions, the wall times (criterion,
# benches/overhead.rs) and the instruction counts (callgrind through gungraun,
# benches/instructions.rs, by scripts/instructions.sh), and regenerates
# BENCHMARKS.md from what they wrote (criterion's estimates and
# target/instructions.json).
#
#   scripts/bench.sh                 # run both, then write BENCHMARKS.md
#   scripts/bench.sh --no-run        # only rewrite BENCHMARKS.md from the last run
#   BENCH_ARGS="--measurement-time 5" scripts/bench.sh   # extra criterion arguments
#
# Run it on a quiet machine: one benchmark process at a time, nothing else
# building. It takes about three minutes after the build (the instruction
# counts do not mind a busy machine; the wall times do).
set -euo pipefail
cd "$(dirname "$0")/.."

target_dir="${CARGO_TARGET_DIR:-target}"
command="cargo bench -p stormproof-benches --bench overhead -- --noplot${BENCH_ARGS:+ $BENCH_ARGS}"
if [[ "${1:-}" != "--no-run" ]]; then
  echo "== $command"
  load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
  # shellcheck disable=SC2086
  cargo bench -p stormproof-benches --bench overhead -- --noplot ${BENCH_ARGS:-}
  echo "$load_before" > "$target_dir/criterion/.load-before-run"
  scripts/instructions.sh
  # The same call built with feature redis, in one binary without a fleet
  # and with its guards shared by one: the cost of fleet sync on the success
  # path, free of what the compiler made of the larger build.
  STORMPROOF_BENCH_FLEET=off INSTRUCTIONS_FEATURES=redis \
    INSTRUCTIONS_OUT="$target_dir/instructions-fleet-alone.json" scripts/instructions.sh breaker_budget_call
  INSTRUCTIONS_FEATURES=redis INSTRUCTIONS_OUT="$target_dir/instructions-fleet.json" \
    scripts/instructions.sh breaker_budget_call
fi

echo "== zero-allocation test (tests/alloc.rs)"
if cargo test -q --test alloc >/dev/null 2>&1; then alloc="pass"; else alloc="FAIL"; fi

summary="$target_dir/readme-performance.md"
CRITERION_DIR="$target_dir/criterion" INSTRUCTIONS="$target_dir/instructions.json" \
  INSTRUCTIONS_FLEET="$target_dir/instructions-fleet.json" \
  INSTRUCTIONS_FLEET_ALONE="$target_dir/instructions-fleet-alone.json" COMMAND="$command" \
  ALLOC="$alloc" SUMMARY="$summary" python3 - <<'PY'
import json, os, platform, re, subprocess

root = os.environ["CRITERION_DIR"]
with open(os.environ["INSTRUCTIONS"]) as f:
    ir = json.load(f)  # row -> {"per_call": instructions per successful call, ...}
with open(os.environ["INSTRUCTIONS_FLEET"]) as f:
    ir_fleet = json.load(f)  # the same, built with feature redis and the guards shared by a fleet
with open(os.environ["INSTRUCTIONS_FLEET_ALONE"]) as f:
    ir_fleet_alone = json.load(f)  # the same binary without a fleet

def median(bench_id):
    path = os.path.join(root, bench_id, "new", "estimates.json")
    with open(path) as f:
        return json.load(f)["median"]["point_estimate"]  # ns per iteration

def sh(*args):
    try:
        return subprocess.run(args, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"

cpu = "unknown"
with open("/proc/cpuinfo") as f:
    for line in f:
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
try:
    with open(os.path.join(root, ".load-before-run")) as f:
        load = f.read().strip()
except OSError:
    load = "not recorded"

# (id, line in the table, what the ratio means)
rows = [
    ("success/bare", "bare `async fn` returning `Ok` (baseline)", "1.00 by definition"),
    ("success/floor", "the floor: `bare`'s body wrapped by hand in the plain-call checks and the nesting mark", "what any wrapper keeping the contract must do (`shared::floor`)"),
    ("success/attribute_defaults", "`#[resilient]`, defaults", "the attribute itself: the plain-call checks, the nesting context, the first attempt's own future"),
    ("success/floor_budgeted", "the floor with a budget: its public calls added by hand", "what any wrapper keeping the contract must do with a budget (`shared::floor_budgeted`)"),
    ("success/budget_alone", "`#[resilient]` + a named budget alone (`breaker = \"none\"`)", "what a budget costs; the defaults (their own breaker and budget) are held to breaker + budget (issue 45)"),
    ("success/floor_guarded", "the floor with a breaker and a budget: their public calls added by hand", "what any wrapper keeping the contract must do with these guards (`shared::floor_guarded`)"),
    ("success/breaker_budget", "`#[resilient]` + named breaker + budget", "the common production setup: the targets below"),
    ("success/breaker_budget_overridden", "the same, with a configuration file's override of its retries in force", "looked up only if the first attempt fails (without an override: a relaxed load, in every line)"),
    ("success/breaker_budget_overridden_deadline", "the same, with an override that sets a deadline", "the registry's settings looked up as every call starts, and the deadline armed"),
    ("success/breaker_budget_deadline", "breaker + budget + `deadline_ms`", "adds a clock read; the timer is armed only if the attempt waits, the deadline's state built only if it fails"),
    ("success/breaker_budget_keyed", "breaker + budget + `idempotent = false, key = order_id`", "adds the key made from the parameter (`Display`, into an `Arc<str>`) and carried into the attempt"),
    ("success/breaker_per_key", "a breaker per key (`per = tenant`, the tenant's breaker held) + budget, one tenant", "adds the key's text, one lock, one hash lookup and a clock read (the other guards borrowed)"),
    ("success/breaker_per_key_64_tenants", "the same, 64 tenants in turn", "the same lookup among 64 keys, each call's another than the call before's"),
    ("success/breaker_budget_out_of_line", "the same, its `poll` not inlined into the caller", "adds moving a 32-byte `Result` through memory (see notes)"),
    ("success/bare_small_error", "bare call, one-word error type", "baseline for the next line"),
    ("success/breaker_budget_small_error_out_of_line", "breaker + budget, not inlined, one-word error type", "the same with a `Result` that fits in registers"),
    ("success/breaker_budget_bulkhead", "breaker + budget + bulkhead", "adds a place taken from the bulkhead's pool and given back (a CAS each, no lock)"),
    ("success/breaker_budget_bulkhead_timeout", "breaker + budget + bulkhead + `attempt_timeout_ms`", "no clock read unless the attempt waits: its timeout counts from its first wait, and the timer is armed then"),
    ("success/breaker_budget_hedge", "breaker + budget + `hedge_after_ms`, answered before any hedge", "the hedging loop: a clock read, and the set of attempts, the attempt and the hedge's timer boxed"),
    ("success/breaker_budget_throttle", "breaker + budget + adaptive throttle", "a clock read and a read of the window as the attempt is admitted (quietly, as a plain call's, while it refuses nothing), a clock read and an atomic add as it is answered"),
    ("success/breaker_budget_rate_limit", "breaker + budget + rate limit with turns to spare", "a turn taken from the limiter (a clock read and a CAS)"),
    ("success/policy_run", "`Policy::run` + breaker + budget, calling the bare fn", "the same guards through the builder API instead of the attribute"),
    ("success/policy_run_timed", "`Policy::run` + breaker + budget + attempt timeout + deadline", "the first attempt raced with one timer, armed only if it waits"),
    ("success/policy_run_keyed", "`Policy::run_with_key` + breaker + budget, calling the bare fn", "the same with an idempotency key"),
    ("success/backon_retry", "backon 1.x `retry`, same closure, succeeding", "a retry-only wrapper (no breaker, no budget)"),
    ("success/failsafe_breaker", "failsafe 1.3 circuit breaker around the call", "a breaker-only wrapper"),
    ("success/our_breaker", "our breaker alone: `try_acquire` + call + `record(Success)`", "the breaker's closed-state fast path"),
    ("retry/fail_once_then_succeed", "breaker + budget, fails once then succeeds, zero backoff", "one retry, end to end (below)"),
    ("registry/lookup_by_name", "`Registry::breaker(name)` + acquire + record", "looking the breaker up on every call"),
    ("registry/call_site_handle", "cached handle + acquire + record", "what the attribute does (handles cached per policy)"),
]

m = {bench_id: median(bench_id) for bench_id, _, _ in rows}
base = m["success/bare"]
small_base = m["success/bare_small_error"]
one = median("contention/threads_1")  # ns per call, one thread
two = median("contention/threads_2")  # ns per two calls, one on each thread
scaling = 2 * one / two
throttle_one = median("contention_throttle/threads_1")
throttle_two = median("contention_throttle/threads_2")
throttle_scaling = 2 * throttle_one / throttle_two

overhead = m["success/breaker_budget"] - base
overhead_out = m["success/breaker_budget_out_of_line"] - base
overhead_small = m["success/breaker_budget_small_error_out_of_line"] - small_base
retry_cost = m["retry/fail_once_then_succeed"] - m["success/breaker_budget"]

# (row of benches/instructions.rs, line in the table, the criterion line of the same function)
ir_rows = [
    ("bare_call", "bare `async fn` returning `Ok` (baseline)", "success/bare"),
    ("floor_call", "the floor: the plain-call checks and the nesting mark, by hand", "success/floor"),
    ("attribute_defaults", "`#[resilient]`, defaults", "success/attribute_defaults"),
    ("floor_budgeted_call", "the floor with a budget, by hand", "success/floor_budgeted"),
    ("budget_call", "`#[resilient]` + a named budget alone", "success/budget_alone"),
    ("floor_guarded_call", "the floor with a breaker and a budget, by hand", "success/floor_guarded"),
    ("breaker_budget_call", "`#[resilient]` + named breaker + budget", "success/breaker_budget"),
    ("breaker_budget_out_of_line_call", "the same, its `poll` not inlined into the caller", "success/breaker_budget_out_of_line"),
    ("bare_small_error_call", "bare call, one-word error type", "success/bare_small_error"),
    ("breaker_budget_small_error_out_of_line_call", "breaker + budget, not inlined, one-word error type", "success/breaker_budget_small_error_out_of_line"),
    ("breaker_budget_overridden", "the same, with a configuration file's override of its retries in force", "success/breaker_budget_overridden"),
    ("breaker_budget_overridden_deadline", "the same, with an override that sets a deadline", "success/breaker_budget_overridden_deadline"),
    ("breaker_budget_deadline", "breaker + budget + `deadline_ms`", "success/breaker_budget_deadline"),
    ("breaker_budget_keyed", "breaker + budget + `idempotent = false, key = order_id`", "success/breaker_budget_keyed"),
    ("breaker_per_key_call", "a breaker per key (`per = tenant`) + budget, one tenant", "success/breaker_per_key"),
    ("breaker_per_key_64_tenants_call", "the same, 64 tenants in turn", "success/breaker_per_key_64_tenants"),
    ("breaker_budget_bulkhead", "breaker + budget + bulkhead", "success/breaker_budget_bulkhead"),
    ("breaker_budget_bulkhead_timeout", "breaker + budget + bulkhead + `attempt_timeout_ms`", "success/breaker_budget_bulkhead_timeout"),
    ("breaker_budget_hedge", "breaker + budget + `hedge_after_ms`, answered before any hedge", "success/breaker_budget_hedge"),
    ("breaker_budget_throttle", "breaker + budget + adaptive throttle", "success/breaker_budget_throttle"),
    ("breaker_budget_rate_limit", "breaker + budget + rate limit with turns to spare", "success/breaker_budget_rate_limit"),
    ("policy_run", "`Policy::run` + breaker + budget, calling the bare fn", "success/policy_run"),
    ("policy_run_timed", "`Policy::run` + breaker + budget + attempt timeout + deadline", "success/policy_run_timed"),
    ("policy_run_keyed", "`Policy::run_with_key` + breaker + budget, calling the bare fn", "success/policy_run_keyed"),
    ("backon_retry", "backon 1.x `retry`, same closure, succeeding", "success/backon_retry"),
    ("failsafe_breaker", "failsafe 1.3 circuit breaker around the call", "success/failsafe_breaker"),
    ("fail_once_then_succeed", "breaker + budget, fails once then succeeds, zero backoff", "retry/fail_once_then_succeed"),
]
missing = [row for row, _, _ in ir_rows if row not in ir]
if missing:
    raise SystemExit(f"{os.environ['INSTRUCTIONS']} lacks {missing}: run scripts/instructions.sh (all rows)")
ir_base = ir["bare_call"]["per_call"]
def ir_over(row):
    # The one-word-error lines against the bare call with the same error type.
    base = ir["bare_small_error_call"]["per_call"] if "small_error" in row else ir_base
    return ir[row]["per_call"] - base
with open("benches/instructions.rs") as f:
    ir_n = int(re.search(r"^const N: u64 = ([0-9_]+);$", f.read(), re.M).group(1).replace("_", ""))
gungraun = sh("gungraun-runner", "--version")
valgrind = sh("valgrind", "--version")

def fmt(ns):
    return f"{ns:.1f} ns" if ns < 1000 else f"{ns / 1000:.2f} µs"

lines = []
out = lines.append
out("# Benchmarks")
out("")
out("Generated by `scripts/bench.sh` from one run of both benchmarks of the same functions: criterion's")
out("estimates (`target/criterion/*/new/estimates.json`) and the instruction counts of")
out("`scripts/instructions.sh` (`target/instructions.json`); do not edit by hand. The benchmark code is")
out("`benches/overhead.rs` (wall time) and `benches/instructions.rs` (instructions); the functions both")
out("measure are in `benches/shared/mod.rs`.")
out("")
out("## Machine and command")
out("")
out(f"- CPU: {cpu}, `nproc` = {sh('nproc')}")
out(f"- {sh('rustc', '--version')}, {platform.system()} {platform.release()}")
out(f"- load average before the run: {load}")
out(f"- command: `{os.environ['COMMAND']}` (one criterion run: every line below was measured in it)")
out(f"- instructions: `scripts/instructions.sh` ({gungraun}, {valgrind}), in the same run of `scripts/bench.sh`")
out("")
out("## Wall time (criterion)")
out("")
out("Medians per call. The ratio is against the bare call measured in the same run")
out("(`bare_small_error` for the `small_error` lines); *overhead* is the difference. The")
out("registry lines make no call (they only look up, admit and record), so only their ratio to")
out("each other means much.")
out("")
out("| benchmark | median | ratio | overhead | what it measures |")
out("|---|---:|---:|---:|---|")
for bench_id, label, meaning in rows:
    b = small_base if "small_error" in bench_id else base
    # The registry lines make no call: their difference to the call means nothing.
    extra = "—" if bench_id.startswith("registry/") else fmt(m[bench_id] - b)
    out(f"| {label} (`{bench_id}`) | {fmt(m[bench_id])} | {m[bench_id] / b:.1f}x | {extra} | {meaning} |")
out("")
out(f"- **One retry decision** (`retry/fail_once_then_succeed` − `success/breaker_budget`): **{fmt(retry_cost)}**.")
out("  Measured end to end, not by driving the pieces: an attribute with `base_ms = 0, cap_ms = 0` whose")
out("  first attempt fails (transient) and whose retry succeeds, minus the plain success path. It covers")
out("  the failed attempt, classification, the breaker recording a failure (its mutex and a clock read:")
out("  the failure window needs the time), the backoff computation (here over `[0, 0]`, so nothing is")
out("  drawn; a real wait draws once from the thread's generator), the budget withdrawal (the ratio")
out("  budget's window under its lock, and a clock read), and the second attempt's success taking")
out("  the breaker's slow path (there is a failure to clear) and refilling the budget. No sleep: a zero")
out("  wait skips the timer.")
out(f"- **Registry lookup by name vs the call site's handle**: {fmt(m['registry/lookup_by_name'])} vs")
out(f"  {fmt(m['registry/call_site_handle'])} ({m['registry/lookup_by_name'] / m['registry/call_site_handle']:.0f}x): a read lock, a")
out("  SipHash of the name and an `Arc` clone per call, which is why the attribute resolves handles once.")
out(f"- **Contention**: one shared breaker and budget, success path: 1 thread {1000 / one:.1f} M calls/s,")
out(f"  2 threads {2000 / two:.1f} M calls/s: **{scaling:.2f}x**. The same with an adaptive throttle too (each")
out(f"  thread adds to its own stripe of the window and reads the sums of the tenths before the current one,")
out(f"  kept once per tenth): 1 thread {1000 / throttle_one:.1f} M calls/s, 2 threads")
out(f"  {2000 / throttle_two:.1f} M calls/s: **{throttle_scaling:.2f}x**.")
out("")
out("## Instructions (callgrind)")
out("")
out(f"Instructions per successful call: each function is called {ir_n:,} and {2 * ir_n:,} times in a row, each")
out(f"under callgrind, and the difference of the two counts is divided by {ir_n:,}, so what a run pays once")
out("(entering `block_on`, the first call's lookup of its guards) cancels. *Over bare* is the difference to")
out("the bare call counted in the same run. The same binary gives the same counts on every run, whatever")
out("the machine's load, so these are the numbers to compare between versions; CI checks the rows of")
out("`benches/instructions.baseline` (`scripts/instructions-check.sh`: at most +10%).")
out("")
out("| call | instructions | over bare | ratio | the same function in criterion |")
out("|---|---:|---:|---:|---|")
for row, label, bench_id in ir_rows:
    per_call = ir[row]["per_call"]
    base = per_call - ir_over(row)
    out(f"| {label} (`{row}`) | {per_call:.1f} | {ir_over(row):.1f} | {per_call / base:.1f}x | `{bench_id}`: {fmt(m[bench_id])} |")
out("")
out(f"- **One retry decision** (`fail_once_then_succeed` − `breaker_budget_call`): "
    f"**{ir['fail_once_then_succeed']['per_call'] - ir['breaker_budget_call']['per_call']:.0f} instructions**.")
out("- Counted without cache simulation (`--cache-sim=no`): instructions only. failsafe's count moves by")
out("  a fraction of an instruction between runs (its clock reads); every other row is the same to the")
out("  instruction.")
out("")
out("## What each feature costs")
out("")
out("What a successful call pays for a feature it uses, in instructions over the call with a breaker and")
out("a budget alone (`breaker_budget_call`), from the table above and, for fleet sync, from the same call")
out("built with feature `redis`, measured in one binary with its breaker and budget shared by a fleet and")
out("without one (`STORMPROOF_BENCH_FLEET=off`), in the same run. A function that does not use a feature pays")
out("nothing for it: every row is built with all of them compiled in, and CI fails when a row rises more")
out("than 10% above its baseline (`scripts/instructions-check.sh`, which also measures every row built with")
out("feature `redis`, with a fleet and without one in the same binary, and fails if the fleet adds 2%).")
out("")
out("| feature | what the call adds | instructions |")
out("|---|---|---:|")
ir_bb_call = ir["breaker_budget_call"]["per_call"]
feature_rows = [
    ("configuration override of the retries in force", "nothing: it is looked up only if the first attempt fails", ir["breaker_budget_overridden"]["per_call"]),
    ("deadline", "a clock read (the timer armed only if the attempt waits)", ir["breaker_budget_deadline"]["per_call"]),
    ("idempotency key", "the key's text made once from the parameter, in one `Arc<str>` (one allocation), and carried into the attempt's context", ir["breaker_budget_keyed"]["per_call"]),
    ("configuration override setting a deadline", "the deadline's cost, and the global registry's override read per call (an `Arc` cloned from the function's own copy)", ir["breaker_budget_overridden_deadline"]["per_call"]),
    ("breaker per key, instead of one breaker", "the key's text (an integer's digits on the stack), a lock, a hash lookup and the clock read idle eviction needs", ir["breaker_per_key_call"]["per_call"]),
    ("breaker per key, 64 tenants in turn", "the same, among 64 keys", ir["breaker_per_key_64_tenants_call"]["per_call"]),
    ("bulkhead", "a place taken and given back", ir["breaker_budget_bulkhead"]["per_call"]),
    ("hedging (no hedge needed)", "the hedging loop around the attempt (three allocations: the set of attempts, the attempt, the hedge's timer)", ir["breaker_budget_hedge"]["per_call"]),
    ("adaptive throttle", "the admission draw and the answer's count", ir["breaker_budget_throttle"]["per_call"]),
    ("rate limit", "a turn", ir["breaker_budget_rate_limit"]["per_call"]),
]
for feature, what, per_call in feature_rows:
    out(f"| {feature} | {what} | {per_call - ir_bb_call:+.0f} |")
fleet_cost = ir_fleet["breaker_budget_call"]["per_call"] - ir_fleet_alone["breaker_budget_call"]["per_call"]
out(f"| fleet sync (feature `redis`, guards shared) | nothing: the store is written by a background task | {fleet_cost:+.0f} |")
timeout_cost = ir["breaker_budget_bulkhead_timeout"]["per_call"] - ir["breaker_budget_bulkhead"]["per_call"]
out(f"| attempt timeout | a clock read; the timer is armed only if the attempt waits (over the bulkhead row) | {timeout_cost:+.0f} |")
out("")
out("- **Dashboard counters**: the admin page reads counters the guards keep anyway; the only ones on")
out("  the success path are a breaker's call count and a ratio budget's first-attempt count, each a plain")
out("  load and store of this thread's own slot (no locked instruction: an uncontended `lock xadd` cost")
out("  about 7 ns a call on this machine). They are part of the `breaker_budget_call` row; a function")
out("  without a breaker or a budget pays neither.")
out("")
out("## Targets")
out("")
def verdict(ok):
    return "met" if ok else "**missed**"
out("| target | measured | |")
out("|---|---|---|")
out(f"| success path with breaker + budget ≤ bare + 20 ns | +{fmt(overhead)} | {verdict(overhead <= 20)} |")
out(f"| ... when the call's `poll` is not inlined (32-byte `Result`) | +{fmt(overhead_out)} | {verdict(overhead_out <= 20)} |")
out(f"| ... when the call's `poll` is not inlined (16-byte `Result`) | +{fmt(overhead_small)} | {verdict(overhead_small <= 20)} |")
out(f"| not inlined, a 32-byte `Result` no worse than a 16-byte one (wall time) | +{fmt(overhead_out)} vs +{fmt(overhead_small)} | {verdict(overhead_out <= overhead_small)} |")
ir_out, ir_small = ir_over("breaker_budget_out_of_line_call"), ir_over("breaker_budget_small_error_out_of_line_call")
out(f"| the same in instructions (the 32-byte `Result` is returned through memory) | {ir_out:.0f} vs {ir_small:.0f} | {verdict(ir_out <= ir_small)} |")
ir_bb, ir_backon, ir_defaults = ir_over("breaker_budget_call"), ir_over("backon_retry"), ir_over("attribute_defaults")
out(f"| instructions over bare, breaker + budget ≤ 1/3 of backon's | {ir_bb:.0f} vs {ir_backon:.0f} / 3 = {ir_backon / 3:.0f} | {verdict(ir_bb <= ir_backon / 3)} |")
ir_floor_guarded = ir_over("floor_guarded_call")
floor_vs_target = "the target is below the floor" if ir_floor_guarded > ir_backon / 3 else "the floor is within the target"
out(f"| ... the floor under it: a wrapper by hand keeping the contract, with these guards (`floor_guarded_call`) | {ir_floor_guarded:.0f} (breaker + budget: floor + {ir_bb - ir_floor_guarded:.0f}) | {floor_vs_target} |")
out(f"| instructions over bare, `#[resilient]` defaults ≤ 40 | {ir_defaults:.0f} | {verdict(ir_defaults <= 40)} |")
ir_floor = ir_over("floor_call")
floor_vs_target = "the target is below the floor" if ir_floor > 40 else "the floor is within the target"
out(f"| ... the floor under it: a wrapper by hand keeping the contract (`floor_call`) | {ir_floor:.0f} (defaults: floor + {ir_defaults - ir_floor:.0f}) | {floor_vs_target} |")
# The two instruction targets above are below the floor of the contract
# (DESIGN.md's nesting rule "on the same task", the override and DEBUG
# checks), which no wrapper keeping it can go under: issue 18 restated them
# as margins over the floor measured in the same run, the margins
# scripts/instructions-check.sh holds CI to.
out(f"| restated: instructions over bare, breaker + budget ≤ the floor with these guards + 20 | {ir_bb:.0f} vs {ir_floor_guarded:.0f} + 20 | {verdict(ir_bb - ir_floor_guarded <= 20)} |")
# Since issue 45 the defaults carry the operation's own breaker and budget:
# their floor is the floor with these guards, and what
# scripts/instructions-check.sh holds them to is that floor + 20 and a named
# breaker and budget.
out(f"| restated: instructions over bare, `#[resilient]` defaults (their own breaker and budget) ≤ the floor with these guards + 20 | {ir_defaults:.0f} vs {ir_floor_guarded:.0f} + 20 | {verdict(ir_defaults - ir_floor_guarded <= 20)} |")
out(f"| `#[resilient]` defaults cost no more than a named breaker and budget | {ir_defaults:.0f} vs {ir_bb:.0f} | {verdict(ir_defaults <= ir_bb)} |")
out(f"| cheaper than backon's success path | {fmt(m['success/breaker_budget'])} vs {fmt(m['success/backon_retry'])} | {verdict(m['success/breaker_budget'] < m['success/backon_retry'])} |")
out(f"| cheaper than failsafe's breaker | {fmt(m['success/breaker_budget'])} vs {fmt(m['success/failsafe_breaker'])} | {verdict(m['success/breaker_budget'] < m['success/failsafe_breaker'])} |")
out(f"| zero heap allocations per successful call (breaker + budget) | `tests/alloc.rs`: {os.environ['ALLOC']} | {verdict(os.environ['ALLOC'] == 'pass')} |")
out(f"| 2 threads ≥ 1.5x the throughput of 1 thread | {scaling:.2f}x | {verdict(scaling >= 1.5)} |")
out("")

out("- **The floor** (`floor_call`, `shared::floor`): `bare`'s body wrapped by hand in only what the")
out("  attribute's success path must do under its contract, however it is written: the tests that decide")
out("  a call is plain (no configuration override that sets a deadline or an attempt timeout, DEBUG off,")
out("  not inside another call's attempt)")
out("  and the nesting mark, set with tokio's id of the task for each poll of the body and put back after")
out("  (a call made inside the attempt is nested; a task polled inside it, such as a `LocalSet`'s, is not;")
out("  a suspended attempt marks nothing). No retry, no execution, no guards. What `defaults` costs above")
out("  it is the attribute's own structure (its retry loop, the execution it may build, the attempt's")
out("  wrapper). `floor_guarded_call` adds `breaker_budget`'s guards through their public calls (handles")
out("  cached once; the breaker asked, the ratio budget's first attempt counted; on success the permit")
out("  recorded and the budget refilled): what `breaker_budget` spends above it is that structure again,")
out("  and what it spends to look its guards up in the registry in effect (global or scoped).")
out("  It is a floor for a wrapper of an `async fn` body that may wait; it is not a physical limit.")
out("")
out("## How it is measured")
out("")
out("- Every async benchmark runs on one current-thread tokio runtime through criterion's `to_async`")
out("  (feature `async_tokio`): one `block_on` per sample, then the calls are awaited back to back,")
out("  so the executor adds nothing per call; a `block_on` per call would add ~50-100 ns to every")
out("  line and flatten the ratios. The synchronous breaker and registry lines run in the same loop.")
out("- Each call is used as a caller would: `call.await.expect(..)`, then criterion `black_box`es the")
out("  value. Inputs go through `black_box` too. The same for the baseline and every wrapper.")
out("- Every benchmarked function has one call site, except the `_out_of_line` ones, which have two.")
out("  With one call site the compiler inlines the annotated function's `poll` into the benchmark loop;")
out("  with two it keeps it out of line, as it does for most functions in a real program. Both are shown")
out("  because they differ by more than the target. (backon's `Retry::poll` is out of line even here,")
out("  and spends about half its time copying its state with `memmove`; failsafe's future is inlined and")
out("  its cost is two mutex round trips and clock reads per call.)")
out("- The guards are declared up front in the global registry (`bench-breaker`, `bench-budget` with a")
out("  large capacity, `bench-bulkhead`); the breaker stays closed and the budget full on the success path.")
out("- Criterion: 1 s warm-up, 3 s measurement, 100 samples per line; medians are reported. On a shared")
out("  2-core VM, expect ±1-2 ns between runs on the ~20 ns lines.")
out("- Instructions: the same functions and the same loop (`benches/instructions.rs`): the calls awaited")
out("  back to back in one `block_on`, each used as above, each function with one call site. The runtime")
out("  is built in gungraun's setup, which callgrind does not count, and dropped after the count.")
out("- The benchmarks build with cargo's release defaults (16 codegen units, no LTO), as users build, so")
out("  what the compiler inlines across units can move when unrelated code changes: a row may move by a")
out("  few percent for a change that does not touch its path (the rate-limit row went from 727 to 772 for a")
out("  change to the plain path alone, and stayed at 765 before and after it built with one codegen unit).")
out("")
out("## Notes")
out("")
out(f"- **Not inlined**: +{fmt(overhead_out)} with the 32-byte `Result<u64, BenchError>` (the error embeds a")
out(f"  `Rejection`), +{fmt(overhead_small)} with a one-word error type, against +{fmt(overhead)} inlined. The")
out("  32-byte `Result` is returned through memory, written field by field and then read as a block")
out(f"  (the instruction counts above: {ir_out:.0f} vs {ir_small:.0f} over bare), which can stall store forwarding;")
out("  the one-word one comes back in registers. Any wrapper whose `poll` is out of line pays this for a")
out("  large `Result`; boxing a big error type avoids it. The rest of the difference to the inlined line")
out("  is the call itself and the future's state kept in memory across it.")
out("- **Bulkhead**: while nobody waits for a place, places are taken from and given back to a")
out("  lock-free pool (a CAS each); tokio's fair `Semaphore`, which gives a permit back under its")
out("  waiter list's mutex, holds them only while somebody waits (`bulkhead/places.rs`). A call with a")
out("  bulkhead and a place free is plain: its first attempt runs without the step machine; only a")
out("  full bulkhead's wait goes through the general `attempt_with` state machine.")
out("- **Timeout and deadline**: a function with an attempt timeout or a deadline and nothing else a")
out("  plain call cannot have starts plain: its first attempt reads the clock as it starts and arms one")
out("  timer for the earlier of the two (`call/timed.rs`) only if it has to wait, so one answered at once")
out("  makes no timer entry; the call's deadline state is built only if that attempt fails. After a")
out("  failure, the earlier of the attempt's timeout and the call's deadline is armed in the timer slot")
out("  the backoff uses (an attempt that runs is not backing off): a timer entry per attempt, registered")
out("  with the driver only if the attempt has to wait, and a clock read per attempt. The")
out("  benchmarks are a package of their own (`benches/Cargo.toml`), built without tokio's `test-util`")
out("  (which the library's tests enable, and under which `Instant::now()` also takes the runtime clock's")
out("  mutex), as users build it.")
out("- **Throttle and rate limit**: both take the direct path. A throttle never waits; it costs its own")
out("  work, with no lock: as the attempt is admitted, a clock read and the window's sums (the current")
out("  tenth's slice and the nine before it, summed once per tenth); as it is answered, a clock read (the")
out("  answer's time picks the slice it counts in) and one atomic add. A rate limit with a turn free costs a")
out("  clock read and a CAS; a turn that must be waited for is waited for out of line, boxed. With a")
out("  bulkhead too, a rate-limited call takes the general `attempt_with` state machine, which asks for")
out("  the place only once it has its turn (the direct path holds its place from the attempt's making).")
out("- **Retry**: the failure is recorded under the breaker's mutex with a clock read (the failure")
out("  window needs the time); successes and permanent errors of a closed breaker, and every")
out("  admission, read one atomic word and take no lock.")
out("- **Zero allocations** is proved by `tests/alloc.rs` (a counting global allocator, counting on the")
out("  test's own thread): 1,000 successful calls through the attribute with breaker and budget after")
out("  warm-up allocate nothing; the same for defaults and for `Policy::run`.")
out("")

# The storm on real sockets is another benchmark's (scripts/bench-storm.sh):
# its block is kept as it is.
storm = "<!-- storm-sockets -->\n(run `scripts/bench-storm.sh`)\n<!-- /storm-sockets -->"
try:
    old = open("BENCHMARKS.md").read()
    start, end = old.index("<!-- storm-sockets -->"), old.index("<!-- /storm-sockets -->")
    storm = old[start:end] + "<!-- /storm-sockets -->"
except (OSError, ValueError):
    pass
out("## The storm on real sockets")
out("")
out(storm)
out("")

with open("BENCHMARKS.md", "w") as f:
    f.write("\n".join(lines))
print("wrote BENCHMARKS.md")

# The README's summary of the same run (its <!-- performance --> block).
ir_bare = ir["bare_call"]["per_call"]
summary = [
    f"From one run of `scripts/bench.sh` on the 2-core development VM (load average {load} before it;",
    "[BENCHMARKS.md](BENCHMARKS.md) has every line): a successful call through `#[resilient]` with a",
    f"named breaker and budget takes {fmt(m['success/breaker_budget'])} against {fmt(m['success/bare'])} for the bare `async fn`",
    f"(+{fmt(overhead)}, no lock, no clock read, no timer, zero allocations); backon's retry takes",
    f"{fmt(m['success/backon_retry'])} and failsafe's breaker {fmt(m['success/failsafe_breaker'])}. In instructions, which do not depend on the",
    f"machine's load: {ir['breaker_budget_call']['per_call']:.0f} per call against {ir_bare:.0f} bare, {ir['backon_retry']['per_call']:.0f} for backon and",
    f"{ir['failsafe_breaker']['per_call']:.0f} for failsafe. 2 threads on one shared breaker and budget give {scaling:.2f}x the",
    "throughput of one. A breaker per key (`per = tenant`, issue 44's guards per key) finds its",
    f"tenant's breaker with one lock, one hash lookup and a clock read: {fmt(m['success/breaker_per_key'])}",
    f"({ir['breaker_per_key_call']['per_call']:.0f} instructions).",
]
with open(os.environ["SUMMARY"], "w") as f:
    f.write("\n".join(summary) + "\n")
PY
scripts/readme-block.sh performance < "$summary"
echo "wrote the README's performance block"
