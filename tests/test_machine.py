"""Machine descriptions: the bundled specs, validation with key paths, the cycle-expression evaluator."""
from __future__ import annotations

import re

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from twill.costs import bind, shape_env
from twill.errors import InputError
from twill.expr import ExprError, parse_expr
from twill.machine import bundled_specs, load_machine, parse_machine
from twill.tir import parse_tir

from conftest import ROOT

SPECS = sorted((ROOT / "specs").glob("*.yaml"))
H100 = (ROOT / "specs" / "h100.yaml").read_text()


# -- the bundled specs -----------------------------------------------------------------------------

def test_bundled_specs_are_found():
    assert {"h100", "h200", "b200"} <= set(bundled_specs())
    assert {p.stem for p in SPECS} <= set(bundled_specs())


@pytest.mark.parametrize("name", ["h100", "h200", "b200"])
def test_each_bundled_spec_loads(name):
    m = load_machine(name)
    assert m.name == name
    assert m.arch == ("sm_100a" if name == "b200" else "sm_90a")
    assert m.clock_ghz > 1 and m.limits.warps >= m.limits.warp_group >= 1
    assert m.limits.registers_per_thread <= 255 and m.limits.smem_bytes > 0
    assert all(cap >= 1 for _, cap in m.units)
    assert {"load", "mma", "exp2", "rowmax", "rowsum", "rescale"} <= set(m.op_specs)
    assert all(spec.unit in m.unit_caps for spec in m.op_specs.values())
    assert (m.limits.tmem_bytes > 0) == (name == "b200")  # only Blackwell has tensor memory


@pytest.mark.parametrize("name", ["h100", "h200", "b200"])
def test_spec_by_path_equals_spec_by_name(name):
    assert load_machine(str(ROOT / "specs" / f"{name}.yaml")) == load_machine(name)


def _numeric_lines(node, key: str = ""):
    """Lines of the YAML file holding a number: an int or float value, or a cycle expression."""
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            yield from _numeric_lines(v, k.value)
    elif isinstance(node, yaml.SequenceNode):
        for v in node.value:
            yield from _numeric_lines(v, key)
    elif node.tag.endswith((":int", ":float")) or (key in ("cycles", "occupancy") and re.search(r"\d", node.value)):
        yield node.start_mark.line + 1


@pytest.mark.parametrize("path", SPECS, ids=[p.name for p in SPECS])
def test_every_number_cites_its_source(path):
    """Each line with a number on it carries a `#` comment that says where the number comes from."""
    text = path.read_text()
    lines = text.splitlines()
    numeric = sorted(set(_numeric_lines(yaml.compose(text))))
    assert len(numeric) >= 20
    uncited = [f"{path.name}:{n}: {lines[n - 1].strip()}" for n in numeric
               if len(lines[n - 1].partition("#")[2].strip()) < 8]
    assert not uncited, "numbers without a source comment:\n" + "\n".join(uncited)


def test_mma_cost_of_the_gemm_tile():
    """M, N from the result's last two dims, K from the first operand's last dim: 2*64*256*64/4096."""
    graph = parse_tir((ROOT / "examples" / "gemm_hopper.tir").read_text(), "gemm_hopper.tir")
    env = shape_env(graph, graph.op("acc0_n"))
    assert (env["M"], env["N"], env["K"]) == (64, 256, 64)
    assert env["elements"] == 64 * 256 and env["bytes"] == 64 * 256 * 4
    costs = {c.name: c for c in bind(graph, load_machine("h100"))}
    assert costs["acc0_n"].cycles == 512 and costs["acc0_n"].unit == "tensor"
    assert costs["a0"].streaming and costs["a0"].cycles == 0  # TMA loads with no in-loop input
    assert {c.name: c for c in bind(graph, load_machine("b200"))}["acc0_n"].cycles == 256


# -- validation ------------------------------------------------------------------------------------

def _error(text: str, file: str = "specs/bad.yaml") -> str:
    with pytest.raises(InputError) as info:
        parse_machine(text, file)
    return info.value.render()


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_missing_key_names_file_and_path():
    text = H100.replace("  warps: 16 ", "  # warps removed ")
    msg = _error(text)
    assert "missing required key 'limits.warps'" in msg
    assert msg.startswith("specs/bad.yaml:")


