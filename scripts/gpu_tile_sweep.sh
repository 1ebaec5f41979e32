#!/usr/bin/env bash
# Tile sweep on one GPU machine, for the planner's rules: every layer of a suite with the planner's
# own choice ("auto") and forced to each named tile, from the staged bundle (.gpu-bundle). No cuDNN.
# An entry TILE:N also forces N row slices (--split-k N); "auto:N" keeps the planner's tile. The
# tiles are implicit_mma's unless ALGO names another family (ALGO=implicit_precomp: the FFMA tiles).
#   usage: TILES="wgmma128x128_s3 wgmma128x128_s3_tma" scripts/gpu_tile_sweep.sh SUITE [mconv bench options...]
#   e.g.   TILES="..." scripts/gpu_tile_sweep.sh bench/suites/resnet50.csv --dtype bf16 --layout NHWC
#          TILES="auto:1 auto:4 auto:16" scripts/gpu_tile_sweep.sh bench/suites/resnet50.csv --pass wgrad ...
# Writes $OUT/sweep/<suite>_<tile>.csv and prints per layer each tile's time (us) and the fastest.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
suite=$1
shift
B=$PWD/.gpu-bundle
bash scripts/unpack_gpu_bundle.sh "$B"  # stage_gpu_bundle.sh packs the library
export LD_LIBRARY_PATH=$B:${LD_LIBRARY_PATH:-}
mkdir -p "$OUT/sweep"
name=$(basename "$suite" .csv)
tiles=(auto ${TILES:-})
for t in "${tiles[@]}"; do
  force=()
  tile=${t%%:*}
  [ "$tile" != auto ] && force=(--algo "${ALGO:-implicit_mma}" --tile "$tile")
  [ "$tile" != "$t" ] && force+=(--split-k "${t#*:}")
  "$B/mconv" bench --suite "$suite" "${force[@]}" "$@" --format csv > "$OUT/sweep/${name}_$t.csv" 2> "$OUT/sweep/${name}_$t.err"
  echo "$name $t: exit $?" >&2
done
python3 - "$OUT/sweep" "$name" "${tiles[@]}" <<'PY'
import csv, math, sys
d, name, tiles = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = {}
for t in tiles:
    try:
        runs[t] = {r["name"]: r for r in csv.DictReader(open(f"{d}/{name}_{t}.csv"))}
    except (OSError, csv.Error):
        runs[t] = {}
layers = list(runs["auto"].keys())
short = [t.replace("wgmma", "") for t in tiles]
print(f"{'layer':24s}" + "".join(f"{s:>16s}" for s in short) + "  fastest (auto's tile)")
logs = {t: [] for t in tiles}
for layer in layers:
    cells, best = [], None
    for t in tiles:
        r = runs[t].get(layer)
        ok = r is not None and r.get("correct", "1") == "1" and r.get("ms")
        us = float(r["ms"]) * 1e3 if ok else float("nan")
        cells.append(f"{us:16.2f}" if ok else f"{'-':>16s}")
        if ok:
            logs[t].append(math.log(float(runs["auto"][layer]["ms"]) * 1e3 / us))
            if best is None or us < best[1]: best = (t, us)
    print(f"{layer[:24]:24s}" + "".join(cells) + f"  {best[0] if best else '-'} ({runs['auto'][layer].get('tile', '')})")
print(f"{'speed-up over auto':24s}" + "".join(f"{math.exp(sum(v) / len(v)) if v else float('nan'):16.4f}" for v in logs.values()))
PY
