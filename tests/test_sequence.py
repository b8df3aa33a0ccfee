"""Loops in sequence (twill/sequence.py): the `.tir` of named loops and its errors, the import of
Triton kernels whose tile loops run one after the other (tests/data/seq: bench/seq/kernels.py dumped
by bench/seq/gen.py, sm_90 and sm_100, before and after the pipeliner), each loop solved and
verified, and emit-cuda's kernels (one per loop, nvcc with no spill: the ptxas loop) and bindings
against tests/golden/seq. The GPU run is tests/test_gpu.py's `test_loops_in_sequence_match_torch`."""
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import nvcc, nvcc_compile
from twill_cli.main import main
from twill.errors import InputError
from twill.machine import load_machine
from twill.sequence import load_sequence_schedule, solve_sequence
from twill.tir import parse_tir, print_tir
from twill.tir_sequence import is_sequence, load_sequence, parse_sequence, print_sequence
from twill.ttgir.sequence import import_sequence
from twill.verify import verify

TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data" / "seq"
GOLDEN = TESTS / "golden" / "seq"
CHAIN = DATA / "gemm_chain.tir"


def errors_of(text: str) -> list[str]:
    with pytest.raises(InputError) as exc:
        parse_sequence(text, "s.tir")
    return [f"{d.span.line}:{d.span.col}: {d.message}" if d.span else d.message for d in exc.value.diagnostics]


# -- the .tir of several loops ------------------------------------------------------------------

@pytest.mark.parametrize("path", [CHAIN, *sorted(GOLDEN.glob("*.tir"))], ids=lambda p: p.name)
def test_round_trip(path):
    seq = load_sequence(path)
    text = print_sequence(seq)
    assert parse_sequence(text, "again.tir") == seq
    assert print_sequence(parse_sequence(text, "again.tir")) == text
    assert len(seq.names) == 2 and seq.handovers


def test_a_one_loop_file_is_no_sequence_and_each_loop_is_a_one_loop_graph():
    one = (TESTS.parent / "examples" / "gemm_hopper.tir").read_text()
    assert not is_sequence(one) and is_sequence(CHAIN.read_text())
    seq = load_sequence(CHAIN)
    # each loop prints as the one-loop file it is: parsed alone, the same graph
    for name, g in zip(seq.names, seq.graphs):
        assert parse_tir(print_tir(g), "x.tir") == g and g.kernel == f"gemm_chain_{name}"
    h, = seq.handovers
    assert (h.loop, h.input, h.source, h.carry) == ("L1", "h", "L0", "acc1")
    assert seq.handed_carries("L0") == ("acc1",)


BASE = CHAIN.read_text()


@pytest.mark.parametrize("edit, expected", [
    (("= L0.acc1", "= L7.acc1"), "11:31: loop 'L1' reads 'L7.acc1', but loop 'L7' is not a loop of this kernel"),
    (("= L0.acc1", "= L0.acc9"), "11:31: loop 'L0' yields no carry 'acc9'"),
    (("= L0.acc1", "= L1.acc2"), "11:31: loop 'L1' reads 'L1.acc2', but loop 'L1' is this loop itself"),
    (("input h : f16[128,64] @smem", "input h : f32[128,64] @smem"), "11:31: input 'h' is f32 but loop 'L0' writes "
                                                                      "carry 'acc1' as f16"),
    (("= L0.acc1", "= acc1"), "11:31: expected 'LOOP.CARRY' after '='"),
    (("loop L1 {", "loop {"), "13:6: a loop of a kernel of several loops needs a name"),
    (("loop L1 {", "loop L0 {"), "13:6: loop 'L0' is named twice"),
    (("mma h, c ", "mma h, x "), "15:21: undefined name 'x'"),
])
def test_errors_are_located(edit, expected):
    found = errors_of(BASE.replace(*edit))
    assert any(e.startswith(expected) for e in found), found


def test_a_later_loop_cannot_feed_an_earlier_one():
    text = BASE.replace("carry acc1 : f32[128,64] = 0 {output = f16}",
                        "input z : f16[128,64] = L1.acc2\ncarry acc1 : f32[128,64] = 0 {output = f16}")
    assert errors_of(text)[0].startswith("3:25: loop 'L0' reads 'L1.acc2', but loop 'L1' runs after it")


