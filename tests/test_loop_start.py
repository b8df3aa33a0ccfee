"""Where the chosen loop starts (twill/ttgir/start.py; docs/ttgir-import.md, section 2, "Where the
loop starts"): a graph's loop runs from 0, so a lower bound that reads no program id and is not the
constant 0 (``range(64, N, 64)``, a kernel argument) is an error at the `scf.for`, never a kernel
that computes over the elements the loop skips. Each near miss imports."""
from __future__ import annotations

from pathlib import Path

import pytest

from twill.errors import InputError
from twill.ttgir import import_ttgir

DATA = Path(__file__).parent / "data" / "ttgir"
T = "tensor<64x64xf32, #blocked>"
T16 = "tensor<64x64xf16, #blocked>"
PTRS = "tensor<64x64x!tt.ptr<f16>, #blocked>"


def _kernel(lo: str = "%c0", extra: str = "") -> str:
    """A one-loop GEMM-like kernel over `for i = lo to n step 64`."""
    return f"""#blocked = #ttg.blocked<{{sizePerThread = [1, 8], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]}}>
module attributes {{"ttg.num-warps" = 4 : i32}} {{
  tt.func public @k(%X: !tt.ptr<f16>, %O: !tt.ptr<f16>, %n: i32, %lo: i32) {{
    %c0 = arith.constant 0 : i32
    %c32 = arith.constant 32 : i32
    %c64 = arith.constant 64 : i32
    %c128 = arith.constant 128 : i32
    %c64_ws = arith.constant {{async_task_id = array<i32: 0>}} 64 : i32
    %c0_ws = arith.constant {{async_task_id = array<i32: 0>}} 0 : i32
    %zero = arith.constant dense<0.000000e+00> : {T}
{extra}
    %xp = tt.splat %X : !tt.ptr<f16> -> {PTRS}
    %w = tt.load %xp : {PTRS}
    %r:1 = scf.for %i = {lo} to %n step %c64 iter_args(%acc = %zero) -> ({T}) : i32 {{
      %x = tt.load %xp : {PTRS}
      %d = tt.dot %x, %w, %acc : {T16} * {T16} -> {T}
      scf.yield %d : {T}
    }}
    %h = arith.truncf %r#0 : {T} to {T16}
    %op = tt.splat %O : !tt.ptr<f16> -> {PTRS}
    tt.store %op, %h : {PTRS}
    tt.return
  }}
}}
"""


def _refused(text: str, file: str = "k.ttgir", loop: int | None = None):
    with pytest.raises(InputError) as err:
        import_ttgir(text, file, loop=loop)
    (d,) = err.value.diagnostics
    return d


@pytest.mark.parametrize("lo, extra", [
    ("%c0", ""),
    ("%c0_ws", ""),  # a warp-specialized partition's constant, its attributes before the value
    ("%z", "    %z = arith.subi %c64, %c64 : i32"),  # 0 computed from constants
    ("%z", "    %z = arith.muli %n, %c0 : i32"),  # 0 times an argument
])
def test_a_loop_from_zero_imports(lo, extra):
    g, _ = import_ttgir(_kernel(lo, extra), "k.ttgir")
    assert "mma" in [op.opcode for op in g.ops]


@pytest.mark.parametrize("lo, extra, said", [
    ("%c64", "", "its lower bound %c64 is the constant 64 (iteration 1 of step 64)"),
    ("%c128", "", "its lower bound %c128 is the constant 128 (iteration 2 of step 64)"),
    ("%c64_ws", "", "its lower bound %c64_ws is the constant 64 (iteration 1 of step 64)"),
    ("%c32", "", "its lower bound %c32 is the constant 32 (no whole number of steps (64))"),
    ("%s", "    %s = arith.addi %c64, %c64 : i32", "its lower bound %s is the constant 128"),
    ("%lo", "", "its lower bound %lo is no compile-time constant (it reads lo)"),
    ("%s", "    %s = arith.muli %n, %c64 : i32", "its lower bound %s is no compile-time constant (it reads n)"),
])
def test_a_loop_from_anything_but_zero_is_an_error_at_the_loop(lo, extra, said):
    text = _kernel(lo, extra)
    line = next(k for k, ln in enumerate(text.splitlines(), 1) if "scf.for" in ln)
    for loop in (None, 0):
        d = _refused(text, loop=loop)
        assert d.severity == "error" and (d.span.line, d.span.col) == (line, 12), d
        assert "'scf.for' starts at a lower bound the graph does not represent" in d.message
        assert said in d.message, d.message
        assert "runs from 0" in d.message and "range(0, N, STEP)" in d.hint


def test_a_real_dump_from_64_was_imported_from_0_and_is_now_an_error_at_its_line(tmp_path):
    """Triton's `for k in range(64, K, 64)` in the tutorial GEMM's dump (the lower bound edited): until
    session 29 it imported to the same graph as the loop from 0."""
    from click.testing import CliRunner
    from twill_cli.main import main
    text = (DATA / "matmul_sm90.ttgir").read_text()
    loop = "scf.for %k = %c0_i32 to %K step %c64_i32"
    assert text.count(loop) == 1
    import_ttgir(text, "matmul.ttgir")
    for lo, said in (("%c64_i32", "is the constant 64 (iteration 1 of step 64)"),
                     ("%K", "is no compile-time constant (it reads K)")):
        bad = tmp_path / "from64.ttgir"
        bad.write_text(text.replace(loop, loop.replace("%c0_i32", lo)))
        res = CliRunner().invoke(main, ["import", str(bad)])
        assert res.exit_code == 2 and "Traceback" not in res.output, res.output
        assert "from64.ttgir:51:15: error: 'scf.for' starts at a lower bound the graph does not represent" \
            in res.output, res.output
        assert said in res.output
