"""The implied register items (encoding.IMPLIED: the register file averaged over a period, and the
carried values and an op's own value at each check point) remove no schedule, and they are what
refutes the SWP bound of a corpus graph at once.

(a) Hypothesis draws small loops (test_families' generator) on a toy machine whose register file
    and 72-register budgets bind. Every schedule one op's start (by up to 3) from the joint schedule
    or from stage 1's, under every role configuration, that `verify` accepts with the budgets the
    joint stage would give it, must stay satisfiable in the encoding with its starts and roles
    pinned: a cut that removes a schedule fails here (it does with the average doubled, or 8 more
    registers in the carried items' reserve).
(b) attn_bwd_m64_d64_x4_h100 of bench/corpus.py: the whole-window check at its SWP bound is
    refuted in well under a second with the items (docs/benchmarks.md, session 27b), where without
    them Yices had not answered in 20 s.
"""
from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from test_families import TIGHT, Loop, loops, role_configs
from twill.encoding import IMPLIED, JointEncoding
from twill.errors import NoScheduleError, Status
from twill.joint import budgets, window
from twill.machine import load_machine, parse_machine
from twill.modulo import modulo_schedule
from twill.pipeline import SolveOptions, build_problem, solve
from twill.schedule import Role
from twill.tir import load_tir, parse_tir
from twill.verify import _problem, verify

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import corpus  # noqa: E402  (bench/corpus.py: the generated corpus)

# test_families' toy machine with 72 registers per thread (a role of a warpgroup holds two of the
# 64x64 f32 values with the reserve, exactly its most) and a register file of 20480
# (the launch then gives each thread less than the maximum once a third warpgroup is used)
SMALL_FILE = """\
name: toy
arch: sm_90a
clock_ghz: 1.0
source: "a test machine with small integer costs and a small register file"
limits: {{warps: 12, warp_group: 4, registers_per_thread: 72, registers_per_sm: 20480,
          smem_bytes: 65536, register_reserve: 8, min_registers: 16, register_granule: 8}}
units: {{{units}}}
communication: {{cross_warp_cycles: 1}}
ops: {{}}
"""


def _machine(loop: Loop):
    return parse_machine(SMALL_FILE.format(units=", ".join(f"u{i}: {c}" for i, c in enumerate(loop.caps))),
                         "toy.yaml")


def test_the_implied_items_are_the_registers_cuts():
    assert IMPLIED == {("registers", "average"), ("registers", "carried")}


def _configs(s, loop: Loop, p):
    """(op -> role slot, s under it) for every role configuration of test_families (each partition
    of the ops into roles, each role one warp where all its ops may run on one, else a warpgroup)."""
    names = [o.name for o in s.ops]
    for blocks, warps in role_configs(loop):
        slot = {names[v]: k for k, b in enumerate(blocks) for v in b}
        roles = tuple(Role(f"r{k}", w, 0, tuple(names[v] for v in b)) for k, (b, w) in enumerate(zip(blocks, warps)))
        cross = tuple(dict.fromkeys((d.src, d.dst) for d in p.deps if slot[d.src] != slot[d.dst]))
        yield slot, replace(s, ops=tuple(replace(o, role=f"r{slot[o.name]}") for o in s.ops), roles=roles,
                            cross_role_edges=cross)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(loops(n_ops=(3, 4), **TIGHT))
def test_no_schedule_verify_accepts_is_cut_off(loop):
    """Starts from the joint schedule and from stage 1's (which ignores roles), each start one op
    moved by up to 3, under every role configuration: each schedule verify accepts, with the budgets
    the joint stage would give it, is satisfiable in the encoding with its starts and roles pinned."""
    graph, machine = parse_tir(loop.tir(), "fam.tir"), _machine(loop)
    try:
        joint = solve(graph, machine, SolveOptions(max_ii=40, cache=False))
    except NoScheduleError:
        return
    swp = replace(solve(graph, machine, SolveOptions(swp_only=True, max_ii=40, cache=False)), stage="joint",
                  ii=joint.ii)
    p = _problem(joint, graph, machine)
    lmax = window(p, joint.ii, joint.length)
    seen, checked = set(), 0
    with JointEncoding(p, joint.ii, lmax) as enc:
        for base in (joint, swp):
            for o in base.ops:
                for delta in (0, -3, -2, -1, 1, 2, 3):
                    moved = tuple(replace(x, start=x.start + delta) if x is o else x for x in base.ops)
                    key = tuple(x.start for x in moved)
                    if key in seen or min(key) < 0 or max(x.start + x.cycles for x in moved) > lmax:
                        continue
                    seen.add(key)
                    timed = replace(base, ops=moved, length=max(x.start + x.cycles for x in moved))
                    for slots, s in _configs(timed, loop, p):
                        s = replace(s, roles=budgets(p, s))
                        if verify(s, graph, machine):
                            continue
                        starts = {x.name: x.start for x in moved}
                        status = enc.check(time.monotonic() + 30, starts=starts, roles=slots)
                        assert status == Status.SAT, (starts, slots)
                        checked += 1
    assert checked >= 1  # the joint schedule itself, at least


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    return {c.name: (tir, yaml) for c, tir, yaml in corpus.write(d)}


def test_the_register_file_refutes_the_swp_bound_of_a_four_part_backward(corpus_files):
    tir, yaml = corpus_files["attn_bwd_m64_d64_x4_h100"]
    graph, machine = load_tir(str(tir)), load_machine(str(yaml))
    p, _ = build_problem(graph, machine, SolveOptions(), None)
    swp = modulo_schedule(p, None, 30, earliest=False)
    with JointEncoding(p, swp.ii, window(p, swp.ii, swp.length)) as enc:
        assert enc.check(time.monotonic() + 10) == Status.UNSAT
