#!/bin/bash
# GPU check of held-out batch 13 (branch heldout13, issue #21; docs/ttgir-import.md section 25): the ten kernels of
# bench/heldout/kernels13.py that import (gemm_mish, gemm_hardswish, gemm_scale_res_clamp with tl.clamp, gemm_sum2's
# A @ B + C @ D, bmm_grouped, reglu_fwd, jsd_fwd, huber_rows, cosine_rows, add_rmsnorm_loop); welford_rows and
# groupnorm_fwd are refused at their TTGIR lines and have no binding.
# What it checks: each binding against the kernel's fp32 reference at run.py's SIZES (the defaults, then a partial last
# row / column tile; bmm_grouped's ragged 1000 x 1100; jsd_fwd at N = 5000, whose -inf fill reaches exp: the binding
# takes it or refuses it with the reason), Triton's own kernel timed beside it (per call and in a CUDA graph).
# Not run yet (no GPU in session 42). Run from the repository root. The GPU machine has no solvers: run
# `bash bench/triton_notes/s42/heldout13/run.sh` HERE first (import t36 prepipe sm_90, solve h200, emit-cuda, nvcc
# sm_90a: 10-20 minutes on 2 cores), carry .devrun/heldout13, then `bash bench/triton_notes/s42/heldout13/run.sh gpu`
# THERE (an H100 or H200 with torch and Triton).
set -e
if [ "$1" != "gpu" ]; then
  python bench/heldout/run.py build --batch 13 --time-limit 120 --out .devrun/heldout13/k13 gemm_mish gemm_hardswish \
    gemm_scale_res_clamp gemm_sum2 bmm_grouped reglu_fwd jsd_fwd huber_rows cosine_rows add_rmsnorm_loop   # here
  echo "built: carry .devrun/heldout13 and run 'bash bench/triton_notes/s42/heldout13/run.sh gpu' on the GPU machine"
  exit 0
fi
export PYTHONUNBUFFERED=1
python bench/heldout/run.py check --batch 13 --kernels .devrun/heldout13/k13   # there
cat .devrun/heldout13/k13/check.json
