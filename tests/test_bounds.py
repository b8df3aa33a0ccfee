"""Stage 1's shortcuts against the brute force of test_modulo: the length bound never exceeds the
least L, the greedy schedule is a real schedule, and the search without the earliest-starts
tie-break (what a full solve runs) finds the same optimal I and L."""
from __future__ import annotations

import pytest

from test_modulo import GRAPHS, HARD, as_problem, brute_force, capacity_ok, deps_ok, length
from twill.greedy import greedy_schedule
from twill.modulo import _heads_tails, length_bound, modulo_schedule

CASES = GRAPHS + HARD
IDS = [f"seed{i}" for i in range(len(GRAPHS))] + [f"hard{i}" for i in range(len(HARD))]


@pytest.mark.parametrize("g", CASES, ids=IDS)
def test_length_bound_is_a_lower_bound_and_greedy_is_a_schedule(g):
    p = as_problem(g)
    ii, best = brute_force(g)
    assert length_bound(p) <= best
    head, tail = _heads_tails(p)
    for at in (ii, ii + 1, ii + 3):
        found = greedy_schedule(p, at, head, tail)
        if found is None:
            continue
        starts = [found[1][f"v{i}"] for i in range(g.n)]
        assert deps_ok(g, at, starts) and capacity_ok(g, at, starts)
        assert min(starts) == 0 and length(g, starts) == found[0]
        assert at > ii or found[0] >= best


@pytest.mark.parametrize("g", CASES, ids=IDS)
def test_least_length_without_the_starts_tie_break_matches_exhaustive_search(g):
    result = modulo_schedule(as_problem(g), earliest=False)
    assert (result.ii, result.length) == brute_force(g) and result.optimal and not result.timed_out
    starts = [result.start[f"v{i}"] for i in range(g.n)]
    assert deps_ok(g, result.ii, starts) and capacity_ok(g, result.ii, starts)


def test_greedy_finds_the_bound_on_a_fully_loaded_unit():
    """Two ops filling a unit of capacity one (I = ResMII = 5): packed, no gap, L = the bound."""
    from test_modulo import G
    g = G(ops=(("u", 3, 3), ("u", 2, 2)), edges=((0, 1, 0),), caps=(("u", 1),))
    p = as_problem(g)
    head, tail = _heads_tails(p)
    found = greedy_schedule(p, 5, head, tail)
    assert found is not None and found[0] == length_bound(p) == brute_force(g)[1] == 5
