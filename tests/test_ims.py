"""Stage 1's iterative modulo scheduler (twill/ims.py) and the unproven-L window (modulo.BOUNDED),
against the test's own model of a graph and its brute force (test_modulo): every schedule it returns
meets every dependence and the reservation table by the test's own count, it never finds a schedule
below the least I, it finds one at the least I on every small graph, a length cap is never beaten by
the optimum's and is met where the optimum meets it; and a stage 1 that leaves L unproven hands on a
floor and a length with the optimum's copies between them."""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_modulo import GRAPHS, HARD, as_problem, brute_force, capacity_ok, deps_ok, length, random_graph
from twill import modulo
from twill.ims import compact, iterative_schedule
from twill.modulo import length_bound, modulo_schedule, rec_mii, res_mii

CASES = GRAPHS + HARD
IDS = [f"seed{i}" for i in range(len(GRAPHS))] + [f"hard{i}" for i in range(len(HARD))]


def _vector(g, start: dict[str, int]) -> list[int]:
    return [start[f"v{i}"] for i in range(g.n)]


def _is_schedule(g, ii: int, start: dict[str, int]) -> bool:
    s = _vector(g, start)
    return deps_ok(g, ii, s) and capacity_ok(g, ii, s) and min(s) == 0


@pytest.mark.parametrize("g", CASES, ids=IDS)
def test_iterative_schedule_is_a_schedule_at_the_least_ii_and_none_below(g):
    p = as_problem(g)
    ii, best = brute_force(g)
    for at in (ii, ii + 1, ii + 3):
        start = iterative_schedule(p, at)
        assert start is not None, f"no schedule at I = {at} (the least is {ii})"
        assert _is_schedule(g, at, start)
        assert at > ii or length(g, _vector(g, start)) >= best
    if ii > 1:
        assert iterative_schedule(p, ii - 1) is None


@pytest.mark.parametrize("g", CASES, ids=IDS)
def test_a_length_cap_is_met_at_the_optimum_and_never_beaten(g):
    p = as_problem(g)
    ii, best = brute_force(g)
    assert iterative_schedule(p, ii, max_length=best - 1) is None
    capped = iterative_schedule(p, ii, max_length=best)
    if capped is not None:  # a heuristic: it may miss the optimum, never go past its cap
        assert _is_schedule(g, ii, capped) and length(g, _vector(g, capped)) == best


def test_the_length_cap_finds_the_optimum_on_most_small_graphs():
    """Not a proof, a measurement kept honest: the capped search reaches the least L on most graphs."""
    hits = sum(iterative_schedule(as_problem(g), brute_force(g)[0], max_length=brute_force(g)[1]) is not None
               for g in CASES)
    assert hits >= 0.9 * len(CASES), hits


def _bigger(seed: int):
    return random_graph(random.Random(seed), n_ops=(12, 30))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), extra=st.integers(0, 3))
def test_every_schedule_it_returns_holds_and_compaction_never_lengthens(seed, extra):
    g = _bigger(seed)
    p = as_problem(g)
    ii = max(res_mii(p), rec_mii(p)) + extra
    start = iterative_schedule(p, ii)
    if start is None:
        return
    assert _is_schedule(g, ii, start)
    assert length(g, _vector(g, start)) >= length_bound(p)
    shifted = {v: s + 5 * ii for v, s in start.items()}
    again = compact(p, ii, shifted)
    assert _is_schedule(g, ii, again) and length(g, _vector(g, again)) <= length(g, _vector(g, start))


@pytest.mark.parametrize("g", CASES, ids=IDS)
def test_stage_1_for_the_joint_stage_gives_the_least_ii_and_an_honest_length(g, monkeypatch):
    """With CBC stopped at its root (no branching; 12 of these 66 graphs then leave L unproven), stage 1 either proves L or hands on a length and
    a floor around the least L, with the same copies of I: the joint stage's window is the optimum's."""
    monkeypatch.setattr(modulo, "LENGTH_NODES", 0)
    result = modulo_schedule(as_problem(g), earliest=False)
    ii, best = brute_force(g)
    assert result.ii == ii and result.optimal and not result.timed_out
    assert _is_schedule(g, ii, result.start) and length(g, _vector(g, result.start)) == result.length
    if result.length_floor is None:
        assert result.length == best
    else:
        assert result.length_floor <= best <= result.length
        assert -(-result.length_floor // ii) == -(-result.length // ii) == -(-best // ii)


def test_cbc_at_its_root_leaves_some_small_graphs_unproven(monkeypatch):
    """The test above takes the unproven branch, not only the proven one."""
    monkeypatch.setattr(modulo, "LENGTH_NODES", 0)
    assert sum(modulo_schedule(as_problem(g), earliest=False).length_floor is not None for g in CASES) >= 6


def test_the_unproven_window_is_recorded_and_the_joint_answer_is_unchanged(monkeypatch):
    """FA3 (attention_fwd_hopper) on h100: with no CBC nodes, stage 1 leaves L unproven (CBC's root
    keeps the quick schedule's 1024, above the bound 530, same copies of I = 512); the schedule records the floor (bounds.swp_length_floor) and the joint
    stage's I, L, roles and starts are the ones the proven L gives."""
    from conftest import ROOT
    from twill.machine import load_machine
    from twill.pipeline import SolveOptions, solve
    from twill.tir import load_tir
    from twill.verify import verify
    g, m = load_tir(ROOT / "examples" / "attention_fwd_hopper.tir"), load_machine("h100")
    proven = solve(g, m, SolveOptions())
    monkeypatch.setattr(modulo, "LENGTH_NODES", 0)  # CBC stops at its root: L 1024 there, against 768
    bounded = solve(g, m, SolveOptions())
    b, pb = dict(bounded.bounds), dict(proven.bounds)
    assert "swp_length_floor" not in pb and b["swp_length_floor"] < pb["swp_length"] < b["swp_length"]
    assert bounded.optimal and bounded.complete
    assert (bounded.ii, bounded.length, bounded.ops, bounded.roles) == (proven.ii, proven.length, proven.ops,
                                                                       proven.roles)
    verify(bounded, g, m)


def test_explain_says_when_stage_1_left_l_unproven():
    from twill.explain import Explanation, render_text
    proven = Explanation("k", "h100", 512, 768, 2048, realisable=True)
    bounded = Explanation("k", "h100", 512, 1024, 2048, realisable=True, swp_length_floor=530)
    assert "swp_length_floor" not in proven.to_dict() and bounded.to_dict()["swp_length_floor"] == 530
    assert "L0 = 768 " in render_text(proven)
    assert "530 <= L0 <= 1024 (not proven" in render_text(bounded)
