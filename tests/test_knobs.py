"""The softmax scale an import folds into exp2_scale, recorded as `knob exp2_scale = EXPR` (twill/knobs.py,
fuse.folded_scale): its value for every softmax dump of tests/data against what the Triton kernel
computes, the `.tir` lines' errors, and the refusals of a scale the binding could not compute."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from twill.errors import InputError
from twill.knobs import Product
from twill.tir import parse_tir, print_tir
from twill.ttgir import import_ttgir, load_ttgir

ROOT = Path(__file__).resolve().parent.parent
TTGIR = ROOT / "tests" / "data" / "ttgir"
LOG2E = math.log2(math.e)
SM = 0.0883883476  # 1 / sqrt(128), as the launches pass it
F32_LOG2E = 1.44269504  # Triton's qk_scale = sm_scale * 1.44269504, the constant in f32

# what each kernel's exp2 computes per unit of score, from its Triton source (bench/heldout/kernels.py,
# bench/triton_corpus/kernels.py, tests/data/ttgir/heldout/*.py): exp2(s * qk_scale - m) -> sm_scale *
# 1.44269504; tl.exp(s * sm_scale - m) -> sm_scale * log2 e; tl.exp(x - m) -> log2 e; exp2(s - m) -> 1
EXPECTED = {
    "attn_d64": SM * F32_LOG2E, "attn_kvlen": SM * F32_LOG2E, "attn_exp": SM * LOG2E,
    "attn_alibi": LOG2E,  # s = q k^T * sm_scale - slope |dist|: sm_scale stays an op of the graph
    "softmax_gemm": LOG2E, "attn_causal_fwd": SM * F32_LOG2E, "attn_gqa_fwd": SM * F32_LOG2E,
    "attn_bwd_dq": SM * F32_LOG2E, "fa_ws_triton36": SM * F32_LOG2E, "fa_ws_triton39": SM * F32_LOG2E,
    "attn_fwd_tma": SM * F32_LOG2E, "attn_gqa_fwd_sm90": SM * F32_LOG2E, "attn_fwd_sm100_ws": SM * F32_LOG2E,
    "biased_softmax_gemm": 1.0, "banded_softmax_gemm": 1.0, "rowbiased_softmax_gemm": 1.0,
}
DUMPS = sorted(str(p.relative_to(TTGIR)) for p in TTGIR.rglob("*.ttgir")
               if "math.exp" in p.read_text() and any(p.name.startswith(k) for k in EXPECTED))


def _expected(name: str) -> float:
    return next(v for k, v in sorted(EXPECTED.items(), key=lambda kv: -len(kv[0])) if name.startswith(k))


@pytest.mark.parametrize("dump", DUMPS)
def test_the_import_records_the_scale_the_kernel_computes(dump):
    """Each softmax dump's knob, evaluated at the launch's sm_scale, is the scale Triton's kernel
    multiplies its scores by before exp2 (times log2 e for tl.exp); a graph without argument lines
    (a warp-specialized kernel after the pipeliner, whose stores the import does not follow) records
    none and says what to pass."""
    try:
        graph, notes = load_ttgir(TTGIR / dump)
    except InputError as e:  # stores the import cannot follow (loops.refuse_incomplete): the loop named
        if any("moves with the program id" in d.message for d in e.diagnostics):  # (ttgir/grid.py)
            # sm_100's causal kernel after the pipeliner: its loop runs to the diagonal (unrolled after it),
            # which nothing in the graph says; refused, even named with --loop
            assert Path(dump).name == "attn_causal_fwd_sm100.ttgir" and "after" in dump, dump
            return
        assert all("the kernel's whole result" in d.message or "would store" in d.message for d in e.diagnostics)
        graph, notes = load_ttgir(TTGIR / dump, loop=0)
    knobs = dict(graph.knobs)
    if not graph.arguments:
        assert not knobs and any("call its binding with exp2_scale = " in n.message for n in notes)
        return
    value = knobs["exp2_scale"].value({"sm_scale": SM})
    assert value == pytest.approx(_expected(Path(dump).name), rel=1e-6)
    assert parse_tir(print_tir(graph)).knobs == graph.knobs  # written and read back


def test_both_forms_record_one_expression():
    """sm_scale * 1.44269502 (Triton's f32 constant as TTGIR prints it) before and after the pipeliner."""
    texts = {load_ttgir(TTGIR / "heldout2" / "t36" / form / "attn_d64_sm90.ttgir")[0].knobs[0][1].text()
             for form in ("prepipe", "after")}
    assert texts == {"sm_scale * 1.44269502"}
    exp = load_ttgir(TTGIR / "heldout2" / "t39" / "prepipe" / "attn_exp_sm90.ttgir")[0]
    assert exp.knobs == (("exp2_scale", Product(LOG2E, (("sm_scale", 1),))),)


D64 = TTGIR / "heldout2" / "t36" / "prepipe" / "attn_d64_sm90.ttgir"


def _d64(old: str, new: str) -> str:
    text = D64.read_text()
    assert text.count(old) == 1
    return text.replace(old, new)


def test_a_scale_that_is_no_product_of_arguments_is_refused_at_its_line():
    """qk_scale = sm_scale + 1.44 is no product: the multiply that folds it is an error at its line."""
    text = _d64("%qk_scale = arith.mulf %sm_scale, %cst : f32", "%qk_scale = arith.addf %sm_scale, %cst : f32")
    with pytest.raises(InputError) as e:
        import_ttgir(text, "d64.ttgir")
    d = e.value.diagnostics[0]
    assert (d.span.file, d.span.line) == ("d64.ttgir", 92) and "'arith.mulf' scales the row maximum" in d.message


def test_anchors_that_disagree_on_the_scale_are_refused():
    """The row max scaled by qk_scale, the exp2's scores by sm_scale: one exp2_scale cannot serve both."""
    text = _d64("%qk = tt.splat %qk_scale : f32", "%qk = tt.splat %sm_scale : f32")
    with pytest.raises(InputError) as e:
        import_ttgir(text, "d64.ttgir")
    assert "one exp2_scale cannot serve both" in str(e.value) and "d64.ttgir:" in str(e.value)


HEAD = "kernel k\nargument Q = q\nargument sm_scale\nargument T\n"
BODY = """input q : f16[64,64] @smem
carry m : f32[64] = -inf
loop {
  s = mma q, q : f32[64,64]
  m_new = rowmax s, m : f32[64]
  p = exp2 s, m_new : f16[64,64]
  yield m = m_new
}
"""


def test_knob_lines_read_and_print_canonically():
    g = parse_tir(HEAD + "knob exp2_scale = 2 * sm_scale / T * 0.5\n" + BODY)
    assert g.knobs == (("exp2_scale", Product(1.0, (("T", -1), ("sm_scale", 1)))),)
    assert "knob exp2_scale = sm_scale / T\n" in print_tir(g)
    assert g.knobs[0][1].value({"sm_scale": 0.5, "T": 2.0}) == 0.25
    assert parse_tir(BODY.join(["kernel k\n", ""])).knobs == ()  # no line: the keyword, 1.0 by default


@pytest.mark.parametrize("line, col, message", [
    ("knob exp2_scale = sm_scal * 2", 19, "'sm_scal' is no argument of the kernel"),
    ("knob exp2_scale = Q * 2", 19, "argument 'Q' is a tensor (it feeds 'q'): a knob multiplies scalar arguments"),
    ("knob out_scale = 2", 6, "unknown knob 'out_scale'"),
    ("knob exp2_scale = sm_scale / 0", 30, "'0' in a knob: a factor is a finite number other than 0"),
    ("knob exp2_scale = sm_scale * * 2", 30, "expected a number or an argument's name, found '*'"),
    ("knob exp2_scale", 16, "expected '=' after the knob's name"),
])
def test_bad_knob_lines_are_located(line, col, message):
    with pytest.raises(InputError) as e:
        parse_tir(HEAD + line + "\n" + BODY, "k.tir")
    d = e.value.diagnostics[0]
    assert (d.span.line, d.span.col) == (5, col) and d.message.startswith(message), str(e.value)


def test_a_knob_without_argument_lines_may_only_be_a_number():
    assert parse_tir("kernel k\nknob exp2_scale = 1.4426950408889634\n" + BODY).knobs[0][1].coef == LOG2E
    with pytest.raises(InputError, match="'sm_scale' is no argument of the kernel"):
        parse_tir("kernel k\nknob exp2_scale = sm_scale\n" + BODY)
