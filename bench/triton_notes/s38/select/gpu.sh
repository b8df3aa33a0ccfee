#!/bin/bash
# Session 38 (branch select): held-out kernels that import since the select of a constant side (issue #21),
# not yet run on a GPU. From the repository root on the GPU machine:
#   bash bench/triton_notes/s38/select/gpu.sh OUT
# builds each (import -> solve -> emit-cuda -> nvcc, sm_90a) and checks it against its torch reference and
# Triton (bench/heldout/run.py check: rel_error, twill_ms, triton_ms), the JSON in OUT/batchN-check.json.
# (heldout9's dropout imports since branch argscalar: its own check, bench/triton_notes/s38/dropout/run.sh.)
set -u
OUT=${1:?usage: $0 OUT}
mkdir -p "$OUT"
python3 bench/heldout/run.py build --batch 6 --out "$OUT/b6" attn_bool_mask 2>&1 | tail -5
python3 bench/heldout/run.py check --batch 6 --kernels "$OUT/b6" 2>&1 | tail -5
cp "$OUT/b6/check.json" "$OUT/batch6-check.json" 2>/dev/null || true
