#!/usr/bin/env bash
# Checks that every tracked C++/CUDA file follows .clang-format (Debian 12's
# clang-format 14). Prints each file that does not and exits 1.
# Usage: scripts/check-format.sh [--fix]
#   --fix  formats those files in place instead
# Exit 4 (ctest: skipped, with the reason) where clang-format or git is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "check-format: skipped: clang-format is not installed (scripts/install-deps.sh --with-test-extras installs it)"
  exit 4
fi
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "check-format: skipped: not a git checkout, so the tracked files are unknown"
  exit 4
fi
mapfile -t files < <(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh')
if [[ "${1:-}" == "--fix" ]]; then
  clang-format -i "${files[@]}"
  echo "check-format: formatted ${#files[@]} files"
  exit 0
fi
mapfile -t off < <(clang-format --dry-run "${files[@]}" 2>&1 | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: warning:.*/\1/p' | sort -u)
if ((${#off[@]} > 0)); then
  printf '%s\n' "${off[@]}"
  echo "check-format: ${#off[@]} of ${#files[@]} files above do not follow .clang-format;" \
    "scripts/check-format.sh --fix formats them"
  exit 1
fi
echo "check-format: all ${#files[@]} C++/CUDA files follow .clang-format"
