"""Stage 2: joint software pipelining and warp specialization, in QF_LIA with Yices2.

Encoding (equivalent to the paper's time-indexed one, but independent of the cycle counts'
magnitude): for every op v an integer start `start[v]` of iteration 0 (instance i starts at
start[v] + i*I: uniqueness and consistency hold by construction) and an integer role
`role[v]` among K role slots. Per role slot w: `wg[w]` (a warpgroup, else one warp) and a
register budget `regs[w]`. Residues are exact: `mod[a,b]` is (start[a] - start[b]) mod I, an
integer in [0, I) with an integer quotient. Every constraint family is one function in
`FAMILIES` yielding (detail, formula) pairs, so `explain` can guard each with an assumption:

- completion:  start[v] + cycles(v) <= L.
- dependence:  start[v] + d*I >= start[u] + lat(u) + (role[u] != role[v] ? X : 0)   (cross_role folded in)
- capacity:    unit of capacity 1: occ(u) <= mod[v,u] <= I - occ(v) for ops u, v on it;
               larger capacity: at each op's start, the ops occupying the unit number <= cap.
- roles:       a warpgroup op runs on a warpgroup role; the warps of used roles fit the limit;
               role slots are used in order (symmetry breaking).
- variable_latency: a variable-latency op never shares a role with another kind of op.
- registers:   at the begin x of every register value and the start of every op that loads another
               role's value, on x's role w: reserve + sum over values v on w of regs(v, w) * live(v at x)
               + the values other roles produce that ops on w are reading at x <= regs[w];
               live(v at t) counts the iterations whose instance of v is live at t. A value lives
               until its last same-role reader has finished with it (liveness.holds) and begins at
               its op's end when written in place of a dying operand (liveness.in_place_operands).
               The budgets of whole warpgroups fit the registers the CTA is launched with
               (liveness.register_file).
- memory:      likewise for @smem (with streaming rings and staged cross-role values) and @tmem, at
               the begin of every value: a value lives until its last reader has its operand (an mma
               until it completes, any other op until its start: liveness.memory_holds) and an
               accumulating mma's result counts from its end (liveness.in_place_operands).
- blocking:    an op with a blocking in-edge does not start while another op of its role is in
               progress: mod[v,u] = 0 or mod[v,u] >= busy(u) (and busy(u) <= I when 0).

Escalation: for I from the SWP bound upward, check satisfiability with L up to the window of the
copies stage 1 needed plus two (`window`); the first satisfiable I is optimal: every smaller I was
unsatisfiable within its window, as in the paper (which allows no extra copy). Then L is minimized, then
the number of roles, the cross-role edges, the warps and the sum of the starts, each by tightening
a bound until unsat.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

from .errors import Diagnostic, NoScheduleError
from .liveness import (always_blocking, busy, holds, imports, in_place_operands, memory_holds, read_bytes,
                       register_file, register_pool, regs_per_thread, tmem_reads)
from .problem import Problem
from .schedule import Buffer, Role, Schedule, ScheduledOp
from .smt import smt_backend


@dataclass(frozen=True)
class JointResult:
    ii: int
    length: int
    starts: tuple[tuple[str, int], ...]
    roles: tuple[tuple[str, int], ...]  # op -> role slot
    role_warps: tuple[tuple[int, int], ...]  # slot -> warps
    optimal: bool  # every smaller I was shown unsatisfiable
    length_optimal: bool  # L was minimized to the end (a time limit can cut it short)
    tried: tuple[tuple[int, str], ...]


class Encoding:
    """The terms of one joint problem at a fixed I. Holds Yices objects: never leaves this module."""

    def __init__(self, p: Problem, ii: int, y, lmax: int):
        self.p, self.ii, self.y, self.lmax = p, ii, y, lmax
        self.max_distance = max((d.distance for d in p.deps), default=0)
        # how far past an op's start an interval of it may end: its hold, or its unit occupancy
        self.max_hold = max((max(holds(t), t.occupancy) for t in p.tasks), default=0)
        T, Ty = y.Terms, y.Types
        self.T = T
        self.int = Ty.int_type()
        self.bool = Ty.bool_type()
        names = [t.name for t in p.tasks]
        self.names = names
        # Role slots: every role hosts an op; at most warps/warp_group roles are warpgroups, and
        # the others host only ops a single warp issues.
        lim = p.limits
        by_warp = sum(1 for t in p.tasks if t.issue == "warp")
        self.K = max(1, min(len(names), lim.warps, lim.warps // lim.warp_group + by_warp))
        self.start = {v: self.var(f"start[{v}]") for v in names}
        self.role = {v: self.var(f"role[{v}]") for v in names}
        self.L = self.var("L")
        self.wg = [self.var(f"wg[{w}]", self.bool) for w in range(self.K)]
        self.regs = [self.var(f"regs[{w}]") for w in range(self.K)]
        self.used = [T.yor([self.same_slot(v, w) for v in names]) for w in range(self.K)]
        self.defs: list = [self.le(self.L, self.num(lmax))]  # always asserted, never in a core
        self._warpgroups = None  # built on first use: see warpgroups()

    # -- term helpers ---------------------------------------------------------------------------
    def var(self, name, ty=None):
        t = self.T.new_uninterpreted_term(self.int if ty is None else ty, name)
        return t

    def num(self, n: int):
        return self.T.integer(int(n))

    def add(self, *xs):
        return self.T.sum(list(xs)) if len(xs) > 1 else xs[0]

    def count(self, conditions):
        """How many of the boolean terms hold, as an integer term."""
        return self.add(*[self.T.ite(c, self.num(1), self.num(0)) for c in conditions])

    def le(self, a, b):
        return self.T.arith_leq_atom(a, b)

    def eq(self, a, b):
        return self.T.arith_eq_atom(a, b)

    def same_slot(self, v, w: int):
        return self.T.arith_eq_atom(self.role[v], self.num(w))

    def same_role(self, a, b):
        return self.T.arith_eq_atom(self.role[a], self.role[b])

    def scale(self, k: int, t):
        return self.T.mul(self.num(k), t)

    def residue_in(self, a: str, b: str, lo: int, hi: int):
        """(start[a] - start[b]) mod I lies in [lo, hi], for 0 <= lo <= hi < I: a disjunction of
        difference constraints over the few quotients that starts in [0, Lmax] allow."""
        T, ii, span = self.T, self.ii, self.lmax
        diff = T.sub(self.start[a], self.start[b])
        # start[a] - start[b] lies in [-Lmax, Lmax], so its quotient by I lies in [floor(-Lmax/I), Lmax // I].
        cases = [T.yand([self.le(self.num(q * ii + lo), diff), self.le(diff, self.num(q * ii + hi))])
                 for q in range((-span) // ii, span // ii + 1)]
        return T.yor(cases)

    def live_at(self, at: str, v: str, end):
        """How many iterations' instances of a value living [start[v], end) are live at start[at]."""
        return self.live_during(self.start[at], self.start[v], end)

    def live_during(self, point, begin, end):
        """How many iterations' instances of an interval [begin, end) of iteration 0 cover the
        cycle `point`: sum over k of [begin + k*I <= point < end + k*I], as a sum of 0/1 terms.
        The ranges of the terms bound k."""
        T, ii = self.T, self.ii
        # point and begin lie in [0, Lmax + max_hold], an end at most max_distance*I further (a
        # larger end only counts more instances, which no solution wants).
        lo, hi = -((self.lmax + self.max_distance * ii + self.max_hold) // ii), (self.lmax + self.max_hold) // ii
        diff = T.sub(point, begin)
        to_end = T.sub(point, end)
        terms = [T.ite(T.yand([self.le(self.num(k * ii), diff), T.arith_lt_atom(to_end, self.num(k * ii))]),
                       self.num(1), self.num(0)) for k in range(lo, hi + 1)]
        return T.sum(terms)

    def warps(self, w: int):
        T = self.T
        return T.ite(self.used[w], T.ite(self.wg[w], self.num(self.p.limits.warp_group), self.num(1)), self.num(0))

    def warpgroups(self):
        """(warpgroup roles, warpgroups the one-warp roles fill four to a group, the largest budget
        of a one-warp role): the CTA launches whole warpgroups, and `setmaxnreg` sets one budget per
        warpgroup, so one-warp roles sharing a warpgroup all get the largest of theirs."""
        if self._warpgroups is None:
            T, wgsz = self.T, self.p.limits.warp_group
            big = self.count([T.yand([self.used[w], self.wg[w]]) for w in range(self.K)])
            small = self.count([T.yand([self.used[w], T.ynot(self.wg[w])]) for w in range(self.K)])
            packed, top = self.var("small_warpgroups"), self.var("small_registers")
            self.defs += [self.le(small, self.scale(wgsz, packed)),
                          self.le(self.scale(wgsz, packed), self.add(small, self.num(wgsz - 1))),
                          self.le(self.num(0), top)]
            self.defs += [T.implies(T.yand([self.used[w], T.ynot(self.wg[w])]), self.le(self.regs[w], top))
                          for w in range(self.K)]
            self._warpgroups = big, packed, top
        return self._warpgroups


# -- the constraint families ---------------------------------------------------------------------

def completion(e: Encoding):
    for t in e.p.tasks:
        yield f"{t.name}", e.T.yand([e.le(e.num(0), e.start[t.name]),
                                    e.le(e.add(e.start[t.name], e.num(t.cycles)), e.L)])


def dependence(e: Encoding):
    T, p = e.T, e.p
    for d in p.deps:
        delay = T.ite(e.same_role(d.src, d.dst), e.num(0), e.num(p.cross))
        lhs = e.add(e.start[d.dst], e.num(d.distance * e.ii))
        yield f"{d.src}->{d.dst}", e.le(e.add(e.start[d.src], e.num(d.latency), delay), lhs)
        if not p.option("cross_role", True) and not p.task[d.src].variable_latency:
            yield f"no_cross:{d.src}->{d.dst}", e.same_role(d.src, d.dst)


def capacity(e: Encoding):
    p, ii = e.p, e.ii
    for unit, cap in p.caps:
        ops = [t for t in p.tasks if t.unit == unit and t.occupancy > 0]
        if sum(t.occupancy for t in ops) <= cap:
            continue
        if cap == 1:
            for i, u in enumerate(ops):
                if u.occupancy > ii:
                    yield f"{unit}:{u.name}", e.T.false()
                for v in ops[i + 1:]:
                    fits = u.occupancy <= ii - v.occupancy
                    yield f"{unit}:{u.name},{v.name}", (e.residue_in(v.name, u.name, u.occupancy, ii - v.occupancy)
                                                        if fits else e.T.false())
            continue
        for u in ops:
            counts = [e.live_at(u.name, v.name, e.add(e.start[v.name], e.num(v.occupancy))) for v in ops]
            yield f"{unit}@{u.name}", e.le(e.add(*counts), e.num(cap))


def roles(e: Encoding):
    T, p = e.T, e.p
    lim = p.limits
    for v in e.names:
        yield f"slot:{v}", T.yand([e.le(e.num(0), e.role[v]), e.le(e.role[v], e.num(e.K - 1))])
    for t in p.tasks:
        if t.issue == "warp_group":
            for w in range(e.K):
                yield f"warpgroup:{t.name}@{w}", T.implies(e.same_slot(t.name, w), e.wg[w])
    big, packed, _ = e.warpgroups()
    yield "warps", e.le(e.scale(lim.warp_group, e.add(big, packed)), e.num(lim.warps))
    # Pinned groups (--group): one role per group, a different role for each group.
    groups = [g for g in p.option("groups", ()) if g]
    for g in groups:
        for v in g[1:]:
            yield f"group:{g[0]},{v}", e.same_role(g[0], v)
    for i, g in enumerate(groups):
        for h in groups[i + 1:]:
            yield f"apart:{g[0]},{h[0]}", T.ynot(e.same_role(g[0], h[0]))
    # Symmetry breaking: op j uses a slot at most one above every slot used by ops before it.
    prefix = None
    for j, v in enumerate(e.names):
        if j == 0:
            yield "order", e.eq(e.role[v], e.num(0))
            prefix = e.role[v]
        else:
            yield "order", e.le(e.role[v], e.add(prefix, e.num(1)))
            prefix = T.ite(e.le(prefix, e.role[v]), e.role[v], prefix)


def variable_latency(e: Encoding):
    p = e.p
    for a in p.tasks:
        if not a.variable_latency:
            continue
        for b in p.tasks:
            if not b.variable_latency:
                yield f"{a.name},{b.name}", e.T.ynot(e.same_role(a.name, b.name))


def _register_values(p: Problem):
    return [t for t in p.tasks if t.space == "reg" and t.bytes > 0]


def registers(e: Encoding):
    T, p, lim = e.T, e.p, e.p.limits
    for w in range(e.K):
        bounded = T.yand([e.le(e.num(lim.min_registers), e.regs[w]),
                          e.le(e.regs[w], e.num(lim.registers_per_thread))])
        granule = e.var(f"granule[{w}]")
        yield f"budget[{w}]", T.yand([T.ite(e.used[w], bounded, e.eq(e.regs[w], e.num(0))),
                                      e.eq(e.regs[w], e.scale(lim.register_granule, granule))])
    # The register file: whole warpgroups at their budgets, within what the CTA is launched with.
    big, packed, top = e.warpgroups()
    threads = 32 * lim.warp_group
    most = -(-e.K // lim.warp_group)  # warpgroups the one-warp roles can fill
    per_sm = [T.ite(e.wg[w], e.scale(threads, e.regs[w]), e.num(0)) for w in range(e.K)]
    per_sm += [T.ite(e.eq(packed, e.num(g)), e.scale(threads * g, top), e.num(0)) for g in range(1, most + 1)]
    groups = e.add(big, packed)
    pool = e.num(register_pool(lim, 1))
    for n in range(2, e.K + 1):
        pool = T.ite(e.eq(groups, e.num(n)), e.num(register_pool(lim, n)), pool)
    yield "per_sm", e.le(e.add(*per_sm), pool)
    values = _register_values(p)
    end, begin = {}, {}
    for t in values:
        # end[v]: until the last same-role reader has finished with v (at least v's own latency).
        end[t.name] = e.var(f"reg_end[{t.name}]")
        e.defs.append(e.le(e.add(e.start[t.name], e.num(max(t.cycles, 1))), end[t.name]))
        for d in p.deps:
            if d.src == t.name:
                done = e.add(e.start[d.dst], e.num(d.distance * e.ii + holds(p.task[d.dst])))
                e.defs.append(T.implies(e.same_role(d.src, d.dst), e.le(done, end[t.name])))
    for t in values:
        # begin[v]: v's registers count from its start, or from its end when v is written in place
        # of a same-role operand that dies at v.
        done = [T.yand([e.same_role(d.src, t.name),
                        e.le(end[d.src], e.add(e.start[t.name], e.num(d.distance * e.ii + holds(t))))])
                for d in in_place_operands(p, t.name)]
        begin[t.name] = (T.ite(T.yor(done), e.add(e.start[t.name], e.num(holds(t))), e.start[t.name])
                         if done else e.start[t.name])
    # Check points: where register values begin, and the starts of ops that load another role's value.
    loaded = imports(p) + tmem_reads(p)
    readers = {c for _, c in loaded}
    points = [(t.name, begin[t.name], t.name) for t in values]
    points += [(c, e.start[c], f"{c}:reads" if c in begin else c) for c in e.names if c in readers]
    shape = {}
    for x, at, detail in points:
        if x not in shape:
            # The shape and budget of x's role, as per-op terms (saves a factor of K role slots).
            shape[x] = e.var(f"role_is_wg[{x}]", e.bool), e.var(f"role_regs[{x}]")
            for w in range(e.K):
                e.defs.append(T.implies(e.same_slot(x, w), T.yand([T.iff(shape[x][0], e.wg[w]),
                                                                   e.eq(shape[x][1], e.regs[w])])))
        x_wg, x_regs = shape[x]

        def per_thread(nbytes, n):
            return T.ite(x_wg, e.scale(regs_per_thread(nbytes, lim.warp_group), n),
                         e.scale(regs_per_thread(nbytes, 1), n))

        terms = [e.num(lim.register_reserve)]
        for v in values:
            n = e.live_during(at, begin[v.name], end[v.name])
            terms.append(per_thread(v.bytes, n) if v.name == x else
                         T.ite(e.same_role(x, v.name), per_thread(v.bytes, n), e.num(0)))
        for v, c in loaded:
            n = e.live_during(at, e.start[c], e.add(e.start[c], e.num(max(p.task[c].cycles, 1))))
            if p.task[v].space == "tmem":  # read out of tensor memory by c's role, whoever wrote it
                here = e.same_role(x, c) if c != x else T.true()
            else:  # a register value loaded from another role
                here = T.yand([e.same_role(x, c), T.ynot(e.same_role(v, c))]) if c != x else T.ynot(e.same_role(v, c))
            terms.append(T.ite(here, per_thread(read_bytes(p, v, c), n), e.num(0)))
        yield detail, e.le(e.add(*terms), x_regs)


def memory(e: Encoding):
    T, p = e.T, e.p
    for space, limit in (("smem", p.limits.smem_bytes), ("tmem", p.limits.tmem_bytes)):
        fixed = dict(p.invariant_bytes).get(space, 0)
        fixed += sum(t.bytes * t.depth for t in p.tasks if t.streaming and t.space == space)
        items = []  # (name, bytes, begin term, end term)
        ends = {}
        for t in p.tasks:
            if t.space == space and not t.streaming and t.bytes:
                # until the last reader, of any role, has its operand (liveness.memory_holds)
                ends[t.name] = end = e.var(f"{space}_end[{t.name}]")
                e.defs.append(e.le(e.add(e.start[t.name], e.num(max(t.cycles, 1))), end))
                for d in p.deps:
                    if d.src == t.name:
                        e.defs.append(e.le(e.add(e.start[d.dst], e.num(d.distance * e.ii + memory_holds(p.task[d.dst]))), end))
        for t in p.tasks:
            if t.streaming or t.bytes == 0:
                continue
            if t.space == space:
                # counted from its op's end when written in place of an operand that dies at it
                done = [e.le(ends[d.src], e.add(e.start[t.name], e.num(d.distance * e.ii + memory_holds(t))))
                        for d in in_place_operands(p, t.name)]
                begin = (T.ite(T.yor(done), e.add(e.start[t.name], e.num(memory_holds(t))), e.start[t.name])
                         if done else e.start[t.name])
                items.append((t.name, t.bytes, begin, ends[t.name]))
            elif space == "smem" and t.space == "reg":
                # A register value read by another role is staged through shared memory.
                end = e.var(f"staged_end[{t.name}]")
                e.defs.append(e.le(e.start[t.name], end))
                for d in p.deps:
                    if d.src == t.name:
                        e.defs.append(T.implies(T.ynot(e.same_role(d.src, d.dst)),
                                                e.le(e.add(e.start[d.dst], e.num(d.distance * e.ii)), end)))
                items.append((t.name, t.bytes, e.start[t.name], end))
        if fixed > limit:
            yield f"{space}:resident", T.false()
        if not items:
            continue
        for u, _, at, _ in items:
            terms = [e.num(fixed)]
            for v, nbytes, begin, end in items:
                n = e.live_during(at, begin, end)
                terms.append(e.scale(nbytes, n))
            yield f"{space}@{u}", e.le(e.add(*terms), e.num(limit))


def blocking(e: Encoding):
    T, p = e.T, e.p
    static = always_blocking(p)
    for v in e.names:
        ins = [d.src for d in p.deps if d.dst == v]
        cross = [T.ynot(e.same_role(u, v)) for u in ins]
        if v not in static and not cross:
            continue
        blk = T.true() if v in static else T.yor(cross)
        for u in p.tasks:
            held = busy(u)
            if u.name == v or held <= 1:
                continue
            free = T.yor(([e.residue_in(v, u.name, held, e.ii - 1)] if held < e.ii else [])
                         + ([e.residue_in(v, u.name, 0, 0)] if held <= e.ii else []))
            yield f"{v}|{u.name}", T.implies(T.yand([blk, e.same_role(u.name, v)]), free)


FAMILIES = {
    "completion": completion,
    "dependence": dependence,
    "capacity": capacity,
    "roles": roles,
    "variable_latency": variable_latency,
    "registers": registers,
    "memory": memory,
    "blocking": blocking,
}


def build(p: Problem, ii: int, lmax: int, families=FAMILIES, guard=None):
    """Create a Yices context holding the joint problem at I = ii. With `guard`, each family item
    is asserted under an assumption literal `guard(family, detail)` and those are returned."""
    y = smt_backend(p.option("smt_backend", "yices"))
    cfg = y.Config()
    cfg.default_config_for_logic("QF_LIA")
    ctx = y.Context(cfg)
    e = Encoding(p, ii, y, lmax)
    guards = {}
    for name, family in families.items():
        for detail, formula in family(e):
            if guard is None:
                ctx.assert_formula(formula)
            else:
                key = guard(name, detail)
                if key not in guards:
                    guards[key] = e.var(f"[{key}]", e.bool)
                ctx.assert_formula(e.T.implies(guards[key], formula))
    ctx.assert_formulas(e.defs)
    return ctx, e, guards


EXTRA_COPIES = 2


def window(p: Problem, ii: int, swp_length: int, extra_copies: int = EXTRA_COPIES) -> int:
    """The longest L tried at `ii`: the copies stage 1 needed, plus `extra_copies` more.

    Two more, not one: cross-role hand-offs lengthen an iteration, and on the unsplit attention
    tile (h100) one extra copy left the SWP bound I = 240 unreachable (I = 247) where two reach it
    (L = 727); `twill explain` pointed this out ("one more stage of length: satisfiable")."""
    return ii * (math.ceil(swp_length / ii) + extra_copies)


def sequential_ii(p: Problem) -> int:
    """An I at which running every op one after another (with cross-role delays) fits."""
    return sum(max(t.cycles, t.occupancy, 1) for t in p.tasks) + p.cross * (len(p.deps) + 1) + 1


def _check(ctx, y, deadline):
    timeout = None if deadline is None else max(0.01, deadline - time.monotonic())
    if deadline is not None and timeout <= 0.01:
        return "timeout"
    status = ctx.check_context(timeout=timeout) if timeout is not None else ctx.check_context()
    return {y.Status.SAT: "sat", y.Status.UNSAT: "unsat"}.get(status, "timeout")


def _bound(ctx, e, y, term, hi: int, lo: int, deadline, model, measure=None):
    """Binary-search the least k in [lo, hi] with `term <= k` satisfiable (hi is known to be).
    `measure(model)` reads the value a model actually achieves (at most its `term`), so each
    satisfiable check can lower `hi` further. Returns the model at that bound, the bound, and
    whether the search finished (a time limit can stop it)."""
    measure = measure or (lambda m: m.get_integer_value(term))
    while lo < hi:
        mid = (lo + hi) // 2
        ctx.push()
        ctx.assert_formula(e.le(term, e.num(mid)))
        status = _check(ctx, y, deadline)
        if status == "sat":
            model = y.Model.from_context(ctx, 1)
            hi = min(mid, measure(model))
        ctx.pop()
        if status == "timeout":
            break
        if status == "unsat":
            lo = mid + 1
    ctx.assert_formula(e.le(term, e.num(hi)))
    return model, hi, lo >= hi


def _makespan(e, model) -> int:
    """The length a model's starts really need (its L variable may be larger)."""
    return max([model.get_integer_value(e.start[t.name]) + t.cycles for t in e.p.tasks] + [0])


def critical_path(p: Problem) -> int:
    """The longest chain of distance-0 latencies: no schedule is shorter, whatever I."""
    longest = {t.name: t.cycles for t in p.tasks}
    for _ in range(len(p.tasks)):
        for d in p.deps:
            if d.distance == 0:
                longest[d.src] = max(longest[d.src], d.latency + longest[d.dst])
    return max(longest.values(), default=0)


def _first_length(ctx, e, y, lb, deadline):
    """Ascend from L <= lb in doubling steps up to the window (method.md: L from stage 1's length
    upward): checks near the optimum are the cheap ones, a loose bound lets the solver wander.
    Returns (status, model, the largest bound proven unsat)."""
    if ctx.status() == y.Status.UNSAT:  # the assertions contradict each other outright (Yices then
        return "unsat", None, e.lmax     # refuses push): e.g. pinned groups that must hand values over
    proven_below, cap, step = lb - 1, lb, 1
    while True:
        cap = min(cap, e.lmax)
        ctx.push()
        ctx.assert_formula(e.le(e.L, e.num(cap)))
        status = _check(ctx, y, deadline)
        model = y.Model.from_context(ctx, 1) if status == "sat" else None
        ctx.pop()
        if status != "unsat":
            return status, model, proven_below
        proven_below = cap
        if cap >= e.lmax:
            return "unsat", None, proven_below
        cap, step = cap + step, step * 2


def _minimize(ctx, e, y, p, model, length, below, deadline, report):
    """At a satisfiable (I, L): least L, then fewest roles, cross-role edges and warps."""
    model, length, done = _bound(ctx, e, y, e.L, length, below + 1, deadline, model, lambda m: _makespan(e, m))
    steps = [("roles", e.count(e.used), 1),
             ("cross-role edges", e.add(e.num(0), *[e.T.ite(e.same_role(d.src, d.dst), e.num(0), e.num(1))
                                                for d in p.deps]), 0),
             ("warps", e.add(*[e.warps(w) for w in range(e.K)]), 1),
             # then as soon as possible: every op at its earliest start among those schedules
             ("starts", e.add(*[e.start[t.name] for t in p.tasks]), 0)]
    for what, term, floor in steps:
        report("joint", {"I": e.ii, "L": length, "minimizing": what})
        model, _, _ = _bound(ctx, e, y, term, model.get_integer_value(term), floor, deadline, model)
    return model, length, done


def _check_any_ii(p, last, swp_length, extra_copies, y, deadline) -> None:
    """Once the SWP bound fails: if even a fully sequential I is unsatisfiable, no I is."""
    ctx, e, _ = build(p, last, window(p, last, swp_length, extra_copies))
    status = _check(ctx, y, deadline)
    ctx.dispose()
    if status == "unsat":
        raise NoScheduleError(Diagnostic("no joint schedule exists at any initiation interval under these limits",
                                         hint="run `twill explain` to see which constraints conflict"))


def solve_joint(p: Problem, first_ii: int, swp_length: int, time_limit: float | None = None,
                max_ii: int | None = None, progress=None, extra_copies: int = EXTRA_COPIES) -> JointResult | None:
    """I/L escalation. Returns None when the time limit ends the search first; raises
    NoScheduleError when no I up to `max_ii` (or a fully sequential I) works."""
    y = smt_backend(p.option("smt_backend", "yices"))
    deadline = None if time_limit is None else time.monotonic() + time_limit
    report = progress or (lambda stage, info: None)
    last = max_ii or sequential_ii(p)
    tried = []
    for ii in range(first_ii, last + 1):
        report("joint", {"I": ii})
        ctx, e, _ = build(p, ii, window(p, ii, swp_length, extra_copies))
        lb = swp_length if ii == first_ii else critical_path(p)
        # Past the SWP bound most I are refuted: one check of the whole window refutes an I faster
        # than the ascent through its lengths (the 8-warp Blackwell ablation: 122 s -> 90 s); the
        # ascent then runs only where a schedule exists, and finds a short one fast.
        whole = "sat" if ii == first_ii or ctx.status() == y.Status.UNSAT else _check(ctx, y, deadline)
        if whole == "sat":  # (a context unsat outright is left to _first_length, which says so)
            status, model, below = _first_length(ctx, e, y, lb, deadline)
        else:
            status, model, below = whole, None, e.lmax
        tried.append((ii, status))
        if status == "timeout":
            ctx.dispose()
            return None
        if status == "sat":
            length = _makespan(e, model)
            report("joint", {"I": ii, "L": length, "minimizing": "L"})
            model, length, done = _minimize(ctx, e, y, p, model, length, below, deadline, report)
            result = JointResult(
                ii, length, tuple((v, model.get_integer_value(e.start[v])) for v in e.names),
                tuple((v, model.get_integer_value(e.role[v])) for v in e.names),
                tuple((w, model.get_integer_value(e.warps(w))) for w in range(e.K)), True, done, tuple(tried))
            ctx.dispose()
            return result
        ctx.dispose()
        if ii == first_ii and max_ii is None:
            _check_any_ii(p, last, swp_length, extra_copies, y, deadline)
    raise NoScheduleError(Diagnostic(f"no joint schedule with I <= {last}",
                                     hint="raise --max-ii, or run `twill explain`"))


# -- mapping the answer back to the user's names --------------------------------------------------

def _role_kind(ops: tuple[str, ...], p: Problem) -> str:
    """What a role does, from its ops: the base of its name."""
    opcodes = {p.task[o].opcode for o in ops}
    if all(p.task[o].variable_latency for o in ops):
        return "load"
    if opcodes == {"mma"}:
        return "mma"
    if "mma" in opcodes:
        return "consumer"
    if "exp2" in opcodes:
        return "softmax"
    if opcodes <= {"rescale", "mul", "convert"}:
        return "correction"
    return "role"


def _role_names(groups: list[tuple[str, ...]], p: Problem) -> list[str]:
    """Names for roles in order: their kind, numbered when several share it (consumers and softmax
    warpgroups are always numbered, as the FA3/FA4 papers name them)."""
    kinds = [_role_kind(g, p) for g in groups]
    numbered = {k for k in kinds if kinds.count(k) > 1 or k in ("consumer", "softmax")}
    seen: dict[str, int] = {}
    names = []
    for k in kinds:
        if k in numbered:
            names.append(f"{k}{seen.get(k, 0)}")
            seen[k] = seen.get(k, 0) + 1
        else:
            names.append(k)
    return names


def budgets(p: Problem, schedule: Schedule) -> tuple[Role, ...]:
    """Registers per role: what each role needs, then the SM's remainder shared by the non-load
    roles in whole rounds (FA3's 24/240/240 shape), in `setmaxnreg` granules, within the registers
    the CTA is launched with (`register_file`)."""
    from .liveness import role_register_use
    lim = p.limits
    g = lim.register_granule
    roles = []
    for r in schedule.roles:
        # A role that never holds a register value (a TMA producer) has only the machine's minimum to
        # meet: the reserve is counted where values live, as the joint stage checks it.
        need = max((u for u, held in role_register_use(schedule, p, r) if held), default=lim.min_registers)
        roles.append([r, max(lim.min_registers, math.ceil(need / g) * g)])
    # Grow in whole rounds, every role that can by one granule, so that roles alike stay alike.
    growers = [x for x in roles if not all(p.task[o].variable_latency for o in x[0].ops)]
    while True:
        growing = [x for x in growers if x[1] + g <= lim.registers_per_thread]
        for x in growing:
            x[1] += g
        used, pool = register_file(lim, [(r.warps, b) for r, b in roles])
        if not growing or used > pool:
            for x in growing:
                x[1] -= g
            break
    return tuple(Role(r.name, r.warps, b, r.ops) for r, b in roles)


def joint_schedule(p: Problem, swp, base: Schedule, options, progress) -> Schedule:
    result = solve_joint(p, swp.ii, swp.length, options.time_limit, options.max_ii, progress)
    if result is None:
        from .pipeline import TimeLimitReached
        raise TimeLimitReached(None, "the time limit ended the joint search before any schedule was found")
    start, slot = dict(result.starts), dict(result.roles)
    warps = dict(result.role_warps)
    # Name role slots in order of first op, deterministically.
    order = sorted(set(slot.values()), key=lambda s: min(i for i, v in enumerate(p.tasks) if slot[v.name] == s))
    groups = [tuple(t.name for t in p.tasks if slot[t.name] == s) for s in order]
    names = dict(zip(order, _role_names(groups, p)))
    ops = tuple(ScheduledOp(t.name, t.opcode, t.unit, t.cycles, t.occupancy, start[t.name], names[slot[t.name]],
                            t.issue, t.is_async, t.variable_latency, t.streaming, t.machine_cycles)
                for t in p.tasks)
    roles = tuple(Role(names[s], warps[s], 0, g) for s, g in zip(order, groups))
    buffers = tuple(Buffer(t.name, t.depth, t.bytes, t.space) for t in p.tasks if t.streaming)
    cross = tuple((d.src, d.dst) for d in p.deps if slot[d.src] != slot[d.dst])
    sched = replace(base, stage="joint", ii=result.ii, length=result.length, optimal=result.optimal,
                    length_optimal=result.length_optimal,
                    ops=ops, roles=roles, buffers=buffers, cross_role_edges=tuple(dict.fromkeys(cross)))
    sched = replace(sched, roles=budgets(p, sched))
    if not (result.optimal and result.length_optimal):
        from .pipeline import TimeLimitReached
        what = "optimality was proven" if not result.optimal else "L was proven minimal (I is optimal)"
        raise TimeLimitReached(sched, f"the time limit ended the search before {what}")
    return sched
