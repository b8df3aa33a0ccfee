"""`twill import` and `twill solve KERNEL.ttgir` end to end through the CLI."""
from pathlib import Path

from click.testing import CliRunner

from twill.tir import load_tir
from twill_cli.main import main

DATA = Path(__file__).resolve().parent / "data" / "ttgir"


def test_import_writes_a_graph_that_parses_and_solves(tmp_path):
    out = tmp_path / "attn.tir"
    r = CliRunner().invoke(main, ["import", str(DATA / "attn_fwd_tma_sm90.ttgir"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    graph = load_tir(out)
    assert sorted(op.opcode for op in graph.ops).count("mma") == 2
    assert {c.name for c in graph.carries} == {"m_i", "l_i", "acc"}
    r = CliRunner().invoke(main, ["solve", str(out), "--gpu", "h100", "--swp-only", "--format", "json", "-q"])
    assert r.exit_code == 0, r.output


def test_solve_reads_ttgir_directly():
    r = CliRunner().invoke(main, ["solve", str(DATA / "matmul_sm90.ttgir"), "--gpu", "h100", "--format", "json", "-q"])
    assert r.exit_code == 0, r.output
    assert '"optimal": true' in r.output


def test_import_of_a_missing_file_is_exit_2(tmp_path):
    r = CliRunner().invoke(main, ["import", str(tmp_path / "none.ttgir")])
    assert r.exit_code == 2 and "does not exist" in r.output


def test_a_dump_after_triton_s_pipeliner_imports_and_solves(tmp_path):
    out = tmp_path / "fp8.tir"
    r = CliRunner().invoke(main, ["import", str(DATA / "corpus" / "after" / "gemm_fp8_sm90.ttgir"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert [op.opcode for op in load_tir(out).ops] == ["load", "load", "mma"]
    r = CliRunner().invoke(main, ["solve", str(out), "--gpu", "h100", "--swp-only", "--format", "json", "-q"])
    assert r.exit_code == 0, r.output


def test_loops_in_sequence_import_whole_or_one_chosen_with_the_others_named(tmp_path):
    """The tutorial LayerNorm's three passes over a row (one row a program) import as a sequence of three loops
    (session 31: the row becomes 64 rows a CTA, docs/ttgir-import.md section 8; until then exit 2 asking for
    --loop); --loop picks one, warning at each loop left out; the variance loop's `cols < N` select is the
    tail's zero fill of its operand, no longer an error."""
    src = str(DATA / "triton39" / "layernorm.ttgir")
    r = CliRunner().invoke(main, ["import", src, "-o", str(tmp_path / "a.tir")])
    assert r.exit_code == 0 and "3 loops in sequence" in r.output and "Traceback" not in r.output
    assert (tmp_path / "a.tir").read_text().count("loop L") == 3
    r = CliRunner().invoke(main, ["import", src, "--loop", "2", "-o", str(tmp_path / "b.tir")])
    assert r.exit_code == 0 and "loop 0 is not imported" in r.output and "loop 1 is not imported" in r.output
    r = CliRunner().invoke(main, ["import", src, "--loop", "1", "-o", str(tmp_path / "c.tir")])
    assert r.exit_code == 0 and "loop 0 is not imported" in r.output and "loop 2 is not imported" in r.output
