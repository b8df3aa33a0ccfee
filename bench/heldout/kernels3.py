"""Held-out Triton kernels, third batch: written the way users write them (Triton's tutorials and
docs, common model code), none tuned for twill, and unlike bench/heldout/kernels.py,
bench/triton_corpus/kernels.py and ../shared/triton/: block pointers with `tl.advance` and boundary
checks, a weight read as [N, K] and transposed in the kernel, a gated MLP (two dots sharing the A
tile), fp32 inputs through TF32 tensor cores, sliding-window attention (loop start and end from the
program id), split-KV (flash-decoding) attention writing partial outputs and their LSE, bf16
attention at D = 128, a matmul with `tl.range(num_stages=...)`, `tl.assume` and `tl.multiple_of`
hints, and a split-K GEMM that adds its partial tiles with `tl.atomic_add`.

Protocol for every kernel NAME (KERNELS at the bottom), as kernels.py:
    tensors, params = NAME_make_inputs(size, device)   # size: dict of overrides or None
    out = NAME_launch(*tensors, **params)                # runs the Triton kernel
    ref = NAME_reference(*tensors, **params)             # plain torch, fp32
DUMPS[NAME] holds what gen.py compiles the TTGIR dumps with (`gen.py --module kernels3`).
"""
import math

import triton
import triton.language as tl

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
# 1. GEMM + bias + leaky ReLU through block pointers (`tl.make_block_ptr`, `tl.advance`), with
#    boundary checks and zero padding on the loads, as Triton's block-pointer tutorial writes it.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_bp_leaky_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                         stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_block = tl.make_block_ptr(base=a_ptr, shape=(M, K), strides=(stride_am, stride_ak),
                                offsets=(pid_m * BLOCK_M, 0), block_shape=(BLOCK_M, BLOCK_K), order=(1, 0))
    b_block = tl.make_block_ptr(base=b_ptr, shape=(K, N), strides=(stride_bk, stride_bn),
                                offsets=(0, pid_n * BLOCK_N), block_shape=(BLOCK_K, BLOCK_N), order=(1, 0))
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_block, boundary_check=(0, 1), padding_option="zero")
        b = tl.load(b_block, boundary_check=(0, 1), padding_option="zero")
        acc += tl.dot(a, b)
        a_block = tl.advance(a_block, (0, BLOCK_K))
        b_block = tl.advance(b_block, (BLOCK_K, 0))
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)
    acc = acc + bias[None, :].to(tl.float32)
    acc = tl.where(acc >= 0, acc, 0.01 * acc)
    c_block = tl.make_block_ptr(base=c_ptr, shape=(M, N), strides=(stride_cm, stride_cn),
                                offsets=(pid_m * BLOCK_M, pid_n * BLOCK_N), block_shape=(BLOCK_M, BLOCK_N),
                                order=(1, 0))
    tl.store(c_block, acc.to(tl.float16), boundary_check=(0, 1))


def gemm_bp_leaky_launch(a, b, bias):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    grid = (triton.cdiv(M, 128), triton.cdiv(N, 128))
    gemm_bp_leaky_kernel[grid](a, b, bias, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                               c.stride(0), c.stride(1), BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
                               num_warps=8, num_stages=3)
    return c


def gemm_bp_leaky_reference(a, b, bias):
    x = a.float() @ b.float() + bias.float()[None, :]
    return torch.where(x >= 0, x, 0.01 * x)


def gemm_bp_leaky_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=1024, K=1024), size)
    torch.manual_seed(31)
    a = torch.randn(s["M"], s["K"], device=device).to(torch.float16)
    b = torch.randn(s["K"], s["N"], device=device).to(torch.float16)
    bias = torch.randn(s["N"], device=device).to(torch.float16)
    return (a, b, bias), {}


