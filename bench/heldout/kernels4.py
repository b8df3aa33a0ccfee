"""Held-out Triton kernels, fourth batch: written the way users write them, none tuned for twill, and
unlike bench/heldout/kernels.py, kernels3.py, bench/triton_corpus/kernels.py and ../shared/triton/:
a GEMM with a per-column fp32 scale and bias (bf16 out), C = relu(A @ B^T + R)^2 with B read [N, K]
through a transposed pointer tile (no `tl.trans`), Gemma-style soft-capped attention (tanh from
libdevice), attention at D = 256, GQA decode (the query heads of one KV head are the M rows, M = 16),
attention with a per-key additive bias (padding mask) at BLOCK_N = 128, a GEMM with a row-wise L2
normalisation over the whole N tile, an fp8 e4m3 x e5m2 GEMM with row and column scales, a GEMM whose
accumulator starts from a loaded C (addmm, beta * C + A @ B), and a block-pointer GEMM with a
column-major B (order=(0, 1)) and a scalar alpha.

Protocol for every kernel NAME (KERNELS at the bottom), as kernels.py:
    tensors, params = NAME_make_inputs(size, device)   # size: dict of overrides or None
    out = NAME_launch(*tensors, **params)                # runs the Triton kernel
    ref = NAME_reference(*tensors, **params)             # plain torch, fp32
DUMPS[NAME] holds what gen.py compiles the TTGIR dumps with (`gen.py --module kernels4`).
"""
import math

import triton
import triton.language as tl
from triton.language.extra import libdevice

try:
    import torch
except ImportError:  # dumping TTGIR needs no torch
    torch = None


def _sizes(defaults, size):
    out = dict(defaults)
    if size:
        unknown = set(size) - set(defaults)
        if unknown:
            raise KeyError(f"unknown size keys {sorted(unknown)}; known: {sorted(defaults)}")
        out.update(size)
    return out


# ---------------------------------------------------------------------------------------------
# 1. y = (x @ w) * col_scale + bias, per-column fp32 scale and bias (a dequantised or folded-BN
#    linear layer), bf16 in and out.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_colscale_bias_kernel(A, B, SCALE, BIAS, C, M, N, K, stride_am, stride_bk, stride_cm,
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
    scale = tl.load(SCALE + offs_n)
    bias = tl.load(BIAS + offs_n)
    y = acc * scale[None, :] + bias[None, :]
    tl.store(C + offs_m[:, None] * stride_cm + offs_n[None, :], y.to(tl.bfloat16))


def gemm_colscale_bias_launch(a, b, scale, bias):
    M, K = a.shape
    _, N = b.shape
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0
    c = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    gemm_colscale_bias_kernel[(M // 128, N // 128)](a, b, scale, bias, c, M, N, K, a.stride(0), b.stride(0),
                                                    c.stride(0), BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
                                                    num_warps=8, num_stages=3)
    return c


def gemm_colscale_bias_reference(a, b, scale, bias):
    return (a.float() @ b.float()) * scale[None, :] + bias[None, :]


def gemm_colscale_bias_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=1024, K=1024), size)
    torch.manual_seed(41)
    a = (torch.randn(s["M"], s["K"], device=device) * 0.1).to(torch.bfloat16)
    b = (torch.randn(s["K"], s["N"], device=device) * 0.1).to(torch.bfloat16)
    scale = torch.rand(s["N"], device=device) + 0.5
    bias = torch.randn(s["N"], device=device)
    return (a, b, scale, bias), {}


# ---------------------------------------------------------------------------------------------
# 2. C = relu(A @ B^T + R)^2 (a residual add, then squared ReLU as in Primer / nanoGPT speedruns),
#    B kept [N, K] and its tile read K x N through transposed pointers (offs_k down, offs_n across
#    with B's row stride), no tl.trans. fp16.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_bt_relu2_kernel(A, B, R, C, M, N, K, stride_am, stride_bn, stride_rm, stride_cm,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = A + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = B + offs_k[:, None] + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    r = tl.load(R + offs_m[:, None] * stride_rm + offs_n[None, :])
    y = tl.maximum(acc + r.to(tl.float32), 0.0)
    tl.store(C + offs_m[:, None] * stride_cm + offs_n[None, :], (y * y).to(tl.float16))


