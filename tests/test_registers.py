"""The register file's rule (twill/registers.py), the one the joint stage, verify and emit-cuda read."""
from __future__ import annotations

from dataclasses import replace

from twill.machine import load_machine
from twill.registers import (budget_ok, default_budget, fit_warpgroups, grow_budgets, launch_max, launch_registers,
                             producer_budget, register_file, register_pool)

LIM = load_machine("h100").limits


def test_launch_registers_divide_the_file_in_granules_up_to_the_launch_maximum():
    assert launch_max(LIM) == 256  # 255 addressable, allocated in granules of 8
    assert [launch_registers(LIM, 128 * w) for w in (1, 2, 3, 4)] == [256, 256, 168, 128]
    assert [register_pool(LIM, w) for w in (1, 2, 3, 4)] == [32768, 65536, 3 * 128 * 168, 65536]
    small = replace(LIM, registers_per_thread=100)  # a reduced budget (--registers 100)
    assert launch_max(small) == 104 and launch_registers(small, 128) == 104 and launch_registers(small, 512) == 128 - 24


def test_budgets_are_granules_within_the_bounds():
    assert budget_ok(LIM, 24) and budget_ok(LIM, 248) and not budget_ok(LIM, 256) and not budget_ok(LIM, 20)
    assert not budget_ok(LIM, 100)


def test_one_warp_roles_fill_a_warpgroup_at_their_largest_budget():
    used, pool = register_file(LIM, [(1, 24), (1, 64), (4, 200)])
    assert used == 128 * (64 + 200) and pool == register_pool(LIM, 2)


def test_growth_shares_the_remainder_among_the_roles_that_compute():
    """FA3's shape: a load warp at the minimum, two consumer warpgroups grown alike to fill the
    three warpgroups' pool (3 x 128 x 168 = 128 x (24 + 240 + 240))."""
    budgets = grow_budgets(LIM, [(1, 10, False), (4, 150, True), (4, 170, True)])
    assert budgets == [24, 232, 248]
    used, pool = register_file(LIM, [(1, 24), (4, 232), (4, 248)])
    assert used <= pool and used + 2 * 128 * 8 > pool  # one more round would not fit
    assert grow_budgets(LIM, [(1, 10, False), (4, 100, True), (4, 100, True)]) == [24, 240, 240]


def test_emit_defaults_and_the_fitting_to_the_pool():
    assert producer_budget(LIM) == 24
    assert default_budget(LIM, 1, producer=True) == 248  # capped by registers_per_thread
    assert default_budget(LIM, 3, producer=True) == (65536 - 128 * 24) // 384 // 8 * 8
    # a one-warp warpgroup gives up registers first, then the largest budgets a granule at a time
    assert fit_warpgroups(LIM, [240, 240, 240], small=[0]) == [24, 240, 240]
    assert fit_warpgroups(LIM, [168, 248, 248], small=[]) == [168, 168, 168]
    assert fit_warpgroups(replace(LIM, registers_per_sm=128 * 3 * 16), [24, 24, 24], small=[]) is None


# -- a value's registers: its fragment (registers.register_bytes) and what another role reads ----

def test_a_vector_takes_the_registers_of_its_fragment():
    """sm_90a: the 4 threads of a quad share each row of the wgmma layout, so an f32[64] row
    statistic is 2 registers a thread of a warpgroup (Rows<1>: 2 floats), 4x its bytes; a column
    vector [1, 128] is 64 (Cols<128>); a tile is its bytes. sm_100a: a row per thread."""
    from twill.liveness import regs_per_thread
    from twill.registers import register_bytes

    def per_thread(arch, shape, nbytes):
        return regs_per_thread(register_bytes(arch, shape, nbytes), 4)
    assert per_thread("sm_90a", (64,), 256) == 2 and per_thread("sm_90a", (128,), 512) == 4
    assert per_thread("sm_90a", (64, 1), 256) == 2 and per_thread("sm_90a", (1, 128), 512) == 64
    assert per_thread("sm_90a", (64, 128), 32768) == 64 and per_thread("sm_90a", (64, 128), 16384) == 32
    assert per_thread("sm_90a", (1,), 4) == 1  # a scalar is one register
    assert per_thread("sm_100a", (128,), 512) == 1 and per_thread("sm_100a", (64,), 256) == 1
    assert per_thread("sm_100a", (1, 64), 256) == 64
    assert register_bytes("sm_80", (64,), 256) == 256  # no table: the bytes


