"""Stage 1: optimal modulo scheduling, an integer program solved by CBC through PuLP.

For I = max(ResMII, RecMII), I+1, ... the ILP below is solved; the first feasible I is the SWP
bound. Variables: an integer start T[v] per op. Constraints:

    dep[u->v]       T[v] + distance*I >= T[u] + latency(u)              every edge
    len[v]          L >= T[v] + cycles(v)
    cap[f,...]      the modulo reservation table of every unit f, in one of two equivalent forms:
      capacity 1:   for each pair u, v on f, an integer q[u,v] with
                    occ(u) <= T[v] - T[u] - q*I <= I - occ(v)         (their residues do not collide)
      capacity > 1: for each ordered pair u, v on f, an integer q[u,v] and a binary o[u,v] that
                    says v's occupancy covers u's start: r = T[u] - T[v] - q*I in [0, I), with
                    r < occ(v) when o = 1 and r >= occ(v) when o = 0; at each op's start the ops
                    covering it number at most cap(f): 1 + sum_v o[u,v] <= cap(f). (The count of
                    occupying ops only rises at a start, so its maximum is at one.) Where an op
                    occupies its unit for more than I cycles, method.md's one-hot residues
                    res[v,r] instead, T[v] = I*k[v] + sum_r r*res[v,r], and per residue R the
                    residues each op occupies at R number at most cap(f).

The pairwise forms have no variable per residue, so their size does not grow with I: with costs
normalized to U = 300 (I of several hundred units) the one-hot form left CBC without a feasible
point after a minute on the 16-op FA3 graph, the pairwise form solves it in seconds
(docs/benchmarks.md); on FA3 with four ALU units (a machine with `alu: 4`) the one-hot form ran
for over ten minutes, the pairwise one for well under a second.

The objective is the length L, then (a small second weight) the sum of starts, so among the
shortest schedules the earliest one is chosen and the answer is deterministic.
`optimal` is true when every smaller I was proven infeasible (or is below the MII bound).

At each I a quick schedule comes first (the one-pass list schedule of greedy.py, then Rau's iterative
modulo scheduler, ims.py): when one exists, I is feasible, and it is CBC's warm start. For the joint
stage (`earliest=False`), which reads L only through its window of ceil(L / I) copies and as a floor,
CBC then gets LENGTH_NODES branch-and-bound nodes (a count, not a clock: the answer does not depend
on the machine's speed) to prove L; where it does not, but the shortest schedule found has as many
copies as `length_bound` (so the least L has them too), L stays unproven: the result carries that
schedule's length and the proven floor (`ModuloResult.length_floor`), and the joint stage's window is
the one the least L would give. Only where the copies still differ does CBC run on, as before.

For the joint stage, where the quick schedule fails or is longer than `length_bound`, the flat schedule of
one iteration (iteration.py, CP-SAT, once per problem) comes before CBC: its proven bound is a floor on L
at every I (and CBC's cut), and its schedule, where it is a modulo schedule at I and shorter, replaces the
quick one; where it meets the floor, L is proven with no ILP. On the corpus' random DAGs of 60-150 ops the
quick schedules were 1.4-1.7 I long and CBC did not close the gap in 60 s; the flat one is L = I.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

from .iteration import flat_schedule
from .problem import Problem


@dataclass(frozen=True)
class ModuloResult:
    ii: int
    length: int
    starts: tuple[tuple[str, int], ...]
    optimal: bool  # every smaller I proven infeasible
    res_mii: int
    rec_mii: int
    tried: tuple[tuple[int, str], ...]  # (I, status) in order
    timed_out: bool = False  # a time limit stopped it: L (or, with `optimal` False, I too) not proven least
    # set where L is not proven least but its window is known: a proven lower bound on L at `ii` with
    # as many copies as `length` (ceil(floor / ii) == ceil(length / ii)); None where L is proven least
    length_floor: int | None = None

    @property
    def start(self) -> dict[str, int]:
        return dict(self.starts)


def res_mii(p: Problem) -> int:
    """max over units f of ceil(total occupancy on f / cap(f)); at least 1."""
    load: dict[str, int] = {}
    for t in p.tasks:
        load[t.unit] = load.get(t.unit, 0) + t.occupancy
    return max([1] + [math.ceil(v / p.cap[f]) for f, v in load.items()])


def has_positive_cycle(p: Problem, ii: int) -> bool:
    """Bellman-Ford on weights latency - distance*I: a positive cycle means I is too small."""
    names = [t.name for t in p.tasks]
    dist = {n: 0 for n in names}
    for _ in range(len(names)):
        changed = False
        for d in p.deps:
            w = dist[d.src] + d.latency - d.distance * ii
            if w > dist[d.dst]:
                dist[d.dst], changed = w, True
        if not changed:
            return False
    return True


def rec_mii(p: Problem) -> int:
    """The smallest I with no positive-weight dependence cycle (binary search)."""
    lo, hi = 1, max(1, sum(t.cycles for t in p.tasks) + 1)
    if not has_positive_cycle(p, lo):
        return lo
    while lo < hi:
        mid = (lo + hi) // 2
        if has_positive_cycle(p, mid):
            lo = mid + 1
        else:
            hi = mid
    return lo


def _heads_tails(p: Problem, cross: int = 0) -> tuple[dict[str, int], dict[str, int]]:
    """Per op, the longest distance-0 dependence path into its start (head: no start is earlier) and
    from its start to the end of the iteration (tail: L >= start + tail). With `cross`, an edge
    between a variable-latency op and another kind of op weighs its latency plus `cross`: the joint
    stage puts those two on different roles, always (families.variable_latency), so the hand-off's
    delay is always paid there."""
    head = {t.name: 0 for t in p.tasks}
    tail = {t.name: t.cycles for t in p.tasks}
    zero = [d for d in p.deps if d.distance == 0]
    vl = {t.name: t.variable_latency for t in p.tasks}
    weight = {id(d): d.latency + (cross if vl[d.src] != vl[d.dst] else 0) for d in zero}
    for _ in range(len(p.tasks)):  # distance-0 edges form a DAG: a pass per op settles every path
        changed = False
        for d in zero:
            w = weight[id(d)]
            if head[d.src] + w > head[d.dst]:
                head[d.dst], changed = head[d.src] + w, True
            if w + tail[d.dst] > tail[d.src]:
                tail[d.src], changed = w + tail[d.dst], True
        if not changed:
            break
    return head, tail


def length_bound(p: Problem, cross: int = 0) -> int:
    """A lower bound on L at every I, from the units. The occupancies [start, start + occ) of one
    iteration's ops on a unit of capacity c cover no cycle more than c times (a cycle covered more
    often would be over c modulo any I), so those of any subset S of its ops span at least
    ceil(sum occ / c) cycles, beginning no earlier than the least head in S; the op ending last
    then still needs its tail minus its occupancy: L >= min head + ceil(sum occ / c) + min (tail - occ)
    over S. S ranges over the ops whose head is at least some threshold. Also the critical path.
    With `cross` (the joint stage's bound: `cross=p.cross`), heads and tails count the cross-role
    delay of every edge between a variable-latency op and another kind (`_heads_tails`): on the
    random DAGs of the corpus this is the joint optimum or a few units under it, where stage 1's
    bound is 20-25% lower."""
    head, tail = _heads_tails(p, cross)
    best = max(tail.values(), default=0)
    for unit, cap in p.caps:
        ops = sorted((t for t in p.tasks if t.unit == unit and t.occupancy > 0), key=lambda t: -head[t.name])
        total, rest = 0, None
        for t in ops:  # S = the ops with the largest heads, growing
            total += t.occupancy
            rest = tail[t.name] - t.occupancy if rest is None else min(rest, tail[t.name] - t.occupancy)
            best = max(best, head[t.name] + -(-total // cap) + rest)
    return best


def horizon(p: Problem, ii: int) -> int:
    """An upper bound on any start time worth considering at initiation interval `ii`."""
    return sum(max(t.cycles, t.occupancy, 1) for t in p.tasks) + ii * (len(p.tasks) + 1)


def solve_at(p: Problem, ii: int, time_limit: float | None = None, min_length: int | None = None,
             incumbent: dict[str, int] | None = None, earliest: bool = True, max_nodes: int | None = None):
    """Solve the ILP at one I. Returns (status, length, starts); status is a pulp status string,
    or "Feasible" when CBC's time limit stopped it with a schedule it had not proven shortest.
    Building the model stops too when the limit passes (ModuloTimeout). CBC's files go to the
    scratch folder (fileio.scratch), which every exit removes. `incumbent` (starts feasible at ii)
    is CBC's warm start; without `earliest` the objective is L alone (the starts are then any
    schedule of that length: the joint stage reads only I and L). With `max_nodes`, CBC stops after
    that many branch-and-bound nodes and gets no time limit of its own (the watchdog still ends it at
    the deadline: ModuloTimeout), so where it stops does not depend on the machine's speed."""
    import time

    import pulp

    deadline = None if time_limit is None else time.monotonic() + time_limit
    prob, start, length = _model(p, ii, deadline, earliest, incumbent)
    prob += length >= max(min_length or 0, length_bound(p)), "L>=bound"
    _clock(deadline)
    _run_cbc(prob, deadline, warm=incumbent is not None, max_nodes=max_nodes)
    status = pulp.LpStatus[prob.status]
    if status == "Optimal" and prob.sol_status != pulp.LpSolutionOptimal:
        status = "Feasible"  # "Stopped on time" with a schedule: feasible, its L not proven least
    if status not in ("Optimal", "Feasible"):
        return status, None, None
    starts = {t.name: int(round(pulp.value(start[t.name]))) for t in p.tasks}
    return status, int(round(pulp.value(length))), starts


