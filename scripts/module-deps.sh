#!/usr/bin/env bash
# Module circles (issue 42): sibling modules of a crate that use each other
# in a loop, at any depth, in every crate of the workspace. Prints the map of
# each crate's top-level modules (which siblings each one uses), then every
# circle with the lines that make it. Exits non-zero on a circle that
# scripts/module-circles.allow does not list, and on a line of that list
# that names no circle any more.
#
#   scripts/module-deps.sh                     # every crate of the workspace
#   scripts/module-deps.sh retry-runtime/src   # one crate
#   scripts/module-deps.sh -v                  # the map inside every module too
#
# What counts as a use (re-exports are followed to the file that defines
# the name; comments and test-only code are not read) is described in
# scripts/module-deps.py; its tests are scripts/module-deps-tests.py.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/module-deps.py "$@"
