#!/bin/bash
# new/: old/'s schedule files (main's bench/heldout/run.py build) re-emitted by this tree's emit-cuda with
# --load-rings latency (the deeper load rings, off by default: twill/emit/streams.py), as the bench's build would
# (ptxas loop on, --binding torch). Run from the repo root with twill installed: bash .devrun/depth/emit_new.sh [DIR]
set -eo pipefail
NEW=${1:-.devrun/depth/new}
for b in b7 b10; do
  mkdir -p "$NEW/$b"
  for j in .devrun/depth/old/$b/*_sm90.json; do
    n=$(basename "$j" .json)
    cp "$j" ".devrun/depth/old/$b/$n.tir" "$NEW/$b/"
    twill emit-cuda "$NEW/$b/$n.json" -o "$NEW/$b/$n.cu" --binding torch --load-rings latency -q
  done
done
