"""CP-SAT's register model (cpsat_model.CpJoint._registers, _budgets) counts what liveness.py (and so
verify.py, and the Yices families) counts: for a drawn schedule (starts over several I, so values
live in more than one copy, and roles), the least budgets CP-SAT allows are the budgets the pipeline
gives that schedule (joint.budgets' needs in whole granules). The register limits are lifted so
that every drawn schedule has budgets to compare. The graphs are the stored fixtures' (their problems
rebuilt at their scale, as verify does): the FP8 attention, whose hand-off schedule once needed 134
registers on a role CP-SAT counted under 120 (its fragment registers, the exp2s' scratch), and the
f16 attention and a held-out softmax with a bias (a register input)."""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twill.cpsat_model import CpJoint
from twill.joint import JointResult, schedule_of
from twill.liveness import role_register_use
from twill.machine import load_machine
from twill.registers import launched_warpgroups, register_file
from twill.schedule import Schedule
from twill.tir import parse_tir
from twill.verify import _problem

DATA = Path(__file__).resolve().parent / "data" / "emit"
FIXTURES = ["attention_fwd_fp8_hopper.h200", "attention_fwd_hopper.h200", "heldout_biased_softmax.h200"]
_PROBLEMS: dict = {}


def problem(name):
    if name not in _PROBLEMS:
        s = Schedule.from_json((DATA / f"{name}.json").read_text())
        p = _problem(s, parse_tir(s.graph_tir), load_machine(s.machine))
        # registers without limit, so that every drawn schedule has budgets and each is compared
        lim = replace(p.limits, registers_per_thread=1 << 13, registers_per_sm=1 << 30)
        # and the roles free (the FP8 fixture pins FA3's: its `groups`), so that any are drawn
        options = tuple((k, v) for k, v in p.options if k != "groups")
        _PROBLEMS[name] = (replace(p, limits=lim, options=options), s)
    return _PROBLEMS[name]


class RegistersOnly(CpJoint):
    """The roles and the registers, nothing else: any starts are a schedule of it."""

    FAMILIES = ("_roles", "_registers")


@st.composite
def drawn(draw, name):
    p, fixture = problem(name)
    ii = draw(st.integers(max(1, fixture.ii // 2), 2 * fixture.ii))
    starts = {t.name: draw(st.integers(0, 3 * ii)) for t in p.tasks}
    raw = [draw(st.integers(0, 3)) for _ in p.tasks]
    order = list(dict.fromkeys(raw))  # slots numbered in order of first use (CpJoint's symmetry breaking)
    slot = {t.name: order.index(r) for t, r in zip(p.tasks, raw)}
    wg = {}
    for w in set(slot.values()):
        needs = any(t.issue == "warp_group" for t in p.tasks if slot[t.name] == w)
        wg[w] = needs or draw(st.booleans())
    return p, ii, starts, slot, wg


def least_budgets(p, ii, starts, slot, wg):
    """CP-SAT's least budget per used slot with everything else fixed, or None (no budgets fit)."""
    lmax = max(starts[t.name] + t.cycles for t in p.tasks)
    model = RegistersOnly(p, ii, lmax)
    m = model.m
    for v in model.names:
        m.add(model.start[v] == starts[v])
        for w, x in enumerate(model.x[v]):
            m.add(x == int(slot[v] == w))
    for w, is_wg in wg.items():
        m.add(model.wg[w] == int(is_wg))
    m.minimize(sum(model.regs))
    solver = model.cp.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 60
    status = solver.solve(m)
    assert status in (model.cp.OPTIMAL, model.cp.INFEASIBLE), solver.status_name(status)
    if status == model.cp.INFEASIBLE:
        return None
    return {w: solver.value(model.regs[w]) for w in wg}


def pipeline_budgets(p, ii, starts, slot, wg):
    """The least budgets liveness allows (joint.budgets' needs, before it grows them), or None where they do
    not fit a thread's registers, the register file or the warps."""
    lim = p.limits
    warps = {w: lim.warp_group if wg[w] else 1 for w in wg}
    result = JointResult(ii, 0, tuple(starts.items()), tuple(slot.items()), tuple(sorted(warps.items())), True, True, ())
    base = Schedule(kernel=p.kernel, machine=p.machine, arch="", stage="joint", ii=ii, length=0, optimal=False, ops=())
    s = schedule_of(p, result, base)
    by_slot = {}
    order = sorted(set(slot.values()), key=lambda w: min(i for i, t in enumerate(p.tasks) if slot[t.name] == w))
    for w, r in zip(order, s.roles):
        need = max((u for u, held in role_register_use(s, p, r) if held), default=lim.min_registers)
        by_slot[w] = max(lim.min_registers, math.ceil(need / lim.register_granule) * lim.register_granule)
    if any(b > lim.registers_per_thread for b in by_slot.values()):
        return None
    used, pool = register_file(lim, [(warps[w], b) for w, b in by_slot.items()])
    big, packed = launched_warpgroups(lim, list(warps.values()))
    if used > pool or lim.warp_group * (big + packed) > lim.warps:
        return None
    return by_slot


@pytest.mark.parametrize("name", FIXTURES)
def test_cpsat_budgets_are_livenesss(name):
    @settings(max_examples=25, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(drawn(name))
    def check(case):
        want = pipeline_budgets(*case)
        have = least_budgets(*case)
        assert have == want

    check()
