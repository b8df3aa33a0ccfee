"""The `.tir` parser and printer: the contract's example, every error kind, and round trips."""
from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twill.errors import Diagnostic, InputError
from twill.ir import DTYPE_BITS, SPACES, Edge, Graph, Op, Operand, TensorType, Value
from twill import vocab
from twill.tir import load_tir, parse_tir, print_tir

DATA = Path(__file__).parent / "data" / "tir"
ATTENTION = DATA / "attention_fwd_simple.tir"
GEMM = DATA / "gemm_store.tir"


def errors_of(text: str, file: str = "t.tir") -> list[Diagnostic]:
    with pytest.raises(InputError) as info:
        parse_tir(text, file)
    assert info.value.exit_code == 2
    return list(info.value.diagnostics)


def only_error(text: str) -> Diagnostic:
    errors = errors_of(text)
    assert len(errors) == 1, [e.render() for e in errors]
    return errors[0]


# -- the contract's example ------------------------------------------------------------------------

def test_attention_example_parses():
    g = load_tir(ATTENTION)
    assert g.kernel == "attention_fwd" and g.file == str(ATTENTION)
    assert g.inputs == (Value("q", TensorType("f16", (128, 128), "smem"), "input"),)
    assert [(c.name, c.type, c.init) for c in g.carries] == [
        ("m", TensorType("f32", (128,)), "-inf"),
        ("l", TensorType("f32", (128,)), "0"),
        ("acc", TensorType("f32", (128, 128)), "0"),
    ]
    assert [op.name for op in g.ops] == ["k", "v", "s", "m_new", "p", "alpha", "l_new", "acc_r", "acc_n"]
    assert g.op("s") == Op("s", "mma", (Operand("q"), Operand("k")), TensorType("f32", (128, 128)))
    assert g.op("k").type == TensorType("f16", (128, 128), "smem") and g.op("k").operands == ()
    assert g.yields == (("m", "m_new"), ("l", "l_new"), ("acc", "acc_n"))


def test_attention_edges():
    g = load_tir(ATTENTION)
    edges = set(g.edges)
    assert len(g.edges) == 15
    assert Edge("k", "s", 0, 1) in edges
    assert Edge("m_new", "m_new", 1, 1, carry="m") in edges  # rowmax s, m reads last iteration's m_new
    assert Edge("m_new", "alpha", 1, 0, carry="m") in edges
    assert Edge("m_new", "alpha", 0, 1) in edges
    assert Edge("acc_n", "acc_r", 1, 0, carry="acc") in edges
    assert Edge("l_new", "l_new", 1, 1, carry="l") in edges
    assert not any(e.src == "q" for e in edges)  # inputs are loop-invariant


def test_attention_spans_point_at_the_source():
    g = load_tir(ATTENTION)
    lines = ATTENTION.read_text().splitlines()
    s = g.op("s")
    assert (s.span.file, s.span.line) == (str(ATTENTION), 10)
    assert lines[9][s.span.col - 1:].startswith("mma q, k")  # an op's span is its opcode
    assert g.values["m"].span.line == 4 and lines[3][g.values["m"].span.col - 1] == "m"
    assert lines[9][s.operands[1].span.col - 1] == "k"


def test_attention_prints_as_written():
    """The contract's example is already in canonical layout: printing gives it back, minus comments."""
    source = [line.split("#")[0].rstrip() for line in ATTENTION.read_text().splitlines()]
    assert print_tir(load_tir(ATTENTION)) == "\n".join(line for line in source if line) + "\n"


@pytest.mark.parametrize("path", [ATTENTION, GEMM], ids=lambda p: p.name)
def test_examples_round_trip(path):
    g = load_tir(path)
    text = print_tir(g)
    assert parse_tir(text) == g
    assert print_tir(parse_tir(text)) == text


# -- features --------------------------------------------------------------------------------------

