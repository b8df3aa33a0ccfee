"""`twill import`: Triton TTGIR in, tile-loop graph out.

The three dumps in tests/data/ttgir/ are real TTGIR taken before Triton's pipeliner; their graphs are
checked op by op and against golden `.tir` files (``pytest --update-golden`` rewrites those). Small
hand-written snippets cover the rules one at a time: fusion, memory, names, loop choice, errors.
corpus/, triton36/ and warp_specialized/ hold kernels in both forms, before and after Triton's
pipeliner (Triton 3.9 and 3.6), whose graphs must be the same.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twill.costs import bind
from twill.errors import InputError
from twill.ir import Edge, TensorType
from twill.machine import load_machine
from twill.tir import parse_tir, print_tir
from twill.ttgir import import_ttgir, load_ttgir

DATA = Path(__file__).parent / "data" / "ttgir"
SAMPLES = sorted(p.stem for p in DATA.glob("*.ttgir"))
SM90 = DATA / "attn_fwd_tma_sm90.ttgir"
SM100 = DATA / "attn_fwd_sm100_ws.ttgir"
MATMUL = DATA / "matmul_sm90.ttgir"


def f32(*shape, space="reg"):
    return TensorType("f32", shape, space)


def f16(*shape, space="reg"):
    return TensorType("f16", shape, space)


def opcodes(graph) -> Counter:
    return Counter(op.opcode for op in graph.ops)


def edges(graph) -> set[tuple[str, str, int]]:
    return {(e.src, e.dst, e.distance) for e in graph.edges}


def kernel(body: str, args: str = "%n: i32", before: str = "", iter_args: str = "", types: str = "",
           step: str = "%c1") -> str:
    """A one-loop TTGIR function around `body` (the loop's ops, ending with its scf.yield), stepping
    by `step` (a value defined in `before` where not %c1)."""
    loop_results = f"%r:{iter_args.count('=')} = " if iter_args else ""
    head = f"iter_args({iter_args}) -> ({types}) " if iter_args else ""
    return f"""#blocked = #ttg.blocked<{{sizePerThread = [1, 8], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]}}>
#shared = #ttg.nvmma_shared<{{swizzlingByteWidth = 128, transposed = false, elementBitWidth = 16}}>
#smem = #ttg.shared_memory
module attributes {{"ttg.num-warps" = 4 : i32}} {{
  tt.func public @k({args}) {{
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #blocked>
{before}
    {loop_results}scf.for %i = %c0 to %n step {step} {head}: i32 {{
{body}
    }}
    tt.return
  }}
}}
"""


T = "tensor<64x64xf32, #blocked>"
T16 = "tensor<64x64xf16, #blocked>"
PTRS = "tensor<64x64x!tt.ptr<f16>, #blocked>"
TOY = kernel(f"""
      %x = tt.load %ptrs : {PTRS}
      %s = tt.splat %scale : f32 -> {T}
      %d = tt.dot %x, %w, %zero : {T16} * {T16} -> {T}
      %y = arith.mulf %d, %s : {T}
      %z = arith.addf %acc, %y : {T}
      %f = tt.foo %z : {T}
      %h = arith.truncf %f : {T} to {T16}
      tt.store %ptrs, %h : {PTRS}
      %o = arith.addi %off, %c1 : i32
      scf.yield %z, %o : {T}, i32""",
             args="%X: !tt.ptr<f16>, %n: i32, %scale: f32",
             before=f"""    %ptrs = tt.splat %X : !tt.ptr<f16> -> {PTRS}
    %w = tt.load %ptrs : {PTRS}""",
             iter_args="%acc = %zero, %off = %c0", types=f"{T}, i32")


# -- the real dumps -----------------------------------------------------------------------------------

@pytest.mark.parametrize("stem", SAMPLES)
def test_sample_matches_golden(stem, golden):
    graph, warnings = load_ttgir(DATA / f"{stem}.ttgir")
    assert [w for w in warnings if "--split-rows" not in (w.hint or "")] == []
    golden(f"ttgir/{stem}.tir", print_tir(graph))


@pytest.mark.parametrize("stem", SAMPLES)
def test_sample_round_trips_through_tir(stem):
    graph, _ = load_ttgir(DATA / f"{stem}.ttgir")
    assert parse_tir(print_tir(graph), graph.file) == graph


@pytest.mark.parametrize("stem, gpu", [("attn_fwd_tma_sm90", "h100"), ("matmul_sm90", "h100"),
                                       ("attn_fwd_sm100_ws", "b200")])
def test_sample_opcodes_are_described_by_the_machine(stem, gpu):
    graph, _ = load_ttgir(DATA / f"{stem}.ttgir")
    costs = bind(graph, load_machine(gpu))
    assert [c.name for c in costs] == [op.name for op in graph.ops]


def test_attention_sm90():
    g, _ = load_ttgir(SM90)
    assert g.kernel == "attn_fwd_desc" and g.file == str(SM90)
    assert [(v.name, v.type) for v in g.inputs] == [("q", f16(128, 128, space="smem"))]
    assert [(c.name, c.type, c.init) for c in g.carries] == [
        ("m_i", f32(128), "-inf"), ("l_i", f32(128), "0"), ("acc", f32(128, 128), "0")]
    assert opcodes(g) == Counter(load=2, mma=2, exp2=2, rowmax=1, rowsum=1, rescale=1)
    assert [(op.name, op.opcode, [str(o) for o in op.operands], op.type) for op in g.ops] == [
        ("k", "load", [], f16(128, 128, space="smem")),
        ("qk", "mma", ["q", "k"], f32(128, 128)),
        ("m_ij", "rowmax", ["qk", "m_i"], f32(128)),
        ("p", "exp2", ["qk", "m_ij"], f16(128, 128)),
        ("alpha", "exp2", ["m_i", "m_ij"], f32(128)),
        ("l_i_new", "rowsum", ["p", "l_i", "alpha"], f32(128)),
        ("acc_rescale", "rescale", ["acc", "alpha"], f32(128, 128)),
        ("v", "load", [], f16(128, 128, space="smem")),
        ("acc_new", "mma", ["p", "v", "acc_rescale"], f32(128, 128)),
    ]
    assert g.yields == (("m_i", "m_ij"), ("l_i", "l_i_new"), ("acc", "acc_new"))
    assert {("m_ij", "m_ij", 1), ("m_ij", "alpha", 1), ("l_i_new", "l_i_new", 1),
            ("acc_new", "acc_rescale", 1), ("qk", "m_ij", 0), ("alpha", "acc_rescale", 0),
            ("acc_rescale", "acc_new", 0), ("p", "acc_new", 0)} <= edges(g)
    assert Edge("m_ij", "alpha", 1, 0, carry="m_i") in g.edges
    # Each op points back at the TTGIR line it came from (the fused group's last op).
    assert g.op("qk").span.line == 55 and g.op("m_ij").span.line == 62 and g.op("acc_new").span.line == 84


def test_attention_sm100_keeps_tensor_memory():
    g, _ = load_ttgir(SM100)
    assert g.kernel == "attn_fwd"
    assert [(c.name, c.type, c.init) for c in g.carries] == [
        ("m_i", f32(128), "-inf"), ("l_i", f32(128), "0"), ("acc", f32(128, 128, space="tmem"), "0")]
    assert opcodes(g) == Counter(load=2, mma=2, exp2=2, rowmax=1, rowsum=1, rescale=1, convert=1)
    assert g.op("qk").type == f32(128, 128, space="tmem")  # tc_gen5_mma writes tensor memory
    assert [str(o) for o in g.op("m_ij").operands] == ["qk", "m_i"]  # tmem_load folds: reads qk in tmem
    # The rescale reads the accumulator in tensor memory and stores it back (its tmem_store folds in).
    assert (g.op("acc_rescale").opcode, g.op("acc_rescale").type) == ("rescale", f32(128, 128, space="tmem"))
    # P is read by the rowsum in registers and by the MMA from tensor memory: a real copy.
    assert (g.op("p_tmem").opcode, [str(o) for o in g.op("p_tmem").operands]) == ("convert", ["p"])
    assert g.op("p_tmem").type == f16(128, 128, space="tmem")
    assert [str(o) for o in g.op("acc_new").operands] == ["p_tmem", "v", "acc_rescale"]
    assert g.yields == (("m_i", "m_ij"), ("l_i", "l_i_new"), ("acc", "acc_new"))
    assert ("acc_new", "acc_rescale", 1) in edges(g)


def test_matmul():
    g, _ = load_ttgir(MATMUL)
    assert (g.kernel, g.inputs) == ("matmul", ())
    assert [(c.name, c.type, c.init) for c in g.carries] == [("acc", f32(128, 128), "0")]
    assert [(op.name, op.opcode, [str(o) for o in op.operands], op.type) for op in g.ops] == [
        ("a", "load", [], f16(128, 64, space="smem")),
        ("b", "load", [], f16(64, 128, space="smem")),
        ("acc_new", "mma", ["a", "b", "acc"], f32(128, 128)),
    ]
    assert edges(g) == {("a", "acc_new", 0), ("b", "acc_new", 0), ("acc_new", "acc_new", 1)}


def test_numeric_ssa_names_give_opcode_names():
    names: dict[str, str] = {}
    text = re.sub(r"%([A-Za-z_][A-Za-z0-9_.$]*)", lambda m: "%" + names.setdefault(m.group(1), str(len(names))),
                  SM90.read_text())
    g, _ = import_ttgir(text, "numeric.ttgir")
    named, _ = load_ttgir(SM90)
    assert [op.opcode for op in g.ops] == [op.opcode for op in named.ops]
    assert [op.name for op in g.ops] == ["load_0", "mma_0", "carry_0_new", "exp2_0", "exp2_1", "carry_1_new",
                                         "rescale_0", "load_1", "carry_2_new"]
    assert [v.name for v in g.inputs + g.carries] == ["input_0", "carry_0", "carry_1", "carry_2"]
    assert import_ttgir(text, "numeric.ttgir")[0] == g  # deterministic


# -- rules, one snippet each --------------------------------------------------------------------------

def test_toy_loop():
    g, warnings = import_ttgir(TOY, "toy.ttgir")
    assert [(v.name, v.type) for v in g.inputs] == [("w", f16(64, 64, space="smem")),
                                                    ("scale", TensorType("f32", (1,)))]  # the launch's scale
    assert [v.name for v in g.prologue.scalars] == ["scale"] and g.by_name["y"].operands[1].name == "scale"
    assert [(c.name, c.init) for c in g.carries] == [("acc", "0")]  # %off (an i32) is index arithmetic
    assert [(op.name, op.opcode, [str(o) for o in op.operands], op.type) for op in g.ops] == [
        ("x", "load", [], f16(64, 64, space="smem")),
        ("d", "mma", ["x", "w"], f32(64, 64)),  # the zero accumulator is dropped
        ("y", "mul", ["d", "scale"], f32(64, 64)),  # d * scale + acc: two ops (one add would drop the scale)
        ("z", "add", ["acc", "y"], f32(64, 64)),
        ("f", "tt_foo", ["z"], f32(64, 64)),
        ("h", "convert", ["f"], f16(64, 64)),  # truncf of a non-elementwise op stays a convert
        ("store_0", "store", ["h"], None),
    ]
    assert not g.op("store_0").has_result
    assert g.yields == (("acc", "z"),)
    assert [w.severity for w in warnings] == ["warning"]
    assert "unknown TTGIR op 'tt.foo'" in warnings[0].message and "'tt_foo'" in warnings[0].message
    assert (warnings[0].span.file, warnings[0].span.line) == ("toy.ttgir", TOY.splitlines().index(
        next(line for line in TOY.splitlines() if "tt.foo" in line)) + 1)
    assert "tt.foo %z" in warnings[0].span.text


def test_unknown_op_is_an_error_with_strict():
    with pytest.raises(InputError) as info:
        import_ttgir(TOY, "toy.ttgir", strict=True)
    [d] = info.value.diagnostics
    assert d.severity == "error" and "tt.foo" in d.message and d.span.line > 1
    assert info.value.exit_code == 2
    assert "toy.ttgir:" in info.value.render() and "^" in info.value.render()


FA3 = kernel(f"""
      %k0 = tt.descriptor_load %dk[%i, %c0] : !tt.tensordesc<64x64xf16, #shared> -> {T16}
      %k = ttg.local_alloc %k0 : ({T16}) -> !ttg.memdesc<64x64xf16, #shared, #smem>
      %0 = ttng.warp_group_dot %q, %k, %zero {{inputPrecision = 0 : i32, isAsync = true}} : !ttg.memdesc<64x64xf16, #shared, #smem> * !ttg.memdesc<64x64xf16, #shared, #smem> -> {T}
      %1:3 = ttng.warp_group_dot_wait %0, %q, %k {{pendings = 0 : i32}} : {T}, !ttg.memdesc<64x64xf16, #shared, #smem>, !ttg.memdesc<64x64xf16, #shared, #smem>
      %2 = tt.splat %sc : f32 -> {T}
      %3 = arith.mulf %1#0, %2 : {T}
      %4 = "tt.reduce"(%3) <{{axis = 1 : i32}}> ({{
      ^bb0(%a: f32, %b: f32):
        %r = arith.maximumf %a, %b : f32
        tt.reduce.return %r : f32
      }}) : ({T}) -> tensor<64xf32, #ttg.slice<{{dim = 1, parent = #blocked}}>>
      %5 = arith.maxnumf %m, %4 : tensor<64xf32, #ttg.slice<{{dim = 1, parent = #blocked}}>>
      %6 = tt.expand_dims %5 {{axis = 1 : i32}} : tensor<64xf32, #ttg.slice<{{dim = 1, parent = #blocked}}>> -> tensor<64x1xf32, #blocked>
      %7 = tt.broadcast %6 : tensor<64x1xf32, #blocked> -> {T}
      %8 = arith.subf %3, %7 : {T}
      %9 = math.exp2 %8 : {T}
      %10 = arith.truncf %9 : {T} to {T16}
      %11 = ttg.local_alloc %10 : ({T16}) -> !ttg.memdesc<64x64xf16, #shared, #smem>
      %12 = ttng.warp_group_dot %11, %k, %acc {{inputPrecision = 0 : i32}} : !ttg.memdesc<64x64xf16, #shared, #smem> * !ttg.memdesc<64x64xf16, #shared, #smem> -> {T}
      scf.yield %5, %12 : tensor<64xf32, #ttg.slice<{{dim = 1, parent = #blocked}}>>, {T}""",
             args="%dq: !tt.tensordesc<64x64xf16, #shared>, %dk: !tt.tensordesc<64x64xf16, #shared>, %n: i32, %sc: f32",
             step="%c64",  # the descriptor's row moves by the tile: the loop steps by it
             before=f"""    %c64 = arith.constant 64 : i32
    %ninf = arith.constant dense<0xFF800000> : tensor<64xf32, #ttg.slice<{{dim = 1, parent = #blocked}}>>
    %q0 = tt.descriptor_load %dq[%c0, %c0] : !tt.tensordesc<64x64xf16, #shared> -> {T16}
    %q = ttg.local_alloc %q0 : ({T16}) -> !ttg.memdesc<64x64xf16, #shared, #smem>""",
             iter_args="%m = %ninf, %acc = %zero",
             types=f"tensor<64xf32, #ttg.slice<{{dim = 1, parent = #blocked}}>>, {T}")


