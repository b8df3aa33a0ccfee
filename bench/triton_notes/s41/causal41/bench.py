"""THERE (H100/H200, torch; flash-attn-4 if carried): the causal forward persistent against one CTA per tile,
FA4 and SDPA-cuDNN. Imports no twill: the libraries are build.py's (carry .devrun/causal41).

    python bench/triton_notes/s41/causal41/bench.py .devrun/causal41 [--pairs 5] [--deadline SECONDS]

1. Correctness, every library and both launches (persistent = 1: one CTA per SM over the tiles, longest first;
   0: a CTA per tile): B*H = 16 at N = 1152 (144 tiles: more than the SMs, so CTAs take several tiles of
   differing trip counts) and B = 4, H = 32 at the timed sizes, O filled with NaN first (every element written),
   against torch's float32 causal SDPA on two heads (rel. error < 1e-2).
2. Times, B = 4, H = 32, D = 128, N = 8192 and 16384 (issue #23): alternating pairs of CUDA-event samples (10
   launches each), the median per variant, TFLOP/s counting 4*B*H*N^2*D/2. Variants: h200 p=1, h200 p=0,
   h100 p=1, h100 p=0, cuDNN, FA4 (where `flash_attn.cute` imports); h200_hoisted p=1 (session 26's kernel)
   at N = 8192 only.
Prints a line per result and the summary table at the end. Each step stops at the deadline (default 200 s).
"""
from __future__ import annotations

import ctypes
import math
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
LIBS = ("h200", "h100", "h200_hoisted")
LOG2E = 1.4426950408889634


def main(argv: list[str]) -> int:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    d = Path(argv[0] if argv and not argv[0].startswith("--") else ROOT / ".devrun" / "causal41")
    n_pairs = int(argv[argv.index("--pairs") + 1]) if "--pairs" in argv else 5
    deadline = time.time() + (float(argv[argv.index("--deadline") + 1]) if "--deadline" in argv else 200.0)
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    libs = {}
    for name in LIBS:
        so = d / f"lib{name}.so"
        if so.exists():
            libs[name] = ctypes.CDLL(str(so))
            libs[name].causal_launch.restype = ctypes.c_int
        else:
            print(f"{name}: no {so}", flush=True)
    try:
        from flash_attn.cute import flash_attn_func as fa4
    except Exception as exc:  # noqa: BLE001
        fa4 = None
        print(f"FA4: not here ({type(exc).__name__}: {exc})", flush=True)
    D = 128
    rows = []

    def launch(lib, q, k, v, o, m, l, p):
        BH, N, _ = q.shape
        ptrs = [ctypes.c_void_p(t.data_ptr()) for t in (q, k, v, o, m, l)]
        return lib.causal_launch(N // 128, N, BH, ctypes.c_float(LOG2E / math.sqrt(D)), *ptrs, p)

    def reference(q, k, v, heads):
        return torch.stack([F.scaled_dot_product_attention(q[h:h + 1].float(), k[h:h + 1].float(), v[h:h + 1].float(),
                                                           is_causal=True)[0] for h in heads])

    def check(B, H, N):
        torch.manual_seed(N + B)
        q, k, v = (torch.randn(B * H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
        heads = [0, B * H - 1]
        ref = reference(q, k, v, heads)
        for name, lib in libs.items():
            for p in (1, 0):
                o = torch.full_like(q, float("nan"))
                m, l = (torch.full((B * H, N), float("nan"), device="cuda") for _ in range(2))
                rc = launch(lib, q, k, v, o, m, l, p)
                torch.cuda.synchronize()
                unwritten = int(torch.isnan(o).sum() + torch.isnan(m).sum() + torch.isnan(l).sum())
                err = float((o[heads].double() - ref.double()).norm() / ref.double().norm())
                ok = rc == 0 and unwritten == 0 and err < 1e-2
                line = f"check {name} p={p} B={B} H={H} N={N}: rc {rc}, rel err {err:.2e}, unwritten {unwritten}, {'ok' if ok else 'WRONG'}"
                print(line, flush=True)
                rows.append(line)

    def sample(fn, launches=10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(launches):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / launches

    def timed(B, H, N, hoisted):
        torch.manual_seed(N)
        q, k, v = (torch.randn(B * H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
        o = torch.empty_like(q)
        m, l = (torch.empty(B * H, N, device="cuda") for _ in range(2))
        variants = {}
        for name in ("h200", "h100"):
            if name in libs:
                for p in (1, 0):
                    variants[f"{name} p={p}"] = (lambda lib=libs[name], p=p: launch(lib, q, k, v, o, m, l, p))
        if hoisted and "h200_hoisted" in libs:
            variants["h200_hoisted p=1"] = lambda: launch(libs["h200_hoisted"], q, k, v, o, m, l, 1)
        q4, k4, v4 = (t.view(B, H, N, D) for t in (q, k, v))

        def cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q4, k4, v4, is_causal=True)
        variants["cuDNN"] = cudnn
        if fa4 is not None:
            qb, kb, vb = (t.transpose(1, 2).contiguous() for t in (q4, k4, v4))  # FA4: [B, N, H, D]
            variants["FA4"] = lambda: fa4(qb, kb, vb, causal=True, softmax_scale=1 / math.sqrt(D))
        for name, fn in list(variants.items()):
            try:
                for _ in range(3):
                    fn()
                torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001
                print(f"{name}: FAILED {type(exc).__name__}: {exc}", flush=True)
                del variants[name]
        times = {k: [] for k in variants}
        for i in range(n_pairs):
            if time.time() > deadline:
                print(f"deadline: {i} pairs", flush=True)
                break
            for k in (list(variants) if i % 2 == 0 else list(reversed(variants))):
                times[k].append(sample(variants[k]))
        flops = 4 * B * H * N * N * D / 2
        base = statistics.median(times["h200 p=0"]) if times.get("h200 p=0") else None
        fa = statistics.median(times["FA4"]) if times.get("FA4") else None
        for k, ts in times.items():
            if not ts:
                continue
            ms = statistics.median(ts)
            line = (f"time N={N} {k}: {ms:.3f} ms, {flops / ms / 1e9:.1f} TFLOP/s"
                    + (f", {base / ms:.3f}x of h200 p=0" if base else "") + (f", {fa / ms:.3f}x of FA4" if fa else ""))
            print(line, flush=True)
            rows.append(line)
        del q, k, v, o, m, l
        torch.cuda.empty_cache()

    check(2, 8, 1152)
    for N in (8192, 16384):
        if time.time() < deadline:
            check(4, 32, N)
        if time.time() < deadline:
            timed(4, 32, N, hoisted=N == 8192)
    print("---")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
