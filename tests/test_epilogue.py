"""The graph's epilogue, end to end: the `.tir` block (twill/tir_epilogue.py) and `argument` lines
(twill/tir_arguments.py), its CUDA (twill/emit/epilogue.py) on sm_90a and sm_100a through nvcc, its
import from the corpus dumps (twill/ttgir/epilogue.py), and the binding of an imported kernel,
which takes the Triton kernel's arguments in its order (twill/emit/binding.py)."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from conftest import nvcc, nvcc_compile
from twill.emit import build_model, emit_cuda
from twill.emit.binding import binding_files, parameters
from twill.emit.cuda import Renderer
from twill.errors import InputError
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.tir import load_tir, parse_tir, print_tir
from twill.ttgir import load_ttgir

HERE = Path(__file__).parent
DATA = HERE / "data" / "epilogue"
CORPUS = HERE / "data" / "ttgir" / "corpus" / "prepipe"

LOOP = """kernel k
input bias : f16[1,128]
carry m   : f32[128]     = -inf
carry acc : f32[128,128] = 0
loop {
  a     = load : f16[128,64] @smem
  b     = load : f16[128,64] @smem
  s     = mma a, b : f32[128,128]
  m_new = rowmax s, m : f32[128]
  acc_n = mma a, b, acc : f32[128,128]
  yield m = m_new, acc = acc_n
}
"""


def parse(epilogue: str, header: str = ""):
    text = LOOP.replace("kernel k\n", "kernel k\n" + header) + epilogue
    return parse_tir(text, "e.tir")


def errors(epilogue: str, header: str = "") -> list[str]:
    with pytest.raises(InputError) as info:
        parse(epilogue, header)
    return [f"{d.span.line}:{d.span.col}: {d.message}" for d in info.value.diagnostics]


# -- the .tir block ------------------------------------------------------------------------------------

def test_an_epilogue_round_trips_through_tir():
    for path in sorted(DATA.glob("*.tir")):
        graph = load_tir(path)
        assert graph.epilogue, path
        text = print_tir(graph)
        again = parse_tir(text)
        assert again == graph and print_tir(again) == text


def test_the_block_holds_scalars_ops_and_outputs():
    g = parse("epilogue {\n  scalar alpha : f32\n  x = mul acc, alpha : f32[128,128]\n  y = add x, bias : f16[128,128]\n"
              "  r = add m, m : f32[128]\n  output acc = y, twice_m = r\n}\n")
    e = g.epilogue
    assert [v.name for v in e.scalars] == ["alpha"] and e.scalars[0].kind == "scalar"
    assert [(op.name, op.opcode) for op in e.ops] == [("x", "mul"), ("y", "add"), ("r", "add")]
    assert e.outputs == (("acc", "y"), ("twice_m", "r")) and e.output_of("acc") == "y" and e.output_of("m") is None
    assert not g.ops[-1].name.startswith("x")  # the solver's ops are the loop's alone
    assert parse("").epilogue == parse_tir(LOOP).epilogue and not parse("").epilogue


@pytest.mark.parametrize("block,expected", [
    ("epilogue {\n  x = mul acc@1, m : f32[128,128]\n  output acc = x\n}\n",
     "14:11: 'acc@1': the epilogue runs once, after the loop"),
    ("epilogue {\n  x = mul s, m : f32[128,128]\n  output acc = x\n}\n",
     "14:11: the epilogue reads the carries' last values, inputs, scalars and its own results, but 's' is a body result"),
    ("epilogue {\n  x = mul y, m : f32[128,128]\n  y = mul acc, m : f32[128,128]\n  output acc = x\n}\n",
     "14:11: 'y' is used before it is defined"),
    ("epilogue {\n  x = mma acc, acc : f32[128,128]\n  output acc = x\n}\n",
     "14:7: opcode 'mma' is not allowed in the epilogue"),
    ("epilogue {\n  x = mull acc, m : f32[128,128]\n  output acc = x\n}\n",
     "14:7: unknown opcode 'mull' in the epilogue"),
    ("epilogue {\n  x = add acc, m : f32[64,128]\n  output acc = x\n}\n",
     "14:7: op 'x': operand 1 is f32[128,128], which does not broadcast"),
    ("epilogue {\n  x = add m, m : f32[128]\n  output acc = x\n}\n",
     "15:16: carry 'acc' is f32[128,128], but 'x' is f32[128]"),
    ("epilogue {\n  x = add acc, m : f32[128,64]\n  output other = x\n}\n", "14:7: op 'x'"),
    ("epilogue {\n  x = add m, m : f32[64]\n  output other = x\n}\n",
     "15:18: output 'other' is f32[64]: neither the shape of a carry, its rows nor the join of two"),
    ("epilogue {\n  x = add m, m : i32[128]\n  output other = x\n}\n", "15:18: output 'other' would be written in i32"),
    ("epilogue {\n  x = add m, m : f32[128]\n  output bias = x\n}\n", "15:10: output 'bias' names an input"),
    ("epilogue {\n  x = add m, m : f32[128]\n  output q = x, q = x\n}\n", "15:17: output 'q' is written twice"),
    ("epilogue {\n  x = add m, m : f32[128]\n}\n", "13:1: the epilogue writes nothing"),
    ("epilogue {\n  output acc = acc\n  x = add m, m : f32[128]\n}\n",
     "15:3: 'output' must be the last statement of the epilogue"),
    ("epilogue {\n  scalar s : f16\n  output acc = acc\n}\n", "14:14: a scalar is f32, i32 or i64"),
    ("epilogue {\n  output acc = acc\n", "13:1: the epilogue is not closed"),
    ("epilogue {\n  output acc = acc\n}\nepilogue {\n}\n", "16:1: text after the loop"),
])
def test_epilogue_errors_are_located(block, expected):
    assert any(e.startswith(expected) for e in errors(block)), errors(block)


def test_the_loop_cannot_read_the_epilogue():
    text = LOOP.replace("  yield", "  z = add e, m_new : f32[128]\n  yield") + \
        "epilogue {\n  scalar e : f32\n  output acc = acc\n}\n"
    with pytest.raises(InputError) as info:
        parse_tir(text, "e.tir")
    assert "the loop reads inputs, carries and its own results, but 'e' is a scalar" in str(info.value)


def test_argument_lines_name_what_each_kernel_argument_feeds():
    header = "argument A = a\nargument B = b\nargument BIAS = bias\nargument C = acc\nargument M\nargument s = alpha\n"
    g = parse("epilogue {\n  scalar alpha : f32\n  x = mul acc, alpha : f32[128,128]\n  output acc = x\n}\n", header)
    assert g.arguments == (("A", "a"), ("B", "b"), ("BIAS", "bias"), ("C", "acc"), ("M", None), ("s", "alpha"))
    assert parse_tir(print_tir(g)) == g
    assert errors("", "argument A = nothing\n") == ["2:14: undefined name 'nothing'"] or \
        errors("", "argument A = nothing\n")[0].startswith("2:14: argument 'A' feeds 'nothing'")
    assert errors("", "argument A = a\nargument B = a\n")[0].startswith("3:14: 'a' is fed by both 'A' and 'B'")
    assert errors("", "argument A\nargument A\n")[0].startswith("3:10: argument 'A' is listed twice")


# -- the CUDA ------------------------------------------------------------------------------------------

def _emit(name: str, gpu: str) -> str:
    machine = load_machine(gpu)
    return emit_cuda(solve(load_tir(DATA / f"{name}.tir"), machine, SolveOptions()), machine)


def test_an_emitted_epilogue_matches_golden(golden):
    golden("epilogue/gemm_ep.h100.cu", _emit("gemm_ep", "h100"))


def test_the_epilogue_runs_in_the_role_that_writes_the_output():
    src = _emit("gemm_ep", "h100")
    after = src[src.index("// ---- after the loop"):]
    body = after[:after.index("store_out_acc(")]
    # the ops in order, on the accumulator's last value, the scale read from global memory, the
    # bias as the tile's columns and the scalar from Args; then both outputs written
    assert re.search(r"op_mul\(x_ep, acc_n_final, twill::to_float<float>\(\(args\.sa ", body)
    assert "twill::Cols<128> bias_ep;" in body and "twill::global_to_frag(bias_ep" in body
    assert "twill::op_fma(y_ep, x_ep, static_cast<float>(args.alpha), bias_ep);" in body
    assert "twill::op_sigmoid(g_ep, u_ep);" in body and "twill::op_rowsum(rs_ep, y_ep);" in body
    assert "store_out_acc(sm, tm, args, tile, c__ep," in after and "store_out_rowsums(sm, tm, args, tile, rs_ep," in after
    assert "float alpha;  // epilogue scalar alpha" in src and "args.alpha = p.alpha;" in src


@pytest.mark.slow
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found")
# CI compiles one example per target (session 37, CI's time: 5-10 s of nvcc each); the other two are extended
@pytest.mark.parametrize("gpu, name", [("h100", "attn_ep"), ("b200", "gemm_ep"),
                                       pytest.param("h100", "gemm_ep", marks=pytest.mark.extended),
                                       pytest.param("b200", "attn_ep", marks=pytest.mark.extended)])
def test_emitted_epilogues_compile(name, gpu, tmp_path):
    src = tmp_path / f"{name}.cu"
    src.write_text(_emit(name, gpu))
    arch = load_machine(gpu).arch
    rc, err = nvcc_compile(src, ["-std=c++17", f"-gencode=arch=compute_{arch[3:]},code={arch}", "-DTWILL_MAIN",
                                 "-Xptxas", "-v"])
    assert rc == 0, err[-2000:]


def test_an_online_softmax_output_written_by_the_epilogue_is_not_normalized_twice():
    src = _emit("attn_ep", "h100")
    after = src[src.index("// ---- after the loop"):]
    assert "op_normalize" not in after  # the epilogue says what is written: O / l, once
    assert "twill::op_recip(o_inv, l_new_final);" in after and "store_out_lse(" in after


def test_an_fp8_product_the_epilogue_reads_is_descaled_before_its_ops():
    src = _emit("gemm_fp8_ep", "h100")
    after = src[src.index("// ---- after the loop"):]
    scale = after.index("twill::op_scale_by(acc_n_final, args.out_scale);")
    assert scale < after.index("twill::op_mul(x_ep, acc_n_final, 0.5f);")  # max(x, acc) is not linear in acc
    assert after.count("op_scale_by(") == 1 and "args.out_scale = p.out_scale;" in src


# -- the import ----------------------------------------------------------------------------------------

def _ops(graph) -> list[tuple]:
    return [(op.opcode, tuple(o.name for o in op.operands), str(op.type), dict(op.attrs).get("scalar"))
            for op in graph.epilogue.ops]


def test_the_fp8_gemm_imports_its_scales():
    g, _ = load_ttgir(CORPUS / "gemm_fp8_sm90.ttgir")
    assert [(v.name, str(v.type)) for v in g.inputs] == [("SCALE_A", "f32[1]"), ("SCALE_B", "f32[1]")]
    assert _ops(g) == [("mul", ("SCALE_A", "SCALE_B"), "f32[1]", None), ("mul", ("acc", "scale"), "f32[128,128]", None),
                       ("convert", ("out",), "f16[128,128]", None)]
    assert g.epilogue.outputs == (("acc", "out_convert"),)
    assert not dict(g.carries[0].attrs).get("output")  # the epilogue, not {output = f16}, says the dtype


def test_attention_imports_its_normalization_and_lse():
    g, _ = load_ttgir(CORPUS / "attn_causal_fwd_sm90.ttgir")
    ops = _ops(g)
    assert [o[0] for o in ops] == ["div", "convert", "mul", "log2", "add", "mul"]
    assert ops[0][1] == ("acc", "l_i") and ops[3][1] == ("l_i",) and ops[4][1] == ("m_i_scaled", "lse")
    # m is the row max of the unscaled scores (the import folds qk_scale into exp2_scale): the LSE
    # reads it in the kernel's units, times the kernel's own exp2 scale
    assert ops[2][1] == ("m_i", "exp2_scale") and [v.name for v in g.epilogue.scalars] == ["exp2_scale"]
    assert abs(ops[5][3] - 0.6931471805599453) < 1e-6  # log2 -> natural log
    assert [n for n, _ in g.epilogue.outputs] == ["acc", "LSE"]


def test_gelu_imports_as_elementwise_ops_with_a_bias_column():
    g, _ = load_ttgir(CORPUS / "gemm_bias_gelu_sm90.ttgir")
    assert [(v.name, str(v.type)) for v in g.inputs] == [("BIAS", "bf16[1,128]")]
    opcodes = [o[0] for o in _ops(g)]
    assert opcodes[:2] == ["convert", "add"] and "exp" in opcodes and "recip" in opcodes and opcodes[-1] == "convert"
    assert _ops(g)[-1][2] == "bf16[128,128]"


def test_the_dq_kernel_imports_its_scale_as_a_scalar():
    g, _ = load_ttgir(CORPUS / "attn_bwd_dq_sm90.ttgir")
    assert [(v.name, v.kind) for v in g.epilogue.scalars] == [("sm_scale", "scalar")]
    assert _ops(g) == [("mul", ("dq", "sm_scale"), "f32[128,128]", None)]
    assert dict(g.arguments)["sm_scale"] == "sm_scale" and dict(g.arguments)["DQ"] == "dq"


AFTER_CAUSAL = CORPUS.parent / "after" / "attn_causal_fwd_sm100.ttgir"  # the diagonal block unrolled after the loop


AFTER_WS = HERE / "data" / "ttgir" / "warp_specialized" / "after" / "fa_ws_triton39_sm100.ttgir"


def test_what_the_epilogue_cannot_express_is_a_located_warning():
    g, notes = load_ttgir(AFTER_WS, loop=0)  # (without --loop, the epilogue it cannot follow is an error)
    assert not g.epilogue
    found = [n for n in notes if "cannot follow" in n.message]
    assert found and found[0].span.line == 377 and "the graph has no epilogue" in found[0].message
    with pytest.raises(InputError, match="cannot follow"):
        load_ttgir(AFTER_WS, loop=0, strict=True)
    # sm_100's causal kernel after the pipeliner: its loop runs to the query tile's diagonal, which no
    # mask of the loop represents (the diagonal block is unrolled after it): refused even with --loop
    with pytest.raises(InputError, match="moves with the program id"):
        load_ttgir(AFTER_CAUSAL, loop=0)


def test_every_argument_is_listed_in_the_kernel_order():
    g, _ = load_ttgir(CORPUS / "gemm_fp8_sm90.ttgir")
    assert [a for a, _ in g.arguments] == ["A", "B", "C", "SCALE_A", "SCALE_B", "M", "N", "K", "stride_am",
                                           "stride_bn", "stride_cm"]
    assert dict(g.arguments) == {"A": "a", "B": "b", "C": "acc", "SCALE_A": "SCALE_A", "SCALE_B": "SCALE_B",
                                 "M": None, "N": None, "K": None, "stride_am": None, "stride_bn": None,
                                 "stride_cm": None}


# -- the binding of an imported kernel ------------------------------------------------------------------

def _binding(stem: str, gpu: str, tmp_path):
    graph, _ = load_ttgir(CORPUS / f"{stem}.ttgir")
    machine = load_machine(gpu)
    model = build_model(solve(graph, machine, SolveOptions()), machine)
    written = binding_files(model, str(tmp_path / f"{stem}.cu"))
    for path, text in written.items():
        Path(path).write_text(text)
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"b_{stem}", tmp_path / f"{stem}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return model, mod, written


def test_an_imported_kernels_binding_takes_its_arguments_in_order(tmp_path):
    model, mod, written = _binding("gemm_fp8_sm90", "h100", tmp_path)
    params = list(inspect.signature(mod.run).parameters)
    assert params[:11] == ["A", "B", "C", "SCALE_A", "SCALE_B", "M", "N", "K", "stride_am", "stride_bn", "stride_cm"]
    assert [(p.name, p.arg.name if p.arg else None) for p in parameters(Renderer(model))][:5] == \
        [("A", "A"), ("B", "B"), ("C", "C"), ("SCALE_A", "SCALE_A"), ("SCALE_B", "SCALE_B")]
    assert [a["name"] for a in mod.SPEC["args"] if a["output"]] == ["C"]
    M = lambda shape, dtype: mod.Meta(tuple(shape), dtype, "cuda:0", True, 1 << 20)  # noqa: E731
    given = {"A": M((256, 512), "float8_e4m3fn"), "B": M((384, 512), "float8_e4m3fn"),
             "SCALE_A": M((1,), "float32"), "SCALE_B": M((1,), "float32"), "C": None}
    plan = mod.resolve(mod.SPEC, given)
    assert (plan["tiles_m"], plan["tiles_n"], plan["iters"]) == (2, 3, 4) and plan["shapes"]["C"] == (256, 384)
    with pytest.raises(mod.ArgumentError, match=r"^SCALE_A: expected torch.float32"):
        mod.resolve(mod.SPEC, {**given, "SCALE_A": M((1,), "float16")})
    with pytest.raises(mod.ArgumentError, match=r"^B: gives L = 256, but A gives L = 512"):
        mod.resolve(mod.SPEC, {**given, "B": M((384, 256), "float8_e4m3fn")})
    with pytest.raises(mod.ArgumentError, match=r"^SCALE_B: missing"):
        mod.resolve(mod.SPEC, {k: v for k, v in given.items() if k != "SCALE_B"})


@pytest.mark.parametrize("stem,gpu,unwritten", [("gemm_w4a16_sm90", "h100", {"acc_even", "acc_odd"}),
                                                 ("gemm_w4a16_sm100", "b200", {"acc_even", "acc_odd"}),
                                                 ("attn_gqa_fwd_sm90", "h100", {"m_i", "l_i"})])
def test_a_carry_the_triton_kernel_never_stores_is_not_written(stem, gpu, unwritten, tmp_path):
    """{output = none}: the kernel writes what Triton's does (W4A16: C, the join of its two halves,
    not the halves beside it; attention: O, not its running max and sum) and the binding takes no
    tensor for the rest."""
    model, mod, written = _binding(stem, gpu, tmp_path)
    assert {c.name for c in model.graph.carries if not c.written} == unwritten
    outputs = {t.name for t in model.tensors if t.kind == "output"}
    assert outputs and not outputs & {f"out_{c}" for c in unwritten}
    assert [a["name"] for a in mod.SPEC["args"] if a["output"]] == (["C"] if "w4a16" in stem else ["O"])
    src = Renderer(model).render()
    assert "store_out_" in src and not any(f"store_out_{c}(" in src for c in unwritten)


def test_a_carry_named_by_an_output_line_is_written_whatever_it_says():
    graph = parse("epilogue {\n  out = mul acc, acc : f32[128,128]\n  output acc = out\n}\n")
    graph = parse_tir(re.sub(r"(carry acc +: f32\[128,128\] = 0)", r"\1 {output = none}", print_tir(graph)), "e.tir")
    assert not graph.values["acc"].written
    machine = load_machine("h100")
    model = build_model(solve(graph, machine, SolveOptions()), machine)
    assert {t.name for t in model.tensors if t.kind == "output"} == {"out_acc", "out_m"}


def test_an_imported_kernels_scalar_is_a_python_number(tmp_path):
    model, mod, written = _binding("attn_bwd_dq_sm90", "h100", tmp_path)
    params = list(inspect.signature(mod.run).parameters)
    assert params[:11] == ["Q", "K", "V", "DO", "LSE", "DELTA", "DQ", "stride_bh", "stride_n", "N_CTX", "sm_scale"]
    assert mod.SPEC["scalars"] == [{"name": "sm_scale", "type": "float"}]
    assert mod.check_scalars(mod.SPEC, [0.125]) == [0.125]
    for bad in ("0.1", None, True):
        with pytest.raises(mod.ArgumentError, match="^sm_scale: expected a Python float"):
            mod.check_scalars(mod.SPEC, [bad])
    entry = next(t for p, t in written.items() if p.endswith("_entry.cu"))
    assert "  double scalars[1];  // the epilogue's scalars" in entry
    assert "p.sm_scale = static_cast<float>(a.scalars[0]);" in entry


def test_a_split_graph_splits_its_epilogue_and_its_arguments_stay_whole():
    from twill.split import split_rows
    g, _ = load_ttgir(CORPUS / "attn_causal_fwd_sm90.ttgir")
    s = split_rows(g, 2)
    assert [n for n, _ in s.epilogue.outputs] == ["acc0", "acc1", "LSE0", "LSE1"]
    assert [op.opcode for op in s.epilogue.ops] == ["div", "div", "convert", "convert", "mul", "mul", "log2", "log2",
                                                    "add", "add", "mul", "mul"]
    assert all(op.type.shape[0] == 64 for op in s.epilogue.ops)
    assert dict(s.arguments)["O"] == "acc" and parse_tir(print_tir(s)) == s  # the binding's one O of both parts


def test_the_command_line_keeps_the_epilogue_from_graph_to_schedule_to_kernel(tmp_path):
    from click.testing import CliRunner
    from twill_cli.main import main
    run = CliRunner().invoke
    sched = tmp_path / "s.json"
    assert run(main, ["solve", str(DATA / "gemm_ep.tir"), "--gpu", "h100", "-q", "-o", str(sched)]).exit_code == 0
    assert "epilogue {" in __import__("json").loads(sched.read_text())["graph"]
    res = run(main, ["emit-cuda", str(sched), "-o", str(tmp_path / "k.cu"), "--binding", "torch"])
    assert res.exit_code == 0, res.output
    assert "store_out_rowsums(" in (tmp_path / "k.cu").read_text()
    assert "scalars=[alpha]" in (tmp_path / "k.py").read_text()


def test_import_warns_where_the_epilogue_is_beyond_it_and_strict_refuses():
    from click.testing import CliRunner
    from twill_cli.main import main
    res = CliRunner().invoke(main, ["import", str(AFTER_WS), "--loop", "0"])
    assert res.exit_code == 0 and "epilogue {" not in res.output
    refused = CliRunner().invoke(main, ["import", str(AFTER_CAUSAL)])  # the diagonal block's dots dropped
    assert refused.exit_code == 2 and "attn_causal_fwd_sm100.ttgir:339:5: error: 'ttng.tc_gen5_mma' outside any loop" \
        in refused.output and "Traceback" not in refused.output
    strict = CliRunner().invoke(main, ["import", str(AFTER_WS), "--loop", "0", "--strict"])
    assert strict.exit_code == 2 and "fa_ws_triton39_sm100.ttgir:377:15: error: 'arith.divf' after the loop" in strict.output
    assert "Traceback" not in strict.output
