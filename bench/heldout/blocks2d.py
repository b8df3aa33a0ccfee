"""Two loop-free kernels of 2-D blocks beside batch 10's bias + GELU, for the import's tests of block2d.py (dumped
by `gen.py --module blocks2d` into tests/data/ttgir/blocks2d; not a held-out batch: no launch or reference here):

- scale_bias_relu: y = relu(x * s[row] + b[col]) over a 2-D grid whose program id 1 indexes the row blocks and 0
  the column blocks (the grid written the other way round), a per-row scale and a bias row; fp16;
- rows_axpy: z = x + alpha * y over a 1-D grid of [32, 256] row blocks, each block holding the whole row
  (`cols = arange(BLOCK_N)`, no column program id), alpha a scalar argument; fp32;
- rows_softmax: softmax of each row of a [16, 1024] row block (`tl.max(x, axis=1)`, `tl.sum(e, axis=1)`: the
  block holds whole rows), masked with other=-inf; fp16 in and out.
"""
import triton
import triton.language as tl


@triton.jit
def scale_bias_relu_kernel(X, S, B, Y, M, N, stride_xm, stride_ym, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(X + rm[:, None] * stride_xm + rn[None, :], mask=mask, other=0.0).to(tl.float32)
    s = tl.load(S + rm, mask=rm < M, other=0.0).to(tl.float32)
    b = tl.load(B + rn, mask=rn < N, other=0.0).to(tl.float32)
    y = tl.maximum(x * s[:, None] + b[None, :], 0.0)
    tl.store(Y + rm[:, None] * stride_ym + rn[None, :], y.to(tl.float16), mask=mask)


@triton.jit
def rows_axpy_kernel(X, Y, Z, M, N, stride, alpha, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    rm = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (cols[None, :] < N)
    offs = rm[:, None] * stride + cols[None, :]
    x = tl.load(X + offs, mask=mask, other=0.0)
    y = tl.load(Y + offs, mask=mask, other=0.0)
    tl.store(Z + offs, x + alpha * y, mask=mask)


@triton.jit
def rows_softmax_kernel(X, Y, M, N, stride, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (cols[None, :] < N)
    x = tl.load(X + rm[:, None] * stride + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=1)[:, None])
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(Y + rm[:, None] * stride + cols[None, :], y.to(tl.float16), mask=mask)


_C = "constexpr"
DUMPS = {
    "scale_bias_relu": dict(
        kernel=scale_bias_relu_kernel,
        signature=dict(X="*fp16", S="*fp16", B="*fp16", Y="*fp16", M="i32", N="i32", stride_xm="i32",
                       stride_ym="i32", BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(BLOCK_M=64, BLOCK_N=128),
        divisible_by_16=["X", "S", "B", "Y", "M", "N", "stride_xm", "stride_ym"], num_warps=4, num_stages=3),
    "rows_axpy": dict(
        kernel=rows_axpy_kernel,
        signature=dict(X="*fp32", Y="*fp32", Z="*fp32", M="i32", N="i32", stride="i32", alpha="fp32",
                       BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(BLOCK_M=32, BLOCK_N=256),
        divisible_by_16=["X", "Y", "Z", "M", "N", "stride"], num_warps=4, num_stages=3),
    "rows_softmax": dict(
        kernel=rows_softmax_kernel,
        signature=dict(X="*fp16", Y="*fp16", M="i32", N="i32", stride="i32", BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(BLOCK_M=16, BLOCK_N=1024),
        divisible_by_16=["X", "Y", "M", "N", "stride"], num_warps=8, num_stages=3),
}
