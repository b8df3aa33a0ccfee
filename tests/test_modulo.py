"""Stage 1, the modulo-scheduling ILP (PuLP + CBC), against an independent exhaustive search.

The brute force below shares no code with twill.modulo. It rests on one observation: a modulo
schedule is a residue r[v] in [0, I) and a stage k[v] per op (start = I*k[v] + r[v]). It enumerates
every residue vector that fits the modulo reservation table (capacity per unit and residue,
checked directly), and for each one decides the stages exactly: dependences and a length bound
are difference constraints on k, feasible iff their constraint graph has no negative cycle
(Bellman-Ford). For graphs of at most 4 ops it is itself checked against a literal enumeration
of start times in [0, H).
"""
from __future__ import annotations

import functools
import itertools
import math
import random
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twill.machine import Limits, parse_machine
from twill.modulo import modulo_schedule, rec_mii, res_mii
from twill.pipeline import SolveOptions, solve
from twill.problem import Dep, Problem, Task
from twill.tir import parse_tir
from twill.verify import verify

from conftest import ROOT


# -- the test's own model of a graph ---------------------------------------------------------------

@dataclass(frozen=True)
class G:
    """ops: (unit, cycles, occupancy) per op; edges: (src, dst, distance); latency = cycles(src)."""

    ops: tuple[tuple[str, int, int], ...]
    edges: tuple[tuple[int, int, int], ...]
    caps: tuple[tuple[str, int], ...]

    @property
    def n(self) -> int:
        return len(self.ops)

    def cap(self, unit: str) -> int:
        return dict(self.caps)[unit]


def capacity_ok(g: G, ii: int, starts) -> bool:
    """Every unit, at every residue, is occupied by at most cap ops (an op holds its unit for
    `occupancy` consecutive cycles from its start)."""
    use = {}
    for (unit, _, occ), s in zip(g.ops, starts):
        for c in range(occ):
            key = (unit, (s + c) % ii)
            use[key] = use.get(key, 0) + 1
    return all(n <= g.cap(unit) for (unit, _), n in use.items())


def deps_ok(g: G, ii: int, starts) -> bool:
    return all(starts[v] + dist * ii >= starts[u] + g.ops[u][1] for u, v, dist in g.edges)


def length(g: G, starts) -> int:
    return max(s + op[1] for s, op in zip(starts, g.ops)) - min(starts)


def residue_vectors(g: G, ii: int):
    """Every residue vector that fits the modulo reservation table. Rotating all residues
    together maps schedules to schedules of the same length, so op 0 is fixed at residue 0."""
    table: dict[tuple[str, int], int] = {}
    r = [0] * g.n

    def place(i):
        if i == g.n:
            yield tuple(r)
            return
        unit, _, occ = g.ops[i]
        for s in ([0] if i == 0 else range(ii)):
            cells = [(unit, (s + c) % ii) for c in range(occ)]
            for cell in cells:
                table[cell] = table.get(cell, 0) + 1
            if all(table[cell] <= g.cap(unit) for cell in cells):
                r[i] = s
                yield from place(i + 1)
            for cell in cells:
                table[cell] -= 1

    yield from place(0)


