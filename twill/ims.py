"""Iterative modulo scheduling (Rau, "Iterative Modulo Scheduling", MICRO 1994): stage 1's incumbent
where the one-pass list schedule (greedy.py) finds none. Like the greedy schedule it proves nothing
about smaller I or about L: a schedule it returns is checked exactly (`greedy.feasible`) and shows
that I is feasible, and its length is an upper bound on L at I.

The ops are taken highest first (height: the longest path of `latency - distance * I` from the op's
start to the end of the iteration, over every edge, carried ones included; then the problem's order).
Each goes at the first start in [Estart, Estart + I) where its occupancy fits the modulo reservation
table, Estart being what its scheduled predecessors allow (at least 0). Where no start fits, it goes at
Estart anyway (or one cycle after its previous start, when it had one at or after Estart, so the
search does not cycle), and evicts the ops that collide with it on its unit and the scheduled
neighbours whose dependences it breaks; those are scheduled again later. A budget of placements ends
the search. Everything is deterministic: no randomness, no clock.

`compact` then moves ops earlier while the schedule stays feasible (each op, latest first, to its
least feasible start given all the others): the length only shrinks.
"""
from __future__ import annotations

from .greedy import feasible
from .problem import Problem

BUDGET_PER_OP = 60  # placements per op before the search gives up at this I


def heights(p: Problem, ii: int) -> dict[str, int] | None:
    """Per op, the longest path of latency - distance * ii from its start to the end of the iteration
    (at least its own cycles); None when a dependence cycle is positive at ii (I below RecMII)."""
    h = {t.name: t.cycles for t in p.tasks}
    for _ in range(len(p.tasks) + 1):
        changed = False
        for d in p.deps:
            w = d.latency - d.distance * ii + h[d.dst]
            if w > h[d.src]:
                h[d.src], changed = w, True
        if not changed:
            return h
    return None