def gemm_bt_relu2_launch(a, b, r):
    M, K = a.shape
    N, _ = b.shape
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    gemm_bt_relu2_kernel[(M // 128, N // 128)](a, b, r, c, M, N, K, a.stride(0), b.stride(0), r.stride(0),
                                               c.stride(0), BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=4,
                                               num_stages=4)
    return c


def gemm_bt_relu2_reference(a, b, r):
    return torch.relu(a.float() @ b.float().T + r.float()) ** 2


def gemm_bt_relu2_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=1024, K=1024), size)
    torch.manual_seed(42)
    a = (torch.randn(s["M"], s["K"], device=device) * 0.1).to(torch.float16)
    b = (torch.randn(s["N"], s["K"], device=device) * 0.1).to(torch.float16)
    r = torch.randn(s["M"], s["N"], device=device).to(torch.float16)
    return (a, b, r), {}


# ---------------------------------------------------------------------------------------------
# 3. Soft-capped attention (Gemma 2): s = cap * tanh(q k^T * sm_scale / cap), then softmax with
#    tl.exp; tanh from libdevice as users write it. fp16, D = 128, non-causal.
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_softcap_kernel(Q, K, V, O, stride_bh, stride_n, N_CTX, sm_scale, softcap,
                        HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    base = tl.program_id(1).to(tl.int64) * stride_bh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * stride_n + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in range(0, N_CTX, BLOCK_N):
        k = tl.load(K + base + (start_n + offs_n)[None, :] * stride_n + offs_d[:, None])
        s = tl.dot(q, k) * (sm_scale / softcap)
        s = libdevice.tanh(s) * softcap
        m_ij = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_ij[:, None])
        alpha = tl.exp(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + (start_n + offs_n)[:, None] * stride_n + offs_d[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_ij
    tl.store(O + base + offs_m[:, None] * stride_n + offs_d[None, :], (acc / l_i[:, None]).to(tl.float16))


def attn_softcap_launch(q, k, v, sm_scale=None, softcap=50.0):
    B, H, N, D = q.shape
    assert D == 128 and N % 128 == 0
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    o = torch.empty_like(q)
    attn_softcap_kernel[(N // 128, B * H)](q, k, v, o, q.stride(1), q.stride(2), N, sm_scale, softcap,
                                           HEAD_DIM=128, BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2)
    return o


def attn_softcap_reference(q, k, v, sm_scale=None, softcap=50.0):
    sm_scale = sm_scale or 1.0 / math.sqrt(q.shape[-1])
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    s = torch.tanh(s / softcap) * softcap
    return torch.softmax(s, -1) @ v.float()


def attn_softcap_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=2, H=8, N=1024), size)
    torch.manual_seed(43)
    q, k, v = (torch.randn(s["B"], s["H"], s["N"], 128, device=device).to(torch.float16) for _ in range(3))
    return (q * 4, k, v), {"softcap": 20.0}  # scores large enough that the cap bends them


# ---------------------------------------------------------------------------------------------
# 4. Attention forward at D = 256 (Gemma's head size), fp16, BLOCK_M = 64, BLOCK_N = 64, exp2.
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_d256_kernel(Q, K, V, O, stride_bh, stride_n, N_CTX, sm_scale,
                     HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    base = tl.program_id(1).to(tl.int64) * stride_bh
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
        p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + (start_n + offs_n)[:, None] * stride_n + offs_d[None, :])
        acc = tl.dot(p.to(tl.float16), v, acc * alpha[:, None])
        m_i = m_ij
    tl.store(O + base + offs_m[:, None] * stride_n + offs_d[None, :], (acc / l_i[:, None]).to(tl.float16))


def attn_d256_launch(q, k, v, sm_scale=None):
    B, H, N, D = q.shape
    assert D == 256 and N % 64 == 0
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    o = torch.empty_like(q)
    attn_d256_kernel[(N // 64, B * H)](q, k, v, o, q.stride(1), q.stride(2), N, sm_scale,
                                       HEAD_DIM=256, BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=2)
    return o


def attn_d256_reference(q, k, v, sm_scale=None):
    sm_scale = sm_scale or 1.0 / math.sqrt(q.shape[-1])
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    return torch.softmax(s, -1) @ v.float()


def attn_d256_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=2, H=4, N=1024), size)
    torch.manual_seed(44)
    q, k, v = (torch.randn(s["B"], s["H"], s["N"], 256, device=device).to(torch.float16) for _ in range(3))
    return (q, k, v), {}


