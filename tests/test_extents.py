"""The size arguments of an imported kernel that are its tensors' extents (twill/ttgir/extents.py):
recorded at import as `argument K {extent = loop}` (`extent loop = N` for a compile-time constant),
parsed and printed by twill.tir_arguments, and checked by the binding at each call
(binding_runtime._check_sizes): a K, M or N the caller passes must be the tensors' extent."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from twill.emit import build_model
from twill.emit.binding import binding_files
from twill.errors import InputError
from twill.machine import load_machine
from twill.schedule import Schedule
from twill.tir import parse_tir, print_tir
from twill.ttgir import load_ttgir

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "ttgir" / "corpus"
TTGIR = ROOT / "tests" / "data" / "ttgir"


# -- what the import records -----------------------------------------------------------------------

@pytest.mark.parametrize("form", ["prepipe", "after"])
@pytest.mark.parametrize("kernel, expected", [
    ("gemm_fp8_sm90", (("M", "m"), ("N", "n"), ("K", "loop"))),  # masks: rows < M, cols < N, k < K - k0
    ("gemm_bias_gelu_sm90", (("M", "m"), ("N", "n"), ("K", "loop"))),  # grouped program ids in the masks
    ("gemm_persistent_tma_sm100", (("M", "m"), ("N", "n"), ("K", "loop"))),  # the descriptors' shapes
    ("attn_gqa_fwd_sm90", (("N_KV", "loop"),)),  # the keys' loop; the queries are unmasked
    ("attn_causal_fwd_sm90", ()),  # the loop's bounds follow the query tile: nothing recorded
])
def test_the_corpus_records_which_arguments_bound_which_axis(kernel, form, expected):
    graph, _ = load_ttgir(CORPUS / form / f"{kernel}.ttgir")
    assert graph.extents == expected and graph.loop_extent is None


def test_an_attention_kernel_records_one_argument_for_the_queries_and_the_keys():
    graph, _ = load_ttgir(TTGIR / "warp_specialized" / "prepipe" / "fa_ws_triton39_sm100.ttgir")
    assert graph.extents == (("N", "m"), ("N", "loop"))


def test_a_compile_time_loop_bound_is_recorded_as_the_loops_extent():
    from twill.ttgir.sequence import import_sequence
    seq, _ = import_sequence((ROOT / "tests" / "data" / "seq" / "row_var_sm90.prepipe.ttgir").read_text(), "r.ttgir")
    assert [g.loop_extent for g in seq.graphs] == [4096, 4096] and not any(g.extents for g in seq.graphs)


def test_split_rows_keep_the_extents():
    graph, _ = load_ttgir(CORPUS / "prepipe" / "gemm_fp8_sm90.ttgir", split_rows=2)
    assert graph.extents == (("M", "m"), ("N", "n"), ("K", "loop"))


# -- the .tir attribute ----------------------------------------------------------------------------

HEAD = "kernel k\n{args}input q : f16[64,64] @smem\nloop {{\n  a = load : f16[64,64] @smem\n  s = mma q, a : f32[64,64]\n}}\n"


def test_the_attribute_parses_and_prints_canonically():
    text = HEAD.format(args="argument A = a\nargument N_CTX {extent = [loop, m]}\nargument K {extent=loop}\n"
                            "argument s\nextent loop = 4096\n")
    g = parse_tir(text, "x.tir")
    assert g.extents == (("N_CTX", "m"), ("N_CTX", "loop"), ("K", "loop")) and g.loop_extent == 4096
    printed = print_tir(g)
    assert "argument N_CTX {extent = [m, loop]}\nargument K {extent = loop}\nargument s\nextent loop = 4096\n" in printed
    assert parse_tir(printed, "x.tir") == g
    assert parse_tir(HEAD.format(args="argument M\n"), "x.tir").extents == ()  # the old form: no extents


@pytest.mark.parametrize("line, col, said", [
    ("argument M {extnt = m}", 13, "unknown argument attribute 'extnt'"),
    ("argument M {extent = rows}", 22, "unknown axis 'rows'"),
    ("argument M {extent = [m, m]}", 26, "axis 'm' listed twice"),
    ("argument M {extent = m, extent = n}", 25, "'extent' given twice"),
    ("argument M {extent = m", 23, "expected '}'"),
    ("extent m = 64", 8, "'extent m'"),
    ("extent loop = 0", 15, "an integer >= 1"),
    ("extent loop = 64\nextent loop = 64", 15, "a second 'extent loop' line"),
])
def test_a_bad_attribute_is_an_error_at_its_line_and_column(line, col, said):
    with pytest.raises(InputError) as e:
        parse_tir(HEAD.format(args=line + "\n"), "x.tir")
    d = e.value.diagnostics[0]
    assert said in d.message and d.span.col == col and d.span.line == 2 + line.count("\n")


def test_a_bad_attribute_exits_2_located(tmp_path):
    from click.testing import CliRunner
    from twill_cli.main import main
    path = tmp_path / "bad.tir"
    path.write_text(HEAD.format(args="argument K {extent = lop}\n"))
    r = CliRunner().invoke(main, ["solve", str(path), "--gpu", "h100"])
    assert r.exit_code == 2 and f"{path}:2:22: error: unknown axis 'lop'" in r.output and "Traceback" not in r.output


# -- the binding's checks --------------------------------------------------------------------------

EXTENTS = {"argument M\n": "argument M {extent = m}\n", "argument N\n": "argument N {extent = n}\n",
           "argument K\n": "argument K {extent = loop}\n"}


def _binding(tmp_path, edit):
    """The binding of the stored fp8 GEMM schedule (the corpus dump imported), its graph edited."""
    import json
    data = json.loads((ROOT / "tests" / "data" / "emit" / "triton_gemm_fp8_sm90.h100.json").read_text())
    data["graph"] = edit(data["graph"])
    s = Schedule.from_json(json.dumps(data))
    for path, text in binding_files(build_model(s, load_machine(s.machine)), str(tmp_path / "g.cu")).items():
        Path(path).write_text(text)
    spec = importlib.util.spec_from_file_location("binding_extents", tmp_path / "g.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _recorded(graph: str) -> str:
    for old, new in EXTENTS.items():
        graph = graph.replace(old, new)
    return graph


def _given(mod, m=256, n=384, k=512):
    meta = lambda shape, dtype: mod.Meta(tuple(shape), dtype, "cuda:0", True, 1 << 20)  # noqa: E731
    return {"A": meta((m, k), "float8_e4m3fn"), "B": meta((n, k), "float8_e4m3fn"), "C": None,
            "SCALE_A": meta((1,), "float32"), "SCALE_B": meta((1,), "float32")}


def test_the_imported_graph_is_the_stored_one_with_its_extents():
    import json
    stored = json.loads((ROOT / "tests" / "data" / "emit" / "triton_gemm_fp8_sm90.h100.json").read_text())["graph"]
    imported, _ = load_ttgir(TTGIR / "gemm_fp8_sm90.ttgir")
    assert imported.extents == parse_tir(_recorded(stored), "x.tir").extents


def test_sizes_equal_to_the_tensors_extents_or_omitted_pass(tmp_path):
    mod = _binding(tmp_path, _recorded)
    assert mod.SPEC["extents"] == [["M", "m"], ["N", "n"], ["K", "loop"]]
    plan = mod.resolve(mod.SPEC, _given(mod), sizes={"M": 256, "N": 384, "K": 512})
    assert (plan["tiles_m"], plan["tiles_n"], plan["iters"]) == (2, 3, 4)
    assert mod.resolve(mod.SPEC, _given(mod), sizes={"M": None, "N": None, "K": None}) == plan
    assert mod.resolve(mod.SPEC, _given(mod)) == plan


@pytest.mark.parametrize("sizes, said", [
    ({"K": 384}, r"^K = 384, but [AB]'s dimension 1 \(the loop's extent L\) is 512: the kernel runs over the "
                 r"tensors' whole extent, where the Triton kernel stops at K; pass every tensor sliced to 384 along L "
                 r"\(e\.g\. [AB]\[:, :384\]\.contiguous\(\)\), or K = 512$"),
    ({"M": 200}, r"^M = 200, but A's dimension 0 \(the rows M the grid walks\) is 256: .*A\[:200\]\.contiguous\(\)"),
    ({"N": 128, "M": 256}, r"^N = 128, but B's dimension 0 \(the columns N the grid walks\) is 384"),
    ({"K": 1024}, r"^K = 1024, but .* is 512: .*; pass K = 512, or tensors of 1024 along L$"),
])
def test_a_size_other_than_the_tensors_extent_is_an_argument_error(tmp_path, sizes, said):
    mod = _binding(tmp_path, _recorded)
    with pytest.raises(mod.ArgumentError, match=said):
        mod.resolve(mod.SPEC, _given(mod), sizes=sizes)


def test_the_generated_function_passes_its_size_arguments(tmp_path):
    mod = _binding(tmp_path, _recorded)
    text = (tmp_path / "g.py").read_text()
    assert "sizes={'M': M, 'N': N, 'K': K})" in text and "_ = (stride_am, stride_bn, stride_cm,)" in text
    with pytest.raises(mod.ArgumentError, match=r"^K = 64, but"):  # through call's checks, before torch or nvcc
        mod._plan(mod.SPEC, _given(mod), None, None, {"M": 256, "K": 64})


def test_without_extents_the_sizes_are_not_read(tmp_path):
    mod = _binding(tmp_path, lambda g: g)
    assert "extents" not in mod.SPEC
    assert mod.resolve(mod.SPEC, _given(mod), sizes={"K": 3})["iters"] == 4


def test_a_constant_loop_extent_needs_tensors_of_it(tmp_path):
    mod = _binding(tmp_path, lambda g: g.replace("argument stride_cm\n", "argument stride_cm\nextent loop = 512\n"))
    assert mod.SPEC["loop_extent"] == 512
    assert mod.resolve(mod.SPEC, _given(mod))["iters"] == 4
    with pytest.raises(mod.ArgumentError, match=r"^[AB]: L = 640 \(its dimension 1\), but the kernel's loop runs to "
                                                r"the compile-time constant 512"):
        mod.resolve(mod.SPEC, _given(mod, k=640))
