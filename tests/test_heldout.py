"""The held-out Triton kernels (bench/heldout/kernels.py, dumped by bench/heldout/gen.py with Triton 3.9
and 3.6, before and after the pipeliner, for sm_90 and sm_100: tests/data/ttgir/heldout2): kernels
written as users write them, not tuned for twill.

- every form of a kernel imports to the graph of its Triton 3.9 prepipe form, or is refused with a
  located error (exit 2) naming the construct (`REFUSED`), never a traceback;
- the import rules they needed (bounds.py: masks compared with launch bounds; the epilogue's float of
  an integer argument and an integer accumulator in tensor memory), each with near misses that must
  stay errors;
- the prepipe dumps go import (`--split-rows auto`, as the bench imports) -> solve -> verify -> emit-cuda
  -> nvcc for sm_90a / sm_100a with no spill, as test_corpus does for the corpus.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import emitted_and_built, nvcc
from twill.emit import emit_cuda
from twill.errors import InputError
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.tir import print_tir
from twill.ttgir import import_ttgir, load_ttgir
from twill.verify import verify

DATA = Path(__file__).parent / "data" / "ttgir" / "heldout2"
CORPUS = Path(__file__).parent / "data" / "ttgir" / "corpus" / "prepipe"
FORMS = ("t39/prepipe", "t39/after", "t36/prepipe", "t36/after")
NAMES = sorted(p.stem for p in (DATA / "t39" / "prepipe").glob("*.ttgir"))

# kernel -> (the TTGIR op the import stops at, what the message says): refused in every form
REFUSED: dict = {}
# (kernel, form) -> why this form's graph differs from the 3.9 prepipe one
DIFFERENT = {
    ("gemm_int8_scaled_sm100", "t36/prepipe"): "Triton 3.6 compiles the int8 dot on sm_100 as a register "
                                               "tt.dot (no tcgen05, no tensor memory): another kernel",
    ("gemm_int8_scaled_sm100", "t36/after"): "as t36/prepipe",
}


def _key(name: str) -> str:
    return name.rsplit("_sm", 1)[0]


def _graph_text(path: Path, **kw) -> str:
    return print_tir(load_ttgir(path, **kw)[0])


@pytest.mark.parametrize("name", NAMES)
def test_every_form_imports_to_one_graph_or_is_refused_at_its_line(name):
    refused = REFUSED.get(_key(name))
    first = None
    for form in FORMS:
        path = DATA / form / f"{name}.ttgir"
        if refused is not None:
            with pytest.raises(InputError) as err:
                load_ttgir(path)
            d = err.value.diagnostics[0]
            assert refused[1] in d.message and d.span is not None
            line = path.read_text().splitlines()[d.span.line - 1]
            assert refused[0] in line, line
            continue
        text = _graph_text(path)
        first = first or text
        if (name, form) in DIFFERENT:
            assert text != first, f"{form} now imports as the prepipe form: drop it from DIFFERENT"
        else:
            assert text == first, form


# -- the import rules ---------------------------------------------------------------------------

def _read(form: str, name: str) -> str:
    return (DATA / form / f"{name}.ttgir").read_text()


def test_loop_tail_mask_is_the_partial_last_tile_and_a_near_miss_is_an_error():
    text = _read("t39/prepipe", "attn_kvlen_sm90")
    graph, _ = import_ttgir(text, "kvlen.ttgir")
    assert "mask" not in {op.opcode for op in graph.ops}  # where(cols < N_KV, s, -inf): the ragged tile
    # the same mask against another bound than the loop's: not the partial tile, an error at the select
    near = text.replace("%k_25 = tt.splat %N_KV", "%k_25 = tt.splat %N_Q", 1)
    assert near != text
    with pytest.raises(InputError, match="element indices") as err:
        import_ttgir(near, "kvlen.ttgir")
    assert "arith.select" in near.splitlines()[err.value.diagnostics[0].span.line - 1]


def test_load_and_store_masks_on_the_tensors_edge_are_dropped_others_are_errors():
    text = _read("t39/prepipe", "mm_tutorial_sm90")
    graph, _ = import_ttgir(text, "mm.ttgir")  # offs_k < K - k * BK on the loads, rows < M & cols < N on the store
    assert [op.opcode for op in graph.ops] == ["load", "load", "mma"]
    # a store masked by a constant bound (not the tensor's edge): an error at the store
    near = re.sub(r"(%c_mask_\d+) = tt.splat %M : i32 -> (tensor<128x1xi32[^>]*>)",
                  r"\1 = arith.constant dense<100> : \2", text, count=1)
    assert near != text
    with pytest.raises(InputError, match="not a bound of the tensor's edge") as err:
        import_ttgir(near, "mm.ttgir")
    assert "tt.store" in near.splitlines()[err.value.diagnostics[0].span.line - 1]
    # a load whose masked elements are not 0 under the loop's tail mask: since session 42 its `{fill = 1.0}` (whole
    # tiles never read it; emit/ragged.py refuses a partial last tile whose TMA zero fill a reduction would read)
    rows = _read("t39/prepipe", "row_stats_sm90")
    near = rows.replace("%cst = arith.constant dense<0.000000e+00> : tensor<64x128xf16",
                        "%cst = arith.constant dense<1.000000e+00> : tensor<64x128xf16", 1)
    assert near != rows
    graph, _ = import_ttgir(near, "rows.ttgir")
    assert 1.0 in [op.attr("fill") for op in graph.ops if op.opcode == "load"], print_tir(graph)


def test_a_dot_split_along_k_is_put_back_together_and_a_near_miss_is_an_error():
    prepipe = _graph_text(DATA / "t39" / "prepipe" / "softmax_gemm_sm90.ttgir")
    for form, chunks in (("t39/after", 2), ("t36/after", 4)):  # 3.9 splits the dot in 2, 3.6 in 4
        text = _read(form, "softmax_gemm_sm90")
        assert text.count("ttng.warp_group_dot %") == chunks
        assert print_tir(import_ttgir(text, "sg.ttgir")[0]) == prepipe
    text = _read("t39/after", "softmax_gemm_sm90")
    near = re.sub(r"(= ttg.memdesc_subslice %\w+)\[32, 0\]", r"\1[0, 0]", text, count=1)  # B's chunk 1 is rows 0..31
    assert near != text
    with pytest.raises(InputError, match="split along K") as err:
        import_ttgir(near, "sg.ttgir")
    assert "warp_group_dot" in near.splitlines()[err.value.diagnostics[0].span.line - 1]


def _ops(graph) -> dict[str, tuple[str, list[str]]]:
    return {op.name: (op.opcode, [o.name for o in op.operands]) for op in graph.ops}


def test_natural_exp_softmax_is_exp2_with_its_scale_folded():
    """`p = tl.exp(s * sm_scale - m)` and `alpha = tl.exp(m_i - m)` are e^x = 2^(x log2 e): exp2 ops,
    sm_scale and log2 e folded into exp2_scale (= sm_scale * log2 e), the graph the exp2 form
    (attn_d64: `exp2(qk * qk_scale - m)`) imports to. Before, the multiply by sm_scale was an op
    `s_mul` that emit-cuda refused (exit 2), and `exp` took no subtrahend (two f32 tiles live)."""
    d64 = sorted(op.opcode for op in load_ttgir(DATA / "t39" / "prepipe" / "attn_d64_sm90.ttgir")[0].ops)
    for form in FORMS:
        for arch in ("sm90", "sm100"):
            g, _ = load_ttgir(DATA / form / f"attn_exp_{arch}.ttgir")
            ops = _ops(g)
            assert ops["m_new"] == ("rowmax", ["s", "m_i"]), form
            assert ops["p"] == ("exp2", ["s", "m_new"]) and ops["alpha"] == ("exp2", ["m_i", "m_new"]), form
            assert ops["l_i_new"] == ("rowsum", ["p", "l_i", "alpha"]), form
            if arch == "sm90":
                assert sorted(op.opcode for op in g.ops) == d64, form  # (in the kernel's order)
    # exps that are no softmax keep their opcode (no exp2_scale): SSD's decays, the GELU epilogue
    ssd, _ = load_ttgir(CORPUS / "ssd_chunk_scan_sm90.ttgir")
    assert "exp" in {op.opcode for op in ssd.ops} and "exp2" not in {op.opcode for op in ssd.ops}
    gelu, _ = load_ttgir(CORPUS / "gemm_bias_gelu_sm90.ttgir")
    assert "exp2" not in {op.opcode for op in gelu.ops + gelu.epilogue.ops}
    # a loop with an exp2 already (mixed units: one exp2_scale cannot serve both): the exp stays exp
    text = _read("t39/prepipe", "attn_d64_sm90")
    mixed = text.replace("math.exp2 ", "math.exp ", 1)
    assert mixed != text
    g, _ = import_ttgir(mixed, "mixed.ttgir")
    assert {"exp", "exp2"} <= {op.opcode for op in g.ops}


def test_natural_exp_kernels_read_their_carries_and_inputs_in_natural_units():
    """exp(s * c - b) is exp2((s - b / c) * exp2_scale) with exp2_scale = c * log2 e: a carry the exp2
    subtracts is the kernel's m divided by c, so the epilogue reads m * exp2_scale * ln 2 (the exp2
    form: m * exp2_scale), and an input b the prologue hands the loop is b * log2 e / exp2_scale (the
    exp2 form: b / exp2_scale). Checked on the corpus's exp2 kernels with their exp2 made exp."""
    text = (CORPUS / "attn_causal_fwd_sm90.ttgir").read_text().replace("math.exp2 ", "math.exp ")
    g, _ = import_ttgir(text, "causal_exp.ttgir")
    ep = {op.name: (op.opcode, [o.name for o in op.operands], dict(op.attrs).get("scalar")) for op in g.epilogue.ops}
    assert ep["m_i_scaled"] == ("mul", ["m_i", "exp2_scale"], None)
    assert ep["m_i_natural"][:2] == ("mul", ["m_i_scaled"]) and abs(ep["m_i_natural"][2] - 0.6931471805599453) < 1e-12
    assert ep["lse_add"][1] == ["m_i_natural", "lse"]
    text = (CORPUS / "attn_bwd_dq_sm90.ttgir").read_text().replace("math.exp2 ", "math.exp ")
    g, _ = import_ttgir(text, "dq_exp.ttgir")
    pro = {op.name: (op.opcode, [o.name for o in op.operands], dict(op.attrs).get("scalar")) for op in g.prologue.ops}
    assert pro["lse2_log2e"][:2] == ("mul", ["lse2"]) and abs(pro["lse2_log2e"][2] - 1.4426950408889634) < 1e-12
    assert pro["lse2_unscaled"][:2] == ("div", ["lse2_log2e", "exp2_scale"])
    assert _ops(g)["p"] == ("exp2", ["s", "lse2_unscaled"])


