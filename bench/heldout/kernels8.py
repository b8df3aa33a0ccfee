"""Held-out Triton kernels, eighth batch: one row a program with NO loop, the form most found in the wild
(Liger-Kernel, unsloth, the older Triton tutorial softmax): `row = tl.program_id(0)`, `cols = tl.arange(0,
BLOCK_SIZE)` with BLOCK_SIZE = next_power_of_2(n_cols), one masked load of the whole row, row reductions,
elementwise math, masked stores, sometimes a per-row scalar store. Written for this batch, none tuned for twill:
Liger's RMSNorm forward (bf16, rstd stored, `offset + W`), Liger's LayerNorm forward (f16, Mean and Rstd stored),
the older tutorial softmax (fp32, other=-inf), Liger's SwiGLU forward (bf16, no reduction) and GEGLU forward
with the tanh approximation (f16, libdevice tanh, no reduction), and a plain vector add (one element a lane of
the program's block: not a row, refused).

Protocol for every kernel NAME (KERNELS at the bottom), as kernels.py:
    tensors, params = NAME_make_inputs(size, device)   # size: dict of overrides or None
    out = NAME_launch(*tensors, **params)                # runs the Triton kernel
    ref = NAME_reference(*tensors, **params)             # plain torch, fp32
DUMPS[NAME] holds what gen.py compiles the TTGIR dumps with (`gen.py --module kernels8`).
"""
import triton
import triton.language as tl

try:
    from triton.language.extra.libdevice import tanh as _tanh
except ImportError:  # older releases
    from triton.language.math import tanh as _tanh

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
# 1. RMSNorm forward, Liger's _rms_norm_forward_kernel (llama casting): one program a row, the row whole in
#    one BLOCK_SIZE tile, the mean of squares in fp32, rstd stored per row, Y = x * rstd * (offset + W). bf16.
# ---------------------------------------------------------------------------------------------
@triton.jit
def rms_norm_fwd_kernel(Y_ptr, Y_row_stride, X_ptr, X_row_stride, W_ptr, RSTD_ptr, RSTD_row_stride, n_cols,
                        eps, offset, BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    Y_ptr += row_idx * Y_row_stride
    X_ptr += row_idx * X_row_stride
    RSTD_ptr += row_idx * RSTD_row_stride
    X_row = tl.load(X_ptr + col_offsets, mask=mask, other=0)
    W_row = tl.load(W_ptr + col_offsets, mask=mask, other=0)
    X_row = X_row.to(tl.float32)
    mean_square = tl.sum(X_row * X_row, axis=0) / n_cols
    rstd = tl.math.rsqrt(mean_square + eps)
    tl.store(RSTD_ptr, rstd)
    X_row = X_row * rstd
    Y_row = X_row * (offset + W_row.to(tl.float32))
    tl.store(Y_ptr + col_offsets, Y_row.to(tl.bfloat16), mask=mask)


def rms_norm_fwd_launch(x, w, eps=1e-6, offset=0.0):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    rstd = torch.empty(n_rows, device=x.device, dtype=torch.float32)
    block = triton.next_power_of_2(n_cols)
    rms_norm_fwd_kernel[(n_rows,)](y, y.stride(0), x, x.stride(0), w, rstd, rstd.stride(0), n_cols, eps, offset,
                                   BLOCK_SIZE=block, num_warps=8)
    return y, rstd


def rms_norm_fwd_reference(x, w, eps=1e-6, offset=0.0):
    xf = x.float()
    rstd = torch.rsqrt((xf * xf).mean(-1) + eps)
    return xf * rstd[:, None] * (offset + w.float()), rstd


def rms_norm_fwd_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=4096), size)
    torch.manual_seed(81)
    x = torch.randn(s["M"], s["N"], device=device).to(torch.bfloat16)
    w = (1 + 0.1 * torch.randn(s["N"], device=device)).to(torch.bfloat16)
    return (x, w), {}


