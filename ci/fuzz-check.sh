#!/usr/bin/env bash
# cargo-fuzz in CI. Installs what it needs (a nightly toolchain and
# cargo-fuzz $CARGO_FUZZ_VERSION, --locked) when missing, then, for every
# target in fuzz/fuzz_targets/ (found by listing the directory, so a new
# target is picked up without touching this script):
#   1. builds it (release, debug assertions, AddressSanitizer);
#   2. replays its regression inputs (see `regressions_for`) and its saved
#      corpus, fuzz/corpus/<target>/, once each;
#   3. fuzzes it for $FUZZ_SECONDS seconds (default 60), up to $FUZZ_JOBS
#      targets at a time (default: one per core; each is single-threaded).
# Any crash, leak, timeout or out-of-memory fails the step and prints the
# input as base64 and hex, with the command that replays it. Longer
# campaigns: see README ("Fuzzing").
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/lib.sh

CARGO_FUZZ_VERSION=0.13.2
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_JOBS=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}

# Inputs each target replays before fuzzing, by target name: one line per
# family of targets (directories or files).
regressions_for() {
  case "$1" in
    gguf_parse) echo tests/gguf_regressions tests/fixtures/qwen3-tiny-s7.gguf ;;
    gguf_*) echo tests/gguf_regressions ;;
    tokenizer) echo tests/tokenizer_regressions ;;
    # model_load's inputs are edit lists, not files; the hostile model
    # files its findings became are replayed by tests/model_regressions.rs.
  esac
}

# Writes starting inputs into $2 for target $1, when it has a generator.
seed() {
  case "$1" in
    gguf_parse) cargo run -q --example gguf_fuzz_seeds -- "$2" >/dev/null ;;
  esac
}

# --- toolchain -------------------------------------------------------------
started=$SECONDS
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal \
    || skip "the nightly toolchain could not be installed"
