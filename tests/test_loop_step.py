"""How the chosen loop steps and where it ends (twill/ttgir/steps.py; docs/ttgir-import.md, section 2,
"How the loop steps and where it ends"): real dumps edited textually. A step that moves a load by other
than its tile, an upper bound that is a constant, no kernel argument or a stride, and a constant offset
along the loop in a load's address are errors at their TTGIR line (exit 2); until session 30 each
imported to the same graph as the unedited dump. The unedited dumps and the consistent forms import."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from twill.ttgir import import_ttgir
from twill_cli.main import main

DATA = Path(__file__).parent / "data" / "ttgir"
MATMUL = DATA / "matmul_sm90.ttgir"
LOOP = "scf.for %k = %c0_i32 to %K step %c64_i32"
CONST = "%c64_i32 = arith.constant 64 : i32"


def _edit(text: str, loop: str | None = None, consts: str = "", body: tuple[str, str] | None = None) -> str:
    assert text.count(LOOP) == 1 and text.count(CONST) == 1
    out = text.replace(LOOP, loop) if loop else text
    out = out.replace(CONST, CONST + consts) if consts else out
    if body:
        assert out.count(body[0]) == 1
        out = out.replace(*body)
    return out


def _cli(tmp_path, text: str):
    bad = tmp_path / "edited.ttgir"
    bad.write_text(text)
    res = CliRunner().invoke(main, ["import", str(bad)])
    assert "Traceback" not in res.output, res.output
    return res


def _graph(text: str, file: str):
    g, _ = import_ttgir(text, file)
    return [(op.opcode, op.type) for op in g.ops]


C32 = "\n    %c32_i32 = arith.constant 32 : i32"
HALF = "\n    %c2_i32 = arith.constant 2 : i32\n    %h = arith.divsi %K, %c2_i32 : i32"
OFFSET = ("%a_23 = tt.splat %k : i32", "%kk = arith.addi %k, {c} : i32\n      %a_23 = tt.splat %kk : i32")


@pytest.mark.parametrize("loop, consts, body, line, said", [
    ("scf.for %k = %c0_i32 to %K step %c32_i32", C32, None, "52:15",
     "'scf.for' steps by 32, which moves the 'tt.load' at line 60 by 32 elements along its dimension 1 per "
     "iteration, but its tile is 64 elements along it: the loop reads elements twice"),
    ("scf.for %k = %c0_i32 to %K step %c128_i32", "", None, "51:15",
     "'scf.for' steps by 128, which moves the 'tt.load' at line 59 by 128 elements along its dimension 1 per "
     "iteration, but its tile is 64 elements along it: the loop skips elements between tiles"),
    ("scf.for %k = %c0_i32 to %K step %K", "", None, "51:15",
     "'scf.for' steps by %K, which is no positive compile-time constant"),
    ("scf.for %k = %c0_i32 to %h step %c64_i32", HALF, None, "53:15",
     "'scf.for' runs to %h, which is %h = 'arith.divsi' of K, c2_i32, no kernel argument"),
    ("scf.for %k = %c0_i32 to %sbk step %c64_i32", "", None, "51:15",
     "'scf.for' runs to %sbk, which is sbk, but the kernel uses sbk as a stride"),
    (None, "", (OFFSET[0], OFFSET[1].format(c="%c64_i32")), "60:15",
     "'tt.load' reads 64 elements along the loop past the loop's position (its dimension 1, 64-element tiles)"),
    (None, C32, (OFFSET[0], OFFSET[1].format(c="%c32_i32")), "61:15",
     "'tt.load' reads 32 elements along the loop past the loop's position"),
])
def test_an_edited_tutorial_gemm_is_an_error_at_its_line(tmp_path, loop, consts, body, line, said):
    text = MATMUL.read_text()
    import_ttgir(text, "matmul.ttgir")  # the dump as Triton wrote it imports
    res = _cli(tmp_path, _edit(text, loop, consts, body))
    assert res.exit_code == 2, res.output
    assert f"edited.ttgir:{line}: error: {said}" in res.output, res.output
    assert "hint:" in res.output and "How the loop steps and where it ends" in res.output


def test_the_loop_by_index_with_the_tile_in_the_address_imports_as_the_loop_by_the_tile():
    """`for i in range(0, tl.cdiv(K, 64))` with `i * 64` in the addresses is the same loop as the
    dump's `range(0, K, 64)`: the same graph. Floor division (K // 64) skips a partial last tile: an error."""
    text = MATMUL.read_text()
    cdiv = ("\n    %c1_i32 = arith.constant 1 : i32\n    %c63_i32 = arith.constant 63 : i32"
            "\n    %kp = arith.addi %K, %c63_i32 : i32\n    %n = arith.divsi %kp, %c64_i32 : i32")
    by_index = _edit(text, "scf.for %i = %c0_i32 to %n step %c1_i32", cdiv)
    by_index = by_index.replace("%a_22 = tt.splat %k", "%k = arith.muli %i, %c64_i32 : i32\n      %a_22 = tt.splat %k")
    assert _graph(by_index, "m.ttgir") == _graph(text, "m.ttgir")
    floor = by_index.replace("%n = arith.divsi %kp, %c64_i32", "%n = arith.divsi %K, %c64_i32")
    with pytest.raises(Exception) as err:
        import_ttgir(floor, "m.ttgir")
    assert "divides by 64 without rounding up" in str(err.value.diagnostics[0].message)


