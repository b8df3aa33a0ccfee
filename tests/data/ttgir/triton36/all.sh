#!/bin/bash
# all.sh PYTHON DIR
PY=$1; D=$2
for n in $($PY -c "import sys; sys.path.insert(0,'$D'); import kernels; print(' '.join(kernels.DUMPS))"); do
  for cc in 90 100; do
    fname=$($PY -c "import sys; sys.path.insert(0,'$D'); import kernels; print(kernels.DUMPS['$n']['kernel'].__name__)")
    MLIR_ENABLE_DUMP=$fname $PY $D/one.py $n $cc $D/out 2> $D/out/${n}_sm$cc.log; echo "$n $cc rc=$?"
  done
done
