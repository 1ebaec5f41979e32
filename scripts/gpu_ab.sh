#!/usr/bin/env bash
# A/B timing of builds on one GPU machine: the staged bundle (.gpu-bundle, "new") against other
# builds staged into .gpu-bundle/<name>/ (their libmconv and mconv; "old" by default), taking turns
# (old, new, old, new ...) so that clock and thermal drift fall on all. No cuDNN: only mconv is timed.
# A variant may also be LABEL=BUILD:OPTIONS, the build's mconv with comma-separated options of its
# own, to compare a switch within one build.
#   usage: [AB_VARIANTS="old new x"] scripts/gpu_ab.sh ROUNDS SUITE [mconv bench options...]
#   e.g.   scripts/gpu_ab.sh 2 bench/suites/multi_channel.csv --algo stride_fixed
#          AB_VARIANTS="off=new:--no-dependent-launch on=new" scripts/gpu_ab.sh 2 bench/suites/depthwise.csv
# Writes $OUT/ab/<variant>_<i>.csv and prints the per-layer medians side by side, and each variant's
# geometric-mean speed-up over the first.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
rounds=$1 suite=$2
shift 2
B=$PWD/.gpu-bundle
mkdir -p "$OUT/ab"
variants=(${AB_VARIANTS:-old new})
labels=()
for v in "${variants[@]}"; do labels+=("${v%%=*}"); done
for i in $(seq 1 "$rounds"); do
  for v in "${variants[@]}"; do
    label=${v%%=*} build=${v#*=} own=""
    [[ "$build" == *:* ]] && own=${build#*:} build=${build%%:*}
    dir=$B; [ "$build" != new ] && dir=$B/$build
    LD_LIBRARY_PATH=$dir "$dir/mconv" bench --suite "$suite" "$@" ${own//,/ } --format csv > "$OUT/ab/${label}_$i.csv" \
      2> "$OUT/ab/${label}_$i.err"
    echo "$label run $i: exit $?"
  done
done
python3 - "$OUT/ab" "$rounds" "${labels[@]}" <<'EOF'
import csv, statistics, sys, math
d, rounds, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
runs = {v: [list(csv.DictReader(open(f"{d}/{v}_{i}.csv"))) for i in range(1, rounds + 1)] for v in variants}
names = [r["name"] for r in runs[variants[0]][0]]
print(f"{'layer':26s}" + "".join(f"{v + ' us':>10s}" for v in variants) + f"   (medians of {rounds} runs)")
logs = {v: [] for v in variants}
for k, name in enumerate(names):
    t = {v: statistics.median(float(r[k]["ms"]) * 1e3 for r in runs[v]) for v in variants}
    ok = all(r[k].get("correct", "1") == "1" for v in variants for r in runs[v])
    for v in variants: logs[v].append(math.log(t[variants[0]] / t[v]))
    print(f"{name:26s}" + "".join(f"{t[v]:10.2f}" for v in variants) + ("" if ok else "  NOT CHECKED OK"))
print(f"{'speed-up over ' + variants[0]:26s}" + "".join(f"{math.exp(sum(logs[v]) / len(logs[v])):10.4f}" for v in variants))
EOF
