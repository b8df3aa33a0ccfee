"""Held-out Triton kernels, thirteenth batch: forms users write that batches 1-12 did not cover, none tuned for twill:

- a bf16 GEMM with a bias and Mish (`x * tanh(softplus(x))`, softplus with torch's threshold 20 written through
  libdevice's log1p), torch-inductor style;
- an fp16 GEMM with the K tail masked and hardswish (`x * min(max(x + 3, 0), 6) / 6`);
- an fp16 GEMM with a per-row scale, a residual add and `tl.clamp(v, -clip, clip)`, stored bf16 (a quantized
  linear's epilogue, vLLM style);
- the sum of two GEMMs in one K loop, `A @ B + C @ D` into one accumulator (a fused gate of two inputs);
- a batched GEMM with the matmul tutorial's grouped launch order (`GROUP_SIZE_M`) on grid axis 0 and the batch on
  axis 1, masked on M and N;
- ReGLU forward (`relu(a) * b`), one program a row with a loop over column blocks (Liger's SwiGLU written as a loop);
- Liger's Jensen-Shannon divergence (`_jsd_kernel`, beta-mixed, log-probability inputs, the element's loss and
  dX stored), one row a program, a loop over column blocks, `other=-inf`;
- a Huber (smooth-L1) row loss, the row's mean stored, a loop over column blocks;
- Welford's one-pass mean and variance of a row, torch-inductor style: [XBLOCK, RBLOCK] running (mean, m2, weight)
  updated element by element, combined with `tl.reduce` of a three-value Welford combiner;
- GroupNorm's forward: one program a (sample, group), the group's channels x HW as one flat loop, then a loop that
  normalizes with the channel's weight and bias (`offs // HW`);
- residual add + RMSNorm with two outputs (the residual sum stored to its own tensor), a loop over the row's column
  blocks, the second loop recomputing `x + r` (Apex / vLLM's fused_add_rms_norm over a long row);
- the cosine similarity of two rows (three running sums, `dot / max(|x| |y|, eps)`), a loop over column blocks.

Protocol for every kernel NAME (KERNELS at the bottom), as kernels.py:
    tensors, params = NAME_make_inputs(size, device)   # size: dict of overrides or None
    out = NAME_launch(*tensors, **params)                # runs the Triton kernel
    ref = NAME_reference(*tensors, **params)             # plain torch, fp32
DUMPS[NAME] holds what gen.py compiles the TTGIR dumps with (`gen.py --module kernels13`).
"""
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
# 1. bf16 GEMM + bias + Mish, softplus with a threshold of 20 through libdevice.log1p (inductor's form).
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_mish_kernel(A, B, BIAS, C, M, N, K, stride_am, stride_bk, stride_cm,
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
    x = acc + tl.load(BIAS + offs_n).to(tl.float32)[None, :]
    sp = tl.where(x > 20.0, x, libdevice.log1p(tl.exp(x)))
    y = x * libdevice.tanh(sp)
    tl.store(C + offs_m[:, None] * stride_cm + offs_n[None, :], y.to(tl.bfloat16))


def gemm_mish_launch(a, b, bias):
    M, K = a.shape
    N = b.shape[1]
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0
    c = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    gemm_mish_kernel[(M // 128, N // 128)](a, b, bias, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                                           BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3)
    return c


def gemm_mish_reference(a, b, bias):
    x = a.float() @ b.float() + bias.float()[None, :]
    return torch.nn.functional.mish(x)


def gemm_mish_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=2048, N=2048, K=1024), size)
    torch.manual_seed(131)
    a = (torch.randn(s["M"], s["K"], device=device) / 8).to(torch.bfloat16)
    b = torch.randn(s["K"], s["N"], device=device).to(torch.bfloat16)
    bias = torch.randn(s["N"], device=device).to(torch.bfloat16)
    return (a, b, bias), {}


# ---------------------------------------------------------------------------------------------
# 2. fp16 GEMM, the K tail masked, hardswish epilogue.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_hardswish_kernel(A, B, C, M, N, K, stride_am, stride_bk, stride_cm,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + offs_k
        a = tl.load(A + offs_m[:, None] * stride_am + kk[None, :], mask=kk[None, :] < K, other=0.0)
        b = tl.load(B + kk[:, None] * stride_bk + offs_n[None, :], mask=kk[:, None] < K, other=0.0)
        acc = tl.dot(a, b, acc)
    y = acc * tl.minimum(tl.maximum(acc + 3.0, 0.0), 6.0) / 6.0
    tl.store(C + offs_m[:, None] * stride_cm + offs_n[None, :], y.to(tl.float16))


def gemm_hardswish_launch(a, b):
    M, K = a.shape
    N = b.shape[1]
    assert M % 128 == 0 and N % 128 == 0
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    gemm_hardswish_kernel[(M // 128, N // 128)](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                                                BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3)
    return c


def gemm_hardswish_reference(a, b):
    return torch.nn.functional.hardswish(a.float() @ b.float())


def gemm_hardswish_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=2048, N=2048, K=1000), size)
    torch.manual_seed(132)
    a = (torch.randn(s["M"], s["K"], device=device) / 8).to(torch.float16)
    b = torch.randn(s["K"], s["N"], device=device).to(torch.float16)
    return (a, b), {}


# ---------------------------------------------------------------------------------------------
# 3. fp16 GEMM, acc * row_scale[:, None] + residual, tl.clamp(-clip, clip), bf16 out.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_scale_res_clamp_kernel(A, B, SCALE, R, C, M, N, K, stride_am, stride_bk, stride_rm, stride_cm, clip,
                                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(A + rm[:, None] * stride_am + (k + rk)[None, :])
        b = tl.load(B + (k + rk)[:, None] * stride_bk + rn[None, :])
        acc += tl.dot(a, b)
    scale = tl.load(SCALE + rm)
    r = tl.load(R + rm[:, None] * stride_rm + rn[None, :]).to(tl.float32)
    out = acc * scale[:, None] + r
    out = tl.clamp(out, -clip, clip)
    tl.store(C + rm[:, None] * stride_cm + rn[None, :], out.to(tl.bfloat16))


def gemm_scale_res_clamp_launch(a, b, scale, r, clip=4.0):
    M, K = a.shape
    N = b.shape[1]
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0
    c = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    gemm_scale_res_clamp_kernel[(M // 128, N // 128)](a, b, scale, r, c, M, N, K, a.stride(0), b.stride(0),
                                                      r.stride(0), c.stride(0), clip, BLOCK_M=128, BLOCK_N=128,
                                                      BLOCK_K=64, num_warps=8, num_stages=3)
    return c


def gemm_scale_res_clamp_reference(a, b, scale, r, clip=4.0):
    return torch.clamp((a.float() @ b.float()) * scale.float()[:, None] + r.float(), -clip, clip)


def gemm_scale_res_clamp_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=2048, N=2048, K=1024), size)
    torch.manual_seed(133)
    a = (torch.randn(s["M"], s["K"], device=device) / 8).to(torch.float16)
    b = torch.randn(s["K"], s["N"], device=device).to(torch.float16)
    scale = torch.rand(s["M"], device=device) + 0.5
    r = torch.randn(s["M"], s["N"], device=device).to(torch.float16)
    return (a, b, scale, r), dict(clip=4.0)


