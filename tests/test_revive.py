"""A Yices context whose check a deadline stopped is revived lazily (encoding.JointEncoding._live): at the
next check with time for it, to the same answers as a fresh encoding; with too little time, that check
answers TIMEOUT at once instead of re-asserting every formula past its deadline (on the corpus'
random_n130_s14 that took 10-12 s after each stopped check: docs/benchmarks.md, log, session 41)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from twill import joint
from twill.encoding import JointEncoding
from twill.errors import Status
from twill.machine import load_machine
from twill.modulo import modulo_schedule
from twill.pipeline import SolveOptions
from twill.problem import problem_for
from twill.tir import load_tir

EX = Path(__file__).resolve().parent.parent / "examples"


def _problem():
    graph, machine = load_tir(EX / "attention_fwd_simple.tir"), load_machine("b200")
    p = problem_for(graph, machine, SolveOptions().model)[0]
    swp = modulo_schedule(p, None, None, earliest=False)
    return p, swp.ii, joint.window(p, swp.ii, swp.length), swp.length


def _stopped(enc: JointEncoding) -> bool:
    """Stop checks of enc by ever shorter deadlines until one is interrupted (the context is then stale)."""
    for wait in (0.002, 0.005, 0.01, 0.02, 0.05):
        if enc.check(time.monotonic() + wait) == Status.TIMEOUT and enc._stale:
            return True
    return False


def test_a_stopped_context_answers_as_a_fresh_one_after_its_revival():
    p, ii, lmax, length = _problem()
    # attention_fwd_simple on b200: the SWP bound is refuted over its whole window (`twill explain`'s answer),
    # and every L is refuted below stage 1's L; a larger I has schedules
    with JointEncoding(p, ii, lmax) as fresh:
        expected = [fresh.check(None), fresh.check(None, {"L": length - 1})]
    with JointEncoding(p, ii, lmax) as enc:
        if not _stopped(enc):
            pytest.skip("no check was slow enough to be stopped")
        assert enc.check(None) == expected[0]
        assert not enc._stale
        assert enc.check(None, {"L": length - 1}) == expected[1]
    assert expected[0] == Status.UNSAT


def test_a_deadline_sooner_than_the_revival_answers_at_once():
    p, ii, lmax, _ = _problem()
    with JointEncoding(p, ii, lmax) as enc:
        if not _stopped(enc):
            pytest.skip("no check was slow enough to be stopped")
        enc._revive_seconds = 60.0  # as on a large graph: re-asserting everything takes a minute
        t0 = time.monotonic()
        assert enc.check(time.monotonic() + 5.0) == Status.TIMEOUT
        assert time.monotonic() - t0 < 1.0 and enc._stale  # nothing was re-asserted
        enc.bound("L", lmax)  # a fact asserted meanwhile is kept for the revival
        assert enc.check(None) == Status.UNSAT and not enc._stale


def test_the_escalation_builds_nothing_past_its_deadline(monkeypatch):
    """Past the SWP bound, with the deadline gone (as after a sequential-I check that it stopped), the
    escalation returns at once instead of building the next range's encoding (2 s on random_n60_s10, whose
    60 s limit then ended at 62.5 s)."""
    p, ii, _, length = _problem()
    built = []
    monkeypatch.setattr(JointEncoding, "_build", lambda self, *a: built.append(a) or (_ for _ in ()).throw(
        AssertionError("an encoding was built")))
    t0 = time.monotonic()
    assert joint.solve_joint(p, ii, length, deadline=time.monotonic(), first_refuted=True) is None
    assert not built and time.monotonic() - t0 < 1.0
