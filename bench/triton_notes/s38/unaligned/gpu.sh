#!/bin/bash
# Rows at any pitch (issue #22): build every case's libraries at once (one nvcc a kernel file), then check every
# case in its own process (4 at a time: a device fault loses that case alone), then time the correct ones one by
# one while the time lasts. All in under 150 s; $OUT/results.json is rewritten after each case.
# Run from the repo root: bash .devrun/unaligned/gpu.sh   (carrying .devrun/unaligned)
# The kernels under k6, k7, k8 were emitted with the any-pitch path on (now `twill emit-cuda --any-pitch`, off by
# default); to rebuild them: TWILL_BENCH_ANY_PITCH=1 python bench/heldout/run.py build ... (bench_emit_args).
cd "$(dirname "$0")/../.." || exit 2
export TWILL_CACHE_DIR=${TWILL_CACHE_DIR:-/tmp/twill-cache} TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/triton-cache}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/unaligned-out}
mkdir -p "$OUT"
START=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/card.txt"
for k in .devrun/unaligned/k*/build.json; do cp "$k" "$OUT/build-$(basename "$(dirname "$k")").json"; done
# 1. the libraries: every nvcc at once, at most 85 s (a library not built by then builds at its case's first call)
timeout 85 python3 .devrun/unaligned/check.py build 2>&1 | tee "$OUT/build.log"
echo "built in $(( $(date +%s) - START )) s"
# 2. the cases: checks (4 processes at a time), then timings, until 145 s from the start
LEFT=$(( START + 148 - $(date +%s) )); [ "$LEFT" -lt 20 ] && LEFT=20
timeout "$LEFT" python3 .devrun/unaligned/check.py all --out "$OUT" --deadline $(( START + 145 )) \
  2>&1 | tee "$OUT/cases.log"
echo "done in $(( $(date +%s) - START )) s"
ls -la "$OUT"
