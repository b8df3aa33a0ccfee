"""The thirteenth held-out batch (bench/heldout/kernels13.py, dumped by `bench/heldout/gen.py --module kernels13` with
Triton 3.9 and 3.6, before and after the pipeliner, sm_90 and sm_100: tests/data/ttgir/heldout13): a bf16 GEMM with a
bias and Mish (softplus through libdevice.log1p, torch's threshold 20), an fp16 GEMM with a masked K tail and
hardswish, an fp16 GEMM with a per-row scale, a residual and `tl.clamp` stored bf16, `A @ B + C @ D` in one K loop, a
batched GEMM in the tutorial's grouped launch order, ReGLU over a column loop, Liger's Jensen-Shannon divergence, a
Huber row loss, Welford's mean and variance (torch-inductor's form), GroupNorm's forward, residual add + RMSNorm with
two outputs over a column loop, the cosine similarity of two rows.

- every form of a kernel imports to one graph or sequence per arch (up to Triton's numbering of SSA names), or is
  refused at the TTGIR line of the construct the graph cannot hold, with a message naming it;
- `tl.clamp` (`tt.clampf`) imports as the max and the min it is (ttgir/clamps.py), NaN-ignoring or not as its
  `propagateNan` says; before this batch it was an error after the loop and an unknown op in it;
- Triton 3.6 reuses SSA names in sibling loops: add + RMSNorm's second loop's `%h_24 = arith.addf` is the first
  loop's `%h_24 = tt.load` of R, and the second graph's R fed the add (`argument R = h_add, h_load`, a .tir that did
  not parse) until attach._targets took the loop's loads first;
- evaluated in numpy, each import computes its kernel's formula (the GEMMs' loops and epilogues; the row kernels with
  memory, test_heldout10._run, over a partial last column tile);
- each import solves (h200 / b200) and compiles for sm_90a and sm_100a with no spill (extended).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import emitted_and_built, nvcc, refused_at_its_line
from test_heldout7 import UNARY, _op
from test_heldout10 import _run
from twill.errors import InputError
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.sequence import Sequence
from twill.tir import print_tir
from twill.tir_sequence import print_sequence
from twill.ttgir.sequence import import_sequence

DATA = Path(__file__).parent / "data" / "ttgir" / "heldout13"
FORMS = ("t39/prepipe", "t39/after", "t36/prepipe", "t36/after")
NAMES = sorted(p.stem for p in (DATA / "t36" / "prepipe").glob("*.ttgir"))
UNARY.setdefault("log1p", lambda a: __import__("numpy").log1p(a))

# kernel -> (a regex of the TTGIR op the import stops at, a regex of what the message says): every form, both archs
REFUSED = {
    # [XBLOCK, RBLOCK] running (mean, m2, weight) kept under `rmask & xmask`, a three-value tl.reduce after the loop
    "welford_rows": (r"arith\.select", r"cannot express as a mask of the tile, and keeps a carried tile where it is off.*inductor"),
    # a program per (sample, group): two grid axes in a kernel of one row a program
    "groupnorm_fwd": (r"tt\.get_program_id y", r"a second program id in a kernel of one row a program.*GroupNorm"),
}
IMPORTED = {"gemm_mish", "gemm_hardswish", "gemm_scale_res_clamp", "gemm_sum2", "bmm_grouped", "reglu_fwd", "jsd_fwd",
            "huber_rows", "cosine_rows", "add_rmsnorm_loop"}
# (dump, form) refused where the other forms import: Triton 3.6's pipeliner on sm_100 peels the first iterations' two
# mmas ahead of the loop and ping-pongs the accumulator between two tensor-memory buffers
PEELED = {("gemm_sum2_sm100", "t36/after")}
# Triton 3.9 computes hardswish's `/ 6.0` as `* (1 / 6)` (the reciprocal folded to a constant), Triton 3.6 divides:
# each graph computes its kernel's, one op apart (as batch 11's int8 quantization)
RECIPROCAL = {"gemm_hardswish"}


def _canonical(text: str) -> str:
    """The .tir with its defined names numbered in order and a division by a constant k written as the product by
    1 / k: two graphs that differ only by Triton's folding of the reciprocal give one text."""
    names = re.findall(r"^\s*(\w+)\s+= ", text, flags=re.M)
    order = {n: f"v{i}" for i, n in enumerate(dict.fromkeys(names))}
    text = re.sub(r"\b\w+\b", lambda m: order.get(m.group(0), m.group(0)), text)
    text = re.sub(r" +", " ", text)
    return re.sub(r"= div (\w+) : (\S+) \{scalar = ([0-9.e+-]+)\}",
                  lambda m: f"= mul {m.group(1)} : {m.group(2)} {{scalar = {1 / float(m.group(3))!r}}}", text)