# ---------------------------------------------------------------------------------------------
# 2. y = relu(x @ W^T) with W as nn.Linear keeps it, [N, K]: the kernel loads W's tile as
#    [BLOCK_N, BLOCK_K] (rows of W) and transposes it with `tl.trans`. bf16.
# ---------------------------------------------------------------------------------------------
@triton.jit
def linear_trans_relu_kernel(X, W, Y, M, N, K, stride_xm, stride_wn, stride_ym,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = X + offs_m[:, None] * stride_xm + offs_k[None, :]
    w_ptrs = W + offs_n[:, None] * stride_wn + offs_k[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BLOCK_K)):
        x = tl.load(x_ptrs)
        w = tl.load(w_ptrs)
        acc = tl.dot(x, tl.trans(w), acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    y = tl.maximum(acc, 0.0)
    tl.store(Y + offs_m[:, None] * stride_ym + offs_n[None, :], y.to(tl.bfloat16))


def linear_trans_relu_launch(x, w):
    M, K = x.shape
    N, _ = w.shape
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0
    y = torch.empty((M, N), device=x.device, dtype=torch.bfloat16)
    linear_trans_relu_kernel[(M // 128, N // 128)](x, w, y, M, N, K, x.stride(0), w.stride(0), y.stride(0),
                                                   BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=4,
                                                   num_stages=4)
    return y


def linear_trans_relu_reference(x, w):
    return torch.relu(x.float() @ w.float().T)


def linear_trans_relu_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=2048, K=1024), size)
    torch.manual_seed(32)
    x = (torch.randn(s["M"], s["K"], device=device) * 0.1).to(torch.bfloat16)
    w = (torch.randn(s["N"], s["K"], device=device) * 0.1).to(torch.bfloat16)
    return (x, w), {}


# ---------------------------------------------------------------------------------------------
# 3. SwiGLU (LLaMA's gated MLP, first half): H = silu(X @ W1) * (X @ W3), two dots sharing X's tile.
# ---------------------------------------------------------------------------------------------
@triton.jit
def swiglu_kernel(X, W1, W3, H, M, N, K, stride_xm, stride_wk, stride_hm,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = X + offs_m[:, None] * stride_xm + offs_k[None, :]
    w1_ptrs = W1 + offs_k[:, None] * stride_wk + offs_n[None, :]
    w3_ptrs = W3 + offs_k[:, None] * stride_wk + offs_n[None, :]
    acc1 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc3 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K, BLOCK_K):
        x = tl.load(x_ptrs)
        acc1 = tl.dot(x, tl.load(w1_ptrs), acc1)
        acc3 = tl.dot(x, tl.load(w3_ptrs), acc3)
        x_ptrs += BLOCK_K
        w1_ptrs += BLOCK_K * stride_wk
        w3_ptrs += BLOCK_K * stride_wk
    h = acc1 * tl.sigmoid(acc1) * acc3
    tl.store(H + offs_m[:, None] * stride_hm + offs_n[None, :], h.to(tl.float16))


def swiglu_launch(x, w1, w3):
    M, K = x.shape
    _, N = w1.shape
    assert M % 128 == 0 and N % 64 == 0 and K % 64 == 0
    h = torch.empty((M, N), device=x.device, dtype=torch.float16)
    swiglu_kernel[(M // 128, N // 64)](x, w1, w3, h, M, N, K, x.stride(0), w1.stride(0), h.stride(0),
                                       BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, num_warps=4, num_stages=3)
    return h


def swiglu_reference(x, w1, w3):
    a = x.float() @ w1.float()
    return a * torch.sigmoid(a) * (x.float() @ w3.float())


def swiglu_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=2048, K=1024), size)
    torch.manual_seed(33)
    x = (torch.randn(s["M"], s["K"], device=device) * 0.3).to(torch.float16)
    w1 = (torch.randn(s["K"], s["N"], device=device) * 0.05).to(torch.float16)
    w3 = (torch.randn(s["K"], s["N"], device=device) * 0.05).to(torch.float16)
    return (x, w1, w3), {}


# ---------------------------------------------------------------------------------------------
# 4. fp32 GEMM on TF32 tensor cores: fp32 A, B, C, `tl.dot(..., input_precision="tf32")`.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_tf32_kernel(A, B, C, M, N, K, stride_am, stride_bk, stride_cm,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = A + rm[:, None] * stride_am + rk[None, :]
    b_ptrs = B + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        acc = tl.dot(a, b, acc, input_precision="tf32")
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    tl.store(C + rm[:, None] * stride_cm + rn[None, :], acc)


def gemm_tf32_launch(a, b):
    M, K = a.shape
    _, N = b.shape
    assert M % 128 == 0 and N % 128 == 0 and K % 32 == 0
    c = torch.empty((M, N), device=a.device, dtype=torch.float32)
    gemm_tf32_kernel[(M // 128, N // 128)](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                                           BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, num_warps=8, num_stages=3)
    return c


def gemm_tf32_reference(a, b):
    return a.double() @ b.double()


def gemm_tf32_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=1024, K=1024), size)
    torch.manual_seed(34)
    return (torch.randn(s["M"], s["K"], device=device), torch.randn(s["K"], s["N"], device=device)), {}


