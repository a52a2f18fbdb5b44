#!/usr/bin/env bash
# Counts the instructions of one successful call through each wrapper
# (benches/instructions.rs, under callgrind through gungraun) and writes them
# to $CARGO_TARGET_DIR/instructions.json (target/ by default), then prints
# them as a table.
#
#   scripts/instructions.sh                   # every row
#   scripts/instructions.sh bare_call policy_run   # only these rows (function names
#                                                  # in benches/instructions.rs)
#
# Installs what it needs when missing: valgrind (Debian's package, through
# apt-get) and gungraun-runner at the version of the gungraun library in
# Cargo.lock (cargo install --locked). Used by scripts/bench.sh (for
# BENCHMARKS.md) and scripts/instructions-check.sh (CI).
set -euo pipefail
cd "$(dirname "$0")/.."

target_dir="${CARGO_TARGET_DIR:-target}"
# INSTRUCTIONS_FEATURES: features of stormproof-benches to build with (e.g. redis);
# INSTRUCTIONS_OUT: where the counts go.
features="${INSTRUCTIONS_FEATURES:-}"
out="${INSTRUCTIONS_OUT:-$target_dir/instructions.json}"

if ! command -v valgrind >/dev/null; then
  echo "== installing valgrind (Debian's package)"
  sudo=""
  if [[ "$(id -u)" != 0 ]]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq valgrind >/dev/null
fi

# The runner must be the library's exact version: they talk a private protocol.
version="$(awk '$0 == "name = \"gungraun\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)"
if [[ -z "$version" ]]; then
  echo "gungraun is not in Cargo.lock: run 'cargo generate-lockfile' first" >&2
  exit 1
fi
if [[ "$(gungraun-runner --version 2>/dev/null || true)" != *" $version" ]]; then
  echo "== installing gungraun-runner $version"
  # --debug: the runner only starts valgrind and reads its small output
  # files, so an optimised build buys nothing and costs CI about twice the
  # compile time (3 min instead of 5 of CPU time on this project's machine).
  cargo install --locked --quiet --debug gungraun-runner --version "$version"
fi

# Each row is run with N and with 2N calls (bench ids `n` and `twice_n`).
filters=("$@")
if (( ${#filters[@]} == 0 )); then filters=("*"); fi

summaries="$(mktemp)"
trap 'rm -f "$summaries"' EXIT
for row in "${filters[@]}"; do
  # Any group: the rows of feature tower are in a group of their own.
  echo "== cargo bench -p stormproof-benches --no-default-features ${features:+--features $features }--bench instructions -- 'instructions::*::$row::*'"
  # --no-default-features: without criterion, which this bench does not use.
  # --output-format=json: one summary per benchmark on stdout, read below.
  cargo bench -q -p stormproof-benches --no-default-features ${features:+--features "$features"} --bench instructions -- \
    --output-format=json "instructions::*::$row::*" >>"$summaries"
done

SUMMARIES="$summaries" OUT="$out" ROWS="$*" python3 - <<'PY'
import json, os, re, sys

with open("benches/instructions.rs") as f:
    m = re.search(r"^const N: u64 = ([0-9_]+);$", f.read(), re.M)
if not m:
    sys.exit("benches/instructions.rs: no `const N: u64 = <literal>;`")
n = int(m.group(1).replace("_", ""))
# What each bench id runs (gungraun's description is the setup call as written).
runs = {"n": "(fixture(N))", "twice_n": "(fixture(2 * N))"}

counts = {}  # row -> {bench id: instructions}
with open(os.environ["SUMMARIES"]) as f:
    for line in f:
        if not line.startswith("{"):
            continue
        s = json.loads(line)
        row, bench_id = s["function_name"], s["id"]
        if runs.get(bench_id) != s["description"]:
            sys.exit(f"{row}::{bench_id}: expected one of {runs}, got {s['description']!r}")
        [callgrind] = [p for p in s["profiles"] if p["tool"] == "Callgrind"]
        counts.setdefault(row, {})[bench_id] = callgrind["data"]["total"]["metrics"]["Ir"]["values"]["new"]

rows = {}
for row, c in counts.items():
    if set(c) != set(runs):
        sys.exit(f"{row}: expected the runs {sorted(runs)}, got {sorted(c)}")
    rows[row] = {"calls": [n, 2 * n], "instructions": [c["n"], c["twice_n"]],
                 "per_call": (c["twice_n"] - c["n"]) / n}
if not rows:
    sys.exit("no benchmark ran (is the row name right?)")
unknown = [row for row in os.environ["ROWS"].split() if row not in rows]
if unknown:
    sys.exit(f"no such row in benches/instructions.rs: {', '.join(unknown)}")

with open(os.environ["OUT"], "w") as f:
    json.dump(rows, f, indent=2)

bare = rows.get("bare_call", {}).get("per_call")
print(f"{'row':<34} {'per call':>10} {'over bare':>10}")
for row, r in rows.items():
    over = f"{r['per_call'] - bare:10.1f}" if bare is not None else f"{'':>10}"
    print(f"{row:<34} {r['per_call']:10.1f} {over}")
print(f"wrote {os.environ['OUT']}")
PY
