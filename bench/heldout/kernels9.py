"""Held-out Triton kernels, ninth batch: the official Triton tutorials not covered before (02 fused softmax,
03 matmul, 05 layer-norm forward, 06 fused attention and 09 persistent matmul are in earlier batches and the
corpus; 01 vector add is batch 8's `vector_add`, the same kernel). Written after the tutorials of Triton 3.6/3.9
(python/tutorials/*.py), the kernels' bodies as there, none tuned for twill:

- 05 layer-norm backward: `_layer_norm_bwd_dx_fused` (one program a row, dx, then the row's partial dw/db added
  into one of GROUP_SIZE_M buffers under a spin lock: `tl.atomic_cas`, `tl.atomic_xchg`, an `if` on a loaded
  count, `tl.debug_barrier`), and `_layer_norm_bwd_dwdb` (a column block a program, a loop over the rows of the
  partial buffers summing [BLOCK_M, BLOCK_N] tiles, column sums after the loop);
- 08 grouped GEMM: `grouped_matmul_kernel` (a device-side loop over the groups, a while loop over a group's
  tiles, the A/B/C pointers and sizes loaded from memory, fp16);
- 10 block-scaled matmul: `block_scaled_matmul_kernel` (tensor descriptors, mxfp8 `tl.dot_scaled` with 5-D
  scale descriptors, sm_100 only in the tutorial);
- 04 low-memory dropout: `_dropout` (a kept-mask tensor) and `_seeded_dropout` (`tl.rand(seed, offsets)`);
- 07 libdevice: `asin_kernel` (`libdevice.asin` on a flat vector).

Protocol for every kernel NAME (KERNELS at the bottom), as kernels.py:
    tensors, params = NAME_make_inputs(size, device)   # size: dict of overrides or None
    out = NAME_launch(*tensors, **params)                # runs the Triton kernel
    ref = NAME_reference(*tensors, **params)             # plain torch, fp32
DUMPS[NAME] holds what gen.py compiles the TTGIR dumps with (`gen.py --module kernels9`).
"""
import triton
import triton.language as tl

try:
    from triton.language.extra import libdevice
except ImportError:  # older releases
    from triton.language.math import libdevice  # noqa: F401

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


def _group_size_m(n):
    # the tutorial's heuristic for the number of partial dw/db buffers
    g = 64
    if n <= 8192:
        g = 96
    if n <= 4096:
        g = 128
    if n <= 1024:
        g = 256
    return g


# ---------------------------------------------------------------------------------------------
# 1. 05-layer-norm backward, dx and the partial dw/db: one program a row; dx from the row's two reductions;
#    then the row's dw/db partials added into buffer row % GROUP_SIZE_M under a spin lock.
# ---------------------------------------------------------------------------------------------
@triton.jit
def layer_norm_bwd_dx_kernel(DX, DY, DW, DB, X, W, Mean, Rstd, Lock, stride, N,
                             GROUP_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE_N)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    lock_id = row % GROUP_SIZE_M
    Lock += lock_id
    Count = Lock + GROUP_SIZE_M
    DW = DW + lock_id * N + cols
    DB = DB + lock_id * N + cols
    x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = (x - mean) * rstd
    wdy = w * dy
    xhat = tl.where(mask, xhat, 0.)
    wdy = tl.where(mask, wdy, 0.)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    dx = (wdy - (xhat * c1 + c2)) * rstd
    tl.store(DX + cols, dx, mask=mask)
    partial_dw = (dy * xhat).to(w.dtype)
    partial_db = (dy).to(w.dtype)
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    count = tl.load(Count)
    if count == 0:
        tl.atomic_xchg(Count, 1)
    else:
        partial_dw += tl.load(DW, mask=mask)
        partial_db += tl.load(DB, mask=mask)
    tl.store(DW, partial_dw, mask=mask)
    tl.store(DB, partial_db, mask=mask)
    tl.debug_barrier()
    tl.atomic_xchg(Lock, 0)


