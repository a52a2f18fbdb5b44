#!/usr/bin/env bash
# Runs the tower layer's benchmark (benches/tower.rs, one criterion run) and
# prints each request's median time and its ratio to the bare service, then
# the instructions of one request (benches/instructions.rs, feature tower); with
# --write, also writes that summary into docs/http.md between the
# <!-- tower-bench --> markers.
#
#   scripts/bench-tower.sh                 # run, then print
#   scripts/bench-tower.sh --write         # run, print, and write docs/http.md
#   scripts/bench-tower.sh --no-run        # print (and --write) from the last run
#   BENCH_ARGS="--measurement-time 5" scripts/bench-tower.sh
#
# Run it on a quiet machine: one benchmark process at a time, nothing else building.
set -euo pipefail
cd "$(dirname "$0")/.."

target_dir="${CARGO_TARGET_DIR:-target}"
command="cargo bench -p stormproof-benches --bench tower --features tower -- --noplot${BENCH_ARGS:+ $BENCH_ARGS}"
run=1
write=0
for arg in "$@"; do
  case "$arg" in
    --no-run) run=0 ;;
    --write) write=1 ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done
if [[ $run == 1 ]]; then
  echo "== $command"
  load="$(cut -d' ' -f1-3 /proc/loadavg)"
  # shellcheck disable=SC2086
  cargo bench -p stormproof-benches --bench tower --features tower -- --noplot ${BENCH_ARGS:-}
  echo "$load" > "$target_dir/criterion/.tower-load-before-run"
  # Instruction counts of the same success path (benches/instructions.rs,
  # feature tower): the same on every run, however busy the machine.
  INSTRUCTIONS_FEATURES=tower INSTRUCTIONS_OUT="$target_dir/instructions-tower.json" \
    scripts/instructions.sh policy_run tower_bare_cloning tower_cloning tower_bare_http tower_http
fi

CRITERION_DIR="$target_dir/criterion" INSTRUCTIONS="$target_dir/instructions-tower.json" COMMAND="$command" WRITE="$write" python3 - <<'PY'
import json, os, re

root = os.environ["CRITERION_DIR"]

def median(name):
    with open(os.path.join(root, name, "new", "estimates.json")) as f:
        return json.load(f)["median"]["point_estimate"]  # ns per request

rows = [
    ("bare service (HTTP)", "tower_bare", "tower_bare"),
    ("ResilientLayer::new, GET", "tower_layer_get", "tower_bare"),
    ("  + named breaker and budget", "tower_layer_get_breaker_budget", "tower_bare"),
    ("  POST without a key (1 attempt)", "tower_layer_post_no_key", "tower_bare"),
    ("bare service (u64 requests)", "tower_bare_cloning", "tower_bare_cloning"),
    ("ResilientLayer::cloning", "tower_cloning", "tower_bare_cloning"),
]
try:
    with open(os.path.join(root, ".tower-load-before-run")) as f:
        load = f.read().strip()
except OSError:
    load = "unknown"
lines = [f"{'per request':<34} {'median':>10} {'overhead':>10} {'ratio':>7}"]
for label, name, base in rows:
    t, b = median(name), median(base)
    overhead = "" if name == base else f"+{t - b:,.0f} ns"
    ratio = "" if name == base else f"{t / b:.1f}x"
    lines.append(f"{label:<34} {t:>7,.0f} ns {overhead:>10} {ratio:>7}".rstrip())
lines.append(f"(nproc {os.cpu_count()}, load average before the run: {load})")
with open(os.environ["INSTRUCTIONS"]) as f:
    counts = {row: r["per_call"] for row, r in json.load(f).items()}
lines.append("")
lines.append(f"{'instructions per request':<34} {'count':>10} {'overhead':>10}")
for label, name, base in [
    ("bare service (HTTP)", "tower_bare_http", None),
    ("ResilientLayer::new, GET", "tower_http", "tower_bare_http"),
    ("bare service (u64 requests)", "tower_bare_cloning", None),
    ("ResilientLayer::cloning", "tower_cloning", "tower_bare_cloning"),
    ("Policy::run, for comparison", "policy_run", None),
]:
    overhead = f"+{counts[name] - counts[base]:,.0f}" if base else ""
    lines.append(f"{label:<34} {counts[name]:>10,.0f} {overhead:>10}".rstrip())
lines.append("(all with a named breaker and budget; scripts/instructions.sh, callgrind)")
summary = "\n".join(lines)
print(summary)

if os.environ["WRITE"] == "1":
    block = f"<!-- tower-bench -->\n```text\n{summary}\n```\n<!-- /tower-bench -->"
    # The block lives in the guide's HTTP page.
    page = "docs/http.md"
    with open(page) as f:
        readme = f.read()
    new, n = re.subn(r"<!-- tower-bench -->.*?<!-- /tower-bench -->", lambda _: block, readme, flags=re.S)
    if n != 1:
        raise SystemExit(f"{page} needs one <!-- tower-bench --> ... <!-- /tower-bench --> block")
    with open(page, "w") as f:
        f.write(new)
    print(f"{page} updated")
PY
