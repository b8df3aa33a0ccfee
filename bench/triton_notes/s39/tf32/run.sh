#!/bin/bash
# TF32 tl.dot and the binding's staged K-major transpose (branch tf32, issue #21). Run from the repository root.
#
#   bash bench/triton_notes/s39/tf32/run.sh build   # here (twill, nvcc): the kernels and bindings into .devrun/tf32
#   bash bench/triton_notes/s39/tf32/run.sh check   # on the GPU machine, carrying .devrun/tf32 (torch, triton, nvcc)
#
# build: gemm_tf32 (bench/heldout/kernels3.py: fp32 A [M, K], B [K, N] row-major, tl.dot input_precision="tf32";
# its t36 prepipe sm_90 dump) through run.py's own build (import --split-rows auto --grow-rows auto, solve --gpu
# h200, emit-cuda --binding torch, nvcc: no spill); and Triton 3.9's fp8 matmul with an MN-major B
# (tests/data/ttgir/triton39/mm_fp8.ttgir: e4m3 A [M, K], B [K, N] row-major, f16 C), imported, solved and
# emitted the same way by the CLI. Both read B through the binding's transposed copy (B.mT, K-major).
# check: run.py check (the binding called with the Triton launch's arguments against the fp64 reference, Triton's
# own kernel as control, times per call and in a CUDA graph), then check.py: B given already K-major (w.t(), no
# copy) and row-major (one copy a call), ragged sizes, the copy's own time, and the fp8 kernel against torch.
set -e
K=.devrun/tf32
case "$1" in
  build)
    python bench/heldout/run.py build --batch 3 --out "$K/k" gemm_tf32
    mkdir -p "$K/fp8"
    twill import tests/data/ttgir/triton39/mm_fp8.ttgir --split-rows auto -o "$K/fp8/mm_fp8_sm90.tir"
    twill emit-cuda "$K/fp8/mm_fp8_sm90.tir" --gpu h200 --binding torch -q -o "$K/fp8/mm_fp8_sm90.cu"
    grep -c "transposed = true" "$K/fp8/mm_fp8_sm90.tir" "$K/k/gemm_tf32_sm90.tir"
    ;;
  check)
    export TWILL_CACHE_DIR=${TWILL_CACHE_DIR:-/tmp/twill-cache} TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/triton-cache}
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python bench/heldout/run.py check --batch 3 --kernels "$K/k"
    python bench/triton_notes/s39/tf32/check.py "$K" | tee "$K/check-tf32.json"
    ;;
  *) echo "usage: $0 build|check" >&2; exit 2 ;;
esac
