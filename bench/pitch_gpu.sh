#!/bin/sh
# The row pitch's GPU check (issues #21, #22; bench/pitch_check.py). Build the held-out row kernels' bindings
# (CPU: import, solve --gpu h200, emit-cuda --binding torch), then, on the GPU machine, run them at N = 781 and
# V = 50257 and on strided views against the references, and the binding's GPU test of strided and staged calls.
#   sh bench/pitch_gpu.sh build DIR     # here: DIR/k6, DIR/k7, DIR/k8
#   sh bench/pitch_gpu.sh check DIR     # GPU: DIR/k*/pitch.json, then tests/test_gpu.py's fast-path test
set -e
what=$1
dir=${2:-/tmp/pitch}
if [ "$what" = build ]; then
  python bench/heldout/run.py build --batch 7 --time-limit 60 --out "$dir/k7" softmax_fused softmax_online layernorm_fwd rmsnorm_fwd xent_scalar
  python bench/heldout/run.py build --batch 8 --time-limit 60 --out "$dir/k8" softmax_row layer_norm_fwd rms_norm_fwd
  python bench/heldout/run.py build --batch 6 --time-limit 60 --out "$dir/k6" cross_entropy_fwd
else
  python bench/pitch_check.py --batch 7 --kernels "$dir/k7"
  python bench/pitch_check.py --batch 8 --kernels "$dir/k8"
  python bench/pitch_check.py --batch 6 --kernels "$dir/k6"
  python -m pytest -q tests/test_gpu.py -k "fast_path"
fi
