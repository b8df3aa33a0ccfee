#!/bin/bash
# depth's GPU check (run from the repo root, .devrun/depth carried): bash .devrun/depth/gpu.sh
# Libraries are prebuilt (nvcc 13.0, sm_90a) into .devrun/depth/cache under the digest of an nvcc found at
# /tmp/depth_nvcc/nvcc (the same path on both machines); any that does not load there is rebuilt.
# new/ is emitted with --load-rings latency (bash .devrun/depth/emit_new.sh; REEMIT=1 re-emits it here first, where
# twill is installed); old/ is the same schedules with the option off (main's default).
set -o pipefail
[ "${REEMIT:-0}" = 1 ] && bash .devrun/depth/emit_new.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
mkdir -p /tmp/depth_nvcc && printf '#!/bin/sh\nexec nvcc "$@"\n' > /tmp/depth_nvcc/nvcc && chmod +x /tmp/depth_nvcc/nvcc
export NVCC=/tmp/depth_nvcc/nvcc TWILL_CACHE_DIR=$PWD/.devrun/depth/cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/card.txt"
timeout $(( ${DEPTH_LEFT:-110} )) python .devrun/depth/check.py --out "$OUT" 2>&1 | tee "$OUT/check.log"
