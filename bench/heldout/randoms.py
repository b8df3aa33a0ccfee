"""Random numbers in Triton kernels (`tl.rand`, issue #21), the forms users write beyond the two held-out ones (batch
9's seeded dropout, batch 6's attention dropout): each imports, its `rand` op drawing Triton's Philox stream at the
element's offsets, or is refused at its TTGIR line naming tl.rand. Dumps in tests/data/ttgir/randoms (gen.py --module
randoms, Triton 3.9 and 3.6); tests/test_rand.py reads them.

- `dropout_rows`: one row a program, the row whole in one tile: offsets `row * stride + cols` (`row = stride`);
- `dropout_rows_loop`: the same over a column loop of BLOCK columns;
- `dropout_2d`: a [64, 64] block of a 2-D grid, offsets `rm[:, None] * stride + rn[None, :]`;
- `rand_rounds7`: the tutorial's flat dropout with `n_rounds=7`;
- `noise_flat`: `x + scale * tl.rand(seed, offs)`, the seed an i64 argument;
- refused: `randn_flat` (tl.randn: Box-Muller of two words), `seed_ptr` (the seed loaded from memory),
  `gemm_dropout` (tl.rand of the output tile after the K loop: a GEMM's dropout in its epilogue).

Protocol for every kernel NAME (KERNELS at the bottom), as kernels.py:
    tensors, params = NAME_make_inputs(size, device)
    out = NAME_launch(*tensors, **params)                # runs the Triton kernel
    ref = NAME_reference(*tensors, **params)             # torch, fp32, its random numbers from twill/philox.py (numpy)
The references draw Triton's stream in numpy (twill/philox.py) at each element's offset: a binding whose numbers
differ from Triton's fails them, and so does Triton's own launch if the stream in numpy is not Triton's.
"""
import os
import sys

import triton
import triton.language as tl

try:
    import torch
except ImportError:  # dumping TTGIR needs no torch
    torch = None

_C = "constexpr"


def _sizes(defaults, size):
    out = dict(defaults)
    if size:
        unknown = set(size) - set(defaults)
        if unknown:
            raise KeyError(f"unknown size keys {sorted(unknown)}; known: {sorted(defaults)}")
        out.update(size)
    return out