def _key(name: str) -> str:
    return name.rsplit("_sm", 1)[0]


def _import(path: Path, text: str | None = None):
    found, _ = import_sequence(path.read_text() if text is None else text, str(path))
    return found


def _text(found) -> str:
    text = print_sequence(found) if isinstance(found, Sequence) else print_tir(found)
    return re.sub(r"_\d+_new\b", "_new", text)


def test_the_batch_is_all_there():
    assert len(NAMES) == 24
    for name in NAMES:
        assert all((DATA / f / f"{name}.ttgir").exists() for f in FORMS), name
    assert {_key(n) for n in NAMES} == set(REFUSED) | IMPORTED


@pytest.mark.parametrize("name", NAMES)
def test_every_form_imports_to_one_graph_or_is_refused_at_its_line(name):
    first = None
    for form in FORMS:
        path = DATA / form / f"{name}.ttgir"
        if _key(name) in REFUSED:
            refused_at_its_line(path, *REFUSED[_key(name)], sequence=True)
            continue
        if (name, form) in PEELED:
            refused_at_its_line(path, r"ttng\.tmem_alloc", r"carry 'acc' starts from a value computed before the loop",
                                sequence=True)
            with pytest.raises(InputError) as err:
                _import(path)
            assert "peeled ahead of the loop" in err.value.diagnostics[0].hint, err.value.diagnostics[0].hint
            continue
        text = _text(_import(path))
        first = first or text
        if _key(name) in RECIPROCAL and form.startswith("t36"):
            assert text != first and _canonical(text) == _canonical(first), form
            continue
        assert text == first, form


def test_the_graphs():
    """What each import is, in the words of its .tir (one form each; every form gives the same)."""
    text = _text(_import(DATA / "t39/prepipe/gemm_mish_sm90.ttgir"))
    for line in ("sp            = gt x_add                   : f32[128,128] {scalar = 20.0}",
                 "sp_log1p      = log1p sp_exp", "sp_select     = select sp, x_add, sp_log1p", "y             = tanh"):
        assert line in text, text
    text = _text(_import(DATA / "t36/after/gemm_scale_res_clamp_sm100.ttgir"))
    assert re.search(r"out_clamp_lo += max out_add, out_neg +: f32\[128,128\]", text), text
    assert re.search(r"out_min += min out_clamp_lo, clip +: f32\[128,128\]", text), text
    text = _text(_import(DATA / "t39/after/gemm_sum2_sm100.ttgir"))
    assert re.search(r"= mma a, b, acc", text) and re.search(r"acc_new += mma c, d, acc_mma", text), text
    text = _text(_import(DATA / "t36/after/add_rmsnorm_loop_sm90.ttgir"))
    assert text.count("argument R = h_load") + text.count("argument R   = h_load") == 2, text
    assert "h_add, h_load" not in text