def test_async_dot_wait_scale_inlining_and_p_in_shared_memory():
    g, warnings = import_ttgir(FA3, "fa3.ttgir")
    assert warnings == []
    assert [(op.name, op.opcode, [str(o) for o in op.operands], op.type) for op in g.ops] == [
        ("k0", "load", [], f16(64, 64, space="smem")),
        ("mma_0", "mma", ["q0", "k0"], f32(64, 64)),  # the warp_group_dot_wait folds away
        # qk * scale feeds both the max and the subtraction: recomputed inside each, not an op
        ("m_new", "rowmax", ["mma_0", "m"], f32(64)),
        # exp2 makes f16 P (truncf merged) straight into shared memory (local_alloc folded)
        ("exp2_0", "exp2", ["mma_0", "m_new"], f16(64, 64, space="smem")),
        ("acc_new", "mma", ["exp2_0", "k0", "acc"], f32(64, 64)),
    ]
    assert [(c.name, c.init) for c in g.carries] == [("m", "-inf"), ("acc", "0")]


BLACKWELL = kernel("""
      %A = tt.load %A_ptr : tensor<64x64x!tt.ptr<f16>, #blocked>
      %A_sh = ttg.local_alloc %A : (tensor<64x64xf16, #blocked>) -> !ttg.memdesc<64x64xf16, #shared, #smem, mutable>
      %acc_tm, %acc_tok = ttng.tmem_alloc %acc : (tensor<64x64xf32, #blocked>) -> (!ttg.memdesc<64x64xf32, #tmem, #ttng.tensor_memory, mutable>, !ttg.async.token)
      %mma_tok = ttng.tc_gen5_mma %A_sh, %A_sh, %acc_tm[%acc_tok], %true, %true : !ttg.memdesc<64x64xf16, #shared, #smem, mutable>, !ttg.memdesc<64x64xf16, #shared, #smem, mutable>, !ttg.memdesc<64x64xf32, #tmem, #ttng.tensor_memory, mutable>
      %acc_res, %load_tok = ttng.tmem_load %acc_tm[%mma_tok] : !ttg.memdesc<64x64xf32, #tmem, #ttng.tensor_memory, mutable> -> tensor<64x64xf32, #blocked>
      scf.yield %acc_res : tensor<64x64xf32, #blocked>""",
                   args="%A_ptr: tensor<64x64x!tt.ptr<f16>, #blocked>, %n: i32",
                   before="    %true = arith.constant true",
                   iter_args="%acc = %zero", types=T).replace(
    "#smem = #ttg.shared_memory", "#smem = #ttg.shared_memory\n#tmem = #ttng.tensor_memory_encoding<blockM = 64, blockN = 64>")


