"""The twelfth held-out batch (bench/heldout/kernels12.py, dumped by `bench/heldout/gen.py --module kernels12` with
Triton 3.9 and 3.6, before and after the pipeliner, sm_90 and sm_100: tests/data/ttgir/heldout12): column sums, a
loop over row blocks whose [BLOCK_M, BLOCK_N] partials are summed down the columns after it, one program a column
block: a linear layer's bias gradient (bf16), LayerNorm's dw and db from x, dy, mean and rstd (f16, per-row vectors
loaded in the loop), a BatchNorm's column mean and variance (f32, an epilogue); and batch 9's tutorial
`_layer_norm_bwd_dwdb` (f32, two sums), refused before this batch.

- every form of a kernel imports to one graph (ttgir/colsum.py: one column a program, 64 a CTA), its [64, 128]
  tiles the columns' rows of the argument's transpose, `{transposed = true}`, the sums row carries;
- evaluated in numpy (the kernel reading each transposed argument as its transpose, as the binding hands it), each
  import computes its kernel's formula over ragged M and N;
- the near misses are refused at their TTGIR line, naming what is outside the form;
- each import solves, proven optimal, and compiles for sm_90a with no spill (sm_100a: extended).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import emitted_and_built, nvcc
from test_heldout10 import _run
from twill.errors import InputError
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.tir import print_tir
from twill.ttgir import import_ttgir

DATA = Path(__file__).parent / "data" / "ttgir" / "heldout12"
HELDOUT9 = Path(__file__).parent / "data" / "ttgir" / "heldout9"
FORMS = ("t39/prepipe", "t39/after", "t36/prepipe", "t36/after")
NAMES = sorted(p.stem for p in (DATA / "t36" / "prepipe").glob("*.ttgir"))
TUTORIAL = ("layer_norm_bwd_dwdb_sm90", "layer_norm_bwd_dwdb_sm100")


def _path(name: str, form: str) -> Path:
    return (HELDOUT9 if name in TUTORIAL else DATA) / form / f"{name}.ttgir"


def _import(path: Path, text: str | None = None):
    graph, _ = import_ttgir(path.read_text() if text is None else text, str(path))
    return graph


def _text(graph) -> str:
    return re.sub(r"_\d+_new\b", "_new", print_tir(graph))


def test_the_batch_is_all_there():
    assert len(NAMES) == 6
    for name in NAMES:
        assert all((DATA / f / f"{name}.ttgir").exists() for f in FORMS), name


@pytest.mark.parametrize("name", NAMES + list(TUTORIAL))
def test_every_form_imports_to_one_graph(name):
    texts = {form: _text(_import(_path(name, form))) for form in FORMS}
    assert len(set(texts.values())) == 1, texts
    text = texts[FORMS[0]]
    # the tiles: the columns' rows of the argument's transpose; the loop over the matrix's rows; N the grid's rows
    rows, cols = (128, 64) if name.endswith("sm100") else (64, 128)  # rowprog.TILES: sm_100's 128 x 64 (session 40)
    assert re.search(rf"= load +: \w+\[{rows},{cols}\] @smem \{{transposed = true\}}", text), text
    assert "argument M {extent = loop}" in text or "argument M    = M {extent = loop}" in text, text
    assert re.search(r"argument N +\{extent = m\}", text), text
    assert "rowsum" in text


def test_the_graphs():
    """bias_grad: one load, one row carry stored bf16; ln_dwdb (sm_100: 128 x 64 tiles): x and dy transposed, mean and rstd [1, 64]
    rows along the loop (the matrix's rows), two sums; bn_stats: two sums and the epilogue's mean and variance."""
    text = _text(_import(DATA / "t39/prepipe/bias_grad_sm90.ttgir"))
    assert "dy      = load           : bf16[64,128] @smem {transposed = true}" in text
    assert "carry acc : f32[64] = 0 {output = bf16}" in text
    text = _text(_import(DATA / "t39/prepipe/ln_dwdb_sm100.ttgir"))
    assert "mean       = load                     : f32[1,64] @smem\n" in text  # sm_100: 128 x 64 tiles
    assert "dw_new     = rowsum dw_mul, dw        : f32[128]" in text
    text = _text(_import(DATA / "t36/after/bn_stats_sm90.ttgir"))
    assert "mean    = div s, M         : f32[64]" in text and "var_sub = sub var, var_mul : f32[64]" in text


def _x(shape, seed):
    import numpy as np
    return np.random.default_rng(seed).standard_normal(shape)


def _evaluated(graph, arrays: dict, numbers: dict) -> dict:
    """The graph run on the kernel's view of each argument (a transposed load's argument as its transpose, [N, M]:
    what the binding hands the kernel), test_heldout10._run over every column of the matrix at once."""
    feeds = {t: a for a, t in graph.arguments if t is not None}
    flipped = {feeds[op.name] for op in graph.ops if op.opcode == "load" and op.attr("transposed", False)}
    memory = {k: (v.T if k in flipped else v) for k, v in arrays.items()}
    assert flipped
    return _run(graph, memory, numbers)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("arch", ("sm90", "sm100"))
@pytest.mark.parametrize("m, n", [(512, 256), (333, 200)])
def test_the_imports_compute_their_formulas(form, arch, m, n):
    """fp64, M rows (the loop; 333: a partial last tile of 128) by N columns (the grid's rows; 200: a partial last
    row tile of 64): db = dy.sum(0); LayerNorm's dw = sum(dy * (x - mean) * rstd) and db = sum(dy); a column's mean
    and variance; the tutorial's two sums of the partial buffers."""
    import numpy as np
    dy, x = _x((m, n), 1), _x((m, n), 2)
    got = _evaluated(_import(DATA / form / f"bias_grad_{arch}.ttgir"), {"DY": dy}, {"M": m, "N": n})
    assert np.allclose(got["DB"], dy.sum(0), rtol=1e-12, atol=1e-12)
    mean, rstd = x.mean(1), 1 / np.sqrt(x.var(1) + 1e-5)
    got = _evaluated(_import(DATA / form / f"ln_dwdb_{arch}.ttgir"), {"X": x, "DY": dy, "Mean": mean, "Rstd": rstd},
                     {"M": m, "N": n})
    assert np.allclose(got["DW"], (dy * (x - mean[:, None]) * rstd[:, None]).sum(0), rtol=1e-12, atol=1e-12)
    assert np.allclose(got["DB"], dy.sum(0), rtol=1e-12, atol=1e-12)
    xs = 2 * x + 0.5
    got = _evaluated(_import(DATA / form / f"bn_stats_{arch}.ttgir"), {"X": xs}, {"M": m, "N": n})
    assert np.allclose(got["MEAN"], xs.mean(0), rtol=1e-12, atol=1e-12)
    assert np.allclose(got["VAR"], xs.var(0), rtol=1e-10, atol=1e-12)
    got = _evaluated(_import(HELDOUT9 / form / f"layer_norm_bwd_dwdb_{arch}.ttgir"), {"DW": x, "DB": dy},
                     {"M": m, "N": n})
    assert np.allclose(got["FINAL_DW"], x.sum(0)) and np.allclose(got["FINAL_DB"], dy.sum(0))


