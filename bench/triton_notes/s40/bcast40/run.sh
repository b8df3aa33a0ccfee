#!/bin/bash
# GPU check of branch bcast40 (issues #21/#22): held-out batch 6's attn_bool_mask, whose int8 MASK [N, N] is read
# by every batch entry and head (`MASK + offs_m[:, None] * stride_mm + cols[None, :]`, no program id 1 term). The
# import now writes its loads `{batch = none}` (twill/ttgir/unbatched.py); emit-cuda reads MASK at batch entry 0
# through a tensor map of one entry; the binding takes MASK [N, N] (or [1, 1, N, N]) and refuses [B, H, N, N].
# Before the branch the binding refused the Triton launch's own arguments ("MASK: batch dimensions [] differ from
# Q's [2, 8]"). Run from the repository root.
# The GPU machine has no solvers: build HERE first (`bash run.sh`: import the Triton 3.6 prepipe sm_90 dump, split
# rows auto, solve h200, emit-cuda --binding torch, nvcc sm_90a; about 2 minutes on 2 idle cores), carry .devrun/bc40,
# then run the check THERE (`bash run.sh gpu`: Triton 3.6 and torch on an H100/H200).
set -e
OUT=.devrun/bc40
if [ "$1" != "gpu" ]; then
  python bench/heldout/run.py build --batch 6 --out $OUT attn_bool_mask        # here
  echo "built: carry $OUT and run 'bash bench/triton_notes/s40/bcast40/run.sh gpu' on the GPU machine"
  exit 0
fi
# there: (1) the binding called with the launch's arguments (q, k, v [2, 8, 1024, 64] f16, MASK [1024, 1024] int8,
# 70% kept, its diagonal kept) against the fp32 reference (rel_error < 1e-2), timed against Triton's own kernel;
python bench/heldout/run.py check --batch 6 --kernels $OUT | tee $OUT/check.log
# (2) the mask's batch forms: [1, 1, N, N] gives the same O bit for bit, [2, 8, N, N] and [8, N, N] are refused with
# the ArgumentError naming MASK, a mask per head (what the binding would have read before) differs from the shared
# one's result, and Q [1, 16, N, 64] with K, V grouped [1, 4, N, 64] (GQA) under the one mask matches the reference.
python bench/triton_notes/s40/bcast40/forms.py $OUT | tee $OUT/forms.log
