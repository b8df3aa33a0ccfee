#!/usr/bin/env python3
"""GPU: a build's bindings at sizes whose row count is no multiple of the kernel's tile (a grown
tile's second part partly or wholly past M), against the corpus kernel's fp32 reference.

    python3 bench/odd_sizes.py --kernels DIR --only gemm_persistent_tma gemm_fp8 --m 384,640,4224 --out J
"""
import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import triton_bench as tb  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", required=True)
    ap.add_argument("--only", nargs="+", required=True)
    ap.add_argument("--m", default="384,640,4224")
    ap.add_argument("--out")
    a = ap.parse_args()
    import torch
    module = tb.load_variant(None, False, Path(tempfile.mkdtemp()))
    rows = []
    for name in a.only:
        mod = tb.load_binding(f"{name}_sm90", a.kernels)
        fns = module.KERNELS[name]
        for m in [int(x) for x in a.m.split(",")]:
            tensors, params = fns["make_inputs"](dict(M=m), "cuda")
            refs, error = tb.references(fns, tensors, params)
            args_, outs = tb.capture(module, name, tensors, params)
            try:
                tb.twill_call(mod, name, args_)()
                torch.cuda.synchronize()
                errs = [tb.rel_error(o, r) for o, r in zip(outs, refs)]
                row = dict(kernel=name, M=m, rel_error=max(errs),
                           correct=max(errs) < (5e-2 if "fp8" in name else 1e-2))
            except Exception as exc:
                row = dict(kernel=name, M=m, error=f"{type(exc).__name__}: {str(exc)[:300]}")
            print(json.dumps(row), flush=True)
            rows.append(row)
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
