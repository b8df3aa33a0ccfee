"""Held-out Triton kernels, sixth batch: written the way users write them, none tuned for twill, and
unlike bench/heldout/kernels.py .. kernels5.py, bench/triton_corpus/kernels.py and ../shared/triton/:
the FlashAttention-2 backward dK/dV kernel (the Triton tutorial's _attn_bwd_dkdv: a loop over query
blocks, P recomputed from the forward's M, Delta loaded), attention with dropout (tl.rand, philox),
attention with a loaded boolean mask [N, N], a GEMM accumulating in fp16, a batched GEMM whose B is
broadcast over the batch (stride 0), a GEMM storing C transposed, LayerNorm in two column loops, a
cross-entropy forward (online logsumexp over the vocabulary, the target's logit gathered), a fused-MoE
GEMM (rows gathered through sorted_token_ids, the expert's weights by a loaded expert id), and a
GPTQ-style int4 GEMM (bf16 A, B packed two per byte along K, per-group scales and zeros in the loop).

Protocol for every kernel NAME (KERNELS at the bottom), as kernels.py:
    tensors, params = NAME_make_inputs(size, device)   # size: dict of overrides or None
    out = NAME_launch(*tensors, **params)                # runs the Triton kernel
    ref = NAME_reference(*tensors, **params)             # plain torch, fp32
DUMPS[NAME] holds what gen.py compiles the TTGIR dumps with (`gen.py --module kernels6`).
"""
import math

import triton
import triton.language as tl

try:
    import torch
except ImportError:  # dumping TTGIR needs no torch
    torch = None

LOG2E = 1.4426950408889634


def _sizes(defaults, size):
    out = dict(defaults)
    if size:
        unknown = set(size) - set(defaults)
        if unknown:
            raise KeyError(f"unknown size keys {sorted(unknown)}; known: {sorted(defaults)}")
        out.update(size)
    return out


