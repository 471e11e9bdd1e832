#!/usr/bin/env bash
# Every example builds (in release, as users run them); the ones that need
# no model file run (each falls back to a tiny synthetic model or to
# in-memory data without arguments); and `cargo package` builds the crate
# from the packaged sources alone, so a published crate is complete.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --examples
for example in pool_custom_kernel q8_matvec gguf_inspect generate; do
  echo "--- cargo run --release --example $example"
  timeout 300 cargo run -q --release --example "$example"
done
cargo package --allow-dirty
echo "examples: 4 examples ran; cargo package built the packaged crate"
