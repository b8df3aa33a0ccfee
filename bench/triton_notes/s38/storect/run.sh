#!/bin/bash
# GPU check of gemm_store_ct (branch storect): C^T written by frag_to_global_t. Run from the repository root.
set -e
python bench/heldout/run.py build --batch 6 --out .devrun/storect/k gemm_store_ct
python bench/heldout/run.py check --batch 6 --kernels .devrun/storect/k
cat .devrun/storect/k/check.json
