"""Held-out batch 13b (bench/heldout/kernels13b.py, dumped by `bench/heldout/gen.py --module kernels13b` with Triton
3.9 and 3.6, before and after the pipeliner, sm_90 and sm_100: tests/data/ttgir/heldout13b): constructs twill refused
until session 42.

- `tl.clamp` (`tt.clampf x, lo, hi, propagateNan = none | all`) in a row kernel and a GEMM epilogue: min(max(x, lo),
  hi) as Triton lowers it, `max` / `min` (fmaxf / fminf: a NaN x gives lo) for none, `max_nan` / `min_nan`
  (max.NaN / min.NaN: a NaN x gives NaN) for all; `tl.maximum(..., propagate_nan=ALL)` (`arith.maximumf`) is
  `max_nan` (it was `max`, which drops the NaN);
- every form of a kernel imports to one graph per arch;
- evaluated in numpy, each import computes its kernel's formula, NaN included;
- each import solves (h200 for sm_90, b200 for sm_100), emits and compiles with no spill (extended).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import emitted_and_built, nvcc, refused_at_its_line
from test_heldout10 import _run
from test_heldout11 import _gemm
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.sequence import Sequence
from twill.tir import print_tir
from twill.tir_sequence import print_sequence
from twill.ttgir.sequence import import_sequence

DATA = Path(__file__).parent / "data" / "ttgir" / "heldout13b"
FORMS = ("t39/prepipe", "t39/after", "t36/prepipe", "t36/after")
NAMES = sorted(p.stem for p in (DATA / "t36" / "prepipe").glob("*.ttgir"))
IMPORTED = {"clamp_gelu_rows", "leaky_clamp_nan_rows", "gemm_clamp", "cumprod_rows", "cummax_rows"}
# kernel -> (a regex of the TTGIR op the import stops at, a regex of what the message says): every form, both archs
REFUSED = {
    "cumsum_rev_rows": (r"tt\.scan", r"a reverse scan"),
}


def _key(name: str) -> str:
    return name.rsplit("_sm", 1)[0]


def _import(path: Path):
    found, _ = import_sequence(path.read_text(), str(path))
    return found


def _text(found) -> str:
    text = print_sequence(found) if isinstance(found, Sequence) else print_tir(found)
    return re.sub(r" +", " ", re.sub(r"_\d+(_new|_clamp_lo)\b", r"\1", text))  # Triton numbers SSA names per dump


def _cols(graph) -> int:
    return next(op.type.shape[1] for op in graph.ops if op.opcode == "load")


def test_the_batch_is_all_there():
    assert len(NAMES) == 12  # six kernels, two archs
    for name in NAMES:
        assert all((DATA / f / f"{name}.ttgir").exists() for f in FORMS), name
    assert {_key(n) for n in NAMES} == IMPORTED | set(REFUSED)


@pytest.mark.parametrize("name", NAMES)
def test_every_form_imports_to_one_graph_or_is_refused_at_its_line(name):
    first = None
    for form in FORMS:
        if _key(name) in REFUSED:
            refused_at_its_line(DATA / form / f"{name}.ttgir", *REFUSED[_key(name)], sequence=True)
            continue
        text = _text(_import(DATA / form / f"{name}.ttgir"))
        first = first or text
        assert text == first, form


def _x(shape, seed):
    import numpy as np
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("arch", ("sm90", "sm100"))
def test_a_clamp_computes_its_formula_nan_included(form, arch):
    """fp64, 100 rows x 1000 columns (a partial last column tile): clamp(x, lo, hi) then the GELU, lo and hi the
    kernel's arguments, NaN in x clamped to lo (propagate_nan none: maxnum(NaN, lo) = lo, Triton's lowering); the
    leaky ReLU clamped to [-6, 6] with NaN propagated through tl.maximum and tl.clamp (ALL) and +-inf clamped."""
    import numpy as np
    g = _import(DATA / form / f"clamp_gelu_rows_{arch}.ttgir")
    ops = [op.opcode for op in g.ops]
    assert ops.count("max") == 1 and ops.count("min") == 1 and "max_nan" not in ops, print_tir(g)
    x = 3 * _x((100, 1000), 21)
    x[3, ::7] = np.nan
    x[4, 5], x[4, 6] = np.inf, -np.inf
    got = _run(g, {"X": x}, {"n_cols": 1000, "lo": -1.5, "hi": 2.0}, cols=_cols(g))["Y"]
    v = np.clip(np.where(np.isnan(x), -1.5, x), -1.5, 2.0)
    assert np.allclose(got, v / (1 + np.exp(-1.702 * v)), rtol=1e-12, atol=1e-12)
    assert np.isclose(got[3, 0], -1.5 / (1 + np.exp(1.702 * 1.5)), rtol=1e-12)  # a NaN x clamped to lo, not NaN
    g = _import(DATA / form / f"leaky_clamp_nan_rows_{arch}.ttgir")
    ops = [op.opcode for op in g.ops]
    assert ops.count("max_nan") == 2 and ops.count("min_nan") == 1 and "max" not in ops, print_tir(g)
    x = 8 * _x((100, 1000), 22)
    x[3, ::7] = np.nan
    x[4, 5], x[4, 6] = np.inf, -np.inf
    got = _run(g, {"X": x}, {"n_cols": 1000}, cols=_cols(g))["Y"]
    want = np.clip(np.maximum(x, 0.01 * x), -6.0, 6.0)  # np.maximum and np.clip propagate NaN
    assert np.array_equal(np.isnan(got), np.isnan(x)) and np.isnan(got[3, ::7]).all()
    assert np.allclose(got, want, rtol=1e-6, equal_nan=True) and got[4, 5] == 6.0 and got[4, 6] == -6.0


def test_a_clamp_imports_through_the_flat_map_and_the_column_sums():
    """tt.clampf is read where any elementwise op is, in the rewrites of other kernel shapes too (edited dumps): a flat
    map over elements (batch 8's vector add, its add a clamp with NaN propagated) and a column sum (batch 12's BatchNorm
    statistics, its x * x a clamp of x to [x, x])."""
    root = DATA.parent
    text = (root / "heldout8/t39/prepipe/vector_add_sm90.ttgir").read_text()
    edited = text.replace("%2 = arith.addf %x_5, %y_7 : ", "%2 = tt.clampf %x_5, %y_7, %x_5, propagateNan = all : ")
    assert edited != text
    g, _ = import_sequence(edited, "flat.ttgir")
    assert [op.opcode for op in g.ops if op.opcode not in ("load", "store")] == ["max_nan", "min_nan"], print_tir(g)
    text = (root / "heldout12/t39/prepipe/bn_stats_sm90.ttgir").read_text()
    edited = text.replace("%ss_32 = arith.mulf %x_30, %x_30 : ", "%ss_32 = tt.clampf %x_30, %x_30, %x_30, "
                          "propagateNan = none : ")
    assert edited != text
    g, _ = import_sequence(edited, "colsum.ttgir")
    assert [op.opcode for op in g.ops if op.opcode in ("max", "min", "mul")] == ["max", "min"], print_tir(g)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("arch", ("sm90", "sm100"))
def test_a_gemm_clamp_epilogue_computes_its_formula(form, arch):
    """One 128 x 128 tile, K = 320: clamp(A @ B + bias, lo, hi) with NaN propagated (a NaN in A's row 7 reaches its
    output row as NaN; without propagation it would be lo); the bounds are the kernel's arguments."""
    import numpy as np
    g = _import(DATA / form / f"gemm_clamp_{arch}.ttgir")
    assert [op.opcode for op in g.epilogue.ops].count("max_nan") == 1, print_tir(g)
    a, b, bias = _x((128, 320), 1), _x((320, 128), 2), _x((1, 128), 3)
    a[7, 11] = np.nan
    got = _gemm(g, {"A": a, "B": b, "BIAS": bias}, {"lo": -4.0, "hi": 4.0}, 320)["C"]
    want = np.clip(a @ b + bias, -4.0, 4.0)
    assert np.isnan(got[7]).all() and np.allclose(got, want, equal_nan=True)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("arch", ("sm90", "sm100"))
