#!/bin/bash
# Session 41: build HERE (twill installed, nvcc) what gpu41.sh checks on the GPU machine, into .devrun/ (git-ignored,
# lost between sessions). About 10-15 minutes on 2 cores. Then carry .devrun/{prebuild.py,ragged40,bc40,colsum,
# s40spill,depth} and run `bash bench/triton_notes/s41/gpu41.sh` there.
set -e
cd "$(dirname "$0")/../../.."
mkdir -p .devrun && cp bench/triton_notes/s39/prebuild.py .devrun/
bash bench/triton_notes/s40/ragged40/run.sh
bash bench/triton_notes/s40/bcast40/run.sh
python bench/heldout/run.py build --batch 12 --out .devrun/colsum/k12 bias_grad ln_dwdb bn_stats
python bench/heldout/run.py build --batch 9 --out .devrun/colsum/k9 layer_norm_bwd_dwdb
# rowprof's twill kernels (main's default load rings), as s39/build_all.sh made them
rm -rf .devrun/depth && cp -r bench/triton_notes/s38/depth .devrun/
python bench/heldout/run.py build --batch 7 --out .devrun/depth/old/b7 layernorm_fwd softmax_online
bash bench/triton_notes/s40/spill40/run.sh
du -sh .devrun/*
