#!/usr/bin/env bash
# Checks that every C++ and CUDA source follows .clang-format (Google's style, 120 columns), as CI
# does. Prints the files that differ and exits 1; exits 0 when all follow it. Changes nothing:
# `clang-format -i FILE` reformats a file.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check_format: clang-format is not installed (apt-get install clang-format)"; exit 1; }
mapfile -t files < <(git ls-files '*.h' '*.cpp' '*.cuh' '*.cu')
if clang-format --dry-run --Werror "${files[@]}" 2>/tmp/check_format.$$; then
  echo "check_format: ${#files[@]} files follow .clang-format"
  rm -f /tmp/check_format.$$
else
  grep -o '^[^:]*:[0-9]*:[0-9]*: error' /tmp/check_format.$$ | cut -d: -f1 | sort -u | sed 's/^/  not formatted: /'
  rm -f /tmp/check_format.$$
  echo "check_format: FAIL (run clang-format -i on the files above)"
  exit 1
fi
