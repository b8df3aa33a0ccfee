"""Held-out Triton kernels, eleventh batch: forms users write that batches 1-10 did not cover, none tuned for twill:

- a bf16 GEMM with masks on all three edges (M, N and the K tail: `offs_k < K - k * BLOCK_K`), a bias a column
  and ReLU, stored bf16 under the M/N mask;
- baddbmm: out[b] = alpha * A[b] @ B[b] + beta * C[b], the batch on grid axis 0 and the tiles on axes 1 and 2,
  every tensor through its own three strides; fp16;
- W8A8: an int8 GEMM (int32 accumulator) with masks on M, N and K, a scale a row (per token) and a scale a column
  (per channel), a bias, bf16 out;
- nn.Linear written `tl.dot(x, w.T)` of a [BLOCK_N, BLOCK_K] tile of the [N, K] weight, masked, a bias, fp16 out;
- softmax with a temperature argument (softmax(x / T)), one program a row;
- the SwiGLU backward (Liger's `_swiglu_backward_kernel`, two gradients a row, separate outputs);
- a running sum along each row (`tl.cumsum`);
- a row's argmax (`tl.argmax`, int32 out);
- Megatron's scaled upper-triangular masked softmax: the row index from the program id masks the columns past it;
- an attention forward with a key-padding length a batch read from a tensor (the loop bound is a loaded value);
- per-token int8 quantization: scale = max|x| / 127 a row, q = round(x / scale) stored int8, the scale stored.

Protocol for every kernel NAME (KERNELS at the bottom), as kernels.py:
    tensors, params = NAME_make_inputs(size, device)   # size: dict of overrides or None
    out = NAME_launch(*tensors, **params)                # runs the Triton kernel
    ref = NAME_reference(*tensors, **params)             # plain torch, fp32
DUMPS[NAME] holds what gen.py compiles the TTGIR dumps with (`gen.py --module kernels11`).
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
# 1. bf16 GEMM, masks on M, N and K, a bias a column, ReLU.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_bias_relu_kmask_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                                stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
    acc = tl.maximum(acc + bias[None, :], 0.0)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.bfloat16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def gemm_bias_relu_kmask_launch(a, b, bias):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    grid = (triton.cdiv(M, 128), triton.cdiv(N, 128))
    gemm_bias_relu_kmask_kernel[grid](a, b, bias, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                      c.stride(0), c.stride(1), BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8,
                                      num_stages=3)
    return c


def gemm_bias_relu_kmask_reference(a, b, bias):
    return torch.relu(a.float() @ b.float() + bias.float()[None, :])


def gemm_bias_relu_kmask_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1000, N=1200, K=1000), size)
    torch.manual_seed(111)
    a = torch.randn(s["M"], s["K"], device=device).to(torch.bfloat16)
    b = torch.randn(s["K"], s["N"], device=device).to(torch.bfloat16)
    bias = torch.randn(s["N"], device=device).to(torch.bfloat16)
    return (a, b, bias), {}


# ---------------------------------------------------------------------------------------------
# 2. baddbmm: out[b] = alpha * A[b] @ B[b] + beta * C[b]; the batch on grid axis 0.
# ---------------------------------------------------------------------------------------------
@triton.jit
def baddbmm_kernel(A, B, C, OUT, M, N, K, alpha, beta, stride_ab, stride_am, stride_ak, stride_bb, stride_bk,
                   stride_bn, stride_cb, stride_cm, stride_cn, stride_ob, stride_om, stride_on,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    bid = tl.program_id(0).to(tl.int64)
    pid_m = tl.program_id(1)
    pid_n = tl.program_id(2)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = A + bid * stride_ab + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = B + bid * stride_bb + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = tl.load(C + bid * stride_cb + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn).to(tl.float32)
    out = alpha * acc + beta * c
    tl.store(OUT + bid * stride_ob + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on, out.to(tl.float16))


def baddbmm_launch(c, a, b, alpha=0.5, beta=2.0):
    Bt, M, K = a.shape
    N = b.shape[2]
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0
    out = torch.empty((Bt, M, N), device=a.device, dtype=torch.float16)
    baddbmm_kernel[(Bt, M // 128, N // 128)](a, b, c, out, M, N, K, alpha, beta, *a.stride(), *b.stride(),
                                             *c.stride(), *out.stride(), BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
                                             num_warps=4, num_stages=3)
    return out


def baddbmm_reference(c, a, b, alpha=0.5, beta=2.0):
    return alpha * (a.float() @ b.float()) + beta * c.float()


def baddbmm_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(BATCH=8, M=512, N=512, K=512), size)
    torch.manual_seed(112)
    a = torch.randn(s["BATCH"], s["M"], s["K"], device=device).to(torch.float16)
    b = torch.randn(s["BATCH"], s["K"], s["N"], device=device).to(torch.float16)
    c = torch.randn(s["BATCH"], s["M"], s["N"], device=device).to(torch.float16)
    return (c, a, b), dict(alpha=0.5, beta=2.0)


# ---------------------------------------------------------------------------------------------
# 3. W8A8: int8 x int8 -> int32, masks on M, N and K; per-token and per-channel scales, a bias, bf16 out.
#    B is the [N, K] weight (nn.Linear), read as [BLOCK_K, BLOCK_N] through its strides.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_w8a8_bias_kernel(A, B, SCALE_A, SCALE_B, BIAS, C, M, N, K, stride_am, stride_bn, stride_cm,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = A + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = B + offs_n[None, :] * stride_bn + offs_k[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K - k * BLOCK_K), other=0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k * BLOCK_K) & (offs_n[None, :] < N), other=0)
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    sa = tl.load(SCALE_A + offs_m, mask=offs_m < M, other=0.0)
    sb = tl.load(SCALE_B + offs_n, mask=offs_n < N, other=0.0)
    bias = tl.load(BIAS + offs_n, mask=offs_n < N, other=0.0)
    y = acc.to(tl.float32) * sa[:, None] * sb[None, :] + bias[None, :]
    tl.store(C + offs_m[:, None] * stride_cm + offs_n[None, :], y.to(tl.bfloat16),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def gemm_w8a8_bias_launch(a, b, sa, sb, bias):
    M, K = a.shape
    N = b.shape[0]
    c = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    grid = (triton.cdiv(M, 128), triton.cdiv(N, 128))
    gemm_w8a8_bias_kernel[grid](a, b, sa, sb, bias, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                                BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, num_warps=8, num_stages=3)
    return c


def gemm_w8a8_bias_reference(a, b, sa, sb, bias):
    return ((a.double() @ b.double().T) * sa.double()[:, None] * sb.double()[None, :] + bias.double()[None, :]).float()


def gemm_w8a8_bias_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1000, N=1536, K=1040), size)
    torch.manual_seed(113)
    a = torch.randint(-127, 128, (s["M"], s["K"]), device=device, dtype=torch.int8)
    b = torch.randint(-127, 128, (s["N"], s["K"]), device=device, dtype=torch.int8)
    sa = torch.rand(s["M"], device=device) * 1e-3
    sb = torch.rand(s["N"], device=device) * 1e-3
    bias = torch.randn(s["N"], device=device)
    return (a, b, sa, sb, bias), {}


# ---------------------------------------------------------------------------------------------
# 4. nn.Linear as users write it: y = x @ w.T + b, w [N, K] read as [BLOCK_N, BLOCK_K] tiles, `tl.dot(x, w.T)`.
# ---------------------------------------------------------------------------------------------
@triton.jit
def linear_wt_kernel(X, W, BIAS, Y, M, N, K, stride_xm, stride_wn, stride_ym,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        x = tl.load(X + offs_m[:, None] * stride_xm + (k0 + offs_k)[None, :],
                    mask=(offs_m[:, None] < M) & ((k0 + offs_k)[None, :] < K), other=0.0)
        w = tl.load(W + offs_n[:, None] * stride_wn + (k0 + offs_k)[None, :],
                    mask=(offs_n[:, None] < N) & ((k0 + offs_k)[None, :] < K), other=0.0)
        acc += tl.dot(x, w.T)
    bias = tl.load(BIAS + offs_n, mask=offs_n < N, other=0.0)
    y = acc + bias[None, :].to(tl.float32)
    tl.store(Y + offs_m[:, None] * stride_ym + offs_n[None, :], y.to(tl.float16),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def linear_wt_launch(x, w, bias):
    M, K = x.shape
    N = w.shape[0]
    y = torch.empty((M, N), device=x.device, dtype=torch.float16)
    grid = (triton.cdiv(M, 128), triton.cdiv(N, 128))
    linear_wt_kernel[grid](x, w, bias, y, M, N, K, x.stride(0), w.stride(0), y.stride(0), BLOCK_M=128,
                           BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3)
    return y


def linear_wt_reference(x, w, bias):
    return x.float() @ w.float().T + bias.float()[None, :]


def linear_wt_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1000, N=1536, K=1024), size)
    torch.manual_seed(114)
    x = torch.randn(s["M"], s["K"], device=device).to(torch.float16)
    w = (torch.randn(s["N"], s["K"], device=device) / 32).to(torch.float16)
    bias = torch.randn(s["N"], device=device).to(torch.float16)
    return (x, w, bias), {}


# ---------------------------------------------------------------------------------------------
# 5. softmax(x / temperature), one program a row, the row whole in one block.
# ---------------------------------------------------------------------------------------------
@triton.jit
def softmax_temp_kernel(Y, X, stride_y, stride_x, n_cols, temperature, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x / temperature
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    y = num / tl.sum(num, axis=0)
    tl.store(Y + row * stride_y + cols, y.to(tl.float16), mask=mask)


def softmax_temp_launch(x, temperature=0.7):
    M, N = x.shape
    y = torch.empty_like(x)
    softmax_temp_kernel[(M,)](y, x, y.stride(0), x.stride(0), N, temperature,
                              BLOCK_SIZE=triton.next_power_of_2(N), num_warps=8)
    return y


def softmax_temp_reference(x, temperature=0.7):
    return torch.softmax(x.float() / temperature, dim=-1)


def softmax_temp_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=3000), size)
    torch.manual_seed(115)
    return (torch.randn(s["M"], s["N"], device=device).to(torch.float16),), dict(temperature=0.7)


# ---------------------------------------------------------------------------------------------
# 6. SwiGLU backward (Liger's _swiglu_backward_kernel, separate outputs): c = silu(a) * b;
#    da = dc * b * sig(a) * (1 + a * (1 - sig(a))), db = dc * silu(a). One program a row.
# ---------------------------------------------------------------------------------------------
@triton.jit
def swiglu_bwd_kernel(dc_ptr, a_ptr, b_ptr, da_ptr, db_ptr, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    dc_ptr += program_id * stride
    a_ptr += program_id * stride
    b_ptr += program_id * stride
    da_ptr += program_id * stride
    db_ptr += program_id * stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    dc_row = tl.load(dc_ptr + col_offsets, mask=mask, other=0)
    a_row = tl.load(a_ptr + col_offsets, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b_ptr + col_offsets, mask=mask, other=0)
    sig_a = tl.sigmoid(a_row)
    silu_a = a_row * sig_a
    db_row = dc_row * silu_a
    da_row = dc_row * (silu_a * (1 - sig_a) + sig_a) * b_row
    tl.store(da_ptr + col_offsets, da_row.to(tl.bfloat16), mask=mask)
    tl.store(db_ptr + col_offsets, db_row.to(tl.bfloat16), mask=mask)


def swiglu_bwd_launch(dc, a, b):
    M, N = a.shape
    da, db = torch.empty_like(a), torch.empty_like(b)
    swiglu_bwd_kernel[(M,)](dc, a, b, da, db, a.stride(0), n_cols=N, BLOCK_SIZE=triton.next_power_of_2(N),
                            num_warps=8)
    return da, db


def swiglu_bwd_reference(dc, a, b):
    a, b, dc = a.float(), b.float(), dc.float()
    s = torch.sigmoid(a)
    return dc * b * s * (1 + a * (1 - s)), dc * a * s


def swiglu_bwd_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=2048, N=4096), size)
    torch.manual_seed(116)
    dc, a, b = (torch.randn(s["M"], s["N"], device=device).to(torch.bfloat16) for _ in range(3))
    return (dc, a, b), {}


# ---------------------------------------------------------------------------------------------
# 7. A running sum along each row: tl.cumsum, fp32 out.
# ---------------------------------------------------------------------------------------------
@triton.jit
def cumsum_rows_kernel(X, Y, stride_x, stride_y, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    y = tl.cumsum(x, axis=0)
    tl.store(Y + row * stride_y + cols, y, mask=mask)


def cumsum_rows_launch(x):
    M, N = x.shape
    y = torch.empty((M, N), device=x.device, dtype=torch.float32)
    cumsum_rows_kernel[(M,)](x, y, x.stride(0), y.stride(0), N, BLOCK_SIZE=triton.next_power_of_2(N), num_warps=4)
    return y


def cumsum_rows_reference(x):
    return torch.cumsum(x.float(), dim=-1)


def cumsum_rows_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=1000), size)
    torch.manual_seed(117)
    return (torch.randn(s["M"], s["N"], device=device).to(torch.float16),), {}


# ---------------------------------------------------------------------------------------------
# 8. A row's argmax (greedy sampling): tl.argmax, int32 out.
# ---------------------------------------------------------------------------------------------
@triton.jit
def argmax_rows_kernel(X, OUT, stride_x, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(X + row * stride_x + cols, mask=cols < n_cols, other=-float("inf"))
    idx = tl.argmax(x, axis=0)
    tl.store(OUT + row, idx.to(tl.int32))


def argmax_rows_launch(x):
    M, N = x.shape
    out = torch.empty((M,), device=x.device, dtype=torch.int32)
    argmax_rows_kernel[(M,)](x, out, x.stride(0), N, BLOCK_SIZE=triton.next_power_of_2(N), num_warps=8)
    return out


def argmax_rows_reference(x):
    return torch.argmax(x.float(), dim=-1).to(torch.int32)


def argmax_rows_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=32000), size)
    torch.manual_seed(118)
    return (torch.randn(s["M"], s["N"], device=device),), {}


# ---------------------------------------------------------------------------------------------
# 9. Megatron's scaled upper-triangular masked softmax: x [B * S, S] attention scores, y = softmax(scale * x) over
#    the columns <= the row's position in its sequence (the rest 0).
# ---------------------------------------------------------------------------------------------
@triton.jit
def causal_softmax_kernel(Y, X, stride, seq_len, scale, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    pos = row % seq_len
    cols = tl.arange(0, BLOCK_SIZE)
    keep = cols <= pos
    x = tl.load(X + row * stride + cols, mask=cols < seq_len, other=0.0).to(tl.float32)
    x = tl.where(keep, x * scale, -float("inf"))
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    y = num / tl.sum(num, axis=0)
    tl.store(Y + row * stride + cols, y.to(tl.float16), mask=cols < seq_len)


def causal_softmax_launch(x, scale=0.125):
    R, S = x.shape
    y = torch.empty_like(x)
    causal_softmax_kernel[(R,)](y, x, x.stride(0), S, scale, BLOCK_SIZE=triton.next_power_of_2(S), num_warps=8)
    return y


def causal_softmax_reference(x, scale=0.125):
    R, S = x.shape
    pos = torch.arange(R, device=x.device) % S
    keep = torch.arange(S, device=x.device)[None, :] <= pos[:, None]
    return torch.softmax((x.float() * scale).masked_fill(~keep, float("-inf")), dim=-1)


def causal_softmax_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=32, S=2048), size)
    torch.manual_seed(119)
    return (torch.randn(s["B"] * s["S"], s["S"], device=device).to(torch.float16),), dict(scale=0.125)


# ---------------------------------------------------------------------------------------------
# 10. Attention forward with a key-padding length a batch (HF's attention_mask as lengths): the loop runs to the
#     batch's length, read from a tensor; the last block masked past it. fp16, head dim 64.
# ---------------------------------------------------------------------------------------------
@triton.jit
def attn_kpad_kernel(Q, K, V, O, LENS, stride_qb, stride_qh, stride_qn, H, N_CTX, sm_scale,
                     HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    kv_len = tl.load(LENS + b)
    base = b.to(tl.int64) * stride_qb + h.to(tl.int64) * stride_qh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * stride_qn + offs_d[None, :])
    qk_scale = sm_scale * 1.44269504
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in range(0, kv_len, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + base + cols[None, :] * stride_qn + offs_d[:, None], mask=cols[None, :] < kv_len, other=0.0)
        s = tl.dot(q, k) * qk_scale
        s = tl.where(cols[None, :] < kv_len, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + cols[:, None] * stride_qn + offs_d[None, :], mask=cols[:, None] < kv_len, other=0.0)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_new
    tl.store(O + base + offs_m[:, None] * stride_qn + offs_d[None, :], (acc / l_i[:, None]).to(tl.float16))


def attn_kpad_launch(q, k, v, lens, sm_scale=None):
    B, H, N, D = q.shape
    assert D == 64 and N % 128 == 0 and int(lens.min()) > 0
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    o = torch.empty_like(q)
    attn_kpad_kernel[(N // 128, B * H)](q, k, v, o, lens, q.stride(0), q.stride(1), q.stride(2), H, N, sm_scale,
                                        HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=3)
    return o


def attn_kpad_reference(q, k, v, lens, sm_scale=None):
    D = q.shape[-1]
    sm_scale = sm_scale or 1.0 / math.sqrt(D)
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    keep = torch.arange(k.shape[2], device=q.device)[None, :] < lens.long()[:, None]
    s = s.masked_fill(~keep[:, None, None, :], float("-inf"))
    return torch.softmax(s, -1) @ v.float()


def attn_kpad_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=4, H=8, N=1024), size)
    torch.manual_seed(120)
    q, k, v = (torch.randn(s["B"], s["H"], s["N"], 64, device=device).to(torch.float16) for _ in range(3))
    lens = torch.randint(1, s["N"] + 1, (s["B"],), device=device, dtype=torch.int32)
    lens[0] = s["N"]
    return (q, k, v, lens), {}


# ---------------------------------------------------------------------------------------------
# 11. Per-token int8 quantization (vLLM's dynamic per-token quant): scale = max|x| / 127 a row, q = round(x / scale).
# ---------------------------------------------------------------------------------------------
@triton.jit
def quant_int8_rows_kernel(X, Q, SCALE, stride_x, stride_q, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    absmax = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-10)
    scale = absmax / 127.0
    y = x / scale
    y = tl.where(y >= 0, tl.floor(y + 0.5), tl.ceil(y - 0.5))
    tl.store(Q + row * stride_q + cols, y.to(tl.int8), mask=mask)
    tl.store(SCALE + row, scale)


def quant_int8_rows_launch(x):
    M, N = x.shape
    q = torch.empty((M, N), device=x.device, dtype=torch.int8)
    scale = torch.empty((M,), device=x.device, dtype=torch.float32)
    quant_int8_rows_kernel[(M,)](x, q, scale, x.stride(0), q.stride(0), N, BLOCK_SIZE=triton.next_power_of_2(N),
                                 num_warps=8)
    return q, scale


def quant_int8_rows_reference(x):
    x = x.float()
    scale = x.abs().amax(-1).clamp(min=1e-10) / 127.0
    y = x / scale[:, None]
    return torch.where(y >= 0, torch.floor(y + 0.5), torch.ceil(y - 0.5)), scale


def quant_int8_rows_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=4096), size)
    torch.manual_seed(121)
    return (torch.randn(s["M"], s["N"], device=device).to(torch.bfloat16),), {}


NAMES = ("gemm_bias_relu_kmask", "baddbmm", "gemm_w8a8_bias", "linear_wt", "softmax_temp", "swiglu_bwd",
         "cumsum_rows", "argmax_rows", "causal_softmax", "attn_kpad", "quant_int8_rows")
KERNELS = {}
for _name in NAMES:
    KERNELS[_name] = dict(kernel=globals()[_name + "_kernel"], launch=globals()[_name + "_launch"],
                          reference=globals()[_name + "_reference"],
                          make_inputs=globals()[_name + "_make_inputs"])

_C = "constexpr"
_GEMM = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64)
DUMPS = {
    "gemm_bias_relu_kmask": dict(
        signature=dict(a_ptr="*bf16", b_ptr="*bf16", bias_ptr="*bf16", c_ptr="*bf16", M="i32", N="i32", K="i32",
                       stride_am="i32", stride_ak=_C, stride_bk="i32", stride_bn=_C, stride_cm="i32",
                       stride_cn=_C, BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(_GEMM, stride_ak=1, stride_bn=1, stride_cn=1),
        divisible_by_16=["a_ptr", "b_ptr", "bias_ptr", "c_ptr", "stride_am", "stride_bk", "stride_cm"],
        num_warps=8, num_stages=3),
    "baddbmm": dict(
        signature=dict(A="*fp16", B="*fp16", C="*fp16", OUT="*fp16", M="i32", N="i32", K="i32", alpha="fp32",
                       beta="fp32", stride_ab="i32", stride_am="i32", stride_ak=_C, stride_bb="i32",
                       stride_bk="i32", stride_bn=_C, stride_cb="i32", stride_cm="i32", stride_cn=_C,
                       stride_ob="i32", stride_om="i32", stride_on=_C, BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(_GEMM, stride_ak=1, stride_bn=1, stride_cn=1, stride_on=1),
        divisible_by_16=["A", "B", "C", "OUT", "M", "N", "K", "stride_ab", "stride_am", "stride_bb", "stride_bk",
                         "stride_cb", "stride_cm", "stride_ob", "stride_om"],
        num_warps=4, num_stages=3),
    "gemm_w8a8_bias": dict(
        signature=dict(A="*i8", B="*i8", SCALE_A="*fp32", SCALE_B="*fp32", BIAS="*fp32", C="*bf16", M="i32",
                       N="i32", K="i32", stride_am="i32", stride_bn="i32", stride_cm="i32", BLOCK_M=_C, BLOCK_N=_C,
                       BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128),
        divisible_by_16=["A", "B", "SCALE_A", "SCALE_B", "BIAS", "C", "stride_am", "stride_bn", "stride_cm"],
        num_warps=8, num_stages=3),
    "linear_wt": dict(
        signature=dict(X="*fp16", W="*fp16", BIAS="*fp16", Y="*fp16", M="i32", N="i32", K="i32", stride_xm="i32",
                       stride_wn="i32", stride_ym="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(_GEMM),
        divisible_by_16=["X", "W", "BIAS", "Y", "K", "stride_xm", "stride_wn", "stride_ym"], num_warps=8,
        num_stages=3),
    "softmax_temp": dict(
        signature=dict(Y="*fp16", X="*fp16", stride_y="i32", stride_x="i32", n_cols="i32", temperature="fp32",
                       BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=4096),
        divisible_by_16=["Y", "X", "stride_y", "stride_x"], num_warps=8, num_stages=3),
    "swiglu_bwd": dict(
        signature=dict(dc_ptr="*bf16", a_ptr="*bf16", b_ptr="*bf16", da_ptr="*bf16", db_ptr="*bf16", stride="i32",
                       n_cols=_C, BLOCK_SIZE=_C),
        constexprs=dict(n_cols=4096, BLOCK_SIZE=4096),
        divisible_by_16=["dc_ptr", "a_ptr", "b_ptr", "da_ptr", "db_ptr", "stride"], num_warps=8, num_stages=3),
    "cumsum_rows": dict(
        signature=dict(X="*fp16", Y="*fp32", stride_x="i32", stride_y="i32", n_cols="i32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=1024),
        divisible_by_16=["X", "Y", "stride_x", "stride_y"], num_warps=4, num_stages=3),
    "argmax_rows": dict(
        signature=dict(X="*fp32", OUT="*i32", stride_x="i32", n_cols="i32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=32768),
        divisible_by_16=["X", "OUT", "stride_x", "n_cols"], num_warps=8, num_stages=3),
    "causal_softmax": dict(
        signature=dict(Y="*fp16", X="*fp16", stride="i32", seq_len="i32", scale="fp32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=2048),
        divisible_by_16=["Y", "X", "stride", "seq_len"], num_warps=8, num_stages=3),
    "attn_kpad": dict(
        signature=dict(Q="*fp16", K="*fp16", V="*fp16", O="*fp16", LENS="*i32", stride_qb="i32", stride_qh="i32",
                       stride_qn="i32", H="i32", N_CTX="i32", sm_scale="fp32", HEAD_DIM=_C, BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64),
        divisible_by_16=["Q", "K", "V", "O", "LENS", "stride_qb", "stride_qh", "stride_qn", "N_CTX"], num_warps=4,
        num_stages=3),
    "quant_int8_rows": dict(
        signature=dict(X="*bf16", Q="*i8", SCALE="*fp32", stride_x="i32", stride_q="i32", n_cols="i32",
                       BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=4096),
        divisible_by_16=["X", "Q", "SCALE", "stride_x", "stride_q", "n_cols"], num_warps=8, num_stages=3),
}
for _name, _spec in DUMPS.items():
    _spec["kernel"] = KERNELS[_name]["kernel"]