def test_register_accumulator_copied_to_tensor_memory():
    g, _ = import_ttgir(BLACKWELL, "bw.ttgir")
    assert [(op.name, op.opcode, [str(o) for o in op.operands], op.type) for op in g.ops] == [
        ("A", "load", [], f16(64, 64, space="smem")),
        ("acc_tmem", "convert", ["acc"], f32(64, 64, space="tmem")),  # a carry in registers, each iteration
        ("mma_tok", "mma", ["A", "A", "acc_tmem"], f32(64, 64, space="tmem")),
    ]
    assert g.yields == (("acc", "mma_tok"),)


def test_old_dialect_spelling():
    old = (FA3.replace("ttg.", "triton_gpu.").replace("ttng.", "triton_nvidia_gpu.")
           .replace("!triton_gpu.memdesc", "!tt.memdesc"))
    assert import_ttgir(old, "fa3.ttgir")[0] == import_ttgir(FA3, "fa3.ttgir")[0]


def _reduction(combiner: str) -> str:
    return kernel(f"""
      %t = "tt.reduce"(%b) <{{axis = 1 : i32}}> ({{
      ^bb0(%u: f32, %v: f32):
        %mn = {combiner} %u, %v : f32
        tt.reduce.return %mn : f32
      }}) : ({T}) -> tensor<64xf32, #ttg.slice<{{dim = 1, parent = #blocked}}>>
      %e = tt.expand_dims %t {{axis = 1 : i32}} : tensor<64xf32, #ttg.slice<{{dim = 1, parent = #blocked}}>> -> tensor<64x1xf32, #blocked>
      %bb = tt.broadcast %e : tensor<64x1xf32, #blocked> -> {T}
      %nb = arith.divf %b, %bb : {T}
      scf.yield %nb : {T}""", iter_args="%b = %zero", types=T)


def test_reduction_it_cannot_name_is_generic():
    text = _reduction("arith.subf")  # a difference (not associative): no .tir opcode
    g, warnings = import_ttgir(text, "r.ttgir")
    assert [(op.name, op.opcode) for op in g.ops] == [("t", "tt_reduce"), ("nb", "div")]
    assert len(warnings) == 1 and "combiner" in warnings[0].message
    with pytest.raises(InputError):
        import_ttgir(text, "r.ttgir", strict=True)


def test_a_product_reduction_is_reduce_prod_along_its_axis():
    """Since session 42 (tl.cumprod's carry of its column tiles) a product has its opcode: it was generic."""
    g, warnings = import_ttgir(_reduction("arith.mulf"), "r.ttgir")
    assert [(op.name, op.opcode, op.attrs) for op in g.ops] == [("t", "reduce_prod", (("axis", 1),)),
                                                                 ("nb", "div", ())]
    assert not warnings


def test_a_min_reduction_is_reduce_min_along_its_axis():
    g, warnings = import_ttgir(_reduction("arith.minnumf"), "r.ttgir")
    assert [(op.name, op.opcode, op.attrs) for op in g.ops] == [("t", "reduce_min", (("axis", 1),)),
                                                                 ("nb", "div", ())]
    assert g.ops[0].type == f32(64) and not warnings


def test_carry_from_a_non_constant_is_an_error_at_the_loop():
    """A carry starting from a loaded value: the graph would start it from 0 (it used to, with a warning:
    heldout4's addmm then computed A @ B without beta * C), so the import stops at the loop."""
    text = kernel(f"""
      %y = arith.mulf %b, %b : {T}
      scf.yield %y : {T}""", before=f"    %x = tt.load %ptrs : {PTRS}\n    %x32 = arith.extf %x : {T16} to {T}",
                  args="%ptrs: tensor<64x64x!tt.ptr<f16>, #blocked>, %n: i32", iter_args="%b = %x32", types=T)
    with pytest.raises(InputError, match="carry 'b' starts from a value computed before the loop") as err:
        import_ttgir(text, "c.ttgir")
    assert "scf.for" in text.splitlines()[err.value.diagnostics[0].span.line - 1]


# -- choosing the loop --------------------------------------------------------------------------------

TWO_LOOPS = TOY.replace("    tt.return", f"""    %r2 = scf.for %j = %c0 to %n step %c1 iter_args(%b = %zero) -> ({T}) : i32 {{
      %nb = arith.subf %b, %b : {T}
      scf.yield %nb : {T}
    }}
    tt.return""")


def test_loop_choice():
    with pytest.raises(InputError) as err:  # two tile loops one after the other: neither is the whole kernel
        import_ttgir(TWO_LOOPS, "two.ttgir")
    (d,) = err.value.diagnostics
    lines = TWO_LOOPS.split("\n")
    assert d.span.line == next(k for k, line in enumerate(lines, 1) if "%r2 = scf.for" in line)
    assert "loop 1 would be left out" in d.message and "--loop 1" in d.hint
    first, notes = import_ttgir(TWO_LOOPS, "two.ttgir", loop=0)
    second, _ = import_ttgir(TWO_LOOPS, "two.ttgir", loop=1)
    assert len(first.ops) == 7  # the toy loop's
    assert [n.span.line for n in notes if "loop 1 is not imported" in n.message] == [d.span.line]
    assert [(op.name, op.opcode) for op in second.ops] == [("nb", "sub")]
    with pytest.raises(InputError, match=r"no loop 2; the file has 2 loops \(0\.\.1\)"):
        import_ttgir(TWO_LOOPS, "two.ttgir", loop=2)


def test_no_loop_is_an_error():
    with pytest.raises(InputError, match="no scf.for loop in any function"):
        import_ttgir("module {\n  tt.func @f() {\n    tt.return\n  }\n}\n", "f.ttgir")


# -- malformed input ----------------------------------------------------------------------------------

@pytest.mark.parametrize("old, new, message, line_of", [
    ("%z = arith.addf %acc, %y", "%z = arith.addf %acc, %nope", "undefined value '%nope'", "%nope"),
    ("%y = arith.mulf %d, %s", "%y = arith.mulf %d ~ %s", "unexpected character '~'", "~"),
    ("%d = tt.dot %x, %w, %zero :", "%d = tt.dot (%x, %w, %zero :", "never closed", "tt.dot ("),
    ("%x = tt.load %ptrs", "%x = 42 %ptrs", "expected an operation name", "= 42"),
    ("%o = arith.addi", "%o arith.addi", "expected '='", "%o arith.addi"),
    ('%h = arith.truncf %f : tensor<64x64xf32, #blocked> to',
     '%h = arith.truncf %f : tensor<64xbadxf32, #blocked> to', "unknown element type 'badxf32'", "64xbadxf32"),
    ("%x = tt.load %ptrs : tensor<64x64x", "%x = tt.load %ptrs : tensor<0x64x", "a dimension of 0", "0x64x"),
    ("scf.yield %z, %o :", "scf.yield %z :", "2 iter_args but its scf.yield gives 1 value", "scf.for"),
    ("%y = arith.mulf %d, %s", "%d = arith.mulf %d, %s", "'%d' is defined twice", "%d = arith.mulf"),
])
def test_malformed_input_is_a_located_error(old, new, message, line_of):
    assert old in TOY
    text = TOY.replace(old, new)
    with pytest.raises(InputError) as info:
        import_ttgir(text, "bad.ttgir")
    d = info.value.diagnostics[0]
    assert message in d.message
    assert d.span.file == "bad.ttgir" and d.span.line == next(
        i for i, line in enumerate(text.splitlines(), 1) if line_of in line)
    assert d.span.col >= 1 and d.span.text == text.splitlines()[d.span.line - 1]
    assert info.value.render().startswith(f"bad.ttgir:{d.span.line}:{d.span.col}: error: ")