# ---------------------------------------------------------------------------------------------
# 5. GQA decode: one new token per sequence, G = 16 query heads share one KV head; the G query rows
#    of a KV head are the dot's M rows (M = 16), the cache of N_KV keys (not a multiple of the
#    block: the last block masked to -inf) is the loop. bf16, D = 128.
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_gqa_decode_kernel(Q, K, V, O, stride_qb, stride_qh, stride_kb, stride_kh, stride_kn, N_KV, sm_scale,
                           GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    hk = tl.program_id(1)
    offs_g = tl.arange(0, GROUP)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q_base = Q + b.to(tl.int64) * stride_qb + (hk * GROUP) * stride_qh
    kv_base = b.to(tl.int64) * stride_kb + hk.to(tl.int64) * stride_kh
    q = tl.load(q_base + offs_g[:, None] * stride_qh + offs_d[None, :])
    qk_scale = sm_scale * 1.44269504
    m_i = tl.full([GROUP], float("-inf"), tl.float32)
    l_i = tl.zeros([GROUP], tl.float32)
    acc = tl.zeros([GROUP, HEAD_DIM], tl.float32)
    for start_n in range(0, N_KV, BLOCK_N):
        cols = start_n + offs_n
        valid = cols < N_KV
        k = tl.load(K + kv_base + cols[None, :] * stride_kn + offs_d[:, None], mask=valid[None, :], other=0.0)
        qk = tl.dot(q, k) * qk_scale
        qk = tl.where(valid[None, :], qk, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + kv_base + cols[:, None] * stride_kn + offs_d[None, :], mask=valid[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), v)
        m_i = m_ij
    o_base = O + b.to(tl.int64) * stride_qb + (hk * GROUP) * stride_qh
    tl.store(o_base + offs_g[:, None] * stride_qh + offs_d[None, :], (acc / l_i[:, None]).to(tl.bfloat16))


def attn_gqa_decode_launch(q, k, v, sm_scale=None):
    # q [B, H, D] (one token), k, v [B, H_KV, N_KV, D]
    B, H, D = q.shape
    _, HKV, NKV, _ = k.shape
    assert D == 128 and H == 16 * HKV
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    o = torch.empty_like(q)
    attn_gqa_decode_kernel[(B, HKV)](q, k, v, o, q.stride(0), q.stride(1), k.stride(0), k.stride(1), k.stride(2),
                                     NKV, sm_scale, GROUP=16, HEAD_DIM=128, BLOCK_N=64, num_warps=4,
                                     num_stages=3)
    return o


def attn_gqa_decode_reference(q, k, v, sm_scale=None):
    B, H, D = q.shape
    HKV = k.shape[1]
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    qg = q.float().reshape(B, HKV, H // HKV, D)
    s = (qg @ k.float().transpose(-1, -2)) * sm_scale
    return (torch.softmax(s, -1) @ v.float()).reshape(B, H, D)


def attn_gqa_decode_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=8, H_KV=4, N_KV=4000), size)
    torch.manual_seed(45)
    q = torch.randn(s["B"], 16 * s["H_KV"], 128, device=device).to(torch.bfloat16)
    k = torch.randn(s["B"], s["H_KV"], s["N_KV"], 128, device=device).to(torch.bfloat16)
    v = torch.randn(s["B"], s["H_KV"], s["N_KV"], 128, device=device).to(torch.bfloat16)
    return (q, k, v), {}