fi
if [ "$(cargo +nightly fuzz --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]; then
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked \
    || skip "cargo-fuzz $CARGO_FUZZ_VERSION could not be installed"
fi
echo "fuzz-check: toolchain ready ($((SECONDS - started)) s): $(cargo +nightly fuzz --version)"

# --- targets ---------------------------------------------------------------
targets=()
for f in fuzz/fuzz_targets/*.rs; do
  targets+=("$(basename "$f" .rs)")
done
[ ${#targets[@]} -gt 0 ] || { echo "fuzz-check: no targets in fuzz/fuzz_targets/"; exit 1; }
declared=$(cd fuzz && cargo +nightly fuzz list)
for t in "${targets[@]}"; do
  if ! grep -qx "$t" <<<"$declared"; then
    echo "fuzz-check: fuzz/fuzz_targets/$t.rs has no [[bin]] in fuzz/Cargo.toml (\`cargo fuzz add $t\` writes both)"
    exit 1
  fi
done

started=$SECONDS
(cd fuzz && cargo +nightly fuzz build)
echo "fuzz-check: built ${targets[*]} ($((SECONDS - started)) s)"
triple=$(rustc +nightly -vV | sed -n 's/^host: //p')
bin_of() { echo "fuzz/target/$triple/release/$1"; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/artifacts"
failed=0

# Prints every input libFuzzer saved under $work/artifacts for target $1.
report_artifacts() {
  local found=0 f
  for f in "$work/artifacts/$1-"*; do
    [ -e "$f" ] || continue
    found=1
    echo "---- $1 failing input: $(basename "$f") ($(wc -c <"$f") bytes)"
    echo "base64:"
    base64 -w 76 "$f"
    echo "hex:"
    od -An -tx1 -v "$f" | head -n 64
    echo "replay: cargo +nightly fuzz run $1 <file holding the input above>"
  done
  [ "$found" = 1 ] || echo "---- $1: libFuzzer saved no input; see its log above"
}

# --- replay ----------------------------------------------------------------
for t in "${targets[@]}"; do
  bin=$(bin_of "$t")
  if [ ! -x "$bin" ]; then
    echo "fuzz-check: $bin was not built"; exit 1
  fi
  inputs=()
  for r in $(regressions_for "$t"); do
    if [ -d "$r" ]; then
      for f in "$r"/*; do [ -f "$f" ] && inputs+=("$f"); done
    elif [ -f "$r" ]; then
      inputs+=("$r")
    else
      echo "fuzz-check: $t's regression input $r is missing"; exit 1
    fi
  done
  corpus=fuzz/corpus/$t
  mkdir -p "$corpus"
  if [ -z "$(ls -A "$corpus")" ]; then seed "$t" "$corpus"; fi
  log=$work/$t.replay.log
  # Named files run once each; a directory with -runs=0 is loaded (every
  # input executed once) and nothing more.
  if { [ ${#inputs[@]} -eq 0 ] || "$bin" -artifact_prefix="$work/artifacts/$t-" "${inputs[@]}"; } >"$log" 2>&1 \
    && "$bin" -runs=0 -artifact_prefix="$work/artifacts/$t-" "$corpus" >>"$log" 2>&1; then
    n_corpus=$(find "$corpus" -type f | wc -l)
    echo "fuzz-check: $t replayed ${#inputs[@]} regression inputs and $n_corpus corpus inputs"
  else
    echo "fuzz-check: $t FAILED on a replayed input:"
    tail -n 40 "$log"
    report_artifacts "$t"
    failed=1
  fi
done
[ "$failed" = 0 ] || exit 1

# --- fuzz ------------------------------------------------------------------
run_one() {
  local t=$1 bin
  bin=$(bin_of "$t")
  # New inputs go to the first directory (kept between local runs; CI
  # starts from the seeds); the regression inputs seed it.
  local dirs=("fuzz/corpus/$t")
  for r in $(regressions_for "$t"); do [ -d "$r" ] && dirs+=("$r"); done
  "$bin" "${dirs[@]}" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 \
    -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$work/artifacts/$t-" \
    >"$work/$t.fuzz.log" 2>&1
}

# Whether every input target $1 saved is a timeout that, replayed once,
# finishes in time (a stalled machine, not a hang in the code).
only_unreproducible_timeouts() {
  local f any=0
  for f in "$work/artifacts/$1-"*; do
    [ -e "$f" ] || return 1
    case "$(basename "$f")" in "$1-timeout-"*) ;; *) return 1 ;; esac
    "$(bin_of "$1")" -timeout=10 "$f" >/dev/null 2>&1 || return 1
    any=1
  done
  [ "$any" = 1 ]
}

started=$SECONDS
pids=() names=()
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$FUZZ_JOBS" ]; do sleep 1; done
  run_one "$t" &
  pids+=($!) names+=("$t")
done
for i in "${!pids[@]}"; do
  t=${names[$i]}
  log=$work/$t.fuzz.log
  if wait "${pids[$i]}"; then
    status=ok
  elif only_unreproducible_timeouts "$t"; then
    # A unit that ran past -timeout while the machine stalled: its input
    # was replayed at once and finished in time. Reported, not failed.
    status="ok (a timeout that did not reproduce: $(basename "$(ls "$work/artifacts/$t-"timeout-* | head -n 1)"))"
  else
    status=FAILED
    failed=1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
  cov=$(grep -oE 'cov: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || true)
  ft=$(grep -oE 'ft: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || true)
  corp=$(grep -oE 'corp: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || true)
  echo "fuzz-check: $t $status: ${execs:-?} executions in ${FUZZ_SECONDS} s, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}"
  if [ "$status" != ok ]; then
    [ "$status" = FAILED ] || { report_artifacts "$t"; continue; }
    grep -E 'ERROR|panicked|SUMMARY|deadly signal|leak|timeout|out-of-memory' "$log" | head -n 20 || true
    tail -n 40 "$log"
    report_artifacts "$t"
  fi
done
echo "fuzz-check: fuzzed ${#targets[@]} targets, $FUZZ_JOBS at a time ($((SECONDS - started)) s)"
[ "$failed" = 0 ] || exit 1
echo "fuzz-check: ${targets[*]} build, replay their regressions and corpus, and survived ${FUZZ_SECONDS} s of fuzzing each"
