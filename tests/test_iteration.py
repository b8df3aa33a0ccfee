"""Stage 1's flat schedule of one iteration (twill/iteration.py), against the brute force of
test_modulo: its bound never exceeds the least L at the least I nor at any larger I tried, its schedule
holds every distance-0 dependence and each unit's capacity in absolute time, and a stage 1 forced
through it (no quick schedule) still answers the brute force's I and L, or a floor and a length with
the optimum's copies between them."""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_modulo import GRAPHS, HARD, as_problem, brute_force, capacity_ok, deps_ok, length, random_graph
from twill import modulo
from twill.greedy import feasible
from twill.ims import iterative_schedule
from twill.ims import length as ims_length
from twill.iteration import flat_schedule
from twill.modulo import modulo_schedule

CASES = GRAPHS + HARD
IDS = [f"seed{i}" for i in range(len(GRAPHS))] + [f"hard{i}" for i in range(len(HARD))]


def _flat_ok(g, start: dict[str, int]) -> bool:
    """The relaxation's own constraints, by the test's count: distance-0 edges, and per unit no cycle
    covered by more of the iteration's occupancies than its capacity (absolute time)."""
    s = [start[f"v{i}"] for i in range(g.n)]
    if any(s[v] < s[u] + g.ops[u][1] for u, v, dist in g.edges if dist == 0):
        return False
    for unit, cap in g.caps:
        for c in range(max(s) + max(o[2] for o in g.ops) + 1):
            if sum(1 for (u, _, occ), sv in zip(g.ops, s) if u == unit and sv <= c < sv + occ) > cap:
                return False
    return True


@pytest.mark.parametrize("g", CASES, ids=IDS)
def test_the_bound_is_below_every_schedule_and_the_schedule_holds(g):
    p = as_problem(g)
    flat = flat_schedule(p)
    ii, best = brute_force(g)
    assert flat.proven  # tiny graphs: CP-SAT finishes within its work limit
    assert flat.bound <= best
    assert _flat_ok(g, flat.start) and length(g, [flat.start[f"v{i}"] for i in range(g.n)]) == flat.length
    if feasible(p, ii, flat.start):  # a modulo schedule at the least I: then it is the least L
        assert flat.length == best
    for more in (1, 3):  # a larger I's least L is no shorter than the bound either
        status, least, _ = modulo.solve_at(p, ii + more, earliest=False)  # CBC's proven least L
        assert status == "Optimal" and flat.bound <= least


@pytest.mark.parametrize("g", CASES, ids=IDS)
def test_stage_one_through_the_flat_schedule_keeps_the_optimum(g, monkeypatch):
    """With no quick schedule, the flat one (where it fits) and CBC answer the brute force's I and L;
    where CBC's node count stops it (BOUNDED), the floor and the length hold the optimum's copies."""
    monkeypatch.setattr(modulo, "quick_schedule", lambda p, ii, earliest=False: None)
    ii, best = brute_force(g)
    result = modulo_schedule(as_problem(g), earliest=False)
    assert result is not None and result.ii == ii and result.optimal
    starts = [result.start[f"v{i}"] for i in range(g.n)]
    assert deps_ok(g, ii, starts) and capacity_ok(g, ii, starts) and length(g, starts) == result.length
    if result.length_floor is None:
        assert result.length == best
    else:
        assert result.length_floor <= best <= result.length
        assert -(-result.length_floor // ii) == -(-result.length // ii)


@pytest.mark.extended  # (13 s of CI's time; the flat schedule against brute force on small graphs stays above)
def test_the_flat_schedule_closes_a_gap_the_quick_ones_leave():
    """A graph of the kind the corpus' large random DAGs are: many short independent ops on the
    bottleneck unit, so one iteration fits in I, where the list schedule's order leaves it longer.
    With the flat schedule, L = I is proven without CBC."""
    rng = random.Random(7)
    found = 0
    for _ in range(40):
        g = random_graph(rng, n_ops=(8, 12))
        p = as_problem(g)
        flat = flat_schedule(p)
        result = modulo_schedule(p, earliest=False)
        assert flat.bound <= result.length
        if flat.proven and feasible(p, result.ii, flat.start):
            assert result.length == flat.length and result.length_floor is None
            found += 1
    assert found >= 10, found


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), extra=st.integers(0, 4))
def test_bigger_graphs_no_modulo_schedule_beats_the_bound(seed, extra):
    """Every modulo schedule the iterative scheduler finds, at any I, is at least the bound long."""
    g = random_graph(random.Random(seed), n_ops=(10, 20))
    p = as_problem(g)
    flat = flat_schedule(p)
    assert _flat_ok(g, flat.start) and flat.bound <= flat.length
    ii = max(modulo.res_mii(p), modulo.rec_mii(p)) + extra
    for cap in (None, flat.bound):
        start = iterative_schedule(p, ii, max_length=cap)
        if start is not None:
            assert feasible(p, ii, start) and ims_length(p, start) >= flat.bound
