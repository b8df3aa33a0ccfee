"""`twill import --grow-rows K|auto`: K of a kernel's row tiles at once, each a part of its own,
sharing the loads without rows (a GEMM's B), so the SM loads fewer bytes per FLOP."""
import importlib.util
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import nvcc, nvcc_compile
from twill.split import auto_grow, grow_rows, split_rows
from twill.tir import load_tir, parse_tir, print_tir
from twill.ttgir import load_ttgir
from twill_cli.main import main

DATA = Path(__file__).resolve().parent / "data" / "ttgir" / "corpus"
AFTER, BEFORE = DATA / "after", DATA / "prepipe"

GEMM = """kernel g
input  s : f32[1]
carry  acc : f32[128,128] = 0
loop {
  a   = load          : f16[128,64] @smem
  b   = load          : f16[64,128] @smem
  acc_new = mma a, b, acc : f32[128,128]
  yield acc = acc_new
}
epilogue {
  out = mul acc, s : f32[128,128]
  c   = convert out : f16[128,128]
  output acc = c
}
"""


def _import(tmp_path, path, *more):
    out = tmp_path / f"{path.stem}.tir"
    r = CliRunner().invoke(main, ["import", str(path), "-o", str(out), *more])
    assert r.exit_code == 0, r.output
    return load_tir(out)


def _shapes(graph):
    return {op.name: op.type.shape for op in graph.ops + graph.epilogue.ops}


def test_two_row_tiles_share_one_b(tmp_path):
    graph = _import(tmp_path, AFTER / "gemm_persistent_tma_sm90.ttgir", "--grow-rows", "2")
    assert _shapes(graph) == {"a0": (128, 64), "a1": (128, 64), "b": (64, 128),
                              "acc_new0": (128, 128), "acc_new1": (128, 128)}
    mmas = [op for op in graph.ops if op.opcode == "mma"]
    assert [o.operands[1].name for o in mmas] == ["b", "b"]  # one load of B for both tiles
    assert [c.type.shape for c in graph.carries] == [(128, 128), (128, 128)]


def test_both_forms_of_the_dump_grow_alike(tmp_path):
    for name in ("gemm_persistent_tma_sm90", "gemm_fp8_sm90"):
        after = _import(tmp_path, AFTER / f"{name}.ttgir", "--grow-rows", "auto", "--split-rows", "auto")
        before = _import(tmp_path, BEFORE / f"{name}.ttgir", "--grow-rows", "auto", "--split-rows", "auto")
        assert print_tir(after) == print_tir(before)


def test_grow_then_split_equals_the_two_tiles_side_by_side():
    graph = parse_tir(GEMM, "g.tir")
    grown = grow_rows(graph, 2)
    assert _shapes(grown)["acc_new"] == (256, 128) and _shapes(grown)["b"] == (64, 128)
    assert _shapes(grown)["out"] == (256, 128)  # an epilogue op over the rows grows with them
    parts = split_rows(grown, 2)
    assert _shapes(parts)["a0"] == _shapes(parts)["a1"] == (128, 64)
    assert [c.type.shape for c in parts.carries] == [(128, 128), (128, 128)]
    assert grow_rows(graph, 1) is graph


@pytest.mark.parametrize("name, grow", [
    ("gemm_persistent_tma_sm90", 2),  # loads and mmas, nothing computed after the loop
    ("gemm_fp8_sm90", 2),             # a scale per tile: one op over each tile besides the conversion
    ("gemm_bias_gelu_sm90", 1),       # GELU after the loop: both tiles' epilogues would idle the tensor core
    ("gemm_w4a16_sm90", 1),           # dequantization in the loop
    ("attn_gqa_fwd_sm90", 1),         # softmax in the loop
    ("attn_bwd_dq_sm90", 1),
    ("ssd_chunk_scan_sm90", 1),
])
def test_auto_grows_plain_gemms_only(name, grow):
    assert auto_grow(load_ttgir(AFTER / f"{name}.ttgir")[0]) == grow


