#!/bin/bash
# Session 40's GPU checks, from the repo root on the GPU machine, carrying .devrun/swig .devrun/colsum .devrun/depth
# (built here: run.py build lines in bench/triton_notes/s40/README.md). Each part to a deadline; results in $OUT.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/r"
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
S=$(date +%s)
left() { echo $(( S + $1 - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/r/card.txt"
summ() {  # one line a row of a run.py check.json
  python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k, rows in d["kernels"].items():
    for r in rows:
        print(k, r.get("size"), "correct", r.get("correct"), "err", r.get("rel_error"), "twill_kernel_ms", r.get("twill_kernel_ms"),
              "triton_kernel_ms", r.get("triton_kernel_ms"), (r.get("error") or "")[:300])
PY
}
# every binding library at once, on all cores (.devrun/prebuild.py, carried)
timeout $(left 60) python3 .devrun/prebuild.py .devrun/swig .devrun/colsum 2>&1 | tail -n 3
echo "== built at $(( $(date +%s) - S )) s"
# 1. swiglu_bwd: old (main before: unsplit, 2 CTAs an SM), new (column split, rings cut to fit staging), c1 (split, 1 CTA an SM)
for v in old new c1; do
  timeout $(left $(( ${1:-110} ))) python3 bench/heldout/run.py check --batch 11 --kernels .devrun/swig/$v > "$OUT/r/swig_$v.log" 2>&1
  cp .devrun/swig/$v/check.json "$OUT/r/swig_$v.json" 2>/dev/null; echo "== swiglu $v at $(( $(date +%s) - S )) s"; summ .devrun/swig/$v/check.json
  set -- $(( ${1:-110} + 50 ))
done
# 2. column sums (batch 12, batch 9's tutorial dw/db)
for b in 12 9; do
  timeout $(left $(( b == 12 ? 250 : 280 ))) python3 bench/heldout/run.py check --batch $b --kernels .devrun/colsum/k$b > "$OUT/r/colsum_$b.log" 2>&1
  cp .devrun/colsum/k$b/check.json "$OUT/r/colsum_$b.json" 2>/dev/null; echo "== colsum $b at $(( $(date +%s) - S )) s"; summ .devrun/colsum/k$b/check.json
done
# 3. extra checks the helpers left (EXTRA: a list of 'batch:dir' pairs)
for e in $EXTRA; do
  b=${e%%:*}; d=${e#*:}
  timeout $(left 500) python3 bench/heldout/run.py check --batch $b --kernels $d > "$OUT/r/extra_$b.log" 2>&1
  cp $d/check.json "$OUT/r/extra_$b_$(basename $d).json" 2>/dev/null; echo "== extra $e at $(( $(date +%s) - S )) s"; summ $d/check.json
done
# 4. where a row kernel's time goes (Nsight Compute), with what is left (TOTAL: the call's seconds)
[ $(left ${TOTAL:-560}) -gt 40 ] && ROWPROF_LEFT=$(left ${TOTAL:-560}) OUT=$OUT/r bash bench/triton_notes/s40/rowprof/gpu.sh
tar czf "$OUT/results.tgz" -C "$OUT" r && rm -rf "$OUT/r"
echo "== all done at $(( $(date +%s) - S )) s"