# ---------------------------------------------------------------------------------------------
# 5. Sliding-window causal attention (Mistral-style, WINDOW keys back): the key loop starts at
#    max(0, start_m * BLOCK_M - WINDOW) and ends at (start_m + 1) * BLOCK_M; the mask
#    q_pos - WINDOW < k_pos <= q_pos inside. D = 64, fp16, exp2 with the scale folded.
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_window_kernel(Q, K, V, O, stride_bh, stride_n, N_CTX, sm_scale, WINDOW,
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
    lo = tl.maximum(start_m * BLOCK_M - WINDOW, 0) // BLOCK_N * BLOCK_N
    hi = (start_m + 1) * BLOCK_M
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + base + cols[None, :] * stride_n + offs_d[:, None])
        qk = tl.dot(q, k)
        keep = (cols[None, :] <= offs_m[:, None]) & (cols[None, :] > offs_m[:, None] - WINDOW)
        qk = tl.where(keep, qk * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + cols[:, None] * stride_n + offs_d[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new
    tl.store(O + base + offs_m[:, None] * stride_n + offs_d[None, :], (acc / l_i[:, None]).to(tl.float16))


def attn_window_launch(q, k, v, window=256, sm_scale=None):
    B, H, N, D = q.shape
    assert D == 64 and N % 128 == 0
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    o = torch.empty_like(q)
    attn_window_kernel[(N // 128, B * H)](q, k, v, o, q.stride(1), q.stride(2), N, sm_scale, window,
                                          HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=3)
    return o


def attn_window_reference(q, k, v, window=256, sm_scale=None):
    N, D = q.shape[2], q.shape[3]
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    i = torch.arange(N, device=q.device)
    keep = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - window)
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, -1) @ v.float()


def attn_window_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=2, H=8, N=1024, window=256), size)
    torch.manual_seed(35)
    q, k, v = (torch.randn(s["B"], s["H"], s["N"], 64, device=device).to(torch.float16) for _ in range(3))
    return (q, k, v), {"window": s["window"]}


