"""The units' cuts (twill/cuts.py) against brute force: on small graphs, every assignment of starts
that a joint schedule could have (every dependence with the cross-role delays every joint schedule
pays, every unit's modulo reservation table, L <= the length) meets every cut, and the linear
relaxation's floor is at most the least sum of starts among them. The search's use of both is
checked against a fresh context in tests/test_joint_search.py."""
from __future__ import annotations

import itertools
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twill.cuts import heads_tails, sum_floor, unit_cuts
from twill.greedy import feasible
from twill.machine import load_machine
from twill.modulo import res_mii
from twill.pipeline import SolveOptions, build_problem
from twill.tir import parse_tir

ROOT_SPEC = "specs/h100.yaml"
OPS = (("max", "alu"), ("add", "alu"), ("mul", "alu"), ("exp2", "sfu"))


@st.composite
def cases(draw):
    """3-4 ALU/SFU ops (cycles 1-6), each reading the input or earlier ops, the last carried to the
    next iteration; ALU capacity 1 or 2; I from ResMII up to 3 more."""
    n = draw(st.integers(3, 4))
    lines = ["kernel c", "input w : f32[64,64]", "carry acc : f32[64,64] = 0", "loop {"]
    names = ["w"]
    for i in range(n):
        opcode, _ = draw(st.sampled_from(OPS))
        operands = [draw(st.sampled_from(names))]
        if opcode != "exp2":
            operands.append(draw(st.sampled_from(names + ["acc"])))
        lines.append(f"  o{i} = {opcode} {', '.join(operands)} : f32[64,64] {{cycles = {draw(st.integers(1, 6))}}}")
        names.append(f"o{i}")
    lines += [f"  yield acc = o{n - 1}", "}"]
    return "\n".join(lines) + "\n", draw(st.sampled_from((1, 2))), draw(st.integers(0, 3))


def _problem(tmp_path, text, alu):
    spec = open(ROOT_SPEC).read()
    spec = re.sub(r"^(\s+alu:\s*)\d+", rf"\g<1>{alu}", spec, count=1, flags=re.M)
    path = tmp_path / "m.yaml"
    path.write_text(spec)
    p, _ = build_problem(parse_tir(text, "c.tir"), load_machine(str(path)), SolveOptions())
    return p


def _joint_feasible(p, ii, start, length):
    vl = {t.name: t.variable_latency for t in p.tasks}
    if any(start[t.name] + t.cycles > length for t in p.tasks):
        return False
    if any(start[d.dst] + d.distance * ii < start[d.src] + d.latency + (p.cross if vl[d.src] != vl[d.dst] else 0)
           for d in p.deps):
        return False
    return feasible(p, ii, start)


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_every_schedule_meets_the_cuts_and_the_floor(tmp_path_factory, case):
    text, alu, slack = case
    p = _problem(tmp_path_factory.mktemp("m"), text, alu)
    head, tail = heads_tails(p)
    ii = res_mii(p) + slack
    length = max(head[t.name] + tail[t.name] for t in p.tasks) + sum(t.occupancy for t in p.tasks) // 2 + slack
    cuts = unit_cuts(p, length)
    floor = sum_floor(p, ii, length, cuts)
    ranges = [range(head[t.name], length - tail[t.name] + 1) for t in p.tasks]
    best, seen = None, 0
    for starts in itertools.product(*ranges):
        start = dict(zip((t.name for t in p.tasks), starts))
        if not _joint_feasible(p, ii, start, length):
            continue
        seen += 1
        for c in cuts:
            total = sum(k * start[v] for v, k in c.terms)
            assert c.lo <= total <= c.hi, (c, start)
        best = sum(starts) if best is None else min(best, sum(starts))
    if best is not None:
        assert floor <= best
    assert cuts or all(sum(1 for t in p.tasks if t.unit == u and t.occupancy) < 2 for u, _ in p.caps)


def test_a_queue_on_one_unit_raises_the_floor_above_the_heads(tmp_path):
    """Three independent 4-cycle ALU ops: their heads (0) allow them all at once, the unit does not.
    One at a time they start at 0, 4 and 8 at best, and the floor sees that queue."""
    text = ("kernel q\ninput w : f32[64,64]\ncarry acc : f32[64,64] = 0\nloop {\n"
            + "".join(f"  x{i} = add w, w : f32[64,64] {{cycles = 4}}\n" for i in range(3))
            + "  y = exp2 x0 : f32[64,64] {cycles = 1}\n  z = exp2 x1 : f32[64,64] {cycles = 1}\n"
            + "  u = exp2 x2 : f32[64,64] {cycles = 1}\n  yield acc = u\n}\n")
    p = _problem(tmp_path, text, 1)
    head, tail = heads_tails(p)
    assert [head[f"x{i}"] for i in range(3)] == [0, 0, 0]
    length = 40
    floor = sum_floor(p, 20, length, unit_cuts(p, length))
    assert floor >= sum(head.values()) + 4 + 8
