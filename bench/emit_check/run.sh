#!/usr/bin/env bash
# Numerical check of emitted kernels on a Hopper GPU: each harness includes an emitted .cu
# unmodified, runs it on random inputs, compares with a naive reference kernel (relative L2
# error, largest error, non-finite count) and times one large problem. Needs nvcc and a GPU;
# run from the repository root after `twill emit-cuda` wrote the kernels into bench/emit_check/out.
#
#   mkdir -p bench/emit_check/out
#   for n in gemm_hopper.h100 fig1.h100 attention_fwd_hopper.h100 attention_fwd_simple.h100 attention_fwd_simple.h100.swp; do
#     twill emit-cuda tests/data/emit/$n.json -o bench/emit_check/out/$n.cu; done
#   bash bench/emit_check/run.sh
set -u
cd "$(dirname "$0")"
F="-std=c++17 -gencode=arch=compute_90a,code=sm_90a -O3 -I out"
AP='-DSET_POINTERS=p.q=dq; p.k=dk; p.v=dv; p.out_acc=dO; p.out_m=dm; p.out_l=dl;'
nvcc $F -DKERNEL='"gemm_hopper.h100.cu"' -DNS=twill_gemm_hopper -DNAME='"gemm"' check_gemm.cu -o out/gemm &
nvcc $F -DKERNEL='"fig1.h100.cu"' -DNS=twill_fig1 -DNAME='"fig1"' check_fig1.cu -o out/fig1 &
nvcc $F -DKERNEL='"attention_fwd_hopper.h100.cu"' -DNS=twill_attention_fwd_hopper -DNAME='"fa3"' check_fa3.cu -o out/fa3 &
nvcc $F -DKERNEL='"attention_fwd_simple.h100.cu"' -DNS=twill_attention_fwd -DNAME='"attention_simple"' -DTILE_M=128 "$AP" check_attn.cu -o out/attn &
nvcc $F -DKERNEL='"attention_fwd_simple.h100.swp.cu"' -DNS=twill_attention_fwd -DNAME='"attention_simple_swp"' -DTILE_M=128 "$AP" check_attn.cu -o out/attn_swp &
wait
for x in gemm fig1 fa3 attn attn_swp; do timeout 60 ./out/$x || echo "$x: FAILED (exit $?)"; done
