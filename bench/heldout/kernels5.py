"""Held-out Triton kernels, fifth batch: written the way users write them, none tuned for twill, and
unlike bench/heldout/kernels.py, kernels3.py, kernels4.py, bench/triton_corpus/kernels.py and
../shared/triton/: causal attention in ONE key loop (a per-tile trip count, the mask on every block),
MLA-style attention (two dots into the scores: 128 "nope" + 64 "rope" dims), a GEMM whose epilogue is
split in two halves (tl.split, as the persistent matmul tutorial subtiles its stores), W8A16 (int8
weights dequantised in the loop, a per-column scale after it), a 3x3 NHWC conv2d as an implicit GEMM
(// and % addressing, masked loads at the borders), fused LoRA (a second dot in the loop and an epilogue
dot), varlen attention (sequence starts loaded from cu_seqlens), paged attention over a block table,
a GEMM with an fp8 e4m3 output and an amax (tl.atomic_max), and attention that also stores the
logsumexp (bf16, D = 64, BLOCK_M = 64).

Protocol for every kernel NAME (KERNELS at the bottom), as kernels.py:
    tensors, params = NAME_make_inputs(size, device)   # size: dict of overrides or None
    out = NAME_launch(*tensors, **params)                # runs the Triton kernel
    ref = NAME_reference(*tensors, **params)             # plain torch, fp32
DUMPS[NAME] holds what gen.py compiles the TTGIR dumps with (`gen.py --module kernels5`).
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


def _attn_ref(q, k, v, sm_scale, causal=False):
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, device=s.device, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v.float()


# ---------------------------------------------------------------------------------------------
# 1. Causal attention in one key loop: keys up to (start_m + 1) * BLOCK_M, the causal tl.where on
#    every block (no separate diagonal loop). fp16, D = 64, BLOCK_M = 128, BLOCK_N = 64, exp2.
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_causal_oneloop_kernel(Q, K, V, O, stride_bh, stride_n, N_CTX, sm_scale,
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
    for start_n in range(0, (start_m + 1) * BLOCK_M, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + base + cols[None, :] * stride_n + offs_d[:, None])
        qk = tl.dot(q, k) * qk_scale
        qk = tl.where(offs_m[:, None] >= cols[None, :], qk, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + cols[:, None] * stride_n + offs_d[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_ij
    tl.store(O + base + offs_m[:, None] * stride_n + offs_d[None, :], (acc / l_i[:, None]).to(tl.float16))


def attn_causal_oneloop_launch(q, k, v, sm_scale=None):
    B, H, N, D = q.shape
    assert D == 64 and N % 128 == 0
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    o = torch.empty_like(q)
    attn_causal_oneloop_kernel[(N // 128, B * H)](q, k, v, o, q.stride(1), q.stride(2), N, sm_scale,
                                                  HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3)
    return o


def attn_causal_oneloop_reference(q, k, v, sm_scale=None):
    return _attn_ref(q, k, v, sm_scale or 1.0 / math.sqrt(q.shape[-1]), causal=True)


def attn_causal_oneloop_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=2, H=8, N=1024), size)
    torch.manual_seed(51)
    q, k, v = (torch.randn(s["B"], s["H"], s["N"], 64, device=device).to(torch.float16) for _ in range(3))
    return (q, k, v), {}


# ---------------------------------------------------------------------------------------------
# 2. MLA-style attention (DeepSeek): scores from two dots, q_nope . k_nope (D 128) + q_rope . k_rope
#    (D 64, a separate tensor), V of D 128. bf16, BLOCK_M = 64, BLOCK_N = 64, non-causal.
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_mla_kernel(Q, QR, K, KR, V, O, stride_bh, stride_n, stride_rbh, stride_rn, N_CTX, sm_scale,
                    D_NOPE: tl.constexpr, D_ROPE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    base = bh * stride_bh
    rbase = bh * stride_rbh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D_NOPE)
    offs_r = tl.arange(0, D_ROPE)
    q = tl.load(Q + base + offs_m[:, None] * stride_n + offs_d[None, :])
    qr = tl.load(QR + rbase + offs_m[:, None] * stride_rn + offs_r[None, :])
    qk_scale = sm_scale * 1.44269504
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D_NOPE], tl.float32)
    for start_n in range(0, N_CTX, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + base + cols[None, :] * stride_n + offs_d[:, None])
        kr = tl.load(KR + rbase + cols[None, :] * stride_rn + offs_r[:, None])
        qk = tl.dot(q, k) + tl.dot(qr, kr)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + cols[:, None] * stride_n + offs_d[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), v)
        m_i = m_ij
    tl.store(O + base + offs_m[:, None] * stride_n + offs_d[None, :], (acc / l_i[:, None]).to(tl.bfloat16))


def attn_mla_launch(q, qr, k, kr, v, sm_scale=None):
    B, H, N, D = q.shape
    assert D == 128 and qr.shape[-1] == 64 and N % 64 == 0
    sm_scale = sm_scale or 1.0 / math.sqrt(D + 64)
    o = torch.empty_like(q)
    attn_mla_kernel[(N // 64, B * H)](q, qr, k, kr, v, o, q.stride(1), q.stride(2), qr.stride(1), qr.stride(2), N,
                                      sm_scale, D_NOPE=128, D_ROPE=64, BLOCK_M=64, BLOCK_N=64, num_warps=4,
                                      num_stages=2)
    return o


def attn_mla_reference(q, qr, k, kr, v, sm_scale=None):
    sm_scale = sm_scale or 1.0 / math.sqrt(q.shape[-1] + qr.shape[-1])
    s = (q.float() @ k.float().transpose(-1, -2) + qr.float() @ kr.float().transpose(-1, -2)) * sm_scale
    return torch.softmax(s, -1) @ v.float()


def attn_mla_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=2, H=8, N=1024), size)
    torch.manual_seed(52)
    q, k, v = (torch.randn(s["B"], s["H"], s["N"], 128, device=device).to(torch.bfloat16) for _ in range(3))
    qr, kr = (torch.randn(s["B"], s["H"], s["N"], 64, device=device).to(torch.bfloat16) for _ in range(2))
    return (q, qr, k, kr, v), {}


# ---------------------------------------------------------------------------------------------
# 3. GEMM whose epilogue is subtiled as the persistent matmul tutorial does: the accumulator reshaped
#    [BM, 2, BN/2], permuted, tl.split into two halves, each converted and stored. fp16.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_epi_split_kernel(A, B, C, M, N, K, stride_am, stride_bk, stride_cm,
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
    acc = tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2))
    acc = tl.permute(acc, (0, 2, 1))
    acc0, acc1 = tl.split(acc)
    offs_h = pid_n * BLOCK_N + tl.arange(0, BLOCK_N // 2)
    c_ptrs = C + offs_m[:, None] * stride_cm + offs_h[None, :]
    tl.store(c_ptrs, acc0.to(tl.float16))
    tl.store(c_ptrs + BLOCK_N // 2, acc1.to(tl.float16))


def gemm_epi_split_launch(a, b):
    M, K = a.shape
    _, N = b.shape
    assert M % 128 == 0 and N % 256 == 0 and K % 64 == 0
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    gemm_epi_split_kernel[(M // 128, N // 256)](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                                                BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=3)
    return c


def gemm_epi_split_reference(a, b):
    return a.float() @ b.float()


def gemm_epi_split_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=1024, K=1024), size)
    torch.manual_seed(53)
    a = (torch.randn(s["M"], s["K"], device=device) * 0.1).to(torch.float16)
    b = (torch.randn(s["K"], s["N"], device=device) * 0.1).to(torch.float16)
    return (a, b), {}


# ---------------------------------------------------------------------------------------------
# 4. W8A16: x fp16 @ w int8 (converted to fp16 in the loop), a per-column fp16 scale after the loop.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_w8a16_kernel(X, W, S, Y, M, N, K, stride_xm, stride_wk, stride_ym,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = X + offs_m[:, None] * stride_xm + offs_k[None, :]
    w_ptrs = W + offs_k[:, None] * stride_wk + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        x = tl.load(x_ptrs)
        w = tl.load(w_ptrs).to(tl.float16)
        acc += tl.dot(x, w)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K * stride_wk
    scale = tl.load(S + offs_n).to(tl.float32)
    tl.store(Y + offs_m[:, None] * stride_ym + offs_n[None, :], (acc * scale[None, :]).to(tl.float16))


def gemm_w8a16_launch(x, w, scale):
    M, K = x.shape
    _, N = w.shape
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0
    y = torch.empty((M, N), device=x.device, dtype=torch.float16)
    gemm_w8a16_kernel[(M // 128, N // 128)](x, w, scale, y, M, N, K, x.stride(0), w.stride(0), y.stride(0),
                                            BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3)
    return y


def gemm_w8a16_reference(x, w, scale):
    return (x.float() @ w.float()) * scale.float()[None, :]


def gemm_w8a16_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=1024, K=1024), size)
    torch.manual_seed(54)
    x = (torch.randn(s["M"], s["K"], device=device) * 0.1).to(torch.float16)
    w = torch.randint(-127, 128, (s["K"], s["N"]), device=device, dtype=torch.int8)
    scale = (torch.rand(s["N"], device=device) * 0.01 + 0.001).to(torch.float16)
    return (x, w, scale), {}


# ---------------------------------------------------------------------------------------------
# 5. conv2d 3x3, stride 1, padding 1, NHWC, as an implicit GEMM: M = N*H*W output pixels, the K loop
#    over (kh, kw, c) with C_IN a multiple of BLOCK_K; A's rows from // and % of the pixel index,
#    masked at the image borders; weights [3*3*C_IN, C_OUT]. fp16.
# ---------------------------------------------------------------------------------------------
@triton.jit
def conv2d_nhwc_kernel(X, W, Y, NB, H, Wd, C_IN, C_OUT,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    n_idx = offs_m // (H * Wd)
    hw = offs_m % (H * Wd)
    oh = hw // Wd
    ow = hw % Wd
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    K_TOTAL = 9 * C_IN
    for k in range(0, K_TOTAL, BLOCK_K):
        rs = k // C_IN
        c0 = k % C_IN
        kh = rs // 3
        kw = rs % 3
        ih = oh + kh - 1
        iw = ow + kw - 1
        valid = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < Wd) & (offs_m < NB * H * Wd)
        x_ptrs = X + ((n_idx * H + ih) * Wd + iw)[:, None] * C_IN + (c0 + offs_k)[None, :]
        a = tl.load(x_ptrs, mask=valid[:, None], other=0.0)
        b = tl.load(W + (k + offs_k)[:, None] * C_OUT + offs_n[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(Y + offs_m[:, None] * C_OUT + offs_n[None, :], acc.to(tl.float16))


def conv2d_nhwc_launch(x, w):
    NB, H, Wd, C = x.shape
    _, C_OUT = w.shape
    assert C % 64 == 0 and C_OUT % 128 == 0 and (NB * H * Wd) % 128 == 0
    y = torch.empty((NB, H, Wd, C_OUT), device=x.device, dtype=torch.float16)
    conv2d_nhwc_kernel[(NB * H * Wd // 128, C_OUT // 128)](x, w, y, NB, H, Wd, C, C_OUT, BLOCK_M=128,
                                                           BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3)
    return y


def conv2d_nhwc_reference(x, w):
    NB, H, Wd, C = x.shape
    C_OUT = w.shape[1]
    wt = w.float().reshape(3, 3, C, C_OUT).permute(3, 2, 0, 1)  # [C_OUT, C, 3, 3]
    y = torch.nn.functional.conv2d(x.float().permute(0, 3, 1, 2), wt, padding=1)
    return y.permute(0, 2, 3, 1)


def conv2d_nhwc_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(NB=4, H=32, W=32, C=128, C_OUT=256), size)
    torch.manual_seed(55)
    x = (torch.randn(s["NB"], s["H"], s["W"], s["C"], device=device) * 0.1).to(torch.float16)
    w = (torch.randn(9 * s["C"], s["C_OUT"], device=device) * 0.1).to(torch.float16)
    return (x, w), {}


# ---------------------------------------------------------------------------------------------
# 6. Fused LoRA: y = x @ W + (x @ A) @ B * lora_scale; x @ A accumulated beside x @ W in the K loop
#    (rank 64), the (x A) B dot after the loop. fp16.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_lora_kernel(X, W, LA, LB, Y, M, N, K, stride_xm, stride_wk, stride_ak, stride_bn_r, stride_ym,
                     lora_scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     RANK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    offs_r = tl.arange(0, RANK)
    x_ptrs = X + offs_m[:, None] * stride_xm + offs_k[None, :]
    w_ptrs = W + offs_k[:, None] * stride_wk + offs_n[None, :]
    a_ptrs = LA + offs_k[:, None] * stride_ak + offs_r[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    xa = tl.zeros((BLOCK_M, RANK), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        x = tl.load(x_ptrs)
        acc += tl.dot(x, tl.load(w_ptrs))
        xa += tl.dot(x, tl.load(a_ptrs))
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K * stride_wk
        a_ptrs += BLOCK_K * stride_ak
    lb = tl.load(LB + offs_r[:, None] * stride_bn_r + offs_n[None, :])
    acc += tl.dot((xa * lora_scale).to(tl.float16), lb)
    tl.store(Y + offs_m[:, None] * stride_ym + offs_n[None, :], acc.to(tl.float16))


def gemm_lora_launch(x, w, la, lb, lora_scale=0.5):
    M, K = x.shape
    _, N = w.shape
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0 and la.shape[1] == 64
    y = torch.empty((M, N), device=x.device, dtype=torch.float16)
    gemm_lora_kernel[(M // 128, N // 128)](x, w, la, lb, y, M, N, K, x.stride(0), w.stride(0), la.stride(0),
                                           lb.stride(0), y.stride(0), lora_scale, BLOCK_M=128, BLOCK_N=128,
                                           BLOCK_K=64, RANK=64, num_warps=8, num_stages=3)
    return y


def gemm_lora_reference(x, w, la, lb, lora_scale=0.5):
    return x.float() @ w.float() + ((x.float() @ la.float()) * lora_scale).half().float() @ lb.float()


def gemm_lora_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=1024, K=1024), size)
    torch.manual_seed(56)
    x = (torch.randn(s["M"], s["K"], device=device) * 0.1).to(torch.float16)
    w = (torch.randn(s["K"], s["N"], device=device) * 0.1).to(torch.float16)
    la = (torch.randn(s["K"], 64, device=device) * 0.1).to(torch.float16)
    lb = (torch.randn(64, s["N"], device=device) * 0.1).to(torch.float16)
    return (x, w, la, lb), {}


# ---------------------------------------------------------------------------------------------
# 7. Varlen attention (packed sequences): the sequence's start and length from a loaded cu_seqlens,
#    rows and keys masked at its end. fp16, D = 128, BLOCK_M = 128, BLOCK_N = 64, non-causal.
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_varlen_kernel(Q, K, V, O, CU_SEQLENS, stride_t, stride_h, sm_scale,
                       HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    off_h = tl.program_id(1)
    seq = tl.program_id(2)
    seq_start = tl.load(CU_SEQLENS + seq)
    seq_len = tl.load(CU_SEQLENS + seq + 1) - seq_start
    if start_m * BLOCK_M >= seq_len:
        return
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    base = seq_start.to(tl.int64) * stride_t + off_h * stride_h
    row_ok = offs_m < seq_len
    q = tl.load(Q + base + offs_m[:, None] * stride_t + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    qk_scale = sm_scale * 1.44269504
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in range(0, seq_len, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < seq_len
        k = tl.load(K + base + cols[None, :] * stride_t + offs_d[:, None], mask=col_ok[None, :], other=0.0)
        qk = tl.dot(q, k) * qk_scale
        qk = tl.where(col_ok[None, :], qk, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + cols[:, None] * stride_t + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_ij
    tl.store(O + base + offs_m[:, None] * stride_t + offs_d[None, :], (acc / l_i[:, None]).to(tl.float16),
             mask=row_ok[:, None])


def attn_varlen_launch(q, k, v, cu_seqlens, max_len, sm_scale=None):
    T, H, D = q.shape
    assert D == 128
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    o = torch.empty_like(q)
    nseq = cu_seqlens.numel() - 1
    attn_varlen_kernel[(triton.cdiv(max_len, 128), H, nseq)](q, k, v, o, cu_seqlens, q.stride(0), q.stride(1),
                                                            sm_scale, HEAD_DIM=128, BLOCK_M=128, BLOCK_N=64,
                                                            num_warps=8, num_stages=3)
    return o


def attn_varlen_reference(q, k, v, cu_seqlens, max_len, sm_scale=None):
    sm_scale = sm_scale or 1.0 / math.sqrt(q.shape[-1])
    out = torch.zeros(q.shape, device=q.device, dtype=torch.float32)
    cu = cu_seqlens.tolist()
    for a, b in zip(cu[:-1], cu[1:]):
        out[a:b] = _attn_ref(q[a:b].transpose(0, 1), k[a:b].transpose(0, 1), v[a:b].transpose(0, 1),
                             sm_scale).transpose(0, 1)
    return out


def attn_varlen_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(H=8, lens=(1000, 517, 1024, 300)), size)
    torch.manual_seed(57)
    lens = list(s["lens"])
    cu = torch.tensor([0] + list(itertools_accumulate(lens)), device=device, dtype=torch.int32)
    T = sum(lens)
    q, k, v = (torch.randn(T, s["H"], 128, device=device).to(torch.float16) for _ in range(3))
    return (q, k, v, cu), {"max_len": max(lens)}


def itertools_accumulate(xs):
    total = 0
    for x in xs:
        total += x
        yield total


# ---------------------------------------------------------------------------------------------
# 8. Paged attention (prefix prefill over a paged KV cache, as vLLM's): 64 query rows of one
#    sequence; each key block's page from a loaded block table. fp16, D = 128, page 64 tokens.
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_paged_kernel(Q, KC, VC, BT, O, stride_qt, stride_qh, stride_kp, stride_kn, stride_kh, stride_bt,
                      N_CTX, sm_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, PAGE: tl.constexpr):
    start_m = tl.program_id(0)
    off_h = tl.program_id(1)
    seq = tl.program_id(2)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, PAGE)
    offs_d = tl.arange(0, HEAD_DIM)
    q_base = Q + seq.to(tl.int64) * N_CTX * stride_qt + off_h * stride_qh
    q = tl.load(q_base + offs_m[:, None] * stride_qt + offs_d[None, :])
    qk_scale = sm_scale * 1.44269504
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for j in range(0, N_CTX // PAGE):
        page = tl.load(BT + seq * stride_bt + j).to(tl.int64)
        kv = page * stride_kp + off_h * stride_kh
        k = tl.load(KC + kv + offs_n[None, :] * stride_kn + offs_d[:, None])
        qk = tl.dot(q, k)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(VC + kv + offs_n[:, None] * stride_kn + offs_d[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_ij
    o_base = O + seq.to(tl.int64) * N_CTX * stride_qt + off_h * stride_qh
    tl.store(o_base + offs_m[:, None] * stride_qt + offs_d[None, :], (acc / l_i[:, None]).to(tl.float16))


def attn_paged_launch(q, k_cache, v_cache, block_table, sm_scale=None):
    # q [S, N, H, D]; k_cache, v_cache [PAGES, 64, H, D]; block_table [S, N // 64]
    S, N, H, D = q.shape
    assert D == 128 and N % 64 == 0
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    o = torch.empty_like(q)
    attn_paged_kernel[(N // 64, H, S)](q, k_cache, v_cache, block_table, o, q.stride(1), q.stride(2),
                                       k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
                                       block_table.stride(0), N, sm_scale, HEAD_DIM=128, BLOCK_M=64, PAGE=64,
                                       num_warps=4, num_stages=2)
    return o


def attn_paged_reference(q, k_cache, v_cache, block_table, sm_scale=None):
    S, N, H, D = q.shape
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    k = k_cache[block_table.long()].reshape(S, N, H, D)
    v = v_cache[block_table.long()].reshape(S, N, H, D)
    return _attn_ref(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), sm_scale).transpose(1, 2)


def attn_paged_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(S=2, N=1024, H=8), size)
    torch.manual_seed(58)
    pages = s["S"] * s["N"] // 64
    q = torch.randn(s["S"], s["N"], s["H"], 128, device=device).to(torch.float16)
    kc, vc = (torch.randn(pages + 5, 64, s["H"], 128, device=device).to(torch.float16) for _ in range(2))
    bt = (torch.randperm(pages, device=device) + 5).to(torch.int32).reshape(s["S"], s["N"] // 64).contiguous()
    return (q, kc, vc, bt), {}


# ---------------------------------------------------------------------------------------------
# 9. FP8 e4m3 output GEMM with an amax: out = (acc * scale).to(float8e4nv), and the tile's max |acc|
#    folded into a global amax with tl.atomic_max (delayed scaling, as Transformer Engine). bf16 in.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_fp8_out_amax_kernel(A, B, C, AMAX, SCALE, M, N, K, stride_am, stride_bk, stride_cm,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = A + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = B + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        acc += tl.dot(tl.load(a_ptrs), tl.load(b_ptrs))
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    scale = tl.load(SCALE)
    tl.atomic_max(AMAX, tl.max(tl.abs(acc)))
    out = (acc * scale).to(tl.float8e4nv)
    tl.store(C + offs_m[:, None] * stride_cm + offs_n[None, :], out)


def gemm_fp8_out_amax_launch(a, b, scale):
    M, K = a.shape
    _, N = b.shape
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0
    c = torch.empty((M, N), device=a.device, dtype=torch.float8_e4m3fn)
    amax = torch.zeros(1, device=a.device, dtype=torch.float32)
    gemm_fp8_out_amax_kernel[(M // 128, N // 128)](a, b, c, amax, scale, M, N, K, a.stride(0), b.stride(0),
                                                   c.stride(0), BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
                                                   num_warps=8, num_stages=3)
    return c, amax


def gemm_fp8_out_amax_reference(a, b, scale):
    acc = a.float() @ b.float()
    return (acc * scale).clamp(-448, 448), acc.abs().max().reshape(1)


def gemm_fp8_out_amax_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=1024, K=1024), size)
    torch.manual_seed(59)
    a = (torch.randn(s["M"], s["K"], device=device) * 0.1).to(torch.bfloat16)
    b = (torch.randn(s["K"], s["N"], device=device) * 0.1).to(torch.bfloat16)
    scale = torch.tensor([4.0], device=device)
    return (a, b, scale), {}


# ---------------------------------------------------------------------------------------------
# 10. Attention forward that also stores the logsumexp per row (for the backward): M = m_i +
#     log2(l_i) in base 2, stored beside O. bf16, D = 64, BLOCK_M = 64, BLOCK_N = 64, non-causal.
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_lse_kernel(Q, K, V, O, LSE, stride_bh, stride_n, N_CTX, sm_scale,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    base = bh.to(tl.int64) * stride_bh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * stride_n + offs_d[None, :])
    qk_scale = sm_scale * 1.44269504
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.full([BLOCK_M], 1.0, tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in range(0, N_CTX, BLOCK_N):
        k = tl.load(K + base + (start_n + offs_n)[None, :] * stride_n + offs_d[:, None])
        qk = tl.dot(q, k)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + (start_n + offs_n)[:, None] * stride_n + offs_d[None, :])
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(tl.bfloat16), v, acc)
        m_i = m_ij
    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    tl.store(LSE + bh * N_CTX + offs_m, m_i)
    tl.store(O + base + offs_m[:, None] * stride_n + offs_d[None, :], acc.to(tl.bfloat16))


def attn_lse_launch(q, k, v, sm_scale=None):
    B, H, N, D = q.shape
    assert D == 64 and N % 64 == 0
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    o = torch.empty_like(q)
    lse = torch.empty((B, H, N), device=q.device, dtype=torch.float32)
    attn_lse_kernel[(N // 64, B * H)](q, k, v, o, lse, q.stride(1), q.stride(2), N, sm_scale,
                                      HEAD_DIM=64, BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3)
    return o, lse


def attn_lse_reference(q, k, v, sm_scale=None):
    sm_scale = sm_scale or 1.0 / math.sqrt(q.shape[-1])
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    lse2 = torch.logsumexp(s, -1) * LOG2E  # base 2, as the kernel stores it
    return torch.softmax(s, -1) @ v.float(), lse2


def attn_lse_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=2, H=8, N=1024), size)
    torch.manual_seed(60)
    q, k, v = (torch.randn(s["B"], s["H"], s["N"], 64, device=device).to(torch.bfloat16) for _ in range(3))
    return (q, k, v), {}


# ---------------------------------------------------------------------------------------------
# Registry and dump specs
# ---------------------------------------------------------------------------------------------
NAMES = ("attn_causal_oneloop", "attn_mla", "gemm_epi_split", "gemm_w8a16", "conv2d_nhwc", "gemm_lora",
         "attn_varlen", "attn_paged", "gemm_fp8_out_amax", "attn_lse")
KERNELS = {}
for _name in NAMES:
    KERNELS[_name] = dict(kernel=globals()[_name + "_kernel"], launch=globals()[_name + "_launch"],
                          reference=globals()[_name + "_reference"],
                          make_inputs=globals()[_name + "_make_inputs"])

_C = "constexpr"
_ATTN = dict(Q="*fp16", K="*fp16", V="*fp16", O="*fp16", stride_bh="i32", stride_n="i32", N_CTX="i32",
             sm_scale="fp32", HEAD_DIM=_C, BLOCK_M=_C, BLOCK_N=_C)
DUMPS = {
    "attn_causal_oneloop": dict(
        signature=dict(_ATTN), constexprs=dict(HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64),
        divisible_by_16=["Q", "K", "V", "O", "stride_bh", "stride_n", "N_CTX"], num_warps=8, num_stages=3),
    "attn_mla": dict(
        signature=dict(Q="*bf16", QR="*bf16", K="*bf16", KR="*bf16", V="*bf16", O="*bf16", stride_bh="i32",
                       stride_n="i32", stride_rbh="i32", stride_rn="i32", N_CTX="i32", sm_scale="fp32",
                       D_NOPE=_C, D_ROPE=_C, BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(D_NOPE=128, D_ROPE=64, BLOCK_M=64, BLOCK_N=64),
        divisible_by_16=["Q", "QR", "K", "KR", "V", "O", "stride_bh", "stride_n", "stride_rbh", "stride_rn",
                         "N_CTX"],
        num_warps=4, num_stages=2),
    "gemm_epi_split": dict(
        signature=dict(A="*fp16", B="*fp16", C="*fp16", M="i32", N="i32", K="i32", stride_am="i32",
                       stride_bk="i32", stride_cm="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64),
        divisible_by_16=["A", "B", "C", "M", "N", "K", "stride_am", "stride_bk", "stride_cm"],
        num_warps=8, num_stages=3),
    "gemm_w8a16": dict(
        signature=dict(X="*fp16", W="*i8", S="*fp16", Y="*fp16", M="i32", N="i32", K="i32", stride_xm="i32",
                       stride_wk="i32", stride_ym="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64),
        divisible_by_16=["X", "W", "S", "Y", "M", "N", "K", "stride_xm", "stride_wk", "stride_ym"],
        num_warps=8, num_stages=3),
    "conv2d_nhwc": dict(
        signature=dict(X="*fp16", W="*fp16", Y="*fp16", NB="i32", H="i32", Wd="i32", C_IN="i32", C_OUT="i32",
                       BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64),
        divisible_by_16=["X", "W", "Y", "C_IN", "C_OUT"], num_warps=8, num_stages=3),
    "gemm_lora": dict(
        signature=dict(X="*fp16", W="*fp16", LA="*fp16", LB="*fp16", Y="*fp16", M="i32", N="i32", K="i32",
                       stride_xm="i32", stride_wk="i32", stride_ak="i32", stride_bn_r="i32", stride_ym="i32",
                       lora_scale="fp32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C, RANK=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, RANK=64),
        divisible_by_16=["X", "W", "LA", "LB", "Y", "M", "N", "K", "stride_xm", "stride_wk", "stride_ak",
                         "stride_bn_r", "stride_ym"],
        num_warps=8, num_stages=3),
    "attn_varlen": dict(
        signature=dict(Q="*fp16", K="*fp16", V="*fp16", O="*fp16", CU_SEQLENS="*i32", stride_t="i32",
                       stride_h="i32", sm_scale="fp32", HEAD_DIM=_C, BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(HEAD_DIM=128, BLOCK_M=128, BLOCK_N=64),
        divisible_by_16=["Q", "K", "V", "O", "CU_SEQLENS", "stride_t", "stride_h"], num_warps=8, num_stages=3),
    "attn_paged": dict(
        signature=dict(Q="*fp16", KC="*fp16", VC="*fp16", BT="*i32", O="*fp16", stride_qt="i32", stride_qh="i32",
                       stride_kp="i32", stride_kn="i32", stride_kh="i32", stride_bt="i32", N_CTX="i32",
                       sm_scale="fp32", HEAD_DIM=_C, BLOCK_M=_C, PAGE=_C),
        constexprs=dict(HEAD_DIM=128, BLOCK_M=64, PAGE=64),
        divisible_by_16=["Q", "KC", "VC", "BT", "O", "stride_qt", "stride_qh", "stride_kp", "stride_kn",
                         "stride_kh", "N_CTX"],
        num_warps=4, num_stages=2),
    "gemm_fp8_out_amax": dict(
        signature=dict(A="*bf16", B="*bf16", C="*fp8e4nv", AMAX="*fp32", SCALE="*fp32", M="i32", N="i32", K="i32",
                       stride_am="i32", stride_bk="i32", stride_cm="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64),
        divisible_by_16=["A", "B", "C", "AMAX", "SCALE", "M", "N", "K", "stride_am", "stride_bk", "stride_cm"],
        num_warps=8, num_stages=3),
    "attn_lse": dict(
        signature=dict(Q="*bf16", K="*bf16", V="*bf16", O="*bf16", LSE="*fp32", stride_bh="i32", stride_n="i32",
                       N_CTX="i32", sm_scale="fp32", HEAD_DIM=_C, BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(HEAD_DIM=64, BLOCK_M=64, BLOCK_N=64),
        divisible_by_16=["Q", "K", "V", "O", "LSE", "stride_bh", "stride_n", "N_CTX"], num_warps=4, num_stages=3),
}
for _name, _spec in DUMPS.items():
    _spec["kernel"] = KERNELS[_name]["kernel"]