# ---------------------------------------------------------------------------------------------
# 1. FlashAttention-2 backward, dK and dV (the tutorial's _attn_bwd_dkdv): one program per block of
#    128 keys, a loop over blocks of 64 queries: P^T recomputed as exp2(K Q^T * qk_scale - M) from
#    the forward's M (base-2 logsumexp, loaded per query block), dV += P^T dO, dP^T = V dO^T,
#    dS^T = P^T * (dP^T - Delta), dK += dS^T Q; dK scaled by sm_scale after the loop. fp16, D = 64.
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_bwd_dkdv_kernel(Q, K, V, DO, DK, DV, M, Delta, stride_bh, stride_n, N_CTX, sm_scale,
                         HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_n = tl.program_id(0)
    bh = tl.program_id(1)
    base = bh.to(tl.int64) * stride_bh
    rbase = bh.to(tl.int64) * N_CTX
    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    k = tl.load(K + base + offs_n[:, None] * stride_n + offs_d[None, :])
    v = tl.load(V + base + offs_n[:, None] * stride_n + offs_d[None, :])
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    qT_ptrs = Q + base + offs_m[None, :] * stride_n + offs_d[:, None]
    do_ptrs = DO + base + offs_m[:, None] * stride_n + offs_d[None, :]
    curr_m = 0
    for _ in range(0, N_CTX // BLOCK_M):
        qT = tl.load(qT_ptrs)
        m = tl.load(M + rbase + curr_m + offs_m)
        qkT = tl.dot(k, qT)
        pT = tl.math.exp2(qkT * qk_scale - m[None, :])
        do = tl.load(do_ptrs)
        dv += tl.dot(pT.to(tl.float16), do)
        Di = tl.load(Delta + rbase + curr_m + offs_m)
        dpT = tl.dot(v, tl.trans(do)).to(tl.float32)
        dsT = pT * (dpT - Di[None, :])
        dk += tl.dot(dsT.to(tl.float16), tl.trans(qT))
        curr_m += BLOCK_M
        qT_ptrs += BLOCK_M * stride_n
        do_ptrs += BLOCK_M * stride_n
    dk *= sm_scale
    tl.store(DV + base + offs_n[:, None] * stride_n + offs_d[None, :], dv.to(tl.float16))
    tl.store(DK + base + offs_n[:, None] * stride_n + offs_d[None, :], dk.to(tl.float16))


def attn_bwd_dkdv_launch(q, k, v, do, m, delta, sm_scale=None):
    B, H, N, D = q.shape
    assert D == 64 and N % 128 == 0
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    attn_bwd_dkdv_kernel[(N // 128, B * H)](q, k, v, do, dk, dv, m, delta, q.stride(1), q.stride(2), N, sm_scale,
                                            HEAD_DIM=64, BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=2)
    return dk, dv


def attn_bwd_dkdv_reference(q, k, v, do, m, delta, sm_scale=None):
    sm_scale = sm_scale or 1.0 / math.sqrt(q.shape[-1])
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    p = torch.exp2(s * LOG2E - m[..., None])  # softmax from the stored logsumexp
    dv = p.transpose(-1, -2) @ do.float()
    dp = do.float() @ v.float().transpose(-1, -2)
    ds = p * (dp - delta[..., None])
    dk = ds.transpose(-1, -2) @ q.float() * sm_scale
    return dk, dv


def attn_bwd_dkdv_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=2, H=8, N=1024), size)
    torch.manual_seed(61)
    q, k, v, do = (torch.randn(s["B"], s["H"], s["N"], 64, device=device).to(torch.float16) for _ in range(4))
    sm = 1.0 / math.sqrt(64)
    sc = (q.float() @ k.float().transpose(-1, -2)) * sm
    m = torch.logsumexp(sc, -1) * LOG2E  # base 2, as the forward stores it
    o = torch.softmax(sc, -1) @ v.float()
    delta = (o * do.float()).sum(-1)  # the preprocess kernel's Delta = rowsum(O * dO)
    return (q, k, v, do, m.contiguous(), delta.contiguous()), {}


# ---------------------------------------------------------------------------------------------
# 2. Attention with dropout on P: keep = tl.rand(seed, offsets) > p_drop (philox, one number per
#    query and key, offset b*h*N*N + row*N + key), P / (1 - p_drop) where kept, 0 elsewhere; l_i sums
#    the undropped P. fp16, D = 64, BLOCK_M = 128, BLOCK_N = 64.
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_dropout_kernel(Q, K, V, O, stride_bh, stride_n, N_CTX, sm_scale, seed, dropout_p,
                        HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    base = bh.to(tl.int64) * stride_bh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * stride_n + offs_d[None, :])
    qk_scale = sm_scale * 1.44269504
    rng_base = bh * N_CTX * N_CTX
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in range(0, N_CTX, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + base + cols[None, :] * stride_n + offs_d[:, None])
        qk = tl.dot(q, k) * qk_scale
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        keep = tl.rand(seed, rng_base + offs_m[:, None] * N_CTX + cols[None, :]) > dropout_p
        p = tl.where(keep, p / (1.0 - dropout_p), 0.0)
        v = tl.load(V + base + cols[:, None] * stride_n + offs_d[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_ij
    tl.store(O + base + offs_m[:, None] * stride_n + offs_d[None, :], (acc / l_i[:, None]).to(tl.float16))


@triton.jit
def _keep_mask_kernel(KEEP, seed, dropout_p, total, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(KEEP + offs, (tl.rand(seed, offs) > dropout_p).to(tl.int8), mask=offs < total)


def attn_dropout_launch(q, k, v, seed=1234, dropout_p=0.1, sm_scale=None):
    B, H, N, D = q.shape
    assert D == 64 and N % 128 == 0
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    o = torch.empty_like(q)
    attn_dropout_kernel[(N // 128, B * H)](q, k, v, o, q.stride(1), q.stride(2), N, sm_scale, seed, dropout_p,
                                           HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3)
    return o


def attn_dropout_reference(q, k, v, seed=1234, dropout_p=0.1, sm_scale=None):
    """The keep mask from the same philox stream (tl.rand at the same offsets, a one-line kernel)."""
    B, H, N, D = q.shape
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    keep = torch.empty(B * H * N * N, device=q.device, dtype=torch.int8)
    _keep_mask_kernel[(triton.cdiv(keep.numel(), 1024),)](keep, seed, dropout_p, keep.numel(), BLOCK=1024)
    keep = keep.view(B, H, N, N).bool()
    p = torch.softmax((q.float() @ k.float().transpose(-1, -2)) * sm_scale, -1)
    return torch.where(keep, p / (1.0 - dropout_p), 0.0) @ v.float()


def attn_dropout_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=2, H=8, N=1024), size)
    torch.manual_seed(62)
    q, k, v = (torch.randn(s["B"], s["H"], s["N"], 64, device=device).to(torch.float16) for _ in range(3))
    return (q, k, v), {"seed": 1234, "dropout_p": 0.1}


# ---------------------------------------------------------------------------------------------
# 3. Attention with a loaded boolean mask [N, N] (int8, one per query and key, shared by the batch
#    and heads), applied in the loop as tl.where(mask != 0, qk, -1e6). fp16, D = 64, BLOCK_M = 128.
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_bool_mask_kernel(Q, K, V, MASK, O, stride_bh, stride_n, stride_mm, N_CTX, sm_scale,
                          HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    base = tl.program_id(1).to(tl.int64) * stride_bh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * stride_n + offs_d[None, :])
    qk_scale = sm_scale * 1.44269504
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in range(0, N_CTX, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + base + cols[None, :] * stride_n + offs_d[:, None])
        mk = tl.load(MASK + offs_m[:, None] * stride_mm + cols[None, :])
        qk = tl.dot(q, k) * qk_scale
        qk = tl.where(mk != 0, qk, -1.0e6)
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + cols[:, None] * stride_n + offs_d[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_ij
    tl.store(O + base + offs_m[:, None] * stride_n + offs_d[None, :], (acc / l_i[:, None]).to(tl.float16))


def attn_bool_mask_launch(q, k, v, mask, sm_scale=None):
    B, H, N, D = q.shape
    assert D == 64 and N % 128 == 0 and mask.shape == (N, N) and mask.dtype == torch.int8
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    o = torch.empty_like(q)
    attn_bool_mask_kernel[(N // 128, B * H)](q, k, v, mask, o, q.stride(1), q.stride(2), mask.stride(0), N,
                                             sm_scale, HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64, num_warps=8,
                                             num_stages=3)
    return o


def attn_bool_mask_reference(q, k, v, mask, sm_scale=None):
    sm_scale = sm_scale or 1.0 / math.sqrt(q.shape[-1])
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    return torch.softmax(s.masked_fill(mask == 0, float("-inf")), -1) @ v.float()


def attn_bool_mask_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=2, H=8, N=1024), size)
    torch.manual_seed(63)
    q, k, v = (torch.randn(s["B"], s["H"], s["N"], 64, device=device).to(torch.float16) for _ in range(3))
    mask = (torch.rand(s["N"], s["N"], device=device) < 0.7).to(torch.int8)
    mask.fill_diagonal_(1)  # every row keeps a key
    return (q, k, v, mask), {}


# ---------------------------------------------------------------------------------------------
# 4. GEMM accumulating in fp16: acc = tl.zeros(..., tl.float16), tl.dot(a, b, acc, out_dtype=fp16).
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_fp16_acc_kernel(A, B, C, M, N, K, stride_am, stride_bk, stride_cm,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = A + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = B + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)
    for k in range(0, K, BLOCK_K):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc, out_dtype=tl.float16)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    tl.store(C + offs_m[:, None] * stride_cm + offs_n[None, :], acc)


def gemm_fp16_acc_launch(a, b):
    M, K = a.shape
    _, N = b.shape
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    gemm_fp16_acc_kernel[(M // 128, N // 128)](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                                               BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3)
    return c


def gemm_fp16_acc_reference(a, b):
    return a.float() @ b.float()


def gemm_fp16_acc_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=1024, K=1024), size)
    torch.manual_seed(64)
    a = (torch.randn(s["M"], s["K"], device=device) * 0.1).to(torch.float16)
    b = (torch.randn(s["K"], s["N"], device=device) * 0.1).to(torch.float16)
    return (a, b), {}


# ---------------------------------------------------------------------------------------------
# 5. Batched GEMM whose B is one matrix for every batch: the kernel is the general batched GEMM
#    (B + pid_b * stride_bb) and the launch passes stride_bb = 0. fp16, C [BATCH, M, N].
# ---------------------------------------------------------------------------------------------
@triton.jit
def bmm_bcast_b_kernel(A, B, C, M, N, K, stride_ab, stride_am, stride_bb, stride_bk, stride_cb, stride_cm,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_b = tl.program_id(2)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = A + pid_b * stride_ab + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = B + pid_b * stride_bb + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        acc += tl.dot(tl.load(a_ptrs), tl.load(b_ptrs))
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    tl.store(C + pid_b * stride_cb + offs_m[:, None] * stride_cm + offs_n[None, :], acc.to(tl.float16))


def bmm_bcast_b_launch(a, b):
    BATCH, M, K = a.shape
    _, N = b.shape
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0
    c = torch.empty((BATCH, M, N), device=a.device, dtype=torch.float16)
    bmm_bcast_b_kernel[(M // 128, N // 128, BATCH)](a, b, c, M, N, K, a.stride(0), a.stride(1), 0, b.stride(0),
                                                    c.stride(0), c.stride(1), BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
                                                    num_warps=8, num_stages=3)
    return c


def bmm_bcast_b_reference(a, b):
    return a.float() @ b.float()


def bmm_bcast_b_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(BATCH=4, M=512, N=1024, K=1024), size)
    torch.manual_seed(65)
    a = (torch.randn(s["BATCH"], s["M"], s["K"], device=device) * 0.1).to(torch.float16)
    b = (torch.randn(s["K"], s["N"], device=device) * 0.1).to(torch.float16)
    return (a, b), {}


# ---------------------------------------------------------------------------------------------
# 6. GEMM storing C transposed: C is [N, M] and the store writes C + offs_n[None, :] * stride_cn +
#    offs_m[:, None] (the result's transpose, as a Linear whose output is column-major). bf16.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_store_ct_kernel(A, B, C, M, N, K, stride_am, stride_bk, stride_cn,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = A + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = B + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    tl.store(C + offs_n[None, :] * stride_cn + offs_m[:, None], acc.to(tl.bfloat16))


def gemm_store_ct_launch(a, b):
    M, K = a.shape
    _, N = b.shape
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0
    ct = torch.empty((N, M), device=a.device, dtype=torch.bfloat16)
    gemm_store_ct_kernel[(M // 128, N // 128)](a, b, ct, M, N, K, a.stride(0), b.stride(0), ct.stride(0),
                                               BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3)
    return ct


def gemm_store_ct_reference(a, b):
    return (a.float() @ b.float()).t()


def gemm_store_ct_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=768, K=1024), size)
    torch.manual_seed(66)
    a = (torch.randn(s["M"], s["K"], device=device) * 0.1).to(torch.bfloat16)
    b = (torch.randn(s["K"], s["N"], device=device) * 0.1).to(torch.bfloat16)
    return (a, b), {}


# ---------------------------------------------------------------------------------------------
# 7. LayerNorm forward in two loops over the columns (one row a program): sum and sum of squares,
#    then normalise, scale, shift and store; the mean and rstd stored too. fp16 x, fp32 stats.
# ---------------------------------------------------------------------------------------------
@triton.jit
def layernorm_2loop_kernel(X, Y, W, Bias, Mean, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    X += row * stride
    Y += row * stride
    s1 = tl.zeros([BLOCK_N], dtype=tl.float32)
    s2 = tl.zeros([BLOCK_N], dtype=tl.float32)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        s1 += x
        s2 += x * x
    mean = tl.sum(s1, axis=0) / N
    var = tl.sum(s2, axis=0) / N - mean * mean
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(Bias + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(Y + cols, y.to(tl.float16), mask=mask)


def layernorm_2loop_launch(x, w, b, eps=1e-5):
    R, N = x.shape
    y = torch.empty_like(x)
    mean = torch.empty(R, device=x.device, dtype=torch.float32)
    rstd = torch.empty(R, device=x.device, dtype=torch.float32)
    layernorm_2loop_kernel[(R,)](x, y, w, b, mean, rstd, x.stride(0), N, eps, BLOCK_N=1024, num_warps=8)
    return y, mean, rstd


def layernorm_2loop_reference(x, w, b, eps=1e-5):
    xf = x.float()
    mean = xf.mean(-1)
    var = xf.var(-1, unbiased=False)
    rstd = 1 / torch.sqrt(var + eps)
    return (xf - mean[:, None]) * rstd[:, None] * w + b, mean, rstd


def layernorm_2loop_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(R=4096, N=5120), size)
    torch.manual_seed(67)
    x = torch.randn(s["R"], s["N"], device=device).to(torch.float16)
    w = torch.randn(s["N"], device=device)
    b = torch.randn(s["N"], device=device)
    return (x, w, b), {}


# ---------------------------------------------------------------------------------------------
# 8. Cross-entropy forward (one row a program): an online logsumexp over the vocabulary in chunks
#    of 4096 (masked at the end: V = 32000), the target's logit gathered by its loaded index,
#    loss = lse - logit[target]. bf16 logits, fp32 loss and lse.
# ---------------------------------------------------------------------------------------------
@triton.jit
def cross_entropy_fwd_kernel(LOGITS, TARGET, LOSS, LSE, stride_row, V, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    LOGITS += row * stride_row
    m = tl.full([BLOCK_V], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_V], tl.float32)
    for off in range(0, V, BLOCK_V):
        cols = off + tl.arange(0, BLOCK_V)
        x = tl.load(LOGITS + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    mx = tl.max(m, 0)
    lse = mx + tl.log(tl.sum(s * tl.exp(m - mx), 0))
    target = tl.load(TARGET + row)
    x_t = tl.load(LOGITS + target).to(tl.float32)
    tl.store(LOSS + row, lse - x_t)
    tl.store(LSE + row, lse)


def cross_entropy_fwd_launch(logits, target):
    R, V = logits.shape
    loss = torch.empty(R, device=logits.device, dtype=torch.float32)
    lse = torch.empty(R, device=logits.device, dtype=torch.float32)
    cross_entropy_fwd_kernel[(R,)](logits, target, loss, lse, logits.stride(0), V, BLOCK_V=4096, num_warps=8)
    return loss, lse


def cross_entropy_fwd_reference(logits, target):
    lf = logits.float()
    lse = torch.logsumexp(lf, -1)
    return lse - lf.gather(1, target[:, None].long())[:, 0], lse


def cross_entropy_fwd_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(R=4096, V=32000), size)
    torch.manual_seed(68)
    logits = (torch.randn(s["R"], s["V"], device=device) * 2).to(torch.bfloat16)
    target = torch.randint(0, s["V"], (s["R"],), device=device, dtype=torch.int32)
    return (logits, target), {}


# ---------------------------------------------------------------------------------------------
# 9. Fused-MoE GEMM (vLLM's fused_moe_kernel, simplified): the rows of A gathered through the
#    loaded sorted_token_ids (token // top_k), the expert's B [K, N] chosen by expert_ids[pid_m],
#    rows past num_valid_tokens masked (padding), C's rows scattered back by the token ids. fp16.
# ---------------------------------------------------------------------------------------------
@triton.jit
def fused_moe_kernel(A, B, C, sorted_token_ids, expert_ids, N, K, num_valid_tokens, stride_am, stride_be,
                     stride_bk, stride_cm, top_k: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_token = tl.load(sorted_token_ids + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    token_mask = offs_token < num_valid_tokens
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = A + (offs_token[:, None] // top_k) * stride_am + offs_k[None, :]
    expert = tl.load(expert_ids + pid_m).to(tl.int64)
    b_ptrs = B + expert * stride_be + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=token_mask[:, None], other=0.0)
        b = tl.load(b_ptrs)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = C + offs_token[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(tl.float16), mask=token_mask[:, None])


def _moe_align(topk_ids, n_experts, block_m):
    """vLLM's moe_align_block_size in torch: the (token, slot) pairs sorted by expert, each expert's
    run padded to a multiple of block_m with num_valid (masked), one expert id per block."""
    flat = topk_ids.flatten()
    n_valid = flat.numel()
    ids, experts = [], []
    for e in range(n_experts):
        idx = (flat == e).nonzero().flatten()
        pad = (-idx.numel()) % block_m
        run = torch.cat([idx, torch.full((pad,), n_valid, device=flat.device, dtype=idx.dtype)])
        ids.append(run)
        experts += [e] * (run.numel() // block_m)
    return (torch.cat(ids).to(torch.int32), torch.tensor(experts, device=flat.device, dtype=torch.int32), n_valid)


def fused_moe_launch(a, b, topk_ids, top_k=2):
    T, K = a.shape
    E, _, N = b.shape
    sorted_ids, expert_ids, n_valid = _moe_align(topk_ids, E, 64)
    c = torch.zeros((T * top_k, N), device=a.device, dtype=torch.float16)
    fused_moe_kernel[(expert_ids.numel(), N // 128)](a, b, c, sorted_ids, expert_ids, N, K, n_valid, a.stride(0),
                                                     b.stride(0), b.stride(1), c.stride(0), top_k=top_k,
                                                     BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=3)
    return c


def fused_moe_reference(a, b, topk_ids, top_k=2):
    flat = topk_ids.flatten().long()
    rows = torch.arange(flat.numel(), device=a.device) // top_k
    return torch.einsum("tk,tkn->tn", a.float()[rows], b.float()[flat])


def fused_moe_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(T=512, E=8, N=1024, K=1024), size)
    torch.manual_seed(69)
    a = (torch.randn(s["T"], s["K"], device=device) * 0.1).to(torch.float16)
    b = (torch.randn(s["E"], s["K"], s["N"], device=device) * 0.1).to(torch.float16)
    topk_ids = torch.stack([torch.randperm(s["E"], device=device)[:2] for _ in range(s["T"])]).to(torch.int32)
    return (a, b, topk_ids), {"top_k": 2}


# ---------------------------------------------------------------------------------------------
# 10. GPTQ-style int4 GEMM: bf16 A, B [K, N] packed two per byte ALONG K (QW [K/2, N] uint8, row k
#     in byte k // 2, the low nibble for even k), per-group (128 along K) bf16 scales and zeros
#     loaded in the loop at the K block's group: w = (q - z) * s.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_gptq_int4_kernel(A, QW, SCALES, ZEROS, C, M, N, K, stride_am, stride_qk, stride_sg, stride_cm,
                          GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = A + offs_m[:, None] * stride_am + offs_k[None, :]
    q_ptrs = QW + (offs_k[:, None] // 2) * stride_qk + offs_n[None, :]
    shifter = (offs_k % 2) * 4
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K // BLOCK_K):
        a = tl.load(a_ptrs)
        q = tl.load(q_ptrs)
        g = (k * BLOCK_K) // GROUP
        s = tl.load(SCALES + g * stride_sg + offs_n)
        z = tl.load(ZEROS + g * stride_sg + offs_n)
        w = ((q >> shifter[:, None]) & 0xF).to(tl.bfloat16)
        w = (w - z[None, :]) * s[None, :]
        acc = tl.dot(a, w, acc)
        a_ptrs += BLOCK_K
        q_ptrs += (BLOCK_K // 2) * stride_qk
    tl.store(C + offs_m[:, None] * stride_cm + offs_n[None, :], acc.to(tl.bfloat16))


def gemm_gptq_int4_launch(a, qw, scales, zeros, group=128):
    M, K = a.shape
    Kh, N = qw.shape
    assert Kh * 2 == K and K % group == 0 and M % 128 == 0 and N % 128 == 0 and qw.dtype == torch.uint8
    c = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    gemm_gptq_int4_kernel[(M // 128, N // 128)](a, qw, scales, zeros, c, M, N, K, a.stride(0), qw.stride(0),
                                                scales.stride(0), c.stride(0), GROUP=group, BLOCK_M=128,
                                                BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3)
    return c


def gemm_gptq_int4_reference(a, qw, scales, zeros, group=128):
    lo, hi = (qw & 0xF).float(), (qw >> 4).float()
    w = torch.stack((lo, hi), dim=1).reshape(2 * qw.shape[0], qw.shape[1])  # row 2i low, 2i + 1 high
    s = scales.float().repeat_interleave(group, dim=0)
    z = zeros.float().repeat_interleave(group, dim=0)
    return a.float() @ ((w - z) * s)


def gemm_gptq_int4_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=1024, K=2048), size)
    torch.manual_seed(70)
    a = (torch.randn(s["M"], s["K"], device=device) * 0.1).to(torch.bfloat16)
    qw = torch.randint(0, 256, (s["K"] // 2, s["N"]), device=device, dtype=torch.uint8)
    scales = (torch.rand(s["K"] // 128, s["N"], device=device) * 0.02 + 0.005).to(torch.bfloat16)
    zeros = torch.full((s["K"] // 128, s["N"]), 8.0, device=device).to(torch.bfloat16)
    return (a, qw, scales, zeros), {}


# ---------------------------------------------------------------------------------------------
# Registry and dump specs
# ---------------------------------------------------------------------------------------------
NAMES = ("attn_bwd_dkdv", "attn_dropout", "attn_bool_mask", "gemm_fp16_acc", "bmm_bcast_b", "gemm_store_ct",
         "layernorm_2loop", "cross_entropy_fwd", "fused_moe", "gemm_gptq_int4")
KERNELS = {}
for _name in NAMES:
    KERNELS[_name] = dict(kernel=globals()[_name + "_kernel"], launch=globals()[_name + "_launch"],
                          reference=globals()[_name + "_reference"],
                          make_inputs=globals()[_name + "_make_inputs"])

_C = "constexpr"
_ATTN = dict(Q="*fp16", K="*fp16", V="*fp16", O="*fp16", stride_bh="i32", stride_n="i32", N_CTX="i32",
             sm_scale="fp32", HEAD_DIM=_C, BLOCK_M=_C, BLOCK_N=_C)
_GEMM = dict(A="*fp16", B="*fp16", C="*fp16", M="i32", N="i32", K="i32", stride_am="i32", stride_bk="i32",
             stride_cm="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C)
_TILES = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64)
DUMPS = {
    "attn_bwd_dkdv": dict(
        signature=dict(Q="*fp16", K="*fp16", V="*fp16", DO="*fp16", DK="*fp16", DV="*fp16", M="*fp32",
                       Delta="*fp32", stride_bh="i32", stride_n="i32", N_CTX="i32", sm_scale="fp32",
                       HEAD_DIM=_C, BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(HEAD_DIM=64, BLOCK_M=64, BLOCK_N=128),
        divisible_by_16=["Q", "K", "V", "DO", "DK", "DV", "M", "Delta", "stride_bh", "stride_n", "N_CTX"],
        num_warps=8, num_stages=2),
    "attn_dropout": dict(
        signature=dict(Q="*fp16", K="*fp16", V="*fp16", O="*fp16", stride_bh="i32", stride_n="i32", N_CTX="i32",
                       sm_scale="fp32", seed="i32", dropout_p="fp32", HEAD_DIM=_C, BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64),
        divisible_by_16=["Q", "K", "V", "O", "stride_bh", "stride_n", "N_CTX"], num_warps=8, num_stages=3),
    "attn_bool_mask": dict(
        signature=dict(Q="*fp16", K="*fp16", V="*fp16", MASK="*i8", O="*fp16", stride_bh="i32", stride_n="i32",
                       stride_mm="i32", N_CTX="i32", sm_scale="fp32", HEAD_DIM=_C, BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64),
        divisible_by_16=["Q", "K", "V", "MASK", "O", "stride_bh", "stride_n", "stride_mm", "N_CTX"],
        num_warps=8, num_stages=3),
    "gemm_fp16_acc": dict(
        signature=dict(_GEMM), constexprs=dict(_TILES),
        divisible_by_16=["A", "B", "C", "M", "N", "K", "stride_am", "stride_bk", "stride_cm"],
        num_warps=8, num_stages=3),
    "bmm_bcast_b": dict(
        signature=dict(A="*fp16", B="*fp16", C="*fp16", M="i32", N="i32", K="i32", stride_ab="i32",
                       stride_am="i32", stride_bb="i32", stride_bk="i32", stride_cb="i32", stride_cm="i32",
                       BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(_TILES),
        # the launch passes stride_bb = 0, which Triton's specialisation marks divisible by 16 too
        divisible_by_16=["A", "B", "C", "M", "N", "K", "stride_ab", "stride_am", "stride_bb", "stride_bk",
                         "stride_cb", "stride_cm"],
        num_warps=8, num_stages=3),
    "gemm_store_ct": dict(
        signature=dict(A="*bf16", B="*bf16", C="*bf16", M="i32", N="i32", K="i32", stride_am="i32",
                       stride_bk="i32", stride_cn="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(_TILES),
        divisible_by_16=["A", "B", "C", "M", "N", "K", "stride_am", "stride_bk", "stride_cn"],
        num_warps=8, num_stages=3),
    "layernorm_2loop": dict(
        signature=dict(X="*fp16", Y="*fp16", W="*fp32", Bias="*fp32", Mean="*fp32", Rstd="*fp32", stride="i32",
                       N="i32", eps="fp32", BLOCK_N=_C),
        constexprs=dict(BLOCK_N=1024),
        divisible_by_16=["X", "Y", "W", "Bias", "Mean", "Rstd", "stride", "N"], num_warps=8, num_stages=3),
    "cross_entropy_fwd": dict(
        signature=dict(LOGITS="*bf16", TARGET="*i32", LOSS="*fp32", LSE="*fp32", stride_row="i32", V="i32",
                       BLOCK_V=_C),
        constexprs=dict(BLOCK_V=4096),
        divisible_by_16=["LOGITS", "TARGET", "LOSS", "LSE", "stride_row", "V"], num_warps=8, num_stages=3),
    "fused_moe": dict(
        signature=dict(A="*fp16", B="*fp16", C="*fp16", sorted_token_ids="*i32", expert_ids="*i32", N="i32",
                       K="i32", num_valid_tokens="i32", stride_am="i32", stride_be="i32", stride_bk="i32",
                       stride_cm="i32", top_k=_C, BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(top_k=2, BLOCK_M=64, BLOCK_N=128, BLOCK_K=64),
        divisible_by_16=["A", "B", "C", "sorted_token_ids", "expert_ids", "N", "K", "stride_am", "stride_be",
                         "stride_bk", "stride_cm"],
        num_warps=4, num_stages=3),
    "gemm_gptq_int4": dict(
        signature=dict(A="*bf16", QW="*u8", SCALES="*bf16", ZEROS="*bf16", C="*bf16", M="i32", N="i32", K="i32",
                       stride_am="i32", stride_qk="i32", stride_sg="i32", stride_cm="i32", GROUP=_C, BLOCK_M=_C,
                       BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(GROUP=128, **_TILES),
        divisible_by_16=["A", "QW", "SCALES", "ZEROS", "C", "M", "N", "K", "stride_am", "stride_qk", "stride_sg",
                         "stride_cm"],
        num_warps=8, num_stages=3),
}
for _name, _spec in DUMPS.items():
    _spec["kernel"] = KERNELS[_name]["kernel"]
