#!/bin/bash
# GPU check of tl.rand (branch rand, issue #21): batch 9's seeded_dropout (the Triton tutorial 04's _seeded_dropout,
# a flat map) and batch 6's attn_dropout, each tl.rand one `rand` op drawing Triton's Philox stream
# (twill/philox.py; emit/cuda_runtime/philox.cuh). Run from the repository root.
# The GPU machine has no solvers: run the build lines HERE first (`bash run.sh`: nvcc sm_90a, about 90 s in all),
# carry .devrun/rand (its k9, k6 and kr folders), then run the rest THERE (`bash run.sh gpu`: Triton and torch on
# an H100/H200).
set -e
if [ "$1" != "gpu" ]; then
  python bench/heldout/run.py build --batch 9 --out .devrun/rand/k9 seeded_dropout   # here: import, solve, emit, nvcc
  python bench/heldout/run.py build --batch 6 --out .devrun/rand/k6 attn_dropout     # here
  python bench/heldout/run.py build --batch rand --out .devrun/rand/kr dropout_rows dropout_rows_loop dropout_2d \
      rand_rounds7 noise_flat                                                          # here (~20 s)
  echo "built: carry .devrun/rand and run 'bash bench/triton_notes/s39/rand/run.sh gpu' on the GPU machine"
  exit 0
fi
# there: against the fp32 references (which call Triton's kernel: seeded_dropout's kept set is Triton's output's),
# each timed against Triton; sizes in run.py's SIZES (98432, 98433: a padded tail launch, 2^22; attention's default)
python bench/heldout/run.py check --batch 9 --kernels .devrun/rand/k9
python bench/heldout/run.py check --batch 6 --kernels .devrun/rand/k6
# there: the forms users write (randoms.py), against references that draw Triton's stream in numpy (twill/philox.py):
# Triton's own launch is checked against them too (triton_rel_error: 0 where the stream in numpy is Triton's)
python bench/heldout/run.py check --batch rand --kernels .devrun/rand/kr
# there: element for element (run.py's rel_error is a norm ratio, which a few flipped elements would pass): Triton's
# tl.rand against twill/philox.py; twill's seeded dropout's kept set against Triton's kernel's, seeds of both signs
# and beyond 32 bits; attention's kept set read through V = identity blocks (q = 0: P uniform), against Triton's
python bench/triton_notes/s39/rand/bitexact.py .devrun/rand/k9 .devrun/rand/k6 | tee .devrun/rand/bitexact.json
