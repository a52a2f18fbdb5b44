#!/usr/bin/env bash
# Fuzzes ErrorClass::from_http and Retry-After parsing for a bounded time.
#   scripts/fuzz.sh            # 60 seconds
#   FUZZ_SECONDS=600 scripts/fuzz.sh
# cargo-fuzz drives libFuzzer, which needs nightly-only rustc flags; on a
# stable toolchain RUSTC_BOOTSTRAP=1 unlocks them for this build only.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${FUZZ_SECONDS:-60}"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
export RUSTC_BOOTSTRAP=1
mkdir -p corpus/retry_after
# Seeds: the shapes a real server sends.
printf '\xad\x01120' > corpus/retry_after/seconds
printf '\xad\x01Wed, 21 Oct 2015 07:28:00 GMT' > corpus/retry_after/imf-date
printf '\xf7\x01Wednesday, 21-Oct-15 07:28:00 GMT' > corpus/retry_after/rfc850
printf '\xad\x01Sun Nov  6 08:49:37 1994' > corpus/retry_after/asctime
printf '\xad\x01Tuesday, 01-Jan-75 00:00:00 GMT' > corpus/retry_after/rfc850-two-digit-year
printf '\xad\x01Fri, 01 Jan 1960 00:00:00 GMT' > corpus/retry_after/before-1970
cargo fuzz run retry_after --sanitizer none -- -max_total_time="$seconds" -print_final_stats=1
