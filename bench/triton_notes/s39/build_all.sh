#!/bin/bash
# Session 39: build HERE (twill installed, nvcc) everything bench/triton_notes/s39/gpu_all.sh checks on the GPU
# machine, into .devrun/ (git-ignored; lost between sessions, so rebuild it first). About 10 minutes on 2 cores.
# Then on the GPU machine, carrying .devrun/{depth,s21,tf32,rand,h11,unaligned,corpus}: bash bench/triton_notes/s39/gpu_all.sh
# (and, in a second call, bash bench/triton_notes/s39/gpu_corpus.sh: the corpus against Triton, ~8 minutes).
set -e
cd "$(dirname "$0")/../../.."
S38=bench/triton_notes/s38
mkdir -p .devrun && cp bench/triton_notes/s39/prebuild.py .devrun/
# 1. deeper load rings (twill/emit/streams.py, emit-cuda --load-rings latency): old (main's default) and new
cp -r $S38/depth .devrun/
python bench/heldout/run.py build --batch 7 --out .devrun/depth/old/b7 layernorm_fwd rmsnorm_fwd softmax_online
python bench/heldout/run.py build --batch 10 --out .devrun/depth/old/b10 bias_gelu
bash .devrun/depth/emit_new.sh
# 2. session 38's #21 kernels (f16 accumulators, C^T stores, a select's constant, dropout's prologue scalar, amax)
python bench/heldout/run.py build --batch 6 --out .devrun/s21/b6 gemm_fp16_acc bmm_bcast_b gemm_store_ct attn_bool_mask
python bench/heldout/run.py build --batch 9 --out .devrun/s21/b9 dropout
python bench/heldout/run.py build --batch 5 --out .devrun/s21/b5 gemm_fp8_out_amax
# 3. TF32 dots and tl.rand (session 39)
bash bench/triton_notes/s39/tf32/run.sh build
bash bench/triton_notes/s39/rand/run.sh
# 3b. held-out batch 11 (session 39): the six kernels that import
python bench/heldout/run.py build --batch 11 --out .devrun/h11 gemm_bias_relu_kmask baddbmm gemm_w8a8_bias linear_wt softmax_temp swiglu_bwd
# 4. rows at any pitch (emit-cuda --any-pitch)
cp -r $S38/unaligned .devrun/
TWILL_BENCH_ANY_PITCH=1 python bench/heldout/run.py build --batch 6 --out .devrun/unaligned/k6 cross_entropy_fwd layernorm_2loop
TWILL_BENCH_ANY_PITCH=1 python bench/heldout/run.py build --batch 7 --out .devrun/unaligned/k7 xent_scalar layernorm_fwd
TWILL_BENCH_ANY_PITCH=1 python bench/heldout/run.py build --batch 8 --out .devrun/unaligned/k8 softmax_row layer_norm_fwd
# 5. the corpus (prepipe sm_90 dumps, --gpu h200)
python bench/triton_bench.py build --dumps tests/data/ttgir/corpus/prepipe --pattern '*_sm90.ttgir' --out .devrun/corpus
cp bench/triton_notes/s39/gpu_all.sh bench/triton_notes/s39/gpu_corpus.sh .devrun/
echo "built: carry .devrun/depth .devrun/s21 .devrun/tf32 .devrun/rand .devrun/h11 .devrun/unaligned .devrun/gpu_all.sh .devrun/prebuild.py"
