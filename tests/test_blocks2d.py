"""Loop-free kernels of 2-D blocks (twill/ttgir/block2d.py; docs/ttgir-import.md, section 8, "A block of a 2-D
grid"), beside batch 10's bias + GELU (tests/test_heldout10.py): two kernels of bench/heldout/blocks2d.py dumped with
Triton 3.9 and 3.6 (`gen.py --module blocks2d`, tests/data/ttgir/blocks2d):

- scale_bias_relu: a 2-D grid written the other way round (program id 1 the row blocks, 0 the column blocks), a
  per-row scale `S + rm` (a vector of one value a row: the graph's input) and a bias row `B + rn`;
- rows_axpy: a 1-D grid of [32, 256] row blocks holding the whole row, the offsets `rm[:, None] * stride +
  cols[None, :]` computed as integers before the pointer, a scalar argument alpha;
- rows_softmax: [16, 1024] row blocks, `tl.max(x, axis=1)` and `tl.sum(e, axis=1)`: the row's reductions (a
  sequence of three column loops, as batch 8's softmax_row).

Each form imports to one graph of 64 x 64 tiles (block2d.WIDTH), computes its kernel's formula in numpy (fp64, 128 x 400: a partial last column
tile), and what the rewrite does not take is refused at its line, naming it.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import nvcc
from test_heldout10 import _run, _text, _x
from twill.errors import InputError
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.ttgir.sequence import import_sequence

DATA = Path(__file__).parent / "data" / "ttgir" / "blocks2d"
HELDOUT10 = Path(__file__).parent / "data" / "ttgir" / "heldout10"
FORMS = ("t39/prepipe", "t39/after", "t36/prepipe", "t36/after")
NAMES = ("scale_bias_relu", "rows_axpy", "rows_softmax")


def _import(path: Path, text: str | None = None):
    return import_sequence(path.read_text() if text is None else text, str(path))[0]


@pytest.mark.parametrize("name", NAMES)
def test_every_form_imports_to_one_graph(name):
    for cc, rows in ((90, 64), (100, 128)):  # sm_100: 128-row tiles (rowprog.TILES)
        texts = {_text(_import(DATA / form / f"{name}_sm{cc}.ttgir")) for form in FORMS}
        assert len(texts) == 1
        text = texts.pop()
        assert "argument N {extent = loop}" in text  # the column loop runs to N: every column block of the grid
        assert re.search(rf"load\s+: f(16|32)\[{rows},64\]", text)  # 64 columns (block2d.WIDTH)
        assert not re.search(r"\bM\b.*=", text)  # the rows' mask `rm < M` is dropped (one program a row)


@pytest.mark.parametrize("form", FORMS)
def test_what_each_imports_to_computes_the_kernels_formula(form):
    import numpy as np
    x, s, b = _x((128, 400), 21), _x(128, 22), _x(400, 23)
    got = _run(_import(DATA / form / "scale_bias_relu_sm90.ttgir"), {"X": x, "S": s, "B": b}, {}, cols=64)
    assert np.allclose(got["Y"], np.maximum(x * s[:, None] + b[None, :], 0), rtol=1e-12, atol=1e-14)
    y = _x((128, 400), 24)
    got = _run(_import(DATA / form / "rows_axpy_sm100.ttgir"), {"X": x, "Y": y}, {"alpha": 0.75}, cols=64)
    assert np.allclose(got["Z"], x + 0.75 * y, rtol=1e-12, atol=1e-14)
    got = _run(_import(DATA / form / "rows_softmax_sm90.ttgir"), {"X": 3 * x}, {}, cols=64)
    e = np.exp(3 * x - 3 * x.max(1, keepdims=True))
    assert np.allclose(got["Y"], e / e.sum(1, keepdims=True), rtol=1e-12, atol=1e-15)


def test_the_grid_axes_either_way_round_give_one_graph():
    """bias + GELU with its program ids swapped (rows on y, columns on x) imports to the same graph."""
    path = HELDOUT10 / "t39/prepipe/bias_gelu_sm90.ttgir"
    text = path.read_text()
    swapped = text.replace("tt.get_program_id x", "tt.get_program_id TMP").replace(
        "tt.get_program_id y", "tt.get_program_id x").replace("tt.get_program_id TMP", "tt.get_program_id y")
    assert swapped != text
    assert _text(_import(path, swapped)) == _text(_import(path))


def _refused(path: Path, text: str, at: str, says: str) -> None:
    with pytest.raises(InputError, match=says) as err:
        _import(path, text)
    line = text.splitlines()[err.value.diagnostics[0].span.line - 1]
    assert re.search(at, line), line


def test_a_program_id_read_other_than_as_a_blocks_first_row_is_refused_at_its_line():
    """`pid_m * 128 + arange(64)`: the program id's block is not the block's rows: refused at the product."""
    path = HELDOUT10 / "t39/prepipe/bias_gelu_sm90.ttgir"
    text = path.read_text()
    edited = text.replace("%rm_2 = arith.muli %pid_m, %rm :", "%rm_2 = arith.muli %pid_m, %rn :", 1)
    assert edited != text
    _refused(path, edited, r"%rm_2 = arith\.muli", r"reads the program id other than as a block's first row")


def test_a_row_offset_read_as_a_value_is_refused_at_its_line():
    """rows_axpy's `rm[:, None] * stride + cols[None, :]` stored as values (not an address): refused where read."""
    path = DATA / "t39/prepipe/rows_axpy_sm90.ttgir"
    text = path.read_text()
    m = re.search(r"(%offs_\d+) = arith\.addi", text)
    store = re.search(r"tt\.store (%\S+), (%\S+), (%\S+) :", text)
    assert m and store
    edited = text.replace(f"tt.store {store.group(1)}, {store.group(2)}, {store.group(3)} :",
                          f"tt.store {store.group(1)}, {m.group(1)}, {store.group(3)} :", 1)
    _refused(path, edited, r"tt\.store", r"reads the offsets of the block's rows .* other than as an address")


