#!/bin/bash
# GPU check of a row's tl.cumsum and tl.argmax split into column tiles (branch rows41b, issue #21): held-out batch 11's
# cumsum_rows (f16 rows, f32 out: each 128-column tile's cumsum plus a running total carried between the tiles,
# `y = cumsum(x_tile) + c`, `c += rowsum(x_tile)`) and argmax_rows (f32 rows, i32 out: a (value, index) pair carried
# and folded by Triton's argmax combiner, the tile's index a `rowargmax x, position`).
# What it checks: each binding (outputs NaN-filled first) against the kernel's fp32 torch reference at run.py's SIZES:
# cumsum_rows at 4096 x 1000 (a partial last column tile), 1000 x 4096 (a partial last row tile), 256 x 16384;
# argmax_rows at 1024 x 32000, 1000 x 1000 (a partial last tile: its -inf past n_cols masked in registers, tail_mask),
# 4096 x 50264. argmax's rel_error is 0 where every index equals torch.argmax's (random normal rows: no ties; the
# tie rule is checked in numpy by tests/test_heldout11.py). Triton's own kernel is timed beside it (per call and
# in a CUDA graph). Known limits: an index is held as a float in registers (exact below 2^24 columns); NaN is skipped.
# Run from the repository root. The GPU machine has no solvers: run `bash bench/triton_notes/s41/rows41b/run.sh`
# HERE first (import, solve, emit-cuda, nvcc sm_90a: a few minutes), carry .devrun/rows41b, then
# `bash bench/triton_notes/s41/rows41b/run.sh gpu` THERE (an H100 or H200 with torch and Triton).
set -e
if [ "$1" != "gpu" ]; then
  python bench/heldout/run.py build --batch 11 --out .devrun/rows41b/k11 cumsum_rows argmax_rows   # here
  echo "built: carry .devrun/rows41b and run 'bash bench/triton_notes/s41/rows41b/run.sh gpu' on the GPU machine"
  exit 0
fi
export PYTHONUNBUFFERED=1
python bench/heldout/run.py check --batch 11 --kernels .devrun/rows41b/k11   # there
cat .devrun/rows41b/k11/check.json
