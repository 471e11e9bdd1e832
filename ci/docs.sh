#!/usr/bin/env bash
# API docs build without warnings (broken links, missing docs).
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --document-private-items
