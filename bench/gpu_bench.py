#!/usr/bin/env python3
"""Build, check and time the kernels `twill emit-cuda` produces, next to cuBLAS, cuDNN SDPA and Triton.

Run on a machine with a Hopper GPU, from the repository root:

    python3 bench/gpu_bench.py --out OUTDIR          # writes OUTDIR/gpu-results.md and gpu-results.json

The kernels are the golden files of tests/test_emit.py, used unmodified: `tests/golden/emit/FIXTURE.cu`
is what `twill emit-cuda tests/data/emit/FIXTURE.json` writes (the solver's schedule of an example,
stored; tests/data/emit/regenerate.py says which graph and machine), and test_emit checks that it
still is. So the GPU machine needs no twill. Among them `gemm_hopper.h100`, `attention_fwd_hopper.h100`,
`attention_fwd_hopper.h200` and `attention_fwd_hopper_k192.h100`; h100.yaml keeps the Twill paper's
cost conventions, h200.yaml has exp2's latency as measured on the H200, and for the FA3 graph the
solver then chooses FA3's intra-warpgroup overlap.

(`--regenerate` re-emits them and their bindings from the stored schedules first, where `twill` is
installed.) Each is called through its binding, `tests/golden/emit/FIXTURE.py` beside the kernel, which
`twill emit-cuda --binding torch` writes (tests/test_binding.py keeps it golden): a function over torch
tensors in the layouts a user holds them, which builds `FIXTURE_entry.cu` (the kernel file included
unmodified, an extern "C" entry point) with nvcc into a cache keyed by content ($TWILL_CACHE_DIR/bindings,
or --build-dir) and launches it through ctypes. No shim is written here.

Layout conventions of the emitted kernels (docs/emit-cuda.md), as the bindings take them:
- GEMM: a [M][K] f16, b [K][N] f16 (both row-major), C [M][N]; output tiles of 128 x 256, K step 64.
  The graph's sub-tiles a0/a1 and acc0/acc1 are the two 64-row halves of each 128-row tile: the
  binding takes one A and one C and places the halves with the launcher's `*_rows_step`/`*_rows_offset`.
- attention: likewise one Q [BH][N][D] for q0/q1 and one O, m, l for out_acc*, out_m*, out_l* (the
  softmax statistics); k, v [BH][N][D], their N keys the loop's extent (`Problem::loop_extent`), so
  the 192-key graph runs N = 16384 with a partial last key tile. No packing or unpacking: every
  tensor is used where it lies.
"""
import argparse
import importlib.util
import inspect
import json
import math
import os
import subprocess
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KDIR = os.path.join(ROOT, "tests", "golden", "emit")  # the emitted kernels: FIXTURE.cu
SCHEDULES = os.path.join(ROOT, "tests", "data", "emit")  # the schedules they are emitted from: FIXTURE.json

KERNELS = {
    # name: (fixture, namespace, example graph, adapter); the kernel is KDIR/FIXTURE.cu, its binding KDIR/FIXTURE.py
    "gemm": ("gemm_hopper.h100", "twill_gemm_hopper", "examples/gemm_hopper.tir", "gemm"),
    "attention": ("attention_fwd_hopper.h100", "twill_attention_fwd_hopper", "examples/attention_fwd_hopper.tir",
                  "attention"),
    "attention_bwd": ("attention_bwd_hopper.h100", "twill_attention_bwd_hopper", "examples/attention_bwd_hopper.tir",
                      "attention_bwd"),
    # the FA3 graph with 192-key tiles (a partial last tile where N is not a multiple of 192)
    "attention_k192": ("attention_fwd_hopper_k192.h100", "twill_attention_fwd_hopper_k192",
                       "examples/attention_fwd_hopper_k192.tir", "attention"),
    # the FA3 graph solved for the H200's description (specs/h200.yaml: exp2's measured latency)
    "attention_h200": ("attention_fwd_hopper.h200", "twill_attention_fwd_hopper", "examples/attention_fwd_hopper.tir",
                       "attention"),
    # the FA3 graph with head dimension 64 (its schedule: FA3's intra-warpgroup overlap)
    "attention_d64": ("attention_fwd_d64.h100", "twill_attention_d64", "tests/data/tir/attention_fwd_d64.tir",
                      "attention"),
}


def spec(name):
    """The machine KERNELS[name] is emitted for (`--gpu`): its stored schedule's."""
    with open(os.path.join(SCHEDULES, KERNELS[name][0] + ".json")) as f:
        return json.load(f)["machine"]


# ---- building ---------------------------------------------------------------------------------------

def regenerate():
    """Re-emit the kernels and their bindings from their stored schedules with twill (where it is installed)."""
    for fixture, _, _, _ in KERNELS.values():
        subprocess.run(["twill", "emit-cuda", os.path.join(SCHEDULES, fixture + ".json"), "-o",
                        os.path.join(KDIR, fixture + ".cu"), "--binding", "torch"], check=True)


