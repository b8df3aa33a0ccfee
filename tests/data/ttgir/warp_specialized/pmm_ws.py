import os, sys
os.environ["TRITON_ALWAYS_COMPILE"] = "1"
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

@triton.jit
def pmm_ws(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, NUM_SMS: tl.constexpr, FLAT: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(A, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(B, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_desc = tl.make_tensor_descriptor(C, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    tiles_n = tl.cdiv(N, BN)
    tiles = tl.cdiv(M, BM) * tiles_n
    for tile in tl.range(tl.program_id(0), tiles, NUM_SMS, flatten=FLAT, warp_specialize=True):
        pm = tile // tiles_n
        pn = tile % tiles_n
        acc = tl.zeros([BM, BN], tl.float32)
        for k in range(0, K, BK):
            a = a_desc.load([pm * BM, k])
            b = b_desc.load([pn * BN, k])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([pm * BM, pn * BN], acc.to(tl.float16))

cc, flat = int(sys.argv[2]), sys.argv[3] == "1"
sig = {"A": "*fp16", "B": "*fp16", "C": "*fp16", "M": "i32", "N": "i32", "K": "i32"}
src = ASTSource(fn=pmm_ws, signature=sig, constexprs={"BM": 128, "BN": 128, "BK": 64, "NUM_SMS": 132, "FLAT": flat},
                attrs={(i,): [["tt.divisibility", 16]] for i in range(6)})
k = triton.compile(src, target=GPUTarget("cuda", cc, 32), options=dict(num_warps=4, num_stages=3))
open(sys.argv[1], "w").write(k.asm["ttgir"])
