#!/bin/bash
# Session 39: the corpus against Triton (its best configuration from bench/triton-results-triton36.json), 3 pairs.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache TWILL_CACHE_DIR=/tmp/twill-cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/card.txt"
S=$(date +%s)
timeout 150 python3 .devrun/prebuild.py .devrun/corpus 2>&1 | tail -n 4
echo "built at $(( $(date +%s) - S )) s"
timeout $(( 560 - $(date +%s) + S )) python3 bench/triton_bench.py run --kernels .devrun/corpus \
  --triton bench/triton-results-triton36.json --out "$OUT/corpus" --pairs 3 2>&1 | tail -n 30
echo "done at $(( $(date +%s) - S )) s"