# ---------------------------------------------------------------------------------------------
# 4. A @ B + C @ D in one K loop, one accumulator, fp16 in and out.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gemm_sum2_kernel(A, B, Cm, D, OUT, M, N, K, stride_am, stride_bk, stride_cm, stride_dk, stride_om,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(A + offs_m[:, None] * stride_am + (k + offs_k)[None, :])
        b = tl.load(B + (k + offs_k)[:, None] * stride_bk + offs_n[None, :])
        c = tl.load(Cm + offs_m[:, None] * stride_cm + (k + offs_k)[None, :])
        d = tl.load(D + (k + offs_k)[:, None] * stride_dk + offs_n[None, :])
        acc = tl.dot(a, b, acc)
        acc = tl.dot(c, d, acc)
    tl.store(OUT + offs_m[:, None] * stride_om + offs_n[None, :], acc.to(tl.float16))


def gemm_sum2_launch(a, b, c, d):
    M, K = a.shape
    N = b.shape[1]
    assert M % 128 == 0 and N % 128 == 0 and K % 64 == 0
    out = torch.empty((M, N), device=a.device, dtype=torch.float16)
    gemm_sum2_kernel[(M // 128, N // 128)](a, b, c, d, out, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                                           d.stride(0), out.stride(0), BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
                                           num_warps=8, num_stages=3)
    return out


def gemm_sum2_reference(a, b, c, d):
    return a.float() @ b.float() + c.float() @ d.float()


def gemm_sum2_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=2048, N=2048, K=1024), size)
    torch.manual_seed(134)
    t = [(torch.randn(*shape, device=device) / 8).to(torch.float16)
         for shape in ((s["M"], s["K"]), (s["K"], s["N"]), (s["M"], s["K"]), (s["K"], s["N"]))]
    return tuple(t), {}


