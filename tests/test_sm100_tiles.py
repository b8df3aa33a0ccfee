"""sm_100a's register tiles: the register model against the layout emit-cuda holds them in (issues #21, #27).

On sm_100a a warpgroup holds a register tile a row per thread (tcgen05.ld's 32x32b layout, emit/fragments.py): a
128-row tile on every thread, a 64-row tile (tcgen05's M = 64) on lanes 0-15 of each warp only, all its columns on
each. So a 64-row tile takes the registers of 128 rows (registers.TILE_ROWS), an elementwise op's result can take
the registers of its own read of tensor memory (liveness.in_place_read), and a kernel of one row a program is
imported as 128 x 64 tiles on sm_100 (rowprog.TILES), where 64 x 128 f32 tiles took 128 registers a thread and
spilled (the held-out swiglu_bwd: 8472 bytes).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import nvcc
from twill.liveness import in_place_read
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.problem import problem_for
from twill.registers import register_bytes
from twill.tir import parse_tir
from twill.ttgir.rowprog import tile_of
from twill.ttgir.sequence import import_sequence

ROOT = Path(__file__).parent.parent
HELDOUT11 = Path(__file__).parent / "data" / "ttgir" / "heldout11" / "t39" / "prepipe"


def _chain(rows: int) -> str:
    """A row kernel of 64 columns: two f32 tiles live across a chain (x / (1 + exp x))."""
    return f"""kernel rowchain
loop {{
  x  = load      : bf16[{rows},64] @smem
  xf = convert x : f32[{rows},64]
  e  = exp xf    : f32[{rows},64]
  s  = add e     : f32[{rows},64] {{scalar = 1}}
  r  = recip s   : f32[{rows},64]
  y  = mul xf, r : f32[{rows},64]
  yb = convert y : bf16[{rows},64]
  store yb
}}
"""


def test_a_64_row_tile_takes_the_registers_of_128_rows_on_sm100a_only():
    assert register_bytes("sm_100a", (64, 128), 64 * 128 * 4) == 128 * 128 * 4  # 128 registers a thread
    assert register_bytes("sm_100a", (128, 128), 128 * 128 * 4) == 128 * 128 * 4
    assert register_bytes("sm_100a", (64, 128), 64 * 128 * 2) == 64 * 128 * 4  # bf16: 64 a thread (TRow16)
    assert register_bytes("sm_90a", (64, 128), 64 * 128 * 4) == 64 * 128 * 4  # wgmma's layout: every thread
    assert register_bytes("sm_100a", (64,), 64 * 4) == 128 * 4  # a row vector: one a thread, as before


def test_row_programs_are_128_rows_by_64_columns_on_sm100_and_unchanged_on_sm90():
    assert tile_of('module attributes {"ttg.target" = "cuda:100"}') == (128, 64)
    assert tile_of('module attributes {"ttg.target" = "cuda:90"}') == (64, 128)
    for arch, shape in (("sm100", "[128,64]"), ("sm90", "[64,128]")):
        path = HELDOUT11 / f"swiglu_bwd_{arch}.ttgir"
        graph = import_sequence(path.read_text(), str(path))[0]
        tiles = {str(list(op.type.shape)).replace(" ", "") for op in graph.ops if op.type and len(op.type.shape) == 2}
        assert tiles == {shape}, (arch, tiles)


def test_an_elementwise_read_of_tensor_memory_is_written_in_place_of_its_registers():
    """attention_bwd_blackwell on b200: P = exp2(S - lse) and dS = (dP - delta) * P read 64-row f32 tiles out of
    tensor memory (128 registers a thread each) into f16 results of their shape (64): each counts from its op's end,
    in the read's registers. A row reduction of S (another shape) would not."""
    graph = parse_tir((ROOT / "examples" / "attention_bwd_blackwell.tir").read_text(), "bwd.tir")
    p = problem_for(graph, load_machine("b200"), SolveOptions().model)[0]
    assert in_place_read(p, "p") and in_place_read(p, "ds")
    assert not any(in_place_read(p, t.name) for t in p.tasks if t.name not in ("p", "ds"))


def test_the_stored_blackwell_backward_verifies_with_64_row_tiles_counted_whole(tmp_path):
    """Its consumer0 holds P (64), dP read out of tensor memory (128) and dS (64, in place of dP's registers) with the
    reserve: 224 of 248. Counted whole, dS beside dP would be 288: ptxas compiles the golden with no spill."""
    from click.testing import CliRunner
    from twill_cli.main import main
    data = ROOT / "tests" / "data" / "emit" / "attention_bwd_blackwell.b200.json"
    result = CliRunner().invoke(main, ["emit-cuda", str(data), "-o", str(tmp_path / "k.cu"), "--no-ptxas-loop"])
    assert result.exit_code == 0, result.output


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
@pytest.mark.parametrize("rows", [64, pytest.param(128, marks=pytest.mark.extended)])  # 64: the case the model missed
def test_the_model_counts_what_ptxas_gives_each_role_of_a_row_kernel_on_sm100a(rows, tmp_path):
    """A chain of f32 tiles on b200, emitted without the ptxas loop: ptxas's registers for each computing role's code
    alone (ptxas.role_registers) lie within a granule (8) of what the model counts. For 64 rows the model counted
    64 and 96 (a tile's bytes over 128 threads) where ptxas gives 94 and 160: half the lanes hold every row."""
    from twill.emit import emit_cuda
    from twill.ptxas import role_registers
    from twill.ptxas_loop import model_registers
    machine = load_machine("b200")
    schedule = solve(parse_tir(_chain(rows), f"r{rows}.tir"), machine, SolveOptions(time_limit=60))
    text = emit_cuda(schedule, machine)
    need = model_registers(schedule, machine)
    computing = [r for r in schedule.roles if r.warps == 4]
    assert computing
    for role in computing:
        got = role_registers(text, "sm_100a", role.name)
        assert got is not None and abs(got - need[role.name]) <= 8, (role.name, got, need[role.name])
