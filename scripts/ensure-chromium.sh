#!/usr/bin/env bash
# Installs Debian's `chromium` package when it is missing: the dashboard test
# (tests/admin.rs) renders the admin page in it, and fails, naming this
# script, when it is absent. As root, or through sudo. CI runs it first.
#
#   scripts/ensure-chromium.sh           # /usr/bin/chromium, or STORMPROOF_CHROMIUM
set -euo pipefail
chromium="${STORMPROOF_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$chromium" ]; then
  echo "chromium: $chromium is there"
  exit 0
fi
if [ -n "${STORMPROOF_CHROMIUM:-}" ]; then
  echo "STORMPROOF_CHROMIUM=$chromium is not an executable file" >&2
  exit 1
fi
command -v apt-get >/dev/null ||
  { echo "no apt-get here: install Chromium yourself and point STORMPROOF_CHROMIUM at it" >&2; exit 1; }
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null; then
  as_root=(sudo)
else
  echo "installing chromium needs root or sudo" >&2
  exit 1
fi
echo "chromium: installing Debian's package"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -q
"${as_root[@]}" apt-get install -y -q chromium
[ -x "$chromium" ] || { echo "apt-get installed chromium, but $chromium is not there" >&2; exit 1; }