def test_a_dump_with_a_line_cut_is_an_error_at_the_use():
    """Every path of the import (here a loop-free row kernel's, ttgir/rowprog.py) reads values the
    parser has checked: a definition cut from the dump is an error at its first use."""
    path = DATA / "heldout8" / "t36" / "prepipe" / "swiglu_fwd_sm90.ttgir"
    lines = path.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "= arith.truncf" in line)
    name = lines[cut].split("=")[0].strip()
    text = "".join(lines[:cut] + lines[cut + 1:])
    with pytest.raises(InputError) as info:
        import_ttgir(text, "cut.ttgir")
    d = info.value.diagnostics[0]
    assert d.message == f"use of undefined value '{name}'"
    assert name in d.span.text and d.span.text.index(name) == d.span.col - 1


def test_a_hand_edited_type_in_a_rewritten_kernel_is_an_error_at_its_op():
    """The row and flat-map rewrites read some ops' types as text (rowprog.search): a type edited
    away is an error at the op, not an AttributeError."""
    path = DATA / "heldout9" / "t36" / "prepipe" / "asin_sm100.ttgir"
    text = path.read_text()
    old = "tt.splat %x_ptr : !tt.ptr<f32> ->"
    assert old in text
    bad = text.replace(old, "tt.splat %x_ptr : 0 ->")
    with pytest.raises(InputError) as info:
        import_ttgir(bad, "edited.ttgir")
    d = info.value.diagnostics[0]
    assert d.message.startswith("'tt.splat': expected a pointer type")
    assert d.span.line == next(i for i, line in enumerate(bad.splitlines(), 1) if "tt.splat %x_ptr : 0" in line)