# ---------------------------------------------------------------------------------------------
# 6. Split-KV attention (flash-decoding's first pass, here with a block of 64 queries, as in
#    speculative decoding or chunked prefill): program (split, bh, m) covers keys
#    [split * SPLIT_LEN, (split + 1) * SPLIT_LEN) and writes its unnormalized-then-normalized partial
#    O (fp32) and its log-sum-exp; a second small kernel (torch here) combines the splits.
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_splitkv_kernel(Q, K, V, O_PART, LSE_PART, stride_qbh, stride_kbh, stride_n, N_Q, SPLIT_LEN, sm_scale,
                        HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    split = tl.program_id(0)
    bh = tl.program_id(1)
    start_m = tl.program_id(2)
    num_bh = tl.num_programs(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + bh.to(tl.int64) * stride_qbh + offs_m[:, None] * stride_n + offs_d[None, :])
    k_base = K + bh.to(tl.int64) * stride_kbh
    v_base = V + bh.to(tl.int64) * stride_kbh
    qk_scale = sm_scale * 1.44269504
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    kv_lo = split * SPLIT_LEN
    for start_n in range(kv_lo, kv_lo + SPLIT_LEN, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_base + cols[None, :] * stride_n + offs_d[:, None])
        qk = tl.dot(q, k) * qk_scale
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + cols[:, None] * stride_n + offs_d[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new
    row = (split * num_bh + bh).to(tl.int64) * N_Q + offs_m
    tl.store(O_PART + row[:, None] * HEAD_DIM + offs_d[None, :], acc / l_i[:, None])
    tl.store(LSE_PART + row, (m_i + tl.math.log2(l_i)) * 0.6931471805599453)


def attn_splitkv_launch(q, k, v, splits=4, sm_scale=None):
    B, H, NQ, D = q.shape
    NKV = k.shape[2]
    assert D == 64 and NQ % 64 == 0 and NKV % (64 * splits) == 0
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    o_part = torch.empty((splits, B * H, NQ, D), device=q.device, dtype=torch.float32)
    lse_part = torch.empty((splits, B * H, NQ), device=q.device, dtype=torch.float32)
    attn_splitkv_kernel[(splits, B * H, NQ // 64)](q, k, v, o_part, lse_part, q.stride(1), k.stride(1), q.stride(2),
                                                   NQ, NKV // splits, sm_scale, HEAD_DIM=64, BLOCK_M=64,
                                                   BLOCK_N=64, num_warps=4, num_stages=3)
    return o_part, lse_part


def attn_splitkv_reference(q, k, v, splits=4, sm_scale=None):
    B, H, NQ, D = q.shape
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    kc = k.float().reshape(B * H, splits, -1, D).transpose(0, 1)
    vc = v.float().reshape(B * H, splits, -1, D).transpose(0, 1)
    s = (q.float().reshape(B * H, NQ, D)[None] @ kc.transpose(-1, -2)) * sm_scale
    return torch.softmax(s, -1) @ vc, torch.logsumexp(s, -1)


def attn_splitkv_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=2, H=8, NQ=64, NKV=4096, splits=4), size)
    torch.manual_seed(36)
    q = torch.randn(s["B"], s["H"], s["NQ"], 64, device=device).to(torch.float16)
    k, v = (torch.randn(s["B"], s["H"], s["NKV"], 64, device=device).to(torch.float16) for _ in range(2))
    return (q, k, v), {"splits": s["splits"]}


# ---------------------------------------------------------------------------------------------
# 7. Attention forward, bf16, D = 128 (LLaMA's head size), non-causal, 8 warps, exp2.
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_bf16_d128_kernel(Q, K, V, O, stride_bh, stride_n, N_CTX, sm_scale,
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
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(tl.bfloat16), v, acc)
        m_i = m_ij
    tl.store(O + base + offs_m[:, None] * stride_n + offs_d[None, :], (acc / l_i[:, None]).to(tl.bfloat16))


def attn_bf16_d128_launch(q, k, v, sm_scale=None):
    B, H, N, D = q.shape
    assert D == 128 and N % 128 == 0
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    o = torch.empty_like(q)
    attn_bf16_d128_kernel[(N // 128, B * H)](q, k, v, o, q.stride(1), q.stride(2), N, sm_scale,
                                             HEAD_DIM=128, BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2)
    return o


def attn_bf16_d128_reference(q, k, v, sm_scale=None):
    sm_scale = sm_scale or 1.0 / math.sqrt(q.shape[-1])
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    return torch.softmax(s, -1) @ v.float()


def attn_bf16_d128_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=2, H=8, N=1024), size)
    torch.manual_seed(37)
    q, k, v = (torch.randn(s["B"], s["H"], s["N"], 128, device=device).to(torch.bfloat16) for _ in range(3))
    return (q, k, v), {}


# ---------------------------------------------------------------------------------------------
# 8. Matmul with compiler hints: `tl.assume` on the sizes and strides, `tl.multiple_of` /
#    `tl.max_contiguous` on the offsets, and the loop as `tl.range(..., num_stages=4)`.
# ---------------------------------------------------------------------------------------------
@triton.jit
def mm_hints_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    tl.assume(M > 0)
    tl.assume(N > 0)
    tl.assume(K > 0)
    tl.assume(stride_am > 0)
    tl.assume(stride_bk > 0)
    tl.assume(stride_cm > 0)
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = tl.max_contiguous(tl.multiple_of(pid_m * BLOCK_M + tl.arange(0, BLOCK_M), BLOCK_M), BLOCK_M)
    offs_n = tl.max_contiguous(tl.multiple_of(pid_n * BLOCK_N + tl.arange(0, BLOCK_N), BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BLOCK_K), num_stages=4):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], acc.to(tl.float16))


def mm_hints_launch(a, b):
    M, K = a.shape
    _, N = b.shape
    assert M % 128 == 0 and N % 256 == 0 and K % 64 == 0
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    mm_hints_kernel[(M // 128, N // 256)](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                                          BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8)
    return c


def mm_hints_reference(a, b):
    return a.float() @ b.float()


def mm_hints_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=2048, K=1024), size)
    torch.manual_seed(38)
    a = torch.randn(s["M"], s["K"], device=device).to(torch.float16)
    b = torch.randn(s["K"], s["N"], device=device).to(torch.float16)
    return (a, b), {}


