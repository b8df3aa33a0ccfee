"""The load rings' depth after the solve (twill/emit/streams.py), opt-in (`load_rings="latency"`, emit-cuda
--load-rings latency): deep enough for the TMA latency where the shared memory left allows, never at the cost of a
CTA per SM, the TMA staging of an output or a sequence's one kernel; at most the loop's trip count. Off (the
default, "solved") the kernel is the one emitted without the option. CPU only: the stored LayerNorm sequence
(tests/data/seq) and test_occupancy's small GEMM (solved in about a second)."""
import dataclasses
import re
from pathlib import Path

import pytest

from click.testing import CliRunner

from test_occupancy import GEMM, _model
from twill.emit import build_model, seqfuse, streams
from twill.emit.cuda import Renderer
from twill.emit.model import EmitError
from twill.emit.sequence import loop_kernel
from twill.machine import load_machine
from twill.sequence import load_sequence_schedule
from twill.tir import parse_tir
from twill.verify import verify
from twill_cli.main import main

SEQ = Path(__file__).resolve().parent / "data" / "seq" / "layernorm_fwd_sm90.h200.json"
ON = {"load_rings": "latency"}  # the option that turns streams.py on


def _depths(r: Renderer) -> dict[str, int]:
    return {c.value: c.depth for c in r.p.channels.values() if c.kind == "tma"}


@pytest.fixture(scope="module")
def layernorm():
    return load_sequence_schedule(SEQ), load_machine("h200")


def test_a_row_loop_gets_a_ring_deep_enough_for_the_tma_latency(layernorm):
    seq, machine = layernorm
    s = seq.schedules[seq.names.index("L1")]  # I = 256, x: f16[64,128] (16 KiB), typical latency ~3000 cycles
    assert s.ii == 256 and {b.value: b.depth for b in s.buffers} == {"x": 2}
    model, text = loop_kernel(s, machine, **ON)
    r = Renderer(model)
    # ceil(3008 / 256) + 1 = 13 slots wanted, at most MAX_DEPTH (the loop's trip count is known only at run time)
    assert _depths(r) == {"x": streams.MAX_DEPTH} == {"x": 8}
    assert re.search(r"ld_x\[8\]\[8192\];  // load x: f16\[64,128\] @smem, ring of 8", text)
    assert "// Note: load rings deepened for the TMA latency (streams.py): x to 8." in text
    assert r.p.smem_bytes() <= r.p.smem_extras <= r.p.smem_limit()
    # the schedule is the one the solver proved (its buffers 2 deep): it still verifies, and kSmemModel counts it
    assert verify(s, parse_tir(s.graph_tir, "g.tir"), machine) == []
    assert "constexpr int kSmemModel = 32768;" in text
    # the CTAs per SM are those of the 2-deep ring (the option off)
    shallow = loop_kernel(s, machine)[0]
    assert _depths(Renderer(shallow)) == {"x": 2} and shallow.ctas_per_sm == model.ctas_per_sm


def test_each_loop_of_a_sequence_deepens_within_its_share_of_the_one_kernel(layernorm):
    seq, machine = layernorm
    loops = [(n, Renderer(loop_kernel(s, machine, smem_parts=3, **ON)[0])) for n, s in zip(seq.names, seq.schedules)]
    share = machine.limits.smem_bytes // 3 // 1024 * 1024
    assert all(r.p.smem_bytes() <= share for _, r in loops)
    assert [_depths(r) for _, r in loops] == [{"a": 4}, {"x": 4}, {"w": 3, "b": 3, "x": 3}]
    assert seqfuse.plan(loops).why_not == ""  # side by side they still fit one CTA


def test_the_normalizing_loop_keeps_its_two_ctas_an_sm_and_its_rings_grow_together(layernorm):
    seq, machine = layernorm
    s = seq.schedules[seq.names.index("L2")]  # no carry: two CTAs an SM (occupancy.default_limit)
    model = loop_kernel(s, machine, **ON)[0]
    r = Renderer(model)
    assert model.ctas_per_sm == 2 and r.p.smem_bytes() <= r.p.smem_extras
    depths = _depths(r)
    assert len(set(depths.values())) == 1 and depths["x"] > 2  # w, b and x of one iteration: one depth
    assert loop_kernel(s, machine)[0].ctas_per_sm == 2  # as with the option off


