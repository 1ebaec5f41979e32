#!/usr/bin/env bash
# Build, then every test (GPU tests skip with a message where there is no GPU), the Python package
# (installed into build-py/venv, tests with pytest), then the same CPU and CLI tests under
# AddressSanitizer + UndefinedBehaviorSanitizer, the threaded Engine tests under ThreadSanitizer, and
# the fuzzers for FUZZ_SECONDS each (default 60). MCONV_QUICK=1 stops after the first part.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
(cd build && ctest --output-on-failure -j"$(nproc)")
[ -n "${MCONV_QUICK:-}" ] && exit 0
scripts/test_python.sh

cpu_only=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DMCONV_ENABLE_CUDA=OFF -DMCONV_NATIVE=OFF)
echo "== AddressSanitizer + UndefinedBehaviorSanitizer: CPU and CLI tests"
cmake -S . -B build-asan "${cpu_only[@]}" -DMCONV_SANITIZE=address,undefined > /dev/null
cmake --build build-asan -j"$(nproc)" > build-asan.log 2>&1 || { tail -40 build-asan.log; exit 1; }
# install.find_package builds a consumer without the sanitizer runtime: it runs in the plain build only.
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j"$(nproc)" -L cpu -E install.find_package)

echo "== ThreadSanitizer: Engines shared across threads"
cmake -S . -B build-tsan "${cpu_only[@]}" -DMCONV_BUILD_TOOLS=OFF -DMCONV_SANITIZE=thread > /dev/null
cmake --build build-tsan -j"$(nproc)" --target mconv_tests > build-tsan.log 2>&1 || { tail -40 build-tsan.log; exit 1; }
# libgomp is not built for ThreadSanitizer (its reused worker stacks read as races), so the OpenMP
# workers are off here: the threads under test are the Engine's callers.
OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/mconv_tests --gtest_filter='Engine.*'

echo "== libFuzzer"
scripts/fuzz.sh