# ---------------------------------------------------------------------------------------------
# 5. Batched GEMM with the tutorial's grouped launch order on axis 0 and the batch on axis 1, masked on M and N.
# ---------------------------------------------------------------------------------------------
@triton.jit
def bmm_grouped_kernel(A, B, C, M, N, K, stride_ab, stride_am, stride_bb, stride_bk, stride_cb, stride_cm,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(0)
    bid = tl.program_id(1)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = A + bid * stride_ab + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = B + bid * stride_bb + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_m[:, None] < M, other=0.0)
        b = tl.load(b_ptrs, mask=offs_n[None, :] < N, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = C + bid * stride_cb + offs_m[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(tl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def bmm_grouped_launch(a, b):
    Bt, M, K = a.shape
    N = b.shape[2]
    assert K % 64 == 0
    c = torch.empty((Bt, M, N), device=a.device, dtype=torch.float16)
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128), Bt)
    bmm_grouped_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                             c.stride(1), BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_SIZE_M=8, num_warps=8,
                             num_stages=3)
    return c


def bmm_grouped_reference(a, b):
    return a.float() @ b.float()


def bmm_grouped_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=4, M=1000, N=1100, K=512), size)
    torch.manual_seed(135)
    a = (torch.randn(s["B"], s["M"], s["K"], device=device) / 8).to(torch.float16)
    b = torch.randn(s["B"], s["K"], s["N"], device=device).to(torch.float16)
    return (a, b), {}


# ---------------------------------------------------------------------------------------------
# 6. ReGLU forward, relu(a) * b, one program a row, a loop over column blocks. bf16.
# ---------------------------------------------------------------------------------------------
@triton.jit
def reglu_fwd_kernel(a_ptr, b_ptr, c_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    a_ptr += row * stride
    b_ptr += row * stride
    c_ptr += row * stride
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        a = tl.load(a_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0)
        c = tl.maximum(a, 0.0).to(b.dtype) * b
        tl.store(c_ptr + cols, c, mask=mask)


def reglu_fwd_launch(a, b):
    m, n = a.shape
    c = torch.empty_like(a)
    reglu_fwd_kernel[(m,)](a, b, c, a.stride(0), n, BLOCK_SIZE=1024, num_warps=4)
    return c


def reglu_fwd_reference(a, b):
    return torch.relu(a.float()).to(b.dtype).float() * b.float()


def reglu_fwd_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=5000), size)
    torch.manual_seed(136)
    return (torch.randn(s["M"], s["N"], device=device).to(torch.bfloat16),
            torch.randn(s["M"], s["N"], device=device).to(torch.bfloat16)), {}


