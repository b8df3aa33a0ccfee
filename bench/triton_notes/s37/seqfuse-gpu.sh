#!/bin/bash
# seqfuse2's GPU check (run from the repo root with .devrun/sf2 carried): the seven row kernels' one kernel,
# one kernel per loop and the default (bench/seq/fused_check.py), then test_gpu's LayerNorm one-kernel test.
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/card.txt"
timeout 420 python bench/seq/fused_check.py check --kernels .devrun/sf2 2>&1 | tee "$OUT/fused_check.log"
cp .devrun/sf2/fused_check.json "$OUT/" 2>/dev/null
timeout 150 python -m pytest -q -x tests/test_gpu.py -k "one_kernel" 2>&1 | tail -30 | tee "$OUT/test_gpu.log"
