#!/usr/bin/env bash
# Which Rust the library and the tests need, from the `rust-version` every
# crate declares (cargo metadata), over the dependency graph (cargo tree) with
# every feature, target and cfg:
#   library  the three published crates and their normal and build dependencies;
#   tests    the same plus dev-dependencies (tests, examples, benches).
# Edition 2024 alone needs 1.85. Prints both, with the crates that set them;
# with --write, also rewrites the README's sentence between the
# `<!-- rust-version -->` markers. Needs jq.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C
command -v jq >/dev/null || { echo "scripts/rust-version.sh needs jq" >&2; exit 1; }

declared="$(mktemp)"
trap 'rm -f "$declared"' EXIT
# name@version<TAB>rust-version, for every crate that declares one
cargo metadata --format-version 1 --quiet |
  jq -r '.packages[] | select(.rust_version != null) | "\(.name)@\(.version)\t\(.rust_version)"' |
  sort -u >"$declared"

# The highest rust-version among the dependencies (the workspace's own crates
# left out: their rust-version is what this finds) reached through the given
# edges, as "VERSION<TAB>crate version, crate version".
highest() {
  cargo tree --quiet -e "$1" --all-features --target all \
    -p stormproof -p stormproof-runtime -p stormproof-macros --prefix none --format '{p}' |
    sed -n 's/^\([^ ]*\) v\([^ ]*\).*/\1@\2/p' | grep -v -e '^stormproof@' -e '^stormproof-runtime@' -e '^stormproof-macros@' |
    sort -u | join -t $'\t' "$declared" - |
    awk -F'\t' '{print $2"\t"$1}' | sort -t . -k1,1n -k2,2n -k3,3n |
    awk -F'\t' '$1 != last {list = ""; last = $1} {sub("@", " ", $2); list = list (list == "" ? "" : ", ") $2}
                END {print last "\t" list}'
}

# "1.85.0" -> "1.85"; the higher of two versions.
short() { sed 's/^\([0-9]*\.[0-9]*\)\.0$/\1/' <<<"$1"; }
max() { printf '%s\n%s\n' "$1" "$2" | sort -t . -k1,1n -k2,2n -k3,3n | tail -n 1; }

edition=1.85.0
library="$(highest normal,build)"
tests="$(highest normal,build,dev)"
lib="$(short "$(max "$edition" "$(cut -f1 <<<"$library")")")"
dev="$(short "$(max "$edition" "$(cut -f1 <<<"$tests")")")"
echo "edition 2024:               $(short "$edition")"
echo "library dependencies:       $(short "$(cut -f1 <<<"$library")") ($(cut -f2 <<<"$library"))"
echo "with dev-dependencies:      $(short "$(cut -f1 <<<"$tests")") ($(cut -f2 <<<"$tests"))"
echo "library needs $lib; tests, examples and benches need $dev"

if [ "${1:-}" = "--write" ]; then
  printf '%s\n' "The library builds on Rust ${lib} or newer; the tests, examples and" \
    "benchmarks need Rust ${dev} or newer ($(cut -f2 <<<"$tests") asks for it)." |
    scripts/readme-block.sh rust-version
fi