# ---------------------------------------------------------------------------------------------
# 7. Liger's _jsd_kernel (no labels, 0 < beta < 1): X = log q, Y = log p; M = beta P + (1 - beta) Q; the element's
#    loss beta P Y + (1 - beta) Q X - M log M and dX = (1 - beta) Q (X - log M), each divided by n_non_ignore, stored.
# ---------------------------------------------------------------------------------------------
@triton.jit
def jsd_fwd_kernel(X_ptr, X_stride, Y_ptr, Y_stride, loss_ptr, loss_stride, dX_ptr, dX_stride, beta, n_non_ignore,
                   n_cols, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    X_ptr += pid * X_stride
    dX_ptr += pid * dX_stride
    Y_ptr += pid * Y_stride
    loss_ptr += pid * loss_stride
    for i in range(0, n_cols, BLOCK_SIZE):
        offsets = i + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_cols
        X = tl.load(X_ptr + offsets, mask=mask, other=float("-inf")).to(tl.float32)
        Y = tl.load(Y_ptr + offsets, mask=mask, other=float("-inf")).to(tl.float32)
        Q = tl.exp(X)
        P = tl.exp(Y)
        M = beta * P + (1 - beta) * Q
        log_M = tl.log(M)
        loss = beta * P * Y + (1 - beta) * Q * X - M * log_M
        dX = (1 - beta) * Q * (X - log_M)
        loss = loss / n_non_ignore
        dX = dX / n_non_ignore
        tl.store(loss_ptr + offsets, loss, mask=mask)
        tl.store(dX_ptr + offsets, dX, mask=mask)


def jsd_fwd_launch(x, y, beta=0.5):
    m, n = x.shape
    loss = torch.empty((m, n), device=x.device, dtype=torch.float32)
    dx = torch.empty_like(x)
    jsd_fwd_kernel[(m,)](x, x.stride(0), y, y.stride(0), loss, loss.stride(0), dx, dx.stride(0), beta, m, n,
                         BLOCK_SIZE=4096, num_warps=16)
    return loss, dx


def jsd_fwd_reference(x, y, beta=0.5):
    X, Y = x.float(), y.float()
    Q, P = X.exp(), Y.exp()
    M = beta * P + (1 - beta) * Q
    m = x.shape[0]
    return (beta * P * Y + (1 - beta) * Q * X - M * M.log()) / m, (1 - beta) * Q * (X - M.log()) / m


def jsd_fwd_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=32000), size)
    torch.manual_seed(137)
    x = torch.log_softmax(torch.randn(s["M"], s["N"], device=device), -1)
    y = torch.log_softmax(torch.randn(s["M"], s["N"], device=device), -1)
    return (x, y), dict(beta=0.5)


# ---------------------------------------------------------------------------------------------
# 8. Huber (smooth-L1) loss of a row, mean over the row, a loop over column blocks. fp16 in, fp32 out.
# ---------------------------------------------------------------------------------------------
@triton.jit
def huber_rows_kernel(X, Y, LOSS, stride_x, stride_y, n_cols, delta, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        y = tl.load(Y + row * stride_y + cols, mask=mask, other=0.0).to(tl.float32)
        d = x - y
        ad = tl.abs(d)
        acc += tl.where(ad < delta, 0.5 * d * d, delta * (ad - 0.5 * delta))
    tl.store(LOSS + row, tl.sum(acc, axis=0) / n_cols)


def huber_rows_launch(x, y, delta=1.0):
    m, n = x.shape
    loss = torch.empty(m, device=x.device, dtype=torch.float32)
    huber_rows_kernel[(m,)](x, y, loss, x.stride(0), y.stride(0), n, delta, BLOCK_SIZE=1024, num_warps=4)
    return loss


def huber_rows_reference(x, y, delta=1.0):
    return torch.nn.functional.huber_loss(x.float(), y.float(), reduction="none", delta=delta).mean(-1)


def huber_rows_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=4000), size)
    torch.manual_seed(138)
    return (2 * torch.randn(s["M"], s["N"], device=device).to(torch.float16),
            torch.randn(s["M"], s["N"], device=device).to(torch.float16)), dict(delta=1.0)


# ---------------------------------------------------------------------------------------------
# 9. Welford's one-pass mean and variance of a row, torch-inductor style ([XBLOCK, RBLOCK] running triples, then a
#    tl.reduce of the three-value combiner). fp32 in and out.
# ---------------------------------------------------------------------------------------------
@triton.jit
def _welford_combine(mean_1, m2_1, weight_1, mean_2, m2_2, weight_2):
    delta = mean_2 - mean_1
    new_weight = weight_1 + weight_2
    w2_over_w = tl.where(new_weight == 0.0, 0.0, weight_2 / new_weight)
    return mean_1 + delta * w2_over_w, m2_1 + m2_2 + delta * delta * weight_1 * w2_over_w, new_weight


