"""The third held-out batch (bench/heldout/kernels3.py, dumped by `bench/heldout/gen.py --module kernels3`
with Triton 3.9 and 3.6, before and after the pipeliner, sm_90 and sm_100: tests/data/ttgir/heldout3):
block pointers, a weight transposed in the kernel, SwiGLU, TF32, sliding-window attention, split-KV
attention, bf16 attention at D = 128, hinted matmul, atomic split-K, RMSNorm-scaled GEMM.

- every form of a kernel imports to the graph of its first form, or is refused with a located error
  naming the construct (`REFUSED`), never a traceback;
- the import rules the batch needed, each with a near miss that must stay an error;
- a few dumps go import -> solve -> verify -> emit-cuda -> nvcc with no spill (those the rules opened).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import nvcc, nvcc_compile
from twill.emit import emit_cuda
from twill.errors import InputError
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.tir import print_tir
from twill.ttgir import import_ttgir, load_ttgir
from twill.verify import verify

DATA = Path(__file__).parent / "data" / "ttgir" / "heldout3"
FORMS = ("t39/prepipe", "t39/after", "t36/prepipe", "t36/after")
NAMES = sorted(p.stem for p in (DATA / "t36" / "prepipe").glob("*.ttgir"))
# Triton 3.9 removed block pointers (`tl.make_block_ptr`): the kernel compiles with 3.6 only
ONLY_T36 = {"gemm_bp_leaky"}

# kernel -> (a regex of the TTGIR op the import stops at, what the message says): refused in every form
REFUSED = {
    # (gemm_tf32 imports since session 39: a TF32 dot, B loaded [K, N] typed K-major, {transposed = true})
    "gemm_splitk_atomic": ("tt\\.atomic_rmw", "updates memory in place"),
}
# dump -> (the forms refused, the op, the message) where a kernel is refused in some forms only (none now:
# attn_window's sm_100 dumps after the pipeliner, refused until their mask computed a block ahead was
# read against its peeled copy, import as the prepipe ones)
REFUSED_FORMS: dict[str, tuple] = {}
# kernel -> the op after the loop the epilogue has no form for: an error at it (the graph would store
# the accumulator, not what the kernel stores); with --loop N (loop=0) the loop alone, with a warning
NO_EPILOGUE: dict[str, str] = {}  # (gemm_bp_leaky's where(acc >= 0, acc, 0.01 * acc): ge, mul, select since s26)


def _key(name: str) -> str:
    return name.rsplit("_sm", 1)[0]


def _read(form: str, name: str) -> str:
    return (DATA / form / f"{name}.ttgir").read_text()


def test_the_batch_is_all_there():
    assert len(NAMES) == 20
    for name in NAMES:
        have = [f for f in FORMS if (DATA / f / f"{name}.ttgir").exists()]
        assert tuple(have) == (FORMS[2:] if _key(name) in ONLY_T36 else FORMS), name


@pytest.mark.parametrize("name", NAMES)
def test_every_form_imports_to_one_graph_or_is_refused_at_its_line(name):
    first = None
    for form in FORMS:
        path = DATA / form / f"{name}.ttgir"
        if not path.exists():
            continue
        refused = (REFUSED_FORMS[name][1:] if name in REFUSED_FORMS and form in REFUSED_FORMS[name][0]
                   else REFUSED.get(_key(name)))
        if refused is not None:
            with pytest.raises(InputError) as err:
                load_ttgir(path)
            d = err.value.diagnostics[0]
            assert refused[1] in d.message and d.span is not None, d.message
            line = path.read_text().splitlines()[d.span.line - 1]
            assert re.search(refused[0], line), line
            continue
        if _key(name) in NO_EPILOGUE:
            with pytest.raises(InputError) as err:
                load_ttgir(path)
            d = err.value.diagnostics[0]
            assert "would store the carries' last values" in d.message and d.severity == "error", d.message
            assert NO_EPILOGUE[_key(name)] in path.read_text().splitlines()[d.span.line - 1]
            graph, notes = load_ttgir(path, loop=0)
            warned = [n for n in notes if "no epilogue" in n.message]
            assert warned and NO_EPILOGUE[_key(name)] in warned[0].message
        else:
            graph, notes = load_ttgir(path)
            warned = [n for n in notes if "no epilogue" in n.message]
            assert not warned, warned[0].message
        text = print_tir(graph)
        first = first or text
        assert text == first, form


def _ops(ops) -> dict:
    return {op.name: (op.opcode, [o.name for o in op.operands]) for op in ops}


def test_a_wait_for_two_dots_gives_each_result_its_own_dot():
    """SwiGLU's two accumulators leave the loop through one `warp_group_dot_wait %acc1, %acc3` after
    the pipeliner: its result k is operand k (before, every result was the first: h = silu(acc1) *
    acc1, a wrong graph)."""
    for form in FORMS:
        g, _ = load_ttgir(DATA / form / "swiglu_sm90.ttgir")
        ep = _ops(g.epilogue.ops)
        assert ep["h_mul"] == ("mul", ["acc1", "h_recip"]), form
        assert ep["h_mul_mul"] == ("mul", ["h_mul", "acc3"]), form


def test_an_atomic_add_of_the_result_is_refused_not_a_graph_without_epilogue():
    text = _read("t39/prepipe", "gemm_splitk_atomic_sm90")
    with pytest.raises(InputError, match="atomic read-modify-write") as err:
        import_ttgir(text, "sk.ttgir")
    assert "tt.atomic_rmw" in text.splitlines()[err.value.diagnostics[0].span.line - 1]
    # the same kernel with a plain store imports (its epilogue stores the accumulator)
    store = re.sub(r"%(\w+) = tt.atomic_rmw fadd, acq_rel, gpu, (%\w+), (%\w+), (%\w+) : \(([^,]+), ([^,]+), ([^)]+)\)"
                   r" -> [^ ]+ ", r"tt.store \2, \3, \4 : \5 ", text, count=1)
    assert store != text
    g, notes = import_ttgir(store, "sk.ttgir")
    assert not [n for n in notes if "no epilogue" in n.message]


def test_leaky_relus_where_is_a_comparison_and_a_select():
    """`tl.where(acc >= 0, acc, 0.01 * acc)`: arith.cmpf oge is the vocabulary's `ge` (1 where it
    holds, else 0, a float tile), arith.select its `select`; both pipeliner forms alike."""
    for form in FORMS[2:]:
        g, _ = load_ttgir(DATA / form / "gemm_bp_leaky_sm90.ttgir")
        ep = {op.name: (op.opcode, [o.name for o in op.operands], dict(op.attrs)) for op in g.epilogue.ops}
        ge = next(v for v in ep.values() if v[0] == "ge")
        sel = next(v for v in ep.values() if v[0] == "select")
        assert ge[2] == {"scalar": 0.0} and sel[1][1] == ge[1][0], form  # select(x >= 0, x, 0.01 x)
        mul = ep[sel[1][2]]
        assert mul[0] == "mul" and mul[1] == [ge[1][0]] and abs(mul[2]["scalar"] - 0.01) < 1e-6, form


def test_a_tf32_dot_imports_with_b_typed_k_major_in_every_form():
    """`tl.dot(a, b, acc, input_precision="tf32")` of fp32 tiles: an mma of f32 operands (TF32 on the tensor
    core, which reads them K-major only). B, loaded [K, N] row-major (`b_ptrs = B + rk[:, None] * stride_bk +
    rn[None, :]`), is typed as the kernel reads it, [N, K], `{transposed = true}` (ttgir/kmajor.py): its argument
    is that tile's transpose, which the binding copies K-major. A is K-major as it lies."""
    for arch in ("sm90", "sm100"):
        for form in FORMS:
            g, _ = load_ttgir(DATA / form / f"gemm_tf32_{arch}.ttgir")
            loads = {op.name: (op.type.dtype, op.type.shape, dict(op.attrs)) for op in g.ops if op.opcode == "load"}
            assert loads == {"a": ("f32", (128, 32), {}), "b": ("f32", (128, 32), {"transposed": True})}, (form, arch)
            (mma,) = [op for op in g.ops if op.opcode == "mma"]
            assert [o.name for o in mma.operands[:2]] == ["a", "b"] and not mma.attrs and mma.type.dtype == "f32"
            assert dict(g.arguments)["B"] == "b"


