#!/bin/bash
# session 36, device call 4: the elementwise loops at 2 CTAs an SM by default (n*) against session 35's code (b*)
cd "$(dirname "$0")/../.."
D=.devrun/s38
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
timeout 150 python3 .devrun/s33/prebuild.py $D/b10 $D/b8 $D/n10 $D/n8 2>&1 | tail -4
sum() { python3 -c "
import sys, json
for l in sys.stdin:
    try: n, j = l.split(' ', 1); j = json.loads(j)
    except Exception: continue
    print('$1', n, j['size'], j.get('correct'), j.get('rel_error'), 'twill', round(j.get('twill_kernel_ms', 0)*1e3, 1), 'triton', round(j.get('triton_kernel_ms', 0)*1e3, 1), j.get('error', '')[:100])"; }
for r in 1 2; do
  for v in b10 n10; do timeout 100 python3 bench/heldout/run.py check --batch 10 --kernels $D/$v 2>&1 | sum $v; cp $D/$v/check.json $OUT/$v-$r.json; done
  for v in b8 n8; do timeout 100 python3 bench/heldout/run.py check --batch 8 --kernels $D/$v 2>&1 | sum $v; cp $D/$v/check.json $OUT/$v-$r.json; done
done
