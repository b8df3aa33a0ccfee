"""Bounds on start differences (twill/gaps.py) and the live-count terms the registers and memory families
leave out or count as 1 with them (joint_terms.Encoding.live_during): the same constraints, so the same
answers, schedule for schedule."""
from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from twill import encoding
from twill.gaps import Gaps
from twill.joint import window
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.problem import problem_for
from twill.tir import parse_tir

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import corpus  # noqa: E402  (bench/corpus.py: random layered DAGs)


def _graph(n, seed):
    try:
        return parse_tir(corpus.random_dag(n, seed), f"random_{n}_{seed}.tir")
    except IndexError:  # (the generator needs enough computed ops for its carries)
        assume(False)


@settings(max_examples=6, deadline=None)
@given(n=st.integers(7, 11), seed=st.integers(0, 10_000), gpu=st.sampled_from(["h100", "b200"]),
       regs=st.sampled_from([None, 96, 128]))
def test_same_schedule_with_and_without_the_gaps(n, seed, gpu, regs):
    """The file with the left-out terms is the file without, byte for byte (and both solves end the
    same way where there is no schedule)."""
    graph, machine = _graph(n, seed), load_machine(gpu)
    options = SolveOptions(cache=False, registers=regs)
    answers = []
    for on in (True, False):
        encoding.GAPS = on
        try:
            answers.append(solve(graph, machine, options).to_json())
        except Exception as exc:  # noqa: BLE001 (a NoScheduleError, the same both ways)
            answers.append(f"{type(exc).__name__}: {exc}")
        finally:
            encoding.GAPS = True
    assert answers[0] == answers[1]


@pytest.mark.parametrize("name,gpu", [("attention_fwd_hopper.tir", "h100"), ("attention_fwd_blackwell.tir", "b200")])
def test_bounds_hold_on_a_solved_schedule(name, gpu):
    from conftest import solved_example
    from twill.verify import _problem
    schedule, graph, machine = solved_example(name, gpu)
    p = _problem(schedule, graph, machine)
    start = {o.name: o.start for o in schedule.ops}
    gaps = Gaps(p, schedule.ii, window(p, schedule.ii, schedule.length))
    assert gaps.feasible
    for a, b in itertools.permutations(start, 2):
        assert gaps.lo(a, b) <= start[a] - start[b] <= gaps.hi(a, b), (a, b)


def test_bounds_are_the_longest_paths():
    """Every dependence of distance 0 bounds its ops' difference from below; no bound crosses."""
    text = corpus.random_dag(8, 1)
    p = problem_for(parse_tir(text, "g.tir"), load_machine("h100"), SolveOptions().model)[0]
    gaps = Gaps(p, 10_000, 40_000)
    for d in p.deps:
        if d.distance == 0:
            assert gaps.lo(d.dst, d.src) >= d.latency
    for t in p.tasks:
        for u in p.tasks:
            assert gaps.lo(t.name, u.name) <= gaps.hi(t.name, u.name)


@pytest.mark.parametrize("lo,hi", [(10, 10), (7, 13)])
def test_left_out_terms_by_enumeration(lo, hi):
    """`may_cover` is False only where no point - begin and point - end in the span make the k-th
    term 1 at any I of the encoding, by enumeration of small spans (and it is False somewhere)."""
    from twill.joint_terms import Encoding

    class Fake:  # the fields may_cover reads
        pass

    e = Fake()
    e.lo, e.hi = lo, hi
    left_out = kept = 0
    for a_lo, b_lo in itertools.product(range(-25, 26, 5), repeat=2):
        for a_w, b_w in itertools.product((0, 3, 11), repeat=2):
            span = (a_lo, a_lo + a_w, b_lo, b_lo + b_w)
            for k in range(-3, 4):
                held = {k * ii <= a and b < k * ii for ii in range(lo, hi + 1)
                        for a in range(span[0], span[1] + 1) for b in range(span[2], span[3] + 1)}
                if Encoding.may_cover(e, k, span):
                    kept += 1
                else:
                    left_out += 1
                    assert held == {False}, (k, span)
    assert left_out and kept


def test_a_range_of_I_answers_the_same():
    """attention_fwd_simple on b200 has no joint schedule from its SWP bound (121) to 194: ranges of I
    refuted at once, with and without the left-out terms (each bound taken at the range's top), and
    its least I, 195, satisfiable both ways within 195..200."""
    from twill.encoding import JointEncoding
    from twill.errors import Status
    from twill.joint import copies
    from twill.modulo import modulo_schedule
    from twill.tir import load_tir
    p = problem_for(load_tir(ROOT / "examples" / "attention_fwd_simple.tir"), load_machine("b200"),
                    SolveOptions().model)[0]
    swp = modulo_schedule(p)
    for on in (True, False):
        encoding.GAPS = on
        try:
            for lo, hi, want in ((122, 136, Status.UNSAT), (181, 194, Status.UNSAT), (195, 200, Status.SAT)):
                with JointEncoding.over(p, lo, hi, copies(swp.length, lo)) as enc:
                    assert enc.hi == hi or want == Status.UNSAT
                    assert enc.check() == want, (on, lo, hi)
        finally:
            encoding.GAPS = True