def test_unreadable_file(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load_ttgir(tmp_path / "missing.ttgir")


def _mutate(text: str, data) -> str:
    lines = text.split("\n")
    i = data.draw(st.integers(0, len(lines) - 1))
    kind = data.draw(st.sampled_from(["drop", "cut", "insert", "duplicate"]))
    if kind == "drop":
        del lines[i]
    elif kind == "cut":
        lines[i] = lines[i][: data.draw(st.integers(0, len(lines[i])))]
    elif kind == "insert":
        k = data.draw(st.integers(0, len(lines[i])))
        lines[i] = lines[i][:k] + data.draw(st.sampled_from(list("%<>{}()[],:=#!@^\"x0-"))) + lines[i][k:]
    else:
        lines.insert(i, lines[data.draw(st.integers(0, len(lines) - 1))])
    return "\n".join(lines)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_damaged_input_never_crashes(data):
    text = _mutate(data.draw(st.sampled_from([SM90.read_text(), SM100.read_text(), TOY, FA3])), data)
    try:
        import_ttgir(text, "damaged.ttgir")
    except InputError as exc:
        assert exc.render()


def test_whole_pass_dump_uses_the_ir_before_the_pipeliner():
    header = "// -----// IR Dump Before {} ({}) ('builtin.module' operation) //----- //"
    log = "\n".join([header.format("TritonGPUCoalesce", "tritongpu-coalesce"), TOY,
                     header.format("TritonGPUAssignLatencies", "tritongpu-assign-latencies"), SM90.read_text(),
                     header.format("TritonGPUScheduleLoops", "tritongpu-schedule-loops"), MATMUL.read_text()])
    g, _ = import_ttgir(log, "dump.txt")
    assert print_tir(g) == print_tir(load_ttgir(SM90)[0])
    offset = log.split("\n").index(SM90.read_text().split("\n")[0])  # spans still point into the log
    assert g.op("qk").span.line == 55 + offset and g.op("qk").span.file == "dump.txt"
    with pytest.raises(InputError, match="before the pipeliner"):
        import_ttgir(header.format("TritonGPUCoalesce", "tritongpu-coalesce") + "\n" + TOY, "dump.txt")


def test_a_triton_3_9_log_as_written_to_stderr():
    """Triton 3.9's MLIR_ENABLE_DUMP log, cut down to three of its copies (TTIR before inlining, the
    TTGIR before latency assignment, the one after it) and an internal pipeliner dump: the newer
    header spelling (`Before PASS: pass-name{options}`) and Python's warning lines first."""
    log = DATA / "matmul_sm90_triton39.log"
    assert "UserWarning" in log.read_text().split("\n")[0]
    g, warnings = load_ttgir(log)
    assert warnings == [] and [(op.name, op.opcode) for op in g.ops] == [("a", "load"), ("b", "load"), ("acc_new", "mma")]
    assert g.op("acc_new").span.line == 291  # the copy before tritongpu-assign-latencies, in the log's lines
    unknown = "// -----// IR Dump Before SomePass <some-pass> //----- //\n" + TOY
    with pytest.raises(InputError, match="headers twill cannot read"):
        import_ttgir(unknown, "dump.txt")


def test_yielded_conversion_merges_into_its_producer():
    h = "tensor<64x64xf16, #blocked>"
    text = kernel(f"""
      %e = arith.extf %a : {h} to {T}
      %y = math.exp2 %e : {T}
      %z = arith.truncf %y : {T} to {h}
      scf.yield %z : {h}""", before=f"    %h0 = arith.constant dense<1.000000e+00> : {h}",
                  iter_args="%a = %h0", types=h)
    g, warnings = import_ttgir(text, "y.ttgir")
    assert warnings == [] and [(c.name, c.type, c.init) for c in g.carries] == [("a", f16(64, 64), "1")]
    assert [(op.name, op.opcode, [str(o) for o in op.operands], op.type) for op in g.ops] == [
        ("y", "exp2", ["a"], f16(64, 64))]
    assert g.yields == (("a", "y"),)


def test_a_square_b_takes_its_orientation_from_the_transposes_it_is_seen_through():
    """A square b cannot tell emit-cuda whether the dot computes a @ b or a @ b^T: the importer
    writes `transpose_b` from the transposes between the load and the dot (K of Q K^T is loaded
    keys x D and read through `memdesc_trans`; V of P V is not), and emit-cuda then reads each as
    the dump says, whatever a's space. Shared-memory layout flags do not decide it (Triton sets
    `transposed` for its own reasons, fp8's K-major B among them). A non-square b (the GEMM's
    64x128) needs no attribute."""
    from twill.emit.model import mma_shape
    for path in (SM90, SM100):
        graph, _ = load_ttgir(path)
        mmas = [op for op in graph.ops if op.opcode == "mma"]
        assert [op.attr("transpose_b") for op in mmas] == [True, False]
        assert [mma_shape(graph, op).b_kmajor for op in mmas] == [True, False]
        flags = path.read_text().replace("transposed = true", "transposed = false")
        assert import_ttgir(flags, "flags.ttgir")[0] == graph
    text = MATMUL.read_text()
    flipped = text.replace("transposed = false", "transposed = true")
    graph, _ = import_ttgir(flipped, "flipped.ttgir")
    assert all(op.attr("transpose_b") is None for op in graph.ops)  # 64x128: the shape decides


# -- Triton 3.9's own dumps of kernels the samples above do not cover (tests/data/ttgir/triton39/;
# MLIR_ENABLE_DUMP, the copy before tritongpu-assign-latencies, sm_90) ------------------------------

T39 = DATA / "triton39"


ERRORS_39 = ("attn_causal", "mm_inloop_scale")  # a mask offset by the loop, a loaded scale: errors (below)


@pytest.mark.parametrize("path", [p for p in sorted(T39.glob("*.ttgir")) if p.stem not in ERRORS_39],
                         ids=lambda p: p.stem)
def test_triton_3_9_dumps_round_trip_through_tir(path):
    graph, _ = load_ttgir(path, loop=2 if path.stem == "layernorm" else None)  # its 3 loops: mean, var, y
    assert graph.ops and parse_tir(print_tir(graph), "x.tir") == graph


def test_column_major_operands_are_typed_as_they_lie_in_memory():
    """B (or A) loaded through pointers whose addresses run down the columns (Triton's coalesced
    `order = [0, 1]`) lies column-major in memory: its .tir type is that layout (b N x K, a K x M,
    as a TMA box of it would be), so emit-cuda reads it transposed; a square one says so in
    `transpose_b`. fp8's B is K x N in memory although Triton's shared layout says `transposed`: the
    import reads it so, and since the tensor core reads fp8 K-major only, types it as the kernel must read
    it, N x K with `{transposed = true}` (ttgir/kmajor.py: the binding copies it transposed), and says so in
    `transpose_b`, true."""
    from twill.emit.model import mma_shape
    cases = {"mm_bcol": ((128, 64), (128, 64), True, True), "mm_acol": ((64, 128), (64, 128), False, False),
             "mm_bcol_sq": ((128, 64), (64, 64), True, True), "matmul_f16": ((128, 64), (64, 128), True, False)}
    for stem, (a_shape, b_shape, a_kmajor, b_kmajor) in cases.items():
        graph, _ = load_ttgir(T39 / f"{stem}.ttgir")
        mma = next(op for op in graph.ops if op.opcode == "mma")
        assert (graph.op("a").type.shape, graph.op("b").type.shape) == (a_shape, b_shape), stem
        shape = mma_shape(graph, mma)
        assert (shape.a_kmajor, shape.b_kmajor) == (a_kmajor, b_kmajor), stem
    assert load_ttgir(T39 / "mm_bcol_sq.ttgir")[0].op("acc_new").attr("transpose_b") is True
    fp8, _ = load_ttgir(T39 / "mm_fp8.ttgir")
    assert "transposed = true" in (T39 / "mm_fp8.ttgir").read_text()
    assert fp8.op("acc_new").attr("transpose_b") is True and fp8.op("b").attr("transposed") is True
    (mma,) = [op for op in fp8.ops if op.opcode == "mma"]
    assert mma_shape(fp8, mma).b_kmajor  # K-major: what wgmma of e4m3 reads


def test_the_k_loop_inside_a_persistent_loop_is_the_default():
    graph, warnings = load_ttgir(T39 / "mm_persistent2.ttgir")
    assert [op.opcode for op in graph.ops] == ["load", "load", "mma"]
    (note,) = warnings  # said, at the outer loop: the inner loop is the graph
    assert note.severity == "note" and "loop 0 runs loop 1 once per trip" in note.message
    assert graph.carries[0].attrs == (("output", "f16"),)  # truncated to f16 after the K loop
    with pytest.raises(InputError, match="runs over a range that moves with the program id") as err:
        load_ttgir(T39 / "mm_persistent2.ttgir", loop=0)  # the loop over tiles, from program_id(0): no graph loop
    assert err.value.diagnostics[0].span.line == 40 and "%start_pid depends on program_id(0)" in err.value.diagnostics[0].message
    with pytest.raises(InputError, match="the file has 2 loops"):
        load_ttgir(T39 / "mm_persistent2.ttgir", loop=2)


def test_a_mask_offset_by_the_loop_is_a_located_error_not_dropped():
    """A one-loop causal kernel's additive mask compares the query rows (program id) with the keys
    (the induction variable): not a mask of the tile's own indices, so an error at the op that reads it."""
    with pytest.raises(InputError, match="element indices that the import cannot express") as err:
        load_ttgir(T39 / "attn_causal.ttgir")
    assert err.value.diagnostics[0].span.line == 96


def test_a_scalar_loaded_in_the_loop_is_an_error_at_the_op_that_reads_it():
    """`acc += dot * tl.load(SA + k // 64)`: the graph has no operand for a loaded scalar, so the import
    stops at the multiply (it used to write `mul` without its y, which emit-cuda then refused)."""
    with pytest.raises(InputError, match="neither a constant nor one of the kernel's float arguments") as err:
        load_ttgir(T39 / "mm_inloop_scale.ttgir")
    assert err.value.diagnostics[0].span.line == 75


def test_the_dtype_an_accumulator_is_truncated_to_after_the_loop_is_its_output():
    for path, carry in ((T39 / "matmul_f16.ttgir", "acc"), (SM90, "acc"), (SM100, "acc")):
        graph, _ = load_ttgir(path)
        written = graph.epilogue.output_of(carry)  # O / l in the epilogue, written in f16; else {output = f16}
        dtype = graph.epilogue.by_name[written].type.dtype if written else graph.values[carry].output_dtype
        assert dtype == "f16", path
    graph, _ = load_ttgir(SM90)
    assert {c.name: c.output_dtype for c in graph.carries}["m_i"] == "f32"  # only O is truncated
    assert {c.name: c.written for c in graph.carries} == {"m_i": False, "l_i": False, "acc": True}  # as Triton stores


def test_rows_that_triton_runs_on_two_warpgroups_split_into_two_parts():
    """Triton's num_warps = 8 runs a 128-row tile's rows on two warpgroups (warpsPerCTA = [8, 1]):
    the import says so, and split_rows gives the graph FA3's halves: Q, S, P, the row statistics
    and O split, K and V shared. For the contract's simple attention that is the FA3 example."""
    from twill.fileio import load_graph
    from twill.split import split_rows
    graph, warnings = load_ttgir(SM90)
    assert [w.hint for w in warnings if "--split-rows" in (w.hint or "")] == [
        "--split-rows 2 imports them as 2 independent parts of 64 rows, as Triton runs them (FA3's sub-tiling)"]
    halves = split_rows(graph, 2)
    assert [v.name for v in halves.inputs] == ["q0", "q1"] and len(halves.carries) == 6
    assert [op.name for op in halves.ops if op.opcode == "load"] == ["k", "v"]
    assert {op.type.shape[0] for op in halves.ops if op.opcode != "load" and op.type} == {64}
    simple = split_rows(load_graph(Path(__file__).parent.parent / "examples" / "attention_fwd_simple.tir"), 2)
    fa3 = load_graph(Path(__file__).parent.parent / "examples" / "attention_fwd_hopper.tir")
    assert sorted((op.opcode, str(op.type)) for op in simple.ops) == sorted((op.opcode, str(op.type)) for op in fa3.ops)
    assert len(simple.edges) == len(fa3.edges)
    with pytest.raises(InputError, match="cannot be split into 3 parts"):
        split_rows(graph, 3)


def test_a_split_gemm_solves_where_the_whole_tile_cannot(tmp_path):
    """A 128x256 GEMM tile (Triton's usual Hopper config, num_warps = 8) needs 256 accumulator
    registers per thread on one warpgroup: no schedule. Split, it is CUTLASS's cooperative kernel."""
    from click.testing import CliRunner
    from twill_cli.main import main
    src = T39 / "mm_bf16_128x256x64_w8.ttgir"  # Triton 3.9's dump of a bf16 128x256x64 matmul, num_warps = 8
    whole = CliRunner().invoke(main, ["solve", str(src), "--gpu", "h100", "-q", "--max-ii", "300"])
    assert whole.exit_code == 1, whole.output
    split = CliRunner().invoke(main, ["solve", str(src), "--gpu", "h100", "-q", "--split-rows", "2", "--format", "json"])
    assert split.exit_code == 0, split.output
    import json
    roles = json.loads(split.stdout)["warps"]
    assert sorted(len([o for o in r["ops"] if o.startswith("acc")]) for r in roles if r["warps"] == 4) == [1, 1]


# -- both forms of a kernel: before and after Triton's pipeliner -------------------------------------

CORPUS = DATA / "corpus"
T36 = DATA / "triton36"
# The causal kernel's two loops merge into one masked loop (merge.py) in both forms on sm_90. On sm_100
# the pipeliner unrolls the one-trip diagonal loop: after it, loop 0 is the unmasked loop alone.
UNROLLED_AFTER = {"attn_causal_fwd_sm100"}


# Blackwell's warp-specialized attention gives its K load the location of `k.T` in `qk = tl.dot(q, k.T)`:
# the load is named qk there, k before the pipeliner. The graphs are compared with names set aside.
RENAMED = {"fa_ws_triton39_sm100", "fa_ws_triton36_sm100", "pmm_ws_triton39_sm100"}  # B's load: loc of the dot


def canonical(graph) -> str:
    """The graph's .tir text with every name replaced by its place: inputs i0.., carries c0.., ops o0.."""
    from dataclasses import replace as rep
    names = {v.name: f"i{k}" for k, v in enumerate(graph.inputs)}
    names.update({v.name: f"c{k}" for k, v in enumerate(graph.carries)})
    names.update({op.name: f"o{k}" for k, op in enumerate(graph.ops)})
    ops = tuple(rep(op, name=names[op.name], operands=tuple(rep(o, name=names[o.name]) for o in op.operands))
                for op in graph.ops)
    return print_tir(rep(graph, inputs=tuple(rep(v, name=names[v.name]) for v in graph.inputs),
                         carries=tuple(rep(v, name=names[v.name]) for v in graph.carries), ops=ops,
                         yields=tuple((names[c], names[r]) for c, r in graph.yields),
                         arguments=tuple((a, names.get(t, t)) for a, t in graph.arguments),
                         epilogue=rep(graph.epilogue, ops=tuple(rep(op, operands=tuple(
                             rep(o, name=names.get(o.name, o.name)) for o in op.operands))
                             for op in graph.epilogue.ops))))


def _pairs(root):
    return [p.stem for p in sorted((root / "after").glob("*.ttgir"))]


WS = DATA / "warp_specialized"


@pytest.mark.parametrize("root,stem", [(r, s) for r in (CORPUS, T36, WS) for s in _pairs(r)],
                         ids=lambda x: x if isinstance(x, str) else x.name)
def test_both_forms_of_a_kernel_import_to_the_same_graph(root, stem):
    if stem in UNROLLED_AFTER:  # the import refuses it, at the unrolled block's first dot
        with pytest.raises(InputError) as info:
            load_ttgir(root / "after" / f"{stem}.ttgir")
        assert any("outside any loop is not imported" in d.message for d in info.value.diagnostics)
        assert all("before Triton's pipeliner" in d.hint for d in info.value.diagnostics if "outside any loop" in d.message)
        assert any("moves with the program id" in d.message for d in info.value.diagnostics)  # the loop to the diagonal
        return
    try:
        after, after_notes = load_ttgir(root / "after" / f"{stem}.ttgir")
    except InputError as e:  # an epilogue the import cannot follow: refused unless the loop is named
        assert all("would store the carries' last values" in d.message for d in e.diagnostics), e
        after, after_notes = load_ttgir(root / "after" / f"{stem}.ttgir", loop=0)
    before, before_notes = load_ttgir(root / "prepipe" / f"{stem}.ttgir")
    if not after.epilogue and before.epilogue:
        # after the pipeliner, what a warp-specialized kernel stores comes out of its partitions, which
        # the epilogue's import does not follow: it says so, and the loops must still agree
        assert any("the graph has no epilogue" in n.message for n in after_notes)
        before = replace(before, epilogue=after.epilogue, arguments=after.arguments, knobs=after.knobs,
                         inputs=after.inputs,
                         carries=tuple(replace(c, attrs=a.attrs) for c, a in zip(before.carries, after.carries)))
    if stem in RENAMED:
        assert canonical(after) == canonical(before)
    else:
        assert print_tir(after) == print_tir(before)  # the same .tir text, names included
    ops = {op.opcode for op in after.ops}
    assert "mma" in ops and not any(o.startswith(("ttg_", "ttng_")) for o in ops)  # no pipelining op left

    def unknown_start(notes):
        return sum("starts from" in n.message for n in notes)
    assert unknown_start(after_notes) == unknown_start(before_notes)  # no peeled value taken for a start


def test_the_pipelined_attention_loop_gets_its_recurrences_back():
    """sm_100 attention after the pipeliner: S, P, the correction and K/V are carried a stage ahead
    and m starts from the first iteration's max, peeled before the loop; the graph is the loop."""
    graph, _ = load_ttgir(CORPUS / "after" / "attn_gqa_fwd_sm100.ttgir")
    assert [(c.type, c.init) for c in graph.carries] == [(f32(128), "-inf"), (f32(128), "0"),
                                                        (f32(128, 128, space="tmem"), "0")]
    assert [op.opcode for op in graph.ops] == ["load", "mma", "rowmax", "exp2", "exp2", "rowsum", "rescale",
                                               "load", "convert", "mma"]


def test_two_loops_in_sequence_are_an_error_at_the_loop_left_out():
    path = DATA / "triton39" / "layernorm.ttgir"  # a mean, a variance and an output pass: no mask pair
    with pytest.raises(InputError) as err:
        load_ttgir(path)
    # one error per loop left out (the variance loop's `tl.where(cols < N, x - mean, 0.)` is the zero fill of
    # its partial last tile since one row a program is imported as 64 rows a CTA, ttgir/rowprog.py)
    ds = err.value.diagnostics
    assert not [d for d in ds if "element indices" in d.message]
    left = [d for d in ds if "would be left out" in d.message]
    assert [d.message.split(":")[0] for d in left] == ["loop 0 would be left out", "loop 1 would be left out"]
    d = left[0]
    assert "scf.for" in d.span.text and "--loop" in d.hint
    _, notes = load_ttgir(path, loop=2)
    assert [n.span.line for n in notes if "loop 0 is not imported" in n.message] == [d.span.line]
    # the variance loop alone: x - mean past N is 0 (the select's fill: a tail_mask of x_sub = sub x, mean)
    graph, _ = load_ttgir(path, loop=1)
    assert [op.opcode for op in graph.ops] == ["load", "sub", "tail_mask", "mul", "rowsum"]


@pytest.mark.parametrize("form", ["prepipe", "after"])
@pytest.mark.parametrize("root", [CORPUS, T36], ids=["triton39", "triton36"])
def test_the_causal_pair_is_one_masked_loop_in_both_forms(root, form):
    """sm_90: the off-diagonal loop and the masked diagonal loop are one loop with `causal_mask`,
    also after the pipeliner (each loop pipelined its own way: the tile graphs are compared), and
    --loop naming either loop gives it."""
    path = root / form / "attn_causal_fwd_sm90.ttgir"
    graph, _ = load_ttgir(path)
    assert [op.opcode for op in graph.ops].count("causal_mask") == 1
    assert [c.init for c in graph.carries] == ["-inf", "0", "0"]  # the first loop's inits
    assert print_tir(load_ttgir(path, loop=0)[0]) == print_tir(load_ttgir(path, loop=1)[0]) == print_tir(graph)


def test_the_sm100_causal_pair_hands_its_accumulator_over_in_tensor_memory():
    """sm_100 before the pipeliner: the second loop has tensor-memory buffers of its own, the first's
    accumulator copied into it; merged, the accumulator starts from the first loop's zero."""
    graph, notes = load_ttgir(CORPUS / "prepipe" / "attn_causal_fwd_sm100.ttgir")
    assert [op.opcode for op in graph.ops].count("causal_mask") == 1
    assert [(c.name, c.init, c.type.space) for c in graph.carries] == [
        ("m_i", "-inf", "reg"), ("l_i", "0", "reg"), ("acc", "0", "tmem")]
    assert not any("starts from" in n.message for n in notes)


def test_loops_that_differ_by_more_than_a_mask_stay_two_loops():
    """A diagonal loop whose exponential is another function computes something else: not merged."""
    path = CORPUS / "prepipe" / "attn_causal_fwd_sm90.ttgir"
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    second = max(i for i, ln in enumerate(lines) if "scf.for" in ln)
    k = next(i for i in range(second, len(lines)) if "math.exp2" in lines[i])
    lines[k] = lines[k].replace("math.exp2", "math.exp")
    with pytest.raises(InputError) as err:  # loop 0 runs to the diagonal with no mask saying so, loop 1's
        import_ttgir("".join(lines), "two.ttgir")  # band is not covered by its one block: each refused
    assert [d.span.line for d in err.value.diagnostics] == sorted(d.span.line for d in err.value.diagnostics)
    assert any("moves with the program id" in d.message for d in err.value.diagnostics)
    assert any("does not visit every key" in d.message or "element indices" in d.message for d in err.value.diagnostics)


@pytest.mark.parametrize("root", [CORPUS, T36])
def test_tile_work_after_the_loop_is_an_error_unless_a_loop_is_named(root):
    """Triton unrolls the causal kernel's one-trip diagonal loop on sm_100: its mmas follow the loop.
    The import chose the loop, so leaving them out would compute part of the kernel: an error at the
    first of them (nothing silently dropped); with --loop the user chose, and it is a warning."""
    path = root / "after" / "attn_causal_fwd_sm100.ttgir"
    with pytest.raises(InputError) as info:
        load_ttgir(path)
    (d,) = [d for d in info.value.diagnostics if "outside any loop" in d.message]  # (and the epilogue's max)
    assert d.severity == "error" and "'ttng.tc_gen5_mma' outside any loop is not imported" in d.message
    assert d.span.line == {CORPUS: 339, T36: 337}[root] and "--loop N" in d.hint
    (g,) = [d for d in info.value.diagnostics if "moves with the program id" in d.message]  # and the loop's range
    assert g.span.line == 198 and "upper bound" in g.message and "program_id(0)" in g.message
    # --loop 0 takes the loop alone; it runs to the query tile's diagonal, which no mask of it says: an
    # error too (before session 27 a warning about the dots only, the graph's loop over every key)
    with pytest.raises(InputError, match="moves with the program id"):
        load_ttgir(path, loop=0)


@pytest.mark.parametrize("path", [CORPUS / "prepipe" / "ssd_chunk_scan_sm90.ttgir", CORPUS / "after" / "ssd_chunk_scan_sm100.ttgir",
                                  DATA / "triton36" / "after" / "ssd_chunk_scan_sm100.ttgir"])
def test_the_in_chunk_mask_is_a_mask_op_of_row_and_column_indices(path):
    """SSD's `where(t[:, None] >= t[None, :], cum[:, None] - cum[None, :], -inf)`: kept where
    1 * r - 1 * c + 0 >= 0, else -inf, between the subtraction and the exp that read it; no warning."""
    graph, notes = load_ttgir(path)
    (mask,) = [op for op in graph.ops if op.opcode == "mask"]
    assert mask.attrs == (("pred", "ge"), ("rows", 1), ("cols", -1), ("offset", 0), ("fill", float("-inf")))
    assert graph.op(mask.operands[0].name).opcode == "sub" and mask.type == f32(64, 64)
    assert [op.opcode for op in graph.ops if mask.name in [o.name for o in op.operands]] == ["exp"]
    assert not [n for n in notes if "indices" in n.message]


def test_an_index_mask_follows_constants_coefficients_and_a_negated_select():
    """`where(c * 2 > r + 8, -inf, s)`: the select keeps s where the comparison fails, so the mask
    is `le` of -r + 2c - 8 (the held-out banded softmax)."""
    graph, _ = load_ttgir(HELDOUT / "banded_softmax_gemm_sm90.ttgir")
    (mask,) = [op for op in graph.ops if op.opcode == "mask"]
    assert dict(mask.attrs) == {"pred": "le", "rows": -1, "cols": 2, "offset": -8, "fill": float("-inf")}


def test_a_mask_of_two_tiles_and_an_and_of_masks():
    """select(mask, a, b) of two tiles is `mask a, b`; an andi of two masks is no one comparison:
    an error at the select that reads it."""
    rows = "tensor<64xi32, #ttg.slice<{dim = 1, parent = #blocked}>>"
    cols = "tensor<64xi32, #ttg.slice<{dim = 0, parent = #blocked}>>"
    I2 = "tensor<64x64xi32, #blocked>"
    B = "tensor<64x64xi1, #blocked>"
    before = f"""
    %r = tt.make_range {{end = 64 : i32, start = 0 : i32}} : {rows}
    %c = tt.make_range {{end = 64 : i32, start = 0 : i32}} : {cols}
    %re = tt.expand_dims %r {{axis = 1 : i32}} : {rows} -> tensor<64x1xi32, #blocked>
    %ce = tt.expand_dims %c {{axis = 0 : i32}} : {cols} -> tensor<1x64xi32, #blocked>
    %rb = tt.broadcast %re : tensor<64x1xi32, #blocked> -> {I2}
    %cb = tt.broadcast %ce : tensor<1x64xi32, #blocked> -> {I2}
    %m = arith.cmpi slt, %rb, %cb : {I2}
    %m2 = arith.cmpi ne, %rb, %cb : {I2}
    %both = arith.andi %m, %m2 : {B}"""
    def body(cond):
        return f"""
      %t = arith.addf %b, %b : {T}
      %s = arith.select {cond}, %t, %b : {B}, {T}
      scf.yield %s : {T}"""
    g, notes = import_ttgir(kernel(body("%m"), before=before, iter_args="%b = %zero", types=T), "m.ttgir")
    (mask,) = [op for op in g.ops if op.opcode == "mask"]
    assert dict(mask.attrs) == {"pred": "lt", "rows": 1, "cols": -1, "offset": 0} and len(mask.operands) == 2
    with pytest.raises(InputError, match="element indices") as err:
        import_ttgir(kernel(body("%both"), before=before, iter_args="%b = %zero", types=T), "m.ttgir")
    assert "arith.select" in err.value.diagnostics[0].message


def test_a_scan_and_a_reduction_to_a_scalar():
    graph, _ = load_ttgir(CORPUS / "prepipe" / "ssd_chunk_scan_sm90.ttgir")
    by_name = {op.name: op for op in graph.ops}
    assert (by_name["cum"].opcode, by_name["cum"].attrs, by_name["cum"].type) == ("cumsum", (("axis", 0),), f32(64))
    assert (by_name["total"].opcode, by_name["total"].type) == ("reduce_sum", f32(1))  # a scalar: one element


@pytest.mark.parametrize("edit,message", [
    (lambda t: t.replace("      scf.yield %acc_38 : tensor<128x128xf32, #mma> loc(#loc2)\n", ""), "no scf.yield"),
    (lambda t: t.replace("-> tensor<128x128xf32, #mma> loc(#loc52)", "-> tensor<128xf32, #mma> loc(#loc52)"),
     "must make a 2-D tile"),
])
def test_a_damaged_loop_is_a_located_error(edit, message):
    text = MATMUL.read_text()
    damaged = edit(text)
    assert damaged != text
    with pytest.raises(InputError, match=message) as err:
        import_ttgir(damaged, "m.ttgir")
    assert err.value.diagnostics[0].span.line > 1


def test_thousands_of_nested_loops_are_a_located_error():
    n = 3000
    text = ("module {\n tt.func @k(%n: i32) {\n %c0 = arith.constant 0 : i32\n"
            + "".join(f"scf.for %i{i} = %c0 to %n step %c0 : i32 {{\n" for i in range(n)) + "}\n" * n
            + "tt.return\n }\n}\n")
    with pytest.raises(InputError, match="nested more than") as err:
        import_ttgir(text, "deep.ttgir")
    assert err.value.diagnostics[0].span.line > 3


def test_a_warp_specialized_loop_is_one_loop_again():
    """The partitions of a `ttg.warp_specialize` each hold a copy of the K loop (TMA loads in one, the
    mma in the other): merged, in source order, the loads come before the mma that reads them."""
    graph, notes = load_ttgir(WS / "after" / "mm_ws_triton39_sm100.ttgir")
    assert [op.opcode for op in graph.ops] == ["load", "load", "mma"]
    assert [(c.name, c.init, c.attrs) for c in graph.carries] == [("acc", "0", (("output", "f16"),))]
    assert not notes


def test_a_row_vector_broadcast_over_rows_is_typed_one_by_n():
    """`bias[None, :]` (expand_dims axis 0) is one value per column: T[1,N], not the T[M] of a row max."""
    vec = "tensor<64xf32, #ttg.slice<{dim = 0, parent = #blocked}>>"
    ptrs = "tensor<64x!tt.ptr<f32>, #ttg.slice<{dim = 0, parent = #blocked}>>"
    text = kernel(f"""
      %bias = tt.load %bp : {ptrs}
      %e = tt.expand_dims %bias {{axis = 0 : i32}} : {vec} -> tensor<1x64xf32, #blocked>
      %bb = tt.broadcast %e : tensor<1x64xf32, #blocked> -> {T}
      %nb = arith.addf %b, %bb : {T}
      scf.yield %nb : {T}""", args="%n: i32, %bp: " + ptrs, iter_args="%b = %zero", types=T)
    g, _ = import_ttgir(text, "c.ttgir")
    assert [(op.name, op.opcode, op.type) for op in g.ops] == [
        ("bias", "load", TensorType("f32", (1, 64), "smem")), ("nb", "add", f32(64, 64))]


def test_a_rank1_tile_read_per_row_and_per_column_gets_a_column_copy():
    """SSD's `cum[:, None] - cum[None, :]`: cum stays f32[64] (per row) and the column reads take a
    copy computed in column form from the vector in shared memory: convert, then cumsum along axis 1."""
    ssd, _ = load_ttgir(CORPUS / "prepipe" / "ssd_chunk_scan_sm90.ttgir")
    ops = {op.name: op for op in ssd.ops}
    assert ops["cum"].type == f32(64) and ops["cum"].attrs == (("axis", 0),)
    assert (ops["a_col"].opcode, [o.name for o in ops["a_col"].operands], ops["a_col"].type) == \
        ("convert", ["a"], f32(1, 64))
    assert (ops["cum_col"].opcode, ops["cum_col"].attrs, ops["cum_col"].type) == ("cumsum", (("axis", 1),), f32(1, 64))
    assert [o.name for o in ops["seg"].operands] == ["cum", "cum_col"]
    assert [o.name for o in ops["w"].operands] == ["total", "cum"]  # the per-row reads keep cum


def test_a_row_reduction_read_per_column_too_is_a_located_error():
    """A row max read both ways has no column form from shared memory: an error at the reading op."""
    vec = "tensor<64xf32, #ttg.slice<{dim = 1, parent = #blocked}>>"
    cvec = "tensor<64xf32, #ttg.slice<{dim = 0, parent = #blocked}>>"
    text = kernel(f"""
      %m = "tt.reduce"(%b) <{{axis = 1 : i32}}> ({{
      ^bb0(%x: f32, %y: f32):
        %mx = arith.maxnumf %x, %y : f32
        tt.reduce.return %mx : f32
      }}) : ({T}) -> {vec}
      %r = tt.expand_dims %m {{axis = 1 : i32}} : {vec} -> tensor<64x1xf32, #blocked>
      %mc = ttg.convert_layout %m : {vec} -> {cvec}
      %c = tt.expand_dims %mc {{axis = 0 : i32}} : {cvec} -> tensor<1x64xf32, #blocked>
      %rb = tt.broadcast %r : tensor<64x1xf32, #blocked> -> {T}
      %cb = tt.broadcast %c : tensor<1x64xf32, #blocked> -> {T}
      %d = arith.subf %rb, %cb : {T}
      %nb = arith.addf %b, %d : {T}
      scf.yield %nb : {T}""", iter_args="%b = %zero", types=T)
    with pytest.raises(InputError, match="read both per row and") as err:
        import_ttgir(text, "c.ttgir")
    (d,) = err.value.diagnostics
    assert d.span.line == text.splitlines().index(next(ln for ln in text.splitlines() if "%d = arith.subf" in ln)) + 1


@pytest.mark.parametrize("after_line,refused", [(10, False), (20, True)])
def test_a_dot_after_the_loop_is_refused_unless_it_is_a_peeled_copy(after_line, refused):
    """A dot after the loop at the source position of the loop's own dot is the pipeliner's epilogue
    (the last iteration, peeled); one from elsewhere in the kernel is work the graph leaves out: an
    error at its line, a warning where the user named the loop (--loop)."""
    body = f"""
      %x = tt.load %ptrs : {PTRS}
      %d = tt.dot %x, %w, %acc : {T16} * {T16} -> {T} loc(#l10)
      scf.yield %d : {T}"""
    text = kernel(body, args=f"%n: i32, %ptrs: {PTRS}, %w: {T16}", iter_args="%acc = %zero", types=T)
    after = f"    %e = tt.dot %w, %w, %r : {T16} * {T16} -> {T} loc(#l{after_line})\n"
    text = text.replace("    tt.return", after + "    tt.return")
    text += '#l10 = loc("k.py":10:5)\n#l20 = loc("k.py":20:5)\n'
    if refused:
        with pytest.raises(InputError, match="outside any loop is not imported") as err:
            import_ttgir(text, "e.ttgir")
        assert err.value.diagnostics[0].span.line == text.splitlines().index(after.rstrip("\n")) + 1
    else:
        import_ttgir(text, "e.ttgir")
    _, notes = import_ttgir(text, "e.ttgir", loop=0)
    assert any("outside any loop is not imported" in n.message for n in notes) == refused


HELDOUT = DATA / "heldout"


def _ops(path):
    graph, _ = load_ttgir(path)
    return graph, [(op.name, op.opcode, [o.name for o in op.operands], op.type) for op in graph.ops]


def test_heldout_column_scaled_bf16_gemm():
    """acc += dot(a, b) * scale[None, :]: the scale is a column vector, the product and the sum two ops."""
    graph, ops = _ops(HELDOUT / "gemm_colscale_bf16_sm90.ttgir")
    assert ops[3:] == [("scale", "load", [], TensorType("f32", (1, 64), "smem")),
                       ("part_s", "mul", ["part", "scale"], f32(128, 64)),
                       ("acc_n", "add", ["acc_i", "part_s"], f32(128, 64))]
    assert [(c.name, c.output_dtype) for c in graph.carries] == [("acc_i", "bf16")]
    blackwell, ops100 = _ops(HELDOUT / "gemm_colscale_bf16_sm100.ttgir")  # the product in tensor memory
    assert [(n, o, a) for n, o, a, _ in ops100] == [(n, o, a) for n, o, a, _ in ops]
    assert ops100[2][3] == f32(128, 64, space="tmem")


def test_heldout_row_norm_beside_a_gemm():
    """ss += sum(a * a, 1): the square reads the converted A twice and stays its own op before the rowsum."""
    graph, ops = _ops(HELDOUT / "gemm_rownorm_sm90.ttgir")
    assert ops[3:] == [("af", "convert", ["a"], f32(128, 64)), ("sq", "mul", ["af", "af"], f32(128, 64)),
                       ("ss_n", "rowsum", ["sq", "ss_i"], f32(128))]


def test_heldout_biased_softmax_gemm():
    """s * 0.125 + bias[None, :] before the online softmax: the constant scale and the column bias are
    ops of their own (folding them into exp2 would change what rowmax sees)."""
    _, ops = _ops(HELDOUT / "biased_softmax_gemm_sm90.ttgir")
    by = {name: (opcode, args) for name, opcode, args, _ in ops}
    assert by["s"] == ("mul", ["qk"]) and by["s_b"] == ("add", ["s", "bias"])
    assert by["m_new"] == ("rowmax", ["s_b", "m_i"]) and by["p"] == ("exp2", ["s_b", "m_new"])


@pytest.mark.parametrize("chain,expected", [
    # exp(x) * y: e^x (no exp2_scale), then the product; never `exp2 x, y` (exp2(x - y))
    ("%e = math.exp %d : {T}\n      %y = arith.mulf %e, %acc : {T}", [("e", "exp", ["d"]), ("y", "mul", ["e", "acc"])]),
    # exp2(d - acc) * acc: the exp2 anchor takes its subtraction, the product after it is an op of its own
    ("%s = arith.subf %d, %acc : {T}\n      %e = math.exp2 %s : {T}\n      %y = arith.mulf %e, %acc : {T}",
     [("e", "exp2", ["d", "acc"]), ("y", "mul", ["e", "acc"])]),
    # -d + acc: the negation stays (one add would drop it)
    ("%ng = arith.negf %d : {T}\n      %y = arith.addf %ng, %acc : {T}", [("ng", "neg", ["d"]), ("y", "add", ["ng", "acc"])]),
])
def test_a_fused_chain_is_one_op_only_where_the_op_computes_it(chain, expected):
    text = kernel(f"""
      %x = tt.load %ptrs : {PTRS}
      %d = tt.dot %x, %w, %zero : {T16} * {T16} -> {T}
      {chain.format(T=T)}
      scf.yield %y : {T}""", args="%X: !tt.ptr<f16>, %n: i32",
                  before=f"""    %ptrs = tt.splat %X : !tt.ptr<f16> -> {PTRS}
    %w = tt.load %ptrs : {PTRS}""", iter_args="%acc = %zero", types=T)
    g, _ = import_ttgir(text, "chain.ttgir")
    assert [(op.name, op.opcode, [o.name for o in op.operands]) for op in g.ops][2:] == expected
