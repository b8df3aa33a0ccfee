#!/bin/bash
# GPU check of branch grid41 (issue #22: small row kernels far behind Triton). Run from the repository root.
# HERE (no GPU; solvers): `bash bench/triton_notes/s41/grid41/run.sh` builds held-out batch 11's swiglu_bwd and, as
# controls, batch 8's swiglu_fwd and geglu_fwd and batch 10's bias_gelu (import, solve --gpu h200, emit-cuda
# --binding torch, nvcc sm_90a: a few minutes). Carry .devrun/grid41, then THERE (H100/H200, torch + Triton 3.6):
# `bash bench/triton_notes/s41/grid41/run.sh gpu` (about 2-3 minutes; every step to a deadline).
#
# What changed: a no-carry loop whose store along the loop is written by each thread (no TMA staging: swiglu_bwd's
# two bf16 stores do not fit two CTAs an SM) is now split by columns like one with TMA stores (emit/stores.py,
# splits.whole_columns). Before, emit-cuda refused the split and swiglu_bwd ran 16 CTAs (1000 rows) or 32 (2048) of
# 32 iterations each on a 132-SM GPU: 155.7 us at both sizes (Triton 12.1 / 30.2). Now the binding picks 16 splits
# at 1000 rows (256 CTAs of 2 iterations) and 8 at 2048 (256 CTAs of 4).
# Old against new: the same binding called with twill_split_cols = 4096 (one split: the unsplit grid, main's) and
# with none (its own split), alternating, CUDA-graph kernel times, beside Triton's (old_new.py).
# PREDICTION (not yet measured): swiglu_bwd correct at both sizes; one split about 155 us as in session 40; split
# 8-16x faster, about 10-14 us at 1000 x 4096 (Triton 12.1) and 20-30 us at 2048 x 4096 (Triton 30.2), i.e.
# 0.08-0.19x -> about 0.9-1.2x. Controls (swiglu_fwd, geglu_fwd, bias_gelu: TMA stores, already split) unchanged
# against session 36.
set -e
OUT=.devrun/grid41
if [ "$1" != "gpu" ]; then
  python bench/heldout/run.py build --batch 11 --out $OUT/b11 swiglu_bwd
  python bench/heldout/run.py build --batch 8 --out $OUT/b8 swiglu_fwd geglu_fwd
  python bench/heldout/run.py build --batch 10 --out $OUT/b10 bias_gelu
  grep -l "grid split = twill_split_cols" $OUT/b11/*.cu >/dev/null && echo "swiglu_bwd is split by columns"
  echo "built: carry $OUT and run 'bash bench/triton_notes/s41/grid41/run.sh gpu' on the GPU machine"
  exit 0
fi
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# 1. correctness and timing against Triton at run.py's SIZES (swiglu_bwd: 2048 x 4096, 1000 x 4096)
timeout 240 python bench/heldout/run.py check --batch 11 --kernels $OUT/b11 || echo "batch 11 check stopped ($?)"
# 2. old (one split) against new (own split) against Triton, alternating
timeout 120 python bench/triton_notes/s41/grid41/old_new.py $OUT/b11 || echo "old_new stopped ($?)"
# 3. the controls
timeout 150 python bench/heldout/run.py check --batch 8 --kernels $OUT/b8 || echo "batch 8 check stopped ($?)"
timeout 90 python bench/heldout/run.py check --batch 10 --kernels $OUT/b10 || echo "batch 10 check stopped ($?)"
python - <<'PY'
import json, glob
for f in sorted(glob.glob(".devrun/grid41/b*/check.json")):
    for k, rows in json.load(open(f))["kernels"].items():
        for r in rows:
            tk, tt = r.get("twill_kernel_ms"), r.get("triton_kernel_ms")
            print(f"{k:12s} {str(r.get('size')):28s} correct={r.get('correct')} err={r.get('rel_error')} "
                  f"twill_us={tk and round(tk * 1e3, 1)} triton_us={tt and round(tt * 1e3, 1)} "
                  f"ratio={tk and tt and round(tt / tk, 3)} {(r.get('error') or '')[:200]}")
PY