def load_binding(fixture, kernel_dir=KDIR):
    """The binding module `twill emit-cuda --binding torch` wrote beside KERNEL_DIR/FIXTURE.cu."""
    path = os.path.join(kernel_dir, fixture + ".py")
    spec_ = importlib.util.spec_from_file_location("twill_binding_" + fixture.replace(".", "_"), path)
    mod = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(mod)
    return mod


def build_binding(fixture, kernel_dir=KDIR):
    """Load a fixture's binding and build its library now: (module, ptxas's lines about spills)."""
    mod = load_binding(fixture, kernel_dir)
    so = mod.build_library()
    with open(so + ".log") as f:
        return mod, mod.spills(f.read())


def build(name, kernel_dir=KDIR):
    """KERNELS[name]'s binding, built: (module, spills)."""
    return build_binding(KERNELS[name][0], kernel_dir)


# ---- the emitted kernels as the bench calls them: thin adapters over the bindings -------------------

def outputs(mod):
    """The binding's output arguments, in its order."""
    return [a["name"] for a in mod.SPEC["args"] if a["output"]]


def out_dtype(mod):
    """The element type the emitted kernel writes its first output in (C, or O: the graph's {output = ...})."""
    import torch
    first = next(a for a in mod.SPEC["args"] if a["output"] and len(a["dims"]) == 2)
    return getattr(torch, first["dtype"])


def knobs(mod):
    """The launch choices the environment asks for, to compare them (TWILL_PERSISTENT: -1 auto, 0, 1;
    TWILL_RASTER_GROUP), where the binding has them."""
    params = inspect.signature(mod.run).parameters
    out = {}
    for key, env in (("persistent", "TWILL_PERSISTENT"), ("raster_group", "TWILL_RASTER_GROUP")):
        if key in params and os.environ.get(env):
            out[key] = int(os.environ[env])
    return out


class TwillGemm:
    def __init__(self, mod):
        self.mod = mod
        self.out_dtype = out_dtype(mod)

    def __call__(self, a, b, out):
        self.mod.run(a, b, **{outputs(self.mod)[0]: out}, **knobs(self.mod))


class TwillAttention:
    def __init__(self, mod, D=128):
        self.mod = mod
        self.D = D  # the head dimension the graph's tiles have
        self.out_dtype = out_dtype(mod)

    def outputs(self, BH, N, D, device):
        """The binding's outputs ([BH, N, D] for O, [BH, N] for m and l), NaN-filled."""
        import torch
        return {a["name"]: torch.full((BH, N, D) if len(a["dims"]) == 2 else (BH, N), float("nan"), device=device,
                                      dtype=getattr(torch, a["dtype"]))
                for a in self.mod.SPEC["args"] if a["output"]}

    def __call__(self, q, k, v, o, scale):
        self.mod.run(q, k, v, **o, exp2_scale=scale * 1.4426950408889634, **knobs(self.mod))


class TwillAttentionBwd:
    """The backward step as examples/attention_bwd_hopper.tir states it, over whole sequences:
    P = exp2((Q K^T - lse) * c), dP = dO V^T, dS = (dP - dlt) * P, dV = P^T dO, dK = dS^T Q and
    dQ = dS K (FlashAttention's backward without its 1/sqrt(d) factors on dS). The binding zeroes
    dQ, which every key tile's CTA adds into."""

    def __init__(self, mod):
        self.mod = mod
        self.out_dtype = out_dtype(mod)

    def __call__(self, q, k, v, d_o, lse, dlt, dq, dk, dv, c):
        self.mod.run(k=k, v=v, q=q, do=d_o, lse=lse, dlt=dlt, dq=dq, dk=dk, dv=dv, exp2_scale=c, **knobs(self.mod))


def reference_attention_bwd(q, k, v, d_o, heads, grads=True):
    """(lse, dlt, dq, dk, dv) in float32 for the first `heads`: lse in the units of Q K^T (so that
    P = softmax(Q K^T / sqrt(d))), dlt = rowsum(dO * O), and the gradients as TwillAttentionBwd
    states; with grads=False only (lse, dlt), the kernel's inputs."""
    import torch
    D = q.shape[-1]
    out = []
    for h in range(heads):
        qf, kf, vf, of = q[h].float(), k[h].float(), v[h].float(), d_o[h].float()
        s = qf @ kf.T
        lse = torch.logsumexp(s / math.sqrt(D), dim=-1) * math.sqrt(D)
        p = torch.exp((s - lse[:, None]) / math.sqrt(D))
        dlt = (of * (p @ vf)).sum(-1)
        if not grads:
            out.append((lse, dlt))
            continue
        ds = (of @ vf.T - dlt[:, None]) * p
        out.append((lse, dlt, ds @ kf, ds.T @ qf, p.T @ of))
    return [torch.stack(x) for x in zip(*out)]


