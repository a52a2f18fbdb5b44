#!/usr/bin/env bash
# Issue 41: the published crates are publishable. Checks every package's
# metadata (what crates.io shows and asks for), that the two license files
# are at the root and in each published package, that every other package
# says `publish = false`, then runs `cargo package` on the published crates
# together: cargo packs them in dependency order and verifies each .crate by
# building it against the others' packed sources (a local registry in
# target/package), so the facade is built exactly as a user would get it.
#
#   scripts/package-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

published=(stormproof-macros stormproof-runtime stormproof-admin stormproof-sim stormproof-fleet stormproof)

cargo metadata --format-version 1 --no-deps | PUBLISHED="${published[*]}" python3 -c '
import json, os, sys
meta = json.load(sys.stdin)
published = os.environ["PUBLISHED"].split()
problems = []
by_name = {p["name"]: p for p in meta["packages"]}
for name in published:
    p = by_name.get(name)
    if p is None:
        problems.append(f"{name}: not a package of the workspace")
        continue
    for field in ("description", "license", "readme", "rust_version", "documentation"):
        if not p.get(field):
            problems.append(f"{name}: no `{field}`")
    if p.get("license") != "MIT OR Apache-2.0":
        problems.append("%s: license is %r, not MIT OR Apache-2.0" % (name, p.get("license")))
    for field in ("keywords", "categories"):
        if not p.get(field):
            problems.append(f"{name}: no `{field}`")
    if p.get("repository"):
        problems.append("%s: repository %r (leave it out until there is a public one)" % (name, p["repository"]))
    if p.get("publish") == []:
        problems.append(f"{name}: publish = false, but it is published")
    root = os.path.dirname(p["manifest_path"])
    for license in ("LICENSE-MIT", "LICENSE-APACHE"):
        path = os.path.join(root, license)
        if not os.path.isfile(path):
            problems.append(f"{name}: no {license}")
        elif open(path, "rb").read() != open(license, "rb").read():
            problems.append(f"{name}: {license} differs from the root one")
for p in meta["packages"]:
    if p["name"] not in published and p.get("publish") != []:
        problems.append("%s: not published, so it must say publish = false" % p["name"])
if problems:
    print("\n".join(problems), file=sys.stderr)
    sys.exit(1)
print(f"metadata: {len(published)} published crates complete, the others publish = false")
'
# The packages outside the workspace: the fuzz target and the facade tests' fixtures.
for manifest in fuzz/Cargo.toml tests/facade/*/Cargo.toml tests/facade/*/*/Cargo.toml; do
  if grep -q '^\[package\]' "$manifest" && ! grep -q '^publish = false' "$manifest"; then
    echo "$manifest: not published, so it must say publish = false" >&2
    exit 1
  fi
done

args=()
for name in "${published[@]}"; do args+=(-p "$name"); done
# cargo unpacks the local registry's crates under ~/.cargo/registry/src/-HASH/
# and reuses an unpacked NAME-VERSION it finds there: on a machine that ran
# this before, the verify step would build against the sources of an earlier
# run (the version does not change between commits). Those copies are this
# script's own; they go, with the local registry they came from.
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
for name in "${published[@]}"; do
  rm -rf "$cargo_home"/registry/src/-*/"$name"-[0-9]* "$cargo_home"/registry/cache/-*/"$name"-[0-9]*
done
rm -rf "${CARGO_TARGET_DIR:-target}/package"
cargo package "${args[@]}" --allow-dirty --quiet
echo "cargo package: ${published[*]} packed and verified, in dependency order"
