"""The held-out row kernels of loops in sequence run as one kernel (twill/emit/seqfuse.py) and as one kernel per loop,
against their fp32 references and timed against Triton's own kernel.

    python bench/seq/fused_check.py build --out DIR        # here: import, solve --gpu h200, emit-cuda --binding
                                                           # torch (bench/heldout/run.py build) of every kernel below
    python bench/seq/fused_check.py check --kernels DIR    # GPU: each kernel at each size, K.py with fused=True,
                                                           # fused=False and the default (None): its error against the
                                                           # reference, its time per call and in a CUDA graph (the
                                                           # kernel alone), and Triton's; DIR/fused_check.json

Sizes: 1000 x 1000, 4096 x 1024, 4096 x 5120 (rows x columns). A kernel whose binding has no one kernel (FUSED is
None: its reason is in its K.py) runs one kernel per loop alone.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "heldout"))

# (batch, kernel, its make_inputs' key of the rows)
KERNELS = [("7", "layernorm_fwd", "R"), ("7", "rmsnorm_fwd", "R"), ("7", "softmax_online", "R"), ("7", "softmax_3pass", "M"),
           ("8", "layer_norm_fwd", "M"), ("8", "rms_norm_fwd", "M"), ("8", "softmax_row", "M")]
SIZES = [(1000, 1000), (4096, 1024), (4096, 5120)]
MODES = {"fused": True, "unfused": False, "default": None}


def cmd_build(a) -> None:
    import run as heldout
    for batch in sorted({b for b, _, _ in KERNELS}):
        heldout.main(["build", "--batch", batch, "--out", str(Path(a.out) / f"b{batch}"),
                      *[name for b, name, _ in KERNELS if b == batch]])


def _one(K, mod, name, size) -> dict:
    """One kernel at one size: each mode's error and times, Triton's."""
    import inspect

    import torch
    from triton_bench import capture, graph_ms, median_ms, rel_error
    fns = K.KERNELS[name]
    tensors, params = fns["make_inputs"](size, "cuda")
    ref = fns["reference"](*tensors, **params)
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    row = {"size": size, "fused_available": mod.FUSED is not None}
    tri = lambda: fns["launch"](*tensors, **params)  # noqa: E731
    row["triton_rel_error"] = rel_error(tri(), ref)
    args, outs = capture(K, name, tensors, params)
    by_name = dict(zip(fns["kernel"].arg_names, args))
    names = [p.name for p in inspect.signature(mod.run).parameters.values()
             if p.kind == p.POSITIONAL_OR_KEYWORD and p.name in by_name]
    call_args = tuple(by_name[n] for n in names)
    place = {id(t): i for i, t in enumerate(outs)}
    for mode, fused in MODES.items():
        if fused and mod.FUSED is None:
            continue
        try:
            run = lambda: mod.run(*call_args, fused=fused)  # noqa: E731
            got = run()
            torch.cuda.synchronize()
            got = got if isinstance(got, tuple) else (got,)
            found = list(outs)
            for (ret, _, _), t in zip(mod.OUTPUTS, got):  # each returned output in the place of its launch tensor
                found[place[id(by_name[ret])]] = t
            errors = [rel_error(o, r) for o, r in zip(found, refs)]
            row[mode] = {"rel_error": max(errors), "correct": max(errors) < 1e-2, "ms": median_ms(run, reps=10),
                         "kernel_ms": graph_ms(run)}
        except Exception as exc:  # recorded, the next mode goes on
            row[mode] = {"error": f"{type(exc).__name__}: {str(exc)[:400]}"}
    row["triton_ms"] = median_ms(tri, reps=10)
    row["triton_kernel_ms"] = graph_ms(tri)
    return row


def cmd_check(a) -> None:
    import torch
    import run as heldout
    from gpu_bench import load_binding
    from triton_bench import _build_all
    kdir = Path(a.kernels)
    bindings = [kdir / f"b{b}" / f"{name}_sm90.py" for b, name, _ in KERNELS]
    _build_all([p for p in bindings if p.exists()])
    results = {"card": torch.cuda.get_device_name(), "torch": torch.__version__, "kernels": {}}
    for (batch, name, rows), path in zip(KERNELS, bindings):
        K = heldout._kernels(batch)
        mod = load_binding(path.stem, str(path.parent))
        results["kernels"][name] = []
        for m, n in a.sizes:
            try:
                row = _one(K, mod, name, {rows: m, "N": n})
            except Exception as exc:
                row = {"size": {rows: m, "N": n}, "error": f"{type(exc).__name__}: {str(exc)[:400]}"}
            results["kernels"][name].append(row)
            print(name, json.dumps(row), flush=True)
            torch.cuda.empty_cache()
    (kdir / "fused_check.json").write_text(json.dumps(results, indent=1, sort_keys=True))
    print(f"\n{results['card']}: kernel us (CUDA graph) twill one kernel / one per loop / default vs Triton")
    for name, rows in results["kernels"].items():
        for row in rows:
            us = lambda mode: (f"{row[mode]['kernel_ms'] * 1e3:.1f}{'' if row[mode]['correct'] else ' WRONG'}"  # noqa: E731
                               if "kernel_ms" in row.get(mode, {}) else row.get(mode, {}).get("error", "-")[:40])
            tri = row.get("triton_kernel_ms")
            print(f"{name:16} {str(row['size']):24} {us('fused'):>10} {us('unfused'):>10} {us('default'):>10} "
                  f"{tri * 1e3 if tri else float('nan'):8.1f}")


def _sizes(text: str) -> list:
    return [tuple(int(x) for x in size.split("x")) for size in text.split(",")]


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", required=True)
    c = sub.add_parser("check")
    c.add_argument("--kernels", required=True)
    c.add_argument("--sizes", type=_sizes, default=SIZES,
                   help="ROWSxCOLS,... (default: 1000x1000,4096x1024,4096x5120)")
    a = p.parse_args(argv)
    {"build": cmd_build, "check": cmd_check}[a.cmd](a)


if __name__ == "__main__":
    main()
