#!/usr/bin/env bash
# loom models of the pool protocol (every tests/loom_*.rs) and the unit tests,
# with the loom feature on. The rest of the suite compiles under the feature
# too (tests that need real threads are compiled out; `ci/fmt-clippy.sh`
# checks every target with `--features loom`), so `cargo test --features
# loom` keeps working; this step builds only what it runs, in release.
set -euo pipefail
cd "$(dirname "$0")/.."
models=()
for f in tests/loom_*.rs; do models+=(--test "$(basename "$f" .rs)"); done
cargo test --no-default-features --features loom --release --lib "${models[@]}"