def stages(g: G, ii: int, r, max_len: int | None):
    """Stages k for residues r (dependences, and length <= max_len if given), or None.

    x[b] - x[a] <= w is an arc a -> b of weight w; a solution exists iff no negative cycle, and then
    the shortest distances from a virtual source (0 to every node) are one."""
    arcs = []
    for u, v, dist in g.edges:  # I*k[v] + r[v] + dist*I >= I*k[u] + r[u] + d  <=>  k[u] - k[v] <= ...
        d = g.ops[u][1]
        arcs.append((v, u, dist - math.ceil((r[u] + d - r[v]) / ii)))
    if max_len is not None:  # start[v] + cycles[v] - start[u] <= max_len for every pair
        for u in range(g.n):
            for v in range(g.n):
                bound = max_len - g.ops[v][1] - r[v] + r[u]
                if u == v and bound < 0:
                    return None
                if u != v:
                    arcs.append((u, v, bound // ii))
    k = [0] * g.n
    for _ in range(g.n + 1):
        changed = False
        for a, b, w in arcs:
            if k[a] + w < k[b]:
                k[b], changed = k[a] + w, True
        if not changed:
            return k
    return None


@functools.lru_cache(maxsize=None)
def brute_force(g: G, max_ii: int = 40) -> tuple[int, int]:
    """The smallest I with any schedule, and the smallest length at that I."""
    for ii in range(1, max_ii + 1):
        best = None
        for r in residue_vectors(g, ii):
            k = stages(g, ii, r, None if best is None else best - 1)
            while k is not None:
                best = length(g, [ii * kv + rv for kv, rv in zip(k, r)])
                k = stages(g, ii, r, best - 1)
        if best is not None:
            return ii, best
    raise AssertionError("no schedule up to max_ii")


def literal_search(g: G, max_ii: int = 12) -> tuple[int, int]:
    """Enumerate every start vector in [0, H)^n for increasing I; keep the shortest at the first I.

    H = I*(n+1) + sum(cycles) holds a schedule whenever one exists at I: the least stage solution
    of the difference constraints has stages at most 1 + sum(cycles)/I + (n-1)."""
    for ii in range(1, max_ii + 1):
        horizon = ii * (g.n + 1) + sum(op[1] for op in g.ops)
        lengths = [length(g, s) for s in itertools.product(range(horizon), repeat=g.n)
                   if deps_ok(g, ii, s) and capacity_ok(g, ii, s)]
        if lengths:
            return ii, min(lengths)
    raise AssertionError("no schedule up to max_ii")


def random_graph(rng: random.Random, n_ops: tuple[int, int] = (3, 7)) -> G:
    n = rng.randint(*n_ops)
    units = [(f"u{i}", rng.randint(1, 2)) for i in range(rng.randint(1, 3))]
    ops = []
    for _ in range(n):
        cycles = rng.randint(1, 4)
        ops.append((rng.choice(units)[0], cycles, rng.randint(1, cycles)))
    edges = [(i, j, 0 if rng.random() < 0.85 else rng.randint(1, 2))
             for j in range(n) for i in range(j) if rng.random() < 0.35]
    for _ in range(rng.randint(1, 2)):  # recurrences: a back edge or a self loop, distance 1 or 2
        dst = rng.randrange(n)
        edges.append((rng.randint(dst, n - 1), dst, rng.randint(1, 2)))
    return G(tuple(ops), tuple(edges), tuple(units))


def as_problem(g: G) -> Problem:
    tasks = tuple(Task(f"v{i}", "work", unit, c, occ, "warp_group", False, False, False, "reg", 0, False, 2, c)
                  for i, (unit, c, occ) in enumerate(g.ops))
    deps = tuple(Dep(f"v{u}", f"v{v}", dist, g.ops[u][1]) for u, v, dist in g.edges)
    return Problem(kernel="random", machine="toy", tasks=tasks, deps=deps, caps=g.caps, cross=1,
                   limits=Limits(warps=16, warp_group=4, registers_per_thread=255, registers_per_sm=65536,
                                 smem_bytes=232448))


def own_mii(g: G) -> int:
    """MII by counting (occupancy per unit) and by every simple cycle (latency over distance)."""
    res = max(math.ceil(sum(o[2] for o in g.ops if o[0] == unit) / cap) for unit, cap in g.caps)
    rec = 1
    succ = {}
    for u, v, dist in g.edges:
        succ.setdefault(u, []).append((v, dist))

    def walk(start, node, lat, dist, seen):
        nonlocal rec
        for nxt, d in succ.get(node, ()):
            if nxt == start:
                rec = max(rec, math.ceil((lat + g.ops[node][1]) / (dist + d)))
            elif nxt > start and nxt not in seen:
                walk(start, nxt, lat + g.ops[node][1], dist + d, seen | {nxt})

    for s in range(g.n):
        walk(s, s, 0, 0, {s})
    return max(1, res, rec)


# -- the brute force against itself, and the ILP against the brute force --------------------------

GRAPHS = [random_graph(random.Random(seed)) for seed in range(60)]
# Found by searching seeds of random_graph(rng, (3, 4)): graphs whose optimal I exceeds
# max(ResMII, RecMII), where capacity and recurrences interact.
HARD = [random_graph(random.Random(seed), (3, 4)) for seed in (193, 404, 514, 803, 1093, 1399)]


@pytest.mark.parametrize("seed", range(15))
def test_brute_force_agrees_with_literal_enumeration(seed):
    g = random_graph(random.Random(1000 + seed), n_ops=(3, 3))
    assert brute_force(g) == literal_search(g)


@pytest.mark.parametrize("g", GRAPHS + HARD, ids=[f"seed{i}" for i in range(len(GRAPHS))]
                         + [f"hard{i}" for i in range(len(HARD))])
def test_optimal_ii_and_length_match_exhaustive_search(g):
    result = modulo_schedule(as_problem(g))
    assert result is not None
    ii, best = brute_force(g)
    assert (result.ii, result.length) == (ii, best)
    assert result.optimal
    starts = [result.start[f"v{i}"] for i in range(g.n)]
    assert deps_ok(g, result.ii, starts) and capacity_ok(g, result.ii, starts)
    assert min(starts) == 0 and length(g, starts) == result.length


def test_random_graphs_cover_the_interesting_cases():
    """The 60 graphs include recurrences that bind, capacities that bind, and an I above both bounds."""
    bf = [(g, brute_force(g)) for g in GRAPHS]
    assert sum(1 for g in GRAPHS if any(u >= v for u, v, _ in g.edges)) == len(GRAPHS)
    assert any(ii > 1 and res_mii(as_problem(g)) < ii == rec_mii(as_problem(g)) for g, (ii, _) in bf)
    assert any(ii > 1 and rec_mii(as_problem(g)) < ii == res_mii(as_problem(g)) for g, (ii, _) in bf)
    assert all(brute_force(g)[0] > own_mii(g) for g in HARD)
    assert all(7 >= g.n >= 3 for g in GRAPHS)


# -- figure 1 and hand-computed bounds -------------------------------------------------------------

def test_fig1_gives_ii_2_length_4():
    from twill.machine import load_machine
    graph = parse_tir((ROOT / "examples" / "fig1.tir").read_text(), "fig1.tir")
    schedule = solve(graph, load_machine("h100"), SolveOptions(swp_only=True))
    assert (schedule.ii, schedule.length, schedule.optimal) == (2, 4, True)
    start = {o.name: o.start for o in schedule.ops}
    assert start["S"] == 0 and start["O"] == 3 and start["P"] in (1, 2)
    assert dict(schedule.bounds)["res_mii"] == 2 and dict(schedule.bounds)["rec_mii"] == 1


def _fa3_on_h100_with(name: str, units: dict[str, int]):
    """FA3 solved (time limit only against a hang) on h100.yaml with other unit capacities;
    (graph, machine, schedule)."""
    text = (ROOT / "specs" / "h100.yaml").read_text().replace("name: h100", f"name: {name}")
    for unit, cap in units.items():
        text = text.replace(f"  {unit}: 1 ", f"  {unit}: {cap} ")
    machine = parse_machine(text, f"{name}.yaml")
    assert {u: dict(machine.units)[u] for u in units} == units
    graph = parse_tir((ROOT / "examples" / "attention_fwd_hopper.tir").read_text(), "fa3.tir")
    return graph, machine, solve(graph, machine, SolveOptions(time_limit=600))


def test_units_of_capacity_four_keep_fa3_fast():
    """FA3 on a machine whose ALU and SFU run four tile ops at once (`alu: 4`, `sfu: 4`): the
    one-hot residue form left CBC searching for over ten minutes at I = 512; the pairwise form
    decides it at once. The joint schedule is the same (I, L) as with capacity 1 and verifies.
    (The time limit only stops a regression from hanging the suite.)"""
    graph, machine, schedule = _fa3_on_h100_with("h100x4", {"sfu": 4, "alu": 4})
    assert (schedule.ii, schedule.length, schedule.optimal) == (512, 783, True)
    assert verify(schedule, graph, machine) == []


@pytest.mark.slow
def test_two_tensor_units_solve_fa3_in_the_joint_stage():
    """FA3 on a machine with two tensor units: four 128-unit GEMMs in I = 258 leave the
    reservation table almost full. Stage 2 encodes capacity 2 as clauses (at an op's start, no
    two others both cover it); the earlier sum of 0/1 terms took about three minutes to the same
    (258, 658). The schedule verifies."""
    graph, machine, schedule = _fa3_on_h100_with("h100t2", {"tensor": 2})
    assert (schedule.ii, schedule.length, schedule.optimal) == (258, 658, True)
    assert verify(schedule, graph, machine) == []


def _p(ops, edges, caps):
    return as_problem(G(tuple(ops), tuple(edges), tuple(caps)))


@pytest.mark.parametrize("ops, edges, caps, res, rec", [
    # fig1: S, O on the tensor core, P on the SFU; O -> O carried. ResMII 2, RecMII 1.
    ([("t", 1, 1), ("s", 1, 1), ("t", 1, 1)], [(0, 1, 0), (1, 2, 0), (2, 2, 1)], [("t", 1), ("s", 1)], 2, 1),
    # a chain 2 + 3 + 4 closed by a carry of distance 1: RecMII 9; through a distance-2 edge: ceil(9/2) = 5
    ([("a", 2, 1), ("a", 3, 1), ("a", 4, 1)], [(0, 1, 0), (1, 2, 0), (2, 0, 1)], [("a", 3)], 1, 9),
    ([("a", 2, 1), ("a", 3, 1), ("a", 4, 1)], [(0, 1, 0), (1, 2, 0), (2, 0, 2)], [("a", 3)], 1, 5),
    # two recurrences: a self loop of 4 over distance 1, and a 1 + 1 cycle: the larger wins
    ([("a", 4, 1), ("a", 1, 1)], [(0, 0, 1), (0, 1, 0), (1, 0, 1)], [("a", 2)], 1, 5),
    # capacity 2, occupancies 3 + 3 + 1 = 7: ceil(7/2) = 4; occupancy below cycles counts occupancy
    ([("a", 3, 3), ("a", 3, 3), ("a", 4, 1)], [], [("a", 2)], 4, 1),
    # one unit of capacity 1 per kind: the busiest unit decides (2 + 4 on b)
    ([("a", 1, 1), ("b", 2, 2), ("b", 4, 4)], [(0, 1, 0)], [("a", 1), ("b", 1)], 6, 1),
])
def test_res_mii_and_rec_mii_by_hand(ops, edges, caps, res, rec):
    p = _p(ops, edges, caps)
    assert (res_mii(p), rec_mii(p)) == (res, rec)
    result = modulo_schedule(p)
    assert result.ii >= max(res, rec) and (result.res_mii, result.rec_mii) == (res, rec)


def test_recurrence_and_capacity_together_raise_ii_above_both_bounds():
    """B and C (4 cycles each, one unit of capacity 1) form a cycle of latency 8 over distance 2:
    RecMII = 4, ResMII = 2. At I = 4 the cycle is tight, so C starts exactly 4 after B, at B's
    residue, and the unit is double-booked: the optimum is I = 5 (A -> B -> C, L = 1 + 4 + 4)."""
    g = G((("u1", 1, 1), ("u0", 4, 1), ("u0", 4, 1)), ((0, 1, 0), (1, 2, 0), (2, 1, 2)), (("u0", 1), ("u1", 1)))
    p = as_problem(g)
    assert (res_mii(p), rec_mii(p)) == (2, 4)
    result = modulo_schedule(p)
    assert (result.ii, result.length, result.optimal) == (5, 9, True) == (*brute_force(g), True)
    assert [ii for ii, _ in result.tried] == [4, 5] and result.tried[0][1] == "Infeasible"


# -- hypothesis: every solved schedule verifies ----------------------------------------------------

TOY_MACHINE = """\
name: toy
arch: sm_90a
clock_ghz: 1.0
source: "a test machine with small integer costs"
limits: {{warps: 16, warp_group: 4, registers_per_thread: 255, registers_per_sm: 65536, smem_bytes: 232448}}
units: {{{units}}}
communication: {{cross_warp_cycles: 1}}
ops: {{}}
"""


@st.composite
def tir_graphs(draw):
    """A random .tir graph of 2-6 ops with recurrences through carries and NAME@D, plus its machine."""
    n = draw(st.integers(2, 6))
    caps = draw(st.lists(st.integers(1, 2), min_size=1, max_size=3))
    units = [f"u{i}" for i in range(len(caps))]
    ops, carries, yields = [], [], []
    for j in range(n):
        cycles = draw(st.integers(1, 4))
        occupancy = draw(st.integers(1, cycles))
        unit = draw(st.sampled_from(units))
        operands = ["x"] if j == 0 else []
        operands += [f"v{i}" for i in range(j) if draw(st.booleans())]
        ops.append([f"v{j}", operands, cycles, occupancy, unit])
    for _ in range(draw(st.integers(1, 3))):
        dst = draw(st.integers(0, n - 1))
        src = draw(st.integers(dst, n - 1))
        if draw(st.booleans()):
            c = f"c{len(carries)}"
            carries.append(f"carry {c} : f32[16,16] = 0")
            yields.append(f"{c} = v{src}")
            ops[dst][1].append(c)
        else:
            ops[dst][1].append(f"v{src}@{draw(st.integers(1, 3))}")
    lines = ["kernel random", "input x : f16[16,16] @smem", *carries, "loop {"]
    for name, operands, cycles, occupancy, unit in ops:
        lines.append(f"  {name} = work {', '.join(operands)} : f32[16,16] "
                     f"{{cycles = {cycles}, occupancy = {occupancy}, unit = {unit}}}")
    if yields:
        lines.append("  yield " + ", ".join(yields))
    lines.append("}")
    machine = TOY_MACHINE.format(units=", ".join(f"{u}: {c}" for u, c in zip(units, caps)))
    return "\n".join(lines) + "\n", machine


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tir_graphs())
def test_every_solved_schedule_verifies(case):
    text, machine_text = case
    graph, machine = parse_tir(text, "random.tir"), parse_machine(machine_text, "toy.yaml")
    schedule = solve(graph, machine, SolveOptions(swp_only=True))
    assert verify(schedule, graph, machine) == []
    bounds = dict(schedule.bounds)
    assert schedule.ii >= max(bounds["res_mii"], bounds["rec_mii"])
    assert schedule.optimal
    # Costs are small integers, so stage 0 left them unchanged: the brute force sees the same problem.
    g = G(tuple((o.unit, o.cycles, o.occupancy) for o in schedule.ops),
          tuple((schedule.ops.index(schedule.by_name[d.src]), schedule.ops.index(schedule.by_name[d.dst]),
                 d.distance) for d in graph.edges),
          machine.units)
    assert schedule.ii >= own_mii(g)
    assert all(o.machine_cycles == o.cycles for o in schedule.ops)
