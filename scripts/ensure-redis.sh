#!/usr/bin/env bash
# Installs the distribution's redis-server when it is missing: the fleet
# tests (retry-fleet/tests/fleet) start their own server
# on a free loopback port, with persistence off, and need only the binary.
# Nothing is started here, and a service the package may start is left alone.
#
#   scripts/ensure-redis.sh     # then: STORMPROOF_REQUIRE_REDIS=1 cargo test --workspace --all-features
set -euo pipefail

if command -v redis-server >/dev/null; then
  echo "redis-server: $(redis-server --version | cut -d' ' -f3)"
  exit 0
fi
echo "== installing redis-server (the distribution's package)"
sudo=""
if [[ "$(id -u)" != 0 ]]; then sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends redis-server >/dev/null
command -v redis-server >/dev/null || { echo "ensure-redis.sh: redis-server is still missing" >&2; exit 1; }
echo "redis-server: $(redis-server --version | cut -d' ' -f3)"
