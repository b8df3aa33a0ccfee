#!/bin/bash
# Session 39's GPU checks (never run: the device was not lent), built by bench/triton_notes/s39/build_all.sh.
# From the repo root on the GPU machine: bash .devrun/gpu_all.sh  (about 9 minutes if every part runs to its deadline)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
S=$(date +%s)
left() { echo $(( S + $1 - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/card.txt"
echo "== tf32"; timeout $(left 75) bash bench/triton_notes/s39/tf32/run.sh check > "$OUT/tf32.log" 2>&1; tail -n 25 "$OUT/tf32.log"; cp .devrun/tf32/k/check.json "$OUT/tf32-check.json" 2>/dev/null; cp .devrun/tf32/check-tf32.json "$OUT/" 2>/dev/null
echo "== tf32 done at $(( $(date +%s) - S )) s"
echo "== rand"; timeout $(left 150) bash bench/triton_notes/s39/rand/run.sh gpu > "$OUT/rand.log" 2>&1; tail -n 30 "$OUT/rand.log"; for k in k9 k6 kr; do cp .devrun/rand/$k/check.json "$OUT/rand-$k-check.json" 2>/dev/null; done; cp .devrun/rand/bitexact.json "$OUT/" 2>/dev/null
echo "== rand done at $(( $(date +%s) - S )) s"
echo "== batch 11"; timeout $(left 200) python3 bench/heldout/run.py check --batch 11 --kernels .devrun/h11 > "$OUT/h11.log" 2>&1; tail -n 10 "$OUT/h11.log"; cp .devrun/h11/check.json "$OUT/h11-check.json" 2>/dev/null
echo "== depth"; OUT=$OUT/depth timeout $(left 315) bash .devrun/depth/gpu.sh > "$OUT/depth.log" 2>&1; tail -n 30 "$OUT/depth.log"
echo "== depth done at $(( $(date +%s) - S )) s"
echo "== s21"
for b in 6 9 5; do
  timeout $(left 390) python3 bench/heldout/run.py check --batch $b --kernels .devrun/s21/b$b > "$OUT/s21_b$b.log" 2>&1
  cp .devrun/s21/b$b/check.json "$OUT/s21_b$b.json" 2>/dev/null; tail -n 8 "$OUT/s21_b$b.log"
done
echo "== unaligned"; OUT=$OUT/unaligned timeout $(left 560) bash .devrun/unaligned/gpu.sh > "$OUT/unaligned.log" 2>&1; tail -n 25 "$OUT/unaligned.log"
echo "== all done at $(( $(date +%s) - S )) s"