def layer_norm_bwd_dx_launch(x, w, mean, rstd, dy):
    m, n = x.shape
    g = _group_size_m(n)
    locks = torch.zeros(2 * g, dtype=torch.int32, device=x.device)
    _dw = torch.zeros((g, n), dtype=torch.float32, device=x.device)
    _db = torch.zeros((g, n), dtype=torch.float32, device=x.device)
    dx = torch.empty_like(dy)
    block = triton.next_power_of_2(n)
    num_warps = min(max(block // 256, 1), 8)
    layer_norm_bwd_dx_kernel[(m,)](dx, dy, _dw, _db, x, w, mean, rstd, locks, x.stride(0), n,
                                   GROUP_SIZE_M=g, BLOCK_SIZE_N=block, num_warps=num_warps)
    return dx, _dw.sum(0), _db.sum(0)


def layer_norm_bwd_dx_reference(x, w, mean, rstd, dy):
    xf, dyf, wf = x.float(), dy.float(), w.float()
    xhat = (xf - mean[:, None]) * rstd[:, None]
    wdy = wf * dyf
    c1 = (xhat * wdy).mean(-1, keepdim=True)
    c2 = wdy.mean(-1, keepdim=True)
    return (wdy - (xhat * c1 + c2)) * rstd[:, None], (dyf * xhat).sum(0), dyf.sum(0)


def layer_norm_bwd_dx_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=4096, N=4096), size)
    torch.manual_seed(91)
    x = (-2.3 + 0.5 * torch.randn(s["M"], s["N"], device=device)).to(torch.float16)
    w = torch.rand(s["N"], device=device).to(torch.float32)
    dy = (0.1 * torch.randn(s["M"], s["N"], device=device)).to(torch.float16)
    xf = x.float()
    mean = xf.mean(-1)
    rstd = torch.rsqrt(xf.var(-1, unbiased=False) + 1e-5)
    return (x, w, mean, rstd, dy), {}


# ---------------------------------------------------------------------------------------------
# 2. 05-layer-norm backward, the final dw/db: a column block a program, a loop over the rows of the
#    [M, N] partial buffers, [BLOCK_M, BLOCK_N] tiles summed, the column sums after the loop.
# ---------------------------------------------------------------------------------------------
@triton.jit
def layer_norm_bwd_dwdb_kernel(DW, DB, FINAL_DW, FINAL_DB, M, N,
                               BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    dw = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for i in range(0, M, BLOCK_SIZE_M):
        rows = i + tl.arange(0, BLOCK_SIZE_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        dw += tl.load(DW + offs, mask=mask, other=0.)
        db += tl.load(DB + offs, mask=mask, other=0.)
    sum_dw = tl.sum(dw, axis=0)
    sum_db = tl.sum(db, axis=0)
    tl.store(FINAL_DW + cols, sum_dw, mask=cols < N)
    tl.store(FINAL_DB + cols, sum_db, mask=cols < N)


def layer_norm_bwd_dwdb_launch(dw_part, db_part):
    m, n = dw_part.shape
    dw = torch.empty(n, dtype=torch.float32, device=dw_part.device)
    db = torch.empty(n, dtype=torch.float32, device=dw_part.device)
    layer_norm_bwd_dwdb_kernel[(triton.cdiv(n, 128),)](dw_part, db_part, dw, db, m, n, BLOCK_SIZE_M=32,
                                                       BLOCK_SIZE_N=128)
    return dw, db


def layer_norm_bwd_dwdb_reference(dw_part, db_part):
    return dw_part.float().sum(0), db_part.float().sum(0)


def layer_norm_bwd_dwdb_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=128, N=4096), size)
    torch.manual_seed(92)
    return (torch.randn(s["M"], s["N"], device=device), torch.randn(s["M"], s["N"], device=device)), {}