def test_the_cli_exits_2_at_the_line(tmp_path):
    bad = tmp_path / "bad.tir"
    bad.write_text(BASE.replace("= L0.acc1", "= L0.acc9"))
    r = CliRunner().invoke(main, ["solve", str(bad), "--gpu", "h200", "-o", str(tmp_path / "s.json")])
    assert r.exit_code == 2 and f"{bad}:11:31: error: loop 'L0' yields no carry 'acc9'" in r.output
    assert "Traceback" not in r.output and not (tmp_path / "s.json").exists()


# -- import ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel, arch", [(k, a) for k in ("gemm_chain", "attn_two_pass", "row_var") for a in (90, 100)])
def test_import_both_forms_give_the_golden_sequence(kernel, arch, golden):
    before = DATA / f"{kernel}_sm{arch}.prepipe.ttgir"
    seq, warnings = import_sequence(before.read_text(), str(before))
    assert not warnings
    golden(f"seq/{kernel}_sm{arch}.tir", print_sequence(seq))
    after = DATA / f"{kernel}_sm{arch}.ttgir"
    if arch == 90 or kernel == "row_var":  # after Triton's pipeliner: the same loops, its pipelining undone
        again, _ = import_sequence(after.read_text(), str(after))
        assert again.graphs == seq.graphs and again.handovers == seq.handovers
    else:  # sm_100's mmas: the pipeliner peels iterations out of the loops, which a sequence does not merge back
        with pytest.raises(InputError) as exc:
            import_sequence(after.read_text(), str(after))
        assert all("outside any loop is not imported" in d.message and d.span.line for d in exc.value.diagnostics)


def test_the_handed_over_values_are_the_earlier_loops_carries():
    path = DATA / "attn_two_pass_sm90.prepipe.ttgir"
    seq, _ = import_sequence(path.read_text(), str(path))
    assert [(h.input, h.text) for h in seq.handovers] == [("m", "L0.m"), ("l", "L0.l")]
    l1 = seq.graph("L1")
    assert [op.opcode for op in l1.ops] == ["load", "mma", "exp2", "div", "load", "mma"]  # p / l: a divide
    assert l1.op("p").operands[1].name == "m" and l1.op("p_div").operands[1].name == "l"
    chain = DATA / "gemm_chain_sm90.prepipe.ttgir"
    seq, _ = import_sequence(chain.read_text(), str(chain))  # h = acc1 as f16: handed over in f16
    assert seq.graph("L0").values["acc1"].output_dtype == "f16" == seq.graph("L1").values["h"].type.dtype


def test_work_between_the_loops_is_the_later_loops_prologue_or_an_error():
    path = DATA / "row_var_sm90.prepipe.ttgir"  # mean = total / N, N a constant: L1's prologue
    seq, _ = import_sequence(path.read_text(), str(path))
    l1 = seq.graph("L1")
    assert [(h.input, h.text) for h in seq.handovers] == [("total", "L0.total")]
    assert [(op.name, op.opcode, op.attrs) for op in l1.prologue.ops] == [("mean", "mul", (("scalar", 1 / 4096),))]
    # what no block can compute (a remainder, total % c, no opcode of the vocabulary) is an error at it (here
    # L0's epilogue's), not an input the caller gives (a square root, c / x or a launch scalar the prologue
    # computes: test_heldout7's RMSNorm, LayerNorm and L2 normalize)
    text = path.read_text()
    line = next(x for x in text.splitlines() if "%mean_20 = arith.mulf" in x)
    text = text.replace(line, line.replace("arith.mulf %total#0, %mean_19", "arith.remf %total#0, %mean_19"))
    with pytest.raises(InputError) as exc:
        import_sequence(text, "x.ttgir")
    d = exc.value.diagnostics[0]
    assert "'arith.remf' after the loop computes what is stored from the loop's results" in d.message
    assert d.span.line == text.splitlines().index(line.replace("arith.mulf %total#0, %mean_19",
                                                                "arith.remf %total#0, %mean_19")) + 1


def test_a_carry_starting_from_an_earlier_loops_result_is_an_error():
    path = DATA / "gemm_chain_sm90.prepipe.ttgir"
    text = path.read_text()
    head = next(line for line in text.splitlines() if "%acc2:3 = scf.for" in line)
    at = text.splitlines().index(head) + 1
    init = head.split("iter_args(%acc2_38 = ")[1].split(",")[0]
    text = text.replace(head, head.replace(f"%acc2_38 = {init},", "%acc2_38 = %acc1#0,"))
    with pytest.raises(InputError) as exc:
        import_sequence(text, "x.ttgir")
    d = exc.value.diagnostics[0]
    assert "starts from loop L0's result" in d.message and d.span.line == at


