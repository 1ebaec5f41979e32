B=$PWD/.gpu-bundle; export LD_LIBRARY_PATH=$B
timeout 100 $B/mconv_gpu_tests --gtest_filter='*SingleChannel*' 2>&1 | grep -E "^\[  (PASSED|FAILED)" | tr '\n' ' '
for i in 1 2; do $B/mconv bench --suite bench/suites/depthwise.csv > $OUT/dw$i.txt 2>&1; echo "$(awk 'NR>3 && NF>5 {printf "%s ", $4}' $OUT/dw$i.txt)"; done
