"""The escalation past the SWP bound (joint.solve_joint): ranges of I while they pay, one I at a time once a
range costs more than twice as much an I as the check of one I (`joint._next_width`), and the same answer whichever way it goes."""
from __future__ import annotations

import pytest

from twill import joint
from twill.errors import Status
from twill.fileio import load_graph
from twill.machine import load_machine
from twill.modulo import modulo_schedule
from twill.pipeline import SolveOptions, build_problem

from conftest import ROOT


@pytest.mark.parametrize("width, span, per_ii, single, expected", [
    (1, 1, 0.5, None, (2, 0.5)),      # the first I past the bound alone, then a range of two
    (2, 2, 0.3, 0.5, (4, 0.5)),       # a range cheaper an I than one I: doubled
    (4, 4, 0.5, 0.5, (8, 0.5)),       # as cheap: doubled
    (2, 2, 0.9, 0.5, (4, 0.5)),       # dearer, but less than twice as dear (timings vary): doubled
    (2, 2, 0.3, 0.1, (4, 0.1)),       # three times as dear, but 0.6 s in all: doubled
    (2, 2, 1.4, 0.5, (0, 0.5)),       # dearer (a held-out attention's 2.8 s for two I's, 0.5 s for one): one I from now on
    (0, 1, 0.6, 0.5, (0, 0.6)),       # and it stays so, the cost of one I the last one's
    (8, 1, 0.2, 0.5, (16, 0.2)),      # a range the window cut to one I: measured as one, doubled on
])
def test_the_width_doubles_while_ranges_pay_and_is_one_for_good_once_they_do_not(width, span, per_ii, single, expected):
    assert joint._next_width(width, span, per_ii, single) == expected


def test_one_i_at_a_time_or_in_ranges_the_answer_is_the_same(monkeypatch):
    """attention_fwd_simple on b200 is unrealisable up to I = 194 (tests/test_encoding.py): escalated from 189
    with every range doubled, and with one I at a time, the search refutes the same I's and ends at the same
    schedule (I, L, starts, roles)."""
    p, _ = build_problem(load_graph(str(ROOT / "examples" / "attention_fwd_simple.tir")), load_machine("b200"),
                         SolveOptions())
    swp = modulo_schedule(p)
    results = {}
    for way, rule in (("ranges", lambda width, span, per_ii, single: (2 * max(width, 1), single)),
                      ("one at a time", lambda width, span, per_ii, single: (0, per_ii))):
        monkeypatch.setattr(joint, "_next_width", rule)
        r = joint.solve_joint(p, 188, swp.length, first_refuted=True, max_ii=260)
        results[way] = r
    a, b = results["ranges"], results["one at a time"]
    assert a.ii == b.ii == 195 and a.optimal and b.optimal
    assert (a.length, a.starts, a.roles) == (b.length, b.starts, b.roles)
    assert [ii for ii, s in a.tried if s == Status.UNSAT] == [ii for ii, s in b.tried if s == Status.UNSAT] \
        == list(range(188, 195))
