#!/bin/bash
# session 35, device call 5: uneven column splits (a partial last column tile: the last split takes it)
cd "$(dirname "$0")/../.."
export TWILL_CACHE_DIR=/tmp/twill-cache
D=.devrun/s36
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 150 python3 .devrun/s33/prebuild.py $D/b6 $D/b7 $D/b8 $D/b10 2>&1 | tail -8
for b in 6 7 8 10; do
  timeout 150 python3 bench/heldout/run.py check --batch $b --kernels $D/b$b 2>&1 | tail -30 | cut -c1-600; cp $D/b$b/check.json $OUT/b$b-check.json
done
