#!/usr/bin/env bash
# Keeps the SAFETY comments of src/unsafe_core and SAFETY.md in step:
# - `unsafe` appears in code only under src/unsafe_core/ (tests/ are
#   checked by `cargo test --test unsafe_fence`, which strips strings);
# - every `unsafe {` block and `unsafe impl` there carries a `SAFETY: [ID]`;
# - every cited ID is listed in SAFETY.md (as a `### [ID]` heading);
# - every listed ID is cited somewhere and has a "Checked by" line.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0

# 1. No unsafe code outside the core (comments and strings that merely
#    mention the word are fine; code tokens are not).
outside=$(grep -rnE '(^|[^_a-zA-Z"])unsafe([[:space:]]*\{|[[:space:]]+(fn|impl|trait|extern))' \
  src benches examples fuzz/fuzz_targets fuzz/src --include='*.rs' 2>/dev/null \
  | grep -v '^src/unsafe_core/' | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//' || true)
if [ -n "$outside" ]; then
  echo "unsafe code outside src/unsafe_core/:"; echo "$outside"; fail=1
fi
allow=$(grep -rn 'allow(unsafe_code)' src --include='*.rs' | grep -v '^src/lib.rs:.*allow(unsafe_code)' || true)
if [ -n "$allow" ]; then
  echo "allow(unsafe_code) outside the one line in src/lib.rs:"; echo "$allow"; fail=1
fi

# 2. Every unsafe block / impl in the core has a SAFETY comment within the
#    12 lines above it.
while IFS=: read -r file line _; do
  start=$((line > 12 ? line - 12 : 1))
  if ! sed -n "${start},${line}p" "$file" | grep -q 'SAFETY: \['; then
    echo "$file:$line: unsafe without a '// SAFETY: [ID]' comment"; fail=1
  fi
done < <(grep -rnE 'unsafe[[:space:]]*\{|unsafe impl' src/unsafe_core --include='*.rs' \
          | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//')

# 3. IDs cited vs listed.
cited=$(grep -rhoE 'SAFETY: (\[[A-Z0-9-]+\]/?)+' src/unsafe_core --include='*.rs' \
        | grep -oE '\[[A-Z0-9-]+\]' | tr -d '[]' | grep -vx ID | sort -u)
listed=$(grep -oE '^### \[[A-Z0-9-]+\]' SAFETY.md | grep -oE '[A-Z0-9-]+' | sort -u)
for id in $cited; do
  grep -qx "$id" <<<"$listed" || { echo "SAFETY.md lacks an entry for cited ID [$id]"; fail=1; }
done
for id in $listed; do
  grep -qx "$id" <<<"$cited" || { echo "SAFETY.md lists [$id] but no SAFETY comment cites it"; fail=1; }
  entry=$(awk -v id="### [$id]" 'index($0, id) == 1 {on=1; next} /^##/ {on=0} on' SAFETY.md)
  grep -q 'Checked by' <<<"$entry" || { echo "SAFETY.md entry [$id] names no check"; fail=1; }
done

if [ "$fail" -ne 0 ]; then exit 1; fi
echo "safety-ids: $(wc -w <<<"$cited") IDs cited and listed, all with checks; no unsafe outside src/unsafe_core"
