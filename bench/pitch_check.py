"""GPU check of the row pitch (issues #21, #22): the held-out row kernels' bindings at the sizes whose rows TMA cannot
read contiguously (N = 781 f32, V = 50257 bf16: staged into rows padded to 16 bytes) and on strided views of wider
tensors (a row stride of 16-byte multiples: taken as it lies; an odd one: staged), against the fp32 references.

    python bench/heldout/run.py build --batch 7 --out /tmp/k7 softmax_fused softmax_online layernorm_fwd rmsnorm_fwd xent_scalar
    python bench/heldout/run.py build --batch 8 --out /tmp/k8 softmax_row layer_norm_fwd rms_norm_fwd
    python bench/heldout/run.py build --batch 6 --out /tmp/k6 cross_entropy_fwd
    python bench/pitch_check.py --batch 7 --kernels /tmp/k7      # GPU: writes /tmp/k7/pitch.json
    python bench/pitch_check.py --batch 8 --kernels /tmp/k8
    python bench/pitch_check.py --batch 6 --kernels /tmp/k6

Each case runs the binding on the Triton launch's arguments (bench/heldout/run.py's way: outputs filled with NaN
first) in three layouts: "contiguous" (the tensors as make_inputs gives them), "view16" (every 2-d tensor of the
call, inputs and outputs given, a view x[:, :N] of a tensor whose rows are padded to the next 16-byte multiple plus
16 bytes: the binding passes the stride, no copy) and "view_odd" (rows one element wider than N: staged). It records
the relative error of each output, the binding's layouts (plan["layouts"] of each loop: "as is", "stage", "alloc")
and the time per call (host included; the staged copies show there).
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

# kernel -> the sizes checked: the ones TMA cannot read contiguously, and one it can (the control)
CASES = {
    "softmax_fused": [None, {"M": 1000, "N": 1024}],  # its default is the tutorial's 4096 x 781 (f32)
    "softmax_online": [{"R": 4096, "N": 781}, {"R": 1000, "N": 1024}],
    "layernorm_fwd": [{"R": 1000, "N": 781}, {"R": 1000, "N": 1024}],
    "rmsnorm_fwd": [{"R": 1000, "N": 781}, {"R": 1000, "N": 1024}],
    "xent_scalar": [{"R": 1000, "V": 50257}, {"R": 1000, "V": 32000}],  # GPT-2's vocabulary, bf16
    "cross_entropy_fwd": [{"R": 1000, "V": 50257}, {"R": 1000, "V": 32000}],  # batch 6
    "softmax_row": [{"N": 781}, {"M": 1000, "N": 1024}],
    "layer_norm_fwd": [{"N": 781}, {"M": 1000}],
    "rms_norm_fwd": [{"N": 781}, {"M": 1000}],
}
LAYOUTS = ("contiguous", "view16", "view_odd")


def _view(t, how):
    """`t` (a 2-d CUDA tensor, or anything else, returned as it is) as the view [:, :N] of a wider tensor."""
    import torch
    if not isinstance(t, torch.Tensor) or t.dim() != 2 or how == "contiguous":
        return t
    n, esize = t.shape[1], t.element_size()
    width = n + 1 if how == "view_odd" else -(-n * esize // 16) * 16 // esize + 16 // esize
    wide = torch.full((t.shape[0], width), float("nan") if t.is_floating_point() else 0, dtype=t.dtype, device=t.device)
    view = wide[:, :n]
    view.copy_(t)
    return view


def _modules(mod):
    """The binding's modules: itself, or a sequence's loops' bindings."""
    return [mod] if hasattr(mod, "SPEC") else [mod._module(f) for _, f, _, _ in mod.LOOPS]


def _layouts(mod):
    """The layouts of the binding's one kind of call (its _LAUNCHES cleared before): per loop, each argument's
    (how, pitch)."""
    return [{a["name"]: list(x[:2]) for a, x in zip(m.SPEC["args"], launch.plan["layouts"])}
            for m in _modules(mod) for launch in m._LAUNCHES.values()]


def check_one(K, kdir, name, size, how) -> dict:
    import torch
    from gpu_bench import load_binding
    from triton_bench import capture, median_ms, rel_error
    row = {"size": size or "default", "layout": how}
    try:
        mod = load_binding(f"{name}_sm90", str(kdir))
        fns = K.KERNELS[name]
        tensors, params = fns["make_inputs"](size, "cuda")
        ref = fns["reference"](*tensors, **params)
        refs = ref if isinstance(ref, (tuple, list)) else (ref,)
        args, outs = capture(K, name, tensors, params)
        names = [p.name for p in inspect.signature(mod.run).parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD]
        by_name = dict(zip(fns["kernel"].arg_names, args))
        viewed = {id(t): _view(t, how) for t in list(by_name.values()) if isinstance(t, torch.Tensor)}
        by_name = {n: viewed.get(id(t), t) for n, t in by_name.items()}
        outs = [viewed.get(id(t), t) for t in outs]
        call = tuple(by_name[n] for n in names)
        sequence = not hasattr(mod, "SPEC")
        outputs = set() if sequence else {x["name"] for x in mod.SPEC["args"] if x["output"]}
        for n, x in zip(names, call):
            if n in outputs and isinstance(x, torch.Tensor):
                x.fill_(float("nan"))
        run = lambda: mod.run(*call)  # noqa: E731
        for m in _modules(mod):
            m._LAUNCHES.clear()  # so that the one kind of this call is there after it
        got = run()
        torch.cuda.synchronize()
        if sequence:  # each returned output in the place of the launch's tensor of that argument
            got = got if isinstance(got, tuple) else (got,)
            place = {id(t): i for i, t in enumerate(outs)}
            for (ret, _, _), t in zip(mod.OUTPUTS, got):
                outs[place[id(by_name[ret])]] = t
        row["strides"] = [list(t.stride()) for t in outs if isinstance(t, torch.Tensor)]
        row["layouts"] = _layouts(mod)
        row["rel_errors"] = [rel_error(o, r) for o, r in zip(outs, refs)]
        row["rel_error"] = max(row["rel_errors"])
        row["correct"] = row["rel_error"] < 1e-2
        row["twill_ms"] = median_ms(run, reps=10)
    except Exception as exc:  # recorded, the next case goes on
        row["error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
    torch.cuda.empty_cache()
    return row


def main(argv=None) -> None:
    import torch
    from run import _kernels
    from triton_bench import _build_all
    p = argparse.ArgumentParser()
    p.add_argument("--batch", choices=("6", "7", "8"), required=True)
    p.add_argument("--kernels", required=True)
    p.add_argument("names", nargs="*", help="default: every kernel of CASES built in --kernels")
    a = p.parse_args(argv)
    K = _kernels(a.batch)
    kdir = Path(a.kernels)
    names = a.names or [n for n in CASES if (kdir / f"{n}_sm90.py").exists()]
    _build_all(sorted(kdir / f"{n}_sm90.py" for n in names))
    results = {"card": torch.cuda.get_device_name(), "torch": torch.__version__, "kernels": {}}
    for name in names:
        rows = results["kernels"][name] = []
        for size in CASES[name]:
            for how in LAYOUTS:
                rows.append(check_one(K, kdir, name, size, how))
                print(name, json.dumps(rows[-1]), flush=True)
    (kdir / "pitch.json").write_text(json.dumps(results, indent=1, sort_keys=True))
    bad = [(n, r["size"], r["layout"]) for n, rs in results["kernels"].items() for r in rs if not r.get("correct")]
    print("all correct" if not bad else f"NOT correct: {bad}")


if __name__ == "__main__":
    main()