# ---------------------------------------------------------------------------------------------
# 9. Split-K GEMM: program (m, n, s) sums K-slice s and adds its fp32 tile into C with
#    `tl.atomic_add` (C zeroed first), as skinny-M GEMMs in inference code do.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_splitk_atomic_kernel(A, B, C, M, N, K, stride_am, stride_bk, stride_cm, K_PER_SPLIT,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = pid_k * K_PER_SPLIT + tl.arange(0, BLOCK_K)
    a_ptrs = A + rm[:, None] * stride_am + rk[None, :]
    b_ptrs = B + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K_PER_SPLIT, BLOCK_K):
        acc += tl.dot(tl.load(a_ptrs), tl.load(b_ptrs))
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    tl.atomic_add(C + rm[:, None] * stride_cm + rn[None, :], acc)


def gemm_splitk_atomic_launch(a, b, splits=4):
    M, K = a.shape
    _, N = b.shape
    assert M % 128 == 0 and N % 128 == 0 and K % (64 * splits) == 0
    c = torch.zeros((M, N), device=a.device, dtype=torch.float32)
    gemm_splitk_atomic_kernel[(M // 128, N // 128, splits)](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                                                            K // splits, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
                                                            num_warps=4, num_stages=3)
    return c


def gemm_splitk_atomic_reference(a, b, splits=4):
    return a.float() @ b.float()


def gemm_splitk_atomic_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=256, N=1024, K=8192, splits=4), size)
    torch.manual_seed(39)
    a = torch.randn(s["M"], s["K"], device=device).to(torch.float16)
    b = torch.randn(s["K"], s["N"], device=device).to(torch.float16)
    return (a, b), {"splits": s["splits"]}


# ---------------------------------------------------------------------------------------------
# 10. RMSNorm fused into the GEMM that follows it: Y = (X * rstd[:, None]) @ W with rstd given
#     per row (computed by an earlier pass) and the norm's weight folded into W; the row scale is
#     applied to the accumulator after the loop, as (diag(r) X) W = diag(r) (X W).
# ---------------------------------------------------------------------------------------------
@triton.jit
def rmsnorm_gemm_kernel(X, RSTD, W, Y, M, N, K, stride_xm, stride_wk, stride_ym,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        x = tl.load(X + rm[:, None] * stride_xm + (k + rk)[None, :])
        w = tl.load(W + (k + rk)[:, None] * stride_wk + rn[None, :])
        acc = tl.dot(x, w, acc)
    r = tl.load(RSTD + rm)
    tl.store(Y + rm[:, None] * stride_ym + rn[None, :], (acc * r[:, None]).to(tl.float16))


def rmsnorm_gemm_launch(x, rstd, w):
    M, K = x.shape
    _, N = w.shape
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0
    y = torch.empty((M, N), device=x.device, dtype=torch.float16)
    rmsnorm_gemm_kernel[(M // 128, N // 128)](x, rstd, w, y, M, N, K, x.stride(0), w.stride(0), y.stride(0),
                                              BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=3)
    return y


def rmsnorm_gemm_reference(x, rstd, w):
    return (x.float() * rstd.float()[:, None]) @ w.float()


def rmsnorm_gemm_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=1024, K=2048), size)
    torch.manual_seed(40)
    x = torch.randn(s["M"], s["K"], device=device).to(torch.float16)
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + 1e-6)
    w = (torch.randn(s["K"], s["N"], device=device) * 0.05).to(torch.float16)
    return (x, rstd, w), {}


# ---------------------------------------------------------------------------------------------
# Registry and dump specs
# ---------------------------------------------------------------------------------------------
NAMES = ("gemm_bp_leaky", "linear_trans_relu", "swiglu", "gemm_tf32", "attn_window", "attn_splitkv",
         "attn_bf16_d128", "mm_hints", "gemm_splitk_atomic", "rmsnorm_gemm")
KERNELS = {}
for _name in NAMES:
    KERNELS[_name] = dict(kernel=globals()[_name + "_kernel"], launch=globals()[_name + "_launch"],
                          reference=globals()[_name + "_reference"],
                          make_inputs=globals()[_name + "_make_inputs"])