@triton.jit
def welford_rows_kernel(in_ptr0, out_mean, out_var, xnumel, rnumel, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    rbase = tl.arange(0, RBLOCK)[None, :]
    mean = tl.zeros([XBLOCK, RBLOCK], tl.float32)
    m2 = tl.zeros([XBLOCK, RBLOCK], tl.float32)
    weight = tl.zeros([XBLOCK, RBLOCK], tl.float32)
    for roffset in range(0, rnumel, RBLOCK):
        rindex = roffset + rbase
        rmask = rindex < rnumel
        x = tl.load(in_ptr0 + (rindex + rnumel * xindex), rmask & xmask, other=0.0)
        new_weight = weight + 1.0
        delta = x - mean
        new_mean = mean + delta / new_weight
        new_m2 = m2 + delta * (x - new_mean)
        keep = rmask & xmask
        mean = tl.where(keep, new_mean, mean)
        m2 = tl.where(keep, new_m2, m2)
        weight = tl.where(keep, new_weight, weight)
    mean_r, m2_r, weight_r = tl.reduce((mean, m2, weight), 1, _welford_combine)
    tl.store(out_mean + xindex, mean_r[:, None], xmask)
    tl.store(out_var + xindex, (m2_r / rnumel)[:, None], xmask)


def welford_rows_launch(x):
    m, n = x.shape
    assert x.is_contiguous()
    mean = torch.empty(m, device=x.device, dtype=torch.float32)
    var = torch.empty(m, device=x.device, dtype=torch.float32)
    welford_rows_kernel[(triton.cdiv(m, 8),)](x, mean, var, m, n, XBLOCK=8, RBLOCK=256, num_warps=4)
    return mean, var


def welford_rows_reference(x):
    return x.float().mean(-1), x.float().var(-1, unbiased=False)


def welford_rows_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=3000), size)
    torch.manual_seed(139)
    return (torch.randn(s["M"], s["N"], device=device) * 3 + 1,), {}


# ---------------------------------------------------------------------------------------------
# 10. GroupNorm forward: one program a (sample, group) of an [N, C, HW] f16 tensor, the group's C/G channels x HW as
#     one flat loop (sum and sum of squares), then a loop normalizing with the channel's weight and bias.
# ---------------------------------------------------------------------------------------------
@triton.jit
def groupnorm_fwd_kernel(X, Y, W, B, C, HW, G, eps, BLOCK: tl.constexpr):
    n = tl.program_id(0)
    g = tl.program_id(1)
    cpg = C // G
    group_size = cpg * HW
    base = n * C * HW + g * group_size
    s = tl.zeros((BLOCK,), dtype=tl.float32)
    ss = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, group_size, BLOCK):
        idx = off + tl.arange(0, BLOCK)
        mask = idx < group_size
        x = tl.load(X + base + idx, mask=mask, other=0.0).to(tl.float32)
        s += x
        ss += x * x
    mean = tl.sum(s, axis=0) / group_size
    var = tl.sum(ss, axis=0) / group_size - mean * mean
    rstd = 1.0 / tl.sqrt(var + eps)
    for off in range(0, group_size, BLOCK):
        idx = off + tl.arange(0, BLOCK)
        mask = idx < group_size
        ch = g * cpg + idx // HW
        x = tl.load(X + base + idx, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(W + ch, mask=mask, other=1.0).to(tl.float32)
        b = tl.load(B + ch, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(Y + base + idx, y.to(tl.float16), mask=mask)


def groupnorm_fwd_launch(x, w, b, groups=32, eps=1e-5):
    n, c, h, wd = x.shape
    y = torch.empty_like(x)
    groupnorm_fwd_kernel[(n, groups)](x, y, w, b, c, h * wd, groups, eps, BLOCK=1024, num_warps=4)
    return y


def groupnorm_fwd_reference(x, w, b, groups=32, eps=1e-5):
    return torch.nn.functional.group_norm(x.float(), groups, w.float(), b.float(), eps)


def groupnorm_fwd_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(N=8, C=256, H=32, W=32), size)
    torch.manual_seed(140)
    x = torch.randn(s["N"], s["C"], s["H"], s["W"], device=device).to(torch.float16)
    w = torch.randn(s["C"], device=device).to(torch.float16)
    b = torch.randn(s["C"], device=device).to(torch.float16)
    return (x, w, b), dict(groups=32, eps=1e-5)


# ---------------------------------------------------------------------------------------------
# 11. Residual add + RMSNorm of a long row, two outputs: H = x + r stored to its own tensor, Y = H * rstd * w; a
#     loop over column blocks for the sum of squares, then a loop recomputing x + r. bf16.
# ---------------------------------------------------------------------------------------------
@triton.jit
def add_rmsnorm_loop_kernel(X, R, W, H, Y, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    X += row * stride
    R += row * stride
    H += row * stride
    Y += row * stride
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        mask = cols < N
        h = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32) + tl.load(R + cols, mask=mask, other=0.0).to(
            tl.float32)
        tl.store(H + cols, h.to(tl.bfloat16), mask=mask)
        acc += h * h
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        mask = cols < N
        h = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32) + tl.load(R + cols, mask=mask, other=0.0).to(
            tl.float32)
        w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y + cols, (h * rstd * w).to(tl.bfloat16), mask=mask)


