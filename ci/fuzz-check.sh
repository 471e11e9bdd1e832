#!/usr/bin/env bash
# Builds the GGUF fuzz targets when a nightly toolchain and cargo-fuzz are
# available, and replays the regression inputs through them; otherwise says
# why it skipped. Optional and quick: the long campaigns run by hand
# (`cargo +nightly fuzz run gguf_parse`), and a stable `cargo test`
# replays tests/gguf_regressions/ on every run anyway.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz-check: skipped (no nightly toolchain)"
    exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz-check: skipped (cargo-fuzz not installed)"
    exit 0
fi

cd fuzz
cargo +nightly fuzz build -a
for target in gguf_parse gguf_mutate; do
    bin=target/$(rustc +nightly -vV | sed -n "s/host: //p")/release/$target
    if [ -x "$bin" ]; then
        # Replays each regression input once (-runs=0 only loads them).
        "$bin" -runs=0 ../tests/gguf_regressions/ 2>&1 | tail -n 1
    fi
done
echo "fuzz-check: targets build and replay the regression inputs"