@pytest.mark.parametrize("precision, said", [("2", "IEEE fp32 product on the CUDA cores"),
                                              ("1", "three TF32 products"), ("7", "input precision '7'")])
def test_a_dot_of_f32_operands_in_another_precision_is_refused_at_the_dot(precision, said):
    """Only TF32 is the graph's mma of f32 operands: `input_precision="ieee"` (2) and "tf32x3" (1) are refused
    at the dot's line, before and after the pipeliner."""
    for form in ("t39/prepipe", "t36/after"):
        text = _read(form, "gemm_tf32_sm90")
        other = text.replace("inputPrecision = 0 : i32", f"inputPrecision = {precision} : i32")
        assert other != text
        with pytest.raises(InputError, match="multiplies f32 operands") as err:
            import_ttgir(other, "p.ttgir")
        d = err.value.diagnostics[0]
        assert said in d.message and "input_precision" in d.hint
        assert "ttng.warp_group_dot " in other.splitlines()[d.span.line - 1]


def test_a_dot_precision_reads_both_printed_forms():
    """tt.dot prints its precision by name (`inputPrecision = tf32`), ttng.warp_group_dot as a number in its
    attributes; left out it is Triton's default, IEEE; ttng.tc_gen5_mma has none (Triton makes one of TF32
    dots only)."""
    from twill.ttgir.compute import input_precision
    from twill.ttgir.parser import parse_module, walk
    log = (DATA.parent / "matmul_sm90_triton39.log").read_text().split("// -----// IR Dump")
    module_text = log[1].split("\n", 1)[1]  # the first dump: Triton IR, a tt.dot of f16 tiles

    def dot(t: str):
        mod = parse_module(t, "m.ttgir")
        return next(op for f in mod.functions() for op in walk(f.body()) if op.name == "tt.dot")
    assert "inputPrecision = tf32 :" in module_text
    assert input_precision(dot(module_text)) == "tf32"
    assert input_precision(dot(module_text.replace("inputPrecision = tf32 :", "inputPrecision = tf32x3 :"))) == "tf32x3"
    assert input_precision(dot(module_text.replace(", inputPrecision = tf32 :", " :"))) == "ieee"
    for arch, op, want in (("sm90", "ttng.warp_group_dot", "tf32"), ("sm100", "ttng.tc_gen5_mma", "tf32")):
        mod = parse_module(_read("t39/prepipe", f"gemm_tf32_{arch}"), "t.ttgir")
        assert input_precision(next(o for f in mod.functions() for o in walk(f.body()) if o.name == op)) == want


