#!/usr/bin/env bash
# Diagnosis on a GPU machine (not part of CI): Nsight Compute on one launch per layer of a suite, for
# the kernels that match a name, from binaries staged by scripts/stage_gpu_bundle.sh. Reports go to
# $OUT/ncu/<layer>.txt and the headline metrics are printed.
#   usage: scripts/ncu_layers.sh SUITE.csv ALGO KERNEL_REGEX   e.g. bench/suites/single_channel.csv single_channel single_channel_kernel
# NCU_BENCH_ARGS adds mconv bench options (e.g. "--dtype bf16"), NCU_TAG a suffix to the reports' names.
set -u
cd "$(dirname "$0")/.."
suite=$1 algo=$2 kernel=$3
OUT=${OUT:-$PWD/gpu-out}
B=$PWD/.gpu-bundle
bash scripts/unpack_gpu_bundle.sh "$B"  # stage_gpu_bundle.sh packs the library
export LD_LIBRARY_PATH=$B:${LD_LIBRARY_PATH:-}
mkdir -p "$OUT/ncu"
one=$(mktemp)
tail -n +2 "$suite" | while IFS=, read -r name rest; do
  { head -1 "$suite"; grep "^$name," "$suite"; } > "$one"
  ncu --section SpeedOfLight --section LaunchStats --section Occupancy --section WorkloadDistribution \
    --section SchedulerStats --section WarpStateStats -k "regex:$kernel" -c 1 \
    "$B/mconv" bench --suite "$one" --algo "$algo" --timing loop --launches 1 --repeats 1 ${NCU_BENCH_ARGS:-} > "$OUT/ncu/$name${NCU_TAG:-}.txt" 2>&1
  echo "== $name${NCU_TAG:-}"
  grep -E "Duration|DRAM Throughput|Compute \(SM\) T|Registers Per|Block Size|Grid Size|Achieved Occupancy|SM Active Cycles|Elapsed Cycles|Issued Warp" "$OUT/ncu/$name${NCU_TAG:-}.txt"
done
rm -f "$one"