def test_resultless_ops_attributes_and_distances():
    g = load_tir(GEMM)
    assert [op.name for op in g.ops][-3:] == ["store_0", "barrier_0", "store_1"]
    store, barrier, store2 = g.ops[-3:]
    assert not store.has_result and store.type is None and store.attrs == (("occupancy", 4),)
    assert barrier == Op("barrier_0", "barrier", (), None, (), has_result=False)
    assert store2.type == TensorType("f16", (128, 64), "smem") and store2.operands[0] == Operand("a", 2)
    assert g.op("a").attrs == (("async", True), ("unit", "tma"), ("cycles", 500))
    assert g.op("acc2").attrs == (("issue", "warp_group"), ("cycles", 256.5), ("depth", 2))
    assert g.op("one").attr("unit") == "alu"  # a quoted string
    assert [c.init for c in g.carries] == ["0", "1"]  # zero and +1, normalised
    assert g.carries[0].type.space == "tmem"
    assert Edge("one", "next", 1, 1) in g.edges and Edge("a", "store_1", 2, 0) in g.edges


def test_forward_reference_with_distance():
    g = parse_tir("kernel k\nloop {\n  a = f b@1 : f32[4]\n  b = g a : f32[4]\n}\n")
    assert g.edges == (Edge("b", "a", 1, 0), Edge("a", "b", 0, 0))


def test_generated_names_avoid_user_names():
    g = parse_tir("kernel k\nloop {\n  store\n  store_0 = f : f32[1]\n  store store_0\n"
                  "  store_0_ = g : f32[1]\n}\n")
    assert [op.name for op in g.ops] == ["store_0__", "store_0", "store_1", "store_0_"]


def test_free_spacing_and_comments():
    g = parse_tir("  kernel   k # name\n\n# nothing\ninput a:f16[ 4 , 8 ]@smem\nloop{\n"
                  "x=f  a ,a:f32[4]{cycles=3,async=false}   # trailing\n}   \n")
    assert g.op("x") == Op("x", "f", (Operand("a"), Operand("a")), TensorType("f32", (4,)),
                           (("cycles", 3), ("async", False)))
    assert g.inputs[0].type == TensorType("f16", (4, 8), "smem")


@pytest.mark.parametrize("init, expected", [("zero", "0"), ("0", "0"), ("007", "7"), ("-inf", "-inf"),
                                            ("inf", "inf"), ("+inf", "inf"), ("1.50", "1.5"),
                                            ("-2e3", "-2000.0"), ("+3", "3")])
def test_carry_init_is_normalised(init, expected):
    g = parse_tir(f"kernel k\ncarry c : f32[1] = {init}\nloop {{\n  x = f c : f32[1]\n  yield c = x\n}}\n")
    assert g.carries[0].init == expected


def test_carry_output_dtype():
    g = parse_tir("kernel k\ncarry a : f32[64,64] = 0 {output = f16}\ncarry b : f32[64] = -inf\n"
                  "loop {\n  a_n = f a : f32[64,64]\n  b_n = g b : f32[64]\n  yield a = a_n, b = b_n\n}\n")
    a, b = g.carries
    assert (a.output_dtype, b.output_dtype) == ("f16", "f32")
    assert "carry a : f32[64,64] = 0 {output = f16}" in print_tir(g)


def test_load_tir_missing_file(tmp_path):
    missing = tmp_path / "nope.tir"
    with pytest.raises(InputError) as info:
        load_tir(missing)
    assert str(missing) in str(info.value) and "cannot read" in str(info.value)
    assert info.value.exit_code == 2


def test_load_tir_names_the_file_in_errors(tmp_path):
    path = tmp_path / "bad.tir"
    path.write_text("kernel k\nloop {\n  x = f y : f32[1]\n}\n")
    with pytest.raises(InputError) as info:
        load_tir(path)
    assert str(info.value).startswith(f"{path}:3:9: error: undefined name 'y'")