def add_rmsnorm_loop_launch(x, r, w, eps=1e-6):
    m, n = x.shape
    h, y = torch.empty_like(x), torch.empty_like(x)
    add_rmsnorm_loop_kernel[(m,)](x, r, w, h, y, x.stride(0), n, eps, BLOCK_N=1024, num_warps=4)
    return h, y


def add_rmsnorm_loop_reference(x, r, w, eps=1e-6):
    h = x.float() + r.float()
    return h, h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * w.float()


def add_rmsnorm_loop_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=8192), size)
    torch.manual_seed(141)
    return (torch.randn(s["M"], s["N"], device=device).to(torch.bfloat16),
            torch.randn(s["M"], s["N"], device=device).to(torch.bfloat16),
            torch.randn(s["N"], device=device).to(torch.bfloat16)), dict(eps=1e-6)


# ---------------------------------------------------------------------------------------------
# 12. The cosine similarity of two rows: dot / max(|x| |y|, eps), three running sums, a loop over column blocks.
# ---------------------------------------------------------------------------------------------
@triton.jit
def cosine_rows_kernel(X, Y, OUT, stride_x, stride_y, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xy = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    xx = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    yy = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        y = tl.load(Y + row * stride_y + cols, mask=mask, other=0.0).to(tl.float32)
        xy += x * y
        xx += x * x
        yy += y * y
    dot = tl.sum(xy, axis=0)
    norm = tl.sqrt(tl.sum(xx, axis=0)) * tl.sqrt(tl.sum(yy, axis=0))
    tl.store(OUT + row, dot / tl.maximum(norm, eps))


def cosine_rows_launch(x, y, eps=1e-8):
    m, n = x.shape
    out = torch.empty(m, device=x.device, dtype=torch.float32)
    cosine_rows_kernel[(m,)](x, y, out, x.stride(0), y.stride(0), n, eps, BLOCK_SIZE=2048, num_warps=8)
    return out


def cosine_rows_reference(x, y, eps=1e-8):
    xf, yf = x.float(), y.float()
    return (xf * yf).sum(-1) / torch.clamp(xf.norm(dim=-1) * yf.norm(dim=-1), min=eps)


def cosine_rows_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=4000), size)
    torch.manual_seed(142)
    x = torch.randn(s["M"], s["N"], device=device).to(torch.float16)
    return (x, (x.float() + torch.randn_like(x.float())).to(torch.float16)), dict(eps=1e-8)


NAMES = ("gemm_mish", "gemm_hardswish", "gemm_scale_res_clamp", "gemm_sum2", "bmm_grouped", "reglu_fwd", "jsd_fwd",
         "huber_rows", "welford_rows", "groupnorm_fwd", "add_rmsnorm_loop", "cosine_rows")
KERNELS = {}
for _name in NAMES:
    KERNELS[_name] = dict(kernel=globals()[_name + "_kernel"], launch=globals()[_name + "_launch"],
                          reference=globals()[_name + "_reference"],
                          make_inputs=globals()[_name + "_make_inputs"])

