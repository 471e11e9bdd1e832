#!/usr/bin/env bash
# kernel-check.sh LOG: which SIMD kernels a test run exercised. The kernel
# suites (tests/prop_quant.rs) report a kernel this CPU lacks as ignored and
# end with "kernels exercised: ...". The CPU's own flags (/proc/cpuinfo,
# read independently of the crate's feature detection) say which kernels
# must have run; under CI a kernel the CPU has that did not run fails.
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/lib.sh
log=$1

exercised=$(sed -n 's/^kernels exercised: //p' "$log" | tail -n 1)
lacking=$(sed -n 's/^kernels not on this CPU: //p' "$log" | tail -n 1)
echo "kernel-check: kernels exercised: ${exercised:-none}; not on this CPU (ignored): ${lacking:-none}"

expected=(Scalar)
if [ -r /proc/cpuinfo ]; then
  flags=" $(grep -m1 -E '^(flags|Features)' /proc/cpuinfo | cut -d: -f2) "
  has() { for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }
  case "$(uname -m)" in
    x86_64)
      if has avx2 fma f16c; then
        expected+=(Avx2)
        has avx512f avx512vl avx512bw avx512_vnni && expected+=(Avx512Vnni)
        has avx_vnni && expected+=(AvxVnni)
      fi ;;
    aarch64)
      has asimd && expected+=(Neon)
      has asimddp && expected+=(NeonDot) ;;
  esac
else
  echo "kernel-check: /proc/cpuinfo unreadable; only Scalar is required"
fi
missing=()
for k in "${expected[@]}"; do
  [[ " $exercised " == *" $k "* ]] || missing+=("$k")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "kernel-check: this CPU has ${missing[*]} (per /proc/cpuinfo) but those kernel suites did not run"
  if in_ci; then exit 1; fi
  exit 0
fi
echo "kernel-check: every kernel this CPU has (${expected[*]}) was exercised"
