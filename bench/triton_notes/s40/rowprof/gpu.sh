#!/bin/bash
# On the GPU machine, carrying .devrun/depth (built by bench/triton_notes/s39/build_all.sh): bash bench/triton_notes/s40/rowprof/gpu.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export TWILL_CACHE_DIR=$PWD/.devrun/depth/cache NVCC=/tmp/depth_nvcc/nvcc TRITON_CACHE_DIR=/tmp/triton-cache
mkdir -p /tmp/depth_nvcc && printf '#!/bin/sh\nexec nvcc "$@"\n' > /tmp/depth_nvcc/nvcc && chmod +x /tmp/depth_nvcc/nvcc
S=$(date +%s)
for c in "layernorm_fwd 1000 1000" "softmax_online 32768 1024" "layernorm_fwd 32768 1024"; do
  set -- $c
  timeout $(( ${ROWPROF_LEFT:-240} - $(date +%s) + S )) ncu --profile-from-start off --clock-control none \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
    --section MemoryWorkloadAnalysis --section SchedulerStats \
    python3 bench/triton_notes/s40/rowprof/prof.py $1 $2 $3 > "$OUT/ncu_$1_$2x$3.txt" 2>&1
  echo "== $c at $(( $(date +%s) - S )) s"; grep -E "^  [a-zA-Z_].*\(|Duration|Elapsed Cycles|Memory Throughput|DRAM Throughput|Achieved Occupancy|Grid Size|Block Size|Registers Per|Warp Cycles Per Issued|Issued Warp|No Eligible|Stall" "$OUT/ncu_$1_$2x$3.txt" | head -60
done
