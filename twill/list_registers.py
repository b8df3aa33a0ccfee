"""A register-aware list schedule at a given I: joint_greedy's list schedule, each op placed at the first
start that also keeps its role's registers and the register file within the limits, as far as the ops
placed so far say.

The accounting is liveness.role_register_use's, built op by op (`Registers`): a role's ring of live
registers per steady-state cycle (liveness.live_ring of each interval, times its registers per thread).
Placing op v at s adds to v's role only: v's own register result from s to s + cycles (it grows later,
when its readers are placed), each same-role register operand's interval extended to s + distance * I
+ holds(v), each value v loads from another role or from tensor memory over [s, s + cycles), and v's
scratch. An interval only grows, so every amount a later placement sees is a lower bound on the final
one, and once the last op is placed the rings are the final profiles (a result written in place is
counted from its op's start here, a little more than liveness counts; a value streamed through its only
reader is counted whole: both err on the side of more registers). `verify` still judges the schedule.

Where no start in the I cycles from the earliest fits the registers (and the reservation table and the
blocking rule), the op takes the fitting start of the least excess, and the schedule goes on: it is
judged whole by verify (and joint_greedy's repair may move ops between roles from there).

Measured (docs/benchmarks.md, log, session 41: solver41)."""
from __future__ import annotations

import numpy as np

from .greedy import _Table
from .liveness import (always_blocking, busy, holds, imports, live_ring, read_bytes, regs_per_thread, scratch,
                       tmem_reads)
from .problem import Problem
from .registers import register_file


