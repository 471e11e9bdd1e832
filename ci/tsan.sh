#!/usr/bin/env bash
# The pool's stress, lifecycle and panic tests, and the pool unit tests,
# under ThreadSanitizer: nightly, `-Zsanitizer=thread` with an instrumented
# standard library (`-Zbuild-std`). When nightly or its rust-src cannot be
# had it skips (and fails under CI; see ci/lib.sh).
#
# What TSAN cannot check (see src/unsafe_core/PROTOCOL.md, "What
# ThreadSanitizer can and cannot check"): it sees only the schedules the
# run produced (loom explores the others); it does not model standalone
# fences (the pool uses none: every edge is a Release/Acquire pair on one
# location); and it does not model relaxed atomics returning older values
# (loom and Miri's weak-memory emulation do). It is an extra check on real
# executions; the loom models are the proof.
#
# In .ci/run: a cold run (instrumented standard library included) took
# 88 s on the 2-core development machine.
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/lib.sh

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal >/dev/null 2>&1 \
    || skip "the nightly toolchain could not be installed"
fi
if ! rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; then
  rustup component add rust-src --toolchain nightly >/dev/null 2>&1 \
    || skip "rust-src could not be installed on nightly"
fi

target=$(rustc +nightly -vV | sed -n 's/host: //p')
export RUSTFLAGS="-Zsanitizer=thread"
export RUSTDOCFLAGS="-Zsanitizer=thread"
# Report every race, and fail the run on the first one.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
# A separate target directory: sanitizer builds share nothing with the
# normal ones.
export CARGO_TARGET_DIR=target/tsan
# Unoptimised, unlike the test profile's default (Cargo.toml): the
# instrumented standard library is rebuilt here, and at opt-level 1 that
# cost more than the faster run saved (169 s against 127 in .ci/run).
export CARGO_PROFILE_TEST_OPT_LEVEL=0

cargo +nightly test -Zbuild-std --target "$target" --no-default-features \
  --test pool_stress --test pool_lifecycle --test pool_panic_payloads
cargo +nightly test -Zbuild-std --target "$target" --no-default-features \
  --lib -- unsafe_core::pool pool::tests
echo "tsan: pool stress, lifecycle, panic-payload and unit tests passed under ThreadSanitizer"