# ---------------------------------------------------------------------------------------------
# 6. Attention with a per-key additive bias (a padding mask of 0 / -1e4 per key, [B, N], loaded in
#    the loop and broadcast over the rows). fp16, D = 64, BLOCK_M = 128, BLOCK_N = 128, 8 warps.
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_keybias_kernel(Q, K, V, KB, O, stride_bh, stride_n, stride_kbb, N_CTX, H, sm_scale,
                        HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    base = bh.to(tl.int64) * stride_bh
    kb_row = KB + (bh // H) * stride_kbb
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * stride_n + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in range(0, N_CTX, BLOCK_N):
        k = tl.load(K + base + (start_n + offs_n)[None, :] * stride_n + offs_d[:, None])
        kb = tl.load(kb_row + start_n + offs_n)
        s = tl.dot(q, k) * sm_scale + kb[None, :]
        m_ij = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_ij[:, None])
        alpha = tl.exp(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + (start_n + offs_n)[:, None] * stride_n + offs_d[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_ij
    tl.store(O + base + offs_m[:, None] * stride_n + offs_d[None, :], (acc / l_i[:, None]).to(tl.float16))


def attn_keybias_launch(q, k, v, kbias, sm_scale=None):
    B, H, N, D = q.shape
    assert D == 64 and N % 128 == 0
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    o = torch.empty_like(q)
    attn_keybias_kernel[(N // 128, B * H)](q, k, v, kbias, o, q.stride(1), q.stride(2), kbias.stride(0), N, H,
                                           sm_scale, HEAD_DIM=64, BLOCK_M=128, BLOCK_N=128, num_warps=8,
                                           num_stages=3)
    return o


def attn_keybias_reference(q, k, v, kbias, sm_scale=None):
    sm_scale = sm_scale or 1.0 / math.sqrt(q.shape[-1])
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale + kbias.float()[:, None, None, :]
    return torch.softmax(s, -1) @ v.float()


def attn_keybias_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=2, H=8, N=1024), size)
    torch.manual_seed(46)
    q, k, v = (torch.randn(s["B"], s["H"], s["N"], 64, device=device).to(torch.float16) for _ in range(3))
    lens = torch.full((s["B"],), s["N"], device=device)
    lens[1::2] = s["N"] * 3 // 4  # every other sequence padded at its last quarter
    kbias = torch.where(torch.arange(s["N"], device=device)[None, :] < lens[:, None], 0.0, -1e4).float()
    return (q, k, v, kbias.contiguous()), {}


# ---------------------------------------------------------------------------------------------
# 7. GEMM with a fused row-wise L2 normalisation: y = (x @ w) / max(||x @ w||_2, eps) per row, one
#    N tile covering all N = 256 columns (an embedding projection followed by F.normalize). fp16.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_l2norm_kernel(X, W, Y, M, K, stride_xm, stride_wk, stride_ym, eps,
                       BLOCK_M: tl.constexpr, N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, N)
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = X + offs_m[:, None] * stride_xm + offs_k[None, :]
    w_ptrs = W + offs_k[:, None] * stride_wk + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        acc = tl.dot(tl.load(x_ptrs), tl.load(w_ptrs), acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K * stride_wk
    norm = tl.sqrt(tl.sum(acc * acc, axis=1))
    y = acc / tl.maximum(norm, eps)[:, None]
    tl.store(Y + offs_m[:, None] * stride_ym + offs_n[None, :], y.to(tl.float16))


def gemm_l2norm_launch(x, w, eps=1e-6):
    M, K = x.shape
    _, N = w.shape
    assert M % 64 == 0 and N == 256 and K % 64 == 0
    y = torch.empty((M, N), device=x.device, dtype=torch.float16)
    gemm_l2norm_kernel[(M // 64,)](x, w, y, M, K, x.stride(0), w.stride(0), y.stride(0), eps, BLOCK_M=64, N=256,
                                   BLOCK_K=64, num_warps=4, num_stages=3)
    return y


def gemm_l2norm_reference(x, w, eps=1e-6):
    return torch.nn.functional.normalize(x.float() @ w.float(), dim=1, eps=eps)


def gemm_l2norm_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=2048, K=1024), size)
    torch.manual_seed(47)
    x = (torch.randn(s["M"], s["K"], device=device) * 0.1).to(torch.float16)
    w = (torch.randn(s["K"], 256, device=device) * 0.1).to(torch.float16)
    return (x, w), {}


# ---------------------------------------------------------------------------------------------
# 8. FP8 GEMM, mixed formats: activations e4m3, weights e5m2 read [N, K] (K contiguous) and
#    transposed, a per-row (token) scale and a per-column (channel) scale, bf16 out.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_fp8_mixed_kernel(A, B, SA, SB, C, M, N, K, stride_am, stride_bn, stride_cm,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = A + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = B + offs_n[:, None] * stride_bn + offs_k[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        acc = tl.dot(a, b.T, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    sa = tl.load(SA + offs_m)
    sb = tl.load(SB + offs_n)
    y = acc * sa[:, None] * sb[None, :]
    tl.store(C + offs_m[:, None] * stride_cm + offs_n[None, :], y.to(tl.bfloat16))


def gemm_fp8_mixed_launch(a, b, sa, sb):
    M, K = a.shape
    N, _ = b.shape
    assert M % 128 == 0 and N % 128 == 0 and K % 128 == 0
    c = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    gemm_fp8_mixed_kernel[(M // 128, N // 128)](a, b, sa, sb, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                                                BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, num_warps=8, num_stages=3)
    return c


def gemm_fp8_mixed_reference(a, b, sa, sb):
    return (a.float() @ b.float().T) * sa[:, None] * sb[None, :]


def gemm_fp8_mixed_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=1024, K=1024), size)
    torch.manual_seed(48)
    a = torch.randn(s["M"], s["K"], device=device).to(torch.float8_e4m3fn)
    b = torch.randn(s["N"], s["K"], device=device).to(torch.float8_e5m2)
    sa = torch.rand(s["M"], device=device) * 0.02 + 0.01
    sb = torch.rand(s["N"], device=device) * 0.02 + 0.01
    return (a, b, sa, sb), {}


# ---------------------------------------------------------------------------------------------
# 9. addmm into an fp32 C: the accumulator starts from beta * C (loaded before the loop), then
#    C = beta * C + A @ B written back in place. fp16 A, B.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_addmm_kernel(A, B, C, M, N, K, stride_am, stride_bk, stride_cm, beta,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    c_ptrs = C + offs_m[:, None] * stride_cm + offs_n[None, :]
    acc = tl.load(c_ptrs) * beta
    a_ptrs = A + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = B + offs_k[:, None] * stride_bk + offs_n[None, :]
    for k in range(0, K, BLOCK_K):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    tl.store(c_ptrs, acc)


def gemm_addmm_launch(a, b, c, beta=0.5):
    M, K = a.shape
    _, N = b.shape
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0
    out = c.clone()
    gemm_addmm_kernel[(M // 128, N // 128)](a, b, out, M, N, K, a.stride(0), b.stride(0), out.stride(0), beta,
                                            BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3)
    return out


def gemm_addmm_reference(a, b, c, beta=0.5):
    return beta * c.float() + a.float() @ b.float()


def gemm_addmm_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=1024, K=1024), size)
    torch.manual_seed(49)
    a = (torch.randn(s["M"], s["K"], device=device) * 0.1).to(torch.float16)
    b = (torch.randn(s["K"], s["N"], device=device) * 0.1).to(torch.float16)
    c = torch.randn(s["M"], s["N"], device=device)
    return (a, b, c), {"beta": 0.5}


