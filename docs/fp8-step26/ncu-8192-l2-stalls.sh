#!/usr/bin/env bash
# ncu: L2 traffic and stall reasons, block-scaled FP8 kernel against the promoted one (issue 21).
cd "$(dirname "$0")"
[ -x host ] || tar xzf bin.tgz
M='regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,lts__t_sectors.sum,lts__t_requests.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_srcunit_tex.sum,lts__t_sector_hit_rate.pct,l1tex__m_xbar2l1tex_read_bytes.sum,smsp__inst_executed.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active'
for k in wgmma_e4m3_blocks_128x128x128_s5 wgmma_e4m3_promoted_128x128x128_s6; do
  timeout 150 ncu --clock-control none -k regex:$k -c 1 --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --metrics "$M" ./host --n 8192 --kernel $k --reps 1 > $OUT/ncu2_$k.txt 2>&1; echo "rc=$?" >> $OUT/ncu2_$k.txt
done
