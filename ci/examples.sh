#!/usr/bin/env bash
# The README's commands beside `cargo test` (ci/test.sh) and `cargo test
# --features loom` (ci/loom.sh):
#
# - the main job, `cargo run --release`, as written: the decode benchmark on
#   the synthetic Qwen3-0.6B (written once to the cache directory);
# - every subcommand of the command-line tool, as the README writes it, on
#   a tiny synthetic model standing in for `M.gguf` and `model.gguf`;
# - every example, with and without a model file (the tiny one standing in
#   for `model.gguf` and the downloaded `Qwen3-0.6B-Q8_0.gguf`). These run
#   in the test-profile build `cargo test` already made (it builds every
#   example), not with the README's `--release`: an example pulls in the
#   dev-dependencies, whose release build would cost CI minutes for the
#   same code paths;
# - `cargo package`, so a published crate builds from its packaged sources
#   alone.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() {
  echo "--- $*"
  timeout 600 "$@"
}

started=$SECONDS
cargo build --release
echo "examples: release build of the tool ($((SECONDS - started)) s)"

started=$SECONDS
model=$work/model.gguf
run cargo run --release -- synth --config tiny --seed 7 --out "$model"
run cargo run --release -- generate --model "$model" --chat "Hi"
run cargo run --release -- tokenize --model "$model" "Hello world"
printf 'Hello world\n' >"$work/in.txt"
run cargo run --release -- tokenize --model "$model" --file "$work/in.txt"
run cargo run --release -- eval --model "$model" --tokens 1,2,3 --out "$work/logits.npy"
run cargo run --release -- inspect --model "$model"
echo "examples: 5 subcommands ran ($((SECONDS - started)) s)"

started=$SECONDS
run cargo run --release
echo "examples: the main job, cargo run --release, ran ($((SECONDS - started)) s)"

started=$SECONDS
cargo build --profile test --examples
for example in pool_custom_kernel q8_matvec gguf_inspect generate serve; do
  run cargo run -q --profile test --example "$example"
done
run cargo run -q --profile test --example gguf_inspect -- "$model"
run cargo run -q --profile test --example generate -- "$model" "Hello"
run cargo run -q --profile test --example serve -- "$model"
echo "examples: 5 examples ran, with and without a model file ($((SECONDS - started)) s)"

cargo package --allow-dirty
echo "examples: cargo package built the packaged crate"