# -- errors ----------------------------------------------------------------------------------------

HEAD = "kernel k\ninput q : f16[64,64]\ncarry m : f32[64] = 0\nloop {\n"  # the body starts on line 5


def body(*lines: str, yields: str = "  yield m = x") -> str:
    return HEAD + "".join(line + "\n" for line in lines + (yields,)) + "}\n"


def case(id: str, text: str, line: int, col: int, message: str, hint: str | None = None):
    """One bad file: where its only error is, a substring of the message and of the hint."""
    return pytest.param(text, line, col, message, hint, id=id)


ERRORS = [
    case("syntax", body("  x = rowmax q q : f32[64]"), 5, 16, "expected ':' and the result type, found 'q'"),
    case("character", body("  x = rowmax q, $ : f32[64]"), 5, 17, "unexpected character '$'"),
    case("no-type", body("  x = rowmax q"), 5, 15, "expected ':' and the result type, found the end"),
    case("undefined", body("  m_new = rowmax q, m : f32[64]", "  x = exp2 q, m_nwe : f32[64]"), 6, 15,
         "undefined name 'm_nwe'", "did you mean 'm_new'?"),
    case("redefined", body("  x = rowmax q : f32[64]", "  x = exp2 q : f32[64]"), 6, 3,
         "'x' is already defined", "first defined on line 5"),
    case("redefined-input", body("  q = f m : f32[64]", "  x = g q : f32[64]"), 5, 3,
         "'q' is already defined"),
    case("dtype", body("  x = rowmax q : f17[64]"), 5, 18, "unknown dtype 'f17'", "did you mean 'f16'?"),
    case("dims", body("  x = rowmax q : f32[64,0]"), 5, 25, "must be a positive integer, found '0'"),
    case("dims-float", body("  x = rowmax q : f32[1.5]"), 5, 22, "positive integer, found '1.5'"),
    case("dims-empty", body("  x = rowmax q : f32[]"), 5, 22, "expected a dimension, found ']'"),
    case("space", body("  x = rowmax q : f32[64] @shmem"), 5, 27, "unknown memory space 'shmem'",
         "did you mean 'smem'?"),
    case("attr-key", body("  x = rowmax q : f32[64] {cycels = 3}"), 5, 27, "unknown attribute 'cycels'",
         "did you mean 'cycles'? (attributes: cycles, occupancy, unit, issue, async, variable_latency, "),
    case("attr-cycles", body("  x = f q : f32[64] {cycles = -1}"), 5, 31, "'cycles' must be a number >= 0"),
    case("attr-issue", body("  x = f q : f32[64] {issue = thread}"), 5, 30,
         "'issue' must be 'warp' or 'warp_group'"),
    case("attr-async", body("  x = f q : f32[64] {async = 1}"), 5, 30, "'async' must be true or false"),
    case("attr-depth", body("  x = f q : f32[64] {depth = 0}"), 5, 30, "'depth' must be an integer >= 1"),
    case("attr-unit", body("  x = f q : f32[64] {unit = 3}"), 5, 29, "'unit' must be a unit name"),
    case("carry-attr-key", "kernel k\ncarry m : f32[64] = 0 {outptu = f16}\nloop {\n  x = f m : f32[64]\n"
         "  yield m = x\n}\n", 2, 24, "unknown carry attribute 'outptu'", "did you mean 'output'?"),
    case("carry-attr-dtype", "kernel k\ncarry m : f32[64] = 0 {output = f8e4m3}\nloop {\n  x = f m : f32[64]\n"
         "  yield m = x\n}\n", 2, 33, "'output' must be one of f32, f16, bf16 or none (not written), found f8e4m3"),
    case("op-output-attr", body("  x = f q : f32[64] {output = f16}"), 5, 22, "unknown attribute 'output'"),
    case("attr-twice", body("  x = f q : f32[64] {cycles = 1, cycles = 2}"), 5, 34,
         "'cycles' is given twice"),
    case("attr-comma", body("  x = f q : f32[64] {cycles = 1 unit = tc}"), 5, 33, "expected ',' or '}'"),
    case("string", body('  x = f q : f32[64] {unit = "tc}'), 5, 29, "unterminated string"),
    case("no-yield", body("  x = f q : f32[64]", yields=""), 3, 7, "carry 'm' without yield",
         "add 'm = RESULT'"),
    case("yield-unknown", body("  x = f q : f32[64]", yields="  yield m = x, mm = x"), 6, 16,
         "yield of unknown carry 'mm'", "did you mean 'm'?"),
    case("yield-not-carry", body("  x = f q : f32[64]", yields="  yield m = x, q = x"), 6, 16,
         "yield needs a carry, but 'q' is an input"),
    case("yield-undefined", body("  x = f q : f32[64]", yields="  yield m = y"), 6, 13, "undefined name 'y'"),
    case("yield-twice", body("  x = f q : f32[64]", yields="  yield m = x, m = x"), 6, 16,
         "carry 'm' is yielded twice"),
    case("yield-shape", body("  x = f q : f32[128]"), 6, 13, "carry 'm' is f32[64] but 'x' is f32[128]",
         "the next iteration reads 'm' as 'x'"),
    case("yield-dtype", body("  x = f q : f16[64]"), 6, 13, "carry 'm' is f32[64] but 'x' is f16[64]"),
    case("after-yield", body("  x = f q : f32[64]", yields="  yield m = x\n  y = g x : f32[64]"), 7, 3,
         "'yield' must be the last statement", "line 6"),
    case("no-kernel", "input q : f16[64]\nloop {\n}\n", 1, 1, "missing 'kernel NAME' line"),
    case("kernel-twice", "kernel a\nkernel b\nloop {\n}\n", 2, 1, "'kernel NAME' must be the first line"),
    case("no-loop", "kernel k\ninput q : f16[64]\n", 2, 18, "missing 'loop { ... }'"),
    case("unclosed", "kernel k\nloop {\n  x = f : f32[1]\n", 2, 1, "the loop is not closed"),
    case("empty-loop", "kernel k\nloop {\n}\n", 2, 1, "the loop has no operations", "one op per line"),
    case("after-loop", "kernel k\nloop {\n}\n\n  x = f : f32[1]\ny\n", 5, 3, "text after the loop"),
    case("op-outside", "kernel k\nx = f : f32[1]\nloop {\n}\n", 2, 1, "'x' is not allowed before 'loop {'"),
    case("input-inside", "kernel k\nloop {\n  input q : f32[1]\n}\n", 3, 3, "'input' is not allowed inside"),
    case("loop-brace", "kernel k\nloop  # a comment\n}\n", 2, 5, "expected '{' after 'loop', found the end"),
    case("init-missing", "kernel k\ncarry c : f32[1]\nloop {\n}\n", 2, 17, "expected '=' and the carry's"),
    case("init-bad", "kernel k\ncarry c : f32[1] = one\nloop {\n}\n", 2, 20, "expected an initial value"),
    case("distance-0", body("  x = f m, x@0 : f32[64]"), 5, 14, "iteration distance must be an integer >= 1",
         "write 'x'"),
    case("distance-input", body("  x = f q@1 : f32[64]"), 5, 9,
         "'q@1' needs a body result, but 'q' is an input", "write 'q'"),
    case("used-early", body("  x = f y : f32[64]", "  y = g q : f32[64]"), 5, 9,
         "'y' is used before it is defined", "write y@1 to read the previous iteration's value"),
    case("cycle", body("  a = f c : f32[64]", "  b = g a : f32[64]", "  c = h b : f32[64]",
                       "  x = i c : f32[64]"),
         5, 9, "dependence cycle of total distance 0: a -> b -> c -> a", "write c@1"),
    case("self-cycle", body("  x = f x, q : f32[64]"), 5, 9, "dependence cycle of total distance 0: x -> x"),
]


