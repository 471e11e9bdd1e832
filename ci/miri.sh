#!/usr/bin/env bash
# Miri over the unsafe core's unit tests (pool protocol, disjoint chunks,
# SIMD dispatch) and the pool's safe face. Needs nightly with miri and
# rust-src; skips with a printed reason when they cannot be installed.
#
# Under Miri the CPU-feature detection reports no SIMD, so the scalar
# kernels and the pool are what Miri exercises; memory maps (FFI) are not
# run under Miri.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  if ! rustup toolchain install nightly --profile minimal >/dev/null 2>&1; then
    echo "miri: SKIPPED (nightly toolchain could not be installed)"
    exit 0
  fi
fi
if ! cargo +nightly miri --version >/dev/null 2>&1; then
  if ! rustup component add miri rust-src --toolchain nightly >/dev/null 2>&1; then
    echo "miri: SKIPPED (miri component could not be installed on nightly)"
    exit 0
  fi
fi

# Once over everything, with weak-memory emulation and random preemption
# (Miri's defaults) ...
base="${MIRIFLAGS:-} -Zmiri-strict-provenance"
MIRIFLAGS="$base" cargo +nightly miri test --lib -- unsafe_core pool::tests quant matvec gguf
# ... then the pool protocol under 16 scheduler seeds, each a different
# interleaving of the workers.
MIRIFLAGS="$base -Zmiri-many-seeds=0..16" cargo +nightly miri test --lib -- unsafe_core::pool