def test_epilogue_reads_an_integer_argument_as_a_float_and_an_integer_accumulator_in_tensor_memory():
    graph, notes = load_ttgir(DATA / "t39" / "prepipe" / "row_stats_sm90.ttgir")
    assert not [n for n in notes if "no epilogue" in n.message]
    scalars = {v.name: v.type.dtype for v in graph.epilogue.scalars}
    assert scalars.get("N") == "i32"  # mean = s1 / N
    assert [n for n, _ in graph.epilogue.outputs] == ["s1", "RSTD"]
    graph, notes = load_ttgir(DATA / "t39" / "prepipe" / "gemm_int8_scaled_sm100.ttgir")
    assert not [n for n in notes if "no epilogue" in n.message]
    assert [op.opcode for op in graph.epilogue.ops] == ["convert", "mul", "mul", "convert"]


# -- end to end ---------------------------------------------------------------------------------

# The dumps built end to end here: those the session's import rules opened (the rest of the family is
# bench/heldout/triage.py's: every dump, both archs; docs/ttgir-import.md section 14 has its table,
# with what does not go through). Lean on purpose: CI time counts.
E2E = [("t39/prepipe", n) for n in ("mm_tutorial_sm90", "mm_tutorial_sm100", "attn_kvlen_sm90", "attn_kvlen_sm100",
                                     "softmax_gemm_sm90", "gemm_int8_scaled_sm90", "gemm_int8_scaled_sm100",
                                     "row_stats_sm90", "attn_alibi_sm90", "attn_alibi_sm100")]
