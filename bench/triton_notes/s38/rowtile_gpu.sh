#!/bin/bash
# rowtile's GPU check (run from the repo root, .devrun/rowtile carried): bash .devrun/rowtile/gpu.sh
set -o pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/card.txt"
timeout 580 python .devrun/rowtile/check.py --out "$OUT" 2>&1 | tee "$OUT/check.log"
