"""twill against Triton on the corpus of Triton kernels (bench/triton_corpus/kernels.py).

Three steps; the first and the last run on the GPU machine, the middle one anywhere twill installs:

    python3 bench/triton_bench.py triton --out DIR   # GPU: compile each kernel with this machine's
        # Triton, check it against its fp32 reference, time Triton's own configurations (num_stages
        # 2-4, warp_specialize off/on, the kernel's tile sizes) and write, per kernel, its TTGIR after
        # the pipeliner (kernel.asm["ttgir"]) and the whole pass log (MLIR_ENABLE_DUMP), whose copy
        # before the pipeliner is what `twill import` reads.
    python3 bench/triton_bench.py build --dumps DIR --out DIR   # import, solve, emit, binding
    python3 bench/triton_bench.py run --dumps DIR --kernels DIR  # GPU: twill's kernels vs Triton's

Timings are medians of CUDA-event runs, twill and Triton in alternating pairs: per call (one launch
from Python, waited for) and per kernel (replays of a CUDA graph of launches), with each call's host
time. Results are JSON (`run.json` in --out) for docs/triton-results.md (`report`).

Looking into a gap (GPU machine, on folders `build` wrote, one per variant of the defaults, e.g.
`build --import-args "" --depths 0` for the import as it is and the machine's ring depth):

    python3 bench/triton_bench.py compare --kernels DIR1 DIR2 ... --triton triton.json --out DIR
    python3 bench/triton_bench.py profile --kernel NAME --kernels DIR1 DIR2 --triton triton.json  # ncu
    python3 bench/triton_bench.py hostprof --kernels DIR --only NAME ...   # cProfile of binding calls
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "triton_corpus" / "kernels.py"
sys.path.insert(0, str(HERE))
from gpu_bench import load_binding  # noqa: E402  (the bench's one loader of a generated binding)

# Sizes: the corpus defaults, and for attention N = 4096 and 16384 as well.
ATTENTION_N = {"attn_causal_fwd": ("N",), "attn_gqa_fwd": ("NQ", "NKV"), "attn_bwd_dq": ("N",)}
SIZES = {name: [None] + ([{k: n for k in keys} for n in (4096, 16384)])
         for name, keys in ATTENTION_N.items()}
CONFIGS = [(stages, ws) for stages in (2, 3, 4) for ws in (False, True)]


def flops(name: str, tensors) -> float:
    """Useful floating-point operations of one launch (the GEMMs; elementwise work is not counted)."""
    shape = [tuple(t.shape) for t in tensors]
    if name == "attn_causal_fwd":
        b, h, n, d = shape[0]
        return 4 * b * h * n * n * d / 2
    if name == "attn_gqa_fwd":
        (b, hq, nq, d), (_, _, nkv, _) = shape[0], shape[1]
        return 4 * b * hq * nq * nkv * d
    if name == "attn_bwd_dq":
        b, h, n, d = shape[0]
        return 6 * b * h * n * n * d  # S = QK^T, dP = dO V^T, dQ = dS K
    if name in ("gemm_fp8", "gemm_persistent_tma", "gemm_bias_gelu"):
        m, k = shape[0]
        n = shape[1][0] if name == "gemm_fp8" else shape[1][1]
        return 2 * m * n * k
    if name == "gemm_w4a16":
        m, k = shape[0]
        return 2 * m * (2 * shape[1][1]) * k
    if name == "ssd_chunk_scan":
        b, h, t, p = shape[0]
        return 8 * 64 * 64 * 64 * (t // 64) * b * h  # four 64^3 GEMMs per 64-step chunk
    raise KeyError(name)


# -- Triton's configurations ------------------------------------------------------------------

class _Variant(ast.NodeTransformer):
    """kernels.py with every launch at `stages` and every loop of a @triton.jit function a
    `tl.range(..., warp_specialize=ws)`."""

    def __init__(self, stages: int, ws: bool):
        self.stages, self.ws, self.in_jit, self.loop_depth = stages, ws, False, 0

    def visit_FunctionDef(self, node):
        jit = any("jit" in ast.unparse(d) for d in node.decorator_list)
        outer, self.in_jit = self.in_jit, jit
        self.generic_visit(node)
        self.in_jit = outer
        return node

    def visit_For(self, node):
        outermost, self.loop_depth = self.loop_depth == 0, self.loop_depth + 1
        self.generic_visit(node)
        self.loop_depth -= 1
        it = node.iter
        # A nest is specialized at its outermost loop (a persistent kernel's tile loop), as Triton's
        # tutorials do; loops in sequence each are.
        if (self.in_jit and self.ws and outermost and isinstance(it, ast.Call)
                and ast.unparse(it.func) in ("range", "tl.range")):
            it.func = ast.parse("tl.range", mode="eval").body
            it.keywords = [k for k in it.keywords if k.arg != "warp_specialize"]
            it.keywords.append(ast.keyword("warp_specialize", ast.Constant(True)))
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        for kw in node.keywords:
            if kw.arg == "num_stages" and not self.in_jit:
                kw.value = ast.Constant(self.stages)
        return node


def load_variant(stages: int | None, ws: bool, folder: Path):
    """The corpus module as written (stages None) or rewritten for one configuration. Written to a
    file of its own so that Triton finds each kernel's source."""
    text = CORPUS.read_text()
    tag = "default"
    if stages is not None:
        tree = ast.fix_missing_locations(_Variant(stages, ws).visit(ast.parse(text)))
        text, tag = ast.unparse(tree), f"s{stages}{'_ws' if ws else ''}"
    path = folder / f"corpus_{tag}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"corpus_{tag}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Kernels whose reference may be computed a block of query rows at a time where it does not fit whole
# (N = 16384 on an 80 GB card): the inputs cut along their query-row dimension (2: [B, H, N, D] and the
# [B, H, N] row statistics) and the output joined along it. Causal attention is not among them (its rows
# see a number of keys that depends on where the block starts).
ROW_BLOCKED = {"attn_gqa_fwd": (0,), "attn_bwd_dq": (0, 3, 4, 5)}
ROW_BLOCK = 1024


