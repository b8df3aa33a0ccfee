"""Held-out Triton kernels, batch 13b: constructs twill refused until session 42, written as users write them:

- a clamped GELU a row (`tl.clamp(x, lo, hi)`, the bounds kernel arguments, NaN not propagated: the default);
- a leaky ReLU clamped to [-6, 6] a row whose NaN propagate (`tl.maximum(..., propagate_nan=tl.PropagateNan.ALL)` and
  `tl.clamp(..., propagate_nan=tl.PropagateNan.ALL)`);
- a bf16 GEMM with a bias and `tl.clamp(acc, lo, hi, propagate_nan=tl.PropagateNan.ALL)` in its epilogue;
- a row's running product (`tl.cumprod`);
- a row's reverse running sum (`tl.cumsum(x, reverse=True)`: the suffix sums);
- a row's running maximum (`tl.associative_scan(x, 0, max)`: Triton has no tl.cummax), -inf past the row.

Protocol for every kernel NAME (KERNELS at the bottom), as kernels.py:
    tensors, params = NAME_make_inputs(size, device)   # size: dict of overrides or None
    out = NAME_launch(*tensors, **params)                # runs the Triton kernel
    ref = NAME_reference(*tensors, **params)             # plain torch, fp32
DUMPS[NAME] holds what gen.py compiles the TTGIR dumps with (`gen.py --module kernels13b`).
"""
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


def _rows(seed, s, device, dtype):
    torch.manual_seed(seed)
    return torch.randn(s["M"], s["N"], device=device).to(dtype)


# 1. A clamped GELU (sigmoid form) a row: y = g(clamp(x, lo, hi)), g(v) = v * sigmoid(1.702 v); fp16 in and out.
@triton.jit
def clamp_gelu_rows_kernel(X, Y, stride_x, stride_y, n_cols, lo, hi, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    v = tl.clamp(x, lo, hi)
    y = v * tl.sigmoid(1.702 * v)
    tl.store(Y + row * stride_y + cols, y.to(tl.float16), mask=mask)


def clamp_gelu_rows_launch(x, lo=-3.0, hi=3.0):
    M, N = x.shape
    y = torch.empty_like(x)
    clamp_gelu_rows_kernel[(M,)](x, y, x.stride(0), y.stride(0), N, lo, hi, BLOCK_SIZE=triton.next_power_of_2(N),
                                 num_warps=4)
    return y


def clamp_gelu_rows_reference(x, lo=-3.0, hi=3.0):
    v = x.float().clamp(lo, hi)
    return v * torch.sigmoid(1.702 * v)


def clamp_gelu_rows_make_inputs(size=None, device="cuda"):
    return (_rows(131, _sizes(dict(M=4096, N=3000), size), device, torch.float16) * 3,), {}


# 2. A leaky ReLU clamped to [-6, 6] a row, NaN propagated: y = clamp(max(x, 0.01 x), -6, 6); fp32.
@triton.jit
def leaky_clamp_nan_rows_kernel(X, Y, stride_x, stride_y, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0)
    y = tl.clamp(tl.maximum(x, 0.01 * x, propagate_nan=tl.PropagateNan.ALL), -6.0, 6.0, propagate_nan=tl.PropagateNan.ALL)
    tl.store(Y + row * stride_y + cols, y, mask=mask)


def leaky_clamp_nan_rows_launch(x):
    M, N = x.shape
    y = torch.empty_like(x)
    leaky_clamp_nan_rows_kernel[(M,)](x, y, x.stride(0), y.stride(0), N, BLOCK_SIZE=triton.next_power_of_2(N),
                                      num_warps=4)
    return y


def leaky_clamp_nan_rows_reference(x):
    return torch.clamp(torch.maximum(x, 0.01 * x), -6.0, 6.0)  # torch propagates NaN through both


def leaky_clamp_nan_rows_make_inputs(size=None, device="cuda"):
    x = _rows(132, _sizes(dict(M=4096, N=1000), size), device, torch.float32) * 8
    x[::7, ::13] = float("nan")
    return (x,), {}


# 3. bf16 GEMM, a bias a column, the result clamped to [lo, hi] with NaN propagated; bf16 out.
@triton.jit
def gemm_clamp_kernel(A, B, BIAS, C, M, N, K, stride_am, stride_bk, stride_cm, lo, hi, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = A + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = B + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=offs_m[:, None] < M, other=0.0)
        b = tl.load(b_ptrs, mask=offs_n[None, :] < N, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    bias = tl.load(BIAS + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
    acc = tl.clamp(acc + bias[None, :], lo, hi, propagate_nan=tl.PropagateNan.ALL)
    c_ptrs = C + offs_m[:, None] * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(tl.bfloat16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def gemm_clamp_launch(a, b, bias, lo=-4.0, hi=4.0):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    grid = (triton.cdiv(M, 128), triton.cdiv(N, 128))
    gemm_clamp_kernel[grid](a, b, bias, c, M, N, K, a.stride(0), b.stride(0), c.stride(0), lo, hi, BLOCK_M=128,
                            BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3)
    return c


def gemm_clamp_reference(a, b, bias, lo=-4.0, hi=4.0):
    return torch.clamp(a.float() @ b.float() + bias.float()[None, :], lo, hi)


def gemm_clamp_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1000, N=1200, K=1024), size)
    torch.manual_seed(133)
    a = (torch.randn(s["M"], s["K"], device=device) / 8).to(torch.bfloat16)
    b = torch.randn(s["K"], s["N"], device=device).to(torch.bfloat16)
    bias = torch.randn(s["N"], device=device).to(torch.bfloat16)
    return (a, b, bias), {}


# 4. A row's running product: tl.cumprod, fp32.
@triton.jit
def cumprod_rows_kernel(X, Y, stride_x, stride_y, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=mask, other=1.0)
    y = tl.cumprod(x, axis=0)
    tl.store(Y + row * stride_y + cols, y, mask=mask)


def cumprod_rows_launch(x):
    M, N = x.shape
    y = torch.empty_like(x)
    cumprod_rows_kernel[(M,)](x, y, x.stride(0), y.stride(0), N, BLOCK_SIZE=triton.next_power_of_2(N), num_warps=4)
    return y


def cumprod_rows_reference(x):
    return torch.cumprod(x.float(), dim=-1)


def cumprod_rows_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=1000), size)
    torch.manual_seed(134)
    return (1 + torch.randn(s["M"], s["N"], device=device) / 64,), {}  # near 1: the products stay finite


