#!/bin/sh
# GPU check of the f16-accumulating GEMM (gemm_fp16_acc, heldout6) emitted with wgmma .f16.f16.f16 (branch gemmforms).
# Run from the repository root on an H100/H200 with torch and triton: builds with twill (import | solve | emit-cuda
# --binding torch | nvcc), then checks against the fp32 torch reference and Triton's own kernel and times both
# (bench/heldout/run.py check writes .devrun/gemmforms/h6/check.json: rel_error, triton_rel_error, ms, triton_ms).
set -e
python3 bench/heldout/run.py build --batch 6 --out .devrun/gemmforms/h6 gemm_fp16_acc bmm_bcast_b
python3 bench/heldout/run.py check --batch 6 --kernels .devrun/gemmforms/h6
cat .devrun/gemmforms/h6/check.json
