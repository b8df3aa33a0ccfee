#!/bin/bash
# GPU check of held-out batch 13b (branch refused42, issue #21): constructs imported since session 42.
# - clamp_gelu_rows: tl.clamp(x, lo, hi) (propagate_nan none: a NaN x gives lo) then x * sigmoid(1.702 x), f16 rows;
# - leaky_clamp_nan_rows: clamp(max(x, 0.01 x), -6, 6) with propagate_nan=ALL in both (max.NaN / min.NaN), f32 rows
#   with a NaN every 13th column of every 7th row: the NaN must come out where they went in;
# - gemm_clamp: bf16 A @ B + bias clamped to [lo, hi] with NaN propagated in the epilogue;
# - cumprod_rows: tl.cumprod of f32 rows, each 128-column tile's cumprod times the carried product of the tiles
#   before it, at N = 1024 (whole tiles), its default 1000 (a partial last column tile: TMA's 0 fill past n_cols where
#   the kernel loads 1.0, read by the prefix scan and the product carried to no later tile) and 1000 x 4096;
# - cummax_rows: tl.associative_scan(x, 0, tl.maximum) of f32 rows (a running max), 4096 x 1000 and 1000 x 4096.
# What it checks: each binding (outputs NaN-filled first) against the kernel's fp32 torch reference at run.py's SIZES
# (batch 13b), NaN-aware: NaN positions must equal the reference's, the relative error is over the rest (tolerance
# 1e-2); Triton's own kernel timed beside it. Run from the repository root. The GPU machine has no solvers: run
# `bash bench/triton_notes/s42/refused42/run.sh` HERE first (import, solve, emit-cuda, nvcc sm_90a: a few minutes),
# carry .devrun/refused42, then `bash bench/triton_notes/s42/refused42/run.sh gpu` THERE (an H100 or H200 with torch
# and Triton).
set -e
if [ "$1" != "gpu" ]; then
  python bench/heldout/run.py build --batch 13b --out .devrun/refused42/k13b clamp_gelu_rows leaky_clamp_nan_rows \
    gemm_clamp cumprod_rows cummax_rows   # here
  echo "built: carry .devrun/refused42 and run 'bash bench/triton_notes/s42/refused42/run.sh gpu' on the GPU machine"
  exit 0
fi
export PYTHONUNBUFFERED=1
python - <<'PY'
import math, sys
sys.path[:0] = ["bench", "bench/heldout"]
import torch
import triton_bench
plain = triton_bench.rel_error


def nan_aware(out, ref):
    """rel_error where a NaN is expected: the NaN positions must be the reference's, the error over the rest."""
    outs, refs = (out if isinstance(out, (tuple, list)) else (out,)), (ref if isinstance(ref, (tuple, list)) else (ref,))
    worst = 0.0
    for o, r in zip(outs, refs):
        o, r = o.float(), r.float()
        if not torch.equal(torch.isnan(o), torch.isnan(r)):
            return math.inf
        keep = ~torch.isnan(r)
        worst = max(worst, plain(o[keep], r[keep]))
    return worst


triton_bench.rel_error = nan_aware
import run
run.main(["check", "--batch", "13b", "--kernels", ".devrun/refused42/k13b"])
PY
cat .devrun/refused42/k13b/check.json