def test_a_clamp_that_propagates_nan_is_maximum_then_minimum():
    """`tl.clamp(x, lo, hi, propagate_nan=tl.PropagateNan.ALL)`: `tt.clampf ..., propagateNan = all` is
    `arith.maximumf` then `arith.minimumf` (NaN in, NaN out), read as the ops that propagate NaN (max_nan, min_nan);
    `none` as max and min (fmaxf / fminf: a NaN x gives lo)."""
    path = DATA / "t39/prepipe/gemm_scale_res_clamp_sm90.ttgir"
    for nan, (high, low) in (("none", ("max", "min")), ("all", ("max_nan", "min_nan"))):
        text = _text(_import(path, path.read_text().replace("propagateNan = none", f"propagateNan = {nan}")))
        assert re.search(rf"out_clamp_lo += {high} out_add, out_neg", text), (nan, text)
        assert re.search(rf"out_{low} += {low} out_clamp_lo, clip", text), (nan, text)


# -- the GEMMs in numpy: the loop's mmas over K tiles, then the epilogue --------------------------------------------

def _gemm(graph, arrays: dict, numbers: dict, k: int) -> dict:
    """The graph's loop run over K = `k` (each load a tile of its argument's array along the dimension of size k),
    every op in order (mma: its accumulator plus `a @ b`), then the epilogue. Returns {output argument: value}."""
    import numpy as np
    feeds = {t: a for a, t in graph.arguments if t is not None}
    env = {c.name: np.zeros(c.type.shape) for c in graph.carries}
    mma = next(op for op in graph.ops if op.opcode == "mma")
    step = next(op.type.shape[1] for op in graph.ops if op.name == mma.operands[0].name)
    for k0 in range(0, k, step):
        it = dict(env)
        for op in graph.ops:
            if op.opcode == "load":
                a = np.asarray(arrays[feeds[op.name]], dtype=np.float64)
                it[op.name] = a[:, k0:k0 + step] if a.shape[1] == k else a[k0:k0 + step, :]
                assert it[op.name].shape == tuple(op.type.shape), op.name
            elif op.opcode == "mma":
                x, y, acc = (it[o.name] for o in op.operands)
                assert y.shape[0] == x.shape[1] and not op.attr("transpose_b", False), op
                it[op.name] = acc + x @ y
            else:
                it[op.name] = _op(op, it)
        for carry, src in graph.yields:
            env[carry] = it[src]
    for v in graph.inputs:
        if v.name in feeds:
            env[v.name] = np.asarray(arrays[feeds[v.name]], dtype=np.float64)
    for s in graph.epilogue.scalars:
        env[s.name] = np.float64(numbers[feeds.get(s.name, s.name)])
    for op in graph.epilogue.ops:
        env[op.name] = _op(op, env)
    outs = {feeds.get(o, o): env[v] for o, v in graph.epilogue.outputs}
    for c in graph.carries:  # a carry stored as it is (`{output = f16}`)
        if c.name in feeds and feeds[c.name] not in outs:
            outs[feeds[c.name]] = env[c.name]
    return outs