def test_a_rows_cumprod_computes_its_formula(form, arch):
    """fp64, 100 rows x 1000 columns (a partial last column tile of 104 or 40): each column tile's cumprod times the
    carried product of the tiles before it (`rescale y_tile, y_carry`, `y_carry_new = mul y_carry, reduce_prod x`);
    a row with a 0 (every product after it 0, none NaN: no division), one with a NaN (every product from it NaN) and
    one with an inf (inf, then NaN after a 0) as np.cumprod gives them."""
    import numpy as np
    g = _import(DATA / form / f"cumprod_rows_{arch}.ttgir")
    text = print_tir(g)
    assert re.search(r"cumprod x +: f32\[\d+,\d+\] \{axis = 1\}", text) and "reduce_prod x" in text, text
    assert "carry y_carry : f32[" in text and "= 1" in text, text
    x = 1 + _x((100, 1000), 23) / 32
    x[2, 300] = 0.0
    x[3, 500] = np.nan
    x[4, 10], x[4, 900] = np.inf, 0.0
    got = _run(g, {"X": x}, {"n_cols": 1000}, cols=_cols(g))["Y"]
    with np.errstate(invalid="ignore"):
        want = np.cumprod(x, axis=1)
    assert np.allclose(got, want, rtol=1e-12, atol=0, equal_nan=True)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and (got[2, 300:] == 0).all()


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("arch", ("sm90", "sm100"))
def test_a_rows_running_max_computes_its_formula(form, arch):
    """tl.associative_scan(x, 0, tl.maximum) of a row (Triton has no tl.cummax): each tile's cummax combined with the
    carried max of the tiles before it (`max y_tile, y_carry`, `rowmax x, y_carry`), the load's -inf fill a tail_mask.
    100 x 1000 (a partial last tile), a row falling (its first element the max), a row whose max is in the partial last
    tile, a NaN inside a row (skipped, as tl.maximum's maxnumf skips it) and a row all -inf."""
    import numpy as np
    g = _import(DATA / form / f"cummax_rows_{arch}.ttgir")
    text = print_tir(g)
    assert re.search(r"cummax \w+ +: f32\[\d+,\d+\] \{axis = 1\}", text) and "rowmax" in text, text
    x = _x((100, 1000), 24)
    x[2] = -np.arange(1000.0)
    x[3, 990] = 50.0
    x[4, 500] = np.nan
    x[5] = -np.inf
    got = _run(g, {"X": x}, {"n_cols": 1000}, cols=_cols(g))["Y"]
    assert np.array_equal(got, np.fmax.accumulate(x, axis=1))
    assert (got[2] == 0).all() and (got[3, 990:] == 50).all() and not np.isnan(got).any() and (got[5] == -np.inf).all()
    # the combiner is the scan's: the same dump scanning by minnumf is a running min (cummin) from +inf
    text = (DATA / form / f"cummax_rows_{arch}.ttgir").read_text().replace("arith.maxnumf", "arith.minnumf")
    g, _ = import_sequence(text.replace("0xFF800000", "0x7F800000"), "cummin.ttgir")
    assert "cummin" in print_tir(g), print_tir(g)
    got = _run(g, {"X": x}, {"n_cols": 1000}, cols=_cols(g))["Y"]
    assert np.array_equal(got, np.fmin.accumulate(x, axis=1))