def test_auto_does_not_grow_a_tile_whose_accumulators_would_not_fit_one_warpgroup():
    # a 128 x 256 tile (Triton's two warpgroups of 64 rows): grown, each 128-row part would hold a
    # 128 x 256 f32 accumulator, 256 registers a thread
    dump = DATA.parent / "heldout3" / "t36" / "prepipe" / "mm_hints_sm90.ttgir"
    assert auto_grow(load_ttgir(dump)[0]) == 1


def test_auto_leaves_sm100_dumps_as_they_are(tmp_path):
    plain = _import(tmp_path, AFTER / "gemm_persistent_tma_sm100.ttgir")
    auto = _import(tmp_path, AFTER / "gemm_persistent_tma_sm100.ttgir", "--grow-rows", "auto")
    assert print_tir(auto) == print_tir(plain)


def test_auto_grow_counts_epilogue_work_per_tile():
    busy = GEMM.replace("  c   = convert out : f16[128,128]\n",
                        "  e   = exp out : f32[128,128]\n  c   = convert e : f16[128,128]\n")
    assert auto_grow(parse_tir(GEMM, "g.tir")) == 2
    assert auto_grow(parse_tir(busy, "g.tir")) == 1


def test_rows_under_a_mask_are_not_grown(tmp_path):
    r = CliRunner().invoke(main, ["import", str(BEFORE / "attn_causal_fwd_sm90.ttgir"), "--grow-rows", "2"])
    assert r.exit_code == 2, r.output
    assert re.search(r"attn_causal_fwd_sm90\.ttgir:\d+:\d+: error: .*masks the rows of a tile", r.output)
    assert "Traceback" not in r.output


@pytest.mark.parametrize("value", ["0", "many"])
def test_a_bad_grow_is_a_usage_error(value):
    r = CliRunner().invoke(main, ["import", str(AFTER / "gemm_fp8_sm90.ttgir"), "--grow-rows", value])
    assert r.exit_code == 2 and "neither a count of at least 1 nor 'auto'" in r.output


@pytest.mark.slow
@pytest.mark.skipif(nvcc() is None, reason="needs nvcc")
def test_the_grown_gemm_solves_emits_binds_and_compiles_without_spills(tmp_path):
    _import(tmp_path, AFTER / "gemm_persistent_tma_sm90.ttgir", "--grow-rows", "auto")
    tir, sched, cu = (tmp_path / f"gemm_persistent_tma_sm90{e}" for e in (".tir", ".json", ".cu"))
    r = CliRunner().invoke(main, ["solve", str(tir), "--gpu", "h100", "--depth", "4", "-o", str(sched), "-q"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["emit-cuda", str(sched), "-o", str(cu), "--binding", "torch", "-q"])
    assert r.exit_code == 0, r.output
    text = cu.read_text()
    assert text.count("ld_b[4]") == 1 and "ld_a0[4]" in text and "ld_a1[4]" in text  # B's ring shared
    rc, err = nvcc_compile(cu, ["-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-DTWILL_MAIN",
                                "-Xptxas", "-v"])
    assert rc == 0, err[-2000:]
    assert set(re.findall(r"(\d+) bytes spill stores", err)) == {"0"}
    # the binding: Triton's C is both tiles' rows, 256 a CTA; M = 384 ends inside the second CTA's
    # first tile, and its second tile lies wholly past M
    spec = importlib.util.spec_from_file_location("grown_binding", cu.with_suffix(".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    entry = cu.with_name(cu.stem + "_entry.cu").read_text()
    assert "p.a1_rows_step = 256;" in entry and "p.a1_rows_offset = 128;" in entry

    def meta(shape):
        return mod.Meta(tuple(shape), "float16", "cuda:0", True, 1 << 20)
    given = {"A": meta((384, 2048)), "B": meta((2048, 512)), "C": meta((384, 512))}
    plan = mod.resolve(mod.SPEC, given)
    assert (plan["tiles_m"], plan["tiles_n"], plan["m_extent"]) == (2, 4, 384)
