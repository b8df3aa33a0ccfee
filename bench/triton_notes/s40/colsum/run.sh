#!/bin/bash
# GPU check of column sums (branch colsum, ttgir/colsum.py): a loop over row blocks summed down the columns after it,
# imported as one column a program (64 a CTA), its tiles read from the argument's transpose (`{transposed = true}`:
# the binding copies DY.mT into a [N, M] buffer each call, then the kernel sums rows). Batch 12 (kernels12.py:
# bias_grad bf16, ln_dwdb f16 with per-row mean/rstd, bn_stats f32 with an epilogue) and batch 9's tutorial
# layer_norm_bwd_dwdb (f32, two sums). What it checks: each binding against the kernel's fp32 reference at the
# default sizes and at ragged M and N (run.py's SIZES: a partial last loop tile of 128 and a partial last row tile
# of 64), N and M checked by the binding against the tensors, Triton's own kernel timed beside it.
# Run from the repository root. The GPU machine has no solvers: run the two build lines here first, carry
# .devrun/colsum, then the check lines there.
set -e
python bench/heldout/run.py build --batch 12 --out .devrun/colsum/k12 bias_grad ln_dwdb bn_stats   # here
python bench/heldout/run.py build --batch 9 --out .devrun/colsum/k9 layer_norm_bwd_dwdb             # here
python bench/heldout/run.py check --batch 12 --kernels .devrun/colsum/k12                           # there
python bench/heldout/run.py check --batch 9 --kernels .devrun/colsum/k9                             # there
cat .devrun/colsum/k12/check.json .devrun/colsum/k9/check.json
