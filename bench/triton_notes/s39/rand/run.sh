#!/bin/bash
# GPU check of tl.rand (branch rand, issue #21): batch 9's seeded_dropout (the Triton tutorial 04's _seeded_dropout,
# a flat map) and batch 6's attn_dropout, each tl.rand one `rand` op drawing Triton's Philox stream
# (twill/philox.py; emit/cuda_runtime/philox.cuh). Run from the repository root.
# The GPU machine has no solvers: run the two build lines HERE first (nvcc sm_90a, ~10 s and ~1 min), carry
# .devrun/rand (its k9 and k6 folders), then run the rest THERE (Triton and torch on an H100/H200).
set -e
if [ "$1" != "gpu" ]; then
  python bench/heldout/run.py build --batch 9 --out .devrun/rand/k9 seeded_dropout   # here: import, solve, emit, nvcc
  python bench/heldout/run.py build --batch 6 --out .devrun/rand/k6 attn_dropout     # here
  echo "built: carry .devrun/rand and run 'bash bench/triton_notes/s39/rand/run.sh gpu' on the GPU machine"
  exit 0
fi
# there: against the fp32 references (which call Triton's kernel: seeded_dropout's kept set is Triton's output's),
# each timed against Triton; sizes in run.py's SIZES (98432, 98433: a padded tail launch, 2^22; attention's default)
python bench/heldout/run.py check --batch 9 --kernels .devrun/rand/k9
python bench/heldout/run.py check --batch 6 --kernels .devrun/rand/k6
# there: element for element (run.py's rel_error is a norm ratio, which a few flipped elements would pass): Triton's
# tl.rand against twill/philox.py; twill's seeded dropout's kept set against Triton's kernel's, seeds of both signs
# and beyond 32 bits; attention's kept set read through V = identity blocks (q = 0: P uniform), against Triton's
python bench/triton_notes/s39/rand/bitexact.py .devrun/rand/k9 .devrun/rand/k6 | tee .devrun/rand/bitexact.json
