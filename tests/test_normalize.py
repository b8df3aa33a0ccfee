"""Stage 0, cost normalization with SCIP: small integers kept, ratios kept, no cost erased."""
from __future__ import annotations

import math
from fractions import Fraction
from functools import reduce

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from twill.errors import TwillError
from twill.normalize import normalize

costs_st = st.lists(st.floats(min_value=0.01, max_value=1e5, allow_nan=False, allow_infinity=False),
                    min_size=1, max_size=6, unique=True)


@pytest.mark.parametrize("costs", [(1.0,), (1.0, 2.0, 3.0), (1.0, 15.0, 60.0), (100.0, 200.0), (4.0, 296.0)])
def test_small_integers_are_kept_unchanged(costs):
    n = normalize(costs)
    assert n.as_dict() == {c: int(c) for c in costs}
    assert (n.distortion, n.unit_cycles) == (0.0, 1.0)


def test_integers_over_the_bound_are_normalized():
    assert normalize((100.0, 201.0)).as_dict() != {100.0: 100, 201.0: 201}
    assert sum(normalize((100.0, 201.0)).as_dict().values()) <= 300
    assert normalize((2.0, 4.0), bound=5).as_dict() == {2.0: 1, 4.0: 2}


@pytest.mark.parametrize("costs, expected", [
    ((1024.0, 128.0), {1024.0: 8, 128.0: 1}),  # 8:1
    ((512.0, 60.0), {512.0: 128, 60.0: 15}),  # the gemm_hopper costs: 128:15
    ((1.5, 3.0), {1.5: 1, 3.0: 2}),  # non-integers
    ((300.0, 600.0, 900.0), {300.0: 1, 600.0: 2, 900.0: 3}),
])
def test_ratios_preserved_exactly_when_possible(costs, expected):
    n = normalize(costs)
    assert n.as_dict() == expected  # the exact map with the smallest sum
    assert n.distortion == 0.0
    c0, s0 = costs[0], expected[costs[0]]
    assert n.unit_cycles == pytest.approx(c0 / s0)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=5, unique=True),
       st.floats(min_value=0.05, max_value=500.0, allow_nan=False))
@example(base=[3, 4, 5], scale=205.29076871698828)  # found in CI: (75, 100, 125) won on rounding noise
def test_exact_ratios_are_found(base, scale):
    """Costs proportional to small integers map to those integers divided by their gcd."""
    costs = tuple(b * scale for b in base)
    if len(set(costs)) < len(costs):
        return
    g = reduce(math.gcd, base)
    primitive = [b // g for b in base]
    n = normalize(costs)
    got = [n.as_dict()[c] for c in costs]
    if all(float(c).is_integer() for c in costs) and sum(costs) <= 300:
        assert got == [int(c) for c in costs]  # kept as they are
    else:
        assert got == primitive
    assert len({Fraction(x, y) for x, y in zip(got, base)}) == 1


@settings(max_examples=30, deadline=None)
@given(costs_st, st.integers(6, 300))
def test_no_positive_cost_becomes_zero_and_sum_within_bound(costs, bound):
    n = normalize(tuple(costs), bound)
    m = n.as_dict()
    assert set(m) == set(costs)
    assert all(isinstance(v, int) and v >= 1 for v in m.values())
    assert sum(m.values()) <= bound
    assert 0.0 <= n.distortion <= 1.0


@settings(max_examples=15, deadline=None)
@given(costs_st)
def test_order_is_preserved(costs):
    """A larger cost never maps below a smaller one (the optimum would not gain by it)."""
    m = normalize(tuple(costs)).as_dict()
    ordered = sorted(costs)
    assert [m[c] for c in ordered] == sorted(m[c] for c in ordered)


def test_exact_ratio_beyond_the_bound_is_approximated():
    """1:3:4000 does not fit U = 300: the map is distorted but keeps every cost >= 1."""
    n = normalize((0.25, 0.75, 1000.0))
    m = n.as_dict()
    assert n.distortion > 0 and sum(m.values()) <= 300 and min(m.values()) >= 1
    assert m[0.25] <= m[0.75] < m[1000.0]


@pytest.mark.parametrize("costs", [(1.0, 8809.0, 13220.0, 0.0625),
                                   (32 / 3, 60.0, 64.0, 512.0, 4096 / 3)])  # the FA3 graph, exp2 at elements / 6
def test_the_tie_break_never_fails_where_the_first_optimum_exists(costs):
    """The tie-break model, capped at the first optimum's F, was infeasible under SCIP's
    tolerances for these costs ("SCIP status infeasible", exit 2, for a valid machine file)."""
    n = normalize(costs)
    m = n.as_dict()
    assert sum(m.values()) <= 300 and min(m.values()) >= 1
    assert [m[c] for c in sorted(costs)] == sorted(m.values())
    assert n.distortion < 0.01


def test_deterministic():
    costs = (7.0, 13.0, 1000.0, 60.0, 3.3, 512.0)
    first = normalize(costs)
    for _ in range(3):
        assert normalize(costs) == first


def test_empty_and_too_many_costs():
    assert normalize(()).map == ()
    with pytest.raises(TwillError, match="normalize-bound"):
        normalize((1.5, 2.5, 3.5), bound=2)


def test_scale_recorded_in_the_schedule():
    """gemm_hopper's costs (512-cycle mma, 60-cycle cross-role delay) reach the schedule as 128:15."""
    from twill.machine import load_machine
    from twill.pipeline import SolveOptions, solve
    from twill.tir import parse_tir

    from conftest import ROOT
    graph = parse_tir((ROOT / "examples" / "gemm_hopper.tir").read_text(), "gemm_hopper.tir")
    s = solve(graph, load_machine("h100"), SolveOptions(swp_only=True))
    assert dict(s.scale.map) == {60.0: 15, 512.0: 128}
    assert s.scale.unit_cycles == pytest.approx(4.0) and s.scale.distortion == 0.0
    assert s.by_name["acc0_n"].cycles == 128 and s.by_name["acc0_n"].machine_cycles == 512.0
