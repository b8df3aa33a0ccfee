"""The causal kernels on a Hopper GPU: build (or load prebuilt), run, check against torch, time.

    python tests/data/causal/gpu_causal.py [--n 8192]

Imports no twill (it runs on a machine that only has torch, triton and nvcc): the kernels are the
golden files tests/golden/causal/*.cu, each with a small extern "C" shim over its Problem, built
here with nvcc, or taken from $TWILL_CAUSAL_LIBS/lib{NAME}.so where built beforehand.
"""
from __future__ import annotations

import ctypes
import hashlib
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
KERNELS = ("attention_fwd_causal_hopper.h200", "triton_attn_causal_fwd_sm90.h100")


SHIMS = {  # kernel -> extern "C" launch(tiles_m, keys, batch, exp2_scale, q, k, v, o, m, l, persistent)
    "attention_fwd_causal_hopper.h200": ("twill_attention_fwd_causal_hopper", r"""
extern "C" int causal_launch(int tiles_m, int keys, int batch, float exp2_scale, const void* q, const void* k,
                             const void* v, void* o, void* m, void* l, int persistent) {
  NS::Problem p;  // q0, q1 (and O, m, l): rows 0-63 and 64-127 of each 128-row tile of one matrix
  p.tiles_m = tiles_m; p.tiles_n = 1; p.loop_extent = keys; p.batch = batch; p.exp2_scale = exp2_scale;
  p.q0 = p.q1 = static_cast<const __half*>(q); p.q0_rows_step = p.q1_rows_step = 128; p.q1_rows_offset = 64;
  p.k = static_cast<const __half*>(k); p.v = static_cast<const __half*>(v);
  p.out_acc0 = p.out_acc1 = static_cast<__half*>(o);
  p.out_acc0_rows_step = p.out_acc1_rows_step = 128; p.out_acc1_rows_offset = 64;
  p.out_m0 = p.out_m1 = static_cast<float*>(m); p.out_m0_cols_step = p.out_m1_cols_step = 128; p.out_m1_cols_offset = 64;
  p.out_l0 = p.out_l1 = static_cast<float*>(l); p.out_l0_cols_step = p.out_l1_cols_step = 128; p.out_l1_cols_offset = 64;
  p.persistent = persistent;  // 1: one CTA per SM over the tiles, 0: a CTA per tile, -1: the launcher's choice
  return static_cast<int>(NS::launch(p));
}
"""),
    "triton_attn_causal_fwd_sm90.h100": ("twill_attn_causal_fwd_kernel", r"""
extern "C" int causal_launch(int tiles_m, int keys, int batch, float exp2_scale, const void* q, const void* k,
                             const void* v, void* o, void* m, void* l, int persistent) {
  NS::Problem p;
  p.tiles_m = tiles_m; p.loop_extent = keys; p.batch = batch; p.exp2_scale = exp2_scale;
  p.q = static_cast<const __half*>(q); p.kT = static_cast<const __half*>(k); p.v = static_cast<const __half*>(v);
  p.out_acc = static_cast<__half*>(o); p.out_m_i = static_cast<float*>(m); p.out_l_i = static_cast<float*>(l);
  p.persistent = persistent;  // 1: one CTA per SM over the tiles, 0: a CTA per tile, -1: the launcher's choice
  return static_cast<int>(NS::launch(p));
}
"""),
}