def test_misspelt_key_suggests_the_right_one():
    text = H100.replace("  warps: 16 ", "  warpz: 16 ")
    msg = _error(text)
    line = _line_of(text, "warpz")
    assert f"specs/bad.yaml:{line}:3: error: unknown key 'limits.warpz'" in msg
    assert "did you mean 'warps'?" in msg
    assert "missing required key 'limits.warps'" not in msg  # the misspelling already says so


def test_misspelt_top_level_and_op_keys():
    assert "unknown key 'limitz'" in _error(H100.replace("limits:", "limitz:"))
    msg = _error(H100.replace("load:     {unit: tma,    cycles: 0,", "load:     {unit: tma,    cycle: 0,"))
    assert "unknown key 'ops.load.cycle'" in msg and "did you mean 'cycles'?" in msg


@pytest.mark.parametrize("old, new, path, kind", [
    ("  warps: 16 ", "  warps: many ", "limits.warps", "an integer"),
    ("  warps: 16 ", "  warps: 16.5 ", "limits.warps", "an integer"),
    ("  smem_bytes: 232448 ", "  smem_bytes: true ", "limits.smem_bytes", "an integer"),
    ("clock_ghz: 1.83", "clock_ghz: fast", "clock_ghz", "a number"),
    ("name: h100", "name: 100", "name", "a string"),
    ("async: true}   # TMA", "async: maybe}   # TMA", "ops.load.async", "a boolean"),
    ("  cross_warp_cycles: 60 ", "  cross_warp_cycles: [60] ", "communication.cross_warp_cycles", "a number"),
])
def test_wrongly_typed_key_names_file_path_and_type(old, new, path, kind):
    text = H100.replace(old, new)
    assert text != H100
    msg = _error(text)
    assert f"'{path}' must be {kind}" in msg
    assert msg.startswith(f"specs/bad.yaml:{_line_of(text, new.strip().split(':')[0] + ':')}:")


def test_other_validation_errors():
    assert "'units.tensor' must be at least 1" in _error(H100.replace("  tensor: 1 ", "  tensor: 0 "))
    assert "'ops.load.unit' is 'tmx', which is not among units" in _error(
        H100.replace("load:     {unit: tma,", "load:     {unit: tmx,"))
    assert "'ops.exp2.issue' must be one of warp, warp_group" in _error(
        H100.replace('cycles: "elements / 16"}', 'cycles: "elements / 16", issue: thread}'))
    assert "duplicate key 'name'" in _error(H100 + "name: again\n")
    assert "invalid YAML" in _error(H100 + "  bad: [\n")
    # YAML composes `=` (its tag has no constructor): an error at the value, not a ConstructorError
    text = H100.replace("  alu: 1 ", "  alu: = ")
    assert text != H100
    assert _error(text).startswith(f"specs/bad.yaml:{_line_of(text, '  alu: = ')}:8: error: 'units.alu': "
                                   "YAML cannot read this value")
    assert "empty" in _error("")
    assert "must be a mapping of keys" in _error("- a list\n")


@pytest.mark.parametrize("old, new, message", [
    ("  warp_group: 4 ", "  warp_group: 0 ", "'limits.warp_group' must be at least 1, not 0"),
    ("  warps: 16 ", "  warps: -16 ", "'limits.warps' must be at least 1, not -16"),
    ("  smem_bytes: 232448 ", "  smem_bytes: -1 ", "'limits.smem_bytes' must be at least 1"),
    ("  register_granule: 8 ", "  register_granule: 0 ", "'limits.register_granule' must be at least 1"),
    ("clock_ghz: 1.83", "clock_ghz: -1.83", "'clock_ghz' must be at least 0.001"),
    ("clock_ghz: 1.83", "clock_ghz: .nan", "'clock_ghz' must be a number, not nan"),
    ("  cross_warp_cycles: 60 ", "  cross_warp_cycles: -60 ", "'communication.cross_warp_cycles' must be at least 0"),
    ("streaming_depth: 2 ", "streaming_depth: 0 ", "'streaming_depth' must be at least 1, not 0"),
    ('cycles: "elements / 16"}', "cycles: -5}", "'ops.exp2.cycles' must be at least 0, not -5"),
    ('cycles: "elements / 16"}', "cycles: .inf}", "'ops.exp2.cycles': inf is not a finite number"),
    ('cycles: "elements / 16"}', "cycles: .nan}", "'ops.exp2.cycles': nan is not a finite number"),
    ('cycles: "elements / 16"}', 'cycles: "1e400"}', "'ops.exp2.cycles': the number 1e400 is too large"),
    ('cycles: "elements / 16"}', 'cycles: "' + "(" * 70 + "1" + ")" * 70 + '"}', "nested more than 64 deep"),
    ('cycles: "elements / 16"}', 'cycles: "' + "-" * 5000 + '1"}', "nested more than 64 deep"),
])
def test_values_no_machine_has_are_refused_at_their_key(old, new, message):
    """Zero, negative, infinite and NaN numbers, and expressions nested past any use, are errors at
    the key (the solver divides by some of these; NaN and inf reached the schedule JSON)."""
    text = H100.replace(old, new)
    assert text != H100
    assert message in _error(text)