# ---------------------------------------------------------------------------------------------
# 10. Block-pointer GEMM with a column-major B (a `w.t()` view: stride_bk = 1, block pointer
#     order=(0, 1)), `tl.advance`, C = alpha * A @ B with a scalar alpha, bf16. Triton 3.6 only
#     (3.9 removed block pointers).
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_bp_colmajor_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm, alpha,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_block = tl.make_block_ptr(base=a_ptr, shape=(M, K), strides=(stride_am, 1), offsets=(pid_m * BLOCK_M, 0),
                                block_shape=(BLOCK_M, BLOCK_K), order=(1, 0))
    b_block = tl.make_block_ptr(base=b_ptr, shape=(K, N), strides=(1, stride_bn), offsets=(0, pid_n * BLOCK_N),
                                block_shape=(BLOCK_K, BLOCK_N), order=(0, 1))
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        acc = tl.dot(tl.load(a_block), tl.load(b_block), acc)
        a_block = tl.advance(a_block, (0, BLOCK_K))
        b_block = tl.advance(b_block, (BLOCK_K, 0))
    c_block = tl.make_block_ptr(base=c_ptr, shape=(M, N), strides=(stride_cm, 1),
                                offsets=(pid_m * BLOCK_M, pid_n * BLOCK_N), block_shape=(BLOCK_M, BLOCK_N),
                                order=(1, 0))
    tl.store(c_block, (acc * alpha).to(tl.bfloat16))


