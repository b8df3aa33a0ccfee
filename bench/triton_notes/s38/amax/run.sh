#!/bin/bash
# GPU check of gemm_fp8_out_amax (branch amax2): C = (acc * SCALE) in f8e4m3 and AMAX = max |acc| over the whole
# matrix, folded by one float atomic max per output tile (twill/emit/scalar_atomic.py). AMAX is the launch's
# torch.zeros(1), which the binding takes as the caller initialized it; check.json's rel_errors are [C, AMAX].
# Run from the repository root.
set -e
python bench/heldout/run.py build --batch 5 --out .devrun/amax/k gemm_fp8_out_amax
python bench/heldout/run.py check --batch 5 --kernels .devrun/amax/k
cat .devrun/amax/k/check.json
