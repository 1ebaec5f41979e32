#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, AddressSanitizer + UndefinedBehaviorSanitizer, CPU only) into
# build-fuzz/ and runs each for FUZZ_SECONDS (default 60) from the checked-in corpus fuzz/corpus/<name>.
# A crash, leak or sanitizer report fails the run; its input is kept in build-fuzz/artifacts/ and
# belongs in the corpus as a regression case once fixed. Prints each harness's executions.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-60}
mkdir -p build-fuzz
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMCONV_ENABLE_CUDA=OFF \
  -DMCONV_NATIVE=OFF -DMCONV_BUILD_TESTS=OFF -DMCONV_BUILD_TOOLS=OFF -DMCONV_BUILD_FUZZERS=ON \
  -DMCONV_SANITIZE=address,undefined > build-fuzz/configure.log 2>&1 || { cat build-fuzz/configure.log; exit 1; }
cmake --build build-fuzz -j"$(nproc)" --target fuzz_npy fuzz_suite fuzz_problem > build-fuzz/build.log 2>&1 ||
  { tail -50 build-fuzz/build.log; exit 1; }
mkdir -p build-fuzz/artifacts
status=0
for name in npy suite problem; do
  work=build-fuzz/corpus-$name
  rm -rf "$work" && mkdir -p "$work"
  log=build-fuzz/fuzz_$name.log
  if build-fuzz/fuzz/fuzz_$name -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
      -artifact_prefix=build-fuzz/artifacts/$name- "$work" "fuzz/corpus/$name" > "$log" 2>&1; then
    echo "fuzz_$name: $(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | tail -1), no crash ($(ls "$work" | wc -l) new inputs)"
  else
    echo "fuzz_$name: FAILED"; grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$log" | head -10
    status=1
  fi
done
exit $status