_C = "constexpr"
_GEMM = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64)
DUMPS = {
    "gemm_mish": dict(
        signature=dict(A="*bf16", B="*bf16", BIAS="*bf16", C="*bf16", M="i32", N="i32", K="i32", stride_am="i32",
                       stride_bk="i32", stride_cm="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(_GEMM),
        divisible_by_16=["A", "B", "BIAS", "C", "M", "N", "K", "stride_am", "stride_bk", "stride_cm"],
        num_warps=8, num_stages=3),
    "gemm_hardswish": dict(
        signature=dict(A="*fp16", B="*fp16", C="*fp16", M="i32", N="i32", K="i32", stride_am="i32",
                       stride_bk="i32", stride_cm="i32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(_GEMM),
        divisible_by_16=["A", "B", "C", "M", "N", "stride_am", "stride_bk", "stride_cm"], num_warps=8,
        num_stages=3),
    "gemm_scale_res_clamp": dict(
        signature=dict(A="*fp16", B="*fp16", SCALE="*fp32", R="*fp16", C="*bf16", M="i32", N="i32", K="i32",
                       stride_am="i32", stride_bk="i32", stride_rm="i32", stride_cm="i32", clip="fp32", BLOCK_M=_C,
                       BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(_GEMM),
        divisible_by_16=["A", "B", "SCALE", "R", "C", "M", "N", "K", "stride_am", "stride_bk", "stride_rm",
                         "stride_cm"], num_warps=8, num_stages=3),
    "gemm_sum2": dict(
        signature=dict(A="*fp16", B="*fp16", Cm="*fp16", D="*fp16", OUT="*fp16", M="i32", N="i32", K="i32",
                       stride_am="i32", stride_bk="i32", stride_cm="i32", stride_dk="i32", stride_om="i32",
                       BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(_GEMM),
        divisible_by_16=["A", "B", "Cm", "D", "OUT", "M", "N", "K", "stride_am", "stride_bk", "stride_cm",
                         "stride_dk", "stride_om"], num_warps=8, num_stages=3),
    "bmm_grouped": dict(
        signature=dict(A="*fp16", B="*fp16", C="*fp16", M="i32", N="i32", K="i32", stride_ab="i32",
                       stride_am="i32", stride_bb="i32", stride_bk="i32", stride_cb="i32", stride_cm="i32",
                       BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C, GROUP_SIZE_M=_C),
        constexprs=dict(_GEMM, GROUP_SIZE_M=8),
        divisible_by_16=["A", "B", "C", "K", "stride_ab", "stride_am", "stride_bb", "stride_bk", "stride_cb",
                         "stride_cm"], num_warps=8, num_stages=3),
    "reglu_fwd": dict(
        signature=dict(a_ptr="*bf16", b_ptr="*bf16", c_ptr="*bf16", stride="i32", n_cols="i32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=1024),
        divisible_by_16=["a_ptr", "b_ptr", "c_ptr", "stride"], num_warps=4, num_stages=3),
    "jsd_fwd": dict(
        signature=dict(X_ptr="*fp32", X_stride="i32", Y_ptr="*fp32", Y_stride="i32", loss_ptr="*fp32",
                       loss_stride="i32", dX_ptr="*fp32", dX_stride="i32", beta="fp32", n_non_ignore="i32",
                       n_cols="i32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=4096),
        divisible_by_16=["X_ptr", "X_stride", "Y_ptr", "Y_stride", "loss_ptr", "loss_stride", "dX_ptr",
                         "dX_stride"], num_warps=16, num_stages=3),
    "huber_rows": dict(
        signature=dict(X="*fp16", Y="*fp16", LOSS="*fp32", stride_x="i32", stride_y="i32", n_cols="i32",
                       delta="fp32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=1024),
        divisible_by_16=["X", "Y", "LOSS", "stride_x", "stride_y"], num_warps=4, num_stages=3),
    "welford_rows": dict(
        signature=dict(in_ptr0="*fp32", out_mean="*fp32", out_var="*fp32", xnumel="i32", rnumel="i32",
                       XBLOCK=_C, RBLOCK=_C),
        constexprs=dict(XBLOCK=8, RBLOCK=256),
        divisible_by_16=["in_ptr0", "out_mean", "out_var"], num_warps=4, num_stages=3),
    "groupnorm_fwd": dict(
        signature=dict(X="*fp16", Y="*fp16", W="*fp16", B="*fp16", C="i32", HW="i32", G="i32", eps="fp32",
                       BLOCK=_C),
        constexprs=dict(BLOCK=1024),
        divisible_by_16=["X", "Y", "W", "B", "C", "HW"], num_warps=4, num_stages=3),
    "add_rmsnorm_loop": dict(
        signature=dict(X="*bf16", R="*bf16", W="*bf16", H="*bf16", Y="*bf16", stride="i32", N="i32", eps="fp32",
                       BLOCK_N=_C),
        constexprs=dict(BLOCK_N=1024),
        divisible_by_16=["X", "R", "W", "H", "Y", "stride"], num_warps=4, num_stages=3),
    "cosine_rows": dict(
        signature=dict(X="*fp16", Y="*fp16", OUT="*fp32", stride_x="i32", stride_y="i32", n_cols="i32",
                       eps="fp32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=2048),
        divisible_by_16=["X", "Y", "OUT", "stride_x", "stride_y"], num_warps=8, num_stages=3),
}
for _name, _spec in DUMPS.items():
    _spec["kernel"] = KERNELS[_name]["kernel"]
