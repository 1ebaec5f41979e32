set -u
B=$PWD/.gpu-bundle; export LD_LIBRARY_PATH=$B
mkdir -p $OUT/l; L=$OUT/l
$B/mconv bench --suite bench/suites/depthwise.csv --vs cudnn --graph > $L/dw_graph.txt 2>&1
$B/mconv bench --suite bench/suites/depthwise.csv --algo single_channel --tile single_channel_planes --graph > $L/dw_old.txt 2>&1
grep -E "^mbv2|total" $L/dw_graph.txt | cut -c1-60,100-140; grep -E "^mbv2|total" $L/dw_old.txt | cut -c1-60
