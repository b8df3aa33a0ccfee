"""The prologue: work before the loop (`.tir` `prologue { ... }`), parsed, imported from TTGIR and emitted."""
from __future__ import annotations

import re

from pathlib import Path

import pytest

from conftest import nvcc, nvcc_compile
from twill.emit import emit_cuda
from twill.errors import InputError
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.tir import parse_tir, print_tir
from twill.ttgir import load_ttgir

DATA = Path(__file__).parent / "data" / "ttgir"

GRAPH = """kernel k
input q   : f16[128,64] @smem
input LSE : f32[128]
carry acc : f32[128,64] = 0
prologue {
  scalar exp2_scale : f32
  lse2   = mul LSE : f32[128] {scalar = 1.4426950408889634}
  lse2_u = div lse2, exp2_scale : f32[128]
}
loop {
  k     = load : f16[64,64] @smem
  s     = mma q, k : f32[128,64]
  p     = exp2 s, lse2_u : f16[128,64]
  v     = load : f16[64,64] @smem
  acc_n = mma p, v, acc : f32[128,64]
  yield acc = acc_n
}
"""


def test_a_prologue_parses_its_results_are_inputs_and_it_round_trips():
    g = parse_tir(GRAPH, "p.tir")
    assert [(v.name, v.computed) for v in g.inputs] == [("q", False), ("LSE", False), ("lse2", True), ("lse2_u", True)]
    assert [op.opcode for op in g.prologue.ops] == ["mul", "div"] and [v.name for v in g.prologue.scalars] == ["exp2_scale"]
    assert parse_tir(print_tir(g), "p.tir") == g
    assert "input lse2" not in print_tir(g)  # written in the block, not as an input line


@pytest.mark.parametrize("edit,message", [
    (("lse2   = mul LSE :", "lse2   = mul acc :"), "the prologue reads the inputs, scalars and its own results"),
    (("lse2   = mul LSE :", "lse2   = mul lse2_u :"), "'lse2_u' is used before it is defined"),
    (("  lse2_u = div", "  output x = lse2\n  lse2_u = div"), "'output' is not allowed inside the prologue"),
    (("lse2   = mul LSE :", "lse2   = exp2 LSE :"), "opcode 'exp2' is not allowed in the prologue"),
    (("loop {", "input z : f32[128]\nloop {"), "'input' after the prologue"),
])
def test_a_bad_prologue_is_a_located_error(edit, message):
    with pytest.raises(InputError, match=message) as err:
        parse_tir(GRAPH.replace(*edit), "p.tir")
    assert err.value.diagnostics[0].span.line > 1


def test_dq_imports_its_work_before_the_loop_as_the_prologue():
    """`lse2 = tl.load(LSE + rows) * log2(e)` before the loop, read by `exp2(s * c - lse2)`: the
    prologue computes it from the argument LSE, and divides it by exp2_scale for the loop's exp2."""
    for form in ("prepipe", "after"):
        g, notes = load_ttgir(DATA / "corpus" / form / "attn_bwd_dq_sm90.ttgir")
        assert [(op.name, op.opcode, [o.name for o in op.operands]) for op in g.prologue.ops] == [
            ("lse2", "mul", ["lse2_in"]), ("lse2_unscaled", "div", ["lse2", "exp2_scale"])]
        assert dict(g.arguments)["LSE"] == "lse2_in" and g.values["lse2_in"].type.space == "reg"
        exp2 = next(op for op in g.ops if op.opcode == "exp2")
        assert [o.name for o in exp2.operands] == ["s", "lse2_unscaled"]
        assert not [n for n in notes if "before the loop computes" in n.message]


def test_work_before_the_loop_not_subtracted_by_an_exp2_is_kept_as_written():
    g, _ = load_ttgir(DATA / "heldout" / "rowbiased_softmax_gemm_sm90.ttgir")
    assert [(op.name, op.opcode, op.attrs) for op in g.prologue.ops] == [
        ("qb_abs", "abs", ()), ("qb", "mul", (("scalar", -0.5),))]
    assert not g.prologue.scalars and dict(g.arguments)["QBIAS"] == "qb_raw"


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found")
def test_the_prologue_is_computed_before_the_loop_in_the_role_that_reads_it(tmp_path):
    g = parse_tir(GRAPH, "p.tir")
    machine = load_machine("h100")
    schedule = solve(g, machine, SolveOptions())
    text = emit_cuda(schedule, machine)
    call = "twill::op_div(lse2_u_ep, lse2_ep, args.exp2_scale);"
    (role,) = [part for part in text.split("// ---- role ") if call in part]  # the role of the exp2, once
    assert re.search(r"ops .*\bp\b", role.split("\n")[0]) and role.count(call) == 1  # the role of p = exp2 s, lse2_u
    assert role.index(call) < role.index("// ---- prologue: the first iterations")  # before the loop
    src = tmp_path / "p.cu"
    src.write_text(text)
    rc, err = nvcc_compile(src, ["-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v"])
    assert rc == 0, err[-2000:]


def test_a_split_mask_counts_each_parts_rows_from_its_first_row():
    """--split-rows 2 of a 128-row mask: the second part's rows are 64..127 of the tile."""
    from twill.split import split_rows
    g, _ = load_ttgir(DATA / "heldout" / "banded_softmax_gemm_sm90.ttgir")
    s = split_rows(g, 2)
    masks = [op for op in s.ops if op.opcode == "mask"]
    assert [dict(op.attrs)["offset"] for op in masks] == [-8, -8 - 64]  # rows = -1: -r - 8 with r from 64
    assert all(dict(op.attrs)["rows"] == -1 and op.type.shape == (64, 64) for op in masks)


def test_split_rows_splits_the_prologue_each_part_computes_its_rows(tmp_path):
    """--split-rows 2 of a graph with a prologue: the prologue's row values (LSE, lse2, lse2_u:
    128 rows, read by the loop's exp2 of the row-split S) become one per part, each computed from
    its part's rows of LSE; the split graph solves and its kernel compiles."""
    from twill.split import auto_parts, split_rows
    g = split_rows(parse_tir(GRAPH, "p.tir"), 2)
    assert [(op.name, [o.name for o in op.operands], op.type.shape) for op in g.prologue.ops] == [
        ("lse2_0", ["LSE0"], (64,)), ("lse2_1", ["LSE1"], (64,)),
        ("lse2_u0", ["lse2_0", "exp2_scale"], (64,)), ("lse2_u1", ["lse2_1", "exp2_scale"], (64,))]
    assert [o.name for o in g.by_name["p1"].operands] == ["s1", "lse2_u1"]
    assert [(v.name, v.computed) for v in g.inputs if v.name.startswith("LSE")] == [("LSE0", False), ("LSE1", False)]
    assert parse_tir(print_tir(g), "p.tir") == g
    assert auto_parts(parse_tir(GRAPH, "p.tir"), 2) == 2  # --split-rows auto no longer leaves it whole
    machine = load_machine("h100")
    src = tmp_path / "p.cu"
    src.write_text(emit_cuda(solve(g, machine, SolveOptions()), machine))
    if nvcc() is not None:
        rc, err = nvcc_compile(src, ["-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v"])
        assert rc == 0, err[-2000:]

