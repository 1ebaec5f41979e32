#!/usr/bin/env bash
# One call on a GPU machine: GPU tests, compute-sanitizer (memcheck, racecheck), and the benchmark of
# every suite against cuDNN, from binaries staged by scripts/stage_gpu_bundle.sh. Logs go to $OUT
# (packed into results.tar.gz) and a summary is printed last.
#   usage: scripts/gpu_run.sh [suite ...]   (default: the five suites of BENCHMARKING.md, and mconv's own
#   efficientnet_dw5: EfficientNet-B0's 5x5 depthwise layers)
#   SKIP_SANITIZER=1, SKIP_BENCH=1, SKIP_NHWC=1 leave those parts out (to split a run over two calls).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
LOG=$OUT/logs
mkdir -p "$LOG"
B=$PWD/.gpu-bundle
export LD_LIBRARY_PATH=$B:${LD_LIBRARY_PATH:-}
suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(resnet50 vgg16 multi_channel single_channel depthwise efficientnet_dw5)

nvidia-smi > "$LOG/nvidia-smi.txt" 2>&1
ldd "$B/mconv" | grep "not found" && echo "missing libraries" | tee -a "$LOG/summary.txt"
XDG_CACHE_HOME=$OUT/cache "$B/mconv" device 2>&1 | tee "$LOG/device.txt"
XDG_CACHE_HOME=$OUT/cache "$B/mconv" device 2>&1 | tail -1 | tee -a "$LOG/device.txt"   # second call: from the cache
echo '{"version": 1, "name": "broken' > "$OUT/cache/mconv/"hardware-*.json
XDG_CACHE_HOME=$OUT/cache "$B/mconv" device 2>&1 | tail -1 | tee -a "$LOG/device.txt"   # corrupt cache: measured again
rm -rf "$OUT/cache"

echo "== CPU tests on the GPU machine (those that need a device run here)" | tee -a "$LOG/summary.txt"
"$B/mconv_tests" > "$LOG/cpu_tests.log" 2>&1; echo "cpu tests exit $?" | tee -a "$LOG/summary.txt"
echo "== GPU tests" | tee -a "$LOG/summary.txt"
timeout 400 "$B/mconv_gpu_tests" > "$LOG/gpu_tests.log" 2>&1; echo "gpu tests exit $?" | tee -a "$LOG/summary.txt"
grep -E "MCONV_TEST_SEED|PASSED|FAILED|SKIPPED" "$LOG/gpu_tests.log" | head -20 | tee -a "$LOG/summary.txt"

if [ -z "${SKIP_SANITIZER:-}" ]; then
  echo "== compute-sanitizer" | tee -a "$LOG/summary.txt"
  MCONV_GPU_TEST_FEW=1 timeout 240 compute-sanitizer --tool memcheck --error-exitcode 3 "$B/mconv_gpu_tests" \
    --gtest_filter='*RandomProblems*:*EdgeCasesFloat*:*HostPointers*:*SplitK*:*DirectBlock*:*SingleChannel*:*StrideFixed*' > "$LOG/memcheck.log" 2>&1
  echo "memcheck exit $?: $(grep -E 'ERROR SUMMARY' "$LOG/memcheck.log" | tail -1)" | tee -a "$LOG/summary.txt"
  # StrideFixed runs its own racecheck on the edge cases and 3 random problems: with the full random
  # set the run outlasted 240 s (H100, 2026-11-22).
  MCONV_GPU_TEST_FEW=1 timeout 240 compute-sanitizer --tool racecheck --error-exitcode 3 "$B/mconv_gpu_tests" \
    --gtest_filter='*EdgeCasesExactEveryTile*:*SplitK*:*DirectBlockEdge*:*DirectBlockDepthwise*:*SingleChannel*' > "$LOG/racecheck.log" 2>&1
  echo "racecheck exit $?: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$LOG/racecheck.log" | tail -1)" | tee -a "$LOG/summary.txt"
  MCONV_GPU_TEST_FEW=1 MCONV_GPU_TEST_RANDOM=3 timeout 280 compute-sanitizer --tool racecheck --error-exitcode 3 \
    "$B/mconv_gpu_tests" --gtest_filter='*StrideFixed*' > "$LOG/racecheck_stride_fixed.log" 2>&1
  echo "racecheck stride_fixed exit $?: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$LOG/racecheck_stride_fixed.log" | tail -1)" | tee -a "$LOG/summary.txt"
fi

[ -n "${SKIP_BENCH:-}" ] && suites=()
for s in "${suites[@]}"; do
  echo "== bench $s" | tee -a "$LOG/summary.txt"
  timeout 300 "$B/mconv" bench --suite "bench/suites/$s.csv" --vs cudnn --all-algos --out "$LOG/$s" > "$LOG/$s.txt" 2> "$LOG/$s.err"
  echo "exit $?" >> "$LOG/summary.txt"
  tail -1 "$LOG/$s.txt" | tee -a "$LOG/summary.txt"
done
if [[ " ${suites[*]} " == *" multi_channel "* ]]; then  # issue 4's target: the stride-fixed kernel alone
  echo "== bench multi_channel, stride_fixed alone" | tee -a "$LOG/summary.txt"
  timeout 300 "$B/mconv" bench --suite bench/suites/multi_channel.csv --algo stride_fixed --vs cudnn \
    --out "$LOG/multi_channel_stride_fixed" > "$LOG/multi_channel_stride_fixed.txt" 2> "$LOG/multi_channel_stride_fixed.err"
  tail -1 "$LOG/multi_channel_stride_fixed.txt" | tee -a "$LOG/summary.txt"
fi
# Issue 4's suites against Find's own picks as well (the peers of the tenth session and before; the
# default times every candidate Find returns and keeps the fastest).
for s in "${suites[@]}"; do
  [[ "$s" == single_channel || "$s" == depthwise || "$s" == multi_channel ]] || continue
  extra=(); [[ "$s" == multi_channel ]] && extra=(--algo stride_fixed)
  echo "== bench $s ${extra[*]}, cuDNN peers = Find's picks" | tee -a "$LOG/summary.txt"
  timeout 300 "$B/mconv" bench --suite "bench/suites/$s.csv" "${extra[@]}" --vs cudnn --peer-candidates 1 \
    --out "$LOG/${s}_find_pick" > "$LOG/${s}_find_pick.txt" 2> "$LOG/${s}_find_pick.err"
  tail -1 "$LOG/${s}_find_pick.txt" | tee -a "$LOG/summary.txt"
done
if [ -z "${SKIP_NHWC:-}" ] && [ -z "${SKIP_BENCH:-}" ]; then
  echo "== bench resnet50 NHWC" | tee -a "$LOG/summary.txt"
  timeout 300 "$B/mconv" bench --suite bench/suites/resnet50.csv --layout NHWC --vs cudnn --out "$LOG/resnet50_nhwc" > "$LOG/resnet50_nhwc.txt" 2> "$LOG/resnet50_nhwc.err"
  tail -1 "$LOG/resnet50_nhwc.txt" | tee -a "$LOG/summary.txt"
fi
python3 scripts/plot_bench.py "$LOG" > "$LOG/plot.log" 2>&1 || echo "plot failed" | tee -a "$LOG/summary.txt"
tar -C "$OUT" -czf "$OUT/results.tar.gz" logs && find "$LOG" -type f ! -name summary.txt -delete
echo; echo "==== summary"; cat "$LOG/summary.txt"; for s in "${suites[@]}"; do tar -xzOf "$OUT/results.tar.gz" "logs/$s.txt" | cut -c1-200; done