def test_block_pointer_boundary_checks_are_edge_masks_and_a_near_miss_is_an_error():
    """`boundary_check` lowers to `offs >= 0 & offs < M` per dimension: `0 <= pid * 128 + row` holds
    everywhere (bounds.py, "always"), `offs < M` is the tensor's edge."""
    text = _read("t36/prepipe", "gemm_bp_leaky_sm90")
    g, _ = import_ttgir(text, "bp.ttgir")
    assert [op.opcode for op in g.ops] == ["load", "load", "mma"]
    # `offs >= 1` instead of `offs >= 0`: not true everywhere, not the edge: an error at the load
    cst = re.search(r"%(\w+) = arith.cmpi sge, %\w+, %(\w+) : tensor<128x1xi64", text).group(2)
    near = re.sub(rf"%{cst} = arith.constant dense<0> : tensor<128x1xi64", f"%{cst} = arith.constant dense<1> : "
                  "tensor<128x1xi64", text, count=1)
    assert near != text
    with pytest.raises(InputError, match="not a bound of the tensor's edge") as err:
        import_ttgir(near, "bp.ttgir")
    assert "tt.load" in near.splitlines()[err.value.diagnostics[0].span.line - 1]


ONE_SPLIT = ("tt.get_program_id x : i32", "arith.constant 0 : i32")  # split = 0: the key loop from 0, one split
SPLIT_DEF = "%kv_lo = arith.muli %split, %SPLIT_LEN : i32"
# near misses of the split form (splits.py), each an error at its TTGIR line: (replace, by, the op, the message)
NEAR_SPLITS = {
    "a constant added to the first key": (SPLIT_DEF, "%kv_lo_0 = arith.muli %split, %SPLIT_LEN : i32\n"
                                          "    %kv_lo = arith.addi %kv_lo_0, %c64_i32 : i32", "scf.for",
                                          "adds 64 to program_id(0) * SPLIT_LEN"),
    "the split times another argument": (SPLIT_DEF, "%kv_lo = arith.muli %split, %N_Q : i32", "scf.for",
                                         "upper bound is not the lower bound plus N_Q"),
    "an upper bound of another length": ("%0 = arith.addi %kv_lo, %SPLIT_LEN : i32", "%0 = arith.addi %kv_lo, %N_Q : i32",
                                         "scf.for", "upper bound is not the lower bound plus SPLIT_LEN"),
    "a store row without num_programs": ("%row = arith.muli %split, %num_bh : i32", "%row = arith.muli %split, %N_Q : i32",
                                         "tt.store", "other than as (program_id(0) * num_programs(B)"),
    "a load of Q offset by the split": ("%q = arith.extsi %bh : i32 to i64", "%q = arith.extsi %split : i32 to i64",
                                        "tt.load", "which splits the loop"),
}


