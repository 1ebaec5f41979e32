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
mkdir -p $L
timeout 120 ncu --kernel-name regex:bulk --launch-count 50 --metrics gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,lts__t_sectors_op_write.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,launch__grid_size $B/mconv bench --suite bench/suites/depthwise.csv --launches 1 --repeats 1 > $L/ncu.txt 2>&1
grep -E "gpu__time|inst_exec|issue_active|dram__|warps_active|bank_conf|sectors_op_write|stalled|grid_size" $L/ncu.txt | awk 'NR%65<13' | head -80
tar -C $OUT -czf $OUT/r2.tgz l