def test_a_column_sum_of_a_block_is_refused_at_its_line():
    """`tl.max(x, axis=0)`: one value a column of the block, not the row's: refused at the reduction."""
    path = DATA / "t39/prepipe/rows_softmax_sm90.ttgir"
    text = path.read_text()
    edited = text.replace("<{axis = 1 : i32}> ({", "<{axis = 0 : i32}> ({", 1)
    assert edited != text
    _refused(path, edited, r"\"tt\.reduce\"", r"'tt\.reduce' along axis 0 of a \[16, 1024\] block")


def test_tiles_of_two_row_counts_are_refused_at_the_second_shapes_load():
    """RoPE's q [32, 64] and k [8, 64] heads x half dims a program: two tensors of different row counts."""
    path = HELDOUT10 / "t36/prepipe/rope_fwd_sm100.ttgir"
    _refused(path, path.read_text(), r"= tt\.load %k_tile_1", r"\[8, 64\] tile beside \[32, 64\] tiles")


def test_the_imports_solve():
    machine = load_machine("h200")
    for name in NAMES:
        found = _import(DATA / "t36/prepipe" / f"{name}_sm90.ttgir")
        for graph in getattr(found, "graphs", (found,)):
            assert solve(graph, machine, SolveOptions(time_limit=20)).complete


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
@pytest.mark.extended
@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_scale_bias_relu_emits_and_compiles_without_spill(tmp_path, arch):
    """`twill import | solve | emit-cuda --binding torch` as run.py build, then nvcc: no spill."""
    import subprocess
    import sys
    cc, gpu = ("90", "h200") if arch == "sm_90a" else ("100", "b200")
    dump = DATA / "t36/prepipe" / f"scale_bias_relu_sm{cc}.ttgir"
    tir, sched, cu = tmp_path / "k.tir", tmp_path / "k.json", tmp_path / "k.cu"
    twill = [sys.executable, "-c", "from twill_cli.main import main; main()"]
    for argv in (["import", str(dump), "-o", str(tir), "--split-rows", "auto", "--grow-rows", "auto"],
                 ["solve", str(tir), "--gpu", gpu, "--time-limit", "60", "-o", str(sched), "-q"],
                 ["emit-cuda", str(sched), "-o", str(cu), "--binding", "torch"]):
        proc = subprocess.run(twill + argv, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
    proc = subprocess.run(["nvcc", "-std=c++17", f"-gencode=arch=compute_{cc}a,code={arch}", "-Xptxas", "-v", "-c",
                           str(cu), "-o", str(cu.with_suffix(".o"))], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not re.search(r"[1-9]\d* bytes spill stores", proc.stderr), proc.stderr[-2000:]


def test_the_bias_row_has_no_grid_rows():
    """A [1, N] load of a map over the row's columns (bias + GELU's `B + rn`) is one row for every row tile: its
    dimension 0 is fixed, not the grid's rows (emit-cuda read row tile.m of B, and the binding wanted B [M, N])."""
    from twill.emit.tensors import value_axis
    graph = _import(HELDOUT10 / "t39/prepipe/bias_gelu_sm90.ttgir")
    axis = value_axis(graph, {})
    assert (axis("x", 0), axis("x", 1)) == ("m", "loop")
    assert (axis("b", 0), axis("b", 1)) == ("fixed", "loop")


def test_a_hand_edited_type_is_an_error_at_its_op():
    """The rewrite reads types as text: a row constant whose type lost its `dense<...>` is refused at it."""
    path = HELDOUT10 / "t39/prepipe/bias_gelu_sm90.ttgir"
    text = path.read_text()
    edited = re.sub(r"(%mask_15 = tt\.expand_dims %rn_11 \{axis = 0 : i32\} : )tensor<128xi32",
                    r"\1tensor<128xi32x", text, count=1)
    edited = edited.replace("tensor<128xi32x, #ttg.slice", "tensor<x, #ttg.slice", 1)
    assert edited != text
    with pytest.raises(InputError) as err:
        _import(path, edited)
    assert err.value.diagnostics[0].span.line > 0
