#!/usr/bin/env bash
# The CLI under bad input: every case must exit with its documented code and a message naming the bad
# flag, field or file, and no input file may change. usage: cli_errors.sh MCONV_BINARY TINY_SUITE
set -u
M=$(realpath "$1")
SUITE=$(realpath "$2")
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cd "$W" || exit 1
cp "$SUITE" ok.csv
head -1 ok.csv > header_only.csv
"$M" run --target cpu --c 4 --h 8 --w 8 --k 4 --r 3 --s 3 --save-inputs in > /dev/null 2>&1 || { echo "setup failed"; exit 1; }
printf "\x93NUMPY\x01\x00\x40\x00{'descr': '<f4', 'fortran_order': False, 'shape': }                \n" > no_shape.npy
printf "\x93NUMPY\x01\x00\x40\x00{'descr': '<f4', 'fortran_order': False, 'shape': (1.5, 2), }       \n" > fraction.npy
printf 'not a npy' > garbage.npy
before=$(md5sum ok.csv in_x.npy in_w.npy)
fails=0
# expected exit code | message regex | arguments
while IFS='|' read -r code regex args; do
  [ -z "$code" ] && continue
  out=$(eval "\"$M\" $args" 2>&1)
  rc=$?
  if [ "$rc" != "$code" ] || ! grep -qE -- "$regex" <<<"$out"; then
    echo "FAIL: mconv $args -> exit $rc (want $code), output: $(tail -c 300 <<<"$out")"
    fails=$((fails + 1))
  fi
done <<'CASES'
2|groups: must be >= 1|run --target cpu --c 4 --h 8 --w 8 --k 4 --groups 0
2|stride_h: must be >= 1|run --target cpu --c 4 --h 8 --w 8 --k 4 --stride-h 0
2|stride_w: must be >= 1|plan --c 4 --h 8 --w 8 --k 4 --stride-w 0
2|h: 4294967296 exceeds|run --target cpu --c 4294967296 --h 4294967296
2|n\*p\*q: .* exceed|run --target cpu --c 3000 --h 100000 --w 100000 --k 1
2|n\*p\*q: .* exceed|bench --target cpu --suite ok.csv --batch 100000000
2|--batch|bench --target cpu --suite ok.csv --batch -4
2|--repeats|bench --target cpu --suite ok.csv --repeats -5
2|--split-k|run --target cpu --c 4 --h 8 --w 8 --k 4 --split-k -5
2|--max-rows|plan --c 2 --max-rows -7
2|unknown subcommand 'frobnicate'|frobnicate
2|--n 5 disagrees with in_x.npy|run --target cpu --input in_x.npy --n 5
2|is the --input file|run --target cpu --input in_x.npy --filter in_w.npy --r 3 --s 3 --output in_x.npy
2|is the suite file|bench --target cpu --suite ok.csv --out ok
2|algorithm: unknown name|run --target cpu --c 4 --algo fastest
4|not a regular file|run --target cpu --input .
4|no such file|run --target cpu --input missing.npy
4|shape is not a tuple|run --target cpu --input no_shape.npy
4|expected an integer|run --target cpu --input fraction.npy
4|bad magic|run --target cpu --input garbage.npy
4|header but no layers|bench --target cpu --suite header_only.csv
4|no such file|bench --target cpu --suite missing.csv
4|/no/such/dir/res|bench --target cpu --suite ok.csv --out /no/such/dir/res
4|/dev/full: write failed|run --target cpu --c 4 --h 8 --w 8 --k 4 --output /dev/full
4|is a directory|run --target cpu --c 4 --h 8 --w 8 --k 4 --output .
4|--output: .*does not exist|run --target cpu --c 4 --h 8 --w 8 --k 4 --output /no/such/dir/y.npy
4|--save-inputs: .*does not exist|run --target cpu --c 4 --h 8 --w 8 --k 4 --save-inputs /no/such/dir/in
0|mconv [0-9]+\.[0-9]+|--version
CASES
if [ "$(md5sum ok.csv in_x.npy in_w.npy)" != "$before" ]; then
  echo "FAIL: an input file changed"
  fails=$((fails + 1))
fi
if [ -z "$(command -v nvidia-smi)" ]; then  # a machine without a GPU
  out=$("$M" device 2>&1); rc=$?
  [ "$rc" = 5 ] && grep -q "no CUDA device is visible\|built without CUDA" <<<"$out" || { echo "FAIL: device without a GPU -> $rc: $out"; fails=$((fails + 1)); }
fi
echo "$fails case(s) failed"
[ "$fails" -eq 0 ]