def test_split_kv_imports_a_grid_split_in_every_form():
    """The key loop runs from split * SPLIT_LEN (program_id(0)) to that plus SPLIT_LEN, and the
    outputs are written at row (split * num_bh + bh) * N_Q: a grid axis of splits, the `.tir` line
    `grid split = SPLIT_LEN` (splits.py), with `--loop 0` too; the graph is the one the kernel with
    its split fixed at 0 gives, plus that line (and less SPLIT_LEN's `{extent = loop}`: fixed at 0,
    the loop runs to SPLIT_LEN, the tensors' whole extent; split, L is splits x SPLIT_LEN)."""
    for arch in ("sm90", "sm100"):
        for form in FORMS:
            text = (DATA / form / f"attn_splitkv_{arch}.ttgir").read_text()
            for loop in (None, 0):
                g, _ = import_ttgir(text, "s.ttgir", loop=loop)
                assert g.split == "SPLIT_LEN", form
                assert "\ngrid split = SPLIT_LEN\n" in print_tir(g)
            one, _ = import_ttgir(text.replace(*ONE_SPLIT), "one.ttgir")
            assert one.split is None and ("SPLIT_LEN", "loop") in one.extents and ("SPLIT_LEN", "loop") not in g.extents
            assert print_tir(one).replace(" {extent = loop}", "") == print_tir(g).replace("grid split = SPLIT_LEN\n", "")


@pytest.mark.parametrize("near", sorted(NEAR_SPLITS))
def test_a_near_split_is_refused_at_its_line(near):
    old, new, op, said = NEAR_SPLITS[near]
    for form in ("t39/prepipe", "t36/after"):
        text = (DATA / form / "attn_splitkv_sm90.ttgir").read_text()
        assert old in text, (form, old)
        bad = text.replace(old, new)
        with pytest.raises(InputError) as err:
            import_ttgir(bad, "near.ttgir")
        lines = bad.splitlines()
        found = [(lines[d.span.line - 1], d.message) for d in err.value.diagnostics if d.span is not None]
        assert any(said in m and re.search(rf"\b{re.escape(op)} ", line) for line, m in found), found


def test_split_kv_lse_reads_the_running_max_in_every_form():
    """lse = (m_i + log2 l_i) ln 2 after the loop: on sm_100 after the pipeliner m_i's iter_arg is
    named after a peeled value (depipe.py renames the carry), and the epilogue still reads it (the
    kernel split, above)."""
    for arch in ("sm90", "sm100"):
        for form in FORMS:
            text = (DATA / form / f"attn_splitkv_{arch}.ttgir").read_text()
            g, _ = import_ttgir(text, f"{form}/attn_splitkv_{arch}.ttgir")
            assert [n for n, _ in g.epilogue.outputs] == ["acc", "LSE_PART"], form
            ep = _ops(g.epilogue.ops)
            assert ep["m_i_scaled"] == ("mul", ["m_i", "exp2_scale"]), form
            assert ep["l_i_log2"] == ("log2", ["l_i"]), form


