#!/bin/bash
# Session 41's GPU checks cut to a short call (gpu41.sh's, most important first; TOTAL: the call's seconds): the new
# kernels' correctness (swiglu_bwd split, quant_int8_rows, cumsum/argmax, causal_softmax), the persistent causal
# forward against one CTA per tile and cuDNN, then session 40's ragged / broadcast / column-sum checks. One tarball.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/r"
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
S=$(date +%s); TOTAL=${TOTAL:-290}
left() { echo $(( S + $1 - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/r/card.txt"
summ() {
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
timeout $(left $(( TOTAL < 100 ? 35 : 50 ))) python3 .devrun/prebuild.py .devrun/grid41 .devrun/ragged40 .devrun/bc40 .devrun/colsum 2>&1 | grep -c '"s"'
echo "== built at $(( $(date +%s) - S )) s"
check() {  # name batch dir deadline
  [ $(left $4) -gt 5 ] || { echo "== $1 skipped"; return; }
  timeout $(left $4) python3 bench/heldout/run.py check --batch $2 --kernels $3 > "$OUT/r/$1.log" 2>&1
  cp $3/check.json "$OUT/r/$1.json" 2>/dev/null; echo "== $1 at $(( $(date +%s) - S )) s"; summ $3/check.json
  grep -E "^\w+ \{" "$OUT/r/$1.log" | cut -c1-400 | tail -n 6
}
check grid41_b11 11 .devrun/grid41/b11 $(( TOTAL < 100 ? TOTAL - 6 : 85 ))
check rows41a 11 .devrun/grid41/r41a 110
check rows41b 11 .devrun/grid41/r41b 140
check rows41c 11 .devrun/grid41/r41c 160
[ $TOTAL -ge 225 ] && timeout $(left 225) python3 bench/triton_notes/s41/causal41/bench.py .devrun/causal41 --pairs 2 --deadline $(left 215) > "$OUT/r/causal41.log" 2>&1; tail -n 25 "$OUT/r/causal41.log"
check ragged11 11 .devrun/ragged40/k11 245
check bcast6 6 .devrun/bc40 265
check colsum12 12 .devrun/colsum/k12 $(( TOTAL - 8 ))
tar czf "$OUT/results.tgz" -C "$OUT" r && rm -rf "$OUT/r"
echo "== all done at $(( $(date +%s) - S )) s"