def build_shim(src: str, ns: str, shim: str, build_dir: str, name: str):
    """Compile the emitted file `src`, included unmodified, with `shim` (extern "C" code that uses it
    as NS) into a shared library in build_dir: (ctypes library, ptxas's lines about spills)."""
    nvcc = os.environ.get("NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    text = '#include "%s"\n#define NS %s\n%s' % (os.path.abspath(src), ns, shim)
    os.makedirs(build_dir, exist_ok=True)
    key = hashlib.sha1(Path(src).read_bytes() + text.encode() + nvcc.encode()).hexdigest()[:12]
    so = os.path.join(build_dir, f"lib{name}_{key}.so")
    log = ""
    if not os.path.exists(so):
        shim_path = os.path.join(build_dir, f"{name}_shim.cu")
        Path(shim_path).write_text(text)
        r = subprocess.run([nvcc, "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-O3", "-Xptxas", "-v",
                            "-shared", "-Xcompiler", "-fPIC", shim_path, "-o", so + ".tmp"], capture_output=True, text=True)
        log = r.stdout + r.stderr
        if r.returncode != 0:
            raise RuntimeError(f"nvcc failed for {name}:\n{log[-4000:]}")
        os.replace(so + ".tmp", so)
    spills = [l.strip() for l in log.splitlines() if "spill" in l and " 0 bytes spill stores, 0 bytes spill loads" not in l]
    return ctypes.CDLL(so), spills


def causal_library(name: str, build_dir: str):
    """The golden kernel `name` (tests/golden/causal) with its shim, as a ctypes library: a prebuilt
    `$TWILL_CAUSAL_LIBS/lib{name}.so` if there is one, else compiled now. (library, spill lines)"""
    prebuilt = os.environ.get("TWILL_CAUSAL_LIBS")
    if prebuilt and os.path.exists(os.path.join(prebuilt, f"lib{name}.so")):
        return ctypes.CDLL(os.path.join(prebuilt, f"lib{name}.so")), []
    ns, shim = SHIMS[name]
    src = ROOT / "tests" / "golden" / "causal" / f"{name}.cu"
    return build_shim(str(src), ns, shim, build_dir, name)


def run_causal(lib, q, k, v, persistent=-1):
    """O of the emitted kernel on q, k, v [BH][N][D] (f16), its NaN fill checked to be overwritten
    (persistent: Problem::persistent, -1 the launcher's choice)."""
    import torch
    BH, N, D = q.shape
    o = torch.full((BH, N, D), float("nan"), device="cuda", dtype=torch.float16)
    m, l = (torch.full((BH, N), float("nan"), device="cuda") for _ in range(2))
    args = [ctypes.c_void_p(t.data_ptr()) for t in (q, k, v, o, m, l)]
    rc = lib.causal_launch(N // 128, N, BH, ctypes.c_float(1.4426950408889634 / math.sqrt(D)), *args, persistent)
    assert rc == 0, f"launch returned {rc}"
    torch.cuda.synchronize()
    unwritten = int(torch.isnan(o).sum() + torch.isnan(m).sum() + torch.isnan(l).sum())
    return o, unwritten


def causal_reference(q, k, v, heads: int):
    """fp32 causal SDPA of the first `heads` of BH (torch's is_causal: key <= query)."""
    import torch
    import torch.nn.functional as F
    return torch.stack([F.scaled_dot_product_attention(q[h:h + 1].float(), k[h:h + 1].float(), v[h:h + 1].float(),
                                                       is_causal=True)[0] for h in range(heads)])


def main(argv: list[str]) -> int:
    """Correctness at N = 1024 and 4096 and TFLOP/s at --n (8192) against SDPA's cuDNN backend."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import triton.testing
    n_bench = int(argv[argv.index("--n") + 1]) if "--n" in argv else 8192
    build = os.environ.get("TWILL_CAUSAL_BUILD", "/tmp/twill-causal")
    B, H, D = 2, 8, 128
    rows = []

    def say(line: str) -> None:
        rows.append(line)
        print(line, flush=True)
    say(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for name in KERNELS:
        try:
            lib, spills = causal_library(name, build)
            for n in (1024, 4096):
                torch.manual_seed(n)
                q, k, v = (torch.randn(B * H, n, D, device="cuda", dtype=torch.float16) for _ in range(3))
                o, unwritten = run_causal(lib, q, k, v)
                heads = [0, 5, 15]
                ref = causal_reference(q[heads], k[heads], v[heads], len(heads))
                err = float((o[heads].double() - ref.double()).norm() / ref.double().norm())
                say(f"{name} N={n}: rel err {err:.2e} (heads {heads}), unwritten {unwritten}, "
                    f"NaN {int(torch.isnan(o).sum())}, spills {spills or 'none reported'}")
            n = n_bench
            flops = 4 * B * H * n * n * D / 2  # causal: half of Q K^T and P V
            qs = [tuple(torch.randn(B * H, n, D, device="cuda", dtype=torch.float16) for _ in range(3))
                  for _ in range(3)]
            o, unwritten = run_causal(lib, *qs[0])
            ref = causal_reference(qs[0][0][-1:], qs[0][1][-1:], qs[0][2][-1:], 1)
            err = float((o[-1:].double() - ref.double()).norm() / ref.double().norm())
            say(f"{name} N={n}: rel err {err:.2e} (last head), unwritten {unwritten}")
            outs = [torch.empty(B * H, n, D, device="cuda", dtype=torch.float16) for _ in range(3)]
            ml = [torch.empty(B * H, n, device="cuda") for _ in range(2)]
            scale = ctypes.c_float(1.4426950408889634 / math.sqrt(D))
            calls = [[ctypes.c_void_p(t.data_ptr()) for t in (*qkv, o_, *ml)] for qkv, o_ in zip(qs, outs)]
            i = [0]

            def twill_call():
                i[0] = (i[0] + 1) % 3
                lib.causal_launch(n // 128, n, B * H, scale, *calls[i[0]], -1)
            ms = triton.testing.do_bench(twill_call, warmup=100, rep=500, return_mode="median")
            say(f"{name} N={n}: {ms:.3f} ms, {flops / ms / 1e9:.0f} TFLOP/s")
        except Exception as exc:  # the other kernel and the baseline still run
            say(f"{name}: FAILED {type(exc).__name__}: {exc}")
    n = n_bench
    qs = [tuple(torch.randn(B, H, n, D, device="cuda", dtype=torch.float16) for _ in range(3)) for _ in range(3)]
    j = [0]

    def sdpa_call():
        j[0] = (j[0] + 1) % 3
        F.scaled_dot_product_attention(*qs[j[0]], is_causal=True)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        ms = triton.testing.do_bench(sdpa_call, warmup=100, rep=500, return_mode="median")
    say(f"SDPA cuDNN causal N={n}: {ms:.3f} ms, {4 * B * H * n * n * D / 2 / ms / 1e9:.0f} TFLOP/s")
    print("---")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