def test_one_loop_and_causal_pairs_import_as_before():
    path = TESTS / "data" / "causal" / "attn_causal_fwd_sm90.ttgir"
    graph, _ = import_sequence(path.read_text(), str(path))  # a causal pair: one merged loop, not a sequence
    assert hasattr(graph, "ops") and any(op.opcode == "causal_mask" for op in graph.ops)


# -- solve, emit ------------------------------------------------------------------------------------

def test_each_loop_is_solved_and_verified(tmp_path):
    r = CliRunner().invoke(main, ["solve", str(CHAIN), "--gpu", "h200", "-o", str(tmp_path / "s.json")])
    assert r.exit_code == 0, r.output
    seq, machine = load_sequence_schedule(tmp_path / "s.json"), load_machine("h200")
    graphs = load_sequence(CHAIN).graphs
    assert seq.names == ("L0", "L1") and [s.kernel for s in seq.schedules] == ["gemm_chain_L0", "gemm_chain_L1"]
    for s, g in zip(seq.schedules, graphs):
        assert s.optimal and verify(s, g, machine) == []
    again = solve_sequence(load_sequence(CHAIN), machine, _options())
    assert again.to_json() == seq.to_json()  # deterministic
    assert all(s.ii == a.ii for s, a in zip(seq.schedules, again.schedules))


def _options():
    from twill.pipeline import SolveOptions
    return SolveOptions()


EMITTED = [("gemm_chain_sm90", "h200", True), ("attn_two_pass_sm90", "h200", True), ("row_var_sm90", "h200", True),
           ("gemm_chain_sm100", "b200", False), ("attn_two_pass_sm100", "b200", False),
           ("row_var_sm100", "b200", False)]


def _emit(graph, gpu, binding, folder: Path) -> list[str]:
    """emit-cuda of the stored schedule (bench/seq/store_schedules.py: solved, then emit-cuda's ptxas
    loop run on each loop) into `folder`: the names written."""
    out = folder / f"{graph}.{gpu}.cu"
    r = CliRunner().invoke(main, ["emit-cuda", str(DATA / f"{graph}.{gpu}.json"), "-o", str(out)]
                           + (["--binding", "torch"] if binding else []))
    assert r.exit_code == 0, r.output
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("graph, gpu, binding", EMITTED)
def test_emitted_kernels_and_binding_match_golden(graph, gpu, binding, tmp_path, golden):
    stored = load_sequence_schedule(DATA / f"{graph}.{gpu}.json")
    seq = load_sequence(GOLDEN / f"{graph}.tir")  # the stored schedules are of the golden graphs
    assert [parse_tir(s.graph_tir, "x.tir") for s in stored.schedules] == list(seq.graphs)
    assert stored.handovers == seq.handovers
    written = _emit(graph, gpu, binding, tmp_path)
    # row_var's loops walk one grid of row tiles: also their one kernel (seqfuse.py; the others are refused, test_seqfuse)
    fused = [f"{graph}.{gpu}.fused.cu", f"{graph}.{gpu}.fused_entry.cu"] if graph == "row_var_sm90" else []
    assert written == sorted([f"{graph}.{gpu}.L0.cu", f"{graph}.{gpu}.L1.cu"] + fused + ([
        f"{graph}.{gpu}.L0.py", f"{graph}.{gpu}.L0_entry.cu", f"{graph}.{gpu}.L1.py", f"{graph}.{gpu}.L1_entry.cu",
        f"{graph}.{gpu}.py"] if binding else []))
    for name in written:
        golden(f"seq/{name}", (tmp_path / name).read_text())


@pytest.mark.slow
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found")
@pytest.mark.parametrize("graph, gpu, binding", EMITTED)
def test_each_loops_kernel_compiles_without_spills(graph, gpu, binding, tmp_path):
    """nvcc -Xptxas -v on the later loop's golden kernel, the one that reads the hand-over (as an input
    tile, a row vector, or through a prologue): no spill, no serialized wgmma. (Each loop's kernel was
    compiled by emit-cuda's ptxas loop when its schedule was stored; L0 is a one-loop kernel as any.)"""
    arch = "sm_90a" if gpu == "h200" else "sm_100a"
    src = tmp_path / f"{graph}.{gpu}.L1.cu"  # nvcc writes its object beside the source
    src.write_text((GOLDEN / src.name).read_text())
    rc, err = nvcc_compile(src, ["-std=c++17", f"-gencode=arch=compute_{arch[3:]},code={arch}", "-Xptxas", "-v"])
    assert rc == 0, err
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)]
    assert spills and not any(spills) and "C75" not in err, err


