#!/usr/bin/env bash
# The README's test command: every test of the workspace, with every
# feature, on a fresh machine. The fleet tests need `redis-server` and the
# dashboard test needs Chromium: each is installed from the distribution's
# packages when missing (as root or through sudo), and the fleet tests are
# told they must not skip, so a missing server fails the run instead of
# passing it quietly.
#
#   scripts/test.sh                 # everything
#   scripts/test.sh --test config   # extra arguments go to `cargo test`
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/ensure-redis.sh
scripts/ensure-chromium.sh
export STORMPROOF_REQUIRE_REDIS=1
exec cargo test --workspace --all-features "$@"