# tl.exp's attention (fuse.natural_exp), both archs (its after-pipeliner forms import to the same graph:
# test_every_form_imports_to_one_graph_or_is_refused_at_its_line; the same graph, the same kernel)
E2E += [("t39/prepipe", f"attn_exp_{arch}") for arch in ("sm90", "sm100")]
# open: ALiBi's scores, bias and P on one warpgroup (the Hopper specs keep register tiles on their role,
# communication.tile_handoff) leave ptxas too few registers to keep its wgmmas in flight: serialized
# (C7511), no spill. The ptxas loop finds no schedule with more registers on that role and does not
# fall back to handing S over, which ran this kernel at 0.38-0.43x Triton's (docs/triton-results.md, s30)
SERIALIZED = {"attn_alibi_sm90"}


@pytest.mark.slow
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
@pytest.mark.parametrize("form, name", E2E)
@pytest.mark.extended
def test_heldout_dump_solves_verifies_emits_and_compiles_clean(form, name, tmp_path):
    machine = load_machine("b200" if name.endswith("sm100") else "h100")
    graph, _ = load_ttgir(DATA / form / f"{name}.ttgir", split_rows="auto")
    schedule = solve(graph, machine, SolveOptions())
    assert schedule.stage == "joint" and schedule.optimal and schedule.complete
    assert verify(schedule, graph, machine) == []
    schedule, rc, err = emitted_and_built(schedule, machine, tmp_path / f"{name}.cu")  # as emit-cuda, its ptxas loop
    assert verify(schedule, graph, machine) == []
    assert rc == 0, err[-2000:]
    spills = {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)}
    assert spills <= {0}, err[-2000:]
    if name in SERIALIZED:  # (a test of the limitation: it fails once the kernel compiles clean)
        assert "serialized due to insufficient register resources" in err and "C7515" not in err, err[-2000:]
        return
    assert "C7515" not in err and "serialized" not in err, err[-2000:]


