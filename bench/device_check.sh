#!/bin/bash
# One call on the GPU machine that builds, checks and times what a session changed (run from the
# repository root, with the folders `bench/triton_bench.py build` and `bench/heldout/run.py build`
# wrote carried along, e.g. .devrun/corpus and .devrun/heldout):
#
#   bash bench/device_check.sh tests  OUT                 # the golden bindings built, tests/test_gpu.py
#                                                         # and the causal GPU tests against torch
#   bash bench/device_check.sh heldout OUT HELDOUT_DIR    # the held-out kernels' bindings vs their references
#   bash bench/device_check.sh heldout3 OUT HELDOUT3_DIR  # the same for batch 3 (run.py build --batch 3)
#   bash bench/device_check.sh batch OUT N DIR            # the same for batch N (run.py build --batch N --out DIR)
#   bash bench/device_check.sh corpus OUT CORPUS_DIR [KERNEL ...]  # twill vs Triton on the corpus
#
# Several steps in one call: `bash bench/device_check.sh all OUT HELDOUT_DIR CORPUS_DIR`.
# Results go to OUT (the device tool's $OUT): pytest's log, check.json, the corpus run.json.
set -u
step=$1
out=$2
export TWILL_CACHE_DIR=${TWILL_CACHE_DIR:-/tmp/twill-cache}
mkdir -p "$out"

tests() {
  python3 bench/gpu_bench.py --build-only 2>&1 | tail -3
  python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_causal.py \
    -k "torch or exact or gpu or GPU" 2>&1 | tail -40 | tee "$out/tests.log"
}

heldout() {
  python3 bench/heldout/run.py check --kernels "$1" 2>&1 | tail -20
  cp "$1/check.json" "$out/heldout-check.json"
}

heldout3() {
  python3 bench/heldout/run.py check --batch 3 --kernels "$1" 2>&1 | tail -20
  cp "$1/check.json" "$out/heldout3-check.json"
}

batch() {
  python3 bench/heldout/run.py check --batch "$1" --kernels "$2" 2>&1 | tail -20
  cp "$2/check.json" "$out/batch$1-check.json"
}

corpus() {
  local dir=$1
  shift
  python3 bench/triton_bench.py run --kernels "$dir" --triton bench/triton-results-triton36.json \
    --out "$out/corpus" --pairs 3 ${1:+--only "$@"} 2>&1 | tail -40
}

case $step in
  tests) tests ;;
  heldout) heldout "$3" ;;
  heldout3) heldout3 "$3" ;;
  batch) batch "$3" "$4" ;;
  corpus) corpus "${@:3}" ;;
  all) tests; heldout "$3"; corpus "$4" ;;
  *) echo "usage: $0 tests|heldout|heldout3|batch|corpus|all OUT [N] [DIR ...]" >&2; exit 2 ;;
esac
