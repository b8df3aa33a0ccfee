"""The joint problem at one I, or over a range of I, in QF_LIA: variables, the constraint families,
and the solver that decides it, behind `JointEncoding`'s solver-neutral API (check, minimize, core,
values keyed by op name; answers are `errors.Status`). This is the only module of twill that holds
Yices or z3 objects (smt.py loads them for it); every check takes a deadline.

Used by the escalation of stage 2 (joint.py) and by `explain`, which guards each family item
with an assumption literal.

Over a range [lo, hi] of I, I is an integer variable: every multiple of I in the families is a
constant (an iteration distance, a quotient) times I, so the problem stays linear, and one
unsatisfiable check refutes every I of the range. The families' own decisions on I in Python
(does an occupancy exceed I? does a unit need constraints at all?) must be the same across the
range: `Encoding.holds_for` finds where one changes, and the range is cut there.

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
               + the values other roles produce that ops on w are reading at x
               + the register inputs an op on w reads (held the whole loop) <= regs[w];
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
"""
from __future__ import annotations

import itertools
import math
import time

from .errors import Status
from .liveness import (always_blocking, busy, holds, imports, in_place_operands, memory_holds, read_bytes,
                       register_pool, regs_per_thread, tmem_reads)
from .problem import Problem
from .smt import bounded_check, smt_backend


class _Split(Exception):
    """A decision the families take in Python changes inside the range of I being encoded, at `at`:
    encode [lo, at - 1] instead."""

    def __init__(self, at: int):
        self.at = at


