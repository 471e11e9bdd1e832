#!/usr/bin/env bash
# The README's loom command, exactly as it writes it: the whole suite with
# the loom feature on, in the debug build `cargo test` (ci/test.sh) already
# made the dependencies of. The loom models of the pool protocol
# (tests/loom_*.rs) run at the same preemption bounds as in release (loom
# explores the same interleavings at any optimization level; debug adds
# overflow checks); the tests that need real threads or the `inferno`
# binary are compiled out under the feature, and the unit and doc tests run.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --features loom
