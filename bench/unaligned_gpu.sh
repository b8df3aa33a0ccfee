#!/bin/sh
# Rows read where they lie (issue #22; bench/unaligned_gpu.py). Build the row kernels' bindings here (CPU: import,
# solve --gpu h200, emit-cuda --binding torch, the ptxas loop), then on the GPU machine run them at V = 50257 bf16 and
# N = 781 against torch's fp32 references and Triton's kernels, with the binding's layouts and the staged timing.
#   sh bench/unaligned_gpu.sh build DIR     # here: DIR/k6, DIR/k7, DIR/k8
#   sh bench/unaligned_gpu.sh check DIR     # GPU: DIR/unaligned.json and a table
set -e
what=$1
dir=${2:-/tmp/unaligned}
if [ "$what" = build ]; then
  python bench/heldout/run.py build --batch 6 --time-limit 60 --out "$dir/k6" cross_entropy_fwd
  python bench/heldout/run.py build --batch 7 --time-limit 60 --out "$dir/k7" xent_scalar layernorm_fwd softmax_online rmsnorm_fwd softmax_fused
  python bench/heldout/run.py build --batch 8 --time-limit 60 --out "$dir/k8" layer_norm_fwd softmax_row
else
  python bench/unaligned_gpu.py --kernels "$dir"
fi