def _model(p: Problem, ii: int, deadline, earliest: bool, incumbent: dict[str, int] | None):
    """The ILP at ii (module doc): (problem, start variables, L variable), with the incumbent's
    values as initial values when given (and within the horizon)."""
    import pulp

    names = [t.name for t in p.tasks]
    H = horizon(p, ii)
    if incumbent is not None and max(incumbent.values(), default=0) > H:
        incumbent = None
    prob = pulp.LpProblem(f"modulo_I{ii}", pulp.LpMinimize)
    start = {v: pulp.LpVariable(f"start[{v}]", 0, H, cat="Integer") for v in names}
    length = pulp.LpVariable("L", 0, H + max(t.cycles for t in p.tasks) + 1, cat="Integer")
    prob += length * (len(names) * (H + 1) + 1) + pulp.lpSum(start.values()) if earliest else length
    for t in p.tasks:
        prob += length >= start[t.name] + t.cycles, f"len[{t.name}]"
    for n, d in enumerate(p.deps):
        prob += start[d.dst] + d.distance * ii >= start[d.src] + d.latency, f"dep[{d.src}->{d.dst}#{n}]"
    for unit, cap in p.caps:
        _clock(deadline)
        on_unit = [t for t in p.tasks if t.unit == unit and t.occupancy > 0]
        if sum(t.occupancy for t in on_unit) <= cap:
            continue
        if cap == 1:
            _pairwise(prob, start, on_unit, ii, H, unit, incumbent)
        elif all(t.occupancy <= ii for t in on_unit):
            _pairwise_cumulative(prob, start, on_unit, ii, H, unit, cap, incumbent)
        else:
            _residues(prob, start, on_unit, ii, H, unit, cap, incumbent)
    if incumbent is not None:
        for v in names:
            start[v].setInitialValue(incumbent[v])
        length.setInitialValue(max(incumbent[t.name] + t.cycles for t in p.tasks))
    return prob, start, length


