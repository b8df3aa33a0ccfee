"""rowtile's GPU check: the four row kernels' bindings as emitted on the rowtile branch (short rows: each CTA R < 64
rows where 64-row tiles leave SMs idle) and on main (64-row tiles; emitted there too, the same kernel files), each
at 1000 x 1000, 4096 x 1024, 32768 x 1024: its outputs against the kernel's fp32 torch reference, and its kernel time
(CUDA-graph replays) against main's and Triton's, timed in alternating rounds (medians).

    python .devrun/rowtile/check.py --out DIR      # every case in its own subprocess (a device fault loses one)
    python .devrun/rowtile/check.py build          # every library (nvcc, all cores), before any case
    python .devrun/rowtile/check.py case K M N     # one case: one JSON line
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "heldout"))

# kernel -> (heldout batch, make_inputs' key of the rows, of the columns)
KERNELS = {"layernorm_fwd": ("7", "R", "N"), "rmsnorm_fwd": ("7", "R", "N"), "softmax_online": ("7", "R", "N"),
           "softmax_row": ("8", "M", "N")}
SIZES = [(1000, 1000), (4096, 1024), (32768, 1024)]
ROUNDS = 7


def _binding(which: str, name: str):
    import importlib.util
    batch = KERNELS[name][0]
    path = HERE / which / f"b{batch}" / f"{name}_sm90.py"
    spec = importlib.util.spec_from_file_location(f"rowtile_{which}_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cmd_build() -> None:
    from triton_bench import _build_all
    _build_all(sorted(HERE.glob("*/b*/*_sm90.py")))


def _short(mod) -> list:
    """Each loop's short rows at the last plan (0: 64-row tiles)."""
    out = []
    for _, file, _, _ in getattr(mod, "LOOPS", ()):
        loop = mod._module(file)
        plans = [p for k, p in loop._PLANS.items() if k[0] == loop.SPEC["kernel"]]
        out.append(plans[-1].get("short_rows", "none") if plans else None)
    return out


def cmd_case(name: str, m: int, n: int) -> dict:
    import inspect

    import torch
    import run as heldout
    from triton_bench import capture, graph_ms, rel_error
    batch, rkey, ckey = KERNELS[name]
    K = heldout._kernels(batch)
    fns = K.KERNELS[name]
    tensors, params = fns["make_inputs"]({rkey: m, ckey: n}, "cuda")
    ref = fns["reference"](*tensors, **params)  # the kernel's fp32 torch reference (bench/heldout)
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    row = {"kernel": name, "size": [m, n], "card": torch.cuda.get_device_name()}
    tri = lambda: fns["launch"](*tensors, **params)  # noqa: E731
    row["triton_rel_error"] = rel_error(tri(), refs if len(refs) > 1 else refs[0])
    args, outs = capture(K, name, tensors, params)
    by_name = dict(zip(fns["kernel"].arg_names, args))
    runs = {"triton": tri}
    for which in ("new", "old"):
        mod = _binding(which, name)
        names = [p.name for p in inspect.signature(mod.run).parameters.values()
                 if p.kind == p.POSITIONAL_OR_KEYWORD and p.name in by_name]
        call_args = tuple(by_name[x] for x in names)
        place = {id(t): i for i, t in enumerate(outs)}
        for mode, fused in (("default", None), ("fused", True), ("unfused", False)):
            key = f"{which}_{mode}"
            try:
                fn = lambda _m=mod, _a=call_args, _f=fused: _m.run(*_a, fused=_f)  # noqa: E731
                got = fn()
                torch.cuda.synchronize()
                got = got if isinstance(got, tuple) else (got,)
                found = list(outs)
                for (ret, _, _), t in zip(mod.OUTPUTS, got):
                    found[place[id(by_name[ret])]] = t
                errors = [rel_error(o, r) for o, r in zip(found, refs)]
                row[key] = {"rel_error": max(errors), "correct": max(errors) < 1e-2, "short_rows": _short(mod)}
                runs[key] = fn
            except Exception as exc:  # recorded, the next mode goes on
                row[key] = {"error": f"{type(exc).__name__}: {str(exc)[:400]}"}
    times = {k: [] for k in runs}
    for _ in range(ROUNDS):  # alternating: every variant once a round
        for k, fn in runs.items():
            try:
                times[k].append(graph_ms(fn, reps=20, replays=3) * 1e3)
            except Exception as exc:
                row.setdefault(k, {})["time_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    for k, ts in times.items():
        if ts:
            row.setdefault(k, {})["us"] = sorted(ts)[len(ts) // 2]
            row[k]["us_all"] = [round(t, 2) for t in ts]
    return row


def main() -> None:
    if sys.argv[1:2] == ["build"]:
        cmd_build()
        return
    if sys.argv[1:2] == ["case"]:
        print("ROW " + json.dumps(cmd_case(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))), flush=True)
        return
    out = Path(sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else os.environ.get("OUT", "/tmp/out"))
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    b = subprocess.run([sys.executable, __file__, "build"], capture_output=True, text=True, timeout=300)
    print("build", round(time.time() - t0, 1), "s", b.stdout[-2000:], b.stderr[-2000:], flush=True)
    rows = []
    for name in KERNELS:
        for m, n in SIZES:
            try:
                r = subprocess.run([sys.executable, __file__, "case", name, str(m), str(n)], capture_output=True,
                                   text=True, timeout=60)
                line = next((x for x in r.stdout.splitlines() if x.startswith("ROW ")), None)
                row = json.loads(line[4:]) if line else {"kernel": name, "size": [m, n], "rc": r.returncode,
                                                          "error": (r.stdout + r.stderr)[-1500:]}
            except subprocess.TimeoutExpired:
                row = {"kernel": name, "size": [m, n], "error": "timeout 60 s"}
            rows.append(row)
            (out / "rowtile.json").write_text(json.dumps(rows, indent=1))
            print(json.dumps(row)[:3000], flush=True)
    print(f"\nkernel us (CUDA graph, median of {ROUNDS} alternating rounds); new = rowtile, old = main")
    print(f"{'kernel':16} {'size':12} {'new dflt':>9} {'new fused':>9} {'new 1/loop':>10} {'old dflt':>9} "
          f"{'old fused':>9} {'old 1/loop':>10} {'triton':>8}  short rows (new default)")
    for row in rows:
        def us(k):
            v = row.get(k, {})
            if "us" not in v:
                return (v.get("error") or row.get("error") or "-")[:9]
            return f"{v['us']:.1f}" + ("" if v.get("correct", True) else "!")
        print(f"{row['kernel']:16} {'x'.join(map(str, row['size'])):12} {us('new_default'):>9} {us('new_fused'):>9} "
              f"{us('new_unfused'):>10} {us('old_default'):>9} {us('old_fused'):>9} {us('old_unfused'):>10} "
              f"{us('triton'):>8}  {row.get('new_default', {}).get('short_rows')}")
    print("(! = wrong against the fp32 reference, rel error >= 1e-2)")


if __name__ == "__main__":
    main()
