#!/bin/bash
# GPU check of branch spill40 (issues #21, #27: sm_100 row kernels imported as 128 x 64 tiles). Run from the
# repository root. The GPU machine has no solvers: build HERE first (`bash run.sh`: every held-out row kernel's
# sm_100 dump imported (128 x 64 tiles), solved for h200, emitted for sm_90a with its binding; nvcc), carry
# .devrun/s40spill, then check THERE (`bash run.sh gpu`: Triton 3.6 and torch on an H100/H200).
# An H200 is sm_90: the sm_100a kernels themselves cannot run there (tests compile them: -m extended). What runs is
# the path this branch opens on sm_90a: row kernels of 128-row tiles (two 64-row blocks of the wgmma layout a
# warpgroup), each against its fp32 reference at run.py's SIZES (partial last row tiles: R or M = 1000).
set -e
OUT=.devrun/s40spill
if [ "$1" != "gpu" ]; then
  python bench/triton_notes/s40/spill40/build.py --out $OUT
  echo "built: carry $OUT and run 'bash bench/triton_notes/s40/spill40/run.sh gpu' on the GPU machine"
  exit 0
fi
for b in 6 7 8 9 10 11 rand; do
  python bench/heldout/run.py check --batch $b --kernels $OUT/b$b | tee $OUT/b$b/check.log
done
# pass: every row "correct" (rel_error < 1e-2) and none with an "error"; a kernel whose build stopped has no binding
python - <<'PY'
import json, glob
bad = [(f, k, r) for f in sorted(glob.glob(".devrun/s40spill/b*/check.json"))
       for k, rows in json.load(open(f))["kernels"].items() for r in rows if not r.get("correct")]
print("\n".join(f"{f}: {k} {r.get('size')} {r.get('rel_error', r.get('error'))}" for f, k, r in bad) or "all correct")
PY