def _x(shape, seed):
    import numpy as np
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("arch", ("sm90", "sm100"))
def test_the_imported_gemms_compute_their_formulas(form, arch):
    """One 128 x 128 output tile, K = 320: Mish with its softplus threshold (values past 20 and below it), hardswish
    across its three pieces, the per-row scale + residual clamped to [-clip, clip], A @ B + C @ D, the batched GEMM."""
    import numpy as np
    a, b, c, d = _x((128, 320), 1), _x((320, 128), 2), _x((128, 320), 3), _x((320, 128), 4)
    bias = 8 * _x((1, 128), 5)  # Mish's x spans both sides of the threshold 20
    got = _gemm(_import(DATA / form / f"gemm_mish_{arch}.ttgir"), {"A": a, "B": b, "BIAS": bias}, {}, 320)
    x = a @ b + bias
    assert (x > 20).any() and (x < 20).any()
    sp = np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))
    assert np.allclose(got["C"], x * np.tanh(sp), rtol=1e-12, atol=1e-12)
    got = _gemm(_import(DATA / form / f"gemm_hardswish_{arch}.ttgir"), {"A": a / 6, "B": b}, {}, 320)
    x = (a / 6) @ b
    assert (x < -3).any() and (x > 3).any() and (abs(x) < 3).any()
    assert np.allclose(got["C"], x * np.clip(x + 3, 0, 6) / 6, rtol=1e-12, atol=1e-12)
    scale, r = np.random.default_rng(6).random(128) + 0.5, _x((128, 128), 7)
    found = _import(DATA / form / f"gemm_scale_res_clamp_{arch}.ttgir")
    got = _gemm(found, {"A": a, "B": b, "SCALE": scale, "R": r}, {"clip": 4.0}, 320)
    y = (a @ b) * scale[:, None] + r
    assert (abs(y) > 4).any()
    assert np.allclose(got["C"], np.clip(y, -4.0, 4.0), rtol=1e-12, atol=1e-12)
    if not (arch == "sm100" and form == "t36/after"):  # PEELED
        got = _gemm(_import(DATA / form / f"gemm_sum2_{arch}.ttgir"), {"A": a, "B": b, "Cm": c, "D": d}, {}, 320)
        assert np.allclose(got["OUT"], a @ b + c @ d, rtol=1e-12, atol=1e-12)
    got = _gemm(_import(DATA / form / f"bmm_grouped_{arch}.ttgir"), {"A": a, "B": b}, {}, 320)
    assert np.allclose(got["C"], a @ b, rtol=1e-12, atol=1e-12)


# -- the row kernels in numpy, with memory ---------------------------------------------------------------------------

def _cols(found) -> int:
    graph = found.graphs[0] if isinstance(found, Sequence) else found
    return next(op.type.shape[1] for op in graph.ops if op.opcode == "load")


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("arch", ("sm90", "sm100"))
def test_the_imported_row_kernels_compute_their_formulas(form, arch):
    """fp64, 128 rows x 400 columns (a partial last column tile): ReGLU, the JSD's element loss and dX (beta = 0.3,
    log-probability rows), the Huber loss's row mean (differences on both sides of delta), the cosine similarity
    (a zero row: its norm clamped to eps), add + RMSNorm's H and Y."""
    import numpy as np
    m, n = 128, 400

    def run(name, memory, numbers):
        found = _import(DATA / form / f"{name}_{arch}.ttgir")
        return _run(found, memory, numbers, cols=_cols(found))

    a, b = _x((m, n), 11), _x((m, n), 12)
    got = run("reglu_fwd", {"a_ptr": a, "b_ptr": b}, {"n_cols": n})
    assert np.allclose(got["c_ptr"], np.maximum(a, 0) * b, rtol=1e-12, atol=1e-12)

    def logsoftmax(z):
        z = z - z.max(1, keepdims=True)
        return z - np.log(np.exp(z).sum(1, keepdims=True))

    x, y, beta = logsoftmax(_x((m, n), 13)), logsoftmax(_x((m, n), 14)), 0.3
    got = run("jsd_fwd", {"X_ptr": x, "Y_ptr": y}, {"n_cols": n, "beta": beta, "n_non_ignore": m})
    q, p = np.exp(x), np.exp(y)
    mix = beta * p + (1 - beta) * q
    assert np.allclose(got["loss_ptr"], (beta * p * y + (1 - beta) * q * x - mix * np.log(mix)) / m, rtol=1e-12,
                       atol=1e-15)
    assert np.allclose(got["dX_ptr"], (1 - beta) * q * (x - np.log(mix)) / m, rtol=1e-12, atol=1e-15)
    x, y = 2 * _x((m, n), 15), _x((m, n), 16)
    got = run("huber_rows", {"X": x, "Y": y}, {"n_cols": n, "delta": 1.0})
    e = abs(x - y)
    assert (e < 1).any() and (e > 1).any()
    assert np.allclose(got["LOSS"], np.where(e < 1, 0.5 * e * e, e - 0.5).mean(1), rtol=1e-12, atol=1e-15)
    x[3] = 0.0
    got = run("cosine_rows", {"X": x, "Y": y}, {"n_cols": n, "eps": 1e-8})
    norms = np.sqrt((x * x).sum(1)) * np.sqrt((y * y).sum(1))
    assert np.allclose(got["OUT"], (x * y).sum(1) / np.maximum(norms, 1e-8), rtol=1e-12, atol=1e-15)
    assert got["OUT"][3] == 0
    w = _x((1, n), 17)
    got = run("add_rmsnorm_loop", {"X": a, "R": b, "W": w}, {"N": n, "eps": 1e-6})
    h = a + b
    assert np.allclose(got["H"], h, rtol=1e-12, atol=1e-12)
    assert np.allclose(got["Y"], h / np.sqrt((h * h).mean(1, keepdims=True) + 1e-6) * w, rtol=1e-12, atol=1e-12)
    assert np.array_equal(got["R"], b)  # R is read, not written


