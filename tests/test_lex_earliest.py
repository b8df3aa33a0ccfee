"""The lexicographic steps fix a start already at its earliest (joint.earliest_starts: the longest
dependence path from 0 and from the starts fixed before it) with no check or solve. That bound must
never exclude a schedule: every op of the solved schedule starts at or after it, given the starts
before it in op order, and the file is the one the steps give without it (Yices and CP-SAT alike),
with fewer checks or solves."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from twill import joint, joint_cpsat
from twill.cpsat_model import CpJoint
from twill.encoding import JointEncoding
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.tir import parse_tir
from twill.verify import verify

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import corpus  # noqa: E402  (bench/corpus.py: random layered DAGs)

CASES = [(9, 3, "h100"), (10, 7, "b200"), (11, 2, "h200"), (12, 5, "b200")]


def _zero(p, ii, fixed):  # the steps as before: only a start at 0 is fixed without a check
    return {t.name: 0 for t in p.tasks}


def _solve(n, seed, gpu, backend, monkeypatch, counted):
    """(the file, the earliest_starts calls' problems and I, the lexicographic checks or solves)."""
    graph, machine = parse_tir(corpus.random_dag(n, seed), f"random_{n}_{seed}.tir"), load_machine(gpu)
    seen, steps = [], [0]
    real = counted

    def earliest(p, ii, fixed):
        seen.append((p, ii))
        return real(p, ii, fixed)
    monkeypatch.setattr(joint, "earliest_starts", earliest)
    monkeypatch.setattr(joint_cpsat, "earliest_starts", earliest)
    plain_check, plain_min, plain_lex = JointEncoding.check, CpJoint.minimize, joint._lex
    in_lex = [False]

    def check(self, *a, **k):
        steps[0] += in_lex[0]
        return plain_check(self, *a, **k)

    def lex(enc, deadline):
        in_lex[0] = True
        try:
            return plain_lex(enc, deadline)
        finally:
            in_lex[0] = False

    def minimize(self, name, *a, **k):
        steps[0] += isinstance(name, tuple) and name[0] == "starts:lex"
        return plain_min(self, name, *a, **k)
    monkeypatch.setattr(JointEncoding, "check", check)
    monkeypatch.setattr(joint, "_lex", lex)
    monkeypatch.setattr(CpJoint, "minimize", minimize)
    s = solve(graph, machine, SolveOptions(cache=False, smt_backend=backend))
    assert s.stage == "joint" and s.optimal and verify(s, graph, machine) == []
    return s, seen, steps[0]


@pytest.mark.parametrize("backend", ["yices", "cpsat"])
def test_earliest_start_never_excludes_the_schedule_and_changes_no_file(backend, monkeypatch):
    fewer = 0
    for n, seed, gpu in CASES:
        with monkeypatch.context() as m:
            s, seen, steps = _solve(n, seed, gpu, backend, m, joint.earliest_starts)
        with monkeypatch.context() as m:
            plain, _, plain_steps = _solve(n, seed, gpu, backend, m, _zero)
        assert s.to_json() == plain.to_json(), (n, seed, gpu)
        assert steps <= plain_steps
        fewer += steps < plain_steps
        assert seen, "the lexicographic steps asked for no earliest start"
        p, ii = seen[0]
        assert ii == s.ii
        start = {o.name: o.start for o in s.ops}
        fixed: dict[str, int] = {}
        for t in p.tasks:  # in op order, as the steps fix them
            least = joint.earliest_starts(p, ii, fixed)
            assert all(start[v] >= least[v] for v in start), (n, seed, gpu, t.name)
            fixed[t.name] = start[t.name]
    assert fewer >= 1  # the bound fixed a start above 0 without a check somewhere


def test_earliest_starts_follow_the_longest_path():
    """By hand: a load l (variable latency) -> a (latency 1, plus the cross-role delay 2 it always pays),
    a -> b (latency 3), b -> c (latency 2), c -> a carried (distance 1, latency 4). At I = 10: a >= 3,
    b >= 6, c >= 8; with b fixed at 7, c >= 9; the carried edge raises a only past I (b fixed at 12)."""
    from types import SimpleNamespace as NS
    tasks = (NS(name="l", variable_latency=True),) + tuple(NS(name=v, variable_latency=False) for v in "abc")
    deps = tuple(NS(src=s, dst=d, latency=lat, distance=k)
                 for s, d, lat, k in [("l", "a", 1, 0), ("a", "b", 3, 0), ("b", "c", 2, 0), ("c", "a", 4, 1)])
    p = NS(tasks=tasks, deps=deps, cross=2)
    assert joint.earliest_starts(p, 10, {}) == {"l": 0, "a": 3, "b": 6, "c": 8}
    assert joint.earliest_starts(p, 10, {"b": 7}) == {"l": 0, "a": 3, "b": 7, "c": 9}
    assert joint.earliest_starts(p, 10, {"b": 12})["a"] == 8  # 12 + 2 + 4 - 10
    assert joint.earliest_starts(p, 10, {"a": 0})["a"] == 0  # a fixed start is never raised