def _run_cbc(prob, deadline, warm: bool, max_nodes: int | None = None) -> None:
    """CBC on `prob`, within the deadline. CBC takes whole seconds and can overrun them (its
    preprocessing is not interruptible): it gets 90% of what is left, and a watchdog ends it at the
    deadline itself (ModuloTimeout)."""
    import time

    import pulp

    from .fileio import scratch_folder
    left = None if deadline is None or max_nodes else max(1, math.floor(0.9 * (deadline - time.monotonic())))
    solver = pulp.PULP_CBC_CMD(msg=False, timeLimit=left, options=["randomSeed 1", "randomCbcSeed 1"],
                               warmStart=warm, maxNodes=max_nodes)
    if scratch_folder():
        solver.tmpDir = scratch_folder()
    with _watchdog(deadline):
        try:
            prob.solve(solver)
        except pulp.PulpSolverError:
            if deadline is not None and time.monotonic() >= deadline:
                raise ModuloTimeout() from None  # the watchdog ended CBC
            raise


def _pairwise(prob, start, ops, ii: int, H: int, unit: str, incumbent=None) -> None:
    """A unit of capacity 1: every pair's residues keep their occupancies apart. With an integer
    quotient q, start[v] - start[u] = q*I + r and occupancy(u) <= r <= I - occupancy(v)."""
    import pulp

    for i, u in enumerate(ops):
        if u.occupancy > ii:
            prob += pulp.lpSum([]) >= 1, f"cap[{unit},{u.name}>I]"
        for v in ops[i + 1:]:
            q = pulp.LpVariable(f"q[{u.name},{v.name}]", -(H // ii) - 1, H // ii + 1, cat="Integer")
            if incumbent is not None:
                q.setInitialValue((incumbent[v.name] - incumbent[u.name] - u.occupancy) // ii)
            diff = start[v.name] - start[u.name] - ii * q
            prob += diff >= u.occupancy, f"cap[{unit},{u.name}<{v.name}]"
            prob += diff <= ii - v.occupancy, f"cap[{unit},{v.name}<{u.name}+I]"


def _pairwise_cumulative(prob, start, ops, ii: int, H: int, unit: str, cap: int, incumbent=None) -> None:
    """A unit of capacity cap > 1 whose ops each occupy it for at most I cycles (so no op overlaps
    its own next instance): at each op u's start, u and the ops v covering it (o[u,v]) number at
    most cap. start[u] - start[v] = q*I + r with r in [0, I); o = 1 iff r < occupancy(v)."""
    import pulp

    if len(ops) <= cap:
        return  # each op covers a cycle at most once: never more than len(ops) at a time
    for u in ops:
        covering = []
        for v in ops:
            if v is u:
                continue
            q = pulp.LpVariable(f"q[{u.name},{v.name}]", -(H // ii) - 1, H // ii + 1, cat="Integer")
            o = pulp.LpVariable(f"o[{u.name},{v.name}]", cat="Binary")
            if incumbent is not None:
                q.setInitialValue((incumbent[u.name] - incumbent[v.name]) // ii)
                o.setInitialValue(int((incumbent[u.name] - incumbent[v.name]) % ii < v.occupancy))
            r = start[u.name] - start[v.name] - ii * q
            prob += r >= v.occupancy * (1 - o), f"cap[{unit},{v.name}!covers{u.name}]"
            prob += r <= v.occupancy - 1 + (ii - v.occupancy) * (1 - o), f"cap[{unit},{v.name}covers{u.name}]"
            covering.append(o)
        prob += 1 + pulp.lpSum(covering) <= cap, f"cap[{unit},@{u.name}]"


def _residues(prob, start, ops, ii: int, H: int, unit: str, cap: int, incumbent=None) -> None:
    """A unit of larger capacity: one-hot residues res[v,r] with start[v] = I*k[v] + sum r*res[v,r],
    and per residue R the occupying ops number at most cap (cap[unit,r=R])."""
    import pulp

    res = {}
    for t in ops:
        k = pulp.LpVariable(f"k[{t.name}]", 0, H // ii + 1, cat="Integer")
        for r in range(ii):
            res[t.name, r] = pulp.LpVariable(f"res[{t.name},{r}]", cat="Binary")
        if incumbent is not None:
            k.setInitialValue(incumbent[t.name] // ii)
            for r in range(ii):
                res[t.name, r].setInitialValue(int(incumbent[t.name] % ii == r))
        prob += pulp.lpSum(res[t.name, r] for r in range(ii)) == 1, f"onehot[{t.name}]"
        prob += start[t.name] == ii * k + pulp.lpSum(r * res[t.name, r] for r in range(ii)), f"residue[{t.name}]"
    for r in range(ii):
        # op v started at residue s occupies r for each c < occupancy with (s + c) % ii == r.
        terms = []
        for t in ops:
            mult: dict[int, int] = {}
            for c in range(t.occupancy):
                s = (r - c) % ii
                mult[s] = mult.get(s, 0) + 1
            terms += [m * res[t.name, s] for s, m in mult.items()]
        prob += pulp.lpSum(terms) <= cap, f"cap[{unit},r={r}]"


@contextmanager
def _watchdog(deadline: float | None):
    """End this process's CBC if it is still running at `deadline`."""
    if deadline is None:
        yield
        return
    import threading
    import time

    from .fileio import end_solver_children
    timer = threading.Timer(max(0.0, deadline - time.monotonic()), end_solver_children, kwargs={"reap": False})
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _clock(deadline: float | None) -> None:
    import time
    if deadline is not None and time.monotonic() > deadline:
        raise ModuloTimeout()


class ModuloTimeout(Exception):
    """The time limit ran out before any I was decided feasible."""


def sequential(p: Problem, r_mii: int = 0, c_mii: int = 0, tried=()) -> ModuloResult:
    """A modulo schedule that always exists, for a time limit that ends stage 1 first: the ops one
    after another in an order of their distance-0 dependences, each on its unit alone, and I the
    whole length (so no two iterations overlap, and every carried dependence is met). Not optimal."""
    order, placed = [], set()
    preds = {t.name: {d.src for d in p.deps if d.dst == t.name and d.distance == 0} for t in p.tasks}
    while len(order) < len(p.tasks):  # distance-0 edges form a DAG (the parser refuses cycles)
        ready = [t for t in p.tasks if t.name not in placed and preds[t.name] <= placed]
        t = ready[0] if ready else next(t for t in p.tasks if t.name not in placed)
        order.append(t)
        placed.add(t.name)
    starts, now = {}, 0
    for t in order:
        starts[t.name] = now
        now += max(t.cycles, t.occupancy, 1)
    length = max([starts[t.name] + t.cycles for t in p.tasks] + [1])
    need = max([starts[d.src] + d.latency - starts[d.dst] for d in p.deps if d.distance > 0] + [0])
    ii = max(now, length, need, 1)
    return ModuloResult(ii, length, tuple((t.name, starts[t.name]) for t in p.tasks), False, r_mii, c_mii,
                        tuple(tried), timed_out=True)


def modulo_schedule(p: Problem, max_ii: int | None = None, time_limit: float | None = None,
                    on_try=None, earliest: bool = True) -> ModuloResult | None:
    """Escalate I from the MII bound until the ILP is feasible. None if `max_ii` is reached;
    ModuloTimeout if `time_limit` seconds pass first (an undecided I is never skipped). Without
    `earliest`, the starts are any schedule of the least L (solve_at)."""
    import time

    deadline = None if time_limit is None else time.monotonic() + time_limit
    r_mii, c_mii = res_mii(p), rec_mii(p)
    ii = max(r_mii, c_mii)
    cap = max_ii or horizon(p, 1)
    tried = []
    flat = _Lazy(lambda: flat_schedule(p, None if deadline is None else deadline - time.monotonic()))
    while ii <= cap:
        if on_try:
            on_try(ii)
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise ModuloTimeout()
        status, length, starts, floor = _at(p, ii, left, earliest, flat)
        tried.append((ii, status))
        if status in ("Optimal", "Feasible", BOUNDED):
            shift = min(starts.values())
            starts = {v: s - shift for v, s in starts.items()}
            return ModuloResult(ii, length - shift, tuple(starts.items()), True, r_mii, c_mii, tuple(tried),
                                timed_out=status == "Feasible",
                                length_floor=floor if status == BOUNDED else None)
        if status != "Infeasible":
            raise ModuloTimeout()  # undecided at this I: a larger one would not be provably minimal
        ii += 1
    return None


# From this many ops the flat schedule comes before CBC's node run (`_at`): the node run took 0.8 s on
# the corpus' 32-op random DAG, 1.8 s at 60 ops, 3.5-23 s at 75-130 ops (shared 2-core machine), where
# the flat schedule proves L in under a second; on the 12-23-op graphs it added 0.2-0.25 s before.
FLAT_FIRST_OPS = 40
LENGTH_NODES = 200  # CBC's branch-and-bound nodes for proving L before the window alone is handed on
BOUNDED = "Bounded"  # _at's status: a schedule at I, L not proven least but its copies known
TIMED_OUT = "Timed out"  # _nodes_only's status where the deadline, not the node count, stopped CBC


def copies_known(p: Problem, ii: int, length: int, floor: int | None = None) -> bool:
    """Whether every L from the floor (a proven lower bound on L; `length_bound` by default) up to
    `length` has as many copies of I (ceil(L / I))."""
    return -(-length // ii) == -(-(length_bound(p) if floor is None else floor) // ii)


def quick_schedule(p: Problem, ii: int, earliest: bool = False) -> tuple[int, dict[str, int]] | None:
    """The shortest of the quick schedules at `ii` (greedy.py's list schedules; where they fail or
    are longer than the bound, ims.py's iterative one; where its copies are above the bound's, ims.py's
    again with L capped at the bound's copies), as (length, starts), or None where none finds one
    (which proves nothing). With `earliest` (--swp-only: CBC's earliest starts among the shortest
    schedules are the answer, and its warm start may pick among equals), the greedy's alone where it
    has one, as before ims.py existed."""
    from .greedy import greedy_schedule
    from .ims import iterative_schedule, length
    head, tail = _heads_tails(p)
    found = [f for f in [greedy_schedule(p, ii, head, tail)] if f is not None]
    if found and earliest:
        return found[0]
    if not found or found[0][0] > length_bound(p):
        start = iterative_schedule(p, ii)
        found += [(length(p, start), start)] if start is not None else []
    if found and not copies_known(p, ii, min(found, key=lambda f: f[0])[0]):
        start = iterative_schedule(p, ii, max_length=ii * -(-length_bound(p) // ii))
        found += [(length(p, start), start)] if start is not None else []
    return min(found, key=lambda f: f[0]) if found else None


class _Lazy:
    """A value computed at its first use (the flat schedule: CP-SAT's import alone takes a second)."""

    def __init__(self, make):
        self.make, self.done = make, None

    def __call__(self):
        if self.done is None:
            self.done = self.make()
        return self.done


def _at(p: Problem, ii: int, left: float | None, earliest: bool, flat=None):
    """One I of the escalation, as (status, length, starts, the proven floor on L). The quick schedule
    first (`quick_schedule`). When it exists, I is feasible; when it also meets `length_bound` (and no
    earliest starts are asked for), its L is proven least with no ILP. Otherwise it is CBC's warm start:
    for the joint stage, first within LENGTH_NODES nodes (BOUNDED where the copies are then known, module
    doc), then without; what CBC's time limit leaves undecided is the quick schedule, L not proven
    ("Feasible"). For the joint stage, the flat schedule of one iteration (iteration.py, `flat`: computed
    once per problem) raises the floor and, where it is a modulo schedule at `ii` shorter than the quick
    one, replaces it; where the schedule then meets the floor, L is proven. It comes before CBC's node run
    where there is no quick schedule or the problem has FLAT_FIRST_OPS ops or more, and after it (where
    the nodes did not prove L) on smaller ones, where the node run is cheap and CP-SAT's import alone
    (about 0.25 s and 60 MiB) would be most of the stage."""
    import time
    deadline = None if left is None else time.monotonic() + left

    def remaining() -> float | None:  # each step gets what the steps before it left
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    floor = length_bound(p)
    found = quick_schedule(p, ii, earliest)
    later = not earliest and flat is not None and (found is None or found[0] > floor)
    if later and (found is None or len(p.tasks) >= FLAT_FIRST_OPS):
        found, floor, later = *_with_flat(p, ii, found, flat()), False
    if found is not None and not earliest:
        if found[0] <= floor:
            return "Optimal", found[0], found[1], floor
        status, length, starts = _nodes_only(p, ii, remaining(), found, floor)
        if status == "Optimal":
            return status, length, starts, floor
        found = (length, starts) if status == "Feasible" and length < found[0] else found
        if later and status != TIMED_OUT:
            found, floor = _with_flat(p, ii, found, flat())
            if found[0] <= floor:
                return "Optimal", found[0], found[1], floor
        if status != TIMED_OUT and copies_known(p, ii, found[0], floor):  # CBC's node count stopped it
            return BOUNDED, found[0], found[1], floor
    try:
        status, length, starts = solve_at(p, ii, remaining(), incumbent=found and found[1], earliest=earliest,
                                          min_length=None if earliest else floor)
    except ModuloTimeout:
        if found is None:
            raise
        status = "Not Solved"
    assert not (status == "Infeasible" and found is not None), f"CBC refuted I = {ii}, which has a schedule"
    if status not in ("Optimal", "Feasible") and found is not None:
        return "Feasible", found[0], found[1], floor
    return status, length, starts, floor


def _with_flat(p: Problem, ii: int, found: tuple[int, dict[str, int]] | None, flat):
    """(the schedule, the floor): the quick schedule (None: none found), or the flat one where that is a
    modulo schedule at `ii` and shorter; the floor raised to the flat one's proven bound."""
    from .greedy import feasible
    floor = max(length_bound(p), flat.bound)
    if flat.length is not None and (found is None or flat.length < found[0]):
        shift = min(v for _, v in flat.starts)
        start = {v: s - shift for v, s in flat.starts}
        if feasible(p, ii, start):
            found = (max(start[t.name] + t.cycles for t in p.tasks), start)
    return found, floor


def _nodes_only(p: Problem, ii: int, left: float | None, found, floor: int | None = None):
    """CBC on L at `ii` from the quick schedule, stopped by LENGTH_NODES nodes only: its answer does
    not depend on the machine's speed. A deadline still ends it (ModuloTimeout: TIMED_OUT here). CBC
    may return a schedule longer than the quick one (where it does not take the warm start): the
    caller keeps the shorter."""
    try:
        return solve_at(p, ii, left, min_length=floor, incumbent=found[1], earliest=False, max_nodes=LENGTH_NODES)
    except ModuloTimeout:
        return TIMED_OUT, None, None
