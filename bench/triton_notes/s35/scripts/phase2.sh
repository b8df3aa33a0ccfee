#!/bin/bash
# session 35, device call 2: the corpus against Triton on the H200 (N = 4096 and 16384 included)
cd "$(dirname "$0")/../.."
export TWILL_CACHE_DIR=/tmp/twill-cache
D=.devrun/s35
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 150 python3 .devrun/s33/prebuild.py $D/corpus 2>&1 | tail -4
timeout 400 python3 bench/triton_bench.py run --kernels $D/corpus --triton bench/triton-results-triton36.json \
  --out $OUT/corpus --pairs 3 2>&1 | tail -30
