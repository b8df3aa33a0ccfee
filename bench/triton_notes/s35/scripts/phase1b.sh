#!/bin/bash
# session 35, device call 2: the one-loop column splits (fixup included) that the bench could not call in call 1
cd "$(dirname "$0")/../.."
export TWILL_CACHE_DIR=/tmp/twill-cache
D=.devrun/s35
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 150 python3 .devrun/s33/prebuild.py $D/b10 $D/b8 $D/b7 $D/b6 $D/b8f $D/b2 2>&1 | tail -8
timeout 120 python3 bench/heldout/run.py check --batch 7 --kernels $D/b7 2>&1 | grep -v layernorm | tail -16; cp $D/b7/check.json $OUT/b7-check.json
timeout 90 python3 bench/heldout/run.py check --batch 6 --kernels $D/b6 2>&1 | tail -10; cp $D/b6/check.json $OUT/b6-check.json
timeout 60 python3 bench/heldout/run.py check --kernels $D/b2 2>&1 | tail -6; cp $D/b2/check.json $OUT/b2-check.json
timeout 100 python3 bench/heldout/run.py check --batch 10 --kernels $D/b10 2>&1 | tail -12; cp $D/b10/check.json $OUT/b10-check.json
timeout 60 python3 bench/heldout/run.py check --batch 8 --kernels $D/b8 2>&1 | tail -8; cp $D/b8/check.json $OUT/b8-check.json