class _Table:
    """Per unit and residue of [0, I), the ops whose occupancy covers it (an op covers a residue as
    many times as its occupancy wraps onto it)."""

    def __init__(self, p: Problem, ii: int):
        self.ii, self.cap = ii, dict(p.caps)
        self.cover: dict[str, list[list[str]]] = {u: [[] for _ in range(ii)] for u in self.cap}

    def residues(self, occ: int, t: int) -> list[int]:
        return [c % self.ii for c in range(t, t + occ)]

    def blocked(self, unit: str, occ: int, t: int) -> int | None:
        """The first cycle of [t, t + occ) whose residue would be over capacity, or None (it fits)."""
        cover, cap = self.cover[unit], self.cap[unit]
        extra: dict[int, int] = {}
        for c in range(t, t + occ):
            r = c % self.ii
            extra[r] = extra.get(r, 0) + 1
            if len(cover[r]) + extra[r] > cap:
                return c
        return None

    def fits(self, unit: str, occ: int, t: int) -> bool:
        return self.blocked(unit, occ, t) is None

    def first_fit(self, unit: str, occ: int, lo: int, hi: int) -> int | None:
        """The least start in [lo, hi] at which `occ` cycles fit (each start up to a blocked cycle
        c still covers c, and without wrapping onto itself the same residue overflows: the scan jumps
        past c)."""
        s = lo
        while s <= hi:
            c = self.blocked(unit, occ, s)
            if c is None:
                return s
            s = c + 1 if occ <= self.ii else s + 1
        return None

    def alone_fits(self, unit: str, occ: int) -> bool:
        """Whether the op fits an empty table at all (an occupancy over cap * I never does)."""
        return -(-occ // self.ii) <= self.cap[unit]

    def place(self, name: str, unit: str, occ: int, t: int) -> None:
        for r in self.residues(occ, t):
            self.cover[unit][r].append(name)

    def remove(self, name: str, unit: str, occ: int, t: int) -> None:
        for r in self.residues(occ, t):
            self.cover[unit][r].remove(name)

    def colliding(self, unit: str, occ: int, t: int, rank: dict[str, int]) -> list[str]:
        """The ops to evict so that an op of `occ` cycles fits at t: at each residue it would
        overfill, the lowest-ranked covering ops first, as many as needed."""
        cover, cap = self.cover[unit], self.cap[unit]
        need: dict[int, int] = {}
        for r in self.residues(occ, t):
            need[r] = need.get(r, 0) + 1
        out: list[str] = []
        for r in sorted(need):
            present = [v for v in cover[r] if v not in out]
            over = len(present) + need[r] - cap
            if over > 0:
                out += sorted(present, key=lambda v: -rank[v])[:over]
        return out


def iterative_schedule(p: Problem, ii: int, budget: int | None = None,
                       max_length: int | None = None) -> dict[str, int] | None:
    """Rau's iterative modulo schedule at `ii` (starts from 0), checked exactly, or None. With
    `max_length`, every op also starts no later than max_length - tail (its distance-0 path to the end
    of the iteration), so the schedule's length is at most max_length: an op whose Estart is past
    that goes at its latest start, evicting the predecessors it breaks."""
    from .modulo import _heads_tails
    h = heights(p, ii)
    if h is None:
        return None
    tail = _heads_tails(p)[1]
    latest = {v: (None if max_length is None else max_length - tail[v]) for v in tail}
    if any(x is not None and x < 0 for x in latest.values()):
        return None
    task, table = p.task, _Table(p, ii)
    if any(t.occupancy and not table.alone_fits(t.unit, t.occupancy) for t in p.tasks):
        return None
    order = sorted(range(len(p.tasks)), key=lambda i: (-h[p.tasks[i].name], i))
    rank = {p.tasks[i].name: k for k, i in enumerate(order)}  # 0: scheduled first
    ins = {t.name: [d for d in p.deps if d.dst == t.name] for t in p.tasks}
    outs = {t.name: [d for d in p.deps if d.src == t.name] for t in p.tasks}
    start: dict[str, int] = {}
    previous: dict[str, int] = {}
    waiting = sorted(rank, key=rank.get)  # unscheduled ops, highest priority first
    budget = BUDGET_PER_OP * len(p.tasks) if budget is None else budget

    def unschedule(v: str) -> None:
        t = task[v]
        if t.occupancy:
            table.remove(v, t.unit, t.occupancy, start[v])
        del start[v]
        waiting.append(v)

    while waiting and budget > 0:
        budget -= 1
        waiting.sort(key=rank.get)
        v = waiting.pop(0)
        t = task[v]
        estart = max([0] + [start[d.src] + d.latency - d.distance * ii for d in ins[v] if d.src in start])
        last = estart + ii - 1 if latest[v] is None else min(estart + ii - 1, latest[v])
        slot = None
        if t.occupancy == 0:
            slot = min(estart, last)
        elif estart <= last:
            slot = table.first_fit(t.unit, t.occupancy, estart, last)
        if slot is None:
            slot = estart if v not in previous or estart > previous[v] else previous[v] + 1
            if latest[v] is not None and slot > latest[v]:
                slot = latest[v]
            if t.occupancy:
                for u in table.colliding(t.unit, t.occupancy, slot, rank):
                    unschedule(u)
        for d in outs[v]:  # successors whose dependence the new start breaks
            if d.dst in start and d.dst != v and start[d.dst] + d.distance * ii < slot + d.latency:
                unschedule(d.dst)
        for d in ins[v]:  # predecessors over carried edges (their Estart did not see v)
            if d.src in start and d.src != v and slot + d.distance * ii < start[d.src] + d.latency:
                unschedule(d.src)
        start[v], previous[v] = slot, slot
        if t.occupancy:
            table.place(v, t.unit, t.occupancy, slot)
    if waiting:
        return None
    shift = min(start.values(), default=0)
    start = {t.name: start[t.name] - shift for t in p.tasks}
    if not feasible(p, ii, start):
        return None
    start = compact(p, ii, start)
    return start if max_length is None or length(p, start) <= max_length else None


def compact(p: Problem, ii: int, start: dict[str, int]) -> dict[str, int]:
    """Move ops earlier, one at a time (never before the earliest start), while every dependence and
    the reservation table still hold; repeat until nothing moves. Returns a feasible schedule, from 0,
    no longer than `start`."""
    task, table = p.task, _Table(p, ii)
    start = dict(start)
    for t in p.tasks:
        if t.occupancy:
            table.place(t.name, t.unit, t.occupancy, start[t.name])
    ins = {t.name: [d for d in p.deps if d.dst == t.name and d.src != t.name] for t in p.tasks}
    index = p.index
    base = min(start.values(), default=0)  # no op goes before the first: the length only shrinks
    moved = True
    while moved:
        moved = False
        for v in sorted(start, key=lambda v: (-start[v], index[v])):
            t = task[v]
            lo = max([base] + [start[d.src] + d.latency - d.distance * ii for d in ins[v]])
            # carried successors bound how early v may go: none (an earlier start only helps them)
            if lo >= start[v]:
                continue
            if t.occupancy:
                table.remove(v, t.unit, t.occupancy, start[v])
            best = lo if not t.occupancy else table.first_fit(t.unit, t.occupancy, lo, start[v] - 1)
            best = start[v] if best is None else best  # (an earlier start only helps its successors)
            if t.occupancy:
                table.place(v, t.unit, t.occupancy, best)
            if best < start[v]:
                start[v], moved = best, True
    shift = min(start.values(), default=0)
    return {t.name: start[t.name] - shift for t in p.tasks}


def length(p: Problem, start: dict[str, int]) -> int:
    return max([start[t.name] + t.cycles for t in p.tasks] + [0])
