#!/usr/bin/env bash
# Checks that every C++/CUDA line changed since BASE follows .clang-format
# (Debian 12's clang-format 14), leaving the untouched lines of older files as
# they are. Prints the fix as a diff and exits 1 when there is one.
# Usage: scripts/check-format.sh [--fix] [BASE]
#   --fix  applies the fix to the working tree instead
#   BASE   default: the commit the check began at, so every line written since is held to it
# Exit 4 (ctest: skipped, with the reason) where clang-format or BASE is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
fix=()
if [[ "${1:-}" == "--fix" ]]; then fix=(-i); shift; fi
base=${1:-9d899ba9fddeec439ee9d523b8060b2c16421ddd}
if ! command -v clang-format-diff >/dev/null; then
  echo "check-format: skipped: clang-format is not installed (scripts/install-deps.sh --with-test-extras installs it)"
  exit 4
fi
if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
  echo "check-format: skipped: $base is not in this clone's history (a shallow clone?)"
  exit 4
fi
# -M: a moved file counts only its changed lines.
changes=$(git diff -U0 -M --no-color "$base" -- '*.h' '*.cpp' '*.cu' '*.cuh')
fixes=$(clang-format-diff -p1 "${fix[@]}" <<<"$changes")
if [[ -n "$fixes" ]]; then
  printf '%s\n' "$fixes"
  echo "check-format: the lines above changed since ${base:0:12} do not follow .clang-format;" \
    "scripts/check-format.sh --fix formats them"
  exit 1
fi
echo "check-format: every changed line since ${base:0:12} follows .clang-format"
