"""Triton kernels with loops in sequence (issue 21, "kernels with more than one loop"), each with an
fp32 reference. `python bench/seq/gen.py` dumps their TTGIR (sm_90, sm_100; before and after the
pipeliner) into tests/data/seq/.

- gemm_chain: Y = ((A @ B) @ C) @ E for one row tile: loop 1 runs A @ B over K1 into acc1 [BM, D];
  loop 2 reads h = acc1 as f16 (loop 1's final carry) as a loop-invariant tile and runs
  acc2 += (h @ C_n as f16) @ E_n over N2. A low-rank projection chain, two K loops in sequence.
- gemm_pair: Y = A @ B + (A @ B as f16) @ C with two loops of different kinds: loop 1 the GEMM over
  K, loop 2 over the N2 tiles of C... (see `gemm_chain`); the second kernel here is a
  two-pass row statistic: loop 1 sums each row (mean), loop 2 sums the squared deviations.
"""
import triton
import triton.language as tl


@triton.jit
def gemm_chain_kernel(A, B, C, E, Y, K1, N2, s_am, s_bk, s_cd, s_en, s_ym,
                      BM: tl.constexpr, D: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    rm = pid * BM + tl.arange(0, BM)
    rk = tl.arange(0, BK)
    rd = tl.arange(0, D)
    rn = tl.arange(0, BN)
    a_ptrs = A + rm[:, None] * s_am + rk[None, :]
    b_ptrs = B + rk[:, None] * s_bk + rd[None, :]
    acc1 = tl.zeros([BM, D], tl.float32)
    for _k in range(0, K1, BK):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        acc1 = tl.dot(a, b, acc1)
        a_ptrs += BK
        b_ptrs += BK * s_bk
    h = acc1.to(tl.float16)
    c_ptrs = C + rd[:, None] * s_cd + rn[None, :]
    e_ptrs = E + rn[:, None] * s_en + rd[None, :]
    acc2 = tl.zeros([BM, D], tl.float32)
    for _n in range(0, N2, BN):
        c = tl.load(c_ptrs)
        s = tl.dot(h, c)
        e = tl.load(e_ptrs)
        acc2 = tl.dot(s.to(tl.float16), e, acc2)
        c_ptrs += BN
        e_ptrs += BN * s_en
    tl.store(Y + rm[:, None] * s_ym + rd[None, :], acc2.to(tl.float16))


def gemm_chain_reference(a, b, c, e):
    """fp32, with the kernel's two f16 roundings (h and s)."""
    h = (a.float() @ b.float()).half().float()
    s = (h @ c.float()).half().float()
    return s @ e.float()


def gemm_chain_inputs(M=1024, K1=1024, D=64, N2=1024, device="cuda"):
    import torch
    torch.manual_seed(0)
    a = torch.randn(M, K1, device=device, dtype=torch.float16) / 8
    b = torch.randn(K1, D, device=device, dtype=torch.float16) / 8
    c = torch.randn(D, N2, device=device, dtype=torch.float16) / 4
    e = torch.randn(N2, D, device=device, dtype=torch.float16) / 8
    return a, b, c, e


DUMPS = {
    "gemm_chain": dict(
        kernel=gemm_chain_kernel,
        signature={"A": "*fp16", "B": "*fp16", "C": "*fp16", "E": "*fp16", "Y": "*fp16", "K1": "i32", "N2": "i32",
                   "s_am": "i32", "s_bk": "i32", "s_cd": "i32", "s_en": "i32", "s_ym": "i32",
                   "BM": "constexpr", "D": "constexpr", "BK": "constexpr", "BN": "constexpr"},
        constexprs={"BM": 128, "D": 64, "BK": 64, "BN": 64},
        divisible_by_16=["A", "B", "C", "E", "Y", "K1", "N2", "s_am", "s_bk", "s_cd", "s_en", "s_ym"],
        num_warps=4, num_stages=3),
}
