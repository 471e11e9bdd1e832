#!/usr/bin/env bash
# The README's test command, then which SIMD kernels it exercised
# (ci/kernel-check.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test 2>&1 | tee "$log"
bash ci/kernel-check.sh "$log"