def run_attention_bwd(bwd, B, H, N, D=128, do_time=True, ref_heads=2):
    import torch
    BH = B * H
    res = {"kernel": "attention_bwd", "B": B, "H": H, "N": N, "D": D, "flops": 10.0 * BH * N * N * D,
           "out_dtype": str(bwd.out_dtype).replace("torch.float", "f")}
    torch.manual_seed(N + 1)
    q, k, v, d_o = (torch.randn(BH, N, D, device="cuda", dtype=torch.float16) for _ in range(4))
    try:
        lse_r, dlt_r, dq_r, dk_r, dv_r = reference_attention_bwd(q, k, v, d_o, ref_heads)
        # the kernel's lse and dlt for every head, 8 heads at a time (no gradients: only the first
        # heads' are compared)
        lse = torch.empty(BH, N, device="cuda", dtype=torch.float32)
        dlt = torch.empty(BH, N, device="cuda", dtype=torch.float32)
        for h in range(0, BH, 8):
            lse[h:h + 8], dlt[h:h + 8] = reference_attention_bwd(q[h:h + 8], k[h:h + 8], v[h:h + 8], d_o[h:h + 8],
                                                                 min(8, BH - h), grads=False)
        dq = torch.full((BH, N, D), float("nan"), device="cuda", dtype=torch.float32)
        dk = torch.full((BH, N, D), float("nan"), device="cuda", dtype=bwd.out_dtype)
        dv = torch.full((BH, N, D), float("nan"), device="cuda", dtype=bwd.out_dtype)
        c = 1.4426950408889634 / math.sqrt(D)
        bwd(q, k, v, d_o, lse, dlt, dq, dk, dv, c)
        torch.cuda.synchronize()
        res["nan_count"] = int(sum(int(torch.isnan(t).sum()) for t in (dq, dk, dv)))
        for name, got, ref in (("dq", dq, dq_r), ("dk", dk, dk_r), ("dv", dv, dv_r)):
            res["rel_err_" + name] = rel_err(got[:ref_heads], ref)
        res["rel_err"] = max(res["rel_err_dq"], res["rel_err_dk"], res["rel_err_dv"])
        res["rel_err_heads"] = ref_heads
        res["ok"] = res["nan_count"] == 0 and res["rel_err"] < 1e-2
        if do_time:
            res["twill_ms"] = bench_ms(lambda: bwd(q, k, v, d_o, lse, dlt, dq, dk, dv, c))
            res["twill_tflops"] = tflops(res["flops"], res["twill_ms"])
    except Exception as e:  # noqa: BLE001
        res["twill_error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        res["ok"] = False
    return res


# ---- Triton baselines -------------------------------------------------------------------------------

_triton = {}


def triton_kernels():
    if _triton:
        return _triton
    import triton
    import triton.language as tl

    @triton.jit
    def attn_fwd(Q, K, V, O, sm_scale, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        # The standard fused-attention forward (online softmax in base 2), Q/K/V/O [BH, N, D] contiguous.
        start_m = tl.program_id(0)
        off_bh = tl.program_id(1).to(tl.int64)
        base = off_bh * N_CTX * HEAD_DIM
        offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, HEAD_DIM)
        q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
        m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        qk_scale = sm_scale * 1.44269504
        k_ptrs = K + base + offs_n[None, :] * HEAD_DIM + offs_d[:, None]
        v_ptrs = V + base + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
        for start_n in range(0, N_CTX, BLOCK_N):
            k = tl.load(k_ptrs + start_n * HEAD_DIM)
            qk = tl.dot(q, k)
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
            p = tl.math.exp2(qk)
            l_ij = tl.sum(p, 1)
            alpha = tl.math.exp2(m_i - m_ij)
            l_i = l_i * alpha + l_ij
            acc = acc * alpha[:, None]
            v = tl.load(v_ptrs + start_n * HEAD_DIM)
            acc = tl.dot(p.to(tl.float16), v, acc)
            m_i = m_ij
        acc = acc / l_i[:, None]
        tl.store(O + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(tl.float16))

    @triton.jit
    def matmul(A, B, C, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
        pid = tl.program_id(0)
        num_m = tl.cdiv(M, BLOCK_M)
        num_n = tl.cdiv(N, BLOCK_N)
        group = GROUP_M * num_n
        gid = pid // group
        first_m = gid * GROUP_M
        gsz = min(num_m - first_m, GROUP_M)
        pid_m = first_m + (pid % group) % gsz
        pid_n = (pid % group) // gsz
        offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
        offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = A + offs_m[:, None] * K + offs_k[None, :]
        b_ptrs = B + offs_k[:, None] * N + offs_n[None, :]
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K * N
        tl.store(C + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.float16))

    def attn(q, k, v, o, sm_scale):
        BH, N, D = q.shape
        attn_fwd[(N // 128, BH)](q, k, v, o, sm_scale, N, HEAD_DIM=D, BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=3)

    def mm(a, b, c):
        M, K = a.shape
        N = b.shape[1]
        matmul[(triton.cdiv(M, 128) * triton.cdiv(N, 256),)](a, b, c, M, N, K, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64,
                                                             GROUP_M=8, num_warps=8, num_stages=3)

    _triton.update(attn=attn, mm=mm)
    return _triton


# ---- measuring --------------------------------------------------------------------------------------

def rel_err(got, ref):
    got = got.double()
    ref = ref.double()
    return float((got - ref).norm() / ref.norm().clamp_min(1e-30))


LAST_MHZ = [None]  # the SM clock read right after the last bench_ms (nvidia-smi), or None
LAST_ENERGY = [None]  # (joules per call, mean watts) of the board over a loop after the last bench_ms, or None


def bench_ms(fn):
    import triton.testing
    fn()
    ms = float(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median"))
    LAST_MHZ[0] = sm_clock_mhz()
    LAST_ENERGY[0] = energy_per_call(fn)
    return ms


def energy_per_call(fn, seconds=1.0):
    """The board's energy per call of fn and its mean power, from NVML's total-energy counter (mJ)
    over back-to-back calls lasting about `seconds`. At the power cap (700 W on the H200) the
    time a kernel takes is its energy over the cap: the figure that decides who is faster there."""
    import time
    import torch
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        n = max(10, int(seconds / max(time.perf_counter() - t0, 1e-6)))
        e0, t0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h), time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        e1, t1 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h), time.perf_counter()
        return (e1 - e0) / 1e3 / n, (e1 - e0) / 1e3 / (t1 - t0)
    except Exception:  # noqa: BLE001 - no NVML, or no energy counter on this board
        return None


def sm_clock_mhz():
    """The GPU's current SM clock: runs of the same kernel differ by several percent, and clocks
    under sustained load are the first suspect (docs/gpu-results.md)."""
    import subprocess
    import torch
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits", "-i",
                              str(torch.cuda.current_device())], capture_output=True, text=True, timeout=10).stdout
        return int(out.strip().splitlines()[0])
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def tflops(flops, ms):
    return flops / (ms * 1e-3) / 1e12