def gemm_bp_colmajor_launch(a, w, alpha=0.25):
    # y = alpha * a @ w.t(), w [N, K] as nn.Linear keeps it, passed as the column-major view w.t()
    M, K = a.shape
    N, _ = w.shape
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0
    b = w.t()
    c = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    gemm_bp_colmajor_kernel[(M // 128, N // 128)](a, b, c, M, N, K, a.stride(0), b.stride(1), c.stride(0), alpha,
                                                  BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3)
    return c


def gemm_bp_colmajor_reference(a, w, alpha=0.25):
    return alpha * (a.float() @ w.float().T)


def gemm_bp_colmajor_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=1024, K=1024), size)
    torch.manual_seed(50)
    a = (torch.randn(s["M"], s["K"], device=device) * 0.1).to(torch.bfloat16)
    w = (torch.randn(s["N"], s["K"], device=device) * 0.1).to(torch.bfloat16)
    return (a, w), {"alpha": 0.25}


# ---------------------------------------------------------------------------------------------
# Registry and dump specs
# ---------------------------------------------------------------------------------------------
NAMES = ("gemm_colscale_bias", "gemm_bt_relu2", "attn_softcap", "attn_d256", "attn_gqa_decode", "attn_keybias",
         "gemm_l2norm", "gemm_fp8_mixed", "gemm_addmm", "gemm_bp_colmajor")
KERNELS = {}
for _name in NAMES:
    KERNELS[_name] = dict(kernel=globals()[_name + "_kernel"], launch=globals()[_name + "_launch"],
                          reference=globals()[_name + "_reference"],
                          make_inputs=globals()[_name + "_make_inputs"])

