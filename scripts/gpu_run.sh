#!/usr/bin/env bash
# Runs on a GPU machine from binaries staged by scripts/stage_gpu_bundle.sh. Two parts, so that each
# fits one device call:
#   scripts/gpu_run.sh check            GPU tests (a CUDA-graph replay among them), compute-sanitizer
#                                       memcheck and racecheck, the host cost of a call, the hardware model;
#                                       CHECKS (default "tests memcheck racecheck initcheck overhead")
#                                       picks some, to split the part over calls; RACECHECK_TIMEOUT
#                                       (default 320 s) bounds the racecheck run, MEMCHECK_TIMEOUT
#                                       (default 300 s) the memcheck run; MEMCHECK_FILTER and
#                                       RACECHECK_FILTER narrow the sanitizers' gtest filters (the
#                                       default racecheck filter takes longer than 270 s on an H100:
#                                       split it over calls)
#   scripts/gpu_run.sh python           the Python package from .py-bundle (scripts/stage_python_bundle.sh):
#                                       its tests on CPU and GPU, memcheck over the GPU ones, and
#                                       python -m mconv.bench (PY_SUITES, PY_MODELS, host overhead);
#                                       PY_TRAIN=1 trains resnet18, PY_PROFILE=1 profiles its step
#   scripts/gpu_run.sh bench [suite..]  every suite against cuDNN (default: the five of the benchmark
#                                       and efficientnet_dw5, convnext_dw7), plots; PRECISIONS (default
#                                       "fp32:NCHW") lists dtype:layout pairs, each suite runs in each;
#                                       PASS=dgrad|wgrad benchmarks a backward pass instead;
#                                       SUITE_TIMEOUT bounds each suite's run (default 150 s,
#                                       330 s for wgrad: cuDNN's wgrad Find takes ~190 s on resnet50)
#                                       BENCH_ARGS adds mconv bench options, NAME_SUFFIX to the files'
#                                       names (BENCH_ARGS=--deterministic NAME_SUFFIX=_deterministic)
# Logs and results go to $OUT (packed into results-<part>[-$TAG].tar.gz); a summary is printed last.
set -u
cd "$(dirname "$0")/.."
part=${1:-check}
shift || true
OUT=${OUT:-$PWD/gpu-out}
LOG=$OUT/logs
mkdir -p "$LOG"
B=$PWD/.gpu-bundle
bash scripts/unpack_gpu_bundle.sh "$B"  # stage_gpu_bundle.sh packs the library
export LD_LIBRARY_PATH=$B:${LD_LIBRARY_PATH:-}
S=$LOG/summary.txt
say() { echo "$*" | tee -a "$S"; }