_C = "constexpr"
DUMPS = {
    "gemm_bp_leaky": dict(
        # the unit strides as the JIT specializes them (an integer argument equal to 1 is a constant)
        signature=dict(a_ptr="*fp16", b_ptr="*fp16", bias_ptr="*fp16", c_ptr="*fp16", M="i32", N="i32", K="i32",
                       stride_am="i32", stride_ak=_C, stride_bk="i32", stride_bn=_C, stride_cm="i32",
                       stride_cn=_C, BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(stride_ak=1, stride_bn=1, stride_cn=1, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64),
        divisible_by_16=["a_ptr", "b_ptr", "bias_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bk",
                         "stride_cm"],
        num_warps=8, num_stages=3),
    "linear_trans_relu": dict(
        signature=dict(X="*bf16", W="*bf16", Y="*bf16", M="i32", N="i32", K="i32", stride_xm="i32",
                       stride_wn="i32", stride_ym="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64),
        divisible_by_16=["X", "W", "Y", "M", "N", "K", "stride_xm", "stride_wn", "stride_ym"],
        num_warps=4, num_stages=4),
    "swiglu": dict(
        signature=dict(X="*fp16", W1="*fp16", W3="*fp16", H="*fp16", M="i32", N="i32", K="i32", stride_xm="i32",
                       stride_wk="i32", stride_hm="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=64, BLOCK_K=64),
        divisible_by_16=["X", "W1", "W3", "H", "M", "N", "K", "stride_xm", "stride_wk", "stride_hm"],
        num_warps=4, num_stages=3),
    "gemm_tf32": dict(
        signature=dict(A="*fp32", B="*fp32", C="*fp32", M="i32", N="i32", K="i32", stride_am="i32",
                       stride_bk="i32", stride_cm="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32),
        divisible_by_16=["A", "B", "C", "M", "N", "K", "stride_am", "stride_bk", "stride_cm"],
        num_warps=8, num_stages=3),
    "attn_window": dict(
        signature=dict(Q="*fp16", K="*fp16", V="*fp16", O="*fp16", stride_bh="i32", stride_n="i32", N_CTX="i32",
                       sm_scale="fp32", WINDOW="i32", HEAD_DIM=_C, BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64),
        divisible_by_16=["Q", "K", "V", "O", "stride_bh", "stride_n", "N_CTX", "WINDOW"],
        num_warps=4, num_stages=3),
    "attn_splitkv": dict(
        signature=dict(Q="*fp16", K="*fp16", V="*fp16", O_PART="*fp32", LSE_PART="*fp32", stride_qbh="i32",
                       stride_kbh="i32", stride_n="i32", N_Q="i32", SPLIT_LEN="i32", sm_scale="fp32",
                       HEAD_DIM=_C, BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(HEAD_DIM=64, BLOCK_M=64, BLOCK_N=64),
        divisible_by_16=["Q", "K", "V", "O_PART", "LSE_PART", "stride_qbh", "stride_kbh", "stride_n", "N_Q",
                         "SPLIT_LEN"],
        num_warps=4, num_stages=3),
    "attn_bf16_d128": dict(
        signature=dict(Q="*bf16", K="*bf16", V="*bf16", O="*bf16", stride_bh="i32", stride_n="i32", N_CTX="i32",
                       sm_scale="fp32", HEAD_DIM=_C, BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(HEAD_DIM=128, BLOCK_M=128, BLOCK_N=64),
        divisible_by_16=["Q", "K", "V", "O", "stride_bh", "stride_n", "N_CTX"],
        num_warps=8, num_stages=2),
    "mm_hints": dict(
        signature=dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp16", M="i32", N="i32", K="i32", stride_am="i32",
                       stride_bk="i32", stride_cm="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64),
        divisible_by_16=["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bk", "stride_cm"],
        num_warps=8, num_stages=3),
    "gemm_splitk_atomic": dict(
        signature=dict(A="*fp16", B="*fp16", C="*fp32", M="i32", N="i32", K="i32", stride_am="i32",
                       stride_bk="i32", stride_cm="i32", K_PER_SPLIT="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64),
        divisible_by_16=["A", "B", "C", "M", "N", "K", "stride_am", "stride_bk", "stride_cm", "K_PER_SPLIT"],
        num_warps=4, num_stages=3),
    "rmsnorm_gemm": dict(
        signature=dict(X="*fp16", RSTD="*fp32", W="*fp16", Y="*fp16", M="i32", N="i32", K="i32", stride_xm="i32",
                       stride_wk="i32", stride_ym="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64),
        divisible_by_16=["X", "RSTD", "W", "Y", "M", "N", "K", "stride_xm", "stride_wk", "stride_ym"],
        num_warps=4, num_stages=3),
}
for _name, _spec in DUMPS.items():
    _spec["kernel"] = KERNELS[_name]["kernel"]
