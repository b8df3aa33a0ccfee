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

    def counted(*args):
        status = plain(*args)
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
    """Where nothing is found at the SWP bound before the time limit (here: the exact ascent and the
    heuristic at the bound made to find nothing), the time limit returns the quick schedule found
    above it, a joint schedule that verify accepts, not marked optimal."""
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
    with pytest.raises(TimeLimitReached) as caught:
        solve(graph, machine, options)
    s = caught.value.schedule
    assert s is not None and s.stage == "joint" and not s.optimal and s.ii > first["ii"]
    assert verify(s, graph, machine) == []
