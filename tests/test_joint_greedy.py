"""The quick joint schedule (joint_greedy.py): where it finds one, the exact encoding accepts its starts
and roles (so the window is satisfiable), verify accepts the schedule, and the solve that starts from it
gives the same file as the solve that does not (same I, L, roles, starts: the tie-breaks leave one
schedule), every time."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from twill import joint
from twill.encoding import JointEncoding
from twill.errors import NoScheduleError, Status, TimeLimitReached
from twill.joint_greedy import joint_heuristic
from twill.machine import load_machine
from twill.modulo import modulo_schedule
from twill.pipeline import SolveOptions, solve
from twill.problem import problem_for
from twill.tir import parse_tir
from twill.verify import verify

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import corpus  # noqa: E402


def _random(n, seed):
    try:
        return parse_tir(corpus.random_dag(n, seed), f"random_{n}_{seed}.tir")
    except IndexError:
        return None


CASES = [(n, seed, regs) for n, seed in ((7, 1), (9, 5), (8, 3), (10, 2), (11, 4), (12, 6))
         for regs in (96, 255)]


def test_heuristic_schedules_are_schedules():
    machine = load_machine("h100")
    found = 0
    for n, seed, regs in CASES:
        graph = _random(n, seed)
        if graph is None:
            continue
        p = problem_for(graph, machine, SolveOptions(cache=False, registers=regs).model)[0]
        swp = modulo_schedule(p, None, None, earliest=False)
        for ii in (swp.ii, swp.ii + 9):
            lmax = joint.window(p, ii, swp.length)
            with JointEncoding(p, ii, lmax) as enc:
                got = joint_heuristic(p, ii, lmax, enc.slots)
                if got is None:
                    continue
                start, roles, _, length = got
                assert length <= lmax and min(start.values()) >= 0
                # the exact model agrees: these starts and roles are a schedule of the window
                assert enc.check(None, {"L": length}, roles=roles, starts=start) == Status.SAT, (n, seed, regs, ii)
                found += 1
    assert found >= 6, found


@pytest.mark.parametrize("n,seed,regs", [(9, 5, 255), (10, 2, 255), (12, 6, 96)])
def test_solve_from_the_heuristic_gives_the_same_file(monkeypatch, n, seed, regs):
    """Role hints off, so that the first schedule at the SWP bound comes from the heuristic (or, with it
    off, from the plain ascent): the same file both ways, twice the same, and verify accepts it."""
    machine = load_machine("h100")
    graph = _random(n, seed)
    options = SolveOptions(cache=False, registers=regs, time_limit=60)
    monkeypatch.setattr(joint, "role_hints", lambda p, slots: [])
    used = []
    plain = joint._heuristic_model

    def counted(*args, **kw):
        status = plain(*args, **kw)
        used.append(status)
        return status

    monkeypatch.setattr(joint, "_heuristic_model", counted)
    files = []
    for on in (True, True, False):
        monkeypatch.setattr(joint, "HEURISTIC", on)
        try:
            s = solve(graph, machine, options)
            assert verify(s, graph, machine) == []
            files.append(s.to_json())
        except (NoScheduleError, TimeLimitReached) as exc:
            files.append(type(exc).__name__)
    assert files[0] == files[1] == files[2]
    assert Status.SAT in used  # the heuristic's schedule was the first one


def test_time_limit_returns_the_quick_schedule_above_the_bound(monkeypatch):
    """Where nothing is found at the SWP bound before the time limit (here: the exact ascent, the quick
    check of L at its floor and the heuristic at the bound made to find nothing), the time limit returns
    the quick schedule found above it, a joint schedule that verify accepts, not marked optimal."""
    from twill import joint_greedy
    machine = load_machine("h100")
    graph = _random(10, 2)
    options = SolveOptions(cache=False, time_limit=20)
    first = {}
    plain = joint_greedy.joint_heuristic

    def not_at_the_bound(p, ii, *args, **kw):
        first.setdefault("ii", ii)
        return None if ii == first["ii"] else plain(p, ii, *args, **kw)

    monkeypatch.setattr(joint, "role_hints", lambda p, slots: [])
    monkeypatch.setattr(joint_greedy, "joint_heuristic", not_at_the_bound)
    monkeypatch.setattr(joint, "_first_length", lambda *a, **k: (Status.TIMEOUT, 0))
    monkeypatch.setattr(joint, "QUICK_FLOOR_SECONDS", 0.0)
    with pytest.raises(TimeLimitReached) as caught:
        solve(graph, machine, options)
    s = caught.value.schedule
    assert s is not None and s.stage == "joint" and not s.optimal and s.ii > first["ii"]
    assert verify(s, graph, machine) == []


REPAIR_CASES = [(8, 3, 64), (10, 2, 128), (11, 4, 96), (12, 6, 96), (14, 7, 128)]


def test_register_repair_finds_schedules_the_partitions_do_not():
    """Where a fixed partition's list schedules fail verify (registers, here with budgets of 64-128),
    `repair` (ops moved off the heavy role) finds schedules: each one verify accepts and the exact
    encoding accepts with its starts and roles pinned."""
    from twill.ims import heights
    from twill import joint_greedy as G
    machine = load_machine("h100")
    repaired = 0
    for n, seed, regs in REPAIR_CASES:
        graph = _random(n, seed)
        p = problem_for(graph, machine, SolveOptions(cache=False, registers=regs).model)[0]
        swp = modulo_schedule(p, None, None, earliest=False)
        ii, names = swp.ii, [t.name for t in p.tasks]
        lmax = joint.window(p, ii, swp.length)
        with JointEncoding(p, ii, lmax) as enc:
            orders = ((G._order(p, heights(p, ii)), False), (G._tight_order(p), True))
            for key in G.partitions(p, orders[0][0], enc.slots):
                numbered = G._slots(p, key, enc.slots)
                if numbered is None:
                    continue
                roles, warps = numbered
                plain = [G.list_schedule(p, ii, ops, roles, in_order) for ops, in_order in orders]
                if any(s is not None and G._assess(p, ii, s, roles, warps)[0][:2] == (0, 0) for s in plain):
                    continue
                got = G.repair(p, ii, lmax, enc.slots, roles, orders)
                if got is None:
                    continue
                start, moved, moved_warps, length = got
                result = joint.JointResult(ii, length, tuple((v, start[v]) for v in names),
                                           tuple((v, moved[v]) for v in names), tuple(sorted(moved_warps.items())),
                                           False, False, ())
                assert joint.handoff_violations(p, result) == [], (n, seed, regs)
                assert enc.check(None, {"L": length}, roles=moved, starts=start) == Status.SAT, (n, seed, regs)
                repaired += 1
    assert repaired >= 10, repaired


@pytest.mark.parametrize("n,seed,regs", [(11, 4, 96), (14, 7, 128)])
def test_least_length_by_the_heuristic_is_the_exact_answer(monkeypatch, n, seed, regs):
    """The heuristic's least L (down to the proven floor) as the first model: the solve's I and L are
    the exact search's without the heuristic (role hints off both ways, so the first model is the
    heuristic's), and the files are the same."""
    machine = load_machine("h100")
    graph = _random(n, seed)
    options = SolveOptions(cache=False, registers=regs, time_limit=60)
    monkeypatch.setattr(joint, "role_hints", lambda p, slots: [])
    lengths = []
    plain = joint._heuristic_model

    def counted(enc, p, lmax, deadline, floor=0, **kw):
        status = plain(enc, p, lmax, deadline, floor, **kw)
        lengths.append((enc.makespan() if status == Status.SAT else None, floor))
        return status

    monkeypatch.setattr(joint, "_heuristic_model", counted)
    files = []
    for on in (True, False):
        monkeypatch.setattr(joint, "HEURISTIC", on)
        s = solve(graph, machine, options)
        assert verify(s, graph, machine) == [] and s.optimal
        files.append(s.to_json())
    assert files[0] == files[1]
    assert lengths and lengths[0][0] is not None  # the heuristic's schedule was the first model
