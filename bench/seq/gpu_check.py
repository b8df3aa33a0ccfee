"""Run the emitted loop sequences (tests/golden/seq/*.h200.py: `twill import` of bench/seq's Triton
kernels, solved for the H200, `twill emit-cuda --binding torch`) against the fp32 reference, and time
them beside Triton's own kernel (the same source, compiled by the Triton on the machine).

    python3 bench/seq/gpu_check.py [--out results.json]

Needs torch, triton, nvcc and a Hopper GPU. tests/test_gpu.py runs `check` at small sizes.
"""
import argparse
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GOLDEN = os.path.join(ROOT, "tests", "golden", "seq")
sys.path.insert(0, HERE)

import kernels  # noqa: E402

CASES = {  # fixture -> sizes
    "gemm_chain_sm90.h200": [dict(M=256, K1=192, N2=320), dict(M=1024, K1=1024, N2=1024),
                             dict(M=4096, K1=4096, N2=4096)],
    "attn_two_pass_sm90.h200": [dict(N=256, N_KV=192), dict(N=1024, N_KV=2048), dict(N=4096, N_KV=8192)],
    "row_var_sm90.h200": [dict(M=256, N=4096), dict(M=8192, N=4096)],  # N: the kernel's constexpr 4096
}


def load(fixture):
    spec = importlib.util.spec_from_file_location(fixture.replace(".", "_"), os.path.join(GOLDEN, fixture + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _triton(fixture, args, out):
    if fixture.startswith("gemm_chain"):
        a, b, c, e = args
        kernels.gemm_chain_kernel[(a.shape[0] // 128,)](a, b, c, e, out, a.shape[1], c.shape[1], a.stride(0),
                                                         b.stride(0), c.stride(0), e.stride(0), out.stride(0),
                                                         BM=128, D=64, BK=64, BN=64, num_warps=4, num_stages=3)
    elif fixture.startswith("row_var"):
        x, = args
        kernels.row_var_kernel[(x.shape[0] // 128,)](x, out, x.stride(0), N=x.shape[1], BM=128, BN=64, num_warps=4,
                                                      num_stages=3)
    else:
        q, k, v = args
        kernels.attn_two_pass_kernel[(q.shape[0] // 128,)](q, k, v, out, k.shape[0], q.stride(0), k.stride(0),
                                                            out.stride(0), BM=128, D=64, BN=64, num_warps=4,
                                                            num_stages=3)
    return out


def check(fixture, size, timed=False):
    """{max_rel_err of twill and of Triton against fp32, and with `timed` their times in us}."""
    import torch
    mod = load(fixture)
    if fixture.startswith("gemm_chain"):
        args = kernels.gemm_chain_inputs(size["M"], size["K1"], 64, size["N2"])
        ref = kernels.gemm_chain_reference(*args)
    elif fixture.startswith("row_var"):
        args = kernels.row_var_inputs(size["M"], size["N"])
        ref = kernels.row_var_reference(*args)
    else:
        args = kernels.attn_two_pass_inputs(size["N"], size["N_KV"])
        ref = kernels.attn_two_pass_reference(*args)
    mine = args
    out = mod.run(*mine)
    torch.cuda.synchronize()
    scale = ref.abs().max().item()
    tri = _triton(fixture, args, torch.empty_like(out))
    r = {"fixture": fixture, **size, "twill_rel_err": (out.float() - ref).abs().max().item() / scale,
         "triton_rel_err": (tri.float() - ref).abs().max().item() / scale,
         "twill_vs_triton": (out.float() - tri.float()).abs().max().item() / scale,
         "finite": bool(torch.isfinite(out).all().item())}
    if timed:
        import triton.testing
        r["twill_us"] = 1e3 * triton.testing.do_bench(lambda: mod.run(*mine), warmup=25, rep=200)
        r["triton_us"] = 1e3 * triton.testing.do_bench(lambda: _triton(fixture, args, tri), warmup=25, rep=200)
    return r


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out")
    opts = p.parse_args()
    import torch
    results = {"device": torch.cuda.get_device_name(), "rows": []}
    for fixture, sizes in CASES.items():
        for size in sizes:
            try:
                r = check(fixture, size, timed=True)
            except Exception as exc:  # noqa: BLE001 - recorded, the next case goes on
                r = {"fixture": fixture, **size, "error": f"{type(exc).__name__}: {exc}"}
            results["rows"].append(r)
            print(json.dumps(r), flush=True)
    if opts.out:
        with open(opts.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
