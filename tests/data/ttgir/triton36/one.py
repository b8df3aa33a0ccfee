"""python one.py NAME CC OUTDIR: compile one kernel; ttgir (after) to OUTDIR/NAME_smCC.ttgir; the
MLIR_ENABLE_DUMP log goes to stderr (captured by the caller)."""
import os, sys
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ["TRITON_ALWAYS_COMPILE"] = "1"
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import kernels
name, cc, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
spec = kernels.DUMPS[name]
fn = spec["kernel"]
attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in spec.get("divisible_by_16", [])}
try:
    src = ASTSource(fn=fn, signature=spec["signature"], constexprs=spec["constexprs"], attrs=attrs)
except TypeError:
    src = ASTSource(fn=fn, signature=spec["signature"], constants=spec["constexprs"], attrs=attrs)
k = triton.compile(src, target=GPUTarget("cuda", cc, 32), options=dict(num_warps=spec["num_warps"], num_stages=spec["num_stages"]))
open(f"{out}/{name}_sm{cc}.ttgir", "w").write(k.asm["ttgir"])