# 5. A row's reverse running sum (the suffix sums): tl.cumsum(x, reverse=True), fp16 in, fp32 out.
@triton.jit
def cumsum_rev_rows_kernel(X, Y, stride_x, stride_y, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    y = tl.cumsum(x, axis=0, reverse=True)
    tl.store(Y + row * stride_y + cols, y, mask=mask)


def cumsum_rev_rows_launch(x):
    M, N = x.shape
    y = torch.empty((M, N), device=x.device, dtype=torch.float32)
    cumsum_rev_rows_kernel[(M,)](x, y, x.stride(0), y.stride(0), N, BLOCK_SIZE=triton.next_power_of_2(N),
                                 num_warps=4)
    return y


def cumsum_rev_rows_reference(x):
    return torch.flip(torch.cumsum(torch.flip(x.float(), (-1,)), dim=-1), (-1,))


def cumsum_rev_rows_make_inputs(size=None, device="cuda"):
    return (_rows(135, _sizes(dict(M=4096, N=1000), size), device, torch.float16),), {}


# 6. A row's running maximum: tl.associative_scan with a maximum combiner (NaN not propagated), fp32.
@triton.jit
def _max_combine(a, b):
    return tl.maximum(a, b)


@triton.jit
def cummax_rows_kernel(X, Y, stride_x, stride_y, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=mask, other=-float("inf"))
    y = tl.associative_scan(x, 0, _max_combine)
    tl.store(Y + row * stride_y + cols, y, mask=mask)


def cummax_rows_launch(x):
    M, N = x.shape
    y = torch.empty_like(x)
    cummax_rows_kernel[(M,)](x, y, x.stride(0), y.stride(0), N, BLOCK_SIZE=triton.next_power_of_2(N), num_warps=4)
    return y


def cummax_rows_reference(x):
    return torch.cummax(x.float(), dim=-1).values


def cummax_rows_make_inputs(size=None, device="cuda"):
    return (_rows(136, _sizes(dict(M=4096, N=1000), size), device, torch.float32),), {}


NAMES = ("clamp_gelu_rows", "leaky_clamp_nan_rows", "gemm_clamp", "cumprod_rows", "cumsum_rev_rows", "cummax_rows")
KERNELS = {}
for _name in NAMES:
    KERNELS[_name] = dict(kernel=globals()[_name + "_kernel"], launch=globals()[_name + "_launch"],
                          reference=globals()[_name + "_reference"],
                          make_inputs=globals()[_name + "_make_inputs"])

_C = "constexpr"
_ROWS = ["X", "Y", "stride_x", "stride_y"]
DUMPS = {
    "clamp_gelu_rows": dict(
        signature=dict(X="*fp16", Y="*fp16", stride_x="i32", stride_y="i32", n_cols="i32", lo="fp32", hi="fp32",
                       BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=4096), divisible_by_16=_ROWS, num_warps=4, num_stages=3),
    "leaky_clamp_nan_rows": dict(
        signature=dict(X="*fp32", Y="*fp32", stride_x="i32", stride_y="i32", n_cols="i32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=1024), divisible_by_16=_ROWS, num_warps=4, num_stages=3),
    "gemm_clamp": dict(
        signature=dict(A="*bf16", B="*bf16", BIAS="*bf16", C="*bf16", M="i32", N="i32", K="i32", stride_am="i32",
                       stride_bk="i32", stride_cm="i32", lo="fp32", hi="fp32", BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C),
        constexprs=dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64),
        divisible_by_16=["A", "B", "BIAS", "C", "K", "stride_am", "stride_bk", "stride_cm"], num_warps=8,
        num_stages=3),
    "cumprod_rows": dict(
        signature=dict(X="*fp32", Y="*fp32", stride_x="i32", stride_y="i32", n_cols="i32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=1024), divisible_by_16=_ROWS, num_warps=4, num_stages=3),
    "cummax_rows": dict(
        signature=dict(X="*fp32", Y="*fp32", stride_x="i32", stride_y="i32", n_cols="i32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=1024), divisible_by_16=_ROWS, num_warps=4, num_stages=3),
    "cumsum_rev_rows": dict(
        signature=dict(X="*fp16", Y="*fp32", stride_x="i32", stride_y="i32", n_cols="i32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=1024), divisible_by_16=_ROWS, num_warps=4, num_stages=3),
}
for _name, _spec in DUMPS.items():
    _spec["kernel"] = KERNELS[_name]["kernel"]