_C = "constexpr"
DUMPS = {
    "gemm_colscale_bias": dict(
        signature=dict(A="*bf16", B="*bf16", SCALE="*fp32", BIAS="*fp32", C="*bf16", M="i32", N="i32", K="i32",
                       stride_am="i32", stride_bk="i32", stride_cm="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64),
        divisible_by_16=["A", "B", "SCALE", "BIAS", "C", "M", "N", "K", "stride_am", "stride_bk", "stride_cm"],
        num_warps=8, num_stages=3),
    "gemm_bt_relu2": dict(
        signature=dict(A="*fp16", B="*fp16", R="*fp16", C="*fp16", M="i32", N="i32", K="i32", stride_am="i32",
                       stride_bn="i32", stride_rm="i32", stride_cm="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64),
        divisible_by_16=["A", "B", "R", "C", "M", "N", "K", "stride_am", "stride_bn", "stride_rm", "stride_cm"],
        num_warps=4, num_stages=4),
    "attn_softcap": dict(
        signature=dict(Q="*fp16", K="*fp16", V="*fp16", O="*fp16", stride_bh="i32", stride_n="i32", N_CTX="i32",
                       sm_scale="fp32", softcap="fp32", HEAD_DIM=_C, BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(HEAD_DIM=128, BLOCK_M=128, BLOCK_N=64),
        divisible_by_16=["Q", "K", "V", "O", "stride_bh", "stride_n", "N_CTX"],
        num_warps=8, num_stages=2),
    "attn_d256": dict(
        signature=dict(Q="*fp16", K="*fp16", V="*fp16", O="*fp16", stride_bh="i32", stride_n="i32", N_CTX="i32",
                       sm_scale="fp32", HEAD_DIM=_C, BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(HEAD_DIM=256, BLOCK_M=64, BLOCK_N=64),
        divisible_by_16=["Q", "K", "V", "O", "stride_bh", "stride_n", "N_CTX"],
        num_warps=4, num_stages=2),
    "attn_gqa_decode": dict(
        signature=dict(Q="*bf16", K="*bf16", V="*bf16", O="*bf16", stride_qb="i32", stride_qh="i32",
                       stride_kb="i32", stride_kh="i32", stride_kn="i32", N_KV="i32", sm_scale="fp32",
                       GROUP=_C, HEAD_DIM=_C, BLOCK_N=_C),
        constexprs=dict(GROUP=16, HEAD_DIM=128, BLOCK_N=64),
        divisible_by_16=["Q", "K", "V", "O", "stride_qb", "stride_qh", "stride_kb", "stride_kh", "stride_kn"],
        num_warps=4, num_stages=3),
    "attn_keybias": dict(
        signature=dict(Q="*fp16", K="*fp16", V="*fp16", KB="*fp32", O="*fp16", stride_bh="i32", stride_n="i32",
                       stride_kbb="i32", N_CTX="i32", H="i32", sm_scale="fp32", HEAD_DIM=_C, BLOCK_M=_C,
                       BLOCK_N=_C),
        constexprs=dict(HEAD_DIM=64, BLOCK_M=128, BLOCK_N=128),
        divisible_by_16=["Q", "K", "V", "KB", "O", "stride_bh", "stride_n", "stride_kbb", "N_CTX"],
        num_warps=8, num_stages=3),
    "gemm_l2norm": dict(
        signature=dict(X="*fp16", W="*fp16", Y="*fp16", M="i32", K="i32", stride_xm="i32", stride_wk="i32",
                       stride_ym="i32", eps="fp32", BLOCK_M=_C, N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=64, N=256, BLOCK_K=64),
        divisible_by_16=["X", "W", "Y", "M", "K", "stride_xm", "stride_wk", "stride_ym"],
        num_warps=4, num_stages=3),
    "gemm_fp8_mixed": dict(
        signature=dict(A="*fp8e4nv", B="*fp8e5", SA="*fp32", SB="*fp32", C="*bf16", M="i32", N="i32", K="i32",
                       stride_am="i32", stride_bn="i32", stride_cm="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128),
        divisible_by_16=["A", "B", "SA", "SB", "C", "M", "N", "K", "stride_am", "stride_bn", "stride_cm"],
        num_warps=8, num_stages=3),
    "gemm_addmm": dict(
        signature=dict(A="*fp16", B="*fp16", C="*fp32", M="i32", N="i32", K="i32", stride_am="i32",
                       stride_bk="i32", stride_cm="i32", beta="fp32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64),
        divisible_by_16=["A", "B", "C", "M", "N", "K", "stride_am", "stride_bk", "stride_cm"],
        num_warps=8, num_stages=3),
    "gemm_bp_colmajor": dict(
        signature=dict(a_ptr="*bf16", b_ptr="*bf16", c_ptr="*bf16", M="i32", N="i32", K="i32", stride_am="i32",
                       stride_bn="i32", stride_cm="i32", alpha="fp32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64),
        divisible_by_16=["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bn", "stride_cm"],
        num_warps=8, num_stages=3),
}
for _name, _spec in DUMPS.items():
    _spec["kernel"] = KERNELS[_name]["kernel"]
