#!/usr/bin/env bash
# Miri over the unsafe core's unit tests (pool protocol, disjoint chunks,
# SIMD dispatch) and the pool's safe face. Installs nightly with miri and
# rust-src when missing; fails under CI when they cannot be installed (see
# ci/lib.sh).
#
# Under Miri the CPU-feature detection reports no SIMD, so the scalar
# kernels and the pool are what Miri exercises; memory maps (FFI) are not
# run under Miri.
#
# Time: one pass over everything (about a minute of interpretation), then
# the pool protocol, where interleavings matter, under $MIRI_SEEDS
# scheduler seeds (default 32, about 4 s each on a 2-core machine).
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/lib.sh

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal >/dev/null 2>&1 \
    || skip "the nightly toolchain could not be installed"
fi
if ! cargo +nightly miri --version >/dev/null 2>&1; then
  rustup component add miri rust-src --toolchain nightly >/dev/null 2>&1 \
    || skip "the miri component could not be installed on nightly"
fi

seeds=${MIRI_SEEDS:-32}
# Once over everything, with weak-memory emulation and random preemption
# (Miri's defaults) ...
base="${MIRIFLAGS:-} -Zmiri-strict-provenance"
started=$SECONDS
# `pool::tests` is the safe face's tests, not `pool::threads::tests`: those
# read sysfs and temporary files, which Miri's isolation refuses (`statx`
# not supported); they are also `#[cfg_attr(miri, ignore)]`, so a broader
# filter skips them rather than failing. They hold no unsafe code.
MIRIFLAGS="$base" cargo +nightly miri test --lib -- unsafe_core pool::tests quant matvec gguf
echo "miri: every unsafe-core (the model handle's cell included), pool, kernel, matvec and gguf unit test once ($((SECONDS - started)) s)"
# ... then the pool protocol under many scheduler seeds, each a different
# interleaving of the workers.
started=$SECONDS
MIRIFLAGS="$base -Zmiri-many-seeds=0..$seeds" cargo +nightly miri test --lib -- unsafe_core::pool
echo "miri: the pool protocol tests under $seeds scheduler seeds ($((SECONDS - started)) s)"
