"""GPU check of rows read where they lie (issue #22, twill/emit/unaligned.py): the row kernels at sizes whose rows TMA
cannot read as boxes (GPT-2's vocabulary 50257 bf16, N = 781 f16 and f32), which the binding used to stage into rows
padded to 16 bytes before every launch and now hands to the kernel as they lie (its load warp reads them a box a
row through a flat tensor map).

    sh bench/unaligned_gpu.sh build DIR      # here (CPU): import, solve --gpu h200, emit-cuda --binding torch
    python bench/unaligned_gpu.py --kernels DIR   # GPU: DIR/unaligned.json

Per case (the kernel's binding called with the arguments the Triton launch passes its kernel, outputs NaN first):
- `layouts`: the binding's plan per loop and argument ("as is" where the kernel reads the rows where they lie,
  "stage" where it copies them first), so a run shows which path it took;
- `rel_error` against the kernel's fp32 reference (correct under 1e-2), and Triton's own;
- times: `twill_ms`, `triton_ms` per call (host included) and `*_kernel_ms` in a CUDA graph (the GPU alone);
  `padded_ms`: twill's call on the same inputs given as views of rows padded to 16 bytes (the 2-d tensor map, no
  copy: what the row-by-row path is measured against), and `staged_ms`: the copy into that padding plus that call
  (what the binding did before: the staging this change removes);
- `ratio` = triton_kernel_ms / twill_kernel_ms (above 1: twill faster).
"""
from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "heldout"))

# (batch, kernel) -> sizes: the unaligned ones first, then an aligned control
CASES = {
    ("6", "cross_entropy_fwd"): [{"R": 1000, "V": 50257}, {"R": 4096, "V": 50257}, {"R": 1000, "V": 32000}],
    ("7", "xent_scalar"): [{"R": 1000, "V": 50257}],
    ("7", "layernorm_fwd"): [{"R": 1000, "N": 781}, {"R": 4096, "N": 781}, {"R": 1000, "N": 1024}],
    ("7", "softmax_online"): [{"R": 4096, "N": 781}],
    ("7", "rmsnorm_fwd"): [{"R": 1000, "N": 781}],
    ("7", "softmax_fused"): [None],  # the tutorial's 4096 x 781 f32
    ("8", "layer_norm_fwd"): [{"N": 781}],
    ("8", "softmax_row"): [{"N": 781}],
}


def _modules(mod):
    return [mod] if hasattr(mod, "SPEC") else [mod._module(f) for _, f, _, _ in mod.LOOPS]


def _layouts(mod):
    return [{a["name"]: list(x[:2]) for a, x in zip(m.SPEC["args"], launch.plan["layouts"])}
            for m in _modules(mod) for launch in m._LAUNCHES.values()]