# -- the row statistic's binding: X [M, N] as the Triton kernel takes it -------------------------------

def _binding(path: Path):
    import importlib.util
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_row_stats_binding_takes_x_as_m_by_n_and_a_partial_last_column_block(tmp_path):
    """A loop without an mma walks the columns of the tile its carried row sums read (emit/tensors.py),
    so the binding takes `row_stats_kernel(X, MEAN, RSTD, M, N, stride_xm, eps)` with X [M, N] as the
    Triton launch passes it (not per-iteration tiles [I, M, 128]). Its zero fill past N only reaches
    sums (sum(x), sum(x * x): emit/ragged.py), so N need not be a multiple of 128; a loop that
    subtracts from the loaded tile (row_var's x - mean) still refuses one, naming the op."""
    import inspect
    from twill.emit import build_model
    from twill.emit.binding import binding_files
    machine = load_machine("h200")
    graph, _ = load_ttgir(DATA / "t36" / "prepipe" / "row_stats_sm90.ttgir", split_rows="auto")
    for path, text in binding_files(build_model(solve(graph, machine, SolveOptions()), machine),
                                    str(tmp_path / "row_stats.cu")).items():
        Path(path).write_text(text)
    mod = _binding(tmp_path / "row_stats.py")
    assert [p.name for p in inspect.signature(mod.run).parameters.values()
            if p.kind == p.POSITIONAL_OR_KEYWORD] == ["X", "MEAN", "RSTD", "M", "N", "stride_xm", "eps"]
    x = next(a for a in mod.SPEC["args"] if a["name"] == "X")
    assert x["dims"] == [["m", 64], ["loop", 128]] and not x["per_iteration"] and mod.layout(x) == "[*batch, M, L]"
    assert mod.SPEC["ragged"] and mod.SPEC["ragged_why"] == ""

    def meta(shape, dtype="float16"):
        return mod.Meta(tuple(shape), dtype, "cuda:0", True, 1 << 20)

    for shape, want in (((4096, 1024), (64, 1, 1024, 8)), ((4096, 1000), (64, 1, 1000, 8)),
                        ((2, 4096, 1000), (64, 2, 1000, 8))):
        plan = mod.resolve(mod.SPEC, {"X": meta(shape), "MEAN": None, "RSTD": None})
        assert (plan["tiles_m"], plan["batch"], plan["loop_extent"], plan["iters"]) == want, shape
        assert plan["shapes"]["MEAN"] == plan["shapes"]["RSTD"] == shape[:-1]
    # M = 4000 ends inside a 64-row tile: the rows are independent, so the last tile may be partial
    plan = mod.resolve(mod.SPEC, {"X": meta((4000, 1024)), "MEAN": None, "RSTD": None})
    assert (plan["tiles_m"], plan["m_extent"], plan["shapes"]["MEAN"]) == (63, 4000, (4000,))
    # rows of 1001 f16 (2002 bytes) are staged into rows of 1008 for TMA
    assert mod.resolve(mod.SPEC, {"X": meta((4096, 1001)), "MEAN": None, "RSTD": None})["layouts"][0][:2] == ("stage", 1008)
    for given, message in (
            ({"X": meta((4096, 1024), "float32")}, r"^X: expected torch\.float16"),
            ({"X": meta((4096, 1024)), "MEAN": meta((2048,), "float32")}, r"^X: gives M = 4096, but MEAN gives M = 2048")):
        with pytest.raises(mod.ArgumentError, match=message):
            mod.resolve(mod.SPEC, {"MEAN": None, "RSTD": None, **given})
    # row_var's second pass loops to its constexpr N = 4096 (its dump's `range(0, N, 64)`): other
    # lengths are refused before its partial tile could be (the Triton kernel would stop at 4096)
    l1 = _binding(Path(__file__).parent / "golden" / "seq" / "row_var_sm90.h200.L1.py")
    given = {"X": l1.Meta((256, 200), "float16", "cuda:0", True, 0), "total": l1.Meta((256,), "float32", "cuda:0", True, 0),
             "Var": None}
    with pytest.raises(l1.ArgumentError, match=r"^X: L = 200 \(its dimension 1\), but the kernel's loop runs to the "
                                               r"compile-time constant 4096"):
        l1.resolve(l1.SPEC, given)
    given["X"] = l1.Meta((256, 4096), "float16", "cuda:0", True, 0)
    assert l1.resolve(l1.SPEC, given)["iters"] == 64
