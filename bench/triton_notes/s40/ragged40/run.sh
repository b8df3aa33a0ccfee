#!/bin/bash
# GPU check of a -inf fill read from shared memory (branch ragged40, issues #21/#22): held-out batch 11's softmax_temp
# (softmax(x / T), f16 rows whose conversion to f32 is fused into the rowmax and exp2 that read the loaded tile) and
# batch 10's kl_logits (bf16, the same in its two row maxes and two sums of exp). TMA fills a partial last column tile
# with 0, not the kernel's -inf: each reader's register copy of the tile is now masked to -inf past n_cols on the
# last tile (emit/ragged.py `_filled_read`, twill::mask_past of a Frag16 / mask_tail of a TRow16), where the binding
# refused every ragged call before. What it checks: each binding against the kernel's fp32 reference (outputs NaN-
# filled first) at run.py's SIZES: softmax_temp at its default 4096 x 3000 (23 tiles + 56 columns), 1000 x 781 (rows
# staged to a pitch of 784) and 4096 x 50257 (GPT-2's vocabulary, staged to 50264); kl_logits at 4096 x 4096 and
# 1000 x 1000. Triton's own kernel is timed beside it.
# Run from the repository root. The GPU machine has no solvers: run `bash bench/triton_notes/s40/ragged40/run.sh`
# HERE first (import, solve, emit-cuda, nvcc sm_90a: about 1 minute), carry .devrun/ragged40, then
# `bash bench/triton_notes/s40/ragged40/run.sh gpu` THERE (an H100 or H200 with torch and Triton).
set -e
if [ "$1" != "gpu" ]; then
  python bench/heldout/run.py build --batch 11 --out .devrun/ragged40/k11 softmax_temp   # here
  python bench/heldout/run.py build --batch 10 --out .devrun/ragged40/k10 kl_logits      # here
  echo "built: carry .devrun/ragged40 and run 'bash bench/triton_notes/s40/ragged40/run.sh gpu' on the GPU machine"
  exit 0
fi
export PYTHONUNBUFFERED=1
python bench/heldout/run.py check --batch 11 --kernels .devrun/ragged40/k11   # there
python bench/heldout/run.py check --batch 10 --kernels .devrun/ragged40/k10   # there
cat .devrun/ragged40/k11/check.json .devrun/ragged40/k10/check.json
