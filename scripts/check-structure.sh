#!/usr/bin/env bash
# The code base's structural limits, checked on every test run (ctest
# structure_limits) so that they keep holding for the code that comes later:
#   - no production .cc/.h file over 800 lines;
#   - no function over 120 lines (function end lines from Universal Ctags);
#   - core/, client/ and persistence/ keep their code in subfolders by concern.
# Prints each breach with its file and line; exits 1 if there is any.
#   scripts/check-structure.sh [source-dir]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

readonly rooms=(base core client persistence objectstore service rules_engine metrics)
readonly max_file_lines=800
readonly max_function_lines=120
breaches=0

if ! ctags --version 2>/dev/null | grep -q "Universal Ctags"; then
  echo "check-structure: Universal Ctags is missing (Debian: universal-ctags;" \
    "scripts/install-deps.sh installs it)" >&2
  exit 2
fi

while read -r lines file; do
  if [ "$file" != total ] && [ "$lines" -gt "$max_file_lines" ]; then
    echo "$file: $lines lines (at most $max_file_lines: split it by job)"
    breaches=$((breaches + 1))
  fi
done < <(find "${rooms[@]}" -type f \( -name '*.cc' -o -name '*.h' \) -print0 |
  xargs -0 wc -l)

while read -r end start file name; do
  length=$((end - start + 1))
  if [ "$length" -gt "$max_function_lines" ]; then
    echo "$file:$start: $name is $length lines (at most $max_function_lines:" \
      "make it a sequence of named steps)"
    breaches=$((breaches + 1))
  fi
done < <(ctags -R --languages=C++ --kinds-C++=f --fields=+ne -x \
  --_xformat='%{end} %{line} %F %N' "${rooms[@]}")

for room in core client persistence; do
  loose=$(find "$room" -maxdepth 1 -type f -name '*.cc' | wc -l)
  folders=$(find "$room" -mindepth 1 -maxdepth 1 -type d | wc -l)
  if [ "$folders" -lt 2 ]; then
    echo "$room/: $folders subfolders (its code lives in subfolders by concern)"
    breaches=$((breaches + 1))
  elif [ "$room" != persistence ] && [ "$loose" -gt 0 ]; then
    echo "$room/: $loose .cc files at the top (they belong in a subfolder by concern)"
    breaches=$((breaches + 1))
  fi
done

if [ "$breaches" -gt 0 ]; then
  echo "check-structure: $breaches breaches"
  exit 1
fi
echo "check-structure: files <= $max_file_lines lines, functions <= $max_function_lines lines," \
  "core/ client/ persistence/ in subfolders"