@pytest.mark.parametrize("gpu", ["h200", "b200"])
def test_the_cumprod_takes_a_partial_last_column_tile_and_a_written_carry_does_not(gpu):
    """TMA fills the partial last tile with 0, not the kernel's other=1.0: the cumprod is a prefix scan (its elements
    past the extent reach only the clipped store) and the tiles' product `reduce_prod x` updates a carry read by the
    next iteration alone, of which there is none after the last tile (emit/ragged._next_iteration_only). The same
    graph with the carry written out (its final value read) takes whole tiles only, naming the reduce_prod."""
    from dataclasses import replace
    from twill.emit import build_model
    from twill.emit.ragged import plan
    machine = load_machine(gpu)
    g = _import(DATA / "t36/prepipe" / f"cumprod_rows_{'sm100' if gpu == 'b200' else 'sm90'}.ttgir")
    assert plan(build_model(solve(g, machine, SolveOptions(time_limit=20)), machine)).why_not == ""
    written = replace(g, carries=tuple(replace(c, attrs=()) for c in g.carries))
    why = plan(build_model(solve(written, machine, SolveOptions(time_limit=20)), machine)).why_not
    assert "whole tiles only" in why and "reduce_prod" in why, why


BUILT = sorted(n for n in NAMES if _key(n) in IMPORTED)


@pytest.mark.parametrize("name", BUILT)
def test_each_import_solves(name):
    machine = load_machine("b200" if name.endswith("sm100") else "h200")
    found = _import(DATA / "t36/prepipe" / f"{name}.ttgir")
    for graph in (found.graphs if isinstance(found, Sequence) else (found,)):
        assert solve(graph, machine, SolveOptions(time_limit=20)).complete


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
@pytest.mark.parametrize("name", BUILT)
@pytest.mark.extended
def test_heldout13b_dump_solves_emits_and_compiles(name, tmp_path):
    """As emit-cuda builds it (its ptxas loop): no error, no spill, no serialized wgmma."""
    machine = load_machine("b200" if name.endswith("sm100") else "h200")
    found = _import(DATA / "t39/prepipe" / f"{name}.ttgir")
    for i, graph in enumerate(found.graphs if isinstance(found, Sequence) else (found,)):
        schedule = solve(graph, machine, SolveOptions(time_limit=30))
        assert schedule.complete
        _, rc, err = emitted_and_built(schedule, machine, tmp_path / f"{name}.{i}.cu")
        assert rc == 0, err[-2000:]
        spills = {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)}
        assert spills <= {0}, err[-2000:]
        assert "C7510" not in err and "C7511" not in err, err[-2000:]