def test_the_kernels_own_reading_would_give_another_answer():
    """The check above is not vacuous: the same runner on the argument as it lies (not transposed) sums rows."""
    import numpy as np
    dy = _x((256, 256), 3)
    graph = _import(DATA / "t39/prepipe/bias_grad_sm90.ttgir")
    got = _run(graph, {"DY": dy}, {"M": 256, "N": 256})
    assert np.allclose(got["DB"], dy.sum(1)) and not np.allclose(got["DB"], dy.sum(0))


# -- near misses: refused at their line, naming what is outside the form ------------------------------------------

BIAS = DATA / "t39/prepipe/bias_grad_sm90.ttgir"


def _refused(text: str, line_pattern: str, message_pattern: str) -> None:
    with pytest.raises(InputError) as err:
        import_ttgir(text, "edited.ttgir")
    d = err.value.diagnostics[0]
    assert re.search(message_pattern, d.message), d.message
    assert d.span is not None and re.search(line_pattern, text.splitlines()[d.span.line - 1]), d.span


def test_a_loop_stepping_by_another_count_is_refused():
    text = BIAS.read_text()
    edited = re.sub(r"(scf\.for %\w+ = %c0_i32 to %M step )%c64_i32", r"\1%cols", text, count=1)
    assert edited != text
    _refused(edited, r"scf\.for", r"not `range\(0, M, 64\)` over the \[64, 128\] tiles' row blocks")


