#!/usr/bin/env bash
# Where one successful call's instructions go: the per-call cost of each
# source line (and of each source file, the standard library's included)
# for rows of benches/instructions.rs, so that work on the success path
# starts from what it executes rather than from a guess.
#
#   scripts/instructions-profile.sh attribute_defaults          # lines costing >= 0.5 per call
#   scripts/instructions-profile.sh breaker_budget_call 2       # lines costing >= 2
#   INSTRUCTIONS_FEATURES=tower scripts/instructions-profile.sh tower_cloning   # a tower row
#
# It runs scripts/instructions.sh for the row in a build with line tables
# (its own target directory, target/profile, so the build CI checks is not
# touched), then takes callgrind's counts of the two runs of the row (N and
# 2N calls) line by line: (2N run - N run) / N is what one call costs there.
# Everything the compiler inlined is charged to the line it came from, so a
# line of tokio or of the standard library inlined into the call shows under
# its own file. Calls into a function not inlined show as that function's
# lines. Lines from files callgrind_annotate cannot open (the standard
# library's, unless rust-src is installed) are only in the per-file totals.
set -euo pipefail
cd "$(dirname "$0")/.."

row="${1:?usage: scripts/instructions-profile.sh ROW [MIN_PER_CALL]}"
min="${2:-0.5}"
# Absolute: gungraun resolves a relative target directory from the bench package.
target_dir="$(realpath -m "${CARGO_TARGET_DIR:-target}")/profile"
CARGO_TARGET_DIR="$target_dir" CARGO_PROFILE_BENCH_DEBUG=line-tables-only scripts/instructions.sh "$row" >&2

# The group the row is in: `success`, or `tower_layer` (feature `tower`).
group=success
[[ -d "$target_dir/gungraun/stormproof-benches/instructions/tower_layer/$row.n" ]] && group=tower_layer
ROW="$row" MIN="$min" RUNS="$target_dir/gungraun/stormproof-benches/instructions/$group" python3 - <<'PY'
import collections, os, re, subprocess, sys

row, runs = os.environ["ROW"], os.environ["RUNS"]
minimum = float(os.environ["MIN"])
with open("benches/instructions.rs") as f:
    n = int(re.search(r"^const N: u64 = ([0-9_]+);$", f.read(), re.M).group(1).replace("_", ""))

def counts(run):
    """Self cost by (file, line) and by file, from callgrind_annotate."""
    out = f"{runs}/{row}.{run}/callgrind.{row}.{run}.out"
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=no", "--threshold=100", "--auto=yes", "--context=0", "--show-percs=no", out],
        capture_output=True, text=True, check=True).stdout
    lines, files = collections.Counter(), collections.Counter()
    source, number, in_table = None, None, False
    for line in text.splitlines():
        if line.startswith("Ir") and "file:function" in line:
            in_table = True
            continue
        if m := re.match(r"-- Auto-annotated source: (.*)", line):
            source, in_table = m.group(1), False
            continue
        if in_table:
            # "  12,345  path/to/file.rs:function [object]": a function's self cost.
            if m := re.match(r"\s*([\d,]+)\s+(\S[^:]*):", line):
                files[m.group(2)] += int(m.group(1).replace(",", ""))
            continue
        if m := re.match(r"-- line (\d+) -", line):
            number = int(m.group(1))
            continue
        # A count and the source line; "=> ..." lines are inclusive costs of calls.
        if (source and (m := re.match(r"\s*([\d,]+)\s\s(.*)$", line))
                and not m.group(2).lstrip().startswith("=>") and m.group(2).strip() != "events annotated"):
            lines[(source, number, m.group(2).strip())] += int(m.group(1).replace(",", ""))
            number = number + 1 if number is not None else None
    return lines, files

(lines_n, files_n), (lines_2n, files_2n) = counts("n"), counts("twice_n")

def per_call(a, b):
    return {k: (b[k] - a[k]) / n for k in set(a) | set(b) if b[k] != a[k]}

def short(path):
    for marker in ("/src/", "/benches/", "/library/"):
        if marker in path:
            head, _, tail = path.rpartition(marker)
            return f"{os.path.basename(head)}{marker}{tail}"
    return path

by_line = per_call(lines_n, lines_2n)
print(f"== {row}: instructions per call by source line (>= {minimum})")
for (source, number, text), cost in sorted(by_line.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
    if abs(cost) >= minimum:
        print(f"{cost:7.1f}  {short(source)}:{number}  {text[:100]}")
by_file = per_call(files_n, files_2n)
print(f"== {row}: instructions per call by file")
for source, cost in sorted(by_file.items(), key=lambda kv: -kv[1]):
    if abs(cost) >= 0.5:
        print(f"{cost:7.1f}  {short(source)}")
print(f"{sum(by_file.values()):7.1f}  in all")
PY
