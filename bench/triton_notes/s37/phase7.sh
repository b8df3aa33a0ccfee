#!/bin/bash
# session 36, device call 7: flat maps of any length (the padded tail, a row of the blocks a pipeline needs), then the GPU tests
cd "$(dirname "$0")/../.."
export TWILL_CACHE_DIR=/tmp/twill-cache
D=.devrun/s38
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 100 python3 .devrun/s33/prebuild.py $D/f8 $D/f10 2>&1 | tail -3
sum() { python3 -c "
import sys, json
for l in sys.stdin:
    try: n, j = l.split(' ', 1); j = json.loads(j)
    except Exception: continue
    print('$1', n, j['size'], j.get('correct'), j.get('rel_error'), 'twill', round(j.get('twill_kernel_ms', 0)*1e3, 1), 'triton', round(j.get('triton_kernel_ms', 0)*1e3, 1), 'per call', round(j.get('twill_ms', 0)*1e3, 1), round(j.get('triton_ms', 0)*1e3, 1), j.get('error', '')[:300])"; }
timeout 60 python3 bench/heldout/run.py check --batch 8 --kernels $D/f8 2>&1 | sum f8; cp $D/f8/check.json $OUT/f8.json
timeout 60 python3 bench/heldout/run.py check --batch 10 --kernels $D/f10 2>&1 | sum f10; cp $D/f10/check.json $OUT/f10.json
timeout 420 bash bench/device_check.sh tests $OUT 2>&1 | tail -15
