#!/usr/bin/env bash
# Takes the README's screenshot of the dashboard during the payment
# scenario: runs `payment --dashboard`, opens the page in headless Chromium,
# and once the payments breaker is open (read from /snapshot) stops the
# example with Ctrl-C (SIGINT). The example then ends the page's event
# stream, and Chromium, which waits for open requests before it is done
# (`--virtual-time-budget`), prints the page as it was (`--dump-dom`). That
# page, its script taken out, is what a second Chromium photographs.
# (`--screenshot` straight from the live page hangs now and then in this
# Chromium once the server is gone; the rendered DOM does not.)
#
#   scripts/dashboard-screenshot.sh [out.png]     # default docs/dashboard.png
#
# Needs Chromium (scripts/ensure-chromium.sh) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/dashboard.png}"
mkdir -p "$(dirname "$out")"
chromium="${STORMPROOF_CHROMIUM:-/usr/bin/chromium}"
[ -x "$chromium" ] || { echo "no Chromium at $chromium: run scripts/ensure-chromium.sh" >&2; exit 1; }

cargo build --quiet --example payment
target_dir="${CARGO_TARGET_DIR:-target}"
log="$(mktemp)"
profile="$(mktemp -d)"
example_pid=""
browser_pid=""
cleanup() {
  [ -n "$example_pid" ] && kill "$example_pid" 2>/dev/null || true
  [ -n "$browser_pid" ] && kill "$browser_pid" 2>/dev/null || true
  rm -rf "$log" "$profile" "$profile.html"
}
trap cleanup EXIT

"$target_dir/debug/examples/payment" --dashboard >"$log" 2>&1 &
example_pid=$!
url=""
for _ in $(seq 1 200); do
  url="$(sed -n 's/^dashboard on \(http[^ ]*\).*/\1/p' "$log" | head -n 1)"
  [ -n "$url" ] && break
  sleep 0.05
done
[ -n "$url" ] || { echo "the example printed no dashboard URL:" >&2; cat "$log" >&2; exit 1; }

flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
  --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$profile")
timeout 120 "$chromium" "${flags[@]}" --virtual-time-budget=200 --dump-dom "$url" >"$profile.html" 2>/dev/null &
browser_pid=$!

# Wait for the breaker to be open with a few seconds of counts on the chart.
URL="$url" python3 - <<'PY'
import json, os, sys, time, urllib.request
deadline = time.time() + 60
while time.time() < deadline:
    with urllib.request.urlopen(os.environ["URL"] + "snapshot") as response:
        snap = json.load(response)
    payments = next((b for b in snap["breakers"] if b["name"] == "payments"), None)
    if payments and payments["state"] == "open" and len(payments["per_second"]) >= 3:
        sys.exit(0)
    time.sleep(0.02)
sys.exit("the payments breaker did not open within 60 s")
PY
kill -INT "$example_pid"
wait "$example_pid" || true
example_pid=""
wait "$browser_pid"
browser_pid=""
grep -q 'data-breaker="payments"' "$profile.html" || { echo "the page showed no payments breaker" >&2; exit 1; }
python3 - "$profile.html" <<'PY'
import re, sys
path = sys.argv[1]
with open(path) as f:
    page = f.read()
with open(path, "w") as f:
    f.write(re.sub(r"<script>.*?</script>", "", page, flags=re.S))
PY
rm -f "$out"
timeout 120 "$chromium" "${flags[@]}" --hide-scrollbars --window-size=1100,760 --screenshot="$out" "file://$profile.html" 2>/dev/null
[ -s "$out" ] || { echo "Chromium wrote no screenshot" >&2; exit 1; }
echo "$out: $(stat -c %s "$out") bytes"
