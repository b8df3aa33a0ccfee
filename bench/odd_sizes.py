#!/usr/bin/env python3
"""GPU: builds' bindings at other sizes than the bench's (rows no multiple of the kernel's tile, a
grown tile's second part partly or wholly past M; few tiles for the SMs), against the corpus
kernel's fp32 reference, and with --time each build's kernel time (CUDA-graph replays, median of
5 rounds alternating the builds).

    python3 bench/odd_sizes.py --kernels DIR [DIR ...] --only gemm_persistent_tma gemm_fp8 \
        --sizes M=384 M=640,N=1024 --out J [--time]
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
    ap.add_argument("--kernels", nargs="+", required=True)
    ap.add_argument("--only", nargs="+", required=True)
    ap.add_argument("--sizes", nargs="+", default=["M=384", "M=640", "M=4224"])
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    import torch
    module = tb.load_variant(None, False, Path(tempfile.mkdtemp()))
    rows = []
    for name in a.only:
        mods = [(Path(d).name, tb.load_binding(f"{name}_sm90", d)) for d in a.kernels]
        fns = module.KERNELS[name]
        for text in a.sizes:
            size = {k: int(v) for k, v in (kv.split("=") for kv in text.split(","))}
            tensors, params = fns["make_inputs"](size, "cuda")
            refs, error = tb.references(fns, tensors, params)
            row = dict(kernel=name, size=size)
            runs = []
            for tag, mod in mods:
                args_, outs = tb.capture(module, name, tensors, params)
                try:
                    run = tb.twill_call(mod, name, args_)
                    run()
                    torch.cuda.synchronize()
                    errs = [tb.rel_error(o, r) for o, r in zip(outs, refs)]
                    row[tag] = dict(rel_error=max(errs), correct=max(errs) < tb.tolerance(name))
                    runs.append((tag, run))
                except Exception as exc:
                    row[tag] = dict(error=f"{type(exc).__name__}: {str(exc)[:300]}")
            if a.time and runs:
                times = {tag: [] for tag, _ in runs}
                for k in range(5):
                    for tag, run in (runs if k % 2 == 0 else runs[::-1]):
                        times[tag].append(tb.graph_ms(run, 10))
                for tag, ts in times.items():
                    row[tag]["kernel_ms"] = sorted(ts)[len(ts) // 2]
            print(json.dumps(row), flush=True)
            rows.append(row)
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
