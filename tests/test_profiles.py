"""Register and memory profiles by whole arrays (liveness.live_ring, Profile), against the definition they
replace: `instances_live` counted cycle by cycle, item by item (the code before session 40, restated here);
and the quick joint schedule bounded by a count of list schedules (joint_greedy.Budget), whose answer on the
corpus' random_n40_s8 is a schedule at the SWP bound and the proven floor of L: I and L optimal, verified."""
from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given, settings, strategies as st

from twill import joint
from twill.encoding import JointEncoding
from twill.errors import Status
from twill.joint_greedy import joint_heuristic
from twill.liveness import (imports, instances_live, live_intervals, live_ring, memory_use, read_bytes,
                            regs_per_thread, role_register_use, scratch, streamed_with, tmem_reads)
from twill.modulo import modulo_schedule
from twill.pipeline import SolveOptions
from twill.problem import problem_for
from twill.tir import parse_tir

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import corpus  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 400), st.integers(0, 900), st.integers(1, 97))
def test_live_ring_counts_instances(begin, length, ii):
    ring = live_ring(begin, begin + length, ii)
    assert [int(x) for x in ring] == [instances_live(begin, begin + length, t, ii) for t in range(ii)]


def _register_use_by_cycles(s, p, role):
    """role_register_use as it was written before the arrays: every cycle, every item."""
    lives = live_intervals(s, p)
    start = {o.name: o.start for o in s.ops}
    role_of = {o.name: o.role for o in s.ops}
    inputs = [(v, regs_per_thread(nbytes, role.warps)) for v, nbytes, readers in p.register_inputs
              if any(role_of[c] == role.name for c in readers)]
    out = []
    for t in range(s.ii):
        used = p.limits.register_reserve + sum(k for _, k in inputs)
        names = [f"{v} (input, {k})" for v, k in inputs]
        for v in role.ops:
            task = p.task[v]
            if v not in lives or task.space != "reg":
                continue
            n = instances_live(lives[v][3], lives[v][1], t, s.ii)
            if n:
                used += n * regs_per_thread(task.register_bytes, role.warps)
                names.append(f"{v} ({n}x{regs_per_thread(task.register_bytes, role.warps)})")
        for v, c in imports(p) + tmem_reads(p):
            if role_of[c] != role.name or (role_of[v] == role.name and p.task[v].space == "reg"):
                continue
            others = streamed_with(p, v, c) if p.task[v].space == "reg" else None
            if others is not None and not any(role_of[o] == role.name for o in others):
                continue
            n = instances_live(start[c], start[c] + max(p.task[c].cycles, 1), t, s.ii)
            if n:
                k = regs_per_thread(read_bytes(p, v, c), role.warps)
                used += n * k
                names.append(f"{v} read by {c} ({n}x{k})")
        for c, k in scratch(p):
            if role_of[c] != role.name:
                continue
            n = instances_live(start[c], start[c] + max(p.task[c].cycles, 1), t, s.ii)
            if n:
                used += n * k
                names.append(f"{c} scratch ({n}x{k})")
        out.append((used, names))
    return out


def _memory_use_by_cycles(s, p, space):
    lives = live_intervals(s, p)
    streams = [(t.name, t.bytes * t.depth) for t in p.tasks if t.streaming and t.space == space]
    fixed = dict(p.invariant_bytes).get(space, 0) + sum(b for _, b in streams)
    out = []
    for c in range(s.ii):
        used, names = fixed, [f"{n} ({b} B ring)" for n, b in streams]
        for t in p.tasks:
            if t.name not in lives or t.streaming:
                continue
            begin, end, staged, counts_from = lives[t.name]
            if t.space == space:
                n = instances_live(counts_from, end, c, s.ii)
            elif space == "smem" and staged:
                n = instances_live(begin, staged, c, s.ii)
            else:
                continue
            if n:
                used += n * t.bytes
                names.append(f"{t.name} ({n}x{t.bytes} B)")
        out.append((used, names))
    return out


def test_profiles_match_the_cycle_by_cycle_definition():
    """Every role's registers and both memories of solved examples (tensor memory, cross-role reads,
    scratch, register inputs among them), cycle by cycle, amounts and labels."""
    from conftest import solved_example
    from twill.verify import _problem
    compared = 0
    for name, gpu in (("attention_fwd_hopper.tir", "h100"), ("attention_fwd_blackwell.tir", "b200"),
                      ("attention_bwd_hopper.tir", "h100"), ("fig1.tir", "h100")):
        s, graph, machine = solved_example(name, gpu)
        p = _problem(s, graph, machine)
        for r in s.roles:
            assert list(role_register_use(s, p, r)) == _register_use_by_cycles(s, p, r), (name, r.name)
            compared += 1
        for space in ("smem", "tmem"):
            assert list(memory_use(s, p, space)) == _memory_use_by_cycles(s, p, space), (name, space)
    assert compared >= 8


def _corpus_problem(name):
    from twill.machine import parse_machine
    (case,) = [c for c in corpus.cases() if c.name == name]
    graph = parse_tir(case.tir, f"{name}.tir")
    machine = parse_machine(case.machine_yaml(), f"{name}.yaml")
    return graph, machine, problem_for(graph, machine, SolveOptions().model)[0]


def test_heuristic_at_the_floor_within_a_count_of_list_schedules():
    """At the SWP bound I0 (no joint schedule has a smaller I) the quick schedule reaches the proven floor
    of L (`joint.length_floor`) within joint.FLOOR_FIRST_SCHEDULES list schedules, whatever the time: so I
    and L are both optimal. The exact encoding accepts its starts and roles, and verify accepts it.
    (random_n40_s8, b200, did until session 40's sm_100a register rule counted its 64-row tiles at 128 rows'
    registers, as sm_100a holds them: I0 then overflows the register file; a GEMM chain of the corpus does.)"""
    graph, machine, p = _corpus_problem("gemm_chain_m128_x3_p2_h100")
    swp = modulo_schedule(p, None, None, earliest=False)
    ii, lmax = swp.ii, joint.window(p, swp.ii, swp.length)
    floor = joint.length_floor(p, joint.stage1_floor(swp.length, swp.length_floor))
    with JointEncoding(p, ii, lmax) as enc:
        slots = enc.slots
        found = joint_heuristic(p, ii, lmax, slots, None, propose=False, floor=floor,
                                near=floor + floor * joint.FLOOR_FIRST_NEAR // 100,
                                schedules=joint.FLOOR_FIRST_SCHEDULES)
        assert found is not None
        start, roles, warps, length = found
        assert length == floor
        assert enc.check(None, {"L": length}, roles=roles, starts=start) == Status.SAT
    result = joint.JointResult(ii, length, tuple((t.name, start[t.name]) for t in p.tasks),
                               tuple((t.name, roles[t.name]) for t in p.tasks), tuple(sorted(warps.items())),
                               True, True, ())
    assert joint.handoff_violations(p, result) == []
    # and the same answer with a count too small to reach it: nothing (not a different schedule)
    assert joint_heuristic(p, ii, lmax, slots, None, propose=False, floor=floor,
                           near=floor + floor * joint.FLOOR_FIRST_NEAR // 100, schedules=2) is None