def references(fns, tensors, params, name: str | None = None) -> tuple[tuple | None, str | None]:
    """(the kernel's fp32 reference outputs as a tuple, None), or (None, the row's error) where the
    reference does not fit the card (the largest sizes' on an 80 GB card): the row records it and
    the bench goes on. A kernel of ROW_BLOCKED is tried again a block of query rows at a time."""
    import torch
    try:
        ref = fns["reference"](*tensors, **params)
    except torch.cuda.OutOfMemoryError as exc:
        torch.cuda.empty_cache()
        if name not in ROW_BLOCKED:
            return None, f"the fp32 reference does not fit: {str(exc)[:120]}"
        cut, n = ROW_BLOCKED[name], tensors[ROW_BLOCKED[name][0]].shape[2]
        try:
            parts = [fns["reference"](*(t[:, :, r:r + ROW_BLOCK] if i in cut else t for i, t in enumerate(tensors)),
                                      **params) for r in range(0, n, ROW_BLOCK)]
        except torch.cuda.OutOfMemoryError as exc2:
            return None, f"the fp32 reference does not fit, even {ROW_BLOCK} rows at a time: {str(exc2)[:120]}"
        ref = torch.cat(parts, dim=2)
    return (ref if isinstance(ref, (tuple, list)) else (ref,)), None


def tolerance(name: str) -> float:
    """The largest relative error a kernel's outputs may have against its fp32 reference (the issue's:
    fp8 5e-2, everything else 1e-2)."""
    return 5e-2 if "fp8" in name else 1e-2


def rel_error(out, ref) -> float:
    import torch
    outs = out if isinstance(out, (tuple, list)) else (out,)
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    worst = 0.0
    for o, r in zip(outs, refs):
        o, r = o.float(), r.float()
        if torch.isnan(o).any():
            return math.inf
        worst = max(worst, ((o - r).norm() / r.norm().clamp_min(1e-30)).item())
    return worst


def median_ms(fn, reps: int = 20) -> float:
    import torch
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def queued_ms(fn, reps: int = 20) -> float:
    """Mean milliseconds of `reps` launches queued back to back between two events: the GPU's time
    per launch once the host runs ahead (median_ms waits for each launch, so a launch's host work
    before the kernel starts counts there too)."""
    import torch
    fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / reps


def graph_ms(fn, reps: int = 20, replays: int = 5) -> float:
    """Milliseconds per launch of `reps` launches captured in one CUDA graph, the median of
    `replays` replays: the GPU's time alone, no host work between launches (as
    triton.testing.do_bench_cudagraph measures)."""
    import torch
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / reps)
    return sorted(times)[len(times) // 2]


def host_us(fn, reps: int = 50) -> float:
    """Microseconds of host time one launch takes to enqueue (the GPU is not waited for)."""
    import torch
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / reps * 1e6


def compile_ttgir(module, name: str) -> str:
    """kernel.asm["ttgir"] of the kernel as its DUMPS entry describes it, for this machine's GPU."""
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    spec = module.DUMPS[name]
    fn = module.KERNELS[name]["kernel"]
    attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in spec.get("divisible_by_16", [])}
    major, minor = torch.cuda.get_device_capability()
    src = ASTSource(fn=fn, signature=spec["signature"], constexprs=spec["constexprs"], attrs=attrs)
    k = triton.compile(src, target=GPUTarget("cuda", major * 10 + minor, 32),
                       options=dict(num_warps=spec["num_warps"], num_stages=spec["num_stages"]))
    return k.asm["ttgir"]


def pass_log(name: str, folder: Path) -> str:
    """stderr of a fresh compile of `name` with MLIR_ENABLE_DUMP: the module before every pass."""
    env = dict(os.environ, MLIR_ENABLE_DUMP=f"{name}_kernel", TRITON_ALWAYS_COMPILE="1",
               TRITON_CACHE_DIR=str(folder / "cache-dump"))
    code = (f"import sys; sys.path.insert(0, {str(CORPUS.parent)!r}); import kernels as K; "
            f"t, p = K.KERNELS[{name!r}]['make_inputs'](None, 'cuda'); K.KERNELS[{name!r}]['launch'](*t, **p)")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return proc.stderr


def cmd_triton(args) -> None:
    import torch
    import triton
    out = Path(args.out)
    (out / "dumps").mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="triton-bench-"))
    default = load_variant(None, False, scratch)
    variants = {cfg: load_variant(*cfg, scratch) for cfg in CONFIGS}
    names = args.kernels or list(default.KERNELS)
    results = {"card": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "kernels": {}}
    for name in names:
        t0 = time.time()
        ref_fns = default.KERNELS[name]
        # The dumps: TTGIR after the pipeliner as the launch compiles it, and the pass log.
        (out / "dumps" / f"{name}_sm90.ttgir").write_text(compile_ttgir(default, name))
        (out / "dumps" / f"{name}_sm90.passes.log").write_text(pass_log(name, scratch))
        rows = []
        for size in SIZES.get(name, [None]):
            tensors, params = ref_fns["make_inputs"](size, "cuda")
            ref = ref_fns["reference"](*tensors, **params)
            row = {"size": size or "default", "shapes": [list(t.shape) for t in tensors],
                   "flop": flops(name, tensors), "configs": {}}
            for (stages, ws), module in variants.items():
                key = f"stages={stages},ws={'on' if ws else 'off'}"
                fn = module.KERNELS[name]["launch"]
                try:
                    err = rel_error(fn(*tensors, **params), ref)
                    ms = median_ms(lambda: fn(*tensors, **params))
                    row["configs"][key] = {"ms": ms, "rel_error": err}
                except Exception as exc:  # a configuration Triton cannot compile: recorded, not fatal
                    row["configs"][key] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            ok = {k: v for k, v in row["configs"].items() if "ms" in v and v["rel_error"] < 5e-2}
            if ok:
                best = min(ok, key=lambda k: ok[k]["ms"])
                row["best"] = best
                row["best_tflops"] = row["flop"] / ok[best]["ms"] / 1e9
            rows.append(row)
            del ref
            torch.cuda.empty_cache()
        results["kernels"][name] = {"rows": rows, "seconds": round(time.time() - t0, 1)}
        print(name, json.dumps([(r["size"], r.get("best"), round(r.get("best_tflops", 0), 1)) for r in rows]),
              flush=True)
    (out / "triton.json").write_text(json.dumps(results, indent=1, sort_keys=True))


