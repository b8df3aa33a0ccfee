"""Valid inequalities on the joint stage's starts, for its least-sum-of-starts tie-break: the
solver's linear relaxation sees the dependences, but not that ops on one unit queue behind each
other, so near the optimum it branched over the units' orderings for minutes (docs/benchmarks.md).

Within one iteration, the occupancies [start, start + occ) of the ops on a unit of capacity c cover
no cycle more than c times (a cycle covered more often is over c modulo any I), so they form a
schedule on c machines. For such a schedule and any set A of its ops, with p = occ, the classic
inequality of parallel-machine scheduling (Queyranne 1993 for c = 1, Schulz 1996 for c machines)
holds: sum p_j C_j >= (sum p_j)^2 / (2c) + sum p_j^2 / 2, C_j the end. Shifted by the earliest
start of A's ops (their heads: the dependence paths into them) it bounds sum p_j start_j from below,
and in reversed time (from the latest end each op's tail allows under L) from above. Every joint
schedule meets them (cut none, so no objective's optimum moves); they are plain data here, and
`JointEncoding.assert_cuts` asserts them. `sum_floor` is the linear relaxation's least sum of starts
(PuLP/CBC, as stage 1): every joint schedule's sum is at least it.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from .problem import Problem

ALL_SUBSETS = 8  # units of at most this many ops get a cut per subset; larger ones, per chain and pair


@dataclass(frozen=True)
class Cut:
    """lo <= sum coef * start[op] <= hi."""
    terms: tuple[tuple[str, int], ...]
    lo: int
    hi: int


def heads_tails(p: Problem) -> tuple[dict[str, int], dict[str, int]]:
    """Per op, the earliest start and the least length after its start of any joint schedule:
    stage 1's with the cross-role delays every joint schedule pays (modulo._heads_tails)."""
    from .modulo import _heads_tails
    return _heads_tails(p, p.cross)


def _subsets(ops: list, head: dict, due: dict) -> list[tuple]:
    if len(ops) <= ALL_SUBSETS:
        return [a for k in range(2, len(ops) + 1) for a in itertools.combinations(ops, k)]
    chains = [sorted(ops, key=lambda t: (-head[t.name], t.name)), sorted(ops, key=lambda t: (due[t.name], t.name))]
    out = {tuple(sorted(c[:k], key=lambda t: t.name)) for c in chains for k in range(2, len(ops) + 1)}
    out |= set(itertools.combinations(ops, 2))
    return sorted(out, key=lambda a: [t.name for t in a])


def unit_cuts(p: Problem, length: int) -> list[Cut]:
    """The cuts of every unit at length `length` (L <= length), for every set of its ops
    (`ALL_SUBSETS`), or for the nested sets by head and by latest end and every pair."""
    head, tail = heads_tails(p)
    due = {t.name: length - tail[t.name] + t.occupancy for t in p.tasks}  # latest end of its occupancy
    out = []
    for unit, cap in p.caps:
        ops = [t for t in p.tasks if t.unit == unit and t.occupancy > 0]
        if len(ops) < 2:
            continue
        for a in _subsets(ops, head, due):
            tot = sum(t.occupancy for t in a)
            squares = sum(t.occupancy ** 2 for t in a)
            packed = math.ceil((tot * tot - cap * squares) / (2 * cap))  # least sum p_j start_j from 0
            lo = min(head[t.name] for t in a) * tot + packed
            hi = max(due[t.name] for t in a) * tot - squares - packed
            out.append(Cut(tuple((t.name, t.occupancy) for t in a), lo, hi))
    return out


def sum_floor(p: Problem, ii: int, length: int, cuts: list[Cut]) -> int:
    """The least sum of starts of the linear relaxation at (ii, L <= length): heads, tails, every
    dependence with the cross-role delays always paid, and `cuts`. 0 where CBC does not answer."""
    import pulp

    from .fileio import scratch_folder
    head, tail = heads_tails(p)
    vl = {t.name: t.variable_latency for t in p.tasks}
    prob = pulp.LpProblem("sum_floor", pulp.LpMinimize)
    s = {t.name: pulp.LpVariable(f"s{i}", head[t.name], max(head[t.name], length - tail[t.name]))
         for i, t in enumerate(p.tasks)}
    prob += pulp.lpSum(s.values())
    for d in p.deps:
        delay = d.latency + (p.cross if vl[d.src] != vl[d.dst] else 0)
        prob += s[d.dst] + d.distance * ii >= s[d.src] + delay
    for c in cuts:
        expr = pulp.lpSum(k * s[v] for v, k in c.terms)
        prob += expr >= c.lo
        prob += expr <= c.hi
    solver = pulp.PULP_CBC_CMD(msg=False)
    if scratch_folder():
        solver.tmpDir = scratch_folder()
    try:
        prob.solve(solver)
    except pulp.PulpSolverError:
        return 0
    if pulp.LpStatus[prob.status] != "Optimal":
        return 0
    return math.ceil(pulp.value(prob.objective) - 1e-6)
