"""The op vocabulary (twill/vocab.py): parse-time checks of every table op, generic costs from the
machine file's rates, an emitter for every table opcode on both targets, the importer's fusion
producing table ops only, and (slow) nvcc builds of graphs that use every family and of the
corpus graphs (tests/data/vocab: the W4A16 GEMM and the attention-backward dQ kernel).

The schedules of the two every-op graphs are stored next to them (their modulo ILP takes minutes on
a loaded machine); regenerate with
    twill solve tests/data/vocab/ops_sm90.tir --gpu h100 --swp-only --normalize-bound 40 -o tests/data/vocab/ops_sm90.json
    twill solve tests/data/vocab/ops_sm100.tir --gpu b200 --swp-only --normalize-bound 40 -o tests/data/vocab/ops_sm100.json
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from twill import vocab
from twill.costs import bind
from twill.emit import emit_cuda
from twill.emit.ops import EMITTERS
from twill.errors import InputError
from twill.machine import load_machine, parse_machine
from twill.schedule import Schedule
from twill.tir import parse_tir
from twill.ttgir import load_ttgir
from twill_cli.main import main

DATA = Path(__file__).parent / "data" / "vocab"
HEAD = """kernel k
input q   : f16[128,64] @smem
input rowv : f32[128]
input colv : f16[1,64] @smem
carry acc : f32[128,64] = 0
loop {
  k  = load : f16[64,64] @smem
  pk = load : i8[64,64] @smem
"""
TAIL = """  acc_n = mma q, k, acc : f32[128,64]
  yield acc = acc_n
}
"""


def run(*args):
    return CliRunner().invoke(main, list(args))


def graph(*lines: str) -> str:
    return HEAD + "".join(f"  {line}\n" for line in lines) + TAIL


BAD = {  # op line -> what the error says
    "s = mma : f32[128,64]": "mma takes 2 or 3 operands, and this one has 0",
    "s = mma q, k, acc, acc, q : f32[128,64]": "mma takes 2 or 3 operands, and this one has 5",
    "s = mma q, k : f32[128]": "an mma gives a rank-2 [M, N] tile",
    "s = mma q, k, rowv : f32[128,64]": "the accumulator c is f32[128], not the result's f32[128,64]",
    "s = mma q, q : f32[128,64]": "the shapes of this mma do not agree",
    "w = dequant k, colv : f16[64,64] {bits = 4}": "packed is f16: it must be an integer tile",
    "w = dequant pk, colv : i32[64,64] {bits = 4}": "a dequant gives float data",
    "w = dequant pk, colv : f16[64,64] {bits = 4, shift = 6}": "do not fit a 8-bit i8 element",
    "w = dequant pk, colv : f16[64,64]": "dequant needs the attribute 'bits'",
    "w = dequant pk, colv : f16[64,32] {bits = 4}": "one code per result element",
    "t = add acc, k : f32[128,64]": "operand 2 is f16[64,64], which does not broadcast",
    "t = add acc, k, q : f32[128,64]": "add takes 1 or 2 operands, and this one has 3",
    "t = and acc, rowv : i32[128,64]": "operand 1 is f32, and this op takes integer data",
    "t = exp2 acc, rowv, acc, rowv : f16[128,64]": "exp2 takes 1 or 2 operands, and this one has 4",
    "t = reduce_sum acc : f32[128]": "reduce_sum needs the attribute 'axis'",
    "t = reduce_sum acc : f32[64] {axis = 1}": "gives [128], not f32[64]",
    "t = reduce_max acc : f32[128] {axis = 2}": "axis = 2 is not an axis of x",
    "t = cumsum acc : f32[128] {axis = 1}": "a scan keeps its input's shape",
    "t = select acc, acc : f32[128,64]": "select takes 3 operands, and this one has 2",
    "t = mul acc, rowv : f32[128,64] {scalar = 2}": "'scalar' is the y of a one-operand mul",
    "t = select acc, acc, acc : f32[128,64] {scalar = 2}": "'scalar' is the b of a 2-operand select",
    "t = exp acc : f32[128,64] {axis = 1}": "exp takes no attribute 'axis'",
    "t = rowmax acc : f32[128,64]": "a row reduction gives one value per row",
    "t = mask acc : f32[128,64] {pred = ge, rows = 1, cols = -1, offset = 0}": "a mask with one operand takes its other value from 'fill'",
    "t = mask acc, acc : f32[128,64] {pred = ge, rows = 1, cols = -1, offset = 0, fill = 0}": "a mask of two operands takes no 'fill'",
    "t = mask acc : f32[128,64] {rows = 1, cols = -1, offset = 0, fill = 0}": "mask needs the attribute 'pred'",
    "t = mask rowv : f32[128] {pred = ge, rows = 1, cols = -1, offset = 0, fill = 0}": "a mask compares a rank-2 tile's row and column indices",
}


@pytest.mark.parametrize("line", sorted(BAD))
def test_a_bad_table_op_is_a_located_error_at_parse_time(line, tmp_path):
    """Every misuse is `FILE:LINE:COL: error` at the opcode, with the op's usage as the hint,
    exit 2, no traceback, before any machine is read (`twill solve` without solving)."""
    path = tmp_path / "bad.tir"
    path.write_text(graph(line))
    r = run("solve", str(path), "--gpu", "h100")
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    col = line.index("=") + 3
    assert f"{path}:9:{col + 2}: error: op '{line.split()[0]}': " in r.output, r.output
    assert BAD[line] in r.output, r.output
    assert "hint: usage: " in r.output


def test_every_error_of_a_file_is_reported_at_once(tmp_path):
    path = tmp_path / "bad.tir"
    lines = list(BAD)[:4]
    path.write_text(graph(*[line.replace("s =", f"s{i} =").replace("t =", f"t{i} =") for i, line in enumerate(lines)]))
    r = run("solve", str(path), "--gpu", "h100")
    assert r.exit_code == 2
    assert [int(m) for m in re.findall(r"bad\.tir:(\d+):\d+: error", r.output)] == [9, 10, 11, 12], r.output


def test_good_table_ops_parse_and_broadcast_row_and_column_vectors():
    g = parse_tir(graph("t0 = add acc, rowv : f32[128,64]", "t1 = mul t0, colv : f32[128,64]",
                        "t2 = mul t1 : f32[128,64] {scalar = 0.5}", "w = dequant pk, colv, colv : f16[64,64] {bits = 4, shift = 4}",
                        "w2 = dequant pk, colv : f16[64,64] {bits = 4}", "r = reduce_min t2 : f32[128] {axis = -1}",
                        "c = cumsum t2 : f32[128,64] {axis = 1}", "b = shr pk : i8[64,64] {scalar = 4}",
                        "mk = mask t2 : f32[128,64] {pred = ge, rows = 1, cols = -1, offset = 0, fill = -inf}",
                        "m2 = mask t2, acc : f32[128,64] {pred = ne, rows = 2, cols = 0, offset = -3}"))
    assert [op.opcode for op in g.ops][2:-1] == ["add", "mul", "mul", "dequant", "dequant", "reduce_min", "cumsum", "shr",
                                                 "mask", "mask"]
    assert g.op("mk").attr("fill") == float("-inf") and g.op("m2").attr("pred") == "ne"


def test_a_rank1_vector_is_read_as_a_column_by_a_one_row_result():
    """[N] -> [1, N]: a rank-1 operand of a one-row result is one value per column; scans and
    reductions of a whole vector (to a scalar, f32[1]) parse."""
    text = graph("ca = cumsum colv : f16[1,64] {axis = 1}", "tot = reduce_sum k : f32[64] {axis = 1}",
                 "tc = convert tot : f32[1,64]", "cs = cumsum tot : f32[64] {axis = 0}",
                 "one = reduce_sum tot : f32[1] {axis = 0}", "d = sub cs, tc : f32[64,64]")
    g = parse_tir(text)
    assert {op.name: op.type.shape for op in g.ops}["tc"] == (1, 64)
    assert vocab.broadcasts((64,), (1, 64)) and not vocab.broadcasts((64,), (2, 64))
    assert not vocab.broadcasts((64,), (1, 32)) and vocab.broadcasts((1,), (1, 64))  # a scalar: either way


def test_an_opcode_outside_the_table_is_left_to_the_machine_file():
    g = parse_tir(graph("t = my_op acc, k, q, rowv : f32[7] {cycles = 3, unit = alu}"))
    cost = {c.name: c for c in bind(g, load_machine("h100"))}["t"]
    assert (cost.unit, cost.cycles) == ("alu", 3.0)


# -- costs -----------------------------------------------------------------------------------------

def test_a_table_op_the_machine_file_does_not_list_costs_elements_over_its_rate():
    g = parse_tir(graph("t0 = tanh acc : f32[128,64]", "t1 = and pk, pk : i32[64,64]",
                        "t2 = dequant pk, colv : f16[64,64] {bits = 4}", "t3 = mul acc, rowv : f32[128,64]"))
    h100 = load_machine("h100")
    costs = {c.name: c for c in bind(g, h100)}
    rates = h100.rate_of
    assert (costs["t0"].unit, costs["t0"].cycles) == ("sfu", 128 * 64 / rates["sfu"])
    assert (costs["t1"].unit, costs["t1"].cycles) == ("alu", 64 * 64 / rates["bit"])
    assert costs["t2"].cycles == 64 * 64 / rates["dequant"]
    assert costs["t3"].cycles == 128 * 64 / 128  # ops.mul of the machine file wins


def _spec_without_rates() -> str:
    text = (Path(__file__).parent.parent / "specs" / "h100.yaml").read_text()
    return re.sub(r"\nrates:.*?\nops:", "\nops:", text, flags=re.S)


def test_without_a_rate_an_unlisted_table_op_says_what_to_add():
    m = parse_machine(_spec_without_rates(), "mine.yaml")
    with pytest.raises(InputError) as e:
        bind(parse_tir(graph("t = tanh acc : f32[128,64]")), m)
    assert "rates: {sfu: N}" in e.value.render()


def test_the_rates_section_is_validated_with_its_key():
    text = _spec_without_rates().replace("\nops:", "\nrates:\n  sfuu: 16\n  alu: -1\nops:")
    with pytest.raises(InputError) as e:
        parse_machine(text, "mine.yaml")
    out = e.value.render()
    assert "unknown key 'rates.sfuu'" in out and "did you mean 'sfu'?" in out
    assert "'rates.alu' must be more than 0" in out


# -- emitters and the importer -----------------------------------------------------------------------

def test_every_table_opcode_has_an_emitter_on_both_targets():
    for target, table in EMITTERS.items():
        missing = [op for op, d in vocab.VOCAB.items() if d.emit != "load" and op not in table]
        assert not missing, (target, missing)


def test_the_w4a16_chain_imports_as_one_dequant_per_half():
    g, _ = load_ttgir(DATA / "gemm_w4a16_sm90.ttgir")
    deq = [op for op in g.ops if op.opcode == "dequant"]
    assert [(dict(op.attrs)["bits"], dict(op.attrs)["shift"], len(op.operands)) for op in deq] == [(4, 0, 3), (4, 4, 3)]
    for op in g.ops:  # every op a table op of the right arity
        d = vocab.lookup(op.opcode)
        assert d is not None and (not d.arity or len(op.operands) in d.arity), op


def test_the_dq_softmax_chain_imports_as_table_ops():
    """exp2 (s - lse) * (dp - delta) was one 4-operand exp2 no emitter had: now exp2, sub, mul."""
    g, _ = load_ttgir(DATA / "attn_bwd_dq_sm90.ttgir")
    ops = {op.opcode: len(op.operands) for op in g.ops if op.opcode not in ("load", "mma")}
    assert ops == {"exp2": 2, "sub": 2, "mul": 2}


# -- nvcc (slow) ---------------------------------------------------------------------------------------

def nvcc_clean(src: Path, arch: str) -> None:
    """nvcc builds `src` for `arch` with no warning, spill or serialized wgmma."""
    cmd = ["nvcc", "-std=c++17", f"-gencode=arch=compute_{arch[3:]},code={arch}", "-DTWILL_MAIN", "-Xptxas", "-v",
           "-c", str(src), "-o", str(src.with_suffix(".o"))]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError:
        pytest.skip("nvcc not found")
    assert proc.returncode == 0, proc.stderr
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", proc.stderr)]
    assert spills and not any(spills), proc.stderr
    noise = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("ptxas info")
             and not re.match(r"^\s+\d+ bytes (stack frame|spill|cumulative)", line)]
    assert not noise, proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name,arch", [("ops_sm90", "sm_90a"), ("ops_sm100", "sm_100a")])
def test_every_family_compiles(name, arch, tmp_path):
    schedule = Schedule.from_json((DATA / f"{name}.json").read_text())
    src = tmp_path / f"{name}.cu"
    src.write_text(emit_cuda(schedule, load_machine(schedule.machine)))
    nvcc_clean(src, arch)


@pytest.mark.extended  # CI's time: tests/test_corpus.py compiles every corpus dump (these graphs' imports)
@pytest.mark.parametrize("name,gpu,arch", [("gemm_w4a16_sm90", "h100", "sm_90a"), ("gemm_w4a16_sm100", "b200", "sm_100a"),
                                           ("attn_bwd_dq_sm90", "h100", "sm_90a"), ("attn_bwd_dq_sm100", "b200", "sm_100a")])
def test_corpus_graphs_solve_emit_and_compile(name, gpu, arch, tmp_path):
    out = tmp_path / f"{name}.json"
    r = run("solve", str(DATA / f"{name}.tir"), "--gpu", gpu, "--no-cache", "-q", "-o", str(out))
    assert r.exit_code == 0, r.output
    src = tmp_path / f"{name}.cu"
    r = run("emit-cuda", str(out), "-o", str(src))
    assert r.exit_code == 0, r.output
    nvcc_clean(src, arch)


def test_the_math_librarys_ops_are_one_table_from_import_to_cuda(tmp_path):
    """vocab.LIBM is the one home of the math library's functions: each is an op of the table, libdevice's
    `__nv_FUNCTION` and MLIR's `math.OP` import as it, the epilogue has its scalar form, and a loop applying four
    of them solves, emits and compiles for sm_90a with no spill."""
    from twill.ttgir import parser
    from twill.ttgir.fuse import ARITH_OPCODES
    from twill.emit.epilogue import SCALAR_MATH
    from conftest import emitted_and_built, nvcc
    from twill.machine import load_machine
    from twill.pipeline import SolveOptions, solve
    from twill.tir import parse_tir
    for op, fn in vocab.LIBM.items():
        assert op in vocab.VOCAB and parser.LIBDEVICE[f"__nv_{fn}"] == f"math.{op}", op
        assert ARITH_OPCODES[f"math.{op}"] == op and parser.ARITY[f"math.{op}"] == 1, op
        assert SCALAR_MATH[op] == f"{fn}({{0}})", op
    if nvcc() is None:
        pytest.skip("nvcc not found")
    chain, prev = [], "x"
    compiled = ("erf", "asin", "log1p", "floor")  # (four of them: CI's time; the C functions are CUDA's own)
    for i, op in enumerate(compiled):
        chain.append(f"  v{i} = {op} {prev} : f32[64,128]")
        prev = f"v{i}"
    text = ("kernel libm\nargument X = x\nargument Y = store_0\nargument N {extent = loop}\n"
            "loop {\n  x = load : f32[64,128] @smem\n" + "\n".join(chain) + f"\n  store {prev}\n}}\n")
    machine = load_machine("h200")
    schedule = solve(parse_tir(text, "libm.tir"), machine, SolveOptions(time_limit=20))
    _, rc, log = emitted_and_built(schedule, machine, tmp_path / "libm.cu")
    assert rc == 0, log[-2000:]
    assert all(f"{vocab.LIBM[op]}(at<R>(x, e...))" in (tmp_path / "libm.cu").read_text() for op in compiled)
    assert not re.findall(r"[1-9]\d* bytes spill stores", log), log[-2000:]
