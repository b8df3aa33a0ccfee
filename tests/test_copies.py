"""Tile copies (twill/emit/copies.py, emit-cuda --tile-copies): a second warpgroup of a persistent
GEMM's computing role takes every other tile; the rule that allows it, and the kernel it makes."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import nvcc, nvcc_compile
from test_occupancy import GEMM
from twill.emit import build_model
from twill.emit.cuda import render
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.tir import parse_tir

EXAMPLES = Path(__file__).parents[1] / "examples"


def _model(text: str, gpu: str = "h200", **kw):
    machine = load_machine(gpu)
    return build_model(solve(parse_tir(text, "g.tir"), machine, SolveOptions()), machine, **kw)


def test_a_gemm_gets_a_second_computing_warpgroup_only_when_asked():
    text = GEMM.format(d=4)
    one, two = _model(text), _model(text, tile_copies=True)
    assert one.tile_copies == 1 and "kTileCopies" not in render(one)
    assert two.tile_copies == 2 and two.threads == one.threads + 128
    copy = [g for g in two.warpgroups if g.copy]
    assert len(copy) == 1 and copy[0].roles == next(g.roles for g in two.warpgroups if not g.small and not g.copy)
    # the budgets fit the pool a CTA of 384 threads is launched with, none below the model's count
    assert 128 * sum(g.registers for g in two.warpgroups) <= two.threads * two.launch_registers
    assert min(g.registers for g in two.warpgroups if not g.small) == 240


def test_the_copies_take_turns_on_the_rings_and_stage_their_own_outputs():
    k = render(_model(GEMM.format(d=4), tile_copies=True))
    assert "constexpr int kTileCopies = 2;" in k
    # copy c takes rounds c, c + 2, ...; from its second round on it waits for the other's turn.
    # Each copy walks all the CTA's tiles, counting the ring positions of the ones it skips too
    # (TileIdx::pos), so the loop may run any number of iterations.
    loops = re.findall(r"for \(int t = blockIdx\.x, round = 0; t < args\.tiles; t \+= static_cast<int>\(gridDim\.x\), "
                       r"\+\+round\) \{ twill::TileIdx twill_tile = tile_at\(args, t, round\);  const int twill_n = "
                       r"args\.iters;  if \(round % 2 == (\d)\) \{ twill_tile\.pos = twill_pos;  if \(round > 0\) "
                       r"twill::named_sync\((\d+), 256\);  role_mma\(sm, tm, args, twill_n, twill_tile\); \}  "
                       r"twill_pos = \(twill_pos \+ twill_n\) % kPhasePeriod; \}", k)
    assert sorted(c for c, _ in loops) == ["0", "1"] and len({b for _, b in loops}) == 1
    turn = loops[0][1]
    assert f"if (!tile.last) twill::named_arrive({turn}, 256);" in k
    # the turn is handed on after the role's last ring wait of the tile, before its stores
    body = k[k.index("void role_mma("):]
    body = body[:body.index("\n}\n")]
    assert body.rindex("wait_full(") < body.index("named_arrive(") < body.index("store_out_")
    # each copy its own staging and named barrier
    assert re.search(r"unsigned char out_out_acc0\[2\]\[\d+\]\[\d+\];", k)
    assert "sm.out_out_acc0[tile.round % kTileCopies]" in k and "named_sync(1 + tile.round % kTileCopies, 128)" in k


@pytest.mark.parametrize("example", ["attention_fwd_hopper.tir"])
def test_kernels_with_several_computing_roles_keep_one_copy(example):
    m = _model((EXAMPLES / example).read_text(), tile_copies=True)
    assert m.tile_copies == 1 and not any(g.copy for g in m.warpgroups)


def test_sm100_keeps_one_copy():
    assert _model(GEMM.format(d=4), gpu="b200", tile_copies=True).tile_copies == 1


@pytest.mark.skipif(nvcc() is None, reason="needs nvcc")
def test_the_copied_kernel_compiles_without_spills(tmp_path):
    src = tmp_path / "copies.cu"
    src.write_text(render(_model(GEMM.format(d=4), tile_copies=True)))
    rc, err = nvcc_compile(src, ["-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v"])
    assert rc == 0, err[-2000:]
    assert re.findall(r"(\d+) bytes spill stores", err) and all(n == "0" for n in re.findall(r"(\d+) bytes spill stores", err))
    assert "serializ" not in err.lower()


def test_the_command_line_flag(tmp_path):
    from click.testing import CliRunner
    from twill_cli.main import main
    graph = tmp_path / "gemm.tir"
    graph.write_text(GEMM.format(d=4))
    outs = {}
    for flags in ([], ["--tile-copies"]):
        out = tmp_path / f"k{len(flags)}.cu"
        result = CliRunner().invoke(main, ["emit-cuda", str(graph), "--gpu", "h200", "-o", str(out), "-q",
                                           "--no-ptxas-loop", *flags])
        assert result.exit_code == 0, result.output
        outs[bool(flags)] = out.read_text()
    assert "kTileCopies" not in outs[False] and "constexpr int kTileCopies = 2;" in outs[True]
