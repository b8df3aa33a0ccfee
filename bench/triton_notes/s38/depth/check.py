"""depth's GPU check: row kernels and bias + GELU with load rings deepened for the TMA latency (branch depth,
twill/emit/streams.py: new/) against the same schedules emitted by main (old/: main's bench/heldout/run.py build;
new/ re-emitted from old/'s schedule files with emit-cuda --load-rings latency: bash .devrun/depth/emit_new.sh, the
option off by default on main), and Triton. Each case: its outputs against
the kernel's fp32 torch reference, kernel time (CUDA-graph replays) old / new / Triton in alternating rounds,
medians.

    python .devrun/depth/check.py --out DIR      # build (prebuilt libraries reused), then every kernel in a subprocess
    python .devrun/depth/check.py build          # every library (nvcc, all cores) that is not prebuilt or fails to load
    python .devrun/depth/check.py case K         # one kernel's sizes: JSON lines
"""
from __future__ import annotations

import ctypes
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

# kernel -> (heldout batch, make_inputs' key of the rows, of the columns, sizes)
KERNELS = {"layernorm_fwd": ("7", "R", "N", [(1000, 1000), (32768, 1024)]),
           "rmsnorm_fwd": ("7", "R", "N", [(1000, 1000), (32768, 1024)]),
           "softmax_online": ("7", "R", "N", [(1000, 1000), (32768, 1024)]),
           "bias_gelu": ("10", "M", "N", [(4096, 4096)])}
ROUNDS = 5


def _binding(which: str, name: str):
    import importlib.util
    path = HERE / which / f"b{KERNELS[name][0]}" / f"{name}_sm90.py"
    spec = importlib.util.spec_from_file_location(f"depth_{which}_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cmd_build() -> None:
    """Build every library: a prebuilt one (carried in TWILL_CACHE_DIR, same nvcc path) is reused where it loads."""
    from concurrent.futures import ThreadPoolExecutor
    paths = sorted(HERE.glob("*/b*/*_sm90.py"))

    def check(p):
        mod = _binding(p.parent.parent.name, p.stem[:-len("_sm90")])
        try:
            for attempt in (0, 1):
                so = mod.build_library()
                libs = [x for x in (so if isinstance(so, (list, tuple)) else [so]) if isinstance(x, str)]
                try:
                    for lib in libs:
                        ctypes.CDLL(lib)
                    return f"{p} ok{' (rebuilt here)' if attempt else ''}"
                except OSError as exc:  # a library built on another machine that does not load here: rebuild
                    print(p, "prebuilt library does not load:", exc, flush=True)
                    for lib in libs:
                        os.remove(lib)
            return f"{p} does not load"
        except Exception as exc:
            return f"{p} build/load failed: {str(exc)[-300:]}"
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        for line in pool.map(check, paths):
            print(line, flush=True)


def cmd_case(name: str) -> list:
    import inspect

    import torch
    import run as heldout
    from triton_bench import capture, graph_ms, rel_error
    batch, rkey, ckey, sizes = KERNELS[name]
    K = heldout._kernels(batch)
    fns = K.KERNELS[name]
    rows = []
    for m, n in sizes:
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
            try:
                mod = _binding(which, name)
                names = [p.name for p in inspect.signature(mod.run).parameters.values()
                         if p.kind == p.POSITIONAL_OR_KEYWORD and p.name in by_name]
                call_args = tuple(by_name[x] for x in names)
                sequence = not hasattr(mod, "SPEC")
                if not sequence:
                    for x in (a["name"] for a in mod.SPEC["args"] if a["output"]):
                        if x in by_name:
                            by_name[x].fill_(float("nan"))
                fn = lambda _m=mod, _a=call_args: _m.run(*_a)  # noqa: E731  (K.py's default: fused or not)
                got = fn()
                torch.cuda.synchronize()
                found = list(outs)
                if sequence:
                    got = got if isinstance(got, tuple) else (got,)
                    place = {id(t): i for i, t in enumerate(outs)}
                    for (ret, _, _), t in zip(mod.OUTPUTS, got):
                        found[place[id(by_name[ret])]] = t
                errors = [rel_error(o, r) for o, r in zip(found, refs)]
                row[which] = {"rel_error": max(errors), "correct": max(errors) < 1e-2}
                runs[which] = fn
            except Exception as exc:  # recorded, the other variant goes on
                row[which] = {"error": f"{type(exc).__name__}: {str(exc)[:400]}"}
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
        rows.append(row)
        print("ROW " + json.dumps(row), flush=True)
        del tensors, args, outs
        torch.cuda.empty_cache()
    return rows


def main() -> None:
    if sys.argv[1:2] == ["build"]:
        cmd_build()
        return
    if sys.argv[1:2] == ["case"]:
        cmd_case(sys.argv[2])
        return
    out = Path(sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else os.environ.get("OUT", "/tmp/out"))
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    b = subprocess.run([sys.executable, __file__, "build"], capture_output=True, text=True, timeout=150)
    print("build", round(time.time() - t0, 1), "s\n", b.stdout[-3000:], b.stderr[-2000:], flush=True)
    rows = []
    for name, (_, _, _, sizes) in KERNELS.items():
        try:
            r = subprocess.run([sys.executable, __file__, "case", name], capture_output=True, text=True, timeout=60)
            got = [json.loads(x[4:]) for x in r.stdout.splitlines() if x.startswith("ROW ")]
            if len(got) < len(sizes):
                got.append({"kernel": name, "rc": r.returncode, "error": (r.stdout + r.stderr)[-1500:]})
        except subprocess.TimeoutExpired as exc:
            got = [{"kernel": name, "error": "timeout 60 s", "out": str(exc.stdout)[-1000:]}]
        rows += got
        (out / "depth.json").write_text(json.dumps(rows, indent=1))
        for row in got:
            print(json.dumps(row)[:2000], flush=True)
    print(f"\nkernel us (CUDA graph, median of {ROUNDS} alternating rounds); new = depth (deeper load rings), old = main")
    print(f"{'kernel':16} {'size':12} {'new':>8} {'old':>8} {'triton':>8} {'old/new':>8}")
    for row in rows:
        def us(k):
            v = row.get(k, {})
            if "us" not in v:
                return (v.get("error") or row.get("error") or "-")[:8]
            return f"{v['us']:.1f}" + ("" if v.get("correct", True) else "!")
        ratio = "-"
        if "us" in row.get("new", {}) and "us" in row.get("old", {}):
            ratio = f"{row['old']['us'] / row['new']['us']:.2f}"
        print(f"{row.get('kernel', '?'):16} {'x'.join(map(str, row.get('size', []))):12} {us('new'):>8} {us('old'):>8} "
              f"{us('triton'):>8} {ratio:>8}")
    print("(! = wrong against the fp32 reference, rel error >= 1e-2)")


if __name__ == "__main__":
    main()
