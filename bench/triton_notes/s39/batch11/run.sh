#!/bin/bash
# GPU check of the eleventh held-out batch (branch batch11, issue #21: bench/heldout/kernels11.py, dumps in
# tests/data/ttgir/heldout11). Run from the repository root.
# The GPU machine has no solvers: run the build HERE first (`bash run.sh`: import the Triton 3.6 prepipe sm_90 dump,
# solve h200, emit-cuda --binding torch, nvcc sm_90a; about 6 minutes on 2 cores), carry .devrun/h11, then run the
# check THERE (`bash run.sh gpu`: Triton 3.6 and torch on an H100/H200).
set -e
NAMES="gemm_bias_relu_kmask baddbmm gemm_w8a8_bias linear_wt softmax_temp swiglu_bwd"
if [ "$1" != "gpu" ]; then
  python bench/heldout/run.py build --batch 11 --out .devrun/h11 $NAMES        # here
  echo "built: carry .devrun/h11 and run 'bash bench/triton_notes/s39/batch11/run.sh gpu' on the GPU machine"
  exit 0
fi
# there: each binding on NAME_make_inputs' tensors with the launch's arguments, against the fp32 reference (rel_error
# < 1e-2), timed against Triton's own kernel; sizes in run.py's SIZES (the GEMMs at whole tiles, then their ragged
# defaults: W8A8 at M = 1000, N = 1536, K = 1040, which the binding refused before this branch (N != K))
python bench/heldout/run.py check --batch 11 --kernels .devrun/h11 | tee .devrun/h11/check.log