# -- solve and compile -----------------------------------------------------------------------------------------------

BUILT = sorted(n for n in NAMES if _key(n) in IMPORTED)
# jsd_fwd's joint stage (two exps, a log and 13 more ops of [64, 128] f32 a tile) proves no optimum within 180 s on
# either machine (2 shared cores, load 7): the limit ends it with a verified schedule (I = 41 on h100 and b200 in the
# triage), not proven, which `twill solve` writes and emit-cuda builds from
UNPROVEN = {"jsd_fwd_sm90", "jsd_fwd_sm100"}


def _schedule(name: str, graph, machine):
    from twill.errors import TimeLimitReached
    try:
        return solve(graph, machine, SolveOptions(time_limit=60))
    except TimeLimitReached as exc:
        if name not in UNPROVEN or exc.schedule is None:
            raise
        return exc.schedule


@pytest.mark.parametrize("name", BUILT)
@pytest.mark.extended
def test_each_import_solves(name):
    machine = load_machine("b200" if name.endswith("sm100") else "h200")
    found = _import(DATA / "t36/prepipe" / f"{name}.ttgir")
    for graph in (found.graphs if isinstance(found, Sequence) else (found,)):
        schedule = _schedule(name, graph, machine)
        assert schedule.complete or (name in UNPROVEN and schedule.ii is not None)


# docs/ttgir-import.md section 25, "Left open": the epilogue's fragments of a long elementwise chain (Mish keeps x, its
# `> 20` flags and log1p(exp x) live, each a fragment of the whole tile): 200 bytes of spill on sm_90a as one 128-row
# import (h200; `--split-rows auto`, what run.py builds, spills none) and 212 on sm_100a (b200); jsd_fwd's two 4-warp
# roles of 64 x 128 f32 tiles on sm_100a, 48 bytes. Strict: a fix shows here
SPILLS = {"gemm_mish_sm90": "200 bytes, the whole 128-row import", "gemm_mish_sm100": "212 bytes",
          "jsd_fwd_sm100": "48 bytes"}


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=f"spills {SPILLS[n]}"))
                                  if n in SPILLS else n for n in BUILT])
@pytest.mark.extended
def test_heldout13_dump_solves_emits_and_compiles(name, tmp_path):
    """As emit-cuda builds it (its ptxas loop): no error, no spill, no serialized wgmma."""
    machine = load_machine("b200" if name.endswith("sm100") else "h200")
    found = _import(DATA / "t39/prepipe" / f"{name}.ttgir")
    for i, graph in enumerate(found.graphs if isinstance(found, Sequence) else (found,)):
        schedule = _schedule(name, graph, machine)
        assert schedule.complete or name in UNPROVEN
        _, rc, err = emitted_and_built(schedule, machine, tmp_path / f"{name}.{i}.cu")
        assert rc == 0, err[-2000:]
        spills = {int(k) for k in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)}
        assert spills <= {0}, err[-2000:]
        assert "C7510" not in err and "C7511" not in err, err[-2000:]
