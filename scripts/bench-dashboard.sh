#!/usr/bin/env bash
# Runs benches/dashboard.rs (the same call with and without an admin
# router's sampler watching it) and writes the two medians into docs/dashboard.md,
# between the `dashboard-bench` markers.
#
#   scripts/bench-dashboard.sh             # run, then write the page's lines
#   scripts/bench-dashboard.sh --no-run    # only rewrite them from the last run
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir="${CARGO_TARGET_DIR:-target}"
if [[ "${1:-}" != "--no-run" ]]; then
  load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
  cargo bench -p stormproof-benches --features admin --bench dashboard -- --noplot
  echo "$load_before" > "$target_dir/criterion/dashboard/.load-before-run"
fi
CRITERION_DIR="$target_dir/criterion" python3 - <<'PY' | scripts/readme-block.sh dashboard-bench
import json, os
root = os.environ["CRITERION_DIR"]
def median(bench_id):
    with open(os.path.join(root, bench_id, "new", "estimates.json")) as f:
        return json.load(f)["median"]["point_estimate"]
try:
    with open(os.path.join(root, "dashboard", ".load-before-run")) as f:
        load = f.read().strip()
except OSError:
    load = "not recorded"
alone, watched = median("dashboard/breaker_budget"), median("dashboard/breaker_budget_watched")
diff = watched - alone
print(f"`#[resilient]` with a breaker and a budget, its `poll` out of line: **{alone:.1f} ns** a call with no")
print(f"dashboard, **{watched:.1f} ns** with an admin router's sampler watching the same breaker")
print(f"({diff:+.1f} ns, {100 * diff / alone:+.1f}%). One criterion run of `benches/dashboard.rs` on the 2-core")
print(f"development VM (load average {load} before it: compare the two lines with each other, not with")
print("BENCHMARKS.md), written here by `scripts/bench-dashboard.sh`.")
PY
echo "docs/dashboard.md: dashboard benchmark lines written"
