"""The host time of a call through twill's generated PyTorch bindings: microseconds per call to
enqueue it (the GPU is not waited for), and where they go; Triton's own launchers beside them.

    python3 bench/host_overhead.py [--baseline DIR] [--out FILE.json]   # GPU machine: torch, triton, nvcc
    python3 bench/host_overhead.py --cpu [--baseline DIR]              # no GPU: the binding's Python part

Each figure is a median over 5 rounds of 200 calls, after 20 calls of warm-up, with no wait for the
GPU inside a round (a round starts and ends with a synchronize, not counted), at small sizes so
that the GPU's queue never fills (bench/triton_bench.py's host_us, with more calls). The bindings
are the golden ones (tests/golden/emit/FIXTURE.py, built with nvcc on first use); --baseline DIR
times the bindings of the same fixtures found in DIR too (for instance those of an older commit:
`git show REV:tests/golden/emit/FIXTURE.{py,cu}` and `..._entry.cu`), for a before/after on one machine.

Rows, per binding (GPU):
  call        fixture.run(inputs): outputs allocated by the binding (what a user writes)
  call_out    the same with every output passed (nothing allocated)
  python      call_out with the entry point replaced by a Python no-op: the binding's Python part
  entry       the ctypes call of twill_launch alone, on a block packed once: ctypes, the C++ launch()
              (its tensor maps from the per-thread cache) and cudaLaunchKernel
  entry_new   the same, cycling over 8 sets of tensors at other addresses: every call encodes its
              tensor maps (cuTensorMapEncodeTiled) again
  stream      reading the current stream (what the binding does once per call)
  alloc       torch.empty of the outputs (call - call_out, roughly)
and Triton's launchers of bench/triton_corpus/kernels.py (their wrapper allocates the output too),
and torch.cuda._sleep(0), a launch from Python with nothing else around it (the floor).

--cpu: no GPU, no nvcc. CPU tensors stand in for CUDA ones and a stub library (cc) for the entry
point: the binding's device check is told CPU tensors are CUDA's, and torch.cuda's device guard and
current stream are replaced by no-ops (the old runtime uses them; the current one does not). So the
figures are the Python part alone, on this machine's CPU: the CUDA parts (the stream, the allocator,
the launch) are not in them.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib.util
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden", "emit")
ROUNDS, CALLS, WARMUP = 5, 200, 20


def load(fixture, folder):
    path = os.path.join(folder, fixture + ".py")
    spec = importlib.util.spec_from_file_location(f"hostcall_{abs(hash(path))}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def inputs(fixture, device):
    """(positional tensors, keywords) of a small problem of each fixture: a few CTAs, a few us of GPU time."""
    import torch
    h = dict(device=device, dtype=torch.float16)
    if fixture.startswith("attention_fwd_hopper"):  # q, k, v [B, H, N, 128]: 2 x 2 x 256 queries, 256 keys
        return tuple(torch.randn(1, 2, 256, 128, **h) for _ in range(3)), dict(exp2_scale=0.1275)
    if fixture == "gemm_hopper.h100":  # a [M, K], b [K, N]: 256 x 256 x 256 (2 x 1 tiles of 128 x 256)
        return (torch.randn(256, 256, **h), torch.randn(256, 256, **h)), {}
    if fixture == "triton_matmul_sm90.h100":  # Triton's matmul: 256 x 256 x 256 (2 x 2 tiles of 128 x 128)
        return (torch.randn(256, 256, **h), torch.randn(256, 256, **h)), {}
    raise KeyError(fixture)


FIXTURES = ("gemm_hopper.h100", "triton_matmul_sm90.h100", "attention_fwd_hopper.h100")


def host_us(fn, sync=lambda: None):
    """Median over ROUNDS of the microseconds one of CALLS calls of `fn` takes (after WARMUP)."""
    for _ in range(WARMUP):
        fn()
    sync()
    rounds = []
    for _ in range(ROUNDS):
        sync()
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn()
        rounds.append((time.perf_counter() - t0) / CALLS * 1e6)
        sync()
    return statistics.median(rounds)


def outputs_of(mod, result):
    names = [a["name"] for a in mod.SPEC["args"] if a["output"]]
    return dict(zip(names, result if len(names) > 1 else (result,)))


def _cached_launch(mod):
    """The (key, _Launch) the binding's last new kind of call cached (the current runtime only)."""
    launches = getattr(mod, "_LAUNCHES", None)
    if not launches:
        return None, None
    key = next(reversed(launches))
    return key, launches[key]