class Encoding:
    """The terms of one joint problem, at one I or over a range [lo, hi] of I (then `I` is an integer
    variable and every multiple of I a linear term: the constants it multiplies are the iteration
    distances and quotients, never another variable). Holds solver objects: never leaves this module."""

    def __init__(self, p: Problem, lo: int, hi: int, y, lmax: int | None, copies: int | None):
        self.p, self.lo, self.hi, self.y = p, lo, hi, y
        self.fixed = lo == hi
        # the window: L <= lmax at one I; L <= copies * I over a range
        self.lmax, self.copies = lmax, copies
        self.max_distance = max((d.distance for d in p.deps), default=0)
        # how far past an op's start an interval of it may end: its hold, or its unit occupancy
        self.max_hold = max((max(holds(t), t.occupancy) for t in p.tasks), default=0)
        T, Ty = y.Terms, y.Types
        self.T = T
        self.int = Ty.int_type()
        self.bool = Ty.bool_type()
        self._nums: dict = {}
        names = [t.name for t in p.tasks]
        self.names = names
        # Role slots: every role hosts an op; at most warps/warp_group roles are warpgroups, and
        # the others host only ops a single warp issues.
        lim = p.limits
        by_warp = sum(1 for t in p.tasks if t.issue == "warp")
        self.K = max(1, min(len(names), lim.warps, lim.warps // lim.warp_group + by_warp))
        self.I = self.num(lo) if self.fixed else self.var("I")
        self.start = {v: self.var(f"start[{v}]") for v in names}
        self.role = {v: self.var(f"role[{v}]") for v in names}
        self.L = self.var("L")
        self.wg = [self.var(f"wg[{w}]", self.bool) for w in range(self.K)]
        self.regs = [self.var(f"regs[{w}]") for w in range(self.K)]
        self.used = [T.yor([self.same_slot(v, w) for v in names]) for w in range(self.K)]
        window = self.num(lmax) if self.fixed else self.scale(copies, self.I)
        self.defs: list = [self.le(self.L, window)]  # always asserted, never in a core
        if not self.fixed:
            self.defs += [self.le(self.num(lo), self.I), self.le(self.I, self.num(hi))]
        self._warpgroups = None  # built on first use: see warpgroups()

    # -- I, fixed or a variable ------------------------------------------------------------------
    @property
    def ii(self) -> int:
        """I as a number (only at one I: over a range, use `times`, `affine` and `holds_for`)."""
        assert self.fixed, "over a range of I, I is a term"
        return self.lo

    def times(self, k: int):
        """k * I as a term."""
        return self.affine(k, 0)

    def affine(self, k: int, c: int):
        """k * I + c as a term."""
        if self.fixed or k == 0:
            return self.num(k * self.lo + c)
        return self.add(self.scale(k, self.I), self.num(c))

    def holds_for(self, predicate) -> bool:
        """`predicate(I)`, the same for every I of the range. Every predicate passed is monotone in I
        (a comparison of I, or of sums of ceil(x / I), with constants), so where its value at lo and
        at hi differ it changes once, at the first I found by bisection: `_Split` asks for [lo, that - 1]."""
        first = predicate(self.lo)
        if self.fixed or predicate(self.hi) == first:
            return first
        a, b = self.lo, self.hi  # predicate(a) == first != predicate(b)
        while b - a > 1:
            mid = (a + b) // 2
            a, b = (mid, b) if predicate(mid) == first else (a, mid)
        raise _Split(b)

    def quotients(self) -> range:
        """The quotients by I of a difference of two starts, each in [0, window]: exact at one I,
        [-copies, copies] over a range (the window is copies * I)."""
        if self.fixed:
            return range((-self.lmax) // self.lo, self.lmax // self.lo + 1)
        return range(-self.copies, self.copies + 1)

    def live_quotients(self) -> range:
        """The iterations k whose instance of an interval can cover a point: its begin and the point
        lie in [0, window + max_hold], its end at most max_distance * I further (a larger end only
        counts more instances, which no solution wants). Over a range, the union of each I's (a spare
        k only adds a term that never holds)."""
        md, mh = self.max_distance, self.max_hold
        if self.fixed:
            ii, span = self.lo, self.lmax
            return range(-((span + md * ii + mh) // ii), (span + mh) // ii + 1)
        return range(-(self.copies + md + mh // self.lo), self.copies + mh // self.lo + 1)

    # -- term helpers ---------------------------------------------------------------------------
    def var(self, name, ty=None):
        t = self.T.new_uninterpreted_term(self.int if ty is None else ty, name)
        return t

    def num(self, n: int):
        n = int(n)
        term = self._nums.get(n)
        if term is None:
            term = self._nums[n] = self.T.integer(n)
        return term

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

    def residue_in(self, a: str, b: str, lo: int, hi: int, hi_below_ii: bool = False):
        """(start[a] - start[b]) mod I lies in [lo, hi], for 0 <= lo <= hi < I (with `hi_below_ii`,
        hi counts down from I: the bound is I - hi): a disjunction of difference constraints over the
        few quotients that starts in the window allow."""
        T = self.T
        diff = T.sub(self.start[a], self.start[b])
        top = (lambda q: self.affine(q + 1, -hi)) if hi_below_ii else (lambda q: self.affine(q, hi))
        cases = [T.yand([self.le(self.affine(q, lo), diff), self.le(diff, top(q))]) for q in self.quotients()]
        return T.yor(cases)

    def live_at(self, at: str, v: str, end):
        """How many iterations' instances of a value living [start[v], end) are live at start[at]."""
        return self.live_during(self.start[at], self.start[v], end)

    def live_during(self, point, begin, end):
        """How many iterations' instances of an interval [begin, end) of iteration 0 cover the
        cycle `point`: sum over k of [begin + k*I <= point < end + k*I], as a sum of 0/1 terms.
        The ranges of the terms bound k."""
        T = self.T
        diff = T.sub(point, begin)
        to_end = T.sub(point, end)
        terms = [T.ite(T.yand([self.le(self.times(k), diff), T.arith_lt_atom(to_end, self.times(k))]),
                       self.num(1), self.num(0)) for k in self.live_quotients()]
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
        lhs = e.add(e.start[d.dst], e.times(d.distance))
        yield f"{d.src}->{d.dst}", e.le(e.add(e.start[d.src], e.num(d.latency), delay), lhs)
        if not p.option("cross_role", True) and not p.task[d.src].variable_latency:
            yield f"no_cross:{d.src}->{d.dst}", e.same_role(d.src, d.dst)


def capacity(e: Encoding):
    p, at_ii = e.p, e.holds_for
    for unit, cap in p.caps:
        ops = [t for t in p.tasks if t.unit == unit and t.occupancy > 0]
        # At most ceil(occupancy / I) instances of an op occupy the unit at once: when those
        # bounds add up to cap or less, no cycle can be over it (four SFU ops on a unit of four).
        if sum(t.occupancy for t in ops) <= cap or at_ii(lambda ii: sum(-(-t.occupancy // ii) for t in ops) <= cap):
            continue
        if cap == 1:
            for i, u in enumerate(ops):
                if at_ii(lambda ii: u.occupancy > ii):
                    yield f"{unit}:{u.name}", e.T.false()
                for v in ops[i + 1:]:
                    fits = at_ii(lambda ii: u.occupancy <= ii - v.occupancy)
                    yield f"{unit}:{u.name},{v.name}", (e.residue_in(v.name, u.name, u.occupancy, v.occupancy, True)
                                                        if fits else e.T.false())
            continue
        if len(ops) * math.comb(len(ops) - 1, cap) <= 2000 and at_ii(lambda ii: all(t.occupancy <= ii for t in ops)):
            # An occupancy of at most I covers a cycle with at most one instance, the one whose
            # start residue is within occ(v) before it. At u's start, no cap of the other ops all
            # cover it: clauses over residue disjunctions, which Yices decides far faster than a
            # sum of 0/1 terms (FA3 with two tensor units: minutes).
            for u in ops:
                covers = {v.name: e.residue_in(u.name, v.name, 0, v.occupancy - 1) for v in ops if v is not u}
                for group in itertools.combinations(sorted(covers), cap):
                    yield f"{unit}@{u.name}:{','.join(group)}", e.T.ynot(e.T.yand([covers[v] for v in group]))
            continue
        for u in ops:
            # The instances of each op occupying the unit at u's start (u's own: 1), summed.
            counts = [e.num(1) if v is u else
                      e.T.ite(e.residue_in(u.name, v.name, 0, v.occupancy - 1), e.num(1), e.num(0))
                      if at_ii(lambda ii: v.occupancy <= ii) else
                      e.live_at(u.name, v.name, e.add(e.start[v.name], e.num(v.occupancy))) for v in ops]
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
                done = e.add(e.start[d.dst], e.affine(d.distance, holds(p.task[d.dst])))
                e.defs.append(T.implies(e.same_role(d.src, d.dst), e.le(done, end[t.name])))
    for t in values:
        # begin[v]: v's registers count from its start, or from its end when v is written in place
        # of a same-role operand that dies at v.
        done = [T.yand([e.same_role(d.src, t.name),
                        e.le(end[d.src], e.add(e.start[t.name], e.affine(d.distance, holds(t))))])
                for d in in_place_operands(p, t.name)]
        begin[t.name] = (T.ite(T.yor(done), e.add(e.start[t.name], e.num(holds(t))), e.start[t.name])
                         if done else e.start[t.name])
    # Check points: where register values begin, and the starts of ops that load another role's value.
    loaded = imports(p) + tmem_reads(p)
    readers = {c for _, c in loaded}
    points = [(t.name, begin[t.name], t.name) for t in values]
    points += [(c, e.start[c], f"{c}:reads" if c in begin else c) for c in e.names if c in readers]
    # ... and an op reading a register input, where its role may hold no value of its own
    covered = {x for x, _, _ in points}
    points += [(c, e.start[c], f"{c}:input") for c in dict.fromkeys(c for _, _, cs in p.register_inputs for c in cs)
               if c not in covered]
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
        for v, nbytes, readers in p.register_inputs:  # held for the whole loop by each role reading it
            here = T.yor([e.same_role(x, c) if c != x else T.true() for c in readers])
            terms.append(T.ite(here, per_thread(nbytes, e.num(1)), e.num(0)))
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
                        e.defs.append(e.le(e.add(e.start[d.dst], e.affine(d.distance, memory_holds(p.task[d.dst]))), end))
        for t in p.tasks:
            if t.streaming or t.bytes == 0:
                continue
            if t.space == space:
                # counted from its op's end when written in place of an operand that dies at it
                done = [e.le(ends[d.src], e.add(e.start[t.name], e.affine(d.distance, memory_holds(t))))
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
                                                e.le(e.add(e.start[d.dst], e.times(d.distance)), end)))
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
            free = T.yor(([e.residue_in(v, u.name, held, 1, True)] if e.holds_for(lambda ii: held < ii) else [])
                         + ([e.residue_in(v, u.name, 0, 0)] if e.holds_for(lambda ii: held <= ii) else []))
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


# Family items asserted even when the others are guarded: they remove no schedule (the symmetry breaking
# of role slots, and each op's slot being one of them), so no unsat core needs them, and without them a
# check that drops other items must refute every renumbering of the roles (explain's core: minutes).
UNGUARDED = {("roles", "order"), ("roles", "slot")}

OBJECTIVES = {
    # what `JointEncoding.minimize` can minimize, as terms of an Encoding
    "I": lambda e: e.I,
    "L": lambda e: e.L,
    "roles": lambda e: e.count(e.used),
    "cross-role edges": lambda e: e.add(e.num(0), *[e.T.ite(e.same_role(d.src, d.dst), e.num(0), e.num(1))
                                                 for d in e.p.deps]),
    "warps": lambda e: e.add(*[e.warps(w) for w in range(e.K)]),
    "starts": lambda e: e.add(*[e.start[t.name] for t in e.p.tasks]),
}


class JointEncoding:
    """The joint problem at one I (`JointEncoding(p, ii, lmax)`), or over a range of I
    (`JointEncoding.over(p, lo, hi, copies)`, window copies * I), on a solver: the only object of
    twill that holds solver objects, behind a solver-neutral API. Answers are `Status`es, values are
    keyed by op name, objectives by name (`OBJECTIVES`), guards by whatever `guard(family, detail)`
    returns. Every check is bounded by a `deadline` (time.monotonic() seconds, None: none) and stops
    within a fraction of a second on Ctrl-C (KeyboardInterrupt).

    With `guard`, each family item is asserted under an assumption literal `guard(family, detail)`,
    and `check(assume=keys)` assumes only those: `core()` is then the keys of an unsat core."""

    def __init__(self, p: Problem, ii: int, lmax: int, families=FAMILIES, guard=None, *, upto: int | None = None,
                 copies: int | None = None):
        self._y = smt_backend(p.option("smt_backend", "yices"))
        hi = ii if upto is None else upto
        while True:
            try:
                self._build(p, ii, hi, lmax, copies, families, guard)
                break
            except _Split as split:  # a Python-level decision changes inside the range: encode less of it
                self._ctx.dispose()
                hi = split.at - 1
        self.p, self.lo, self.hi = p, ii, hi
        self.names, self.slots = self._e.names, self._e.K
        self.guards = tuple(self._guards)
        self._model, self._assumed = None, False
        self._params = None
        self._objectives: dict = {}
        self.checks, self.last_check_seconds = 0, 0.0

    @classmethod
    def over(cls, p: Problem, lo: int, hi: int, copies: int, families=FAMILIES) -> "JointEncoding":
        """Every I in [lo, hi'] at once, window copies * I, where hi' <= hi is as far as the families'
        own case splits on I stay the same (`self.hi` says)."""
        return cls(p, lo, copies * lo, families, upto=hi, copies=copies)

    def _build(self, p, lo, hi, lmax, copies, families, guard):
        y = self._y
        cfg = y.Config()
        cfg.default_config_for_logic("QF_LIA")
        self._ctx = ctx = y.Context(cfg)
        self._e = e = Encoding(p, lo, hi, y, lmax, copies)
        self._guards = {}
        for name, family in families.items():
            for detail, formula in family(e):
                if guard is None or (name, detail.partition(":")[0]) in UNGUARDED:
                    ctx.assert_formula(formula)
                else:
                    key = guard(name, detail)
                    if key not in self._guards:
                        self._guards[key] = e.var(f"[{key}]", e.bool)
                    ctx.assert_formula(e.T.implies(self._guards[key], formula))
        ctx.assert_formulas(e.defs)
        self._status = {y.Status.SAT: Status.SAT, y.Status.UNSAT: Status.UNSAT}  # anything else: not decided

    # -- checks ---------------------------------------------------------------------------------
    def _term(self, objective: str):
        if objective not in self._objectives:
            self._objectives[objective] = OBJECTIVES[objective](self._e)
        return self._objectives[objective]

    def check(self, deadline: float | None = None, at_most: dict | None = None, assume=None) -> Status:
        """Satisfiable? With `at_most` {objective: k}, under objective <= k for this check only;
        with `assume` (guard keys), under those guards alone. A SAT answer keeps its model."""
        if assume is None and not self._assumed and self._ctx.status() == self._y.Status.UNSAT:
            return Status.UNSAT  # the assertions contradict each other outright (Yices then refuses push)
        self._assumed = self._assumed or assume is not None  # (then an UNSAT status is the assumptions')
        if at_most:
            self._ctx.push()
            self._ctx.assert_formulas([self._e.le(self._term(k), self._e.num(v)) for k, v in at_most.items()])
        try:
            t0 = time.monotonic()
            literals = None if assume is None else [self._guards[k] for k in assume]
            status = self._status.get(bounded_check(self._ctx, literals, deadline, self._params), Status.TIMEOUT)
            self.checks += 1
            self.last_check_seconds = time.monotonic() - t0
            if status == Status.SAT:
                self._model = self._y.Model.from_context(self._ctx, 1)
        finally:
            if at_most:
                self._ctx.pop()
        return status

    def bound(self, objective: str, k: int) -> None:
        """Assert objective <= k from now on."""
        self._ctx.assert_formula(self._e.le(self._term(objective), self._e.num(k)))

    def minimize(self, objective: str, lo: int, deadline: float | None = None, measure=None,
                 from_below: int = 0) -> tuple[int, bool]:
        """The least k >= lo with objective <= k satisfiable, from the value the last model has
        (satisfiable), asserted from then on. Binary search, except that once at most `from_below`
        values remain, it tries them from below (the first satisfiable is the least: unsatisfiable
        checks are the cheap ones where a loose bound makes a satisfiable one dear). `measure()` reads
        what the current model really achieves (at most the objective's value), so each satisfiable
        check can lower the bound further. Returns the bound and whether the search finished (a
        deadline can stop it)."""
        measure = measure or (lambda: self.value(objective))
        hi = measure()
        while lo < hi:
            mid = lo if hi - lo <= from_below else (lo + hi) // 2
            status = self.check(deadline, {objective: mid})
            if status == Status.TIMEOUT:
                break
            if status == Status.SAT:
                hi = min(mid, measure())
            else:
                lo = mid + 1
        self.bound(objective, hi)
        return hi, lo >= hi

    def core(self) -> list:
        """The guard keys of the last unsat check's core (the solver's, not necessarily minimal)."""
        key_of = {t: k for k, t in self._guards.items()}
        return [key_of[t] for t in self._ctx.get_unsat_core() if t in key_of]

    # -- the last model, in the graph's names ------------------------------------------------------
    def value(self, objective: str) -> int:
        return self._model.get_integer_value(self._term(objective))

    def starts(self) -> dict[str, int]:
        return {v: self._model.get_integer_value(self._e.start[v]) for v in self.names}

    def roles(self) -> dict[str, int]:
        """op -> role slot."""
        return {v: self._model.get_integer_value(self._e.role[v]) for v in self.names}

    def role_warps(self) -> dict[int, int]:
        """role slot -> its warps (0: unused)."""
        return {w: self._model.get_integer_value(self._e.warps(w)) for w in range(self.slots)}

    def makespan(self) -> int:
        """The length the model's starts really need (its L may be larger)."""
        start = self.starts()
        return max([start[t.name] + t.cycles for t in self.p.tasks] + [0])

    def close(self) -> None:
        self._ctx.dispose()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
