#!/usr/bin/env bash
# Which sibling modules each module of a crate imports, and whether any two
# import each other (a cycle). Exits non-zero on a cycle.
#
#   scripts/module-deps.sh                 # stormproof-runtime and stormproof-macros
#   scripts/module-deps.sh path/to/src     # one crate
#
# A "module" is a top-level entry of src/ (a file, or a folder with mod.rs);
# an import is a `crate::<module>` path anywhere in its files (code and doc
# links alike). Paths through the crate root's re-exports (`crate::Type`)
# are not seen, so modules name their siblings' items by module path. Submodules importing their own parent (`super::`) are the
# tree's normal shape and are not counted.
set -euo pipefail
cd "$(dirname "$0")/.."

check() {
  local src=$1 status=0
  declare -A deps=()
  local modules
  modules=$(for entry in "$src"/*; do basename "$entry" .rs; done | grep -vxE 'lib|main' | tr '\n' '|')
  for entry in "$src"/*; do
    local name
    name=$(basename "$entry" .rs)
    [ "$name" = lib ] || [ "$name" = main ] && continue
    local files
    if [ -d "$entry" ]; then files=$(find "$entry" -name '*.rs'); else files=$entry; fi
    # shellcheck disable=SC2086
    deps[$name]=$(grep -hoE 'crate::[a-z_]+' $files | sed 's/crate:://' | grep -xE "${modules%|}" | grep -vx "$name" | sort -u | tr '\n' ' ' || true)
  done
  echo "== $src"
  for name in $(printf '%s\n' "${!deps[@]}" | sort); do
    printf '  %-12s -> %s\n' "$name" "${deps[$name]:-(nothing)}"
  done
  for a in "${!deps[@]}"; do
    for b in ${deps[$a]}; do
      if [[ " ${deps[$b]:-} " == *" $a "* ]] && [[ "$a" < "$b" ]]; then
        echo "  CYCLE: $a <-> $b"
        status=1
      fi
    done
  done
  return $status
}

if [ $# -gt 0 ]; then
  check "$1"
else
  check retry-runtime/src && check retry-macros/src
fi
