#!/usr/bin/env bash
# The one-way rule: a layer of src/ includes only from the layers listed before it (and from the
# public headers in include/mconv). Prints each violating include and exits 1 if there is one.
#   include/mconv -> core, io -> plan -> algorithms, cpu -> selection -> runtime -> capi
set -euo pipefail
cd "$(dirname "$0")/.."
layers=(core io plan algorithms cpu selection runtime capi)
rank() {
  case "$1" in
    core | io) echo 0 ;;
    plan) echo 1 ;;
    algorithms | cpu) echo 2 ;;
    selection) echo 3 ;;
    runtime) echo 4 ;;
    capi) echo 5 ;;
    *) echo -1 ;;
  esac
}
bad=0
for layer in "${layers[@]}"; do
  [ -d "src/$layer" ] || continue
  while IFS= read -r hit; do
    file=${hit%%:*}
    inc=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$hit")
    [[ "$inc" == mconv/* ]] && continue                    # public API: every layer may use it
    target=$(realpath -m --relative-to=src "$(dirname "$file")/$inc")
    tl=${target%%/*}
    if [ "$tl" = "$layer" ]; then
      # Inside algorithms/, a family includes only itself and common/.
      if [ "$layer" = algorithms ]; then
        from=$(realpath -m --relative-to=src/algorithms "$file"); from=${from%%/*}
        to=${target#algorithms/}; to=${to%%/*}
        if [ -f "src/algorithms/$from" ] || [ "$to" = common ] || [ "$to" = "$from" ] || [ -f "src/algorithms/$to" ]; then continue; fi
        echo "$hit: family $from includes family $to"; bad=1
      fi
      continue
    fi
    if [ "$(rank "$tl")" -lt 0 ] || [ "$(rank "$tl")" -ge "$(rank "$layer")" ]; then
      echo "$hit: $layer includes $tl (not a layer below it)"; bad=1
    fi
  done < <(grep -rnE '^#include "' "src/$layer" || true)
done
# The public headers include nothing from src/.
if grep -rnE '^#include "\.\./' include/mconv; then echo "public headers include from src/"; bad=1; fi
[ $bad -eq 0 ] && echo "layers: every include runs one way"
exit $bad