def run_gemm(gemm, size, do_time=True):
    import torch
    M = N = K = size
    res = {"kernel": "gemm", "M": M, "N": N, "K": K, "flops": 2.0 * M * N * K,
           "out_dtype": str(gemm.out_dtype).replace("torch.float", "f")}
    torch.manual_seed(size)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=gemm.out_dtype)
    try:
        gemm(a, b, c)
        torch.cuda.synchronize()
        ref = torch.matmul(a.float(), b.float())
        res["nan_count"] = int(torch.isnan(c).sum())
        res["rel_err"] = rel_err(c, ref)
        res["ok"] = res["nan_count"] == 0 and res["rel_err"] < 1e-2
        del ref
        if do_time:
            res["twill_ms"] = bench_ms(lambda: gemm(a, b, c))
    except Exception as e:  # noqa: BLE001 - reported in the table
        res["twill_error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        res["ok"] = False
    if do_time:
        for label, fn in (("cublas", lambda: torch.matmul(a, b)),
                          ("triton", lambda: triton_kernels()["mm"](a, b, torch.empty(M, N, device="cuda", dtype=torch.float16)))):
            try:
                if label == "triton":
                    ct = torch.empty(M, N, device="cuda", dtype=torch.float16)
                    fn = (lambda ct=ct: triton_kernels()["mm"](a, b, ct))
                    fn()
                    torch.cuda.synchronize()
                    res["triton_rel_err"] = rel_err(ct.float(), torch.matmul(a, b).float())
                res[label + "_ms"] = bench_ms(fn)
            except Exception as e:  # noqa: BLE001
                res[label + "_error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    for k in ("twill", "cublas", "triton"):
        if k + "_ms" in res:
            res[k + "_tflops"] = tflops(res["flops"], res[k + "_ms"])
    return res


def reference_attention(q, k, v, scale, heads):
    """float32 softmax(q k^T * scale) v for the first `heads` of BH, a head at a time."""
    import torch
    out = []
    for h in range(heads):
        qf, kf, vf = q[h].float(), k[h].float(), v[h].float()
        o = torch.empty_like(qf)
        for r in range(0, qf.shape[0], 4096):
            s = (qf[r:r + 4096] @ kf.T) * scale
            o[r:r + 4096] = torch.softmax(s, dim=-1) @ vf
        out.append(o)
    return torch.stack(out)


def run_attention(attn, B, H, N, D=128, do_time=True, ref_heads=2, pairs=0, variant="attention"):
    """Check twill's forward and time it against SDPA-cuDNN and Triton; with pairs > 0, then time
    twill and cuDNN that many more times in pairs, each pair's first kernel in turn (`pair_ratios`:
    twill / cuDNN per pair), so a goal is judged on a median rather than on one reading of each,
    and neither kernel always runs first."""
    import torch
    import torch.nn.functional as F
    BH = B * H
    res = {"kernel": "attention", "variant": variant, "B": B, "H": H, "N": N, "D": D, "flops": 4.0 * BH * N * N * D,
           "out_dtype": str(attn.out_dtype).replace("torch.float", "f")}
    torch.manual_seed(N)
    q = torch.randn(BH, N, D, device="cuda", dtype=torch.float16)
    k = torch.randn(BH, N, D, device="cuda", dtype=torch.float16)
    v = torch.randn(BH, N, D, device="cuda", dtype=torch.float16)
    scale = 1.0 / math.sqrt(D)
    try:
        o = attn.outputs(BH, N, D, "cuda")
        attn(q, k, v, o, scale)
        torch.cuda.synchronize()
        res["nan_count"] = int(sum(int(torch.isnan(t).sum()) for t in o.values()))
        out = o["acc"]
        ref = reference_attention(q, k, v, scale, ref_heads)
        res["rel_err"] = rel_err(out[:ref_heads], ref)
        res["rel_err_heads"] = ref_heads
        res["ok"] = res["nan_count"] == 0 and res["rel_err"] < 1e-2
        del ref
        if do_time:
            res["twill_ms"] = bench_ms(lambda: attn(q, k, v, o, scale))
            res["twill_mhz"], res["twill_joules_watts"] = LAST_MHZ[0], LAST_ENERGY[0]
        del out
    except Exception as e:  # noqa: BLE001
        res["twill_error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        res["ok"] = False
    if do_time:
        q4, k4, v4 = (t.view(B, H, N, D) for t in (q, k, v))
        try:
            from torch.nn.attention import sdpa_kernel, SDPBackend

            def cudnn():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    return F.scaled_dot_product_attention(q4, k4, v4)
            oc = cudnn()
            torch.cuda.synchronize()
            if "twill_error" not in res:
                res["rel_err_vs_cudnn"] = rel_err(o["acc"].view(B, H, N, D)[:1], oc[:1].float())
            del oc
            res["cudnn_ms"] = bench_ms(cudnn)
            res["cudnn_mhz"], res["cudnn_joules_watts"] = LAST_MHZ[0], LAST_ENERGY[0]
        except Exception as e:  # noqa: BLE001
            res["cudnn_error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        try:
            ot = torch.empty_like(q)
            triton_kernels()["attn"](q, k, v, ot, scale)
            torch.cuda.synchronize()
            res["triton_rel_err"] = rel_err(ot[:1].float(), reference_attention(q, k, v, scale, 1))
            res["triton_ms"] = bench_ms(lambda: triton_kernels()["attn"](q, k, v, ot, scale))
        except Exception as e:  # noqa: BLE001
            res["triton_error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        if pairs and "twill_ms" in res and "cudnn_ms" in res:
            res["pair_ratios"] = []
            for i in range(pairs):  # the first of a pair in turn: twill, cuDNN, twill, ...
                if i % 2 == 0:
                    t = bench_ms(lambda: attn(q, k, v, o, scale))
                    c = bench_ms(cudnn)
                else:
                    c = bench_ms(cudnn)
                    t = bench_ms(lambda: attn(q, k, v, o, scale))
                res["pair_ratios"].append(c / t)
    for kk in ("twill", "cudnn", "triton"):
        if kk + "_ms" in res:
            res[kk + "_tflops"] = tflops(res["flops"], res[kk + "_ms"])
    return res


# ---- report -----------------------------------------------------------------------------------------

def _f(x, fmt="%.1f"):
    return fmt % x if isinstance(x, (int, float)) else "—"


def _joules(jw):
    return "%.3f (%.0f W)" % tuple(jw) if jw else "—"


def markdown(meta, results):
    L = ["# twill's emitted kernels on the GPU", "",
         "Written by `python3 bench/gpu_bench.py --out DIR` (one run on the device machine). The kernels are the",
         "files `twill emit-cuda` wrote for `examples/gemm_hopper.tir`, `attention_fwd_hopper.tir`, `attention_fwd_hopper_k192.tir`,",
         "`attention_bwd_hopper.tir` and `tests/data/tir/attention_fwd_d64.tir` (`--gpu h100`), and for `attention_fwd_hopper.tir`",
         "with `--gpu h200`, called through their generated bindings (`--binding torch`). Times are medians of `triton.testing.do_bench`;",
         "TFLOP/s = 2MNK (GEMM) or 4·B·H·N²·D (attention) over that time.", "",
         "- card: %s (%s), torch %s, triton %s, CUDA %s, nvcc: %s" % (meta["card"], meta["capability"], meta["torch"],
                                                                   meta["triton"], meta["cuda"], meta["nvcc"]),
         "- kernels from: %s" % meta.get("kernel_dir", "tests/golden/emit"),
         "- correctness: relative L2 error against a float32 PyTorch reference (GEMM: `torch.matmul` of the fp16",
         "  inputs in fp32, whole output; attention: fp32 softmax(QKᵀ/√D)V on the first heads named), outputs",
         "  filled with NaN before the launch and counted after (all of out_acc*, out_m*, out_l* for attention).",
         "- the attention goal (N = 16384) is judged on the median twill / cuDNN ratio of `--pairs` more timings in",
         "  pairs, each pair's first kernel in turn; the table's row is the first pair alone. The last column reads",
         "  the board's energy counter (NVML) over about a second of back-to-back calls after each timing.", ""]
    for name, spills in meta.get("spills", {}).items():
        L.append("- ptxas for %s: %s" % (name, "; ".join(spills) if spills else "no spills"))
    def written(kind):
        return next((r["out_dtype"] for r in results if r["kernel"] == kind and "out_dtype" in r), "?")
    L += ["", "## GEMM (fp16 in, fp32 accumulate; twill writes %s C, cuBLAS and Triton write f16 C)" % written("gemm"), "",
          "| M=N=K | twill TFLOP/s | cuBLAS TFLOP/s | Triton TFLOP/s | twill / cuBLAS | twill / Triton | rel. error | NaN after | ok |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if r["kernel"] != "gemm":
            continue
        t, c, tr = r.get("twill_tflops"), r.get("cublas_tflops"), r.get("triton_tflops")
        L.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["M"], _f(t) if t else "failed: " + r.get("twill_error", "?"), _f(c) if c else r.get("cublas_error", "—"),
            _f(tr) if tr else r.get("triton_error", "—"), _f(t / c, "%.2fx") if t and c else "—",
            _f(t / tr, "%.2fx") if t and tr else "—", _f(r.get("rel_err"), "%.1e"), r.get("nan_count", "—"),
            "yes" if r.get("ok") else "**no**"))
    variants = [v for v in KERNELS if any(r.get("variant", "attention") == v for r in results if r["kernel"] == "attention")]
    for variant in variants:
        D = next(r.get("D", 128) for r in results if r["kernel"] == "attention" and r.get("variant", "attention") == variant)
        L += ["", "## Attention forward (B=4, H=32, D=%d, non-causal, fp16 in; twill writes %s O; %s --gpu %s)" % (
                    D, written("attention"), KERNELS[variant][2], spec(variant)), "",
                "| N | twill TFLOP/s | SDPA-cuDNN TFLOP/s | Triton TFLOP/s | twill / cuDNN | twill / Triton | rel. error (fp32 ref) | rel. error vs cuDNN | NaN after | ok | SM MHz after twill / cuDNN | J per call twill / cuDNN (board W) |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in results:
            if r["kernel"] != "attention" or r.get("variant", "attention") != variant:
                continue
            t, c, tr = r.get("twill_tflops"), r.get("cudnn_tflops"), r.get("triton_tflops")
            L.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s / %s |" % (
                r["N"], _f(t) if t else "failed: " + r.get("twill_error", "?"), _f(c) if c else r.get("cudnn_error", "—"),
                _f(tr) if tr else r.get("triton_error", "—"), _f(t / c, "%.2fx") if t and c else "—",
                _f(t / tr, "%.2fx") if t and tr else "—", _f(r.get("rel_err"), "%.1e"),
                _f(r.get("rel_err_vs_cudnn"), "%.1e"), r.get("nan_count", "—"), "yes" if r.get("ok") else "**no**",
                r.get("twill_mhz") or "—", r.get("cudnn_mhz") or "—", _joules(r.get("twill_joules_watts")),
                _joules(r.get("cudnn_joules_watts"))))
    bw = [r for r in results if r["kernel"] == "attention_bwd"]
    if bw:
        L += ["", "## Attention backward step (B=4, H=32, D=128; examples/attention_bwd_hopper.tir; correctness, no baseline)",
              "",
              "The graph's own math (bench/gpu_bench.py, TwillAttentionBwd): not FlashAttention's full backward (no",
              "1/sqrt(d) on dS), so no library baseline; TFLOP/s count its five GEMMs (10·B·H·N²·D).", "",
              "| N | twill TFLOP/s | rel. error dQ | dK | dV | NaN after | ok |", "|---|---|---|---|---|---|---|"]
        for r in bw:
            L.append("| %d | %s | %s | %s | %s | %s | %s |" % (
                r["N"], _f(r.get("twill_tflops")) if r.get("twill_tflops") else "failed: " + r.get("twill_error", "?"),
                _f(r.get("rel_err_dq"), "%.1e"), _f(r.get("rel_err_dk"), "%.1e"), _f(r.get("rel_err_dv"), "%.1e"),
                r.get("nan_count", "—"), "yes" if r.get("ok") else "**no**"))
    g = [r for r in results if r["kernel"] == "gemm" and r.get("twill_tflops") and r.get("cublas_tflops")]
    a = [r for r in results if r["kernel"] == "attention" and r.get("D", 128) == 128 and r["N"] == 16384
         and r.get("twill_tflops") and r.get("cudnn_tflops")]
    L += ["", "## Goals", ""]
    for r in g:
        x = r["twill_tflops"] / r["cublas_tflops"]
        L.append("- GEMM %d³ at least 0.9x cuBLAS: %.2fx, %s" % (r["M"], x, "met" if x >= 0.9 else "not met"))
    for r in a:
        x = r["twill_tflops"] / r["cudnn_tflops"]
        pr = sorted(r.get("pair_ratios") or [])
        graph = "%s --gpu %s" % (KERNELS[r.get("variant", "attention")][2], spec(r.get("variant", "attention")))
        if pr:  # judged on the median of the alternating pairs
            x = pr[len(pr) // 2] if len(pr) % 2 else (pr[len(pr) // 2 - 1] + pr[len(pr) // 2]) / 2
            L.append("- attention N=16384 at least 1.0x SDPA-cuDNN (%s): %.3fx, the median of %d alternating pairs "
                     "(%.3f-%.3f; the table's single pair: %.3fx), %s" % (
                         graph, x, len(pr), pr[0], pr[-1], r["twill_tflops"] / r["cudnn_tflops"],
                         "met" if x >= 1.0 else "not met"))
        else:
            L.append("- attention N=16384 at least 1.0x SDPA-cuDNN (%s): %.2fx, %s" % (
                graph, x, "met" if x >= 1.0 else "not met"))
    errs = [r for r in results if any(k.endswith("_error") for k in r)]
    if errs:
        L += ["", "## Errors", ""]
        for r in errs:
            for k, v in r.items():
                if k.endswith("_error"):
                    L.append("- %s %s: %s: %s" % (r["kernel"], r.get("M", r.get("N")), k, v))
    return "\n".join(L) + "\n"


def build_all(kernel_dir=KDIR, fixtures=None):
    """Build the bindings in kernel_dir (every FIXTURE_entry.cu there, or `fixtures`) in parallel, one
    nvcc each, so that the bench and tests/test_gpu.py find them built: 0 when all built."""
    fixtures = fixtures or sorted(f[:-len("_entry.cu")] for f in os.listdir(kernel_dir) if f.endswith("_entry.cu"))
    with ThreadPoolExecutor(os.cpu_count() or 1) as ex:
        futs = {f: ex.submit(build_binding, f, kernel_dir) for f in fixtures}
    failed = 0
    for f, fu in futs.items():
        try:
            print("built %s: %s" % (f, "; ".join(fu.result()[1]) or "no spills"), flush=True)
        except Exception as e:  # noqa: BLE001
            failed += 1
            print("build of %s failed: %s" % (f, str(e)[-2000:]), file=sys.stderr, flush=True)
    return 1 if failed else 0


def features():
    """bench/attention_features.py (GQA, causal and FP8 rows beside FA4 and SDPA-cuDNN)."""
    spec_ = importlib.util.spec_from_file_location("attention_features", os.path.join(HERE, "attention_features.py"))
    mod = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(mod)
    return mod


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="where gpu-results.md and .json go (needed unless --build-only)")
    ap.add_argument("--build-dir", help="where the bindings' shared libraries go: sets TWILL_CACHE_DIR, so they go "
                    "to BUILD_DIR/bindings (default: the bindings' own cache, $TWILL_CACHE_DIR/bindings)")
    ap.add_argument("--build-only", action="store_true", help="build every binding in --kernel-dir (in parallel) "
                    "and stop")
    ap.add_argument("--regenerate", action="store_true", help="re-emit the kernels with twill first")
    ap.add_argument("--quick", action="store_true", help="small sizes only")
    ap.add_argument("--kernel-dir", default=KDIR, help="where the emitted FIXTURE.cu files and their bindings"
                    " (FIXTURE.py, FIXTURE_entry.cu) are (default tests/golden/emit): to time a variant, such as another"
                    " ring depth, emitted with the same names and --binding torch")
    ap.add_argument("--only", choices=sorted(KERNELS) + sorted(features().NAMES),
                    help="build and time one kernel (or one feature of bench/attention_features.py)")
    ap.add_argument("--gemm-sizes", type=lambda v: [int(x) for x in v.split(",")], help="M=N=K values, comma-separated")
    ap.add_argument("--attn-sizes", type=lambda v: [int(x) for x in v.split(",")], help="N values, comma-separated")
    ap.add_argument("--pairs", type=int, default=7, help="alternating twill / cuDNN timings at N = 16384, whose "
                    "median ratio judges the goal (default %(default)s; 0: the table's one pair)")
    args = ap.parse_args(argv)
    if args.build_dir:
        os.environ["TWILL_CACHE_DIR"] = os.path.abspath(args.build_dir)
    if args.regenerate:
        regenerate()
    if args.build_only:
        return build_all(args.kernel_dir)
    if not args.out:
        ap.error("--out is needed")
    import torch
    import triton
    os.makedirs(args.out, exist_ok=True)
    meta = {"card": torch.cuda.get_device_name(), "capability": "sm_%d%d" % torch.cuda.get_device_capability(),
            "torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda, "spills": {},
            "kernel_dir": os.path.relpath(args.kernel_dir, ROOT)}
    try:
        nvcc = load_binding(KERNELS["gemm"][0], args.kernel_dir).find_nvcc()
        meta["nvcc"] = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    except Exception:  # noqa: BLE001
        meta["nvcc"] = "?"
    libs = {}
    with ThreadPoolExecutor(2) as ex:
        futs = {n: ex.submit(build, n, args.kernel_dir) for n in KERNELS if args.only in (None, n)}
    feats = features()
    for n, fu in futs.items():
        try:
            libs[n], meta["spills"][n] = fu.result()
        except Exception as e:  # noqa: BLE001
            print("build of %s failed: %s" % (n, e), file=sys.stderr)
            libs[n] = None
            meta.setdefault("build_errors", {})[n] = str(e)[-2000:]
    results = []
    gemm_sizes = args.gemm_sizes or ([512] if args.quick else [4096, 8192])
    attn_sizes = args.attn_sizes or ([512] if args.quick else [2048, 8192, 16384])
    bwd_sizes = [512] if args.quick else [2048, 8192]
    d64_sizes = [512] if args.quick else [8192, 16384]
    if args.only is not None:  # one kernel's sizes only
        attn_sizes = attn_sizes if args.only in KERNELS else []
        gemm_sizes = gemm_sizes if args.only == "gemm" else []
        bwd_sizes = bwd_sizes if args.only == "attention_bwd" else []
        d64_sizes = (args.attn_sizes or d64_sizes) if args.only == "attention_d64" else []

    class Broken:
        def __init__(self, n):
            self.n = n

        def __call__(self, *a, **k):
            raise RuntimeError("build failed: " + meta["build_errors"][self.n].splitlines()[-1])
        def outputs(self, *a):
            return {}
        out_dtype = torch.float32  # never written: the launch fails first

    gemm = TwillGemm(libs["gemm"]) if libs.get("gemm") else Broken("gemm")
    for s in gemm_sizes:
        try:
            r = run_gemm(gemm, s)
        except Exception as e:  # noqa: BLE001
            r = {"kernel": "gemm", "M": s, "N": s, "K": s, "twill_error": repr(e), "trace": traceback.format_exc()}
        print(json.dumps(r), flush=True)
        results.append(r)
        torch.cuda.empty_cache()
    runs = [("attention", 128, attn_sizes), ("attention_h200", 128, attn_sizes), ("attention_k192", 128, attn_sizes),
            ("attention_d64", 64, d64_sizes)]  # (variant, head dimension, N values)
    for variant, D, sizes in runs:
        if args.only not in (None, variant):
            continue
        kernel = TwillAttention(libs[variant], D) if libs.get(variant) else Broken(variant)
        for n in sizes:
            try:
                r = run_attention(kernel, 4, 32, n, D=D, pairs=args.pairs if (D, n) == (128, 16384) else 0,
                                  variant=variant)
            except Exception as e:  # noqa: BLE001
                r = {"kernel": "attention", "variant": variant, "B": 4, "H": 32, "N": n, "D": D,
                     "twill_error": repr(e), "trace": traceback.format_exc()}
            print(json.dumps(r), flush=True)
            results.append(r)
            torch.cuda.empty_cache()
    bwd = TwillAttentionBwd(libs["attention_bwd"]) if libs.get("attention_bwd") else Broken("attention_bwd")
    for n in bwd_sizes:
        try:
            r = run_attention_bwd(bwd, 4, 32, n)
        except Exception as e:  # noqa: BLE001
            r = {"kernel": "attention_bwd", "N": n, "twill_error": repr(e), "trace": traceback.format_exc()}
        print(json.dumps(r), flush=True)
        results.append(r)
        torch.cuda.empty_cache()
    if args.only is None or args.only in feats.NAMES:
        sizes = args.attn_sizes or ([512] if args.quick else [2048, 8192, 16384])
        results += feats.run_all(sys.modules[__name__], args.kernel_dir, sizes, args.only)
    md = markdown(meta, results) + "\n".join(feats.markdown([r for r in results if r["kernel"] == "attention_feature"]))
    with open(os.path.join(args.out, "gpu-results.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, "gpu-results.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    print(md)
    return 0 if all(r.get("ok") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
