#!/usr/bin/env bash
# Benchmarks keep compiling (they are run by hand: `cargo bench`).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --no-run
