"""Triton kernels with loops in sequence (issue 21, "kernels with more than one loop"), each with an
fp32 reference. `python bench/seq/gen.py` dumps their TTGIR (sm_90, sm_100; before and after the
pipeliner) into tests/data/seq/.

- gemm_chain: Y = ((A @ B) @ C) @ E for one row tile: loop 1 runs A @ B over K1 into acc1 [BM, D];
  loop 2 reads h = acc1 as f16 (loop 1's final carry) as a loop-invariant tile and runs
  acc2 += (h @ C_n as f16) @ E_n over N2. A low-rank projection chain, two K loops in sequence.
- attn_two_pass: attention whose softmax is computed in two passes over the keys (no rescaling of
  the accumulator): loop 1 the row max m and the row sum l of exp2(s - m) (online within the pass),
  loop 2 acc += (exp2(s - m) / l as f16) @ V with m and l handed over. Base-2 softmax of Q K^T (the
  caller folds the softmax scale and log2(e) into Q), so no exp2 scale is involved.
- row_var: a two-pass row statistic over rows of a fixed length N (a compile-time constant, as a
  layer norm's hidden size often is): loop 1 sums each row of X, loop 2 sums the squared deviations
  from the mean (sum / N, computed between the loops), the variance written as that sum / N.
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


@triton.jit
def attn_two_pass_kernel(Q, K, V, O, N_KV, s_qm, s_kn, s_om,
                         BM: tl.constexpr, D: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    rm = pid * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    rn = tl.arange(0, BN)
    q = tl.load(Q + rm[:, None] * s_qm + rd[None, :])
    k_ptrs = K + rn[:, None] * s_kn + rd[None, :]
    m = tl.full([BM], -float("inf"), tl.float32)
    l = tl.zeros([BM], tl.float32)
    for _n in range(0, N_KV, BN):
        k = tl.load(k_ptrs)
        s = tl.dot(q, tl.trans(k))
        m_new = tl.maximum(m, tl.max(s, 1))
        l = l * tl.math.exp2(m - m_new) + tl.sum(tl.math.exp2(s - m_new[:, None]), 1)
        m = m_new
        k_ptrs += BN * s_kn
    k_ptrs = K + rn[:, None] * s_kn + rd[None, :]
    v_ptrs = V + rn[:, None] * s_kn + rd[None, :]
    acc = tl.zeros([BM, D], tl.float32)
    for _n in range(0, N_KV, BN):
        k = tl.load(k_ptrs)
        s = tl.dot(q, tl.trans(k))
        p = tl.math.exp2(s - m[:, None]) / l[:, None]
        v = tl.load(v_ptrs)
        acc = tl.dot(p.to(tl.float16), v, acc)
        k_ptrs += BN * s_kn
        v_ptrs += BN * s_kn
    tl.store(O + rm[:, None] * s_om + rd[None, :], acc.to(tl.float16))


def attn_two_pass_reference(q, k, v):
    """fp32: softmax in base 2 of Q K^T, times V."""
    import math
    s = q.float() @ k.float().T
    return torch_softmax(s * math.log(2.0)) @ v.float()


def torch_softmax(x):
    import torch
    return torch.softmax(x, dim=-1)


def attn_two_pass_inputs(N=1024, N_KV=2048, D=64, device="cuda"):
    import math
    import torch
    torch.manual_seed(1)
    q = (torch.randn(N, D, device=device) * (math.log2(math.e) / math.sqrt(D))).half()
    k = torch.randn(N_KV, D, device=device, dtype=torch.float16)
    v = torch.randn(N_KV, D, device=device, dtype=torch.float16)
    return q, k, v


@triton.jit
def row_var_kernel(X, Var, s_xm, N: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    rm = pid * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    ptrs = X + rm[:, None] * s_xm + rn[None, :]
    total = tl.zeros([BM], tl.float32)
    for _n in range(0, N, BN):
        x = tl.load(ptrs).to(tl.float32)
        total += tl.sum(x, 1)
        ptrs += BN
    mean = total / N
    ptrs = X + rm[:, None] * s_xm + rn[None, :]
    sq = tl.zeros([BM], tl.float32)
    for _n in range(0, N, BN):
        x = tl.load(ptrs).to(tl.float32)
        d = x - mean[:, None]
        sq += tl.sum(d * d, 1)
        ptrs += BN
    tl.store(Var + rm, sq / N)


def row_var_reference(x):
    return x.float().var(dim=1, unbiased=False)


def row_var_inputs(M=1024, N=4096, device="cuda"):
    import torch
    torch.manual_seed(2)
    return (torch.randn(M, N, device=device, dtype=torch.float16) * 2 + 1,)


DUMPS = {
    "gemm_chain": dict(
        kernel=gemm_chain_kernel,
        signature={"A": "*fp16", "B": "*fp16", "C": "*fp16", "E": "*fp16", "Y": "*fp16", "K1": "i32", "N2": "i32",
                   "s_am": "i32", "s_bk": "i32", "s_cd": "i32", "s_en": "i32", "s_ym": "i32",
                   "BM": "constexpr", "D": "constexpr", "BK": "constexpr", "BN": "constexpr"},
        constexprs={"BM": 128, "D": 64, "BK": 64, "BN": 64},
        divisible_by_16=["A", "B", "C", "E", "Y", "K1", "N2", "s_am", "s_bk", "s_cd", "s_en", "s_ym"],
        num_warps=4, num_stages=3),
    "attn_two_pass": dict(
        kernel=attn_two_pass_kernel,
        signature={"Q": "*fp16", "K": "*fp16", "V": "*fp16", "O": "*fp16", "N_KV": "i32",
                   "s_qm": "i32", "s_kn": "i32", "s_om": "i32",
                   "BM": "constexpr", "D": "constexpr", "BN": "constexpr"},
        constexprs={"BM": 128, "D": 64, "BN": 64},
        divisible_by_16=["Q", "K", "V", "O", "N_KV", "s_qm", "s_kn", "s_om"],
        num_warps=4, num_stages=3),
    "row_var": dict(
        kernel=row_var_kernel,
        signature={"X": "*fp16", "Var": "*fp32", "s_xm": "i32", "N": "constexpr", "BM": "constexpr",
                   "BN": "constexpr"},
        constexprs={"N": 4096, "BM": 128, "BN": 64},
        divisible_by_16=["X", "Var", "s_xm"],
        num_warps=4, num_stages=3),
}
