#!/bin/bash
# GPU check of held-out batch 11's per-token int8 quantization (branch rows41a, issue #21): quant_int8_rows, vLLM's
# form (absmax = max |x| a row, scale = max(absmax, 1e-10) / 127 stored per row, round(x / scale) by floor/ceil and a
# select, stored int8), refused at its `math.absf` until session 41. It imports as two loops: L0 `abs x` and its rowmax
# (SCALE the epilogue's output), L1 `div x, scale`, floor/ceil, the select whose result is i8, stored int8.
# What it checks: the binding (Q int8 and SCALE f32, returned) against the kernel's fp32 reference at run.py's SIZES:
# 4096 x 4096 (whole tiles), 1000 x 4000 (a partial last row tile and column tile: L0's |x| of TMA's zero fill, no
# larger than the row's max) and 1000 x 1000 (int8 rows of 1000 bytes: Q allocated at a pitch of 1008); Triton's own
# kernel timed beside it (per call and in a CUDA graph). Q may differ from the reference by one where x / scale falls
# within an ulp of a tie (the reference divides in fp32 as well; rel_error's 1e-2 is far above that).
# Run from the repository root. The GPU machine has no solvers: run `bash bench/triton_notes/s41/rows41a/run.sh`
# HERE first (import, solve h200, emit-cuda, nvcc sm_90a: about 1 minute), carry .devrun/rows41a, then
# `bash bench/triton_notes/s41/rows41a/run.sh gpu` THERE (an H100 or H200 with torch and Triton).
set -e
if [ "$1" != "gpu" ]; then
  python bench/heldout/run.py build --batch 11 --out .devrun/rows41a/k11 quant_int8_rows   # here
  echo "built: carry .devrun/rows41a and run 'bash bench/triton_notes/s41/rows41a/run.sh gpu' on the GPU machine"
  exit 0
fi
export PYTHONUNBUFFERED=1
python bench/heldout/run.py check --batch 11 --kernels .devrun/rows41a/k11   # there
cat .devrun/rows41a/k11/check.json
