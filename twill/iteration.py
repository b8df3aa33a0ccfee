"""One iteration alone, as a plain (not modulo) schedule: stage 1's lower bound on L and, where it fits
in one copy of I, its schedule. CP-SAT (one worker, a fixed seed, a deterministic work limit: the same
problem gives the same answer on any machine speed).

The relaxation: the ops of ONE iteration, every distance-0 dependence, L >= start + the op's tail
(the longest distance-0 path from its start to the iteration's end, modulo._heads_tails), and each unit
as a resource in absolute time: capacity 1 a no-overlap of the occupancies [start, start + occ),
capacity c a cumulative of height c. Every modulo schedule at every I satisfies it: two occupancies of
one iteration that overlap in absolute time overlap in their residues too, so a cycle covered by k of
them is a residue covered at least k times (k <= cap). Its least makespan is therefore a lower bound on
L at every I, and the solver's proven bound on it (`Flat.bound`) is one even where the work limit stops
it. `modulo.length_bound` is a relaxation of the same problem (the unit's load after a head threshold);
this one sees how the units and the dependences interact.

Its schedule is a modulo schedule at I where it meets the carried dependences at I and no two
occupancies collide modulo I (greedy.feasible checks it exactly; always the case where every
occupancy ends by I); then, when its makespan is the proven least, L at I is proven with no ILP. On
the corpus' random DAGs of 75-150 ops (the bottleneck unit loaded to ResMII, L = I), the quick
schedules found L = 1.5-1.7 I and CBC ran out of the 60 s without closing the gap; this schedule is
L = I in 0.02 s."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .problem import Problem

WORK_LIMIT = 2.0  # CP-SAT's deterministic time (its own unit, about a second of one core): not a clock


@dataclass(frozen=True)
class Flat:
    bound: int  # a proven lower bound on L at every I
    length: int | None  # the makespan of `starts`; None where none was found
    starts: tuple[tuple[str, int], ...] = ()

    @property
    def start(self) -> dict[str, int]:
        return dict(self.starts)

    @property
    def proven(self) -> bool:
        """Whether `length` is the least makespan of one iteration (then no L at any I is shorter)."""
        return self.length is not None and self.length <= self.bound


def flat_schedule(p: Problem, time_limit: float | None = None, work_limit: float = WORK_LIMIT) -> Flat:
    """The least makespan of one iteration (module doc), within `work_limit` (and `time_limit`
    seconds, for --time-limit: then the answer may depend on the machine's speed, as a time limit's does)."""
    from .cpsat_model import _bounded, deterministic_solver, ortools_cp_model
    from .modulo import _heads_tails
    cp = ortools_cp_model()
    head, tail = _heads_tails(p)
    zero = [d for d in p.deps if d.distance == 0]
    horizon = (sum(max(t.cycles, t.occupancy, 1) for t in p.tasks) + sum(max(0, d.latency) for d in zero)
               + max([tail[t.name] for t in p.tasks] + [0]))
    m = cp.CpModel()
    length = m.new_int_var(0, horizon, "L")
    start = {t.name: m.new_int_var(head[t.name], horizon, f"s[{t.name}]") for t in p.tasks}
    on_unit: dict[str, list] = {}
    for t in p.tasks:
        m.add(length >= start[t.name] + tail[t.name])
        if t.occupancy > 0:
            on_unit.setdefault(t.unit, []).append(m.new_fixed_size_interval_var(start[t.name], t.occupancy,
                                                                                 f"occ[{t.name}]"))
    for d in zero:
        m.add(start[d.dst] >= start[d.src] + d.latency)
    for unit, cap in p.caps:
        intervals = on_unit.get(unit, [])
        if len(intervals) <= cap:
            continue
        if cap == 1:
            m.add_no_overlap(intervals)
        else:
            m.add_cumulative(intervals, [1] * len(intervals), cap)
    m.minimize(length)
    solver = deterministic_solver(cp, work_limit)
    prm = solver.parameters
    if time_limit is not None:
        prm.max_time_in_seconds = max(0.01, time_limit)
    status = _bounded(solver, m, None)
    if status in (cp.OPTIMAL, cp.FEASIBLE):
        starts = tuple((t.name, solver.value(start[t.name])) for t in p.tasks)
        return Flat(math.ceil(solver.best_objective_bound - 1e-6), solver.value(length), starts)
    return Flat(0, None)
