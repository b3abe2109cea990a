#!/usr/bin/env bash
# ncu: where the block-scaled FP8 kernel stalls, next to the promoted one (issue 21).
cd "$(dirname "$0")"
[ -x host ] || tar xzf bin.tgz
for k in wgmma_e4m3_blocks_128x128x128_s5 wgmma_e4m3_promoted_128x128x128_s6 wgmma_e4m3_128x256x128_s4; do
  timeout 150 ncu --clock-control none -k regex:$k -c 1 --section SpeedOfLight --section WarpStateStats --section SourceCounters --section ComputeWorkloadAnalysis --section Occupancy ./host --n 8192 --kernel $k --reps 1 > $OUT/ncu_$k.txt 2>&1; echo "rc=$?" >> $OUT/ncu_$k.txt
done