# -- end to end: the dumps the rules opened, lean (CI time counts) ---------------------------------
# mm_hints_sm100: a 128 x 256 f32 accumulator in tensor memory, stored with no op after the loop. Read
# out whole it took 256 registers per thread after the loop (124 bytes spilled at setmaxnreg 248, which
# the model, counting the loop only, never saw); its store now reads it 32 columns at a time (TmemTile)
E2E = [("t39/after", "swiglu_sm90"), ("t36/prepipe", "gemm_bp_leaky_sm100"),
       ("t39/prepipe", "linear_trans_relu_sm90"), ("t36/prepipe", "mm_hints_sm100"),
       ("t39/after", "attn_window_sm100")]  # (gemm_tf32: tests/test_tf32.py, in CI)


@pytest.mark.slow
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
@pytest.mark.parametrize("form, name", E2E)
@pytest.mark.extended
def test_heldout3_dump_solves_verifies_emits_and_compiles_clean(form, name, tmp_path):
    machine = load_machine("b200" if name.endswith("sm100") else "h200")
    graph, _ = load_ttgir(DATA / form / f"{name}.ttgir", split_rows="auto")
    schedule = solve(graph, machine, SolveOptions())
    assert schedule.stage == "joint" and schedule.optimal and schedule.complete
    assert verify(schedule, graph, machine) == []
    src = tmp_path / f"{name}.cu"
    src.write_text(emit_cuda(schedule, machine))
    arch = machine.arch
    rc, err = nvcc_compile(src, ["-std=c++17", f"-gencode=arch=compute_{arch[3:]},code={arch}", "-Xptxas", "-v"])
    assert rc == 0, err[-2000:]
    spills = {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)}
    assert spills <= {0}, err[-2000:]
    assert "C7515" not in err and "serialized" not in err, err[-2000:]


def test_a_constant_side_of_where_is_a_fill(tmp_path):
    """`tl.where(acc >= 0, acc, 0.0)` (ReLU written with where): the constant side is `fill` (a tile
    of it shaped like acc), so the epilogue is ge, fill, select; it solves, emits and compiles."""
    text = _read("t36/prepipe", "gemm_bp_leaky_sm90")
    relu = text.replace("%acc_61 = arith.select %acc_59, %acc_58, %acc_60 :", "%acc_61 = arith.select %acc_59, %acc_58, %cst :")
    assert relu != text
    g, _ = import_ttgir(relu, "relu.ttgir")
    ep = {op.name: (op.opcode, [o.name for o in op.operands], dict(op.attrs)) for op in g.epilogue.ops}
    sel = next(v for v in ep.values() if v[0] == "select")
    ge, fill = ep[sel[1][0]], ep[sel[1][2]]
    assert ge[0] == "ge" and fill == ("fill", [sel[1][1]], {"scalar": 0.0})
    from twill.tir import parse_tir
    assert parse_tir(print_tir(g)).epilogue == g.epilogue  # written and read back
    if nvcc() is None:
        return
    machine = load_machine("h200")
    schedule = solve(g, machine, SolveOptions())
    text_cu = emit_cuda(schedule, machine)
    assert "twill::op_fill(" in text_cu
    src = tmp_path / "relu.cu"
    src.write_text(text_cu)
    rc, err = nvcc_compile(src, ["-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v"])
    assert rc == 0, err[-2000:]


def test_split_kv_import_writes_the_grid_line_and_a_near_miss_exits_2_at_its_line(tmp_path):
    from click.testing import CliRunner
    from twill_cli.main import main
    path = DATA / "t36" / "prepipe" / "attn_splitkv_sm90.ttgir"
    out = tmp_path / "s.tir"
    res = CliRunner().invoke(main, ["import", str(path), "--split-rows", "auto", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "\ngrid split = SPLIT_LEN\n" in out.read_text()
    bad = tmp_path / "near.ttgir"
    bad.write_text(path.read_text().replace("%0 = arith.addi %kv_lo, %SPLIT_LEN : i32", "%0 = arith.addi %kv_lo, %N_Q : i32"))
    res = CliRunner().invoke(main, ["import", str(bad)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "near.ttgir:85:14: error: 'scf.for' runs over a range that moves with the program id" in res.output, res.output
