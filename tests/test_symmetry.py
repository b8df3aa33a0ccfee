"""symmetry.py: the orderings of interchangeable ops are built only from checked automorphisms, and
asserting them changes no optimum of the joint stage (I, L and every tie-break's value); the role
hint of joint.py is a valid guess."""
from __future__ import annotations

from dataclasses import replace

from twill.encoding import JointEncoding
from twill.errors import Status
from twill.fileio import load_graph
from twill.joint import TIE_BREAKS, role_hint, window
from twill.machine import load_machine
from twill.modulo import modulo_schedule
from twill.pipeline import SolveOptions, build_problem
from twill.symmetry import is_automorphism, orderings

from conftest import ROOT

EX = ROOT / "examples"


def problem(name: str, gpu: str = "h100"):
    p, _ = build_problem(load_graph(str(EX / f"{name}.tir")), load_machine(gpu), SolveOptions())
    return p


def swap(p, a: str, b: str) -> dict[str, str]:
    """The renaming that swaps the ops of part a and part b (their one digit a or b) and fixes the rest."""
    names = {t.name for t in p.tasks}
    out = {}
    for v in names:
        for x, y in ((a, b), (b, a)):
            if v.count(x) == 1 and v.replace(x, y) in names:
                out[v] = v.replace(x, y)
    return {v: out.get(v, v) for v in names}


def test_the_halves_of_a_sub_tiled_graph_are_interchangeable():
    p = problem("attention_fwd_hopper")
    assert orderings(p) == (("s0", "s1"),)
    assert is_automorphism(p, swap(p, "0", "1"))
    assert not is_automorphism(p, {t.name: t.name for t in p.tasks} | {"s0": "m0_new", "m0_new": "s0"})


def test_a_different_cost_in_one_half_breaks_the_symmetry():
    p = problem("attention_fwd_hopper")
    tasks = tuple(replace(t, cycles=t.cycles + 1) if t.name == "p1" else t for t in p.tasks)
    q = replace(p, tasks=tasks)
    assert orderings(q) == ()
    assert not is_automorphism(q, swap(q, "0", "1"))


def test_graphs_without_interchangeable_ops_get_no_ordering():
    assert orderings(problem("attention_fwd_simple")) == ()
    assert orderings(problem("fig1")) == ()


def optimum(p, symmetric: bool):
    swp = modulo_schedule(p, earliest=False)
    with JointEncoding(p, swp.ii, window(p, swp.ii, swp.length)) as enc:
        assert enc.check() == Status.SAT
        if symmetric:
            enc.break_symmetry()
        values = [enc.minimize("L", swp.length)[0]]
        for what, floor in TIE_BREAKS:
            values.append(enc.minimize(what, floor)[0])
        start = enc.starts()
    return values, start


def test_symmetry_breaking_keeps_every_optimum():
    p = problem("gemm_hopper")
    assert orderings(p) == (("a0", "a1"),)
    plain, _ = optimum(p, False)
    broken, start = optimum(p, True)
    assert broken == plain
    assert start["a0"] <= start["a1"]


def test_role_hint_puts_loads_apart_and_each_half_on_a_role():
    p = problem("attention_fwd_hopper")
    hint = role_hint(p, 16)
    loads = {t.name for t in p.tasks if t.variable_latency}
    assert {hint[v] for v in loads} == {0}
    assert len({hint[v] for v in ("s0", "p0", "acc0_n")}) == 1 and hint["s0"] != hint["s1"]
    assert role_hint(p, 2) is None  # three roles do not fit two slots
