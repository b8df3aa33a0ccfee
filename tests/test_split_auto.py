"""`twill import --split-rows auto`: the rows of a Triton kernel's mma tiles on as many parts as
Triton's mma layout spreads them over warpgroups (warpsPerCTA = [4 G, 1]), else the graph as it is."""
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import nvcc, nvcc_compile
from twill.split import auto_parts
from twill.tir import load_tir, print_tir
from twill.ttgir import load_ttgir, row_warpgroups
from twill_cli.main import main

AFTER = Path(__file__).resolve().parent / "data" / "ttgir" / "corpus" / "after"


def _import(tmp_path, name, *more):
    out = tmp_path / f"{name}.tir"
    r = CliRunner().invoke(main, ["import", str(AFTER / f"{name}.ttgir"), "-o", str(out), *more])
    assert r.exit_code == 0, r.output
    return load_tir(out), r.output


def test_eight_warps_on_128_rows_split_into_two_64_row_parts(tmp_path):
    assert row_warpgroups((AFTER / "gemm_fp8_sm90.ttgir").read_text()) == 2  # warpsPerCTA = [8, 1]
    graph, output = _import(tmp_path, "gemm_fp8_sm90", "--split-rows", "auto")
    mmas = [op for op in graph.ops if op.opcode == "mma"]
    assert [op.type.shape for op in mmas] == [(64, 128), (64, 128)]
    assert [c.type.shape for c in graph.carries] == [(64, 128), (64, 128)]
    assert "--split-rows" not in output  # the import's hint about warpgroups is taken, not repeated
    explicit, _ = _import(tmp_path, "gemm_fp8_sm90", "--split-rows", "2")
    assert print_tir(graph) == print_tir(explicit)


def test_attention_splits_its_rows_and_keeps_k_and_v_whole(tmp_path):
    graph, _ = _import(tmp_path, "attn_gqa_fwd_sm90", "--split-rows", "auto")
    loads = {op.name: op.type.shape for op in graph.ops if op.opcode == "load"}
    assert sorted(loads.values()) == [(64, 128), (64, 128)]  # K and V, shared by both halves
    assert sum(op.opcode == "mma" for op in graph.ops) == 4


def test_four_warps_leave_the_graph_as_it_is(tmp_path):
    assert row_warpgroups((AFTER / "gemm_persistent_tma_sm90.ttgir").read_text()) == 1  # warpsPerCTA = [4, 1]
    auto, _ = _import(tmp_path, "gemm_persistent_tma_sm90", "--split-rows", "auto")
    plain, _ = _import(tmp_path, "gemm_persistent_tma_sm90")
    assert print_tir(auto) == print_tir(plain)


def test_rows_that_cannot_be_split_leave_the_graph_as_it_is(tmp_path):
    # SSD's chunk scan: 64-row tiles on 8 warps, and an mma reading a row tile as its second operand
    path = AFTER / "ssd_chunk_scan_sm90.ttgir"
    graph, _ = load_ttgir(path)
    assert row_warpgroups(path.read_text()) == 2 and auto_parts(graph, 2) == 1
    auto, _ = _import(tmp_path, "ssd_chunk_scan_sm90", "--split-rows", "auto")
    assert print_tir(auto) == print_tir(graph)


def test_parts_must_keep_a_multiple_of_64_rows():
    graph, _ = load_ttgir(AFTER / "gemm_fp8_sm90.ttgir")  # 128 rows
    assert [auto_parts(graph, g) for g in (1, 2, 3, 4)] == [1, 2, 1, 1]


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_bad_split_is_a_usage_error(tmp_path, value):
    r = CliRunner().invoke(main, ["import", str(AFTER / "gemm_fp8_sm90.ttgir"), "--split-rows", value])
    assert r.exit_code == 2 and "neither a count of at least 1 nor 'auto'" in r.output


@pytest.mark.slow
@pytest.mark.skipif(nvcc() is None, reason="needs nvcc")
def test_the_auto_split_gemm_solves_emits_and_compiles_without_spills(tmp_path):
    _import(tmp_path, "gemm_fp8_sm90", "--split-rows", "auto")
    tir, sched, cu = (tmp_path / f"gemm_fp8_sm90{e}" for e in (".tir", ".json", ".cu"))
    r = CliRunner().invoke(main, ["solve", str(tir), "--gpu", "h200", "--depth", "4", "-o", str(sched), "-q"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["emit-cuda", str(sched), "-o", str(cu)])
    assert r.exit_code == 0, r.output
    assert "ld_a0[4]" in cu.read_text() and "ld_b[4]" in cu.read_text()  # the 4-deep rings asked for
    rc, err = nvcc_compile(cu, ["-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-DTWILL_MAIN",
                                "-Xptxas", "-v"])
    assert rc == 0, err[-2000:]
    assert set(re.findall(r"(\d+) bytes spill stores", err)) == {"0"}
