#!/usr/bin/env bash
# ncu at 8192: step 26's wide block-scaled tile next to its 128 x 128 one (issue 21).
cd "$(dirname "$0")"
R=/tmp/res; mkdir -p $R
save() { tar czf $OUT/res.tgz -C /tmp res; }
[ -x host ] || tar xzf bin.tgz
M='regex:^smsp__average_warps_issue_stalled_(barrier|gmma|wait|long_scoreboard|dispatch_stall|math_pipe_throttle)_per_issue_active\.ratio$,lts__t_sectors_op_read.sum,l1tex__m_xbar2l1tex_read_bytes.sum,smsp__inst_executed.sum'
for k in wgmma_e4m3_blocks_128x192x128_s4 wgmma_e4m3_blocks_128x128x128_s5; do
  timeout 120 ncu --clock-control none -k regex:$k -c 1 --section SpeedOfLight --metrics "$M" ./host --n 8192 --kernel $k --reps 1 > $R/ncu_$k.txt 2>&1; echo "rc=$?" >> $R/ncu_$k.txt; save
done