# ---------------------------------------------------------------------------------------------
# 2. LayerNorm forward, Liger's _layer_norm_forward_kernel: the row whole in one tile, its mean, the variance
#    of the masked deviations (tl.where(mask, x - mean, 0.)), Mean and Rstd stored per row, Y = (x - mean) *
#    rstd * W + B. f16 X and Y, f16 W and B, statistics in fp32.
# ---------------------------------------------------------------------------------------------
@triton.jit
def layer_norm_fwd_kernel(Y_ptr, Y_row_stride, X_ptr, X_row_stride, W_ptr, B_ptr, Mean_ptr, Mean_row_stride,
                          RSTD_ptr, RSTD_row_stride, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    Y_ptr += row_idx * Y_row_stride
    X_ptr += row_idx * X_row_stride
    Mean_ptr += row_idx * Mean_row_stride
    RSTD_ptr += row_idx * RSTD_row_stride
    X_row = tl.load(X_ptr + col_offsets, mask=mask, other=0).to(tl.float32)
    W_row = tl.load(W_ptr + col_offsets, mask=mask, other=0).to(tl.float32)
    B_row = tl.load(B_ptr + col_offsets, mask=mask, other=0).to(tl.float32)
    mean = tl.sum(X_row, axis=0) / n_cols
    X_centered = X_row - mean
    X_centered_masked = tl.where(mask, X_centered, 0.0)
    var = tl.sum(X_centered_masked * X_centered_masked, axis=0) / n_cols
    rstd = tl.math.rsqrt(var + eps)
    tl.store(Mean_ptr, mean)
    tl.store(RSTD_ptr, rstd)
    Y_row = X_centered * rstd * W_row + B_row
    tl.store(Y_ptr + col_offsets, Y_row.to(tl.float16), mask=mask)


def layer_norm_fwd_launch(x, w, b, eps=1e-5):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    mean = torch.empty(n_rows, device=x.device, dtype=torch.float32)
    rstd = torch.empty(n_rows, device=x.device, dtype=torch.float32)
    block = triton.next_power_of_2(n_cols)
    layer_norm_fwd_kernel[(n_rows,)](y, y.stride(0), x, x.stride(0), w, b, mean, mean.stride(0), rstd, rstd.stride(0),
                                     n_cols, eps, BLOCK_SIZE=block, num_warps=8)
    return y, mean, rstd


def layer_norm_fwd_reference(x, w, b, eps=1e-5):
    xf = x.float()
    mean = xf.mean(-1)
    var = xf.var(-1, unbiased=False)
    rstd = torch.rsqrt(var + eps)
    return (xf - mean[:, None]) * rstd[:, None] * w.float() + b.float(), mean, rstd


def layer_norm_fwd_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=4096), size)
    torch.manual_seed(82)
    x = (torch.randn(s["M"], s["N"], device=device) + 0.5).to(torch.float16)
    w = (1 + 0.1 * torch.randn(s["N"], device=device)).to(torch.float16)
    b = (0.1 * torch.randn(s["N"], device=device)).to(torch.float16)
    return (x, w, b), {}


# ---------------------------------------------------------------------------------------------
# 3. The older Triton tutorial's softmax (02-fused-softmax.py before its persistent form): one program a row,
#    the row in one BLOCK_SIZE tile with other=-inf, max, exp, sum, divide, store. fp32 as in the tutorial.
# ---------------------------------------------------------------------------------------------
@triton.jit
def softmax_row_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    row_start_ptr = input_ptr + row_idx * input_row_stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    input_ptrs = row_start_ptr + col_offsets
    row = tl.load(input_ptrs, mask=col_offsets < n_cols, other=-float('inf'))
    row_minus_max = row - tl.max(row, axis=0)
    numerator = tl.exp(row_minus_max)
    denominator = tl.sum(numerator, axis=0)
    softmax_output = numerator / denominator
    output_row_start_ptr = output_ptr + row_idx * output_row_stride
    output_ptrs = output_row_start_ptr + col_offsets
    tl.store(output_ptrs, softmax_output, mask=col_offsets < n_cols)


def softmax_row_launch(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    softmax_row_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols, BLOCK_SIZE=block, num_warps=8)
    return y


def softmax_row_reference(x):
    return torch.softmax(x.float(), -1)


def softmax_row_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=1024), size)
    torch.manual_seed(83)
    return (torch.randn(s["M"], s["N"], device=device) * 3,), {}


# ---------------------------------------------------------------------------------------------
# 4. SwiGLU forward, Liger's _swiglu_forward_kernel: one program a row (its id cast to int64), c = silu(a) * b,
#    silu in fp32 cast back to b's dtype. bf16. No reduction.
# ---------------------------------------------------------------------------------------------
@triton.jit
def swiglu_fwd_kernel(a_ptr, b_ptr, c_ptr, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    a_ptr += program_id * stride
    b_ptr += program_id * stride
    c_ptr += program_id * stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    a_row = tl.load(a_ptr + col_offsets, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b_ptr + col_offsets, mask=mask, other=0)
    c_row = (a_row * tl.sigmoid(a_row)).cast(b_row.dtype) * b_row
    tl.store(c_ptr + col_offsets, c_row, mask=mask)


def swiglu_fwd_launch(a, b):
    n_rows, n_cols = a.shape
    c = torch.empty_like(a)
    block = triton.next_power_of_2(n_cols)
    swiglu_fwd_kernel[(n_rows,)](a, b, c, c.stride(0), n_cols=n_cols, BLOCK_SIZE=block, num_warps=4)
    return c


def swiglu_fwd_reference(a, b):
    af = a.float()
    return af * torch.sigmoid(af) * b.float()


def swiglu_fwd_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=4096), size)
    torch.manual_seed(84)
    return (torch.randn(s["M"], s["N"], device=device).to(torch.bfloat16),
            torch.randn(s["M"], s["N"], device=device).to(torch.bfloat16)), {}