# -- twill's side: import, solve, emit ----------------------------------------------------------

STAGES = ("import", "solve", "emit-cuda", "nvcc")


def _twill(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(["twill", *args], capture_output=True, text=True, timeout=timeout)


# The bench's defaults for an imported kernel (docs/triton-results.md, "why", measured): the rows of
# its mma tiles on as many warpgroups as Triton's layout puts them on, and rings of streaming loads
# 4 deep where the solver, emit-cuda and ptxas (no spills) accept it, else the machine's default
# (TMA's latency is not in the machine model, whose default depth of 2 left the GEMMs waiting on
# their loads; depth 3 made the causal forward slower than 2 at N <= 4096, so it is not tried); a
# plain GEMM's two row tiles at once, sharing B (`--grow-rows auto`: 3-8% faster from about a wave
# of tiles up, and at fewer tiles the launch runs one tile per CTA, emit/halves.py;
# docs/ttgir-import.md, "Growing").
IMPORT_ARGS = ("--split-rows", "auto", "--grow-rows", "auto")
DEPTHS = (4, 0)  # 0: the machine's streaming_depth


def build_one(dump: Path, out: Path, gpu: str, arch: str, time_limit: float,
              import_args: tuple[str, ...] = IMPORT_ARGS, solve_args: tuple[str, ...] = (),
              depths: tuple[int, ...] = DEPTHS, emit_args: tuple[str, ...] = ()) -> dict:
    """build_attempt at each ring depth of `depths` in turn (none where solve_args set --depth): the
    first that compiles without spills, else the first that compiles, else the last attempt."""
    if "--depth" in solve_args:
        depths = (0,)
    parts = _split_parts(dump, import_args)
    first = None
    for depth in depths:
        more = ("--depth", str(depth)) if depth else ()
        record = build_attempt(dump, out, gpu, arch, time_limit, import_args, solve_args + more, emit_args)
        record.update(depth=depth or "default", split_rows=parts)
        clean = "stopped" not in record and not record["stages"]["nvcc"]["spill_bytes"]
        if clean:
            return record
        if "stopped" not in record and first is None:
            first = record
    if first is not None:  # rebuilt: the files on disk are the last attempt's
        depth = first["depth"]
        return build_attempt(dump, out, gpu, arch, time_limit, import_args,
                             solve_args + (("--depth", str(depth)) if depth != "default" else ()),
                             emit_args) | {"depth": depth, "split_rows": parts}
    return record


def _split_parts(dump: Path, import_args: tuple[str, ...]):
    """The parts `twill import` makes of the rows under `import_args` (what --split-rows and
    --grow-rows give, `twill.ttgir.row_parts`)."""
    args = list(import_args)

    def option(name):
        value = args[args.index(name) + 1] if name in args else "1"
        return value if value == "auto" else int(value)
    from twill.errors import InputError
    from twill.ttgir import load_ttgir, row_parts, row_warpgroups
    split, grow = option("--split-rows"), option("--grow-rows")
    if "auto" not in (split, grow):  # no import needed to know them
        return row_parts(None, "", 1, split, grow)[1]
    try:
        text = dump.read_text()
        return row_parts(load_ttgir(dump)[0], text, row_warpgroups(text, str(dump)), split, grow)[1]
    except InputError:
        return None  # the import fails: build_attempt says why


def bench_emit_args(emit_args: tuple[str, ...] = ()) -> tuple[str, ...]:
    """`emit_args` with `--load-rings X` added where the environment sets TWILL_BENCH_LOAD_RINGS=X and they do not
    already choose: the bench's way to build every kernel with the load rings deepened for the TMA latency
    (`latency`, docs/emit-cuda.md) while that stays off by default. Only the bench reads the variable."""
    rings = os.environ.get("TWILL_BENCH_LOAD_RINGS", "")
    if rings and "--load-rings" not in emit_args:
        emit_args = (*emit_args, "--load-rings", rings)
    # TWILL_BENCH_ANY_PITCH=1: emit-cuda's --any-pitch (rows at any pitch, anypitch.py; off by default until run on
    # a GPU), read by the bench alone
    if os.environ.get("TWILL_BENCH_ANY_PITCH", "") == "1" and "--any-pitch" not in emit_args:
        emit_args = (*emit_args, "--any-pitch")
    return emit_args


def build_attempt(dump: Path, out: Path, gpu: str, arch: str, time_limit: float,
                  import_args: tuple[str, ...] = (), solve_args: tuple[str, ...] = (),
                  emit_args: tuple[str, ...] = ()) -> dict:
    """One dump through import -> solve (joint) -> emit-cuda -> nvcc; where it stopped and why.
    `import_args`, `solve_args` and `emit_args` are added to those commands; TWILL_BENCH_LOAD_RINGS=latency adds
    emit-cuda's `--load-rings latency` (bench_emit_args) and the record says so."""
    emit_args = bench_emit_args(emit_args)
    name = dump.name.split(".")[0]
    tir, sched, cu = out / f"{name}.tir", out / f"{name}.json", out / f"{name}.cu"
    steps = [("import", ["import", str(dump), "-o", str(tir), *import_args]),
             ("solve", ["solve", str(tir), "--gpu", gpu, "--time-limit", str(time_limit), "-o", str(sched), "-q",
                        *solve_args]),
             ("emit-cuda", ["emit-cuda", str(sched), "-o", str(cu), "--binding", "torch", *emit_args])]
    record = {"dump": dump.name, "stages": {}}
    if "--load-rings" in emit_args:
        record["load_rings"] = emit_args[emit_args.index("--load-rings") + 1]
    if "--any-pitch" in emit_args:
        record["any_pitch"] = True
    for stage, argv in steps:
        t0 = time.time()
        proc = _twill(*argv, timeout=time_limit + 120)
        record["stages"][stage] = {"rc": proc.returncode, "seconds": round(time.time() - t0, 2)}
        if proc.returncode not in (0, 3):
            record["stopped"] = stage
            record["error"] = proc.stderr.strip()[-600:]
            return record
        if stage == "import":
            from twill.tir_sequence import is_sequence
            if is_sequence(tir.read_text()):  # loops in sequence: one kernel file per loop (K.LOOP.cu)
                record["sequence"] = True
            else:
                record.update(_epilogue(tir, proc.stderr))
        if stage == "solve" and record.get("sequence"):
            loops = json.loads(sched.read_text())["loops"]
            record.update(ii={x["name"]: x["schedule"]["ii"] for x in loops},
                          optimal=all(x["schedule"]["optimal"] for x in loops))
        elif stage == "solve":
            solved = json.loads(sched.read_text())
            record.update(ii=solved["ii"], optimal=solved["optimal"], roles=len(solved.get("warps", [])))
            record.update(_without_cross_role(tir, sched, solved, gpu, time_limit, solve_args))
    sources = [cu] if not record.get("sequence") else \
        sorted(p for p in out.glob(f"{name}.*.cu") if not p.name.endswith("_entry.cu"))
    record["stages"]["nvcc"] = {"rc": 0, "spill_bytes": 0, "serialized": False}
    for src in sources:
        nvcc = subprocess.run(["nvcc", "-std=c++17", f"-gencode=arch=compute_{arch[3:]},code={arch}", "-Xptxas",
                               "-v", "-c", str(src), "-o", str(src.with_suffix(".o"))], capture_output=True, text=True)
        spills = sorted({int(w) for w in re.findall(r"(\d+) bytes spill stores", nvcc.stderr)})
        done = record["stages"]["nvcc"]
        done.update(rc=done["rc"] or nvcc.returncode, spill_bytes=max([done["spill_bytes"], *spills]),
                    serialized=done["serialized"] or "serializ" in nvcc.stderr.lower())
        if nvcc.returncode:
            record["stopped"], record["error"] = "nvcc", nvcc.stderr.strip()[-600:]
            break
    return record


def _compute_handoffs(solved: dict) -> list:
    """The schedule's cross-role edges from one computing op to another (a TMA load's are not)."""
    ops = {o["name"]: o for o in solved["ops"]}
    return [e for e in solved.get("cross_role_edges", []) if not ops[e[0]]["variable_latency"]]


def _without_cross_role(tir: Path, sched: Path, solved: dict, gpu: str, time_limit: float,
                        solve_args: tuple[str, ...]) -> dict:
    """Where the schedule hands register tiles from one computing role to another, the schedule
    at the same I without such hand-offs (`--no-cross-role`, `--max-ii` I) replaces it when one
    exists. Measured (docs/triton-results.md): the joint stage minimizes L before cross-role
    edges, and dQ's split schedule of least L mixed its two halves' ops across both consumer
    warpgroups (two 64x64 hand-offs through shared memory an iteration): 0.55-0.58x Triton, against
    0.89-0.96x for the schedule of the same I with each half on one warpgroup."""
    if not _compute_handoffs(solved) or "--no-cross-role" in solve_args:
        return {}
    alt = sched.with_suffix(".no-cross-role.json")
    proc = _twill("solve", str(tir), "--gpu", gpu, "--time-limit", str(time_limit), "-o", str(alt), "-q",
                  *solve_args, "--no-cross-role", "--max-ii", str(solved["ii"]), timeout=time_limit + 120)
    if proc.returncode != 0 or json.loads(alt.read_text())["ii"] != solved["ii"]:
        return {"cross_role": "kept: no schedule at the same I without it"}
    alt.replace(sched)
    return {"cross_role": "dropped: the same I without compute hand-offs"}


def _epilogue(tir: Path, stderr: str) -> dict:
    """What the import made of the work after the loop: the epilogue's ops and outputs, and whether
    the graph's outputs are the kernel's (no 'the graph has no epilogue' warning), so comparable."""
    from twill.tir import load_tir
    graph = load_tir(tir)
    lost = [line for line in stderr.splitlines() if "the graph has no epilogue" in line]
    return {"epilogue_ops": [op.opcode for op in graph.epilogue.ops],
            "epilogue_outputs": [n for n, _ in graph.epilogue.outputs],
            "arguments": [[a, t] for a, t in graph.arguments], "also_fed": [[a, t] for a, t in graph.also_fed],
            "comparable": not lost, **({"not_comparable": lost[0].split("warning: ", 1)[-1][:300]} if lost else {})}


def cmd_build(args) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    for dump in sorted(Path(args.dumps).glob(args.pattern)):
        gpu, arch = ("b200", "sm_100a") if "sm100" in dump.name else (args.gpu, "sm_90a")
        records.append(build_one(dump, out, gpu, arch, args.time_limit, tuple(shlex.split(args.import_args)),
                                 tuple(shlex.split(args.solve_args)), tuple(int(d) for d in args.depths.split(",")),
                                 tuple(shlex.split(args.emit_args))))
        r = records[-1]
        print(f"{r['dump']:45s} {r.get('stopped', 'ok'):10s} epilogue {r.get('epilogue_ops')} "
              f"{'' if r.get('comparable', True) else 'NOT COMPARABLE'} {r.get('error', '').splitlines()[-1:] or ''}",
              flush=True)
    (out / "build.json").write_text(json.dumps(records, indent=1, sort_keys=True))


# -- twill's kernels against Triton's, on the GPU ---------------------------------------------------

# An imported kernel's binding takes the Triton kernel's own arguments in its order (the graph's
# `argument` lines; docs/commands.md), so the run step calls it with exactly what the corpus launch
# passes its Triton kernel (`capture`), the outputs Triton would write included: every output the
# binding writes is one of the launch's, checked against the kernel's fp32 reference. The scale of
# the loop's exp2 (attention's sm_scale * log2 e) the binding computes from those arguments itself
# (the graph's `knob exp2_scale = ...` line: docs/formats.md), so nothing else is passed.


def capture(module, name: str, tensors, params):
    """(the positional arguments the corpus launch passes its Triton kernel, the launch's outputs):
    the launch runs with its kernel replaced by a recorder, so its outputs are allocated, not written."""
    fn, seen = getattr(module, f"{name}_kernel"), {}

    class Recorder:
        def __getitem__(self, grid):
            return lambda *a, **k: seen.setdefault("args", a)

        def __getattr__(self, attr):
            return getattr(fn, attr)

    setattr(module, f"{name}_kernel", Recorder())
    try:
        outs = module.KERNELS[name]["launch"](*tensors, **params)
    finally:
        setattr(module, f"{name}_kernel", fn)
    return seen["args"], outs if isinstance(outs, (tuple, list)) else (outs,)


def twill_call(mod, name: str, args):
    """A function that runs the binding on the captured arguments (Triton's outputs filled with
    NaN first, so that an element the kernel does not write fails the check)."""
    import inspect
    import torch
    params = inspect.signature(mod.run).parameters.values()
    names = [p.name for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]  # the Triton kernel's arguments
    args = tuple(args[:len(names)])  # (constexprs passed positionally are not the binding's)
    names = names[:len(args)]
    outputs = {a["name"] for a in mod.SPEC["args"] if a["output"]}
    for n, a in zip(names, args):
        if n in outputs and isinstance(a, torch.Tensor):
            a.fill_(float("nan"))
    return lambda: mod.run(*args)


def _build_all(bindings) -> None:
    """Every binding's library at once (nvcc on all of the machine's cores), before any timing; a
    failure is left for the kernel's own call to report."""
    from concurrent.futures import ThreadPoolExecutor

    def build(path):
        try:
            load_binding(path.stem, str(path.parent)).build_library()
        except Exception as exc:
            print(path.stem, "binding build failed:", str(exc)[-300:], flush=True)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        list(pool.map(build, bindings))


def cmd_run(args) -> None:
    import torch
    import triton
    kdir, out = Path(args.kernels), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="triton-bench-"))
    default = load_variant(None, False, scratch)
    triton_results = json.loads(Path(args.triton).read_text())["kernels"] if args.triton else {}
    results = {"card": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "pairs": args.pairs, "kernels": {}}
    built = kdir / "build.json"
    records = {r["dump"].split(".")[0]: r for r in json.loads(built.read_text())} if built.exists() else {}
    names = args.only or list(default.KERNELS)  # in this order (a run cut short keeps the first ones)
    _build_all(sorted(p for p in kdir.glob("*_sm90.py") if p.stem[:-len("_sm90")] in names))
    for name in names:
        rec, binding = records.get(f"{name}_sm90", {}), kdir / f"{name}_sm90.py"
        if "stopped" in rec or not binding.exists():
            results["kernels"][name] = {"skipped": f"build stopped at {rec.get('stopped', 'the binding')}"}
            continue
        if not rec.get("comparable", True):
            results["kernels"][name] = {"skipped": f"outputs not the kernel's: {rec['not_comparable'][:200]}"}
            continue
        mod = load_binding(binding.stem, str(kdir))
        fns = default.KERNELS[name]
        rows = []
        for size in SIZES.get(name, [None]):
            tensors, params = fns["make_inputs"](size, "cuda")
            row = {"size": size or "default", "flop": flops(name, tensors)}
            refs, error = references(fns, tensors, params, name)
            if refs is None:
                row["error"] = error
                rows.append(row)
                print(name, json.dumps(row), flush=True)
                del tensors
                torch.cuda.empty_cache()
                continue
            try:
                args_, outs = capture(default, name, tensors, params)
                run = twill_call(mod, name, args_)
                run()
                torch.cuda.synchronize()
                if len(outs) != len(refs):
                    raise RuntimeError(f"{len(outs)} outputs against {len(refs)} references")
                # every output against its fp32 reference (an element left NaN fails: written before)
                row["rel_errors"] = [rel_error(o, r) for o, r in zip(outs, refs)]
                row["rel_error"] = max(row["rel_errors"])
                row["correct"] = row["rel_error"] < tolerance(name)
                best = triton_results.get(name, {}).get("rows", [{}])[len(rows)].get("best", "stages=3,ws=off")
                stages, ws = int(best.split(",")[0].split("=")[1]), best.endswith("on")
                tri = load_variant(stages, ws, scratch).KERNELS[name]["launch"]
                pairs = []
                runs = (lambda: median_ms(run, reps=10),
                        lambda: median_ms(lambda: tri(*tensors, **params), reps=10))
                for k in range(args.pairs):  # alternating pairs, each kernel first in turn
                    first, second = runs if k % 2 == 0 else runs[::-1]
                    x, y = first(), second()
                    pairs.append((x, y) if k % 2 == 0 else (y, x))
                tw = sorted(p[0] for p in pairs)[len(pairs) // 2]
                tr = sorted(p[1] for p in pairs)[len(pairs) // 2]
                row.update(twill_ms=tw, triton_ms=tr, triton_config=best, call_ratio=tr / tw,
                           twill_call_tflops=row["flop"] / tw / 1e9, triton_call_tflops=row["flop"] / tr / 1e9)
                # the kernels alone: CUDA-graph replays, alternating (host work between launches excluded)
                reps = max(3, min(20, int(5 / tw)))  # about 5 ms of launches a replay
                graphs = [(graph_ms(run, reps), graph_ms(lambda: tri(*tensors, **params), reps))
                          for _ in range(args.pairs)]
                gtw = sorted(g[0] for g in graphs)[len(graphs) // 2]
                gtr = sorted(g[1] for g in graphs)[len(graphs) // 2]
                row.update(twill_kernel_ms=gtw, triton_kernel_ms=gtr, ratio=gtr / gtw,
                           twill_tflops=row["flop"] / gtw / 1e9, triton_tflops=row["flop"] / gtr / 1e9,
                           twill_host_us=host_us(run, reps), triton_host_us=host_us(lambda: tri(*tensors, **params), reps))
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            rows.append(row)
            print(name, json.dumps(row), flush=True)
            del refs
            torch.cuda.empty_cache()
        results["kernels"][name] = {"rows": rows}
        (out / "run.json").write_text(json.dumps(results, indent=1, sort_keys=True))  # a run cut short keeps it


def cmd_compare(args) -> None:
    """GPU: several builds of the same dumps (variants of the import or solve defaults, one folder
    each) against Triton's best configuration, every size, in rotating rounds (each round runs
    Triton and every variant once, the first one rotating), medians over the rounds."""
    import torch
    scratch = Path(tempfile.mkdtemp(prefix="triton-bench-"))
    default = load_variant(None, False, scratch)
    triton_results = json.loads(Path(args.triton).read_text())["kernels"] if args.triton else {}
    dirs = [Path(d) for d in args.kernels]
    results = {"card": torch.cuda.get_device_name(), "pairs": args.pairs, "variants": [d.name for d in dirs],
               "kernels": {}}
    names = args.only or list(default.KERNELS)
    found = [(n, d) for n in names for d in dirs if (d / f"{n}_sm90.py").exists()]

    def build(nd):  # every binding's nvcc at once (the machine's cores), before any timing
        try:
            mod = load_binding(f"{nd[0]}_sm90", str(nd[1]))
            mod.build_library()
            return nd, mod
        except Exception as exc:
            print(nd[0], nd[1].name, "binding failed:", str(exc)[-300:], flush=True)
            return nd, None
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        built = dict(pool.map(build, found))
    for name in names:
        mods = {d.name: built[(name, d)] for d in dirs if built.get((name, d)) is not None}
        if not mods:
            continue
        fns, rows = default.KERNELS[name], []
        for r, size in enumerate(SIZES.get(name, [None])):
            tensors, params = fns["make_inputs"](size, "cuda")
            refs, error = references(fns, tensors, params, name)
            if refs is None:
                rows.append({"size": size or "default", "error": error})
                print(name, json.dumps(rows[-1]), flush=True)
                del tensors
                torch.cuda.empty_cache()
                continue
            best = triton_results.get(name, {}).get("rows", [{}] * 3)[r].get("best", "stages=3,ws=off")
            tri = load_variant(int(best.split(",")[0].split("=")[1]), best.endswith("on"), scratch).KERNELS[name]["launch"]
            row = {"size": size or "default", "flop": flops(name, tensors), "triton_config": best, "variants": {}}
            runs = {"triton": lambda: tri(*tensors, **params)}
            for v, mod in mods.items():
                try:
                    args_, outs = capture(default, name, tensors, params)
                    run = twill_call(mod, name, args_)
                    run()
                    torch.cuda.synchronize()
                    err = max(rel_error(o, x) for o, x in zip(outs, refs))
                    row["variants"][v] = {"rel_error": err}
                    runs[v] = run
                except Exception as exc:
                    row["variants"][v] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            times = {k: [] for k in runs}
            queued = {k: [] for k in runs}
            keys = list(runs)
            for k in range(args.pairs):
                for key in keys[k % len(keys):] + keys[:k % len(keys)]:
                    times[key].append(median_ms(runs[key], reps=10))
                    queued[key].append(queued_ms(runs[key], reps=20))
            med = {k: sorted(t)[len(t) // 2] for k, t in times.items()}
            medq = {k: sorted(t)[len(t) // 2] for k, t in queued.items()}
            graphs, hosts = {}, {}
            for key in keys:
                hosts[key] = host_us(runs[key])
                try:
                    graphs[key] = graph_ms(runs[key])
                except Exception as exc:
                    graphs[key] = None
                    print(name, key, "CUDA graph failed:", str(exc)[:200], flush=True)
            row["triton_ms"], row["triton_queued_ms"] = med.pop("triton"), medq.pop("triton")
            row["triton_graph_ms"], row["triton_host_us"] = graphs.pop("triton"), hosts.pop("triton")
            for v, ms in med.items():
                g = graphs[v]
                row["variants"][v].update(ms=ms, ratio=row["triton_ms"] / ms, queued_ms=medq[v],
                                          queued_ratio=row["triton_queued_ms"] / medq[v], graph_ms=g, host_us=hosts[v],
                                          graph_ratio=(row["triton_graph_ms"] / g) if g and row["triton_graph_ms"] else None)
            rows.append(row)
            print(name, row["size"], f"triton {row['triton_ms']:.4f} ms (graph {row['triton_graph_ms']}, host "
                  f"{row['triton_host_us']:.0f} us)", " | ".join(
                f"{v}: {x.get('ratio', 0):.3f}x graph {x.get('graph_ratio') or 0:.3f}x host {x.get('host_us', 0):.0f} us "
                f"err {x.get('rel_error', x.get('error'))}" for v, x in row["variants"].items()), flush=True)
            del refs
            torch.cuda.empty_cache()
        results["kernels"][name] = {"rows": rows}
        Path(args.out).mkdir(parents=True, exist_ok=True)  # after each kernel: a run cut short keeps what it timed
        (Path(args.out) / "compare.json").write_text(json.dumps(results, indent=1, sort_keys=True))


def cmd_once(args) -> None:
    """GPU: one launch each of Triton's best configuration and of every variant's kernel (after a
    warm-up), each inside the NVTX range `profiled`, in that order (what `profile` runs ncu on)."""
    import torch
    scratch = Path(tempfile.mkdtemp(prefix="triton-bench-"))
    default = load_variant(None, False, scratch)
    name, r = args.kernel, args.row
    size = SIZES.get(name, [None])[r]
    tensors, params = default.KERNELS[name]["make_inputs"](size, "cuda")
    best = json.loads(Path(args.triton).read_text())["kernels"][name]["rows"][r]["best"] if args.triton else "stages=3,ws=off"
    tri = load_variant(int(best.split(",")[0].split("=")[1]), best.endswith("on"), scratch).KERNELS[name]["launch"]
    runs = [lambda: tri(*tensors, **params)]
    for d in args.kernels:
        mod = load_binding(f"{name}_sm90", d)
        runs.append(twill_call(mod, name, capture(default, name, tensors, params)[0]))
    for run in runs:
        run()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("profiled")
        run()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


def cmd_profile(args) -> None:
    """GPU: Nsight Compute's counters (bench/gpu_profile.py's list, and occupancy) for Triton's kernel
    and each variant's (`once`), side by side, as a Markdown table in --out/NAME.md."""
    import csv
    import io
    from gpu_profile import METRICS
    metrics = METRICS + [("launch__occupancy_limit_registers", "CTAs/SM by registers"),
                         ("launch__occupancy_limit_shared_mem", "CTAs/SM by shared memory"),
                         ("launch__shared_mem_per_block_dynamic", "dynamic smem per CTA"),
                         ("launch__waves_per_multiprocessor", "waves"),
                         ("sm__warps_active.avg.pct_of_peak_sustained_active", "achieved occupancy %")]
    cmd = [sys.executable, __file__, "once", "--kernel", args.kernel, "--row", str(args.row),
           *(["--triton", args.triton] if args.triton else []), "--kernels", *args.kernels]
    full = ["ncu", "--clock-control", "none", "--csv", "--nvtx", "--nvtx-include", "profiled/",
            "--metrics", ",".join(m for m, _ in metrics), *cmd]
    proc = subprocess.run(full, capture_output=True, text=True, timeout=args.timeout)
    text = proc.stdout[proc.stdout.find('"ID"'):]
    rows: dict = {}
    for rec in csv.DictReader(io.StringIO(text)):
        rows.setdefault(int(rec["ID"]), {"kernel": rec["Kernel Name"]})[rec["Metric Name"]] = rec["Metric Value"].replace(",", "")
    kernels = [rows[k] for k in sorted(rows)]
    labels = ["triton"] + [Path(d).name for d in args.kernels]
    big = [k for k in kernels if not any(w in k["kernel"] for w in ("at::", "elementwise", "fill", "zero"))]  # torch's own
    lines = [f"{args.kernel}, size row {args.row}", "", "| counter | " + " | ".join(
             f"{lab}: {k['kernel'][:30]}" for lab, k in zip(labels, big)) + " |", "|---|" + "---|" * len(big)]
    for m, label in metrics:
        lines.append(f"| {label} | " + " | ".join(k.get(m, "—") for k in big) + " |")
    if proc.returncode or not big:
        lines += ["", "ncu: " + (proc.stdout[-1500:] + proc.stderr[-1500:]).replace("\n", " ")]
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / f"{args.kernel}_{args.row}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def cmd_hostprof(args) -> None:
    """GPU: where the host time of a binding's call goes (cProfile over --calls calls of each
    kernel's binding in --kernels, at its default size), the top functions by their own time."""
    import cProfile
    import io
    import pstats
    import torch
    scratch = Path(tempfile.mkdtemp(prefix="triton-bench-"))
    default = load_variant(None, False, scratch)
    for name in args.only:
        tensors, params = default.KERNELS[name]["make_inputs"](None, "cuda")
        mod = load_binding(f"{name}_sm90", args.kernels)
        run = twill_call(mod, name, capture(default, name, tensors, params)[0])
        run()
        torch.cuda.synchronize()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.calls):
            run()
        prof.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(args.top)
        print(f"== {name}: {args.calls} calls", text.getvalue()[-4000:], flush=True)


# -- docs/triton-results.md ------------------------------------------------------------------------

def _size(size) -> str:
    return size if isinstance(size, str) else ", ".join(f"{k} = {v}" for k, v in size.items())


def cmd_report(args) -> None:
    """docs/triton-results.md from the three steps' JSON files (any of them may be missing)."""
    tri = json.loads(Path(args.triton).read_text()) if args.triton else None
    build = json.loads(Path(args.build).read_text()) if args.build else []
    run = json.loads(Path(args.run).read_text()) if args.run else None
    out = ["# twill against Triton on the Triton corpus", "",
           "Written by `python3 bench/triton_bench.py report` from the JSON of its three steps "
           "(`triton` and `run` on the GPU machine, `build` here); bench/triton_bench.py says how.", ""]
    if tri:
        out += [f"Card: {tri['card']}; torch {tri['torch']}, Triton {tri['triton']}.", "",
                "## Triton's own kernels (its best of num_stages 2-4 x warp_specialize off/on)", "",
                "| kernel | size | best configuration | TFLOP/s | rel. error |", "|---|---|---|---|---|"]
        for name, k in tri["kernels"].items():
            for row in k["rows"]:
                best = row.get("best")
                err = row["configs"][best]["rel_error"] if best else None
                out.append(f"| {name} | {_size(row['size'])} | {best or 'none ran'} | "
                           f"{row.get('best_tflops', 0):.1f} | {err:.1e} |" if best else
                           f"| {name} | {_size(row['size'])} | none ran | | |")
        out.append("")
    if build:
        out += ["## twill: import -> solve -> emit-cuda -> nvcc, per dump", "",
                "| dump | reached | rows split | ring depth | I | seconds (import / solve / emit) | spill bytes | epilogue | "
                "why it stopped |", "|---|---|---|---|---|---|---|---|---|"]
        for r in build:
            st = r["stages"]
            secs = " / ".join(f"{st[k]['seconds']:.1f}" for k in ("import", "solve", "emit-cuda") if k in st)
            spill = st.get("nvcc", {}).get("spill_bytes", "")
            why = (r.get("error", "").strip().splitlines() or [""])[0].replace("|", "\\|")[:160]
            reached = f"stopped at {r['stopped']}" if "stopped" in r else "compiled"
            proven = "" if "ii" not in r else f"{r['ii']}{'' if r['optimal'] else ' (not proven)'}"
            ep = ", ".join(r.get("epilogue_ops", [])) or "none"
            if not r.get("comparable", True):
                ep += " (not the kernel's outputs: " + r["not_comparable"].split(": error: ")[-1].split(";")[0][:80] + ")"
            out.append(f"| {r['dump']} | {reached} | {r.get('split_rows', 1)} | {r.get('depth', 'default')} | {proven} | {secs} | {spill} | {ep.replace('|', '/')} | {why} |")
        done = [r for r in build if "stopped" not in r and r.get("comparable", True)]
        out += ["", f"{len(done)} of {len(build)} dumps compile with the kernel's own outputs (their epilogues "
                    "imported)."]
        out.append("")
    if run:
        out += [f"## twill's kernels against Triton's, on the GPU ({run['pairs']} alternating pairs, medians)", "",
                "Kernel: each kernel alone, replays of a CUDA graph of 3 to 20 launches (about 5 ms; as "
                "`triton.testing.do_bench_cudagraph` measures), the median of the pairs. "
                "Per call: one launch from Python between two events, waited for (the host's work for the call "
                "counts too); host: microseconds a call takes to enqueue.", "",
                "| kernel | size | twill TFLOP/s | Triton TFLOP/s (config) | twill / Triton (kernel) | "
                "twill / Triton (per call) | host us twill / Triton | rel. error |",
                "|---|---|---|---|---|---|---|---|"]
        ratios, calls = [], []
        for name, k in run["kernels"].items():
            if "skipped" in k:
                out.append(f"| {name} | | | | not run: {k['skipped']} | |")
                continue
            for row in k["rows"]:
                if "error" in row:
                    out.append(f"| {name} | {_size(row['size'])} | | | failed: {row['error'][:120]} | |")
                    continue
                call = row.get("call_ratio", row["ratio"])  # (results from before the kernel column)
                if row.get("correct", True):  # a wrong kernel's time is not a result
                    ratios.append(row["ratio"])
                    calls.append(call)
                wrong = "" if row.get("correct", True) else " (wrong: not in the mean)"
                host = (f"{row['twill_host_us']:.0f} / {row['triton_host_us']:.0f}" if "twill_host_us" in row else "")
                out.append(f"| {name} | {_size(row['size'])} | {row['twill_tflops']:.1f} | "
                           f"{row['triton_tflops']:.1f} ({row['triton_config']}) | {row['ratio']:.3f}x{wrong} | "
                           f"{call:.3f}x | {host} | {row['rel_error']:.1e} |")
        if ratios:
            def gmean(xs):
                return math.exp(sum(map(math.log, xs)) / len(xs))
            out += ["", f"Geometric mean of the ratios of correct kernels: {gmean(ratios):.3f}x (kernel), "
                        f"{gmean(calls):.3f}x (per call), over {len(ratios)} rows."]
        out.append("")
    if args.notes:
        out += [Path(args.notes).read_text().rstrip(), ""]
    Path(args.out).write_text("\n".join(out))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("triton", help="GPU: dumps and Triton's own timings")
    p.add_argument("--out", required=True)
    p.add_argument("--kernels", nargs="*")
    p.set_defaults(fn=cmd_triton)
    p = sub.add_parser("build", help="import, solve and emit each dump")
    p.add_argument("--dumps", required=True, help="a folder of .ttgir dumps or pass logs")
    p.add_argument("--pattern", default="*.ttgir")
    p.add_argument("--out", required=True)
    p.add_argument("--gpu", default="h200", help="the machine description for sm_90 dumps (sm_100: b200)")
    p.add_argument("--time-limit", type=float, default=300)
    p.add_argument("--import-args", default=" ".join(IMPORT_ARGS), help="arguments of `twill import` "
                   "(default: %(default)s)")
    p.add_argument("--depths", default=",".join(map(str, DEPTHS)),
                   help="ring depths of streaming loads to try, deepest first (0: the machine's; default %(default)s)")
    p.add_argument("--solve-args", default="", help="more arguments of `twill solve` (a variant)")
    p.add_argument("--emit-args", default="", help="more arguments of `twill emit-cuda` (a variant: "
                   "--ctas-per-sm 1; --load-rings latency, also TWILL_BENCH_LOAD_RINGS=latency)")
    p.set_defaults(fn=cmd_build)
    p = sub.add_parser("run", help="GPU: twill's kernels (built by 'build') against Triton's")
    p.add_argument("--kernels", required=True, help="the folder 'build' wrote")
    p.add_argument("--triton", help="the triton step's triton.json (its best configuration per row)")
    p.add_argument("--out", required=True)
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--only", nargs="*", help="these kernels, in this order (default: every one)")
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("compare", help="GPU: several builds (variants) against Triton, side by side")
    p.add_argument("--kernels", nargs="+", required=True, help="folders 'build' wrote, one per variant")
    p.add_argument("--only", nargs="*", help="these kernels (default: every one built)")
    p.add_argument("--triton", help="the triton step's triton.json (its best configuration per row)")
    p.add_argument("--out", required=True)
    p.add_argument("--pairs", type=int, default=5)
    p.set_defaults(fn=cmd_compare)
    for cmd, fn, help_ in (("once", cmd_once, "GPU: one launch of Triton's and each variant's kernel (for ncu)"),
                           ("profile", cmd_profile, "GPU: ncu's counters for `once`, side by side")):
        p = sub.add_parser(cmd, help=help_)
        p.add_argument("--kernel", required=True)
        p.add_argument("--row", type=int, default=0, help="which size (0: the default)")
        p.add_argument("--kernels", nargs="+", required=True, help="folders 'build' wrote, one per variant")
        p.add_argument("--triton", help="the triton step's triton.json")
        p.add_argument("--out", default="profile")
        p.add_argument("--timeout", type=float, default=300)
        p.set_defaults(fn=fn)
    p = sub.add_parser("hostprof", help="GPU: cProfile of bindings' calls (their host time)")
    p.add_argument("--kernels", required=True, help="a folder 'build' wrote")
    p.add_argument("--only", nargs="+", required=True)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--top", type=int, default=12)
    p.set_defaults(fn=cmd_hostprof)
    p = sub.add_parser("report", help="docs/triton-results.md from the steps' JSON")
    p.add_argument("--triton")
    p.add_argument("--build")
    p.add_argument("--run")
    p.add_argument("--notes", help="a Markdown file appended as it is (what the numbers mean)")
    p.add_argument("--out", default=str(HERE.parent / "docs" / "triton-results.md"))
    p.set_defaults(fn=cmd_report)
    args = parser.parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main()
