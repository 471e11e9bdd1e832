#!/usr/bin/env bash
# The aarch64 kernels under user-mode QEMU, twice: on a CPU with the
# dot-product extension (`-cpu max`: the NeonDot and Neon suites must run)
# and on one without it (`-cpu cortex-a72`: NeonDot must be reported as
# ignored while the plain NEON suites run). Each time: the `quant::dot` unit
# tests (kernel selection, which checks that NeonDot is preferred exactly
# where the CPU has dotprod; the NEON Q8_0, Q4_0 and K-quant dots, single-
# and four-row, against the scalar kernels), tests/prop_quant.rs (every
# kernel suite against its scalar twin), tests/prop_kquant.rs (the K-quant
# and Q4_0 dots within their error bound, hostile bytes) and
# tests/prop_matvec.rs (pooled and rayon matvecs and matmuls equal the
# single-core matvec).
#
# Time: the debug build of those test binaries for aarch64 (without the
# default `cli` feature: no `inferno` binary to build), then the emulated
# runs with every property test at $QEMU_PROPTEST_CASES cases (default 64,
# the count the x86 kernel suites run natively; passed to the tests as
# PROPTEST_CASES, which they read for every count, so the native run,
# without it, keeps each test's own count).
#
# Needs the aarch64-unknown-linux-gnu Rust target, aarch64-linux-gnu-gcc and
# qemu-aarch64; installs them when missing and possible (rustup; apt-get as
# root: qemu-user, gcc-aarch64-linux-gnu), else skips (a failure under CI
# unless .ci/run declares the step optional; see ci/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/lib.sh

target=aarch64-unknown-linux-gnu
sysroot=/usr/aarch64-linux-gnu
if ! command -v qemu-aarch64 >/dev/null || ! command -v aarch64-linux-gnu-gcc >/dev/null \
  || [ ! -e "$sysroot/lib/ld-linux-aarch64.so.1" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "aarch64-qemu: installing qemu-user and gcc-aarch64-linux-gnu"
    { apt-get update -qq && apt-get install -y -qq qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross; } \
      >/dev/null 2>&1 || skip "apt-get could not install qemu-user and gcc-aarch64-linux-gnu"
  fi
fi
for tool in qemu-aarch64 aarch64-linux-gnu-gcc; do
  command -v "$tool" >/dev/null || skip "$tool not installed"
done
[ -e "$sysroot/lib/ld-linux-aarch64.so.1" ] || skip "no aarch64 C library under $sysroot (libc6-dev-arm64-cross)"
if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  rustup target add "$target" >/dev/null 2>&1 || skip "rust target $target could not be installed"
fi

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
log=$(mktemp)
trap 'rm -f "$log"' EXIT

suites=(--test prop_quant --test prop_kquant --test prop_matvec)
# One feature set for the build and both runs, so nothing is rebuilt.
flags=(--target "$target" --no-default-features)
export PROPTEST_CASES=${QEMU_PROPTEST_CASES:-64}
started=$SECONDS
cargo test "${flags[@]}" --lib --no-run "${suites[@]}" >/dev/null 2>&1 \
  || cargo test "${flags[@]}" --lib --no-run "${suites[@]}"
echo "aarch64-qemu: built the aarch64 tests ($((SECONDS - started)) s)"

run_on() {
  local cpu=$1
  echo "== qemu-aarch64 -cpu $cpu"
  export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L $sysroot -cpu $cpu"
  local t0=$SECONDS
  cargo test "${flags[@]}" --lib quant::dot 2>&1 | tee "$log"
  cargo test "${flags[@]}" "${suites[@]}" 2>&1 | tee -a "$log"
  echo "aarch64-qemu: -cpu $cpu ran in $((SECONDS - t0)) s ($PROPTEST_CASES cases per property)"
}

run_on max
grep -qx 'kernels exercised: NeonDot Neon Scalar' "$log" \
  || { echo "aarch64-qemu: on -cpu max, NeonDot, Neon and Scalar must all run"; exit 1; }

run_on cortex-a72
grep -q '^test neon_dot_dot_matches_scalar \.\.\. ignored, CPU lacks NeonDot$' "$log" \
  || { echo "aarch64-qemu: NeonDot was not reported as ignored on cortex-a72"; exit 1; }
grep -qx 'kernels exercised: Neon Scalar' "$log" \
  || { echo "aarch64-qemu: on cortex-a72, Neon and Scalar must run"; exit 1; }
echo "aarch64-qemu: NeonDot and Neon suites passed on -cpu max; cortex-a72 falls back to Neon ($((SECONDS - started)) s)"