@pytest.mark.parametrize("text, line, col, message, hint", ERRORS)
def test_each_error_is_located(text, line, col, message, hint):
    error = only_error(text)
    assert message in error.message
    assert (error.span.file, error.span.line, error.span.col) == ("t.tir", line, col), error.render()
    assert error.span.text == (text.splitlines() + [""])[line - 1]
    assert hint is None or hint in (error.hint or ""), error.hint


def test_rendering_has_location_source_and_caret():
    with pytest.raises(InputError) as info:
        parse_tir(body("  m_new = f q : f32[64]", "  x = f q, m_nwe : f32[64]"), "attn.tir")
    assert str(info.value).splitlines() == [
        "attn.tir:6:12: error: undefined name 'm_nwe'",
        "    x = f q, m_nwe : f32[64]",
        "             ^~~~~",
        "  hint: did you mean 'm_new'?",
    ]


def test_all_errors_of_a_file_are_reported():
    text = body("  a = f q : f17[64]",             # 5: bad dtype
                "  b = g a a : f32[64]",           # 6: syntax: its name still counts as defined
                "  c = h b, zz : f32[64]",         # 7: undefined zz, but b raises nothing
                "  d = i c : f32[64] {speed = 1}",  # 8: unknown attribute
                "  e = j e : f32[64]",             # 9: cycle of distance 0
                yields="  yield m = d, n = d")     # 10: unknown carry
    errors = errors_of(text)
    assert sorted((e.span.line, e.span.col) for e in errors) == [(5, 13), (6, 11), (7, 12), (8, 22), (9, 9),
                                                                 (10, 16)]