# ---------------------------------------------------------------------------------------------
# 3. 08 grouped GEMM: NUM_SM programs walk the tiles of every GEMM of the group; the sizes, leading dimensions
#    and the A/B/C pointers of GEMM g are loaded from device arrays. fp16, fp32 accumulate.
# ---------------------------------------------------------------------------------------------
@triton.jit
def grouped_matmul_kernel(group_a_ptrs, group_b_ptrs, group_c_ptrs, group_gemm_sizes, g_lds, group_size,
                          NUM_SM: tl.constexpr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                          BLOCK_SIZE_K: tl.constexpr):
    tile_idx = tl.program_id(0)
    last_problem_end = 0
    for g in range(group_size):
        gm = tl.load(group_gemm_sizes + g * 3)
        gn = tl.load(group_gemm_sizes + g * 3 + 1)
        gk = tl.load(group_gemm_sizes + g * 3 + 2)
        num_m_tiles = tl.cdiv(gm, BLOCK_SIZE_M)
        num_n_tiles = tl.cdiv(gn, BLOCK_SIZE_N)
        num_tiles = num_m_tiles * num_n_tiles
        while (tile_idx >= last_problem_end and tile_idx < last_problem_end + num_tiles):
            k = gk
            lda = tl.load(g_lds + g * 3)
            ldb = tl.load(g_lds + g * 3 + 1)
            ldc = tl.load(g_lds + g * 3 + 2)
            a_ptr = tl.load(group_a_ptrs + g).to(tl.pointer_type(tl.float16))
            b_ptr = tl.load(group_b_ptrs + g).to(tl.pointer_type(tl.float16))
            c_ptr = tl.load(group_c_ptrs + g).to(tl.pointer_type(tl.float16))
            tile_idx_in_gemm = tile_idx - last_problem_end
            tile_m_idx = tile_idx_in_gemm // num_n_tiles
            tile_n_idx = tile_idx_in_gemm % num_n_tiles
            offs_am = tile_m_idx * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_bn = tile_n_idx * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            offs_k = tl.arange(0, BLOCK_SIZE_K)
            a_ptrs = a_ptr + offs_am[:, None] * lda + offs_k[None, :]
            b_ptrs = b_ptr + offs_k[:, None] * ldb + offs_bn[None, :]
            accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for kk in range(0, tl.cdiv(k, BLOCK_SIZE_K)):
                tl.multiple_of(a_ptrs, [16, 16])
                tl.multiple_of(b_ptrs, [16, 16])
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
                accumulator += tl.dot(a, b)
                a_ptrs += BLOCK_SIZE_K
                b_ptrs += BLOCK_SIZE_K * ldb
            c = accumulator.to(tl.float16)
            offs_cm = tile_m_idx * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_cn = tile_n_idx * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            c_ptrs = c_ptr + ldc * offs_cm[:, None] + offs_cn[None, :]
            tl.store(c_ptrs, c)
            tile_idx += NUM_SM
        last_problem_end = last_problem_end + num_tiles


def grouped_matmul_launch(*ab):
    a_list, b_list = ab[0::2], ab[1::2]
    dev = a_list[0].device
    cs, sizes, lds = [], [], []
    for a, b in zip(a_list, b_list):
        m, k = a.shape
        n = b.shape[1]
        c = torch.empty((m, n), device=dev, dtype=a.dtype)
        cs.append(c)
        sizes += [m, n, k]
        lds += [a.stride(0), b.stride(0), c.stride(0)]
    d_a = torch.tensor([a.data_ptr() for a in a_list], device=dev)
    d_b = torch.tensor([b.data_ptr() for b in b_list], device=dev)
    d_c = torch.tensor([c.data_ptr() for c in cs], device=dev)
    d_sizes = torch.tensor(sizes, dtype=torch.int32, device=dev)
    d_lds = torch.tensor(lds, dtype=torch.int32, device=dev)
    num_sm = torch.cuda.get_device_properties(dev).multi_processor_count
    grouped_matmul_kernel[(num_sm,)](d_a, d_b, d_c, d_sizes, d_lds, len(a_list), NUM_SM=num_sm, BLOCK_SIZE_M=128,
                                     BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, num_warps=4, num_stages=3)
    return tuple(cs)


def grouped_matmul_reference(*ab):
    return tuple(a.float() @ b.float() for a, b in zip(ab[0::2], ab[1::2]))


def grouped_matmul_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=1024, K=1024, G=4), size)
    torch.manual_seed(93)
    ab = []
    for _ in range(s["G"]):
        ab += [torch.rand(s["M"], s["K"], device=device, dtype=torch.float16),
               torch.rand(s["K"], s["N"], device=device, dtype=torch.float16)]
    return tuple(ab), {}