def test_the_cli_imports_a_sequence_and_refuses_one_where_it_takes_one_loop(tmp_path):
    out = tmp_path / "chain.tir"
    r = CliRunner().invoke(main, ["import", str(DATA / "gemm_chain_sm90.ttgir"), "-o", str(out)])
    assert r.exit_code == 0 and "2 loops in sequence" in r.output, r.output
    assert out.read_text() == (GOLDEN / "gemm_chain_sm90.tir").read_text()
    r = CliRunner().invoke(main, ["explain", str(out), "--gpu", "h200"])
    assert r.exit_code == 2 and "holds loops in sequence" in r.output and "Traceback" not in r.output


def _module(path: Path):
    import importlib.util
    spec = importlib.util.spec_from_file_location(path.name[:-3].replace(".", "_"), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("fixture, shapes", [
    ("gemm_chain_sm90.h200", {"A": (256, 192), "B": (192, 64), "C": (64, 320), "E": (320, 64)}),
    ("attn_two_pass_sm90.h200", {"Q": (256, 64), "K": (192, 64), "V": (192, 64)}),
    ("row_var_sm90.h200", {"X": (256, 4096)})])  # row_var's loops run to its constexpr N = 4096
def test_the_sequence_binding_hands_each_output_to_the_next_loop(fixture, shapes):
    """K.py's plan, checked without a GPU: each loop's binding resolves its tensors (the user's, and
    the earlier loop's outputs as they would be allocated) to one grid of row tiles."""
    seq = _module(GOLDEN / f"{fixture}.py")
    assert [loop for loop, _, _, _ in seq.LOOPS] == ["L0", "L1"] and len(seq.OUTPUTS) == 1
    allocated = {}
    for loop, file, feeds, _ in seq.LOOPS:
        mod = _module(GOLDEN / file)
        given = {}
        for arg, how in feeds.items():
            shape, dtype = (shapes[how[1]], "float16") if how[0] == "user" else allocated[(how[1], how[2])]
            given[arg] = mod.Meta(shape, dtype, "cuda:0", True, 0)
        given.update({a["name"]: None for a in mod.SPEC["args"] if a["output"]})
        plan = mod.resolve(mod.SPEC, given)
        assert plan["tiles_m"] == 2 and plan["tiles_n"] == 1
        # a loop split by columns (row_var's L0, colsplit.py) writes [S, M] partials, handed over combined: [M]
        allocated.update({(loop, a["name"]): (tuple(plan["shapes"][a["name"]])[int(bool(a.get("splits"))):], a["dtype"])
                          for a in mod.SPEC["args"] if a["output"]})
    assert any(how[0] == "handed" for _, _, feeds, _ in seq.LOOPS for how in feeds.values())
    # the binding's own pre-pass does the same, before any loop runs
    given = {p: _module(GOLDEN / seq.LOOPS[0][1]).Meta(s, "float16", "cuda:0", True, 0) for p, s in shapes.items()}
    plans = seq.plans(given)
    assert [p["tiles_m"] for p in plans.values()] == [2, 2]


def test_the_sequence_binding_refuses_before_any_loop_runs():
    """row_var's loops run to its compile-time N = 4096 (`extent loop = 4096`), which the Triton
    kernel divides the sum by: X of 200 columns is refused, and the binding's pre-pass raises that
    ArgumentError before any loop is launched. (Before the loops' extents were recorded, L0 took the
    partial last column block and the pre-pass raised L1's `no partial last tile`.)"""
    seq = _module(GOLDEN / "row_var_sm90.h200.py")
    meta = _module(GOLDEN / seq.LOOPS[0][1]).Meta
    l0 = _module(GOLDEN / seq.LOOPS[0][1])
    with pytest.raises(l0.ArgumentError, match=r"^X: L = 200 \(its dimension 1\), but the kernel's loop runs to the "
                                               r"compile-time constant 4096"):
        l0.resolve(l0.SPEC, {"X": meta((256, 200), "float16", "cuda:0", True, 0), "total": None})
    assert l0.resolve(l0.SPEC, {"X": meta((256, 4096), "float16", "cuda:0", True, 0), "total": None})["iters"] == 64
    with pytest.raises(ValueError, match=r"compile-time constant 4096"):
        seq.plans({"X": meta((256, 200), "float16", "cuda:0", True, 0)})