def _padded(t):
    """A 2-d tensor whose rows are not 16-byte multiples as the view [:, :N] of rows padded to them (else itself),
    and the copy that fills it."""
    import torch
    if not isinstance(t, torch.Tensor) or t.dim() != 2 or t.shape[1] * t.element_size() % 16 == 0:
        return t, None
    n, esize = t.shape[1], t.element_size()
    wide = torch.empty((t.shape[0], -(-n * esize // 16) * 16 // esize), dtype=t.dtype, device=t.device)
    view = wide[:, :n]
    view.copy_(t)
    return view, (lambda: view.copy_(t))


def check_one(K, kdir, name, size) -> dict:
    import torch
    from gpu_bench import load_binding
    from triton_bench import capture, graph_ms, median_ms, rel_error
    row = {"size": size or "default"}
    try:
        mod = load_binding(f"{name}_sm90", str(kdir))
        fns = K.KERNELS[name]
        tensors, params = fns["make_inputs"](size, "cuda")
        ref = fns["reference"](*tensors, **params)
        refs = ref if isinstance(ref, (tuple, list)) else (ref,)
        launch = lambda: fns["launch"](*tensors, **params)  # noqa: E731
        row["triton_rel_error"] = rel_error(launch(), ref)
        args, outs = capture(K, name, tensors, params)
        names = [p.name for p in inspect.signature(mod.run).parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD]
        by_name = dict(zip(fns["kernel"].arg_names, args))
        names = [n for n in names if n in by_name]
        call = tuple(by_name[n] for n in names)
        sequence = not hasattr(mod, "SPEC")
        outputs = set() if sequence else {x["name"] for x in mod.SPEC["args"] if x["output"]}
        for n, x in zip(names, call):
            if n in outputs and isinstance(x, torch.Tensor):
                x.fill_(float("nan"))
        run = lambda: mod.run(*call)  # noqa: E731
        for m in _modules(mod):
            m._LAUNCHES.clear()  # so that this call's one kind is there after it
        got = run()
        torch.cuda.synchronize()
        row["layouts"] = _layouts(mod)
        if sequence:
            got = got if isinstance(got, tuple) else (got,)
            place = {id(t): i for i, t in enumerate(outs)}
            outs = list(outs)
            for (ret, _, _), t in zip(mod.OUTPUTS, got):
                outs[place[id(by_name[ret])]] = t
        row["shapes"] = [list(t.shape) for t in tensors]
        row["rel_errors"] = [rel_error(o, r) for o, r in zip(outs, refs)]
        row["rel_error"] = max(row["rel_errors"])
        row["correct"] = row["rel_error"] < 1e-2 and all(bool(torch.isfinite(o.float()).all()) for o in outs)
        row["twill_ms"] = median_ms(run, reps=20)
        row["triton_ms"] = median_ms(launch, reps=20)
        row["twill_kernel_ms"] = graph_ms(run)
        row["triton_kernel_ms"] = graph_ms(launch)
        row["ratio"] = row["triton_kernel_ms"] / row["twill_kernel_ms"]
        # the inputs as views of padded rows: the 2-d map (padded_ms), and with the copy staging made (staged_ms)
        padded = {n: _padded(x) if n not in outputs else (x, None) for n, x in zip(names, call)}
        copies = [c for _, c in padded.values() if c is not None]
        if copies:
            call_p = tuple(padded[n][0] for n in names)
            run_p = lambda: mod.run(*call_p)  # noqa: E731
            run_p()
            torch.cuda.synchronize()
            row["padded_kernel_ms"] = graph_ms(run_p)
            row["staged_kernel_ms"] = graph_ms(lambda: ([c() for c in copies], run_p()))
    except Exception as exc:  # recorded, the next case goes on
        row["error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
    torch.cuda.empty_cache()
    return row


def main(argv=None) -> None:
    import torch
    from run import _kernels
    from triton_bench import _build_all
    p = argparse.ArgumentParser()
    p.add_argument("--kernels", required=True, help="the build's DIR: DIR/k6, DIR/k7, DIR/k8")
    p.add_argument("names", nargs="*", help="default: every kernel of CASES built")
    a = p.parse_args(argv)
    root = Path(a.kernels)
    cases = [(b, n) for b, n in CASES if (root / f"k{b}" / f"{n}_sm90.py").exists() and (not a.names or n in a.names)]
    _build_all(sorted(root / f"k{b}" / f"{n}_sm90.py" for b, n in cases))
    results = {"card": torch.cuda.get_device_name(), "torch": torch.__version__, "kernels": {}}
    for b, name in cases:
        K = _kernels(b)
        rows = results["kernels"][name] = []
        for size in CASES[(b, name)]:
            rows.append(check_one(K, root / f"k{b}", name, size))
            print(name, json.dumps(rows[-1]), flush=True)
    (root / "unaligned.json").write_text(json.dumps(results, indent=1, sort_keys=True))
    print(f"{'kernel':20} {'size':24} {'ok':3} {'twill us':>9} {'triton us':>9} {'ratio':>6} {'padded us':>9} "
          f"{'staged us':>9}  layouts")
    us = lambda r, k: f"{1000 * r[k]:9.1f}" if k in r else f"{'-':>9}"  # noqa: E731
    for name, rs in results["kernels"].items():
        for r in rs:
            stage = sorted({f"{n}:{lay[0]}" for loop in r.get("layouts", []) for n, lay in loop.items()
                            if lay[0] != "alloc"})
            print(f"{name:20} {json.dumps(r['size']):24} {'yes' if r.get('correct') else 'NO':3} "
                  f"{us(r, 'twill_kernel_ms')} {us(r, 'triton_kernel_ms')} {r.get('ratio', 0):6.2f} "
                  f"{us(r, 'padded_kernel_ms')} {us(r, 'staged_kernel_ms')}  {' '.join(stage)} {r.get('error', '')}")
    bad = [(n, r["size"]) for n, rs in results["kernels"].items() for r in rs if not r.get("correct")]
    print("all correct" if not bad else f"NOT correct: {bad}")


if __name__ == "__main__":
    main()