@pytest.mark.parametrize("cycles, message", [
    ('"0 - elements"', "its cycles come to -8192, less than 0"),
    ('"1e300 * 1e300"', "'1e300 * 1e300' evaluates to inf, not a finite number"),
])
def test_expressions_that_evaluate_out_of_range_are_reported_at_the_op(cycles, message):
    machine = parse_machine(H100.replace('cycles: "elements / 16"}', f"cycles: {cycles}}}"), "m.yaml")
    graph = parse_tir("kernel k\ninput s : f32[64,128]\nloop {\n  p = exp2 s : f16[64,128]\n  store p\n}\n", "k.tir")
    with pytest.raises(InputError) as info:
        bind(graph, machine)
    assert message in str(info.value) and str(info.value).startswith("k.tir:4:")
    assert "ops.exp2" in str(info.value) and "m.yaml" in str(info.value)


def test_every_error_of_a_file_is_reported_at_once():
    text = H100.replace("  warps: 16 ", "  warpz: 16 ").replace("clock_ghz: 1.83", "clock_ghz: fast")
    with pytest.raises(InputError) as info:
        parse_machine(text, "x.yaml")
    assert len(info.value.diagnostics) == 2


def test_expression_error_points_at_the_column():
    text = H100.replace('"2*M*N*K*bits/16 / 4096"', '"2*M*N*Q / 4096"')
    assert text != H100
    msg = _error(text)
    line = text.splitlines()[_line_of(text, "2*M*N*Q") - 1]
    col = line.index("Q") + 1
    assert f"specs/bad.yaml:{_line_of(text, '2*M*N*Q')}:{col}: error: 'ops.mma.cycles': unknown name 'Q'" in msg


def test_unknown_gpu_and_unreadable_paths(tmp_path):
    with pytest.raises(InputError, match="unknown GPU 'h10'") as info:
        load_machine("h10")
    assert "did you mean 'h100'?" in info.value.render()
    with pytest.raises(InputError, match="cannot read machine description"):
        load_machine(str(tmp_path / "nope.yaml"))
    bad = tmp_path / "m.yaml"
    bad.write_text(H100.replace("limits:", "limitz:"))
    assert f"{bad}:" in pytest.raises(InputError, load_machine, str(bad)).value.render()


# -- the expression evaluator ----------------------------------------------------------------------

ENV = {"elements": 16384.0, "bytes": 32768.0, "M": 128.0, "N": 64.0, "K": 32.0, "bits": 8.0}


@pytest.mark.parametrize("source, value", [
    ("1 + 2 * 3", 7), ("(1 + 2) * 3", 9), ("2 * 3 + 1", 7), ("8 / 2 / 2", 2), ("2 - 3 - 4", -5),
    ("-2 * 3", -6), ("--2", 2), ("2 * -3", -6), ("1.5e2", 150), (".5 * 4", 2), ("42", 42),
    ("2*M*N*K / 4096", 2 * 128 * 64 * 32 / 4096), ("elements / 16", 1024), ("bytes/32 + M - N", 1088),
    ("((M))", 128), ("  M  *  2  ", 256), ("2*M*N*K*bits/16 / 4096", 2 * 128 * 64 * 32 / 4096 / 2),
])
def test_expression_values_and_precedence(source, value):
    assert parse_expr(source)(ENV) == pytest.approx(value)


def test_numbers_are_expressions_too():
    assert parse_expr(0)({}) == 0 and parse_expr(2.5)({}) == 2.5
    assert parse_expr("M * K").names == frozenset({"M", "K"})


