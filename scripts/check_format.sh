#!/usr/bin/env bash
# Every C++ and CUDA file of the repository formatted by .clang-format (exit 1 and the file names
# otherwise). `scripts/check_format.sh --fix` formats them in place.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h' '*.hpp.in')
if [ "${1:-}" = --fix ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
if ! clang-format --dry-run --Werror "${files[@]}" 2> /tmp/mconv-format.$$; then
  grep -oE '^[^:]+\.(cpp|hpp|cu|cuh|h|in)' /tmp/mconv-format.$$ | sort -u
  rm -f /tmp/mconv-format.$$
  echo "format: run scripts/check_format.sh --fix"
  exit 1
fi
rm -f /tmp/mconv-format.$$
echo "format: every file as .clang-format says"