def test_a_second_program_id_is_refused():
    text = BIAS.read_text()
    edited = text.replace("tt.get_program_id x", "tt.get_program_id y", 1)
    _refused(edited, r"tt\.get_program_id y", r"a second grid axis in a column-sum kernel")


def test_a_reduction_that_is_not_associative_is_refused():
    text = BIAS.read_text()
    edited = re.sub(r"(%db_\d+ = )arith\.addf", r"\1arith.subf", text, count=1)
    assert edited != text
    _refused(edited, r'"tt\.reduce"', r"by 'arith\.subf': a column's carry is reduced by an associative")


def test_a_tile_address_of_another_form_is_refused():
    """`DY + (rows + M) + cols` (the rows' offset no stride times the rows): not the form the rewrite reads as a
    row of DY's transpose."""
    text = BIAS.read_text()
    edited = re.sub(r"(%dy_\d+) = arith\.muli (%mask_\d+), %dy : tensor<64x1xi32, #blocked>",
                    r"\1 = arith.addi \2, %mask : tensor<64x1xi32, #blocked>", text, count=1)
    assert edited != text
    _refused(edited, r"tt\.load", r"whose address is not `P \+ rows\[:, None\] \* stride \+ cols\[None, :\]`")


def test_a_stored_carry_is_still_refused_at_its_loads():
    """Without the column sum (the carry stored as it is) the kernel is no column sum: steps.row_errors, as before."""
    text = BIAS.read_text()
    assert '"tt.reduce"' in text
    start = text.index('    %db = "tt.reduce"')
    end = text.index("    %0 = tt.splat %N")
    edited = text[:start] + text[end:].replace("%4 = arith.truncf %db", "%4 = arith.truncf %cst_x", 1)
    with pytest.raises(InputError):
        import_ttgir(edited, "edited.ttgir")


# -- solve and compile -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES + list(TUTORIAL))
def test_each_import_solves_proven_optimal(name):
    machine = load_machine("b200" if name.endswith("sm100") else "h200")
    graph = _import(_path(name, "t36/prepipe"))
    schedule = solve(graph, machine, SolveOptions(time_limit=20))
    assert schedule.complete and schedule.optimal


def _built(name: str, tmp_path):
    machine = load_machine("b200" if name.endswith("sm100") else "h200")
    schedule = solve(_import(_path(name, "t39/prepipe")), machine, SolveOptions(time_limit=30))
    assert schedule.complete
    _, rc, err = emitted_and_built(schedule, machine, tmp_path / f"{name}.cu")
    assert rc == 0, err[-2000:]
    assert not re.findall(r"[1-9]\d* bytes spill (?:stores|loads)", err), err[-2000:]
    assert "C7510" not in err and "C7511" not in err, err[-2000:]


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
@pytest.mark.parametrize("name", [n for n in NAMES if n.endswith("sm90")] + ["layer_norm_bwd_dwdb_sm90"])
def test_each_import_compiles_for_sm90a_with_no_spill(name, tmp_path):
    _built(name, tmp_path)


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
@pytest.mark.parametrize("name", [n for n in NAMES if n.endswith("sm100")] + ["layer_norm_bwd_dwdb_sm100"])
@pytest.mark.extended
def test_each_import_compiles_for_sm100a_with_no_spill(name, tmp_path):
    _built(name, tmp_path)


def test_a_column_max_is_a_row_max_of_the_transpose():
    """The same kernel with `acc = max(acc, dy)` from -inf and `tl.max(acc, axis=0)`: the carry rule holds for any
    associative and commutative op (sum, max, min), so the column max imports as the transposed tile's rowmax."""
    text = BIAS.read_text()
    edited = re.sub(r"(%acc_\d+ = )arith\.addf (%acc_\d+, %acc_\d+)", r"\1arith.maxnumf \2", text, count=1)
    edited = re.sub(r"(%db_\d+ = )arith\.addf", r"\1arith.maxnumf", edited, count=1)
    edited = edited.replace("%acc = arith.constant dense<0.000000e+00> : tensor<64x128xf32",
                            "%acc = arith.constant dense<0xFF800000> : tensor<64x128xf32", 1)
    assert edited.count("maxnumf") == 2
    out = _text(_import(BIAS, edited))
    assert "acc_new = rowmax dy, acc : f32[64]" in out and "carry acc : f32[64] = -inf" in out