def test_the_rings_stop_at_the_loops_trip_count_where_the_graph_bounds_it(layernorm):
    seq, machine = layernorm
    s = seq.schedules[seq.names.index("L1")]
    graph = dataclasses.replace(parse_tir(s.graph_tir, "g.tir"), loop_extent=384)  # 3 iterations of 128 columns
    assert _depths(Renderer(build_model(s, machine, graph=graph, **ON))) == {"x": 3}


def test_a_kernel_whose_shared_memory_is_full_keeps_its_rings_and_its_ctas():
    # 2 CTAs an SM at depth 3 (96 KiB of rings each): a 4th slot would leave one CTA an SM
    m = _model(GEMM.format(d=3), **ON)
    r = Renderer(m)
    assert m.ctas_per_sm == 2 and _depths(r) == {"a0": 3, "a1": 3, "b": 3} and r.p.stream_note == ""
    # at depth 2 the two CTAs' TMA staging of the outputs takes what is left: no deeper ring either
    m = _model(GEMM.format(d=2), **ON)
    r = Renderer(m)
    assert m.ctas_per_sm == 2 and _depths(r) == {"a0": 2, "a1": 2, "b": 2} and set(r.p.staging) == {"out_acc0", "out_acc1"}


def test_a_gemm_at_one_cta_an_sm_takes_the_shared_memory_left():
    m = _model(GEMM.format(d=2), ctas_per_sm=None, **ON)  # the default: one CTA an SM for a GEMM
    r = Renderer(m)
    # I = 128 wants 8 slots (a 32 KiB iteration); 6 fit beside the staging of both outputs
    assert m.ctas_per_sm == 1 and _depths(r) == {"a0": 6, "a1": 6, "b": 6}
    assert set(r.p.staging) == {"out_acc0", "out_acc1"} and r.p.smem_bytes() <= r.p.smem_limit()
    # a machine with less shared memory: the rings keep the depth the schedule was solved at
    machine = load_machine("h200")
    two_deep = r.p.smem_bytes() - 4 * 32768  # the same Smem with 2 slots of each 32 KiB iteration
    small = dataclasses.replace(machine, limits=dataclasses.replace(machine.limits, smem_bytes=two_deep + 1024))
    r2 = Renderer(build_model(m.schedule, small, **ON))
    assert _depths(r2) == {"a0": 2, "a1": 2, "b": 2}


# -- off by default ----------------------------------------------------------------------------------

def test_off_by_default_the_kernel_is_the_one_emitted_without_the_option(layernorm):
    seq, machine = layernorm
    for s in seq.schedules:
        model, text = loop_kernel(s, machine)
        off = loop_kernel(s, machine, load_rings="solved")[1]
        assert model.load_rings == "solved" and off == text and "streams.py" not in text
        solved = {b.value: b.depth for b in s.buffers}
        assert all(solved[v] == d for v, d in _depths(Renderer(model)).items())
        assert loop_kernel(s, machine, **ON)[1] != text  # each loop of the sequence deepens with it on
    with pytest.raises(EmitError, match="load_rings is one of solved, latency, not 'deep'"):
        loop_kernel(seq.schedules[0], machine, load_rings="deep")


def test_emit_cuda_load_rings_latency_writes_the_deeper_rings_and_says_so(tmp_path):
    option = next(p for p in main.commands["emit-cuda"].params if p.name == "load_rings")
    assert tuple(option.type.choices) == streams.LOAD_RINGS and option.default == "solved"
    out = tmp_path / "k.cu"
    result = CliRunner().invoke(main, ["emit-cuda", str(SEQ), "-o", str(out), "--no-ptxas-loop", "-q",
                                       "--load-rings", "latency"])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "k.L1.cu").read_text()
    # in the one kernel of three loops, each loop within a third of the shared memory (smem_parts)
    assert "// Note: load rings deepened for the TMA latency (streams.py): x to 4." in text
    assert "ring of 4" in text and "ring of 2" not in text
    assert "ring of 4" in (tmp_path / "k.fused.cu").read_text()  # the one kernel takes the loops' rings
    off = tmp_path / "off.cu"
    assert CliRunner().invoke(main, ["emit-cuda", str(SEQ), "-o", str(off), "--no-ptxas-loop", "-q"]).exit_code == 0
    assert "streams.py" not in (tmp_path / "off.L1.cu").read_text()
    assert "ring of 4" not in (tmp_path / "off.fused.cu").read_text()
