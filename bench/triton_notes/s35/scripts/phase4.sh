#!/bin/bash
cd "$(dirname "$0")/../.."
export TWILL_CACHE_DIR=/tmp/twill-cache
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 120 python3 .devrun/s33/prebuild.py .devrun/s36/b7 .devrun/s36/b8 .devrun/s37/b7 .devrun/s37/b8 2>&1 | tail -3
timeout 200 python3 .devrun/s37/hostcall.py 2>&1 | tail -70
