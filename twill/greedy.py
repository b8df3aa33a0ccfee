"""A quick modulo schedule at a given I, by list scheduling on the modulo reservation table: stage 1's
incumbent. It proves nothing about smaller I and nothing about L; when it finds a schedule, I is
feasible (the exact check `feasible` says so before it is used), and its length is an upper bound
that CBC starts from (or the proof itself, when it meets `modulo.length_bound`).

Ops are placed in a topological order of their distance-0 edges, most urgent first (least head,
then longest tail), each at the first start from its earliest one (every placed predecessor's
latency, carried ones less distance * I) at which its occupancy fits the table, and no later than
its placed successors over carried edges allow. Two placements are tried: first fit, and packed
(an op starts where the last one placed on its unit ended, modulo I, when that is free: a unit loaded
to I leaves no gap it cannot fill); the shorter feasible one wins.
"""
from __future__ import annotations

from .problem import Problem


def _order(p: Problem, head: dict[str, int], tail: dict[str, int]) -> list[str]:
    """A topological order of the distance-0 edges: among ready ops, least head, then longest tail,
    then the problem's order."""
    preds = {t.name: {d.src for d in p.deps if d.dst == t.name and d.distance == 0 and d.src != t.name}
             for t in p.tasks}
    index = {t.name: i for i, t in enumerate(p.tasks)}
    placed: list[str] = []
    done: set[str] = set()
    while len(placed) < len(p.tasks):
        ready = [v for v in index if v not in done and preds[v] <= done]
        v = min(ready or [v for v in index if v not in done], key=lambda v: (head[v], -tail[v], index[v]))
        placed.append(v)
        done.add(v)
    return placed


class _Table:
    """Per unit, how many occupancies cover each residue of [0, I)."""

    def __init__(self, p: Problem, ii: int):
        self.ii, self.cap = ii, dict(p.caps)
        self.used = {unit: [0] * ii for unit in self.cap}
        self.cursor = {unit: 0 for unit in self.cap}

    def blocked(self, unit: str, occ: int, t: int) -> int | None:
        """The first cycle of [t, t + occ) whose residue is full, or None (it fits). An occupancy
        longer than I covers some residues more than once: each time counts."""
        used, cap, ii = self.used[unit], self.cap[unit], self.ii
        extra = [0] * ii if occ > ii else None
        for c in range(t, t + occ):
            r = c % ii
            more = 0 if extra is None else extra[r]
            if used[r] + more + 1 > cap:
                return c
            if extra is not None:
                extra[r] += 1
        return None

    def place(self, unit: str, occ: int, t: int) -> None:
        for c in range(t, t + occ):
            self.used[unit][c % self.ii] += 1
        self.cursor[unit] = (t + occ) % self.ii


def _place(p: Problem, ii: int, order: list[str], packed: bool) -> dict[str, int] | None:
    task, table, start = p.task, _Table(p, ii), {}
    ins = {v: [d for d in p.deps if d.dst == v] for v in order}
    outs = {v: [d for d in p.deps if d.src == v] for v in order}
    for v in order:
        t = task[v]
        lo = max([0] + [start[d.src] + d.latency - d.distance * ii for d in ins[v] if d.src in start])
        hi = min([start[d.dst] + d.distance * ii - d.latency for d in outs[v] if d.dst in start], default=None)
        if any(d.dst == v and d.latency > d.distance * ii for d in outs[v]):
            return None  # a self-dependence I cannot meet
        occ = t.occupancy
        if occ == 0:
            s = lo
        else:
            s = _fit(table, t.unit, occ, lo, hi, packed)
            if s is None:
                return None
            table.place(t.unit, occ, s)
        if hi is not None and s > hi:
            return None
        start[v] = s
    return start


def _fit(table: _Table, unit: str, occ: int, lo: int, hi: int | None, packed: bool) -> int | None:
    """The start at which `occ` cycles fit on `unit`: packed after the unit's cursor when asked and
    free, else the first fit in [lo, lo + I), within hi."""
    ii = table.ii
    last = lo + ii - 1 if hi is None else min(hi, lo + ii - 1)
    if packed:
        s = lo + (table.cursor[unit] - lo) % ii
        if s <= last and table.blocked(unit, occ, s) is None:
            return s
    s = lo
    while s <= last:
        c = table.blocked(unit, occ, s)
        if c is None:
            return s
        s = c + 1  # every start up to c still covers c
    return None


def feasible(p: Problem, ii: int, start: dict[str, int]) -> bool:
    """Every dependence and every unit's modulo reservation table holds at `ii` (stage 1's constraints)."""
    if any(start[d.dst] + d.distance * ii < start[d.src] + d.latency for d in p.deps):
        return False
    if any(s < 0 for s in start.values()):
        return False
    for unit, cap in p.caps:
        used = [0] * ii
        for t in p.tasks:
            if t.unit == unit:
                for c in range(start[t.name], start[t.name] + t.occupancy):
                    used[c % ii] += 1
        if any(n > cap for n in used):
            return False
    return True


def greedy_schedule(p: Problem, ii: int, head: dict[str, int], tail: dict[str, int]):
    """(length, starts) of the shorter of the two placements that is feasible at `ii`, or None."""
    order = _order(p, head, tail)
    best = None
    for packed in (False, True):
        start = _place(p, ii, order, packed)
        if start is None or not feasible(p, ii, start):
            continue
        shift = min(start.values(), default=0)
        start = {v: s - shift for v, s in start.items()}
        length = max([start[t.name] + t.cycles for t in p.tasks] + [0])
        if best is None or length < best[0]:
            best = (length, start)
    return best