def test_a_cycle_is_reported_once_and_other_early_uses_still_are():
    text = body("  a = f b : f32[64]", "  b = g a, c : f32[64]", "  x = h b : f32[64]",
                "  c = k q : f32[64]")
    messages = sorted(e.message for e in errors_of(text))
    assert messages == ["'c' is used before it is defined",
                        "dependence cycle of total distance 0: a -> b -> a"]


def test_empty_file():
    assert [e.message for e in errors_of("")] == ["missing 'kernel NAME' line: it must come first",
                                                   "missing 'loop { ... }'"]


# -- round trips on random graphs ------------------------------------------------------------------

KEYWORDS = {"kernel", "input", "carry", "loop", "yield"}
FIRST = string.ascii_letters + "_"
names = st.one_of(  # keywords and st/st_0 (a generated name's clash) now and then
    st.builds(str.__add__, st.sampled_from(FIRST), st.text(FIRST + string.digits + ".", max_size=5)),
    st.sampled_from(sorted(KEYWORDS) + ["true", "inf", "zero", "st", "st_0", "st_0_"]))
types = st.builds(TensorType, st.sampled_from(sorted(DTYPE_BITS)),
                  st.lists(st.integers(1, 4096), min_size=1, max_size=3).map(tuple), st.sampled_from(SPACES))
inits = st.one_of(st.sampled_from(["0", "inf", "-inf"]), st.integers(-10**9, 10**9).map(str),
                  st.floats(allow_nan=False, allow_infinity=False).map(repr))
amounts = st.one_of(st.integers(0, 10**6), st.floats(0, 1e9))
ATTR_VALUES = {"cycles": amounts, "occupancy": amounts, "depth": st.integers(1, 64),
               "issue": st.sampled_from(["warp", "warp_group"]), "async": st.booleans(),
               "variable_latency": st.booleans(), "unit": names}
attrs = st.lists(st.sampled_from(sorted(ATTR_VALUES)), unique=True, max_size=4).flatmap(
    lambda keys: st.tuples(*(ATTR_VALUES[k].map(lambda v, k=k: (k, v)) for k in keys)))


