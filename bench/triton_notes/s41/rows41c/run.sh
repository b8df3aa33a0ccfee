#!/bin/bash
# GPU check of held-out batch 11's Megatron causal softmax (branch rows41c, issue #21): causal_softmax, one row a
# program, `keep = cols <= row % seq_len`, softmax(where(keep, x * scale, -inf)) over rows of seq_len columns. Refused
# until session 41 at its compare; it imports as three column loops (max, sum of exp, store), each with a prologue that
# computes the row tile's bounds `pos = rem (position {rows = 1, grid = 1}), seq_len` once a tile and the mask
# `tail_mask x_mul, pos {fill = -inf, offset = 1}` (columns l0 + c >= pos[r] + 1 become -inf on every iteration:
# cuda_runtime/rowbound_sm90.cuh mask_bound), read by the rowmax and the exp2.
# What it checks: the binding (Y f16) against the kernel's fp32 reference at run.py's SIZES: 32 x 2048 rows of 2048
# (whole tiles), 3 x 1000 rows of 1000 (a partial last row tile and column tile; rows of 2000 bytes) and 64 x 129
# rows of 129; Triton's own kernel timed beside it (per call and in a CUDA graph). Row 0 of each sequence keeps one
# element (y = 1 there, 0 elsewhere): any off-by-one of the bound shows as a wrong row.
# Run from the repository root. The GPU machine has no solvers: run `bash bench/triton_notes/s41/rows41c/run.sh`
# HERE first (import, solve h200, emit-cuda, nvcc sm_90a: about 1 minute), carry .devrun/rows41c, then
# `bash bench/triton_notes/s41/rows41c/run.sh gpu` THERE (an H100 or H200 with torch and Triton).
set -e
if [ "$1" != "gpu" ]; then
  python bench/heldout/run.py build --batch 11 --out .devrun/rows41c/k11 causal_softmax   # here
  echo "built: carry .devrun/rows41c and run 'bash bench/triton_notes/s41/rows41c/run.sh gpu' on the GPU machine"
  exit 0
fi
export PYTHONUNBUFFERED=1
python bench/heldout/run.py check --batch 11 --kernels .devrun/rows41c/k11   # there
cat .devrun/rows41c/k11/check.json
