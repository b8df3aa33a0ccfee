#!/bin/bash
# Session 41's GPU checks (built by build.sh), from the repo root on the GPU machine. Each part to a deadline
# (TOTAL: the call's seconds); every result in one tarball, $OUT/results.tgz.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/r"
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
S=$(date +%s); TOTAL=${TOTAL:-560}
left() { echo $(( S + $1 - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/r/card.txt"
summ() {  # one line a row of a run.py check.json
  python3 - "$1" <<'PY'
import json, sys
try: d = json.load(open(sys.argv[1]))
except Exception as e: print("no", sys.argv[1], e); sys.exit()
for k, rows in d["kernels"].items():
    for r in rows:
        t, tr = r.get("twill_kernel_ms"), r.get("triton_kernel_ms")
        print(k, r.get("size"), "ok" if r.get("correct") else "WRONG", "err", r.get("rel_error"), "twill", t, "triton", tr,
              "x%.2f" % (tr / t) if t and tr else "", (r.get("error") or "")[:300])
PY
}
timeout $(left 70) python3 .devrun/prebuild.py .devrun/ragged40 .devrun/bc40 .devrun/colsum .devrun/s40spill .devrun/depth/old .devrun/grid41 2>&1 | grep -c '"s"'
echo "== built at $(( $(date +%s) - S )) s"
check() {  # name batch dir deadline
  timeout $(left $4) python3 bench/heldout/run.py check --batch $2 --kernels $3 > "$OUT/r/$1.log" 2>&1
  cp $3/check.json "$OUT/r/$1.json" 2>/dev/null; echo "== $1 at $(( $(date +%s) - S )) s"; summ $3/check.json
}
check grid41_b11 11 .devrun/grid41/b11 130   # swiglu_bwd split by columns (grid41)
timeout $(left 170) python3 bench/triton_notes/s41/grid41/old_new.py .devrun/grid41/b11 > "$OUT/r/grid41_old_new.log" 2>&1; tail -n 8 "$OUT/r/grid41_old_new.log"
[ -d .devrun/causal41 ] && timeout $(left 300) python3 bench/triton_notes/s41/causal41/bench.py .devrun/causal41 --pairs 3 --deadline $(left 290) > "$OUT/r/causal41.log" 2>&1; tail -n 25 "$OUT/r/causal41.log"
check rows41a 11 .devrun/grid41/r41a 325   # quant_int8_rows (rows41a; built by rows41a/run.sh, copied under grid41)
check rows41b 11 .devrun/grid41/r41b 350   # cumsum_rows, argmax_rows (rows41b)
check rows41c 11 .devrun/grid41/r41c 365   # causal_softmax (rows41c)
check ragged11 11 .devrun/ragged40/k11 375
check ragged10 10 .devrun/ragged40/k10 395
check bcast6 6 .devrun/bc40 415
timeout $(left 425) python3 bench/triton_notes/s40/bcast40/forms.py .devrun/bc40 > "$OUT/r/bcast_forms.log" 2>&1; tail -n 12 "$OUT/r/bcast_forms.log"
check colsum12 12 .devrun/colsum/k12 450
check colsum9 9 .devrun/colsum/k9 470
[ -d .devrun/s40spill ] && i=0 && for b in 6 7 8 9 10 11 rand; do i=$((i+1)); check spill_b$b $b .devrun/s40spill/b$b $(( 470 + i * 13 )); done
[ $(left $TOTAL) -gt 40 ] && ROWPROF_LEFT=$(left $TOTAL) OUT=$OUT/r bash bench/triton_notes/s40/rowprof/gpu.sh
tar czf "$OUT/results.tgz" -C "$OUT" r && rm -rf "$OUT/r"
echo "== all done at $(( $(date +%s) - S )) s"
