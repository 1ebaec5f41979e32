set -u
B=$PWD/.gpu-bundle; export LD_LIBRARY_PATH=$B
mkdir -p $OUT/l; L=$OUT/l
timeout 200 $B/mconv_gpu_tests --gtest_filter='*SingleChannel*:*DirectBlockDepthwise*' > $L/gt.txt 2>&1; echo "gtest $?"; grep -E "FAILED|PASSED|Failure" $L/gt.txt | head -20; grep -B2 -A8 Failure $L/gt.txt | head -60
MCONV_GPU_TEST_FEW=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 $B/mconv_gpu_tests --gtest_filter='*SingleChannelBulk*' > $L/mc.txt 2>&1; echo "memcheck $?"; tail -3 $L/mc.txt
MCONV_GPU_TEST_FEW=1 timeout 150 compute-sanitizer --tool racecheck --error-exitcode 3 $B/mconv_gpu_tests --gtest_filter='*SingleChannelBulk*' > $L/rc.txt 2>&1; echo "racecheck $?"; tail -3 $L/rc.txt
$B/mconv bench --suite bench/suites/depthwise.csv --vs cudnn --graph --out $L/dw_graph > $L/dw_graph.txt 2>$L/dw_graph.err
$B/mconv bench --suite bench/suites/depthwise.csv --algo single_channel --tile single_channel_planes --graph > $L/dw_old.txt 2>&1
cut -c1-60,61-200 $L/dw_graph.txt; cat $L/dw_old.txt | cut -c1-90
tar -C $OUT -czf $OUT/r.tgz l && rm -rf $L
