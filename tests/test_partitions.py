"""The joint stage's search by role partitions (joint._by_partitions: the register relaxation proposes a
partition of the ops into roles, Yices checks the window with it pinned, an unsat core is a cut): it must
answer what the plain check of the same window answers, SAT or UNSAT, and the solve that takes it must
give the same schedule file as the solve that does not, byte for byte, every time."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from twill import joint
from twill.encoding import JointEncoding
from twill.errors import NoScheduleError, Status, TimeLimitReached
from twill.machine import load_machine
from twill.modulo import modulo_schedule
from twill.pipeline import SolveOptions, solve
from twill.problem import problem_for
from twill.tir import parse_tir

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import corpus  # noqa: E402


def _random(n, seed):
    try:
        return parse_tir(corpus.random_dag(n, seed), f"random_{n}_{seed}.tir")
    except IndexError:
        return None


# (ops, seed, registers per thread, I above the SWP bound): tight register limits, so that some
# partitions are refuted (cuts) and some windows have no schedule at all
CASES = [(n, seed, regs, extra) for n, seed in ((7, 1), (9, 5), (8, 3), (10, 2), (11, 4))
         for regs in (64, 96) for extra in (0, 7)]
# CI checks the windows at the SWP bound (both answers, cuts among them); `-m extended` also the ones 7 above it
QUICK = [c for c in CASES if c[3] == 0]


@pytest.mark.parametrize("cases", [QUICK, pytest.param([c for c in CASES if c[3]], marks=pytest.mark.extended)],
                         ids=["at-the-bound", "above-it"])
def test_partitions_answer_the_plain_check(cases):
    machine = load_machine("h100")
    answers, cut = set(), 0
    for n, seed, regs, extra in cases:
        graph = _random(n, seed)
        if graph is None:
            continue
        p = problem_for(graph, machine, SolveOptions(cache=False, registers=regs).model)[0]
        swp = modulo_schedule(p, None, None, earliest=False)
        ii = swp.ii + extra
        lmax = joint.window(p, ii, swp.length)
        with JointEncoding(p, ii, lmax) as enc:
            plain = enc.check()
        with JointEncoding(p, ii, lmax) as enc:
            found = joint._by_partitions(enc, p, None)
            cut += enc.checks > 1
            if found == Status.SAT:  # the model is a schedule of the window: its starts and roles pinned
                starts, roles = enc.starts(), enc.roles()
        if found == Status.SAT:
            with JointEncoding(p, ii, lmax) as enc:
                assert enc.check(starts=starts, roles=roles) == Status.SAT
        assert found == plain, (n, seed, regs, extra)
        answers.add(found)
    assert answers == {Status.SAT, Status.UNSAT} and cut >= 1, (answers, cut)


@pytest.mark.parametrize("n,seed,regs", [(10, 2, 96)])
def test_solve_by_partitions_gives_the_same_file(monkeypatch, n, seed, regs):
    """Role hints off (so that the first schedule at the SWP bound comes from the partitions, or from
    the plain ascent with BY_PARTITIONS off): the same file both ways, and twice the same."""
    machine = load_machine("h100")
    graph = _random(n, seed)
    options = SolveOptions(cache=False, registers=regs, time_limit=60)
    monkeypatch.setattr(joint, "role_hints", lambda p, slots: [])
    files = []
    for on in (True, True, False):
        monkeypatch.setattr(joint, "BY_PARTITIONS", on)
        try:
            files.append(solve(graph, machine, options).to_json())
        except (NoScheduleError, TimeLimitReached) as exc:
            files.append(type(exc).__name__)
    assert files[0] == files[1] == files[2]
    assert files[0].startswith("{")


def _least_plain(p, ii, lmax, lb):
    """The least L of the window by the plain search (roles free)."""
    with JointEncoding(p, ii, lmax) as enc:
        if enc.check() != Status.SAT:
            return None
        least, done = enc.minimize("L", lb, None, enc.makespan)
        assert done
        return least


@pytest.mark.extended  # 23 s on 2 cores; test_partitions_answer_the_plain_check keeps the method in CI
def test_least_length_by_partitions_is_the_plain_least():
    """The bisection on `L <= k` by partitions (cuts carried down from the satisfiable checks) answers
    the plain search's least L, its model has that length, and a refuted bound (a core that needed
    `L <= k`) is refuted by the plain check under the same bound too."""
    machine = load_machine("h100")
    compared, carried, above = 0, 0, 0
    for n, seed, regs, extra in CASES:
        graph = _random(n, seed)
        if graph is None:
            continue
        p = problem_for(graph, machine, SolveOptions(cache=False, registers=regs).model)[0]
        swp = modulo_schedule(p, None, None, earliest=False)
        ii = swp.ii + extra
        lmax = joint.window(p, ii, swp.length)
        lb = joint.length_floor(p, swp.length if extra == 0 else 0)
        plain = _least_plain(p, ii, lmax, lb)
        with JointEncoding(p, ii, lmax) as enc:
            cuts: list = []
            found = joint._by_partitions(enc, p, None, cuts=cuts)
            assert (found == Status.SAT) == (plain is not None), (n, seed, regs, extra)
            if found != Status.SAT:
                continue
            least, proven = joint._least_length_by_partitions(enc, p, lb, None, cuts)
            assert proven and enc.makespan() == least
            carried += any(k is not None for k, _ in cuts)
        assert least == plain, (n, seed, regs, extra, least, plain)
        compared += 1
        above += least > lb
        if least > lb:  # one below the least: refuted by partitions and by the plain check alike
            with JointEncoding(p, ii, lmax) as enc:
                assert enc.check(None, {"L": least - 1}) == Status.UNSAT
                assert joint._by_partitions(enc, p, None, length=least - 1) == Status.UNSAT
    assert compared >= 5 and carried >= 1 and above >= 1, (compared, carried, above)


def test_a_core_that_did_not_need_the_bound_holds_without_it():
    """check_partition under `L <= k`: where its core did not need the bound (core_bounded False), the
    core's relations alone are refuted with no bound at all; where it did, they are refuted under it."""
    machine = load_machine("h100")
    seen = set()
    for n, seed, regs, extra in CASES:
        graph = _random(n, seed)
        if graph is None:
            continue
        p = problem_for(graph, machine, SolveOptions(cache=False, registers=regs).model)[0]
        swp = modulo_schedule(p, None, None, earliest=False)
        ii = swp.ii + extra
        lmax = joint.window(p, ii, swp.length)
        lb = joint.length_floor(p, swp.length if extra == 0 else 0)
        from twill.pressure import role_partition
        verdict, blocks = role_partition(p, None)
        if verdict != "feasible" or blocks is None:
            continue
        with JointEncoding(p, ii, lmax) as enc:
            status, core = enc.check_partition(blocks, None, {"L": lb})
            bounded = enc.core_bounded
        if status != Status.UNSAT or not core:
            continue
        seen.add(bounded)
        with JointEncoding(p, ii, lmax) as enc:
            again, _ = enc.check_relations(core, None, {"L": lb} if bounded else None)
        assert again == Status.UNSAT, (n, seed, regs, extra, bounded)
    assert seen == {False, True}, seen  # both kinds of core occur


@pytest.mark.parametrize("n,seed,regs", [(10, 2, 96)])
def test_least_length_by_partitions_gives_the_same_file(monkeypatch, n, seed, regs):
    """Role hints off, the first schedule by partitions: the least L by partitions (LENGTH_BY_PARTITIONS)
    or by the plain search gives the same file, byte for byte, twice."""
    machine = load_machine("h100")
    graph = _random(n, seed)
    options = SolveOptions(cache=False, registers=regs, time_limit=60)
    monkeypatch.setattr(joint, "role_hints", lambda p, slots: [])
    monkeypatch.setattr(joint, "BY_PARTITIONS", True)
    files = []
    for on in (True, True, False):
        monkeypatch.setattr(joint, "LENGTH_BY_PARTITIONS", on)
        try:
            files.append(solve(graph, machine, options).to_json())
        except (NoScheduleError, TimeLimitReached) as exc:
            files.append(type(exc).__name__)
    assert files[0] == files[1] == files[2]
    assert files[0].startswith("{")