def _rand(seed, offsets, rounds=10):
    """Triton's tl.rand at integer offsets (a torch tensor), in numpy (twill/philox.py), as a float32 tensor there."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    from twill import philox
    u = philox.rand(seed, offsets.cpu().numpy().astype("int64"), rounds)
    return torch.from_numpy(u).to(offsets.device)


def _dropout(x, u, p):
    return torch.where(u > p, x.float() / (1 - p), 0.0)


# ---------------------------------------------------------------------------------------------
@triton.jit
def dropout_rows_kernel(X, Y, stride, N, p, seed, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    offs = row * stride + cols
    mask = cols < N
    x = tl.load(X + offs, mask=mask)
    r = tl.rand(seed, offs)
    tl.store(Y + offs, tl.where(r > p, x / (1 - p), 0.0), mask=mask)


def dropout_rows_launch(x, p=0.3, seed=2024):
    M, N = x.shape
    y = torch.empty_like(x)
    dropout_rows_kernel[(M,)](x, y, x.stride(0), N, p, seed, BLOCK=triton.next_power_of_2(N))
    return y


def dropout_rows_reference(x, p=0.3, seed=2024):
    M, N = x.shape
    offs = torch.arange(M, device=x.device)[:, None] * x.stride(0) + torch.arange(N, device=x.device)[None, :]
    return _dropout(x, _rand(seed, offs), p)


def dropout_rows_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1000, N=1000), size)
    torch.manual_seed(71)
    return (torch.randn(s["M"], s["N"], device=device),), {}


# ---------------------------------------------------------------------------------------------
@triton.jit
def dropout_rows_loop_kernel(X, Y, stride, N, p, seed, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        offs = row * stride + cols
        mask = cols < N
        x = tl.load(X + offs, mask=mask)
        r = tl.rand(seed, offs)
        tl.store(Y + offs, tl.where(r > p, x / (1 - p), 0.0), mask=mask)


def dropout_rows_loop_launch(x, p=0.3, seed=2024):
    M, N = x.shape
    y = torch.empty_like(x)
    dropout_rows_loop_kernel[(M,)](x, y, x.stride(0), N, p, seed, BLOCK=512)
    return y


def dropout_rows_loop_reference(x, p=0.3, seed=2024):
    return dropout_rows_reference(x, p, seed)


def dropout_rows_loop_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1000, N=5000), size)
    torch.manual_seed(72)
    return (torch.randn(s["M"], s["N"], device=device),), {}


# ---------------------------------------------------------------------------------------------
@triton.jit
def dropout_2d_kernel(X, Y, M, N, stride, p, seed, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    offs = rm[:, None] * stride + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(X + offs, mask=mask)
    r = tl.rand(seed, offs)
    tl.store(Y + offs, tl.where(r > p, x / (1 - p), 0.0), mask=mask)


def dropout_2d_launch(x, p=0.3, seed=-5):
    M, N = x.shape
    y = torch.empty_like(x)
    dropout_2d_kernel[(triton.cdiv(M, 64), triton.cdiv(N, 64))](x, y, M, N, x.stride(0), p, seed, BM=64, BN=64)
    return y


def dropout_2d_reference(x, p=0.3, seed=-5):
    return dropout_rows_reference(x, p, seed)


def dropout_2d_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(M=1000, N=1000), size)
    torch.manual_seed(73)
    return (torch.randn(s["M"], s["N"], device=device),), {}


# ---------------------------------------------------------------------------------------------
@triton.jit
def rand_rounds7_kernel(X, Y, n, p, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask)
    r = tl.rand(seed, offs, n_rounds=7)
    tl.store(Y + offs, tl.where(r > p, x / (1 - p), 0.0), mask=mask)


def rand_rounds7_launch(x, p=0.5, seed=77):
    y = torch.empty_like(x)
    n = x.numel()
    rand_rounds7_kernel[(triton.cdiv(n, 1024),)](x, y, n, p, seed, BLOCK=1024)
    return y


def rand_rounds7_reference(x, p=0.5, seed=77):
    return _dropout(x, _rand(seed, torch.arange(x.numel(), device=x.device), 7), p)


def rand_rounds7_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(N=98432), size)
    torch.manual_seed(74)
    return (torch.randn(s["N"], device=device),), {}


# ---------------------------------------------------------------------------------------------
@triton.jit
def noise_flat_kernel(X, Y, n, scale, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask)
    tl.store(Y + offs, x + scale * tl.rand(seed, offs), mask=mask)


def noise_flat_launch(x, scale=0.25, seed=(1 << 40) + 9):
    y = torch.empty_like(x)
    n = x.numel()
    noise_flat_kernel[(triton.cdiv(n, 1024),)](x, y, n, scale, seed, BLOCK=1024)
    return y


def noise_flat_reference(x, scale=0.25, seed=(1 << 40) + 9):
    return x.float() + scale * _rand(seed, torch.arange(x.numel(), device=x.device))


def noise_flat_make_inputs(size=None, device="cuda"):
    s = _sizes(dict(N=1 << 20), size)
    torch.manual_seed(75)
    return (torch.randn(s["N"], device=device),), {}


# ---------------------------------------------------------------------------------------------
# refused: tl.randn, a seed loaded from memory, tl.rand after a GEMM's K loop
@triton.jit
def randn_flat_kernel(X, Y, n, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask)
    tl.store(Y + offs, x + tl.randn(seed, offs), mask=mask)


@triton.jit
def seed_ptr_kernel(X, Y, n, p, S, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    seed = tl.load(S)
    x = tl.load(X + offs, mask=mask)
    r = tl.rand(seed, offs)
    tl.store(Y + offs, tl.where(r > p, x / (1 - p), 0.0), mask=mask)


@triton.jit
def gemm_dropout_kernel(A, B, C, M, N, K, sa, sb, sc, p, seed, BM: tl.constexpr, BN: tl.constexpr,
                        BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K, BK):
        a = tl.load(A + rm[:, None] * sa + (k + rk)[None, :])
        b = tl.load(B + (k + rk)[:, None] * sb + rn[None, :])
        acc += tl.dot(a, b)
    offs = rm[:, None] * sc + rn[None, :]
    keep = tl.rand(seed, offs) > p
    tl.store(C + offs, tl.where(keep, acc / (1 - p), 0.0).to(tl.float16))


NAMES = ("dropout_rows", "dropout_rows_loop", "dropout_2d", "rand_rounds7", "noise_flat")
KERNELS = {}
for _name in NAMES:
    KERNELS[_name] = dict(kernel=globals()[_name + "_kernel"], launch=globals()[_name + "_launch"],
                          reference=globals()[_name + "_reference"],
                          make_inputs=globals()[_name + "_make_inputs"])


def _flat(**signature):
    return dict(signature=signature, constexprs=dict(BLOCK=1024), divisible_by_16=["X", "Y", "n"], num_warps=4,
                num_stages=3)


_ROWS = dict(signature=dict(X="*fp32", Y="*fp32", stride="i32", N="i32", p="fp32", seed="i32", BLOCK=_C),
             divisible_by_16=["X", "Y", "stride"], num_warps=4, num_stages=3)
DUMPS = {
    "dropout_rows": dict(kernel=dropout_rows_kernel, constexprs=dict(BLOCK=1024), **_ROWS),
    "dropout_rows_loop": dict(kernel=dropout_rows_loop_kernel, constexprs=dict(BLOCK=512), **_ROWS),
    "dropout_2d": dict(kernel=dropout_2d_kernel,
                       signature=dict(X="*fp32", Y="*fp32", M="i32", N="i32", stride="i32", p="fp32", seed="i32",
                                      BM=_C, BN=_C),
                       constexprs=dict(BM=64, BN=64), divisible_by_16=["X", "Y", "stride"], num_warps=4, num_stages=3),
    "rand_rounds7": dict(kernel=rand_rounds7_kernel,
                         **_flat(X="*fp32", Y="*fp32", n="i32", p="fp32", seed="i32", BLOCK=_C)),
    "noise_flat": dict(kernel=noise_flat_kernel,
                       **_flat(X="*fp32", Y="*fp32", n="i32", scale="fp32", seed="i64", BLOCK=_C)),
    "randn_flat": dict(kernel=randn_flat_kernel, **_flat(X="*fp32", Y="*fp32", n="i32", seed="i32", BLOCK=_C)),
    "seed_ptr": dict(kernel=seed_ptr_kernel, **_flat(X="*fp32", Y="*fp32", n="i32", p="fp32", S="*i32", BLOCK=_C)),
    "gemm_dropout": dict(kernel=gemm_dropout_kernel,
                         signature=dict(A="*fp16", B="*fp16", C="*fp16", M="i32", N="i32", K="i32", sa="i32", sb="i32",
                                        sc="i32", p="fp32", seed="i32", BM=_C, BN=_C, BK=_C),
                         constexprs=dict(BM=128, BN=128, BK=64), divisible_by_16=["A", "B", "C", "sa", "sb", "sc"],
                         num_warps=8, num_stages=3),
}
