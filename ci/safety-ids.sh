#!/usr/bin/env bash
# Keeps the SAFETY comments of src/unsafe_core and SAFETY.md in step:
# - `unsafe` appears in code only under src/unsafe_core/ (tests/ are
#   checked by `cargo test --test unsafe_fence`, which strips strings);
# - every `unsafe {` block and `unsafe impl` there carries a `SAFETY: [ID]`;
# - every cited ID is listed in SAFETY.md (as a `### [ID]` heading);
# - every listed ID is cited somewhere and has a "Checked by" line;
# - every test, model, module and file a "Checked by" line names exists.
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

# 4. Every check an entry names exists: in each "Checked by" paragraph,
#    `file.rs` must exist, `file.rs::[mod::]name` and the `::name` or bare
#    `snake_case_name` items that follow it must be a `fn` (a test or a loom
#    model) or `mod` in that file, `crate_mod::path::name` must resolve under
#    src/, and `Type::method` must name a type and a method in src/.
has_item() { # file name -> whether `fn name` or `mod name` is in file
  grep -qE "(fn|mod)[[:space:]]+$2([^a-zA-Z0-9_]|\$)" "$1"
}
check_name() { # what file name
  if [ ! -f "$2" ]; then
    echo "SAFETY.md: $1 cites \`$2\`, which does not exist"; fail=1
  elif ! has_item "$2" "$3"; then
    echo "SAFETY.md: $1 cites \`$3\`, which $2 does not define"; fail=1
  else
    checked=$((checked + 1))
  fi
}
checked=0
while IFS= read -r id; do
  entry=$(awk -v id="### [$id]" 'index($0, id) == 1 {on=1; next} /^##/ {on=0} on' SAFETY.md \
          | awk '/Checked by/ {on=1} on && /^$/ {on=0} on')
  file=""
  while IFS= read -r tok; do
    tok=${tok//\`/}
    case "$tok" in
      *.rs::*)
        file=${tok%%::*}; check_name "[$id]" "$file" "${tok##*::}" ;;
      *.rs|*.sh|*.md)
        if [ -f "$tok" ]; then checked=$((checked + 1)); else
          echo "SAFETY.md: [$id] cites \`$tok\`, which does not exist"; fail=1; fi
        case "$tok" in *.rs) file=$tok ;; esac ;;
      ::*)
        check_name "[$id]" "${file:-?}" "${tok#::}" ;;
      [A-Z]*::*)
        ty=${tok%%::*}; method=${tok##*::}
        if grep -rqE "(struct|enum|trait)[[:space:]]+$ty\b" src \
           && grep -rqE "fn[[:space:]]+$method\b" src; then checked=$((checked + 1)); else
          echo "SAFETY.md: [$id] cites \`$tok\`, not found in src/"; fail=1; fi ;;
      [a-z]*::*)
        # A module path from the crate root: the longest prefix that is a
        # file under src/, then items inside it.
        IFS=: read -ra segs <<<"${tok//::/:}"
        found=""
        for ((k = ${#segs[@]}; k >= 1; k--)); do
          base="src/$(IFS=/; echo "${segs[*]:0:k}")"
          for cand in "$base.rs" "$base/mod.rs"; do
            if [ -z "$found" ] && [ -f "$cand" ]; then found=$cand; rest=("${segs[@]:k}"); fi
          done
        done
        if [ -z "$found" ]; then
          echo "SAFETY.md: [$id] cites \`$tok\`, no such module under src/"; fail=1
        else
          for item in "${rest[@]}"; do check_name "[$id]" "$found" "$item"; done
        fi ;;
      compile_fail) ;;
      *)
        if [[ "$tok" =~ ^[a-z][a-z0-9]*(_[a-z0-9]+)+$ ]]; then
          if [ -n "$file" ]; then check_name "[$id]" "$file" "$tok"; else
            echo "SAFETY.md: [$id] cites \`$tok\` before naming its file"; fail=1; fi
        fi ;;
    esac
  done < <(grep -oE '`[^`]+`' <<<"$entry")
done <<<"$listed"

if [ "$fail" -ne 0 ]; then exit 1; fi
echo "safety-ids: $(wc -w <<<"$cited") IDs cited and listed, all with checks ($checked cited tests, models and files exist); no unsafe outside src/unsafe_core"
