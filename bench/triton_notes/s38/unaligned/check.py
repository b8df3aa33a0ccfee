"""GPU check of rows at any pitch (issue #22, twill/emit/anypitch.py): each case in its own process.

    python .devrun/unaligned/check.py build                    # every library at once, one nvcc a kernel file
    python .devrun/unaligned/check.py all --out DIR --deadline S   # check every case (4 processes at a time),
                                                      # then time the correct ones one by one until S (seconds
                                                      # since the epoch); DIR/results.json after each case
    python .devrun/unaligned/check.py one check|time BATCH NAME SIZE  # one case (JSON on stdout's last line)
    python .devrun/unaligned/check.py list                     # the cases

A case: a held-out kernel's binding (emitted here, carried under .devrun/unaligned/kBATCH), called with the
arguments Triton's launch passes its kernel, checked against the kernel's fp32 reference (outputs NaN first),
staged (TWILL_ANY_PITCH=0: the binding's copy into rows padded to 16 bytes, as before) and at any pitch (the bulk
copies, no staging), recording the layouts each call chose; "time": CUDA-graph replays of staged, any pitch and
Triton's own kernel in alternating rounds, medians.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import types
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "heldout"))

# (batch, kernel, size): the unaligned pitches first (the point), an aligned control after each kind
CASES = [
    ("6", "cross_entropy_fwd", {"R": 1000, "V": 50257}),
    ("6", "layernorm_2loop", {"R": 1000, "N": 781}),
    ("8", "softmax_row", {"N": 781}),
    ("7", "xent_scalar", {"R": 1000, "V": 50257}),
    ("7", "layernorm_fwd", {"R": 1000, "N": 781}),
    ("8", "layer_norm_fwd", {"M": 4096, "N": 781}),
    ("6", "cross_entropy_fwd", {"R": 4096, "V": 50257}),
    ("6", "layernorm_2loop", {"R": 4096, "N": 781}),
    ("6", "cross_entropy_fwd", {"R": 1000, "V": 32008}),  # aligned (16-byte rows): the 2-d map, unchanged
    ("8", "softmax_row", {"M": 1000, "N": 768}),  # aligned control
]
CHECK_TIMEOUT, TIME_TIMEOUT, PARALLEL = 75, 40, 4
ROW: dict = {}  # the case's row as one() fills it (an exception keeps what it had)


def _cases():
    """CASES, or those of the kernels named in $UNALIGNED_ONLY (comma-separated; a trial of the script)."""
    only = [x for x in os.environ.get("UNALIGNED_ONLY", "").split(",") if x]
    return [c for c in CASES if not only or c[1] in only]


def _set_any_pitch(on: bool) -> None:
    """Every binding runtime reads TWILL_ANY_PITCH at each call (a sequence's loops too, loaded lazily)."""
    os.environ["TWILL_ANY_PITCH"] = "1" if on else "0"


def _binding_modules():
    """Every loaded twill binding runtime (a sequence's loops each hold their own copy). `in vars(m)`, not
    hasattr: torch._classes' __getattr__ raises RuntimeError."""
    import gc
    return [m for m in gc.get_objects() if isinstance(m, types.ModuleType) and "ANY_PITCH" in vars(m)
            and "_PLANS" in vars(m)]


def _clear_plans() -> None:
    for m in _binding_modules():
        m._PLANS.clear()


def _layouts():
    """The layouts of the plans made since _clear_plans, per binding module, and the kinds among them."""
    out, kinds = {}, set()
    for m in _binding_modules():
        plans = list(m._PLANS.values())
        if plans:
            out[m.__name__] = [[list(map(str, x)) for x in p["layouts"]] for p in plans]
            kinds |= {x[0] for p in plans for x in p["layouts"]}
    return out, sorted(kinds)


def build() -> None:
    """Every case's library, each kernel file's nvcc its own thread (a sequence's loops and its one kernel
    apart): the machine's cores at once. Prints each build's seconds, spills and any error."""
    from gpu_bench import load_binding
    jobs = []
    for batch, name in sorted({(b, n) for b, n, _ in _cases()}):
        try:
            mod = load_binding(f"{name}_sm90", str(HERE / f"k{batch}"))
        except Exception as exc:  # a binding not built here: its case reports it
            print(json.dumps({"build": name, "error": f"{type(exc).__name__}: {exc}"[:500]}), flush=True)
            continue
        if hasattr(mod, "SPEC"):
            jobs.append((name, mod.build_library))
            continue
        first = mod._module(mod.LOOPS[0][1])
        for loop, file, _, _ in mod.LOOPS:
            jobs.append((f"{name}.{loop}", mod._module(file).build_library))
        if mod.FUSED:
            jobs.append((f"{name}.fused", lambda mod=mod, first=first: first.build(mod._fused_spec(first), mod.HERE)))

    def run(job):
        label, fn = job
        t0 = time.time()
        try:
            so = fn()
            log = Path(so + ".log").read_text() if Path(so + ".log").exists() else ""
            spill = [x.strip() for x in log.splitlines() if re.search(r"\b[1-9]\d* bytes spill (stores|loads)", x)]
            return {"build": label, "s": round(time.time() - t0, 1), "spill_lines": spill,
                    "ptxas_lines": sum("spill" in x for x in log.splitlines())}
        except Exception as exc:
            return {"build": label, "s": round(time.time() - t0, 1), "error": f"{type(exc).__name__}: {exc}"[-800:]}
    with ThreadPoolExecutor(max_workers=max(len(jobs), 1)) as pool:
        for r in pool.map(run, jobs):
            print(json.dumps(r), flush=True)


def one(mode: str, batch: str, name: str, size: dict) -> dict:
    import inspect
    import torch
    from gpu_bench import load_binding
    from heldout.run import _kernels
    from triton_bench import capture, graph_ms, rel_error
    row = ROW
    row.update({"batch": batch, "kernel": name, "size": size, "mode": mode, "card": torch.cuda.get_device_name()})
    K = _kernels(batch)
    t0 = time.time()
    mod = load_binding(f"{name}_sm90", str(HERE / f"k{batch}"))
    fns = K.KERNELS[name]
    tensors, params = fns["make_inputs"](size, "cuda")
    ref = fns["reference"](*tensors, **params)
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    tri = lambda: fns["launch"](*tensors, **params)  # noqa: E731
    args, outs = capture(K, name, tensors, params)
    names = [p.name for p in inspect.signature(mod.run).parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD]
    by_name = dict(zip(fns["kernel"].arg_names, args))
    names = [n for n in names if n in by_name]
    args = tuple(by_name[n] for n in names)
    sequence = not hasattr(mod, "SPEC")
    outputs = set() if sequence else {x["name"] for x in mod.SPEC["args"] if x["output"]}
    run = lambda: mod.run(*args)  # noqa: E731

    def check(tag, want):
        for n, x in zip(names, args):
            if n in outputs and isinstance(x, torch.Tensor):
                x.fill_(float("nan"))
        _clear_plans()
        got = run()
        torch.cuda.synchronize()
        res = list(outs)
        if sequence:
            got = got if isinstance(got, tuple) else (got,)
            place = {id(t): i for i, t in enumerate(outs)}
            for (ret, _, _), t in zip(mod.OUTPUTS, got):
                res[place[id(by_name[ret])]] = t
        errs = [rel_error(o, r) for o, r in zip(res, refs)]
        row[f"{tag}_rel_errors"] = errs
        row[f"{tag}_correct"] = max(errs) < 1e-2
        row[f"{tag}_layouts"], kinds = _layouts()
        row[f"{tag}_layout_kinds"] = kinds
        row[f"{tag}_path_as_asked"] = want in kinds  # the call took the path asked for
        print(json.dumps(row), flush=True)  # what is known so far (a device fault next ends the process)

    if mode == "check":
        row["triton_rel_error"] = rel_error(tri(), ref)
        _set_any_pitch(False)
        check("staged", "stage")
        _set_any_pitch(True)
        row["error"] = "the any-pitch call did not return (a device fault?)"
        print(json.dumps(row), flush=True)
        check("any_pitch", "any pitch")
        del row["error"]
        row["check_s"] = round(time.time() - t0, 1)
        return row
    rounds = {"staged_ms": [], "any_pitch_ms": [], "triton_ms": []}
    for _ in range(3):  # alternating: staged, any pitch, Triton, each a graph of 20 launches, median of 3 replays
        _set_any_pitch(False)
        rounds["staged_ms"].append(graph_ms(run, reps=20, replays=3))
        _set_any_pitch(True)
        rounds["any_pitch_ms"].append(graph_ms(run, reps=20, replays=3))
        rounds["triton_ms"].append(graph_ms(tri, reps=20, replays=3))
    for k, v in rounds.items():
        row[k] = sorted(v)[len(v) // 2]
        row[k + "_all"] = [round(x, 5) for x in v]
    row["speedup_vs_staged"] = row["staged_ms"] / row["any_pitch_ms"]
    row["vs_triton"] = row["any_pitch_ms"] / row["triton_ms"]
    row["time_s"] = round(time.time() - t0, 1)
    return row


def _subprocess(mode, batch, name, size, timeout):
    t0 = time.time()
    base = {"batch": batch, "kernel": name, "size": size, "mode": mode}
    try:
        p = subprocess.run([sys.executable, __file__, "one", mode, batch, name, json.dumps(size)],
                           capture_output=True, text=True, timeout=timeout)
        lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
        row = json.loads(lines[-1]) if lines else {**base, "error": f"rc {p.returncode}, no result"}
        row["rc"] = p.returncode
        if p.returncode:
            row["stderr"] = p.stderr[-2500:]
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        lines = [x for x in out.splitlines() if x.startswith("{")]
        row = {**(json.loads(lines[-1]) if lines else base), "error": f"timed out after {timeout} s"}
    row["wall_s"] = round(time.time() - t0, 1)
    return row


def run_all(out: Path, deadline: float) -> None:
    out.mkdir(parents=True, exist_ok=True)
    results = {"check": [], "time": []}

    def save(row):
        results[row.get("mode", "check")].append(row)
        (out / "results.json").write_text(json.dumps(results, indent=1, sort_keys=True))
        print(json.dumps({k: row.get(k) for k in ("mode", "kernel", "size", "staged_correct", "any_pitch_correct",
                                                   "staged_path_as_asked", "any_pitch_path_as_asked", "staged_ms",
                                                   "any_pitch_ms", "triton_ms", "speedup_vs_staged", "error",
                                                   "wall_s")}), flush=True)

    left = lambda: deadline - time.time()  # noqa: E731
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        futures = [pool.submit(lambda c: _subprocess("check", *c, max(5, min(CHECK_TIMEOUT, int(left()) - 5))), c)
                   for c in _cases()]
        for f in as_completed(futures):  # saved as each ends (the run may be cut short)
            save(f.result())
    checked = [f.result() for f in futures]  # the timings in CASES' order
    for row in checked:  # the timings one at a time (the GPU alone), while the time lasts
        if not (row.get("staged_correct") and row.get("any_pitch_correct")):
            continue
        if left() < 15:
            save({**{k: row[k] for k in ("batch", "kernel", "size")}, "mode": "time", "error": "no time left"})
            continue
        save(_subprocess("time", row["batch"], row["kernel"], row["size"], int(min(TIME_TIMEOUT, left() - 3))))


def main(argv) -> None:
    if argv[:1] == ["list"]:
        for c in CASES:
            print(json.dumps(c))
        return
    if argv[:1] == ["build"]:
        build()
        return
    if argv[:1] == ["one"] and len(argv) == 5 and argv[1] in ("check", "time"):
        try:
            row = one(argv[1], argv[2], argv[3], json.loads(argv[4]))
        except Exception as exc:
            import traceback
            row = {**ROW, "batch": argv[2], "kernel": argv[3], "size": json.loads(argv[4]), "mode": argv[1],
                   "error": f"{type(exc).__name__}: {str(exc)[:1500]}", "trace": traceback.format_exc()[-3000:]}
        print(json.dumps(row), flush=True)
        return
    if argv[:2] == ["all", "--out"] and len(argv) in (3, 5):
        deadline = float(argv[4]) if len(argv) == 5 and argv[3] == "--deadline" else time.time() + 120
        run_all(Path(argv[2]), deadline)
        return
    sys.exit("usage: check.py build | all --out DIR [--deadline EPOCH_S] | one check|time BATCH NAME SIZE_JSON | list")


if __name__ == "__main__":
    main(sys.argv[1:])
