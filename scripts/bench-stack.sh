#!/usr/bin/env bash
# Runs the five-layer stack benchmark (benches/stack.rs, one criterion run:
# per-attempt timeout + retry + breaker + bulkhead + rate limit, ours against
# tower-resilience's and seatbelt's, success path) and prints a Markdown
# table: each row's median time, its ratio to and overhead over the bare
# service, its heap allocations per call, then published numbers quoted as
# reference rows (not measured here). The table is written into
# docs/performance.md too (its <!-- stack --> block), and a paragraph of it
# into README.md's comparison (<!-- stack-summary -->).
#
#   scripts/bench-stack.sh               # run, then print and write
#   scripts/bench-stack.sh --no-run      # print and write from the last run
#   BENCH_ARGS="--measurement-time 10" scripts/bench-stack.sh
#
# About a minute and a half (a minute of it building). Run it on a quiet
# machine: one benchmark process at a time, nothing else building.
set -euo pipefail
cd "$(dirname "$0")/.."

target_dir="${CARGO_TARGET_DIR:-target}"
[[ $target_dir == /* ]] || target_dir="$PWD/$target_dir"
command="cargo bench -p stormproof-benches --bench stack --features stack -- --noplot${BENCH_ARGS:+ $BENCH_ARGS}"
run=1
for arg in "$@"; do
  case "$arg" in
    --no-run) run=0 ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done
if [[ $run == 1 ]]; then
  echo "== $command"
  load="$(cut -d' ' -f1-3 /proc/loadavg)"
  mkdir -p "$target_dir/criterion/stack"
  # The benchmark counts each row's allocations per call and writes them here.
  # shellcheck disable=SC2086
  STACK_ALLOCS_OUT="$target_dir/criterion/stack/allocations.json" \
    cargo bench -p stormproof-benches --bench stack --features stack -- --noplot ${BENCH_ARGS:-}
  echo "$load" > "$target_dir/criterion/stack/load-before-run"
  echo
fi

summary="$target_dir/criterion/stack/summary.md"
table="$(CRITERION_DIR="$target_dir/criterion" SUMMARY_OUT="$summary" python3 - <<'PY'
import json, os

root = os.path.join(os.environ["CRITERION_DIR"], "stack")

def median(name):
    with open(os.path.join(root, name, "new", "estimates.json")) as f:
        return json.load(f)["median"]["point_estimate"]  # ns per call

def read(name, default):
    try:
        with open(os.path.join(root, name)) as f:
            return f.read().strip()
    except OSError:
        return default

allocations = json.loads(read("allocations.json", "{}"))
rows = [
    ("bare `service_fn` (baseline)", "bare"),
    ("stormproof tower layer (`ResilientLayer::cloning`), 5 guards", "stormproof_tower"),
    ("stormproof `#[resilient]`, 5 guards", "stormproof_attribute"),
    ("tower-resilience 0.13, 5 layers", "tower_resilience"),
    ("seatbelt 0.11, 3 layers (no bulkhead, no rate limiter)", "seatbelt_3_layers"),
    ("stormproof tower layer, seatbelt's 3 layers (retry, breaker, attempt timeout)", "stormproof_tower_3_layers"),
    ("stormproof `#[resilient]`, seatbelt's 3 layers", "stormproof_attribute_3_layers"),
]
bare = median("bare")
lines = [
    "| row | median | ratio to bare | overhead over bare | allocations per call |",
    "|---|---:|---:|---:|---:|",
]
for label, name in rows:
    t = median(name)
    ratio = "1.0x" if name == "bare" else f"{t / bare:.1f}x"
    overhead = "" if name == "bare" else f"+{t - bare:,.0f} ns"
    allocs = allocations.get(name)
    allocs = "?" if allocs is None else f"{allocs:g}"
    lines.append(f"| {label} | {t:,.1f} ns | {ratio} | {overhead} | {allocs} |")
# Quoted, not measured: other machines, other runtimes, other pipelines.
lines += [
    "| *reference, quoted, not measured:* | | | | |",
    "| Polly v8 five-strategy pipeline (timeout, rate limiter, retry, circuit breaker, timeout; .NET, BenchmarkDotNet mean, 40 B allocated), published [1] | 2,089 ns (2.09 µs) | | | |",
    "| tower-resilience README, happy-path overhead per layer [2]: retry ~80-100, time limiter ~107, rate limiter ~124, bulkhead ~162, circuit breaker (closed) ~298 ns; their sum | ~771-791 ns | | | |",
]
print("\n".join(lines))
print()
print("[1] https://www.pollydocs.org/advanced/performance.html (\"Execute pipeline v8\": 2.089 us mean, 40 B allocated)")
print("[2] tower-resilience 0.13.0 README, \"Benchmarks\" (each layer measured alone by its `happy_path_overhead` bench; the sum is ours)")
print(f"Measured: criterion median; nproc {os.cpu_count()}, load average before the run: {read('load-before-run', 'unknown')}")

m = {name: median(name) for name in [
    "stormproof_tower", "stormproof_attribute", "tower_resilience",
    "seatbelt_3_layers", "stormproof_tower_3_layers", "stormproof_attribute_3_layers"]}
with open(os.environ["SUMMARY_OUT"], "w") as out:
    print(
        "A stack of per-attempt timeout, retry, breaker, bulkhead and rate limit around the same "
        "in-process service, success path, in one criterion run (`scripts/bench-stack.sh`; "
        "[docs/performance.md](docs/performance.md) has the table and allocations): "
        f"this library's tower layer takes {m['stormproof_tower']:,.1f} ns a call and the attribute "
        f"{m['stormproof_attribute']:,.1f} ns, against {m['tower_resilience']:,.1f} ns for "
        "tower-resilience's five layers. Seatbelt has three of them (retry, breaker, timeout): "
        f"{m['seatbelt_3_layers']:,.1f} ns, against {m['stormproof_tower_3_layers']:,.1f} ns through "
        f"our tower layer ({m['stormproof_tower_3_layers'] / m['seatbelt_3_layers']:.2f} of it) and "
        f"{m['stormproof_attribute_3_layers']:,.1f} ns through the attribute with the same three.",
        file=out,
    )
PY
)"
echo "$table"
echo "$table" | scripts/readme-block.sh stack
echo "wrote docs/performance.md's stack block"

# The README's comparison: the same run, in one paragraph (written by the
# script above).
scripts/readme-block.sh stack-summary < "$summary"
echo "wrote README.md's stack summary"