def generated_names(ops: list[Op], user: set[str]) -> list[Op]:
    """The contract's naming of result-less ops, written independently of the parser."""
    taken, counts, out = set(user), {}, []
    for op in ops:
        if not op.has_result:
            name = f"{op.opcode}_{counts.setdefault(op.opcode, 0)}"
            counts[op.opcode] += 1
            while name in taken:
                name += "_"
            taken.add(name)
            op = Op(name, op.opcode, op.operands, op.type, op.attrs, False)
        out.append(op)
    return out


# Strategies are built once, here: building them inside `graphs` makes generation many times slower.
index = st.integers(0, 10**6)
operand_picks = st.lists(st.tuples(index, st.integers(0, 3)), max_size=3)  # (which, distance or 0)
# a generated opcode is none of the vocabulary's (whose operands the parser checks: `le` with none is
# an error) and, for a result-less op, which starts its line, no keyword
free_ops = names.filter(lambda n: vocab.lookup(n) is None)
opcodes = free_ops.filter(lambda n: n not in KEYWORDS)
maybe_types = st.none() | types
carry_attrs = st.sampled_from([(), (("output", "f16"),), (("output", "bf16"),), (("output", "f32"),)])


@st.composite
def graphs(draw) -> Graph:
    """A random valid graph: plain operands read inputs, carries and results above; NAME@D any result."""
    pool = draw(st.lists(names, min_size=1, max_size=14, unique=True))
    n_inputs = draw(index) % len(pool)
    n_carries = draw(index) % (len(pool) - n_inputs)
    inputs, carries = pool[:n_inputs], pool[n_inputs:n_inputs + n_carries]
    results = pool[n_inputs + n_carries:]
    order = draw(st.permutations(results + [None] * (draw(index) % 4)))
    ops, visible = [], inputs + carries
    for result in order:
        operands = tuple(Operand(visible[i % len(visible)]) if d == 0 and visible
                         else Operand(results[i % len(results)], max(d, 1)) for i, d in draw(operand_picks))
        opcode = draw(free_ops if result else opcodes)
        type_ = draw(types if result else maybe_types)
        ops.append(Op(result or "", opcode, operands, type_, draw(attrs), result is not None))
        visible = visible + [result] if result else visible
    yields = tuple((c, results[draw(index) % len(results)]) for c in draw(st.permutations(carries)))
    typed = {op.name: op.type for op in ops}  # a carry has the type of the result it yields
    return Graph(
        kernel=draw(names),
        inputs=tuple(Value(n, draw(types), "input") for n in inputs),
        carries=tuple(Value(n, typed[dict(yields)[n]], "carry", draw(inits), attrs=draw(carry_attrs))
                      for n in carries),
        ops=tuple(generated_names(ops, set(pool))),
        yields=yields,
    )


@settings(max_examples=100, deadline=None)
@given(graphs())
def test_random_graphs_round_trip(graph):
    text = print_tir(graph)
    parsed = parse_tir(text)
    assert parsed == graph, text
    assert print_tir(parsed) == text


@settings(max_examples=100, deadline=None)
@given(graphs(), st.data())
def test_damaged_text_parses_or_reports_located_errors(graph, data):
    text = print_tir(graph)
    cut = data.draw(st.integers(0, len(text) - 1))
    damage = data.draw(st.sampled_from(["", "@", "x", ",", "=", "{", ":", "\n", "#", "yield ", "@1"]))
    damaged = text[:cut] + damage + text[cut + 1:]
    try:
        parse_tir(damaged, "d.tir")
    except InputError as error:
        lines = [line.removesuffix("\r") for line in damaged.split("\n")]
        for d in error.diagnostics:
            assert d.span is not None and 1 <= d.span.line <= len(lines), d.render()
            assert d.span.text == lines[d.span.line - 1] and 1 <= d.span.col <= len(d.span.text) + 1


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_text_parses_or_raises_input_error(text):
    try:
        parse_tir(text)
    except InputError as error:
        assert error.diagnostics
