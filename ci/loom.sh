#!/usr/bin/env bash
# loom models of the pool protocol (tests/loom_*.rs). The whole suite runs
# with the feature on, so `cargo test --features loom` keeps working: tests
# that need real threads are compiled out under it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --features loom --release
