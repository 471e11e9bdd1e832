#!/usr/bin/env bash
# loom models of the pool protocol (tests/loom_*.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --features loom --release --test 'loom_*'