def measure_binding(mod, args, kw, sync, gpu):
    """The rows of one binding (see the module doc); the baseline's runtime gives call and call_out only."""
    import torch
    row = {}
    result = mod.run(*args, **kw)
    row["call"] = host_us(lambda: mod.run(*args, **kw), sync)
    outs = outputs_of(mod, result)
    row["call_out"] = host_us(lambda: mod.run(*args, **outs, **kw), sync)
    key, run = _cached_launch(mod)
    if run is None:
        return row
    mod._LAUNCHES[key] = run._replace(launch=lambda block: 0)
    try:
        row["python"] = host_us(lambda: mod.run(*args, **outs, **kw), sync)
    finally:
        mod._LAUNCHES[key] = run
    if not gpu:
        return row
    tensors = {**dict(zip([a["name"] for a in mod.SPEC["args"]], args)), **outs}

    def block(ts):
        ptrs = [ts[a["name"]].data_ptr() for a in mod.SPEC["args"]]
        return mod._block(run, ptrs, mod._current_stream(run.index), kw.get("exp2_scale", 1.0), 1.0, -1, -1, ())

    one = block(tensors)
    row["entry"] = host_us(lambda: run.launch(one), sync)
    sets = [block({n: torch.empty_like(t) for n, t in tensors.items()}) for _ in range(8)]
    state = [0]

    def cycle():
        state[0] = (state[0] + 1) % len(sets)
        return run.launch(sets[state[0]])

    row["entry_new"] = host_us(cycle, sync)
    row["stream"] = host_us(lambda: mod._current_stream(run.index), sync)
    made = [(t.shape, t.dtype) for t in outs.values()]
    row["alloc"] = host_us(lambda: [torch.empty(s, dtype=d, device=run.device) for s, d in made], sync)
    return row


def triton_rows(sync):
    """Triton's own launchers (bench/triton_corpus/kernels.py) at small sizes."""
    import torch
    sys.path.insert(0, os.path.join(ROOT, "bench", "triton_corpus"))
    import kernels
    rows = {}
    for name, size in (("gemm_bias_gelu", dict(M=256, N=256, K=256)),
                       ("attn_gqa_fwd", dict(B=1, HQ=2, HKV=2, NQ=256, NKV=256))):
        tensors, params = kernels.KERNELS[name]["make_inputs"](size, "cuda")
        launch = kernels.KERNELS[name]["launch"]
        launch(*tensors, **params)
        rows[f"triton {name}"] = {"call": host_us(lambda: launch(*tensors, **params), sync)}
    rows["torch.cuda._sleep(0)"] = {"call": host_us(lambda: torch.cuda._sleep(0), sync)}
    return rows


# ---- --cpu: the Python part on this machine, a stub for the entry point --------------------------------

STUB = r"""
int twill_launch() { return 0; }
const char* twill_error_string(int err) { (void)err; return "stub"; }
int twill_args_bytes(void) { return ARGS_BYTES; }
"""


def cpu_stand_in(mod, scratch):
    """Make `mod` run on CPU tensors with a stub library (see the module doc)."""
    import torch
    size = struct.calcsize(mod.args_format(mod.SPEC)) if hasattr(mod, "args_format") else 0
    src = os.path.join(scratch, f"stub{size}.c")
    so = src[:-2] + ".so"
    if not os.path.exists(so):
        with open(src, "w") as f:
            f.write(STUB.replace("ARGS_BYTES", str(size)))
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", src, "-o", so], check=True)
    mod.build = lambda spec, here, directory=None: so
    check = mod._check_meta

    def as_cuda(arg, meta, device):
        return check(arg, meta._replace(device="cuda:0") if meta.device == "cpu" else meta,
                     None if device is None else "cuda:0")

    mod._check_meta = as_cuda

    class Stream:
        cuda_stream = 0

    torch.cuda.device = lambda device: contextlib.nullcontext()
    torch.cuda.current_stream = lambda device=None: Stream


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cpu", action="store_true", help="no GPU: CPU tensors and a stub entry point")
    p.add_argument("--baseline", help="a folder with other bindings of the same fixtures, timed too")
    p.add_argument("--out", help="write the rows as JSON here")
    args = p.parse_args(argv)
    import torch
    gpu = not args.cpu
    device = "cuda" if gpu else "cpu"
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    scratch = tempfile.mkdtemp(prefix="host-overhead-")
    folders = [("twill", GOLDEN)] + ([("baseline", args.baseline)] if args.baseline else [])
    mods = {f"{label} {fixture}": (fixture, load(fixture, folder)) for fixture in FIXTURES for label, folder in folders
            if os.path.exists(os.path.join(folder, fixture + ".py"))}
    if gpu:  # nvcc on every binding at once, before any timing
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(len(mods)) as pool:
            list(pool.map(lambda m: m[1].build_library(), mods.values()))
    rows = {}
    for name, (fixture, mod) in mods.items():
        if not gpu:
            cpu_stand_in(mod, scratch)
        tensors, kw = inputs(fixture, device)
        rows[name] = measure_binding(mod, tensors, kw, sync, gpu)
    if gpu:
        try:
            rows.update(triton_rows(sync))
        except ImportError as e:
            print(f"(no Triton rows: {e})")
    info = {"device": torch.cuda.get_device_name() if gpu else "cpu (stand-in)", "torch": torch.__version__,
            "python": sys.version.split()[0], "rounds": ROUNDS, "calls": CALLS}
    print(json.dumps(info))
    cols = ["call", "call_out", "python", "entry", "entry_new", "stream", "alloc"]
    print(f"{'us per call':44}" + "".join(f"{c:>10}" for c in cols))
    for name, row in rows.items():
        print(f"{name:44}" + "".join(f"{row[c]:10.1f}" if c in row else f"{'':>10}" for c in cols))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"info": info, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