# ---------------------------------------------------------------------------------------------
# 4. 10 block-scaled matmul (mxfp8: e4m3 A [M, K] and B [N, K], one e8m0 scale a 32 elements of K, scales
#    pre-shuffled into 5-D [1, M/128, K/128, 2, 256] blocks), through tensor descriptors. The tutorial runs it
#    on sm_100 only.
# ---------------------------------------------------------------------------------------------
@triton.jit
def block_scaled_matmul_kernel(a_desc, a_scale_desc, b_desc, b_scale_desc, c_desc, M: tl.constexpr,
                               N: tl.constexpr, K: tl.constexpr, output_type: tl.constexpr,
                               ELEM_PER_BYTE_A: tl.constexpr, ELEM_PER_BYTE_B: tl.constexpr,
                               VEC_SIZE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               BLOCK_K: tl.constexpr, rep_m: tl.constexpr, rep_n: tl.constexpr,
                               rep_k: tl.constexpr, NUM_STAGES: tl.constexpr):
    if output_type == 0:
        output_dtype = tl.float32
    elif output_type == 1:
        output_dtype = tl.float16
    elif output_type == 2:
        output_dtype = tl.float8e4nv
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    pid_m = pid % num_pid_m
    pid_n = pid // num_pid_m
    offs_am = pid_m * BLOCK_M
    offs_bn = pid_n * BLOCK_N
    offs_k_a = 0
    offs_k_b = 0
    offs_scale_m = pid_m * rep_m
    offs_scale_n = pid_n * rep_n
    offs_scale_k = 0
    MIXED_PREC: tl.constexpr = ELEM_PER_BYTE_A == 1 and ELEM_PER_BYTE_B == 2
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BLOCK_K), num_stages=NUM_STAGES):
        a = a_desc.load([offs_am, offs_k_a])
        b = b_desc.load([offs_bn, offs_k_b])
        scale_a = a_scale_desc.load([0, offs_scale_m, offs_scale_k, 0, 0])
        scale_b = b_scale_desc.load([0, offs_scale_n, offs_scale_k, 0, 0])
        scale_a = scale_a.reshape(rep_m, rep_k, 32, 4, 4).trans(0, 3, 2, 1, 4).reshape(BLOCK_M, BLOCK_K // VEC_SIZE)
        scale_b = scale_b.reshape(rep_n, rep_k, 32, 4, 4).trans(0, 3, 2, 1, 4).reshape(BLOCK_N, BLOCK_K // VEC_SIZE)
        if MIXED_PREC:
            accumulator = tl.dot_scaled(a, scale_a, "e4m3", b.T, scale_b, "e2m1", accumulator)
        elif ELEM_PER_BYTE_A == 2 and ELEM_PER_BYTE_B == 2:
            accumulator = tl.dot_scaled(a, scale_a, "e2m1", b.T, scale_b, "e2m1", accumulator)
        else:
            accumulator = tl.dot_scaled(a, scale_a, "e4m3", b.T, scale_b, "e4m3", accumulator)
        offs_k_a += BLOCK_K // ELEM_PER_BYTE_A
        offs_k_b += BLOCK_K // ELEM_PER_BYTE_B
        offs_scale_k += rep_k
    c_desc.store([offs_am, offs_bn], accumulator.to(output_dtype))


def _shuffle_scales(s):
    # [rows, K / 32] e8m0 -> the tutorial's 5-D pre-shuffled layout [1, rows / 128, K / 128, 2, 256]
    rows, kv = s.shape
    s = s.reshape(rows // 128, 4, 32, kv // 4, 4).permute(0, 3, 2, 1, 4)
    return s.reshape(1, rows // 128, kv // 4, 2, 256).contiguous()


def block_scaled_matmul_launch(a, b, a_scale, b_scale):
    from triton.tools.tensor_descriptor import TensorDescriptor
    m, k = a.shape
    n = b.shape[0]
    bm, bn, bk, vec = 128, 256, 128, 32
    rep_m, rep_n, rep_k = bm // 128, bn // 128, bk // vec // 4
    c = torch.empty((m, n), device=a.device, dtype=torch.float16)
    sa, sb = _shuffle_scales(a_scale), _shuffle_scales(b_scale)
    a_desc = TensorDescriptor.from_tensor(a, [bm, bk])
    b_desc = TensorDescriptor.from_tensor(b, [bn, bk])
    sa_desc = TensorDescriptor.from_tensor(sa, [1, rep_m, rep_k, 2, 256])
    sb_desc = TensorDescriptor.from_tensor(sb, [1, rep_n, rep_k, 2, 256])
    c_desc = TensorDescriptor.from_tensor(c, [bm, bn])
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    block_scaled_matmul_kernel[grid](a_desc, sa_desc, b_desc, sb_desc, c_desc, m, n, k, 1, 1, 1, vec, bm, bn, bk,
                                     rep_m, rep_n, rep_k, 4, num_warps=4)
    return c


def block_scaled_matmul_reference(a, b, a_scale, b_scale):
    sa = torch.exp2(a_scale.float() - 127).repeat_interleave(32, dim=1)
    sb = torch.exp2(b_scale.float() - 127).repeat_interleave(32, dim=1)
    return (a.float() * sa) @ (b.float() * sb).T


def block_scaled_matmul_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1024, N=1024, K=1024), size)
    torch.manual_seed(94)
    a = torch.randn(s["M"], s["K"], device=device).to(torch.float8_e4m3fn)
    b = torch.randn(s["N"], s["K"], device=device).to(torch.float8_e4m3fn)
    a_scale = torch.randint(124, 130, (s["M"], s["K"] // 32), device=device, dtype=torch.uint8)
    b_scale = torch.randint(124, 130, (s["N"], s["K"] // 32), device=device, dtype=torch.uint8)
    return (a, b, a_scale, b_scale), {}


# ---------------------------------------------------------------------------------------------
# 5. 04 low-memory dropout, the baseline: a kept-mask tensor x_keep (int32 0/1) loaded beside x.
# ---------------------------------------------------------------------------------------------
@triton.jit
def dropout_kernel(x_ptr, x_keep_ptr, output_ptr, n_elements, p, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    x_keep = tl.load(x_keep_ptr + offsets, mask=mask)
    output = tl.where(x_keep, x / (1 - p), 0.0)
    tl.store(output_ptr + offsets, output, mask=mask)


def dropout_launch(x, x_keep, p=0.5):
    out = torch.empty_like(x)
    n = x.numel()
    dropout_kernel[(triton.cdiv(n, 1024),)](x, x_keep, out, n, p, BLOCK_SIZE=1024)
    return out


def dropout_reference(x, x_keep, p=0.5):
    return torch.where(x_keep != 0, x.float() / (1 - p), 0.0)


def dropout_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(N=98432), size)
    torch.manual_seed(95)
    return (torch.randn(s["N"], device=device), (torch.rand(s["N"], device=device) > 0.5).to(torch.int32)), {}


# ---------------------------------------------------------------------------------------------
# 6. 04 low-memory dropout, seeded: the kept mask from tl.rand(seed, offsets) (Philox in the kernel).
# ---------------------------------------------------------------------------------------------
@triton.jit
def seeded_dropout_kernel(x_ptr, output_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    random = tl.rand(seed, offsets)
    x_keep = random > p
    output = tl.where(x_keep, x / (1 - p), 0.0)
    tl.store(output_ptr + offsets, output, mask=mask)


def seeded_dropout_launch(x, p=0.5, seed=123):
    out = torch.empty_like(x)
    n = x.numel()
    seeded_dropout_kernel[(triton.cdiv(n, 1024),)](x, out, n, p, seed, BLOCK_SIZE=1024)
    return out


def seeded_dropout_reference(x, p=0.5, seed=123):
    # no torch Philox of Triton's: the reference is the kernel's own kept set, checked for its scale only
    out = seeded_dropout_launch(x, p, seed).float()
    return torch.where(out != 0, x.float() / (1 - p), 0.0)


def seeded_dropout_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(N=98432), size)
    torch.manual_seed(96)
    return (torch.randn(s["N"], device=device),), {}


# ---------------------------------------------------------------------------------------------
# 7. 07 libdevice: y = asin(x) on a flat vector, libdevice's asin.
# ---------------------------------------------------------------------------------------------
@triton.jit
def asin_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    x = libdevice.asin(x)
    tl.store(y_ptr + offsets, x, mask=mask)


def asin_launch(x):
    y = torch.empty_like(x)
    n = x.numel()
    asin_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK_SIZE=1024)
    return y


def asin_reference(x):
    return torch.asin(x.float())


def asin_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(N=98432), size)
    torch.manual_seed(97)
    return (torch.rand(s["N"], device=device) * 2 - 1,), {}


NAMES = ("layer_norm_bwd_dx", "layer_norm_bwd_dwdb", "grouped_matmul", "block_scaled_matmul", "dropout",
         "seeded_dropout", "asin")
KERNELS = {}
for _name in NAMES:
    KERNELS[_name] = dict(kernel=globals()[_name + "_kernel"], launch=globals()[_name + "_launch"],
                          reference=globals()[_name + "_reference"],
                          make_inputs=globals()[_name + "_make_inputs"])

_C = "constexpr"
DUMPS = {
    "layer_norm_bwd_dx": dict(
        signature=dict(DX="*fp16", DY="*fp16", DW="*fp32", DB="*fp32", X="*fp16", W="*fp32", Mean="*fp32",
                       Rstd="*fp32", Lock="*i32", stride="i32", N="i32", GROUP_SIZE_M=_C, BLOCK_SIZE_N=_C),
        constexprs=dict(GROUP_SIZE_M=128, BLOCK_SIZE_N=4096),
        divisible_by_16=["DX", "DY", "DW", "DB", "X", "W", "Mean", "Rstd", "Lock", "stride", "N"],
        num_warps=8, num_stages=3),
    "layer_norm_bwd_dwdb": dict(
        signature=dict(DW="*fp32", DB="*fp32", FINAL_DW="*fp32", FINAL_DB="*fp32", M="i32", N="i32",
                       BLOCK_SIZE_M=_C, BLOCK_SIZE_N=_C),
        constexprs=dict(BLOCK_SIZE_M=32, BLOCK_SIZE_N=128),
        divisible_by_16=["DW", "DB", "FINAL_DW", "FINAL_DB", "M", "N"], num_warps=4, num_stages=3),
    "grouped_matmul": dict(
        signature=dict(group_a_ptrs="*i64", group_b_ptrs="*i64", group_c_ptrs="*i64", group_gemm_sizes="*i32",
                       g_lds="*i32", group_size="i32", NUM_SM=_C, BLOCK_SIZE_M=_C, BLOCK_SIZE_N=_C,
                       BLOCK_SIZE_K=_C),
        constexprs=dict(NUM_SM=132, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64),
        divisible_by_16=["group_a_ptrs", "group_b_ptrs", "group_c_ptrs", "group_gemm_sizes", "g_lds"],
        num_warps=4, num_stages=3),
    "block_scaled_matmul": dict(
        signature=dict(a_desc="tensordesc<fp8e4nv[128, 128]>", a_scale_desc="tensordesc<u8[1, 1, 1, 2, 256]>",
                       b_desc="tensordesc<fp8e4nv[256, 128]>", b_scale_desc="tensordesc<u8[1, 2, 1, 2, 256]>",
                       c_desc="tensordesc<fp16[128, 256]>", M=_C, N=_C, K=_C, output_type=_C,
                       ELEM_PER_BYTE_A=_C, ELEM_PER_BYTE_B=_C, VEC_SIZE=_C, BLOCK_M=_C, BLOCK_N=_C, BLOCK_K=_C,
                       rep_m=_C, rep_n=_C, rep_k=_C, NUM_STAGES=_C),
        constexprs=dict(M=1024, N=1024, K=1024, output_type=1, ELEM_PER_BYTE_A=1, ELEM_PER_BYTE_B=1, VEC_SIZE=32,
                        BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, rep_m=1, rep_n=2, rep_k=1, NUM_STAGES=4),
        divisible_by_16=[], num_warps=4, num_stages=4),
    "dropout": dict(
        signature=dict(x_ptr="*fp32", x_keep_ptr="*i32", output_ptr="*fp32", n_elements="i32", p="fp32",
                       BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=1024),
        divisible_by_16=["x_ptr", "x_keep_ptr", "output_ptr", "n_elements"], num_warps=4, num_stages=3),
    "seeded_dropout": dict(
        signature=dict(x_ptr="*fp32", output_ptr="*fp32", n_elements="i32", p="fp32", seed="i32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=1024),
        divisible_by_16=["x_ptr", "output_ptr", "n_elements"], num_warps=4, num_stages=3),
    "asin": dict(
        signature=dict(x_ptr="*fp32", y_ptr="*fp32", n_elements="i32", BLOCK_SIZE=_C),
        constexprs=dict(BLOCK_SIZE=1024),
        divisible_by_16=["x_ptr", "y_ptr", "n_elements"], num_warps=4, num_stages=3),
}
for _name, _spec in DUMPS.items():
    _spec["kernel"] = KERNELS[_name]["kernel"]
