#!/usr/bin/env bash
# Every example builds and runs without a model file (each falls back to a
# tiny synthetic model or to in-memory data without arguments), in the
# debug build `cargo test` already made; and `cargo package` builds the
# crate from the packaged sources alone, so a published crate is complete.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --examples
for example in pool_custom_kernel q8_matvec gguf_inspect generate; do
  echo "--- cargo run --example $example"
  timeout 300 cargo run -q --example "$example"
done
cargo package --allow-dirty
echo "examples: 4 examples ran; cargo package built the packaged crate"
