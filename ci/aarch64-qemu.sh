#!/usr/bin/env bash
# The aarch64 kernel suites under user-mode QEMU, twice: on a CPU with the
# dot-product extension (`-cpu max`: the NeonDot suites must run) and on
# one without it (`-cpu cortex-a72`: they must be skipped while the plain
# NEON suites run). Needs the aarch64-unknown-linux-gnu Rust target,
# aarch64-linux-gnu-gcc and qemu-aarch64; skips with a printed reason when
# they are absent. Slow (an emulated debug build), so not part of .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

target=aarch64-unknown-linux-gnu
sysroot=/usr/aarch64-linux-gnu
for tool in qemu-aarch64 aarch64-linux-gnu-gcc; do
  if ! command -v "$tool" >/dev/null; then
    echo "aarch64-qemu: SKIPPED ($tool not installed)"
    exit 0
  fi
done
if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  echo "aarch64-qemu: SKIPPED (rust target $target not installed)"
  exit 0
fi

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# The kernel-selection unit tests (which check that NeonDot is preferred
# exactly where the CPU has dotprod), then the kernel suites.
run_on() {
  local cpu=$1
  echo "== qemu-aarch64 -cpu $cpu"
  export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L $sysroot -cpu $cpu"
  cargo test --target "$target" --lib quant::dot 2>&1 | tee "$log"
  cargo test --target "$target" --test prop_quant --test prop_matvec 2>&1 | tee -a "$log"
}

run_on max
if grep -q 'lacks Neon' "$log"; then
  echo "aarch64-qemu: a NEON suite was skipped on -cpu max"; exit 1
fi

run_on cortex-a72
grep -q 'neon_dot_dot_matches_scalar: skipped, this CPU lacks NeonDot' "$log" \
  || { echo "aarch64-qemu: NeonDot was not skipped on cortex-a72"; exit 1; }
if grep -qE 'lacks Neon($|[^D])' "$log"; then
  echo "aarch64-qemu: the plain NEON suites were skipped on cortex-a72"; exit 1
fi
echo "aarch64-qemu: NeonDot and Neon suites passed; cortex-a72 falls back to Neon"