def test_a_pipelined_dump_with_its_step_edited_is_an_error(tmp_path):
    """The pointers the pipelined FP8 GEMM carries and advances by 128 each iteration (tt.addptr), its
    loop edited to step 64: twice the iterations over K, reading past it. The advance is the tile, so
    the error is the bound's: K over a step of 64 is no count of 128-element tiles."""
    path = DATA / "corpus" / "after" / "gemm_fp8_sm90.ttgir"
    text = path.read_text()
    loop = "scf.for %acc_76 = %c0_i32 to %K step %c128_i32"
    assert text.count(loop) == 1
    res = _cli(tmp_path, text.replace(loop, loop.replace("%c128_i32", "%c64_i32")).replace(
        "%c0_i32 = arith.constant 0 : i32", "%c0_i32 = arith.constant 0 : i32\n    %c64_i32 = arith.constant 64 : i32", 1))
    assert res.exit_code == 2, res.output
    assert ("error: 'scf.for' runs to %K, which is no cdiv(extent, 2) for a step of 64 over 128-element tiles"
            in res.output), res.output


def test_a_tma_dump_with_its_upper_bound_edited_is_an_error(tmp_path):
    """The persistent TMA GEMM (descriptor coordinates [off, k0]): its K loop bounded by a stride."""
    path = DATA / "corpus" / "prepipe" / "gemm_persistent_tma_sm100.ttgir"
    text = path.read_text()
    loop = "scf.for %k0 = %c0_i32 to %K step %c64_i32"
    assert text.count(loop) == 1
    import_ttgir(text, str(path), loop=1)
    res = _cli(tmp_path, text.replace(loop, loop.replace("step %c64_i32", "step %c128_i32")))
    assert res.exit_code == 2, res.output
    assert "error: 'scf.for' steps by 128, which moves the 'tt.descriptor_load'" in res.output, res.output


@pytest.mark.parametrize("path", sorted(str(p.relative_to(DATA)) for p in DATA.rglob("*.ttgir")
                                        if "corpus" in p.parts or ("matmul" in p.name and "heldout9" not in p.parts)))
# (batch 9's grouped and block-scaled matmuls are refused at their lines: tests/test_heldout9.py)
def test_the_corpus_dumps_import(path):
    """(The whole of tests/data/ttgir, default and --loop 0/1/2, was compared before and after: the same
    .tir or the same error everywhere.) The sm_100 causal attention after the pipeliner is the one
    corpus dump whose default import is an error (its two loops are not merged there), before and after."""
    res = CliRunner().invoke(main, ["import", str(DATA / path)])
    assert res.exit_code == (2 if path == "corpus/after/attn_causal_fwd_sm100.ttgir" else 0), res.output