if [ "$part" = check ]; then
  checks=" ${CHECKS:-tests memcheck racecheck initcheck overhead} "
  want() { [[ "$checks" == *" $1 "* ]]; }
  nvidia-smi > "$LOG/nvidia-smi.txt" 2>&1
  ldd "$B/mconv" | grep "not found" && say "missing libraries"
  XDG_CACHE_HOME=$OUT/cache "$B/mconv" device > "$LOG/device.txt" 2>&1
  if want tests; then
    say "== CPU tests on the GPU machine"
    "$B/mconv_tests" > "$LOG/cpu_tests.log" 2>&1; say "cpu tests exit $?"
    say "== GPU tests"
    # The suite took 231 s on an H200 (the channels-last test 42 s of it).
    timeout 330 "$B/mconv_gpu_tests" > "$LOG/gpu_tests.log" 2>&1; say "gpu tests exit $?"
    grep -E "MCONV_TEST_SEED|PASSED|FAILED|SKIPPED" "$LOG/gpu_tests.log" | head -20 | tee -a "$S"
  fi
  say "== compute-sanitizer"
  # One tool over the GPU tests matching a filter; says its exit status and summary, or, where the
  # time limit stopped it (exit 124, no summary), how many tests it had finished.
  sanitize() {
    local tool=$1 limit=$2 filter=$3
    timeout "$limit" compute-sanitizer --tool "$tool" --error-exitcode 3 "$B/mconv_gpu_tests" \
      --gtest_filter="$filter" > "$LOG/$tool.log" 2>&1
    local rc=$? summary
    summary=$(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$LOG/$tool.log" | tail -1)
    [ $rc -eq 124 ] && summary="stopped by its $limit s limit after $(grep -c '^\[       OK' "$LOG/$tool.log") tests"
    say "$tool exit $rc: $summary"
  }
  want memcheck && MCONV_GPU_TEST_FEW=1 sanitize memcheck "${MEMCHECK_TIMEOUT:-300}" \
    "${MEMCHECK_FILTER:-*RandomProblems*:*EdgeCasesFloat*:*HostPointers*:*SplitK*:*DirectBlock*:*SingleChannel*:*StrideFixed*:*Graph*:TensorCores.*:BackwardGpu.EdgeCases*:BackwardGpu.ChannelsLast*:BackwardGpu.Dgrad*:BackwardGpu.Wgrad*:BackwardGpu.Strided*:BackwardGpu.HalfDepthwise*:BackwardGpu.DepthwiseWgrad*:BackwardGpu.FewChannel*:DependentLaunch.*}"
  want racecheck && MCONV_GPU_TEST_FEW=1 MCONV_GPU_TEST_RANDOM=3 sanitize racecheck "${RACECHECK_TIMEOUT:-320}" \
    "${RACECHECK_FILTER:-*EdgeCasesExactEveryTile*:TensorCores.Tf32WarpSpecialized*:*SplitK*:*DirectBlockEdge*:*SingleChannel*:*StrideFixed*:TensorCores.VectorAndElement*:TensorCores.Warpgroup*:TensorCores.TensorMap*:TensorCores.ClusterSplits*:BackwardGpu.ChannelsLast*:BackwardGpu.Dgrad*:TensorCores.ChannelsLast*:TensorCores.PlaneStreams*:TensorCores.DirectBlockInHalf*:TensorCores.StripKernelInHalf*:BackwardGpu.HalfDepthwise*:TensorCores.LargeReduction*:BackwardGpu.LargeReduction*:BackwardGpu.Wgrad*:BackwardGpu.DepthwiseWgrad*:BackwardGpu.FewChannel*:TensorCores.FewChannel*:DependentLaunch.FfmaLayers*:DependentLaunch.SingleChannel*}"
  want initcheck && MCONV_GPU_TEST_FEW=1 MCONV_GPU_TEST_RANDOM=3 sanitize initcheck 200 \
    '*EdgeCasesFloat*:*SplitK*:*DirectBlockEdge*:*SingleChannel*:*StrideFixed*:*Graph*:*Deterministic*'
  if want overhead; then
    say "== host cost of one conv2d_forward call (GPU busy)"
    "$B/mconv_host_overhead" "$LOG/host_overhead.csv" 2>&1 | tee -a "$S"
    if [ -x "${OLD_BUNDLE:-}/host_overhead_old" ]; then
      say "-- the same layer through the previous runtime"
      LD_LIBRARY_PATH=$OLD_BUNDLE "$OLD_BUNDLE/host_overhead_old" 2>&1 | tee -a "$S"
    fi
  fi
elif [ "$part" = python ]; then
  P=$PWD/.py-bundle
  for m in torchvision pytest; do
    python3 -c "import $m" 2> /dev/null || python3 -m pip install -q --no-deps "$P"/deps/*.whl >> "$LOG/pip.log" 2>&1
  done
  python3 -m pip install -q --no-deps --force-reinstall "$P"/mconv-*.whl >> "$LOG/pip.log" 2>&1
  say "pip install exit $?: $(python3 -c 'import mconv, torch; print("mconv", mconv.__version__, "cuda", mconv.cuda_available(), "torch", torch.__version__)' 2>&1 | tail -1)"
  say "== Python tests"
  timeout 400 python3 -m pytest -q -p no:cacheprovider tests/python > "$LOG/pytest.log" 2>&1
  say "pytest exit $?: $(tail -1 "$LOG/pytest.log")"
  say "== compute-sanitizer over the op's GPU tests"
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m pytest -q \
    -p no:cacheprovider tests/python/test_conv2d_op.py -k "cuda and not opcheck" > "$LOG/py_memcheck.log" 2>&1
  say "memcheck exit $?: $(grep -E 'ERROR SUMMARY' "$LOG/py_memcheck.log" | tail -1)"
  say "== python -m mconv.bench"
  python3 -m mconv.bench --overhead --out "$LOG/py" > "$LOG/py_overhead.txt" 2>&1; say "overhead exit $?"
  cat "$LOG/py_overhead.txt" >> "$S"
  for pass in ${PY_PASSES:-fwd}; do
    for prec in ${PRECISIONS:-bf16:NHWC tf32:NCHW}; do
      for s in ${PY_SUITES:-resnet50}; do
        tag=${s}_${pass}_${prec%%:*}
        timeout "${SUITE_TIMEOUT:-150}" python3 -m mconv.bench --suite "$s" --pass "$pass" --dtype "${prec%%:*}" \
          --layout "${prec##*:}" --out "$LOG/py" > "$LOG/py_$tag.txt" 2> "$LOG/py_$tag.err"
        say "suite $s $pass $prec exit $?: $(tail -1 "$LOG/py_$tag.txt")"
      done
    done
  done
  if [ -n "${PY_TRAIN:-}" ]; then
    say "== python -m mconv.train"
    timeout "${TRAIN_TIMEOUT:-240}" python3 -m mconv.train --task resnet18 --dtype fp32,bf16 --out "$LOG/py" \
      > "$LOG/train_resnet18.txt" 2>&1
    say "resnet18 exit $?"; cat "$LOG/train_resnet18.txt" >> "$S"
  fi
  if [ -n "${PY_PROFILE:-}" ]; then
    say "== scripts/profile_train_step.py"
    timeout "${TRAIN_TIMEOUT:-240}" python3 scripts/profile_train_step.py --dtype bf16 \
      --csv "$LOG/py/profile_resnet18_bf16.csv" > "$LOG/py/profile_resnet18_bf16.txt" 2>&1
    say "profile exit $?"; cat "$LOG/py/profile_resnet18_bf16.txt" >> "$S"
  fi
  if [ -n "${PY_MODELS-resnet50,mobilenet_v2,convnext_tiny,efficientnet_b0}" ]; then
    timeout "${MODEL_TIMEOUT:-300}" python3 -m mconv.bench --model "${PY_MODELS-resnet50,mobilenet_v2,convnext_tiny,efficientnet_b0}" \
      --batch 1,32 --dtype fp32,bf16 --out "$LOG/py" > "$LOG/py_models.txt" 2> "$LOG/py_models.err"
    say "models exit $?"; cat "$LOG/py_models.txt" >> "$S"
  fi
else
  suites=("$@")
  [ ${#suites[@]} -eq 0 ] && suites=(resnet50 vgg16 multi_channel single_channel depthwise efficientnet_dw5 convnext_dw7)
  suite_limit=150
  [ "${PASS:-fwd}" = wgrad ] && suite_limit=330
  for prec in ${PRECISIONS:-fp32:NCHW}; do
    dtype=${prec%%:*} layout=${prec##*:}
    tag=""
    [ "$layout" != NCHW ] && tag="_$layout"
    [ "$dtype" != fp32 ] && tag="${tag}_$dtype"
    [ "${PASS:-fwd}" != fwd ] && tag="${tag}_$PASS"
    tag="${tag}${NAME_SUFFIX:-}"
    for s in "${suites[@]}"; do
      say "== bench $s $dtype $layout ${PASS:-fwd}"
      timeout "${SUITE_TIMEOUT:-$suite_limit}" "$B/mconv" bench --suite "bench/suites/$s.csv" --vs cudnn --dtype "$dtype" \
        --layout "$layout" --pass "${PASS:-fwd}" ${BENCH_ARGS:-} --out "$LOG/$s$tag" > "$LOG/$s$tag.txt" 2> "$LOG/$s$tag.err"
      say "exit $? $(tail -1 "$LOG/$s$tag.txt")"
    done
  done
  if [[ " ${suites[*]} " == *" convnext_dw7 "* ]]; then
    say "== bench convnext_dw7, cuDNN peers = Find's picks"
    timeout 120 "$B/mconv" bench --suite bench/suites/convnext_dw7.csv --vs cudnn --peer-candidates 1 \
      --out "$LOG/convnext_dw7_find_pick" > "$LOG/convnext_dw7_find_pick.txt" 2> "$LOG/convnext_dw7_find_pick.err"
    say "exit $? $(tail -1 "$LOG/convnext_dw7_find_pick.txt")"
  fi
  python3 scripts/plot_bench.py "$LOG" > "$LOG/plot.log" 2>&1 || say "plot failed"
fi
tar -C "$OUT" -czf "$OUT/results-$part${TAG:+-$TAG}.tar.gz" logs && find "$LOG" -type f ! -name summary.txt -delete
echo; echo "==== summary"; cat "$S"