@pytest.mark.parametrize("source, message, col", [
    ("1 + * 2", "unexpected '*'", 5),
    ("(1 + 2", "expected ')'", 7),
    ("2 $ 3", "unexpected '$'", 3),
    ("M N", "unexpected 'N'", 3),
    ("", "empty expression", 1),
    ("2 * flops", "unknown name 'flops'", 5),
    ("__import__('os')", "unknown name '__import__'", 1),
    ("M.real", "unexpected '.'", 2),
    ("len(M)", "unknown name 'len'", 1),
])
def test_expression_errors_have_columns(source, message, col):
    with pytest.raises(ExprError) as info:
        parse_expr(source)
    assert message in str(info.value)
    assert info.value.col == col


def test_division_by_zero_is_reported():
    with pytest.raises(ZeroDivisionError, match="division by zero in a cycle expression"):
        parse_expr("M / (N - 64)")(ENV)


def test_the_evaluator_never_calls_eval():
    source = (ROOT / "twill" / "expr.py").read_text()
    assert not re.search(r"(?<![\w.])(eval|exec|compile)\(", source)


@given(st.lists(st.integers(0, 50), min_size=1, max_size=6), st.lists(st.sampled_from("+-*"), min_size=5, max_size=5))
def test_expressions_agree_with_python_arithmetic(numbers, ops):
    """For + - * over integers, the parser's precedence and associativity are Python's."""
    source = str(numbers[0]) + "".join(f" {op} {n}" for op, n in zip(ops, numbers[1:]))
    assert parse_expr(source)({}) == int(eval(source))  # the reference, not the thing under test


def test_tensor_memory_is_counted_in_whole_columns():
    """tcgen05.alloc hands out columns of all 128 lanes: a 64-row f32 tile takes as many columns
    as a 128-row one, and two f16 share a 32-bit column."""
    from twill.ir import TensorType
    assert TensorType("f32", (64, 128), "tmem").footprint == 128 * 128 * 4
    assert TensorType("f32", (128, 128), "tmem").footprint == 128 * 128 * 4
    assert TensorType("f16", (128, 128), "tmem").footprint == 128 * 64 * 4
    assert TensorType("f32", (256, 64), "tmem").footprint == 2 * 128 * 64 * 4
    assert TensorType("f32", (64, 128), "smem").footprint == 64 * 128 * 4  # elsewhere: the bytes
    assert TensorType("f32", (128,), "tmem").footprint == 128 * 4  # one value per row: one column
    graph = parse_tir((ROOT / "examples" / "attention_bwd_blackwell.tir").read_text(), "bwd.tir")
    costs = {c.name: c for c in bind(graph, load_machine("b200"))}
    assert costs["s"].bytes == 128 * 128 * 4  # s is f32[64,128] @tmem: 128 of the 512 columns
    assert costs["p"].bytes == 64 * 128 * 2  # p is in registers


# -- hold: how long an async op keeps its issuing role busy ------------------------------------------

HOLD_GRAPH = """kernel held
input a : f16[64,128] @smem
carry acc : f32[64,128] = 0
loop {
  b = load : f16[128,128] @smem
  c = mma a, b, acc : f32[64,128]
  yield acc = c
}
"""


def _with_hold(hold: str | None) -> str:
    text = (ROOT / "specs" / "h100.yaml").read_text()
    if hold is None:
        return text
    out = re.sub(r"(\n  mma: *\{[^}]*)\}", lambda m: m.group(1) + f', hold: "{hold}"' + "}", text, count=1)
    assert out != text
    return out


def test_hold_binds_to_the_ops_cycles_at_most_its_occupancy():
    """`hold` is an expression of the op's shapes; it is clipped to the op's occupancy (the unit has
    taken the instruction by then) and to 0; without it an async op holds its role one issue cycle."""
    from twill.liveness import busy
    from twill.problem import problem_for
    from twill.options import ModelOptions
    graph = parse_tir(HOLD_GRAPH, "held.tir")
    plain = {c.name: c for c in bind(graph, parse_machine(_with_hold(None), "h100.yaml"))}
    assert plain["c"].hold == 0.0
    held = {c.name: c for c in bind(graph, parse_machine(_with_hold("M*N*K / 4096"), "h100.yaml"))}
    assert held["c"].hold == 64 * 128 * 128 / 4096 and held["b"].hold == 0.0
    over = {c.name: c for c in bind(graph, parse_machine(_with_hold("M*N*K"), "h100.yaml"))}
    assert over["c"].hold == over["c"].occupancy
    under = {c.name: c for c in bind(graph, parse_machine(_with_hold("K - 1000"), "h100.yaml"))}
    assert under["c"].hold == 0.0
    m = parse_machine(_with_hold("M*N*K / 4096"), "h100.yaml")
    p, norm = problem_for(graph, m, ModelOptions())
    task = p.task["c"]
    assert task.hold == norm.as_dict()[held["c"].hold] and busy(task) == task.hold > 1
    assert busy(problem_for(graph, parse_machine(_with_hold(None), "h100.yaml"), ModelOptions())[0].task["c"]) == 1


