"""Held-out Triton kernels: written in the style users write (Triton's tutorials, common model code),
not tuned for twill. They differ from bench/triton_corpus/kernels.py on purpose: ragged M/N/K edges
with masks compared with launch-time bounds, grouped (L2-swizzled) tile orders, a 3-D grid, int8
GEMMs with per-row/per-column scales, attention at D = 64 with masks or biases computed from the
program id and the loop's induction variable, and row-wise kernels without tensor cores.

Protocol for every kernel NAME (see KERNELS at the bottom), as in the corpus:
    tensors, params = NAME_make_inputs(size, device)   # size: dict of overrides or None
    out = NAME_launch(*tensors, **params)                # runs the Triton kernel
    ref = NAME_reference(*tensors, **params)             # plain torch, fp32
DUMPS[NAME] holds the signature/constexprs/options gen.py compiles the TTGIR dumps with.
torch is only needed by the host functions; importing this file without torch works.
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
# 1. The Triton tutorial matmul (03-matrix-multiplication): fp16, grouped tile order (GROUP_M), the
#    K edge masked with `offs_k < K - k * BLOCK_K`, the M/N edges by a masked store. M, N, K ragged.
# ---------------------------------------------------------------------------------------------
@triton.jit
def mm_tutorial_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                       stride_cm, stride_cn, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                       BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(tl.float16)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


def mm_tutorial_launch(a, b):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
    mm_tutorial_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                             c.stride(0), c.stride(1), BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64,
                             GROUP_SIZE_M=8, num_warps=8, num_stages=3)
    return c


def mm_tutorial_reference(a, b):
    return a.float() @ b.float()


def mm_tutorial_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1000, N=1096, K=1000), size)  # none a multiple of its tile
    torch.manual_seed(0)
    a = torch.randn(s["M"], s["K"], device=device).to(torch.float16)
    b = torch.randn(s["K"], s["N"], device=device).to(torch.float16)
    return (a, b), {}


# ---------------------------------------------------------------------------------------------
# 2. bf16 GEMM with SiLU and a residual add in the epilogue: C = silu(A @ B) + R. 2-D grid.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_silu_residual_kernel(A, B, R, C, M, N, K, stride_am, stride_bk, stride_rm, stride_cm,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = A + rm[:, None] * stride_am + rk[None, :]
    b_ptrs = B + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    y = acc * tl.sigmoid(acc)
    r = tl.load(R + rm[:, None] * stride_rm + rn[None, :]).to(tl.float32)
    y = y + r
    tl.store(C + rm[:, None] * stride_cm + rn[None, :], y.to(tl.bfloat16))


def gemm_silu_residual_launch(a, b, r):
    M, K = a.shape
    _, N = b.shape
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0
    c = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    grid = (M // 128, N // 128)
    gemm_silu_residual_kernel[grid](a, b, r, c, M, N, K, a.stride(0), b.stride(0), r.stride(0), c.stride(0),
                                    BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=3)
    return c


def gemm_silu_residual_reference(a, b, r):
    x = a.float() @ b.float()
    return x * torch.sigmoid(x) + r.float()


def gemm_silu_residual_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=1024, K=1024), size)
    torch.manual_seed(1)
    a = (torch.randn(s["M"], s["K"], device=device) * 0.1).to(torch.bfloat16)
    b = (torch.randn(s["K"], s["N"], device=device) * 0.1).to(torch.bfloat16)
    r = torch.randn(s["M"], s["N"], device=device).to(torch.bfloat16)
    return (a, b, r), {}


# ---------------------------------------------------------------------------------------------
# 3. int8 GEMM, int32 accumulate, per-row scale of A and per-column scale of B, fp16 out
#    (SmoothQuant / LLM.int8-style W8A8). B given as [N, K] (a Linear weight), read as B^T.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_int8_scaled_kernel(A, B, SA, SB, C, M, N, K, stride_am, stride_bn, stride_cm,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = A + rm[:, None] * stride_am + rk[None, :]
    b_ptrs = B + rn[None, :] * stride_bn + rk[:, None]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.int32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    sa = tl.load(SA + rm)
    sb = tl.load(SB + rn)
    y = acc.to(tl.float32) * sa[:, None] * sb[None, :]
    tl.store(C + rm[:, None] * stride_cm + rn[None, :], y.to(tl.float16))


def gemm_int8_scaled_launch(a, b, sa, sb):
    M, K = a.shape
    N, _ = b.shape
    assert M % 128 == 0 and N % 128 == 0 and K % 128 == 0
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    gemm_int8_scaled_kernel[(M // 128, N // 128)](a, b, sa, sb, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                                                   BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, num_warps=8, num_stages=3)
    return c


def gemm_int8_scaled_reference(a, b, sa, sb):
    return (a.double() @ b.double().T).float() * sa.float()[:, None] * sb.float()[None, :]


def gemm_int8_scaled_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=2048, K=2048), size)
    torch.manual_seed(2)
    a = torch.randint(-127, 128, (s["M"], s["K"]), device=device, dtype=torch.int8)
    b = torch.randint(-127, 128, (s["N"], s["K"]), device=device, dtype=torch.int8)
    sa = torch.rand(s["M"], device=device) * 1e-3
    sb = torch.rand(s["N"], device=device) * 1e-3
    return (a, b, sa, sb), {}


# ---------------------------------------------------------------------------------------------
# 4. Batched GEMM: C[b] = A[b] @ B[b], a 3-D grid (program_id(2) is the batch), fp16 in and out.
# ---------------------------------------------------------------------------------------------
@triton.jit
def bmm_kernel(A, B, C, M, N, K, stride_ab, stride_am, stride_bb, stride_bk, stride_cb, stride_cm,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    bid = tl.program_id(2)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = A + bid * stride_ab + rm[:, None] * stride_am + rk[None, :]
    b_ptrs = B + bid * stride_bb + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    tl.store(C + bid * stride_cb + rm[:, None] * stride_cm + rn[None, :], acc.to(tl.float16))


def bmm_launch(a, b):
    Bt, M, K = a.shape
    _, _, N = b.shape
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0
    c = torch.empty((Bt, M, N), device=a.device, dtype=torch.float16)
    bmm_kernel[(M // 128, N // 128, Bt)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                         c.stride(0), c.stride(1), BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
                                         num_warps=4, num_stages=3)
    return c


def bmm_reference(a, b):
    return a.float() @ b.float()


def bmm_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(BATCH=8, M=512, N=512, K=512), size)
    torch.manual_seed(3)
    a = torch.randn(s["BATCH"], s["M"], s["K"], device=device).to(torch.float16)
    b = torch.randn(s["BATCH"], s["K"], s["N"], device=device).to(torch.float16)
    return (a, b), {}


# ---------------------------------------------------------------------------------------------
# 5. Linear layer, fp32 out: Y = X @ W^T + bias (W [N, K] as nn.Linear holds it), fp16 in.
# ---------------------------------------------------------------------------------------------
@triton.jit
def linear_f32out_kernel(X, W, BIAS, Y, M, N, K, stride_xm, stride_wn, stride_ym,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        x = tl.load(X + rm[:, None] * stride_xm + (k + rk)[None, :])
        w = tl.load(W + rn[:, None] * stride_wn + (k + rk)[None, :])
        acc = tl.dot(x, tl.trans(w), acc)
    acc += tl.load(BIAS + rn)[None, :]
    tl.store(Y + rm[:, None] * stride_ym + rn[None, :], acc)


def linear_f32out_launch(x, w, bias):
    M, K = x.shape
    N, _ = w.shape
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0
    y = torch.empty((M, N), device=x.device, dtype=torch.float32)
    linear_f32out_kernel[(M // 128, N // 128)](x, w, bias, y, M, N, K, x.stride(0), w.stride(0), y.stride(0),
                                               BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3)
    return y


def linear_f32out_reference(x, w, bias):
    return x.float() @ w.float().T + bias.float()


def linear_f32out_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=1024, K=2048), size)
    torch.manual_seed(4)
    x = torch.randn(s["M"], s["K"], device=device).to(torch.float16)
    w = (torch.randn(s["N"], s["K"], device=device) * 0.05).to(torch.float16)
    bias = torch.randn(s["N"], device=device)
    return (x, w, bias), {}


# ---------------------------------------------------------------------------------------------
# 6. Attention forward, D = 64, non-causal, BLOCK_M = 128, BLOCK_N = 64, 4 warps, exp2 with the
#    scale folded (the tutorial's form). Q, K, V, O [B, H, N, 64].
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_d64_kernel(Q, K, V, O, stride_bh, stride_n, N_CTX, sm_scale,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    base = off_bh.to(tl.int64) * stride_bh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * stride_n + offs_d[None, :])
    k_ptrs = K + base + offs_n[None, :] * stride_n + offs_d[:, None]
    v_ptrs = V + base + offs_n[:, None] * stride_n + offs_d[None, :]
    qk_scale = sm_scale * 1.44269504
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for start_n in range(0, N_CTX, BLOCK_N):
        k = tl.load(k_ptrs + start_n * stride_n)
        qk = tl.dot(q, k)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        l_ij = tl.sum(p, 1)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + l_ij
        acc = acc * alpha[:, None]
        v = tl.load(v_ptrs + start_n * stride_n)
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_ij
    acc = acc / l_i[:, None]
    tl.store(O + base + offs_m[:, None] * stride_n + offs_d[None, :], acc.to(tl.float16))


def attn_d64_launch(q, k, v, sm_scale=None):
    B, H, N, D = q.shape
    assert D == 64 and N % 128 == 0
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    o = torch.empty_like(q)
    attn_d64_kernel[(N // 128, B * H)](q, k, v, o, q.stride(1), q.stride(2), N, sm_scale,
                                       HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=3)
    return o


def attn_d64_reference(q, k, v, sm_scale=None):
    sm_scale = sm_scale or 1.0 / math.sqrt(q.shape[-1])
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    return torch.softmax(s, -1) @ v.float()


def attn_d64_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=2, H=8, N=1024), size)
    torch.manual_seed(5)
    q, k, v = (torch.randn(s["B"], s["H"], s["N"], 64, device=device).to(torch.float16) for _ in range(3))
    return (q, k, v), {}


# ---------------------------------------------------------------------------------------------
# 7. Attention forward with the softmax scale applied inside the loop and natural exp (as model code
#    often writes it): s = (q @ k^T) * sm_scale; p = exp(s - m). D = 64, 8 warps, BLOCK_M = 128.
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_exp_kernel(Q, K, V, O, stride_bh, stride_n, N_CTX, sm_scale,
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
        k = tl.load(K + base + (start_n + offs_n)[:, None] * stride_n + offs_d[None, :])
        s = tl.dot(q, tl.trans(k)) * sm_scale
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(V + base + (start_n + offs_n)[:, None] * stride_n + offs_d[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    o = acc / l_i[:, None]
    tl.store(O + base + offs_m[:, None] * stride_n + offs_d[None, :], o.to(tl.float16))


def attn_exp_launch(q, k, v, sm_scale=None):
    B, H, N, D = q.shape
    assert D == 64 and N % 128 == 0
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    o = torch.empty_like(q)
    attn_exp_kernel[(N // 128, B * H)](q, k, v, o, q.stride(1), q.stride(2), N, sm_scale,
                                       HEAD_DIM=64, BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2)
    return o


attn_exp_reference = attn_d64_reference


def attn_exp_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=2, H=8, N=1024), size)
    torch.manual_seed(6)
    q, k, v = (torch.randn(s["B"], s["H"], s["N"], 64, device=device).to(torch.float16) for _ in range(3))
    return (q, k, v), {}


# ---------------------------------------------------------------------------------------------
# 8. Attention with an ALiBi bias: s = q k^T * scale - slope_h * |q_pos - k_pos|, slope per head
#    loaded from memory, the positions from the program id and the loop's induction variable.
#    Non-causal (symmetric ALiBi, as encoder models use it). D = 64.
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_alibi_kernel(Q, K, V, O, SLOPES, stride_bh, stride_n, N_CTX, H, sm_scale,
                      HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    slope = tl.load(SLOPES + off_bh % H)
    base = off_bh.to(tl.int64) * stride_bh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * stride_n + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in range(0, N_CTX, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + base + cols[None, :] * stride_n + offs_d[:, None])
        dist = (offs_m[:, None] - cols[None, :]).to(tl.float32)
        s = tl.dot(q, k) * sm_scale - slope * tl.abs(dist)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + cols[:, None] * stride_n + offs_d[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new
    tl.store(O + base + offs_m[:, None] * stride_n + offs_d[None, :], (acc / l_i[:, None]).to(tl.float16))


def attn_alibi_launch(q, k, v, slopes, sm_scale=None):
    B, H, N, D = q.shape
    assert D == 64 and N % 128 == 0 and slopes.shape == (H,)
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    o = torch.empty_like(q)
    attn_alibi_kernel[(N // 128, B * H)](q, k, v, o, slopes, q.stride(1), q.stride(2), N, H, sm_scale,
                                         HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=3)
    return o


def attn_alibi_reference(q, k, v, slopes, sm_scale=None):
    N, D = q.shape[2], q.shape[3]
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    pos = torch.arange(N, device=q.device, dtype=torch.float32)
    dist = (pos[:, None] - pos[None, :]).abs()
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale - slopes.float()[None, :, None, None] * dist
    return torch.softmax(s, -1) @ v.float()


def attn_alibi_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=2, H=8, N=1024), size)
    torch.manual_seed(7)
    q, k, v = (torch.randn(s["B"], s["H"], s["N"], 64, device=device).to(torch.float16) for _ in range(3))
    slopes = torch.tensor([2.0 ** (-8 * (h + 1) / s["H"]) for h in range(s["H"])], device=device)
    return (q, k, v, slopes), {}


# ---------------------------------------------------------------------------------------------
# 9. Attention over keys of a length not a multiple of the block (padding): the last block's keys
#    past N_KV masked with `where(cols < N_KV, s, -inf)`, loads masked too. D = 64.
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_kvlen_kernel(Q, K, V, O, stride_qbh, stride_kbh, stride_n, N_Q, N_KV, sm_scale,
                      HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + bh * stride_qbh + offs_m[:, None] * stride_n + offs_d[None, :])
    qk_scale = sm_scale * 1.44269504
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in range(0, N_KV, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + bh * stride_kbh + cols[None, :] * stride_n + offs_d[:, None], mask=cols[None, :] < N_KV,
                    other=0.0)
        s = tl.dot(q, k)
        s = tl.where(cols[None, :] < N_KV, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
        p = tl.math.exp2(s * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + bh * stride_kbh + cols[:, None] * stride_n + offs_d[None, :], mask=cols[:, None] < N_KV,
                    other=0.0)
        acc = tl.dot(p.to(tl.float16), v, acc * alpha[:, None])
        m_i = m_new
    tl.store(O + bh * stride_qbh + offs_m[:, None] * stride_n + offs_d[None, :], (acc / l_i[:, None]).to(tl.float16))


def attn_kvlen_launch(q, k, v, sm_scale=None):
    B, H, NQ, D = q.shape
    NKV = k.shape[2]
    assert D == 64 and NQ % 128 == 0
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    o = torch.empty_like(q)
    attn_kvlen_kernel[(NQ // 128, B * H)](q, k, v, o, q.stride(1), k.stride(1), q.stride(2), NQ, NKV, sm_scale,
                                          HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=3)
    return o


attn_kvlen_reference = attn_d64_reference


def attn_kvlen_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=2, H=8, NQ=512, NKV=1000), size)
    torch.manual_seed(8)
    q = torch.randn(s["B"], s["H"], s["NQ"], 64, device=device).to(torch.float16)
    k, v = (torch.randn(s["B"], s["H"], s["NKV"], 64, device=device).to(torch.float16) for _ in range(2))
    return (q, k, v), {}


# ---------------------------------------------------------------------------------------------
# 10. Softmax-then-GEMM: Y = softmax(X) @ W with the row statistics (max, sum) of X given (computed by
#     an earlier pass): the loop over K exponentiates each X tile and multiplies it into W.
# ---------------------------------------------------------------------------------------------
@triton.jit
def softmax_gemm_kernel(X, RMAX, RSUM, W, Y, M, N, K, stride_xm, stride_wk, stride_ym,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    row_max = tl.load(RMAX + rm)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k in range(0, K, BLOCK_K):
        x = tl.load(X + rm[:, None] * stride_xm + (k + rk)[None, :]).to(tl.float32)
        p = tl.exp(x - row_max[:, None])
        w = tl.load(W + (k + rk)[:, None] * stride_wk + rn[None, :])
        acc = tl.dot(p.to(tl.float16), w, acc)
    y = acc / tl.load(RSUM + rm)[:, None]
    tl.store(Y + rm[:, None] * stride_ym + rn[None, :], y.to(tl.float16))


def softmax_gemm_launch(x, rmax, rsum, w):
    M, K = x.shape
    _, N = w.shape
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0
    y = torch.empty((M, N), device=x.device, dtype=torch.float16)
    softmax_gemm_kernel[(M // 128, N // 128)](x, rmax, rsum, w, y, M, N, K, x.stride(0), w.stride(0), y.stride(0),
                                              BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3)
    return y


def softmax_gemm_reference(x, rmax, rsum, w):
    return torch.softmax(x.float(), -1) @ w.float()


def softmax_gemm_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=512, N=512, K=1024), size)
    torch.manual_seed(9)
    x = torch.randn(s["M"], s["K"], device=device).to(torch.float16)
    xf = x.float()
    rmax = xf.max(-1).values
    rsum = torch.exp(xf - rmax[:, None]).sum(-1)
    w = torch.randn(s["K"], s["N"], device=device).to(torch.float16)
    return (x, rmax, rsum, w), {}


# ---------------------------------------------------------------------------------------------
# 11. Row statistics without tensor cores: per row of X [M, N], the mean and 1/std over N (a
#     layer norm's first pass), BLOCK_M rows a program, one loop over column blocks, `cols < N`.
# ---------------------------------------------------------------------------------------------
@triton.jit
def row_stats_kernel(X, MEAN, RSTD, M, N, stride_xm, eps, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols0 = tl.arange(0, BLOCK_N)
    s1 = tl.zeros([BLOCK_M], tl.float32)
    s2 = tl.zeros([BLOCK_M], tl.float32)
    for n0 in range(0, N, BLOCK_N):
        cols = n0 + cols0
        x = tl.load(X + rows[:, None] * stride_xm + cols[None, :], mask=cols[None, :] < N, other=0.0).to(tl.float32)
        s1 += tl.sum(x, 1)
        s2 += tl.sum(x * x, 1)
    mean = s1 / N
    var = s2 / N - mean * mean
    tl.store(MEAN + rows, mean)
    tl.store(RSTD + rows, 1.0 / tl.sqrt(var + eps))


def row_stats_launch(x, eps=1e-5):
    M, N = x.shape
    assert M % 64 == 0
    mean = torch.empty(M, device=x.device, dtype=torch.float32)
    rstd = torch.empty(M, device=x.device, dtype=torch.float32)
    row_stats_kernel[(M // 64,)](x, mean, rstd, M, N, x.stride(0), eps, BLOCK_M=64, BLOCK_N=128,
                                 num_warps=4, num_stages=3)
    return mean, rstd


def row_stats_reference(x, eps=1e-5):
    xf = x.float()
    mean = xf.mean(-1)
    var = xf.var(-1, unbiased=False)
    return mean, 1.0 / torch.sqrt(var + eps)


def row_stats_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=1000), size)
    torch.manual_seed(10)
    x = (torch.randn(s["M"], s["N"], device=device) + 0.5).to(torch.float16)
    return (x,), {}


# ---------------------------------------------------------------------------------------------
# 12. Grouped-order GEMM with tensor descriptors (TMA, the Triton 3.x tutorial's host descriptors
#     made in the kernel), bf16, fp32 accumulate, bf16 out, ragged M and N (TMA clips the stores).
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_desc_grouped_kernel(A, B, C, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = tl.swizzle2d(pid // num_pid_n, pid % num_pid_n, num_pid_m, num_pid_n, GROUP_M)
    a_desc = tl.make_tensor_descriptor(A, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(B, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(C, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k in range(0, K, BLOCK_K):
        a = a_desc.load([pid_m * BLOCK_M, k])
        b = b_desc.load([pid_n * BLOCK_N, k])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.bfloat16))


def _tma_scratch(size, alignment, stream):
    return torch.empty(size, device="cuda", dtype=torch.int8)


def gemm_desc_grouped_launch(a, b):
    M, K = a.shape
    N, _ = b.shape
    assert K % 8 == 0 and N % 8 == 0
    triton.set_allocator(_tma_scratch)
    c = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
    gemm_desc_grouped_kernel[grid](a, b, c, M, N, K, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8,
                                   num_warps=4, num_stages=4)
    return c


def gemm_desc_grouped_reference(a, b):
    return a.float() @ b.float().T


def gemm_desc_grouped_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1000, N=1048, K=1024), size)
    torch.manual_seed(11)
    a = (torch.randn(s["M"], s["K"], device=device) * 0.1).to(torch.bfloat16)
    b = (torch.randn(s["N"], s["K"], device=device) * 0.1).to(torch.bfloat16)
    return (a, b), {}


# ---------------------------------------------------------------------------------------------
# Registry and dump specs
# ---------------------------------------------------------------------------------------------
NAMES = ("mm_tutorial", "gemm_silu_residual", "gemm_int8_scaled", "bmm", "linear_f32out", "attn_d64",
         "attn_exp", "attn_alibi", "attn_kvlen", "softmax_gemm", "row_stats", "gemm_desc_grouped")
KERNELS = {}
for _name in NAMES:
    KERNELS[_name] = dict(kernel=globals()[_name + "_kernel"], launch=globals()[_name + "_launch"],
                          reference=globals()[_name + "_reference"],
                          make_inputs=globals()[_name + "_make_inputs"])

_C = "constexpr"
_ATT = dict(Q="*fp16", K="*fp16", V="*fp16", O="*fp16")
DUMPS = {
    "mm_tutorial": dict(
        # the unit strides as the JIT specializes them (an integer argument equal to 1 is a constant)
        signature=dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp16", M="i32", N="i32", K="i32", stride_am="i32",
                       stride_ak=_C, stride_bk="i32", stride_bn=_C, stride_cm="i32", stride_cn=_C,
                       BLOCK_SIZE_M=_C, BLOCK_SIZE_N=_C, BLOCK_SIZE_K=_C, GROUP_SIZE_M=_C),
        constexprs=dict(stride_ak=1, stride_bn=1, stride_cn=1, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64,
                        GROUP_SIZE_M=8),
        divisible_by_16=["a_ptr", "b_ptr", "c_ptr"],
        num_warps=8, num_stages=3),
    "gemm_silu_residual": dict(
        signature=dict(A="*bf16", B="*bf16", R="*bf16", C="*bf16", M="i32", N="i32", K="i32", stride_am="i32",
                       stride_bk="i32", stride_rm="i32", stride_cm="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64),
        divisible_by_16=["A", "B", "R", "C", "M", "N", "K", "stride_am", "stride_bk", "stride_rm", "stride_cm"],
        num_warps=4, num_stages=3),
    "gemm_int8_scaled": dict(
        signature=dict(A="*i8", B="*i8", SA="*fp32", SB="*fp32", C="*fp16", M="i32", N="i32", K="i32",
                       stride_am="i32", stride_bn="i32", stride_cm="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128),
        divisible_by_16=["A", "B", "SA", "SB", "C", "M", "N", "K", "stride_am", "stride_bn", "stride_cm"],
        num_warps=8, num_stages=3),
    "bmm": dict(
        signature=dict(A="*fp16", B="*fp16", C="*fp16", M="i32", N="i32", K="i32", stride_ab="i32",
                       stride_am="i32", stride_bb="i32", stride_bk="i32", stride_cb="i32", stride_cm="i32",
                       BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64),
        divisible_by_16=["A", "B", "C", "M", "N", "K", "stride_ab", "stride_am", "stride_bb", "stride_bk",
                         "stride_cb", "stride_cm"],
        num_warps=4, num_stages=3),
    "linear_f32out": dict(
        signature=dict(X="*fp16", W="*fp16", BIAS="*fp32", Y="*fp32", M="i32", N="i32", K="i32", stride_xm="i32",
                       stride_wn="i32", stride_ym="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64),
        divisible_by_16=["X", "W", "BIAS", "Y", "M", "N", "K", "stride_xm", "stride_wn", "stride_ym"],
        num_warps=8, num_stages=3),
    "attn_d64": dict(
        signature=dict(**_ATT, stride_bh="i32", stride_n="i32", N_CTX="i32", sm_scale="fp32",
                       HEAD_DIM=_C, BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64),
        divisible_by_16=["Q", "K", "V", "O", "stride_bh", "stride_n", "N_CTX"],
        num_warps=4, num_stages=3),
    "attn_exp": dict(
        signature=dict(**_ATT, stride_bh="i32", stride_n="i32", N_CTX="i32", sm_scale="fp32",
                       HEAD_DIM=_C, BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(HEAD_DIM=64, BLOCK_M=128, BLOCK_N=128),
        divisible_by_16=["Q", "K", "V", "O", "stride_bh", "stride_n", "N_CTX"],
        num_warps=8, num_stages=2),
    "attn_alibi": dict(
        signature=dict(**_ATT, SLOPES="*fp32", stride_bh="i32", stride_n="i32", N_CTX="i32", H="i32",
                       sm_scale="fp32", HEAD_DIM=_C, BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64),
        divisible_by_16=["Q", "K", "V", "O", "SLOPES", "stride_bh", "stride_n", "N_CTX"],
        num_warps=4, num_stages=3),
    "attn_kvlen": dict(
        signature=dict(**_ATT, stride_qbh="i32", stride_kbh="i32", stride_n="i32", N_Q="i32", N_KV="i32",
                       sm_scale="fp32", HEAD_DIM=_C, BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64),
        divisible_by_16=["Q", "K", "V", "O", "stride_qbh", "stride_kbh", "stride_n", "N_Q"],
        num_warps=4, num_stages=3),
    "softmax_gemm": dict(
        signature=dict(X="*fp16", RMAX="*fp32", RSUM="*fp32", W="*fp16", Y="*fp16", M="i32", N="i32", K="i32",
                       stride_xm="i32", stride_wk="i32", stride_ym="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64),
        divisible_by_16=["X", "RMAX", "RSUM", "W", "Y", "M", "N", "K", "stride_xm", "stride_wk", "stride_ym"],
        num_warps=8, num_stages=3),
    "row_stats": dict(
        signature=dict(X="*fp16", MEAN="*fp32", RSTD="*fp32", M="i32", N="i32", stride_xm="i32", eps="fp32",
                       BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(BLOCK_M=64, BLOCK_N=128),
        divisible_by_16=["X", "MEAN", "RSTD", "M"],
        num_warps=4, num_stages=3),
    "gemm_desc_grouped": dict(
        signature=dict(A="*bf16", B="*bf16", C="*bf16", M="i32", N="i32", K="i32",
                       BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C, GROUP_M=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8),
        divisible_by_16=["A", "B", "C", "K"],
        num_warps=4, num_stages=4),
}
for _name, _spec in DUMPS.items():
    _spec["kernel"] = KERNELS[_name]["kernel"]