class Registers:
    """Per role, its live registers per thread at each steady-state cycle, grown op by op."""

    def __init__(self, p: Problem, ii: int, roles: dict[str, int], warps: dict[int, int]):
        lim = p.limits
        self.p, self.ii, self.roles, self.warps = p, ii, roles, warps
        self.ring = {r: np.zeros(ii, dtype=np.int64) for r in set(roles.values())}
        self.base = {r: lim.register_reserve for r in self.ring}
        for _, nbytes, readers in p.register_inputs:
            for r in {roles[c] for c in readers}:
                self.base[r] += regs_per_thread(nbytes, warps[r])
        self.load = {r: all(p.task[v].variable_latency for v in roles if roles[v] == r) for r in self.ring}
        self.begin: dict[str, int] = {}  # a placed register value's interval on its role
        self.end: dict[str, int] = {}
        loaded = imports(p) + tmem_reads(p)
        self.loads_of = {v: [(u, read_bytes(p, u, v)) for u, c in loaded if c == v] for v in roles}
        self.scratch = dict(scratch(p))
        self.reads = {v: [d for d in p.deps if d.dst == v] for v in roles}
        self.readers = {v: [d for d in p.deps if d.src == v] for v in roles}

    def _regs(self, v: str) -> int:
        t = self.p.task[v]
        return regs_per_thread(t.register_bytes, self.warps[self.roles[v]])

    def _kept(self, v: str) -> bool:
        t = self.p.task[v]
        return t.space == "reg" and t.bytes > 0

    def items(self, v: str, s: int, start: dict[str, int]) -> list[tuple[int, int, int]]:
        """(begin, end, registers) intervals that placing v at s adds to its role."""
        p, ii, role = self.p, self.ii, self.roles[v]
        t = p.task[v]
        out = []
        if self._kept(v):
            end = s + max(t.cycles, 1)
            for d in self.readers[v]:
                if d.dst in start and self.roles[d.dst] == role:
                    end = max(end, start[d.dst] + d.distance * ii + holds(p.task[d.dst]))
            out.append((s, end, self._regs(v)))
        for d in self.reads[v]:
            u = d.src
            if u in self.end and u != v and self.roles[u] == role and self._kept(u):
                new = s + d.distance * ii + holds(t)
                if new > self.end[u]:
                    out.append((self.end[u], new, self._regs(u)))
        w = self.warps[role]
        for u, nbytes in self.loads_of[v]:
            if self.roles[u] != role or p.task[u].space != "reg":
                out.append((s, s + max(t.cycles, 1), regs_per_thread(nbytes, w)))
        if v in self.scratch:
            out.append((s, s + max(t.cycles, 1), self.scratch[v]))
        return out

    def added(self, items) -> np.ndarray:
        ring = np.zeros(self.ii, dtype=np.int64)
        for b, e, k in items:
            ring += k * live_ring(b, e, self.ii)
        return ring

    def excess(self, role: int, ring: np.ndarray) -> int:
        """Registers per thread over the limits if `role`'s ring became `ring`: its own need over
        registers_per_thread, plus the file's excess in per-thread registers of a warpgroup."""
        lim = self.p.limits
        g = lim.register_granule
        need = {r: self.base[r] + int((ring if r == role else self.ring[r]).max()) for r in self.ring}
        over = max(0, need[role] - lim.registers_per_thread)
        used, pool = register_file(lim, [(self.warps[r], max(lim.min_registers, -(-n // g) * g))
                                         for r, n in need.items()])
        return over + max(0, used - pool) // (32 * lim.warp_group)

    def place(self, v: str, s: int, items) -> None:
        role = self.roles[v]
        self.ring[role] += self.added(items)
        if self._kept(v):
            self.begin[v], self.end[v] = items[0][0], items[0][1]
        for d in self.reads[v]:
            u = d.src
            if u in self.end and u != v and self.roles[u] == role and self._kept(u):
                self.end[u] = max(self.end[u], s + d.distance * self.ii + holds(self.p.task[v]))


def swing_order(p: Problem, ii: int) -> list[str] | None:
    """An order in which each op (but the first of each connected part) is a neighbour, over the
    dependences, of an op before it, so that it can be placed next to what it reads or what reads it
    (swing modulo scheduling's order, Llosa et al.): from the op of the longest path through it,
    over the dependences of distance 0,
    alternately downward sweeps (successors, the longest tail first) and upward sweeps (predecessors,
    the longest head first). None below RecMII."""
    from .ims import heights
    tail = heights(p, ii)
    if tail is None:
        return None
    head = {t.name: 0 for t in p.tasks}
    for _ in range(len(p.tasks) + 1):
        changed = False
        for d in p.deps:
            w = head[d.src] + d.latency - d.distance * ii
            if w > head[d.dst]:
                head[d.dst], changed = w, True
        if not changed:
            break
    index = {t.name: i for i, t in enumerate(p.tasks)}
    succ = {v: sorted({d.dst for d in p.deps if d.src == v and d.dst != v and d.distance == 0}, key=index.get)
            for v in index}
    pred = {v: sorted({d.src for d in p.deps if d.dst == v and d.src != v and d.distance == 0}, key=index.get)
            for v in index}
    order: list[str] = []
    done: set[str] = set()
    while len(order) < len(index):
        ready = {max((v for v in index if v not in done), key=lambda v: (head[v] + tail[v], -index[v]))}
        down = True
        while ready:
            while ready:
                v = max(ready, key=(lambda v: (tail[v], -index[v])) if down else (lambda v: (head[v], -index[v])))
                ready.discard(v)
                order.append(v)
                done.add(v)
                ready |= {u for u in (succ[v] if down else pred[v]) if u not in done}
            down = not down
            ready = {u for v in order for u in (succ[v] if down else pred[v]) if u not in done}
    return order


def register_list_schedule(p: Problem, ii: int, order: list[str], roles: dict[str, int], warps: dict[int, int],
                           in_order: bool = False) -> dict[str, int] | None:
    """Starts at `ii` with `roles` fixed (see the module's docstring), or None where an op finds no
    start that the reservation table, the blocking rule and the dependences allow. An op with placed
    successors and no placed predecessor is placed as late as it can (its latest start downward), so
    that its result lives no longer than it must; starts are shifted to begin at 0."""
    task, table, start, last = p.task, _Table(p, ii), {}, 0
    cross = {(d.src, d.dst): p.cross if roles[d.src] != roles[d.dst] else 0 for d in p.deps}
    blocking = always_blocking(p) | {d.dst for d in p.deps if roles[d.src] != roles[d.dst]}
    ins = {v: [d for d in p.deps if d.dst == v] for v in order}
    outs = {v: [d for d in p.deps if d.src == v] for v in order}
    regs = Registers(p, ii, roles, warps)
    for v in order:
        t = task[v]
        if any(d.dst == v and d.latency > d.distance * ii for d in outs[v]):
            return None
        below = [start[d.src] + d.latency + cross[d.src, d.dst] - d.distance * ii for d in ins[v] if d.src in start]
        above = [start[d.dst] + d.distance * ii - d.latency - cross[d.src, d.dst] for d in outs[v] if d.dst in start]
        late = (not in_order and any(d.dst in start for d in outs[v] if d.distance == 0)
                and not any(d.src in start for d in ins[v] if d.distance == 0))
        if late:
            hi = min(above)
            lo = max(below + [hi - ii + 1])
            span = range(hi, lo - 1, -1)
        else:
            lo = max((below or [0]) + ([last] if in_order else []))
            hi = min(above, default=lo + ii - 1)
            span = range(lo, min(hi, lo + ii - 1) + 1)
        mates = [u for u in start if roles[u] == roles[v]]
        role = roles[v]
        best = None  # (excess, s, items)
        for s in span:
            if t.occupancy and table.blocked(t.unit, t.occupancy, s) is not None:
                continue
            if v in blocking and any(((s - start[u]) % ii or ii) < busy(task[u]) for u in mates):
                continue
            if any(u in blocking and ((start[u] - s) % ii or ii) < busy(t) for u in mates):
                continue
            items = regs.items(v, s, start)
            over = regs.excess(role, regs.ring[role] + regs.added(items)) if items else 0
            if best is None or over < best[0]:
                best = (over, s, items)
            if over == 0:
                break
        if best is None:
            return None
        _, s, items = best
        if t.occupancy:
            table.place(t.unit, t.occupancy, s)
        regs.place(v, s, items)
        start[v] = last = s
    first = min(start.values())
    return {v: s - first for v, s in start.items()}
