#!/usr/bin/env bash
# What one successful call executes, instruction by instruction: the
# per-call count of every machine instruction of a row of
# benches/instructions.rs, beside its disassembly, grouped by function.
# Where scripts/instructions-profile.sh says which source line costs what,
# this shows what the compiler made of it (a store of a discriminant, a
# drop flag, a test of a value it could not prove), which is where the
# structure's cost hides once everything is inlined into one function.
#
#   scripts/instructions-annotate.sh breaker_budget_call        # instructions run >= 0.5 times per call
#   scripts/instructions-annotate.sh attribute_defaults 0.9
#   INSTRUCTIONS_FEATURES=tower scripts/instructions-annotate.sh tower_cloning   # a tower row
#
# It runs scripts/instructions.sh for the row with callgrind's
# --dump-instr=yes (GUNGRAUN_CALLGRIND_ARGS), in its own target directory
# (target/annotate, so the build CI checks is not touched), then takes the
# counts of the two runs (N and 2N calls) address by address:
# (2N run - N run) / N is how often one call executes that instruction.
# Only the benchmark binary's own code is shown (the standard library's,
# tokio's and the runtime's code inlined into it included); `objdump` gives
# the disassembly.
set -euo pipefail
cd "$(dirname "$0")/.."

row="${1:?usage: scripts/instructions-annotate.sh ROW [MIN_PER_CALL]}"
min="${2:-0.5}"
target_dir="$(realpath -m "${CARGO_TARGET_DIR:-target}")/annotate"
GUNGRAUN_CALLGRIND_ARGS="--dump-instr=yes" CARGO_TARGET_DIR="$target_dir" scripts/instructions.sh "$row" >&2
binary="$(ls -t "$target_dir"/release/deps/instructions-* | grep -v '\.d$' | head -n 1)"

# The group the row is in: `success`, or `tower_layer` (feature `tower`).
group=success
[[ -d "$target_dir/gungraun/stormproof-benches/instructions/tower_layer/$row.n" ]] && group=tower_layer
ROW="$row" MIN="$min" BINARY="$binary" RUNS="$target_dir/gungraun/stormproof-benches/instructions/$group" python3 - <<'PY'
import collections, os, re, subprocess

row, runs, binary = os.environ["ROW"], os.environ["RUNS"], os.environ["BINARY"]
minimum = float(os.environ["MIN"])
with open("benches/instructions.rs") as f:
    n = int(re.search(r"^const N: u64 = ([0-9_]+);$", f.read(), re.M).group(1).replace("_", ""))
ours = os.path.basename(binary)

def counts(run):
    """Instructions executed by (function, address), in the benchmark binary."""
    path = f"{runs}/{row}.{run}/callgrind.{row}.{run}.out"
    cost, names, objects = collections.Counter(), {}, {}
    function, obj, address, positions, after_call = None, "", 0, 1, False
    for line in open(path):
        line = line.rstrip("\n")
        if not line:
            continue
        if line.startswith("positions:"):
            positions = len(line.split()) - 1
        elif m := re.match(r"ob=(?:\((\d+)\))? ?(.*)", line):
            if m.group(1) and m.group(2):
                objects[m.group(1)] = m.group(2)
            obj = m.group(2) or objects.get(m.group(1), "")
        elif m := re.match(r"fn=(?:\((\d+)\))? ?(.*)", line):
            if m.group(1) and m.group(2):
                names[m.group(1)] = m.group(2)
            function = m.group(2) or names.get(m.group(1))
        elif line.startswith("calls="):
            # The next cost line is the call's inclusive cost, not an instruction's own.
            after_call = True
        elif line[0] in "0123456789+-*":
            fields = line.split()
            where = fields[0]
            if where.startswith("0x"):
                address = int(where, 16)
            elif where[0] in "+-":
                step = int(where[1:], 16) if where[1:].startswith("0x") else int(where[1:])
                address += step if where[0] == "+" else -step
            elif where != "*":
                address = int(where)
            if after_call:
                after_call = False
            elif len(fields) > positions and obj.endswith(ours):
                cost[(function, address)] += int(fields[positions])
    return cost

once, twice = counts("n"), counts("twice_n")
per_call = {k: (twice[k] - once[k]) / n for k in set(once) | set(twice)}
by_function = collections.defaultdict(dict)
for (function, address), times in per_call.items():
    if abs(times) >= minimum:
        by_function[function][address] = times
print(f"== {row}: {sum(per_call.values()):.1f} instructions per call in the benchmark binary; "
      f"those run >= {minimum} times per call, by function")
for function, addresses in sorted(by_function.items(), key=lambda kv: -sum(kv[1].values())):
    print(f"\n{sum(addresses.values()):7.1f}  {function}")
    listing = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", "-C", f"--start-address={min(addresses):#x}",
         f"--stop-address={max(addresses) + 16:#x}", binary],
        capture_output=True, text=True, check=True).stdout
    for line in listing.splitlines():
        if (m := re.match(r"\s*([0-9a-f]+):\s*(.*)", line)) and int(m.group(1), 16) in addresses:
            print(f"{addresses[int(m.group(1), 16)]:7.1f}  {m.group(1)}  {m.group(2)[:140]}")
PY
