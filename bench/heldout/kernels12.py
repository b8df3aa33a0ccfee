"""Held-out Triton kernels, twelfth batch: column sums, a loop over row blocks whose [BLOCK_M, BLOCK_N] partials are
summed down the columns after the loop (one program a column block), none tuned for twill:

- the bias gradient of a linear layer, db = dy.sum(0): a bf16 dy [M, N] through its row stride, an f32 partial
  accumulated over row blocks of 64, `tl.sum(acc, axis=0)` after the loop, stored bf16 under `cols < N`;
- the LayerNorm weight and bias gradients computed directly from the forward's saved statistics,
  dw = sum_rows(dy * (x - mean[row]) * rstd[row]) and db = sum_rows(dy): f16 x and dy, f32 mean and rstd loaded a
  row block at a time inside the loop (masked `rows < M`), two column sums, f32 out;
- a BatchNorm's training statistics over an f32 x [M, N]: the column sum and sum of squares of row blocks of 16 by
  256 columns, after the loop mean = s / M and var = ss / M - mean^2 (M the launch's row count), both stored.

Protocol for every kernel NAME (KERNELS at the bottom), as kernels.py:
    tensors, params = NAME_make_inputs(size, device)   # size: dict of overrides or None
    out = NAME_launch(*tensors, **params)                # runs the Triton kernel
    ref = NAME_reference(*tensors, **params)             # plain torch, fp32
DUMPS[NAME] holds what gen.py compiles the TTGIR dumps with (`gen.py --module kernels12`).
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


# ---------------------------------------------------------------------------------------------
# 1. bias gradient: db = dy.sum(0), bf16 in and out, an f32 partial of [64, 128] row blocks.
# ---------------------------------------------------------------------------------------------
@triton.jit
def bias_grad_kernel(DY, DB, M, N, stride_dym, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for m in range(0, M, BLOCK_M):
        rows = m + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        dy = tl.load(DY + rows[:, None] * stride_dym + cols[None, :], mask=mask, other=0.)
        acc += dy.to(tl.float32)
    db = tl.sum(acc, axis=0)
    tl.store(DB + cols, db.to(DB.dtype.element_ty), mask=cols < N)


def bias_grad_launch(dy):
    m, n = dy.shape
    db = torch.empty(n, dtype=dy.dtype, device=dy.device)
    bias_grad_kernel[(triton.cdiv(n, 128),)](dy, db, m, n, dy.stride(0), BLOCK_M=64, BLOCK_N=128)
    return db


def bias_grad_reference(dy):
    return dy.float().sum(0)


def bias_grad_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=8192, N=4096), size)
    torch.manual_seed(121)
    return (torch.randn(s["M"], s["N"], device=device, dtype=torch.bfloat16),), {}


# ---------------------------------------------------------------------------------------------
# 2. LayerNorm dw and db from x, dy and the forward's mean and rstd (a row block's values loaded in the loop).
# ---------------------------------------------------------------------------------------------
@triton.jit
def ln_dwdb_kernel(X, DY, Mean, Rstd, DW, DB, M, N, stride, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    dw = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for i in range(0, M, BLOCK_M):
        rows = i + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offs = rows[:, None] * stride + cols[None, :]
        x = tl.load(X + offs, mask=mask, other=0.).to(tl.float32)
        dy = tl.load(DY + offs, mask=mask, other=0.).to(tl.float32)
        mean = tl.load(Mean + rows, mask=rows < M, other=0.)
        rstd = tl.load(Rstd + rows, mask=rows < M, other=0.)
        xhat = (x - mean[:, None]) * rstd[:, None]
        dw += dy * xhat
        db += dy
    tl.store(DW + cols, tl.sum(dw, axis=0), mask=cols < N)
    tl.store(DB + cols, tl.sum(db, axis=0), mask=cols < N)


def ln_dwdb_launch(x, dy, mean, rstd):
    m, n = x.shape
    dw = torch.empty(n, dtype=torch.float32, device=x.device)
    db = torch.empty(n, dtype=torch.float32, device=x.device)
    ln_dwdb_kernel[(triton.cdiv(n, 128),)](x, dy, mean, rstd, dw, db, m, n, x.stride(0), BLOCK_M=32, BLOCK_N=128)
    return dw, db


def ln_dwdb_reference(x, dy, mean, rstd):
    xhat = (x.float() - mean[:, None]) * rstd[:, None]
    return (dy.float() * xhat).sum(0), dy.float().sum(0)


def ln_dwdb_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=4096), size)
    torch.manual_seed(122)
    x = torch.randn(s["M"], s["N"], device=device, dtype=torch.float16)
    dy = torch.randn(s["M"], s["N"], device=device, dtype=torch.float16)
    mean = x.float().mean(1)
    rstd = 1.0 / torch.sqrt(x.float().var(1, unbiased=False) + 1e-5)
    return (x, dy, mean, rstd), {}


# ---------------------------------------------------------------------------------------------
# 3. BatchNorm training statistics: a column's mean and (biased) variance over M rows, f32.
# ---------------------------------------------------------------------------------------------
@triton.jit
def bn_stats_kernel(X, MEAN, VAR, M, N, stride_xm, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    s = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    ss = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for m in range(0, M, BLOCK_M):
        rows = m + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        x = tl.load(X + rows[:, None] * stride_xm + cols[None, :], mask=mask, other=0.)
        s += x
        ss += x * x
    mean = tl.sum(s, axis=0) / M
    var = tl.sum(ss, axis=0) / M - mean * mean
    tl.store(MEAN + cols, mean, mask=cols < N)
    tl.store(VAR + cols, var, mask=cols < N)


def bn_stats_launch(x):
    m, n = x.shape
    mean = torch.empty(n, dtype=torch.float32, device=x.device)
    var = torch.empty(n, dtype=torch.float32, device=x.device)
    bn_stats_kernel[(triton.cdiv(n, 256),)](x, mean, var, m, n, x.stride(0), BLOCK_M=16, BLOCK_N=256)
    return mean, var


def bn_stats_reference(x):
    return x.float().mean(0), x.float().var(0, unbiased=False)


def bn_stats_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=16384, N=1024), size)
    torch.manual_seed(123)
    return (torch.randn(s["M"], s["N"], device=device) * 2.0 + 0.5,), {}


NAMES = ["bias_grad", "ln_dwdb", "bn_stats"]

KERNELS = {}
for _name in NAMES:
    KERNELS[_name] = dict(kernel=globals()[_name + "_kernel"], launch=globals()[_name + "_launch"],
                          reference=globals()[_name + "_reference"],
                          make_inputs=globals()[_name + "_make_inputs"])

_C = "constexpr"
DUMPS = {
    "bias_grad": dict(
        signature=dict(DY="*bf16", DB="*bf16", M="i32", N="i32", stride_dym="i32", BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(BLOCK_M=64, BLOCK_N=128),
        divisible_by_16=["DY", "DB", "stride_dym"], num_warps=4, num_stages=3),
    "ln_dwdb": dict(
        signature=dict(X="*fp16", DY="*fp16", Mean="*fp32", Rstd="*fp32", DW="*fp32", DB="*fp32", M="i32",
                       N="i32", stride="i32", BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(BLOCK_M=32, BLOCK_N=128),
        divisible_by_16=["X", "DY", "Mean", "Rstd", "DW", "DB", "stride"], num_warps=4, num_stages=3),
    "bn_stats": dict(
        signature=dict(X="*fp32", MEAN="*fp32", VAR="*fp32", M="i32", N="i32", stride_xm="i32", BLOCK_M=_C,
                       BLOCK_N=_C),
        constexprs=dict(BLOCK_M=16, BLOCK_N=256),
        divisible_by_16=["X", "MEAN", "VAR", "stride_xm"], num_warps=8, num_stages=3),
}
for _name, _spec in DUMPS.items():
    _spec["kernel"] = KERNELS[_name]["kernel"]
