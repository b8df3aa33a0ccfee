"""Held-out Triton kernels, tenth batch: the kernels users bring that batches 1-9 did not cover, written the way
Liger-Kernel, vLLM, unsloth and the Triton tutorials write them, none tuned for twill:

- rotary embedding, Liger's `_triton_rope`: one program a token, the token's heads as a [pad_n_qh, hd / 2] tile,
  the first and second halves of each head (`x[..., :D/2]`, `x[..., D/2:]`) read through two offsets, one cos and
  one sin row broadcast over the heads, q and k rotated IN PLACE; bf16;
- fused residual add + RMSNorm, vLLM's `fused_add_rms_norm` as a Triton row kernel: h = x + residual written back
  over the residual (in place), y = h * rstd * w; bf16, one program a row, no loop;
- softmax backward: dx = y * (dy - sum(y * dy)), one program a row, no loop; fp16;
- bias + GELU over a 2-D tensor: a 2-D grid of [BLOCK_M, BLOCK_N] blocks (program ids on both axes), a bias
  per column, GELU's tanh approximation written with `2 * sigmoid(2z) - 1` (no libdevice); fp16;
- exact GELU over a flat tensor (`0.5 x (1 + erf(x / sqrt 2))`, `tl.math.erf`), bf16;
- KL divergence of two logit rows, log-softmax inside: sum(p * (log p - log q)) per row, one program a row;
- Liger's `_kldiv_kernel_forward` (log-probabilities in, a loop over column chunks, the row's loss sum stored);
- the persistent matmul of tutorial 09 through `tl.make_tensor_descriptor`, its tile loop written
  `tl.range(start_pid, num_tiles, NUM_SMS, flatten=True)` (Triton fuses the K loop into it).

Protocol for every kernel NAME (KERNELS at the bottom), as kernels.py:
    tensors, params = NAME_make_inputs(size, device)   # size: dict of overrides or None
    out = NAME_launch(*tensors, **params)                # runs the Triton kernel
    ref = NAME_reference(*tensors, **params)             # plain torch, fp32
DUMPS[NAME] holds what gen.py compiles the TTGIR dumps with (`gen.py --module kernels10`).
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
# 1. RoPE, Liger's _triton_rope (forward): q [bsz, seq, n_qh, hd], k [bsz, seq, n_kh, hd] contiguous, cos/sin
#    [1, seq, hd] (the second half of each row repeats the first, as HF's rotary tables); one program a token,
#    its heads' halves as [pad_n_qh, pad_hd // 2] tiles; q and k rotated in place.
# ---------------------------------------------------------------------------------------------
@triton.jit
def rope_fwd_kernel(q_ptr, q_row_stride, k_ptr, k_row_stride, cos, cos_row_stride, sin, sin_row_stride, sl,
                    bs: tl.constexpr, cos_bs: tl.constexpr, n_qh: tl.constexpr, n_kh: tl.constexpr,
                    hd: tl.constexpr, pad_n_qh: tl.constexpr, pad_n_kh: tl.constexpr, pad_hd: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    q_ptr = q_ptr + pid * q_row_stride
    k_ptr = k_ptr + pid * k_row_stride
    batch_idx = pid // sl
    cos_row_idx = pid % sl
    cos = cos + tl.where(cos_bs == 1, cos_row_idx * cos_row_stride,
                         batch_idx * (sl * cos_row_stride) + cos_row_idx * cos_row_stride)
    sin = sin + tl.where(cos_bs == 1, cos_row_idx * sin_row_stride,
                         batch_idx * (sl * sin_row_stride) + cos_row_idx * sin_row_stride)
    cos_offsets = tl.arange(0, pad_hd // 2)
    cos_mask = cos_offsets < hd // 2
    cos_row = tl.load(cos + cos_offsets, mask=cos_mask, other=0)
    sin_row = tl.load(sin + cos_offsets, mask=cos_mask, other=0)

    first_half_q_offsets = tl.arange(0, pad_n_qh)[:, None] * hd + tl.arange(0, pad_hd // 2)[None, :]
    first_half_k_offsets = tl.arange(0, pad_n_kh)[:, None] * hd + tl.arange(0, pad_hd // 2)[None, :]
    first_q_mask = (tl.arange(0, pad_n_qh)[:, None] < n_qh) & (tl.arange(0, pad_hd // 2)[None, :] < hd // 2)
    first_k_mask = (tl.arange(0, pad_n_kh)[:, None] < n_kh) & (tl.arange(0, pad_hd // 2)[None, :] < hd // 2)
    q_tile_1 = tl.load(q_ptr + first_half_q_offsets, mask=first_q_mask, other=0).to(sin_row.dtype)
    k_tile_1 = tl.load(k_ptr + first_half_k_offsets, mask=first_k_mask, other=0).to(sin_row.dtype)

    second_half_q_offsets = first_half_q_offsets + (hd // 2)
    second_half_k_offsets = first_half_k_offsets + (hd // 2)
    second_q_mask = first_q_mask
    second_k_mask = first_k_mask
    q_tile_2 = tl.load(q_ptr + second_half_q_offsets, mask=second_q_mask, other=0).to(sin_row.dtype)
    k_tile_2 = tl.load(k_ptr + second_half_k_offsets, mask=second_k_mask, other=0).to(sin_row.dtype)

    new_q_tile_1 = q_tile_1 * cos_row - q_tile_2 * sin_row
    tl.store(q_ptr + first_half_q_offsets, new_q_tile_1, mask=first_q_mask)
    new_q_tile_2 = q_tile_2 * cos_row + q_tile_1 * sin_row
    tl.store(q_ptr + second_half_q_offsets, new_q_tile_2, mask=second_q_mask)

    new_k_tile_1 = k_tile_1 * cos_row - k_tile_2 * sin_row
    tl.store(k_ptr + first_half_k_offsets, new_k_tile_1, mask=first_k_mask)
    new_k_tile_2 = k_tile_2 * cos_row + k_tile_1 * sin_row
    tl.store(k_ptr + second_half_k_offsets, new_k_tile_2, mask=second_k_mask)


def rope_fwd_launch(q, k, cos, sin):
    q, k = q.clone(), k.clone()  # rotated in place: the caller's tensors stay the inputs
    bsz, seq, n_qh, hd = q.shape
    n_kh = k.shape[2]
    n_row = bsz * seq
    rope_fwd_kernel[(n_row,)](q, q.stride(1), k, k.stride(1), cos, cos.stride(-2), sin, sin.stride(-2), seq,
                              bsz, cos.shape[0], n_qh, n_kh, hd, triton.next_power_of_2(n_qh),
                              triton.next_power_of_2(n_kh), triton.next_power_of_2(hd))
    return q, k


def rope_fwd_reference(q, k, cos, sin):
    def rot(x):
        x = x.float()
        h = x.shape[-1] // 2
        c, s = cos.float()[:, :, None, :], sin.float()[:, :, None, :]
        return x * c + torch.cat((-x[..., h:], x[..., :h]), -1) * s
    return rot(q), rot(k)


def rope_fwd_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(B=2, S=1024, HQ=32, HK=8, D=128), size)
    torch.manual_seed(101)
    q = torch.randn(s["B"], s["S"], s["HQ"], s["D"], device=device).to(torch.bfloat16)
    k = torch.randn(s["B"], s["S"], s["HK"], s["D"], device=device).to(torch.bfloat16)
    inv = 1.0 / (10000 ** (torch.arange(0, s["D"], 2, device=device).float() / s["D"]))
    ang = torch.arange(s["S"], device=device).float()[:, None] * inv[None, :]
    ang = torch.cat((ang, ang), -1)[None]
    return (q, k, ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)), {}


# ---------------------------------------------------------------------------------------------
# 2. Fused residual add + RMSNorm (vLLM's fused_add_rms_norm): h = x + residual, stored over the residual (in
#    place), y = h * rsqrt(mean(h^2) + eps) * w. One program a row, the row whole in one tile. bf16.
# ---------------------------------------------------------------------------------------------
@triton.jit
def add_rmsnorm_kernel(X, RES, W, Y, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(RES + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    h = x + r
    tl.store(RES + row * stride + cols, h.to(RES.dtype.element_ty), mask=mask)
    var = tl.sum(h * h, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    y = h * rstd * w
    tl.store(Y + row * stride + cols, y.to(Y.dtype.element_ty), mask=mask)


def add_rmsnorm_launch(x, residual, w, eps=1e-6):
    m, n = x.shape
    residual = residual.clone()  # updated in place
    y = torch.empty_like(x)
    add_rmsnorm_kernel[(m,)](x, residual, w, y, x.stride(0), n, eps, BLOCK_N=triton.next_power_of_2(n),
                             num_warps=8)
    return y, residual


def add_rmsnorm_reference(x, residual, w, eps=1e-6):
    h = x.float() + residual.float()
    return h * torch.rsqrt((h * h).mean(-1, keepdim=True) + eps) * w.float(), h


def add_rmsnorm_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=4096), size)
    torch.manual_seed(102)
    return (torch.randn(s["M"], s["N"], device=device).to(torch.bfloat16),
            torch.randn(s["M"], s["N"], device=device).to(torch.bfloat16),
            (1 + 0.1 * torch.randn(s["N"], device=device)).to(torch.bfloat16)), {}


# ---------------------------------------------------------------------------------------------
# 3. Softmax backward: dx = y * (dy - sum(y * dy)) per row, one program a row, the row whole in one tile. fp16.
# ---------------------------------------------------------------------------------------------
@triton.jit
def softmax_bwd_kernel(DX, DY, Y, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    y = tl.load(Y + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(DY + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    dot = tl.sum(y * dy, axis=0)
    dx = y * (dy - dot)
    tl.store(DX + row * stride + cols, dx.to(DX.dtype.element_ty), mask=mask)


def softmax_bwd_launch(y, dy):
    m, n = y.shape
    dx = torch.empty_like(dy)
    softmax_bwd_kernel[(m,)](dx, dy, y, y.stride(0), n, BLOCK_SIZE=triton.next_power_of_2(n), num_warps=8)
    return dx


def softmax_bwd_reference(y, dy):
    yf, dyf = y.float(), dy.float()
    return yf * (dyf - (yf * dyf).sum(-1, keepdim=True))


def softmax_bwd_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=4096), size)
    torch.manual_seed(103)
    y = torch.softmax(torch.randn(s["M"], s["N"], device=device) * 3, -1).to(torch.float16)
    return (y, torch.randn(s["M"], s["N"], device=device).to(torch.float16)), {}


# ---------------------------------------------------------------------------------------------
# 4. Bias + GELU (tanh approximation) over [M, N]: a 2-D grid of [64, 128] blocks, a bias per column; tanh(z)
#    written 2 * sigmoid(2z) - 1 as user code without libdevice does. fp16 in and out.
# ---------------------------------------------------------------------------------------------
@triton.jit
def bias_gelu_kernel(X, B, Y, M, N, stride_xm, stride_ym, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(X + rm[:, None] * stride_xm + rn[None, :], mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + rn, mask=rn < N, other=0.0).to(tl.float32)
    x = x + b[None, :]
    z = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = 2 * tl.sigmoid(2 * z) - 1
    y = 0.5 * x * (1 + t)
    tl.store(Y + rm[:, None] * stride_ym + rn[None, :], y.to(Y.dtype.element_ty), mask=mask)


def bias_gelu_launch(x, b):
    m, n = x.shape
    y = torch.empty_like(x)
    grid = (triton.cdiv(m, 64), triton.cdiv(n, 128))
    bias_gelu_kernel[grid](x, b, y, m, n, x.stride(0), y.stride(0), BLOCK_M=64, BLOCK_N=128, num_warps=4)
    return y


def bias_gelu_reference(x, b):
    v = x.float() + b.float()
    return 0.5 * v * (1 + torch.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3)))


def bias_gelu_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=4096), size)
    torch.manual_seed(104)
    return (torch.randn(s["M"], s["N"], device=device).to(torch.float16),
            (0.1 * torch.randn(s["N"], device=device)).to(torch.float16)), {}


# ---------------------------------------------------------------------------------------------
# 5. Exact GELU over a flat tensor: 0.5 x (1 + erf(x / sqrt 2)), tl.math.erf, one block of elements a program. bf16.
# ---------------------------------------------------------------------------------------------
@triton.jit
def gelu_erf_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offsets, y.to(tl.bfloat16), mask=mask)


def gelu_erf_launch(x):
    y = torch.empty_like(x)
    n = x.numel()
    gelu_erf_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK_SIZE=1024)
    return y


def gelu_erf_reference(x):
    return torch.nn.functional.gelu(x.float())


def gelu_erf_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(N=1 << 22), size)
    torch.manual_seed(105)
    return (torch.randn(s["N"], device=device).to(torch.bfloat16),), {}


# ---------------------------------------------------------------------------------------------
# 6. KL divergence of two logit rows, KL(softmax(p) || softmax(q)), the log-softmax of each inside: one program a
#    row, the row whole in one tile (other=-inf), the row's loss stored. fp32 loss, bf16 logits.
# ---------------------------------------------------------------------------------------------
@triton.jit
def kl_logits_kernel(P, Q, LOSS, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    p = tl.load(P + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    q = tl.load(Q + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    p = p - tl.max(p, axis=0)
    logp = p - tl.log(tl.sum(tl.exp(p), axis=0))
    q = q - tl.max(q, axis=0)
    logq = q - tl.log(tl.sum(tl.exp(q), axis=0))
    kl = tl.where(mask, tl.exp(logp) * (logp - logq), 0.0)
    tl.store(LOSS + row, tl.sum(kl, axis=0))


def kl_logits_launch(p, q):
    m, n = p.shape
    loss = torch.empty(m, device=p.device, dtype=torch.float32)
    kl_logits_kernel[(m,)](p, q, loss, p.stride(0), n, BLOCK_SIZE=triton.next_power_of_2(n), num_warps=8)
    return loss


def kl_logits_reference(p, q):
    lp, lq = torch.log_softmax(p.float(), -1), torch.log_softmax(q.float(), -1)
    return (lp.exp() * (lp - lq)).sum(-1)


def kl_logits_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=4096), size)
    torch.manual_seed(106)
    return (torch.randn(s["M"], s["N"], device=device).to(torch.bfloat16),
            torch.randn(s["M"], s["N"], device=device).to(torch.bfloat16)), {}


# ---------------------------------------------------------------------------------------------
# 7. Liger's _kldiv_kernel_forward (log_target=False, reduction batchmean): y the input's log-probabilities, y_true
#    the target's probabilities; a loop over column chunks of one row, y_true * (log(max(y_true, eps)) - y) summed,
#    the row's sum stored (the host divides by the batch). fp32.
# ---------------------------------------------------------------------------------------------
@triton.jit
def kldiv_rows_kernel(y_ptr, y_stride, gt_ptr, gt_stride, loss_ptr, loss_stride, n_cols, eps,
                      BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    y_ptr += pid * y_stride
    gt_ptr += pid * gt_stride
    loss_ptr += pid * loss_stride
    base_offsets = tl.arange(0, BLOCK_SIZE)
    loss_sum = 0.0
    for i in range(0, n_cols, BLOCK_SIZE):
        offsets = i + base_offsets
        mask = offsets < n_cols
        y = tl.load(y_ptr + offsets, mask=mask, other=0.0)
        y_true = tl.load(gt_ptr + offsets, mask=mask, other=0.0)
        loss = y_true * (tl.log(tl.maximum(y_true, eps)) - y)
        loss_sum += tl.sum(loss, axis=0)
    tl.store(loss_ptr, loss_sum)


def kldiv_rows_launch(y, y_true, eps=1e-10):
    m, n = y.shape
    loss = torch.empty(m, device=y.device, dtype=torch.float32)
    kldiv_rows_kernel[(m,)](y, y.stride(0), y_true, y_true.stride(0), loss, loss.stride(0), n, eps,
                            BLOCK_SIZE=min(triton.next_power_of_2(n), 32768 // 4), num_warps=32)
    return loss


def kldiv_rows_reference(y, y_true, eps=1e-10):
    t = y_true.float()
    return (t * (torch.log(torch.clamp(t, min=eps)) - y.float())).sum(-1)


def kldiv_rows_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=32000), size)
    torch.manual_seed(107)
    y = torch.log_softmax(torch.randn(s["M"], s["N"], device=device), -1)
    return (y, torch.softmax(torch.randn(s["M"], s["N"], device=device), -1)), {}


# ---------------------------------------------------------------------------------------------
# 8. Tutorial 09's persistent matmul through in-kernel tensor descriptors, the tile loop `tl.range(start_pid,
#    num_tiles, NUM_SMS, flatten=True)` (Triton fuses the K loop into it); grouped tile order; B as [N, K]; fp16.
# ---------------------------------------------------------------------------------------------
@triton.jit
def _compute_pid(tile_id, num_pid_in_group, num_pid_m, GROUP_SIZE_M: tl.constexpr):
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def mm_persistent_flat_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                              BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr):
    dtype = c_ptr.dtype.element_ty
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
    num_tiles = num_pid_m * num_pid_n
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_SIZE_N, BLOCK_SIZE_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N])
    tile_id_c = start_pid - NUM_SMS
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = _compute_pid(tile_id, num_pid_in_group, num_pid_m, GROUP_SIZE_M)
        offs_am = pid_m * BLOCK_SIZE_M
        offs_bn = pid_n * BLOCK_SIZE_N
        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_SIZE_K
            a = a_desc.load([offs_am, offs_k])
            b = b_desc.load([offs_bn, offs_k])
            accumulator = tl.dot(a, b.T, accumulator)
        tile_id_c += NUM_SMS
        pid_m, pid_n = _compute_pid(tile_id_c, num_pid_in_group, num_pid_m, GROUP_SIZE_M)
        c_desc.store([pid_m * BLOCK_SIZE_M, pid_n * BLOCK_SIZE_N], accumulator.to(dtype))


def mm_persistent_flat_launch(a, b):
    m, k = a.shape
    n = b.shape[0]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device=a.device))
    grid = (min(sms, triton.cdiv(m, 128) * triton.cdiv(n, 128)),)
    mm_persistent_flat_kernel[grid](a, b, c, m, n, k, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64,
                                    GROUP_SIZE_M=8, NUM_SMS=sms, num_stages=3, num_warps=8)
    return c


def mm_persistent_flat_reference(a, b):
    return a.float() @ b.float().T


def mm_persistent_flat_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=4096, K=4096), size)
    torch.manual_seed(108)
    return (torch.randn(s["M"], s["K"], device=device).to(torch.float16),
            torch.randn(s["N"], s["K"], device=device).to(torch.float16)), {}


NAMES = ("rope_fwd", "add_rmsnorm", "softmax_bwd", "bias_gelu", "gelu_erf", "kl_logits", "kldiv_rows",
         "mm_persistent_flat")
KERNELS = {}
for _name in NAMES:
    KERNELS[_name] = dict(kernel=globals()[_name + "_kernel"], launch=globals()[_name + "_launch"],
                          reference=globals()[_name + "_reference"],
                          make_inputs=globals()[_name + "_make_inputs"])

_C = "constexpr"
DUMPS = {
    "rope_fwd": dict(
        signature=dict(q_ptr="*bf16", q_row_stride="i32", k_ptr="*bf16", k_row_stride="i32", cos="*bf16",
                       cos_row_stride="i32", sin="*bf16", sin_row_stride="i32", sl="i32", bs=_C, cos_bs=_C,
                       n_qh=_C, n_kh=_C, hd=_C, pad_n_qh=_C, pad_n_kh=_C, pad_hd=_C),
        constexprs=dict(bs=2, cos_bs=1, n_qh=32, n_kh=8, hd=128, pad_n_qh=32, pad_n_kh=8, pad_hd=128),
        divisible_by_16=["q_ptr", "q_row_stride", "k_ptr", "k_row_stride", "cos", "cos_row_stride", "sin",
                         "sin_row_stride"],
        num_warps=4, num_stages=3),
    "add_rmsnorm": dict(
        signature=dict(X="*bf16", RES="*bf16", W="*bf16", Y="*bf16", stride="i32", N="i32", eps="fp32", BLOCK_N=_C),
        constexprs=dict(BLOCK_N=4096),
        divisible_by_16=["X", "RES", "W", "Y", "stride", "N"], num_warps=8, num_stages=3),
    "softmax_bwd": dict(
        signature=dict(DX="*fp16", DY="*fp16", Y="*fp16", stride="i32", n_cols="i32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=4096),
        divisible_by_16=["DX", "DY", "Y", "stride", "n_cols"], num_warps=8, num_stages=3),
    "bias_gelu": dict(
        signature=dict(X="*fp16", B="*fp16", Y="*fp16", M="i32", N="i32", stride_xm="i32", stride_ym="i32",
                       BLOCK_M=_C, BLOCK_N=_C),
        constexprs=dict(BLOCK_M=64, BLOCK_N=128),
        divisible_by_16=["X", "B", "Y", "M", "N", "stride_xm", "stride_ym"], num_warps=4, num_stages=3),
    "gelu_erf": dict(
        signature=dict(x_ptr="*bf16", y_ptr="*bf16", n_elements="i32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=1024),
        divisible_by_16=["x_ptr", "y_ptr", "n_elements"], num_warps=4, num_stages=3),
    "kl_logits": dict(
        signature=dict(P="*bf16", Q="*bf16", LOSS="*fp32", stride="i32", n_cols="i32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=4096),
        divisible_by_16=["P", "Q", "LOSS", "stride", "n_cols"], num_warps=8, num_stages=3),
    "kldiv_rows": dict(
        signature=dict(y_ptr="*fp32", y_stride="i32", gt_ptr="*fp32", gt_stride="i32", loss_ptr="*fp32",
                       loss_stride="i32", n_cols="i32", eps="fp32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=8192),
        divisible_by_16=["y_ptr", "y_stride", "gt_ptr", "gt_stride", "loss_ptr", "n_cols"], num_warps=32,
        num_stages=3),
    "mm_persistent_flat": dict(
        signature=dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp16", M="i32", N="i32", K="i32", BLOCK_SIZE_M=_C,
                       BLOCK_SIZE_N=_C, BLOCK_SIZE_K=_C, GROUP_SIZE_M=_C, NUM_SMS=_C),
        constexprs=dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, NUM_SMS=132),
        divisible_by_16=["a_ptr", "b_ptr", "c_ptr", "M", "N", "K"], num_warps=8, num_stages=3),
}
for _name, _spec in DUMPS.items():
    _spec["kernel"] = KERNELS[_name]["kernel"]
