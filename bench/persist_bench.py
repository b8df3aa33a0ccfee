"""Persistent grids at any loop count, timed in alternating pairs on one GPU (run on the device):

    python3 bench/persist_bench.py [--pairs 7]

- the FA3 causal forward (tests/golden/causal/attention_fwd_causal_hopper.h200.cu through the shim
  of tests/data/causal/gpu_causal.py), B = 2, H = 8, D = 128, N = 4096 and 8192: a CTA per tile
  (persistent = 0) against kernel<true> (1: one CTA per SM, the tiles longest first in a static
  round robin, each its own trip count). Measured 0.54-0.62x (session 26: kernel<true> serialized
  its wgmmas); since session 41 its kernel<true> reads Args per tile and compiles clean (not yet
  timed: bench/triton_notes/s41/causal41 times it at B = 4, H = 32 beside FA4 and cuDNN);
- the GEMM gemm_hopper.h100 (tests/golden/emit) at 8192 x 8192 and K = 17 x 64 (17 K steps, no
  multiple of kPhasePeriod: one CTA per tile before), persistent 0 against 1;
- bench/persist's GEMM of two 64-row halves (one computing warpgroup) with and without
  --tile-copies (a second warpgroup taking every other tile), persistent 0 and 1, K = 17 x 64.

Each pair runs the two variants one after the other, `--pairs` times, the median of each variant's
CUDA-event times (ms per launch, 20 launches a sample) reported with the ratio. Every variant is
checked against torch first. Prints one line per measurement and a summary.
"""
from __future__ import annotations

import ctypes
import importlib.util
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import gpu_bench  # noqa: E402


def _causal_module():
    spec = importlib.util.spec_from_file_location("gpu_causal", os.path.join(ROOT, "tests", "data", "causal", "gpu_causal.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def sample_ms(torch, fn, launches: int = 20) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(launches):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / launches


def pairs(torch, variants: dict, n: int) -> dict:
    """{name: median ms} of the variants, run in alternating order n times (after a warm-up)."""
    for fn in variants.values():
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    times = {k: [] for k in variants}
    for i in range(n):
        order = list(variants) if i % 2 == 0 else list(reversed(variants))
        for k in order:
            times[k].append(sample_ms(torch, variants[k]))
    return {k: statistics.median(v) for k, v in times.items()}


def main(argv: list[str]) -> int:
    import torch
    n_pairs = int(argv[argv.index("--pairs") + 1]) if "--pairs" in argv else 7
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    rows = []

    def report(what: str, t: dict, flops: float) -> None:
        names = list(t)
        base = t[names[0]]
        for k in names:
            line = f"{what} {k}: {t[k]:.4f} ms, {flops / t[k] / 1e9:.0f} TFLOP/s, {base / t[k]:.3f}x of {names[0]}"
            rows.append(line)
            print(line, flush=True)

    # -- the causal forward -------------------------------------------------------------------------
    cz = _causal_module()
    lib, spills = cz.causal_library("attention_fwd_causal_hopper.h200", os.environ.get("TWILL_CAUSAL_BUILD", "/tmp/twill-causal"))
    print(f"causal spills: {spills or 'none'}", flush=True)
    B, H, D = 2, 8, 128
    for n in (4096, 8192):
        torch.manual_seed(n)
        q, k, v = (torch.randn(B * H, n, D, device="cuda", dtype=torch.float16) for _ in range(3))
        ref = cz.causal_reference(q[-1:], k[-1:], v[-1:], 1)
        for p in (0, 1):
            o, unwritten = cz.run_causal(lib, q, k, v, p)
            err = float((o[-1:].double() - ref.double()).norm() / ref.double().norm())
            print(f"causal N={n} persistent={p}: rel err {err:.2e}, unwritten {unwritten}", flush=True)
            assert err < 1e-2 and unwritten == 0
        o = torch.empty_like(q)
        m, l = (torch.empty(B * H, n, device="cuda") for _ in range(2))
        ptrs = [ctypes.c_void_p(t.data_ptr()) for t in (q, k, v, o, m, l)]
        scale = ctypes.c_float(1.4426950408889634 / math.sqrt(D))
        t = pairs(torch, {f"persistent={p}": (lambda p=p: lib.causal_launch(n // 128, n, B * H, scale, *ptrs, p))
                          for p in (0, 1)}, n_pairs)
        report(f"causal fwd N={n}", t, 4 * B * H * n * n * D / 2)

    # -- GEMMs at 17 K steps ------------------------------------------------------------------------
    K, M, N = 64 * 17, 8192, 8192
    torch.manual_seed(17)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    ref = torch.matmul(a.float(), b.float())
    gemm, spills = gpu_bench.build_binding("gemm_hopper.h100", os.path.join(ROOT, "tests", "golden", "emit"))
    print(f"gemm_hopper spills: {spills or 'none'}", flush=True)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    [out] = [x["name"] for x in gemm.SPEC["args"] if x["output"]]
    for p in (0, 1):
        c.fill_(float("nan"))
        gemm.run(a, b, **{out: c}, persistent=p)
        torch.cuda.synchronize()
        print(f"gemm_hopper K={K} persistent={p}: rel err {gpu_bench.rel_err(c.float(), ref):.2e}", flush=True)
    t = pairs(torch, {f"persistent={p}": (lambda p=p: gemm.run(a, b, **{out: c}, persistent=p)) for p in (0, 1)}, n_pairs)
    report(f"gemm_hopper {M}x{N}x{K}", t, 2 * M * N * K)

    persist = os.path.join(HERE, "persist")
    halves = {}
    for fixture in ("gemm_halves.h100", "gemm_halves_copies.h100"):
        mod, spills = gpu_bench.build_binding(fixture, persist)
        print(f"{fixture} spills: {spills or 'none'}", flush=True)
        for p in (0, 1):
            c.fill_(float("nan"))
            mod.halves(a, b, acc=c, persistent=p)
            torch.cuda.synchronize()
            print(f"{fixture} K={K} persistent={p}: rel err {gpu_bench.rel_err(c.float(), ref):.2e}", flush=True)
            halves[f"{fixture} persistent={p}"] = (lambda mod=mod, p=p: mod.halves(a, b, acc=c, persistent=p))
    t = pairs(torch, halves, n_pairs)
    report(f"halves {M}x{N}x{K}", t, 2 * M * N * K)
    print("---")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
