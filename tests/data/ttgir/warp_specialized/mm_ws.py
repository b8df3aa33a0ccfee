import os, sys
os.environ["TRITON_ALWAYS_COMPILE"] = "1"
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

@triton.jit
def mm_ws(A, B, C, K, stride_am, stride_bk, stride_cm, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0); pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM); rn = pid_n * BN + tl.arange(0, BN); rk = tl.arange(0, BK)
    a_desc = tl.make_tensor_descriptor(A, shape=[4096, K], strides=[stride_am, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(B, shape=[K, 4096], strides=[stride_bk, 1], block_shape=[BK, BN])
    acc = tl.zeros([BM, BN], tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=True):
        a = a_desc.load([pid_m * BM, k])
        b = b_desc.load([k, pid_n * BN])
        acc = tl.dot(a, b, acc)
    tl.store(C + rm[:, None] * stride_cm + rn[None, :], acc.to(tl.float16))

sig = {"A": "*fp16", "B": "*fp16", "C": "*fp16", "K": "i32", "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32"}
src = ASTSource(fn=mm_ws, signature=sig, constexprs={"BM": 128, "BN": 128, "BK": 64},
                attrs={(i,): [["tt.divisibility", 16]] for i in range(7)})
k = triton.compile(src, target=GPUTarget("cuda", 100, 32), options=dict(num_warps=4, num_stages=3))
open(sys.argv[1], "w").write(k.asm["ttgir"])