# ---------------------------------------------------------------------------------------------
# 5. GEGLU forward with the tanh approximation, Liger's _geglu_tanh_forward_kernel: one program a row,
#    c = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))) * b, libdevice tanh. f16. No reduction.
# ---------------------------------------------------------------------------------------------
@triton.jit
def geglu_fwd_kernel(a, b, c, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    a += program_id * stride
    b += program_id * stride
    c += program_id * stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    a_row = tl.load(a + col_offsets, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b + col_offsets, mask=mask, other=0)
    sqrt_2_over_pi = 0.7978845608028654
    a_cubed = a_row * a_row * a_row
    tanh_arg = sqrt_2_over_pi * (a_row + 0.044715 * a_cubed)
    tanh_result = _tanh(tanh_arg)
    geglu_a = 0.5 * a_row * (1 + tanh_result)
    c_row = geglu_a.cast(b_row.dtype) * b_row
    tl.store(c + col_offsets, c_row, mask=mask)


def geglu_fwd_launch(a, b):
    n_rows, n_cols = a.shape
    c = torch.empty_like(a)
    block = triton.next_power_of_2(n_cols)
    geglu_fwd_kernel[(n_rows,)](a, b, c, c.stride(0), n_cols=n_cols, BLOCK_SIZE=block, num_warps=4)
    return c


def geglu_fwd_reference(a, b):
    af = a.float()
    return 0.5 * af * (1 + torch.tanh(0.7978845608028654 * (af + 0.044715 * af ** 3))) * b.float()


def geglu_fwd_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=4096), size)
    torch.manual_seed(85)
    return (torch.randn(s["M"], s["N"], device=device).to(torch.float16),
            torch.randn(s["M"], s["N"], device=device).to(torch.float16)), {}


# ---------------------------------------------------------------------------------------------
# 6. Plain vector add (the tutorial's 01-vector-add): the program id indexes a block of elements, not a row.
# ---------------------------------------------------------------------------------------------
@triton.jit
def vector_add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)


def vector_add_launch(x, y):
    out = torch.empty_like(x)
    n = out.numel()
    vector_add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    return out


def vector_add_reference(x, y):
    return x.float() + y.float()


def vector_add_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(N=98432), size)
    torch.manual_seed(86)
    return (torch.rand(s["N"], device=device), torch.rand(s["N"], device=device)), {}


NAMES = ("rms_norm_fwd", "layer_norm_fwd", "softmax_row", "swiglu_fwd", "geglu_fwd", "vector_add")
KERNELS = {}
for _name in NAMES:
    KERNELS[_name] = dict(kernel=globals()[_name + "_kernel"], launch=globals()[_name + "_launch"],
                          reference=globals()[_name + "_reference"],
                          make_inputs=globals()[_name + "_make_inputs"])

_C = "constexpr"
DUMPS = {
    "rms_norm_fwd": dict(
        signature=dict(Y_ptr="*bf16", Y_row_stride="i32", X_ptr="*bf16", X_row_stride="i32", W_ptr="*bf16",
                       RSTD_ptr="*fp32", RSTD_row_stride="i32", n_cols="i32", eps="fp32", offset="fp32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=4096),
        divisible_by_16=["Y_ptr", "Y_row_stride", "X_ptr", "X_row_stride", "W_ptr", "RSTD_ptr", "n_cols"],
        num_warps=8, num_stages=3),
    "layer_norm_fwd": dict(
        signature=dict(Y_ptr="*fp16", Y_row_stride="i32", X_ptr="*fp16", X_row_stride="i32", W_ptr="*fp16",
                       B_ptr="*fp16", Mean_ptr="*fp32", Mean_row_stride="i32", RSTD_ptr="*fp32",
                       RSTD_row_stride="i32", n_cols="i32", eps="fp32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=4096),
        divisible_by_16=["Y_ptr", "Y_row_stride", "X_ptr", "X_row_stride", "W_ptr", "B_ptr", "Mean_ptr", "RSTD_ptr",
                         "n_cols"],
        num_warps=8, num_stages=3),
    "softmax_row": dict(
        signature=dict(output_ptr="*fp32", input_ptr="*fp32", input_row_stride="i32", output_row_stride="i32",
                       n_cols="i32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=1024),
        divisible_by_16=["output_ptr", "input_ptr", "input_row_stride", "output_row_stride"], num_warps=8,
        num_stages=3),
    "swiglu_fwd": dict(
        signature=dict(a_ptr="*bf16", b_ptr="*bf16", c_ptr="*bf16", stride="i32", n_cols=_C, BLOCK_SIZE=_C),
        constexprs=dict(n_cols=4096, BLOCK_SIZE=4096),
        divisible_by_16=["a_ptr", "b_ptr", "c_ptr", "stride"], num_warps=4, num_stages=3),
    "geglu_fwd": dict(
        signature=dict(a="*fp16", b="*fp16", c="*fp16", stride="i32", n_cols=_C, BLOCK_SIZE=_C),
        constexprs=dict(n_cols=4096, BLOCK_SIZE=4096),
        divisible_by_16=["a", "b", "c", "stride"], num_warps=4, num_stages=3),
    "vector_add": dict(
        signature=dict(x_ptr="*fp32", y_ptr="*fp32", output_ptr="*fp32", n_elements="i32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=1024),
        divisible_by_16=["x_ptr", "y_ptr", "output_ptr", "n_elements"], num_warps=4, num_stages=3),
}
for _name, _spec in DUMPS.items():
    _spec["kernel"] = KERNELS[_name]["kernel"]