def test_a_spec_without_hold_keeps_its_digest():
    """`hold` is an extension: a description without it digests as before; with it, differently."""
    plain = parse_machine(_with_hold(None), "h100.yaml")
    assert plain.digest == load_machine("h100").digest
    assert parse_machine(_with_hold("M*N*K / 4096"), "h100.yaml").digest != plain.digest


def test_a_bad_hold_is_located():
    with pytest.raises(InputError) as exc:
        parse_machine(_with_hold("M * / 2"), "h100.yaml")
    assert "ops.mma.hold" in str(exc.value)


# -- the operand width (`bits`): the tensor core's rate follows the mma's input kind ---------------

def _mma_graph(dtype: str, k: int, acc: str = "f32", b_dtype: str | None = None):
    from twill.tir import parse_tir
    return parse_tir(f"""kernel g
carry acc : {acc}[64,128] = 0
loop {{
  a     = load : {dtype}[64,{k}] @smem
  b     = load : {b_dtype or dtype}[128,{k}] @smem
  acc_n = mma a, b, acc : {acc}[64,128]
  y     = exp2 acc_n : f32[64,128]
  yield acc = acc_n
}}
""")


def _mma_cost(graph, machine):
    return next(c for c in bind(graph, machine) if c.opcode == "mma")


def test_bits_is_the_mma_a_width_and_else_the_widest_dtype():
    g = _mma_graph("f8e4m3", 128)
    env = {op.name: shape_env(g, op) for op in g.ops}
    assert env["acc_n"]["bits"] == 8  # a's e4m3, not the f32 accumulator
    assert env["a"]["bits"] == 8 and env["y"]["bits"] == 32
    assert shape_env(_mma_graph("tf32", 64), _mma_graph("tf32", 64).ops[2])["bits"] == 32


@pytest.mark.parametrize("gpu", sorted(bundled_specs()))
def test_an_8bit_mma_costs_half_an_f16_one_and_tf32_twice(gpu):
    """Same M, N, K: e4m3, e5m2 and s8 at twice the f16 rate, tf32 at half (datasheets: 1979 / 989 /
    494 dense TFLOP/s on H100 and H200, 4.5 / 2.25 / 1.1 PFLOP/s on B200), on every bundled spec;
    a fixed latency (h200-calibrated's L0) is paid once whatever the dtype."""
    m = load_machine(gpu)
    f16 = _mma_cost(_mma_graph("f16", 64), m)
    bf16 = _mma_cost(_mma_graph("bf16", 64), m)
    assert (bf16.cycles, bf16.occupancy, bf16.hold) == (f16.cycles, f16.occupancy, f16.hold)
    fixed = f16.cycles - f16.occupancy  # 0, or the calibrated spec's one-time latency
    for dtype, factor in (("f8e4m3", 0.5), ("f8e5m2", 0.5), ("tf32", 2.0)):
        c = _mma_cost(_mma_graph(dtype, 64), m)
        assert c.occupancy == pytest.approx(factor * f16.occupancy, rel=1e-12), dtype
        assert c.cycles - fixed == pytest.approx(factor * (f16.cycles - fixed), rel=1e-12), dtype
    i8 = _mma_cost(_mma_graph("i8", 64, acc="i32"), m)
    assert i8.occupancy == pytest.approx(0.5 * f16.occupancy, rel=1e-12)
    # an m64n128k128 in e4m3 takes an f16 m64n128k64's time (its wgmma K step is 32, not 16)
    assert _mma_cost(_mma_graph("f8e4m3", 128), m).occupancy == f16.occupancy


@pytest.mark.parametrize("gpu, cycles", [("h100", 256.0), ("h200", 256.0), ("b200", 128.0),
                                         ("h200-calibrated", 2 * 64 * 128 * 64 / 4058 + 63)])
def test_an_f16_mma_costs_what_it_did(gpu, cycles):
    """The spec's mma before `bits` was 2*M*N*K / F (+ L0): f16 and bf16 cost it to the bit, so
    their schedules do not change."""
    assert _mma_cost(_mma_graph("f16", 64), load_machine(gpu)).cycles == cycles
