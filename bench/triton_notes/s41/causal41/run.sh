#!/bin/bash
# GPU check of branch causal41 (issue #23: causal forward at least 1.0x FA4 at N = 8192, 16384). From the repo root.
# HERE (no GPU; twill, nvcc): `bash bench/triton_notes/s41/causal41/run.sh` emits and builds the causal kernels into
# .devrun/causal41 (build.py: about 2 minutes on 2 cores). Carry .devrun/causal41 (and FA4's wheels, as
# ../shared/device-notes.md says, for the FA4 column), then THERE (H100/H200, torch):
# `bash bench/triton_notes/s41/causal41/run.sh gpu` (bench.py: about 2 minutes, stops itself at 200 s).
#
# What changed: the causal forward now has a persistent kernel<true> (cuda.py persistent() no longer excludes a
# causal loop) whose roles read Args through a pointer laundered once per tile (kernel.py `_tiles`, `tile_args`).
# Session 26's kernel<true> had its wgmmas serialized (C7512) and ran 0.54-0.62x of one CTA per tile: nvcc had
# hoisted every parameter the tile loop reads out of it, and ptxas held them in registers across the main loop.
# Per tile, kernel<true> compiles clean (build.py prints ptxas's verdict per variant).
# PREDICTION (not measured): correct everywhere (rel. error ~2.6e-4, nothing unwritten). h200 p=1 faster than
# h200 p=0 by the per-tile cost session 22 inferred (15-19 iterations' worth per tile, not overlapped on a grid of
# one CTA per tile): if all of it were hidden, about 1.2-1.3x at N = 8192 and 1.1-1.2x at 16384; expected less
# (the per-tile parameter loads in the main loop, the ping-pong's hand-over at each tile end, the static round
# robin's imbalance), say 1.05-1.15x, i.e. 0.84-0.90x FA4 -> about 0.90-1.0x. h200_hoisted p=1 about 0.55x of
# h200 p=0 (session 26). h100 (I = 512) slower than h200 at p=0, as the non-causal h100 schedule is (0.93x).
set -e
OUT=.devrun/causal41
if [ "$1" != "gpu" ]; then
  python bench/triton_notes/s41/causal41/build.py $OUT
  exit 0
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 230 python bench/triton_notes/s41/causal41/bench.py $OUT --pairs 5 --deadline 200 || echo "bench stopped ($?)"