# h100 with the scratch measured on sm_90a (docs/model-fidelity.md; the bundled specs leave it off)
SCRATCH32 = replace(load_machine("h100"), limits=replace(LIM, register_scratch=32))

ROWS = """kernel rows
input q : f16[64,64] @smem
input k : f16[64,64] @smem
carry m : f32[64] = -inf
loop {
  s = mma q, k : f32[64,64] {cycles = 4}
  m_new = rowmax s, m : f32[64] {cycles = 2}
  yield m = m_new
}
"""


def test_a_row_statistic_counts_its_fragment_on_its_role():
    """By hand: at I = 4 (the mma's 4 cycles) s (f32[64,64]: 32 a thread) lives from its start
    until the rowmax has read it, [0, 6), so two iterations' copies meet at cycles 0 and 1; the
    row maximum m_new (f32[64]) is written in place of its carry m and takes 2 a thread (Rows<1>),
    not the 1 its bytes would give. The rowmax computes on the tile s, so its role keeps the
    machine's register_scratch (32) while it runs, [4, 6): cycles 0-1. With the reserve (32):
    32 + 2 x 32 + 2 + 32 = 130 at cycles 0-1, 32 + 32 + 2 = 66 at 2-3."""
    from twill.liveness import role_register_use
    from twill.pipeline import SolveOptions, solve
    from twill.tir import parse_tir
    from twill.verify import _problem, verify
    graph, machine = parse_tir(ROWS, "rows.tir"), SCRATCH32
    s = solve(graph, machine, SolveOptions())
    assert verify(s, graph, machine) == []
    p = _problem(s, graph, machine)
    assert p.task["m_new"].register_bytes == 1024 and p.task["s"].register_bytes == 64 * 64 * 4
    (role,) = [r for r in s.roles if "m_new" in r.ops]
    use = role_register_use(s, p, role)
    assert machine.limits.register_reserve == 32 and machine.limits.register_scratch == 32
    assert s.ii == 4 and [o.start for o in s.ops] == [0, 4]
    assert p.task["m_new"].scratch == 32 and p.task["s"].scratch == 0  # an mma keeps none
    assert use == ([(130, ["s (2x32)", "m_new (1x2)", "m_new scratch (1x32)"])] * 2
                   + [(66, ["s (1x32)", "m_new (1x2)"])] * 2)
    assert role.registers >= 130


def test_a_staged_value_streams_through_its_roles_only_reader():
    """A register value no mma reads, handed to another role, is read there in place from shared
    memory: one reader on that role streams it (no registers), two readers on one role hold it
    (ptxas loads it once for both). attention_fwd_simple: S feeds rowmax and exp2, no mma; P
    feeds the PV mma, so its staged copy is that mma's tile and the row sum holds it whatever."""
    from pathlib import Path

    from twill.liveness import imports, streamed_with
    from twill.options import ModelOptions
    from twill.problem import problem_for
    from twill.tir import load_tir
    graph = load_tir(Path(__file__).resolve().parent.parent / "examples" / "attention_fwd_simple.tir")
    p = problem_for(graph, SCRATCH32, ModelOptions())[0]
    assert ("s", "p") in imports(p) and ("p", "l_new") in imports(p)
    assert streamed_with(p, "s", "p") == ["m_new"]
    assert streamed_with(p, "p", "l_new") is None  # the PV mma reads P
    off = problem_for(graph, load_machine("h100"), ModelOptions())[0]  # no scratch: counted whole
    assert streamed_with(off, "s", "p") is None and all(t.scratch == 0 for t in off.tasks)
