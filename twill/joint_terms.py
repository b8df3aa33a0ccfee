"""The terms of the joint problem (stage 2) at one I, or over a range [lo, hi] of I: the variables,
the window, and the helpers the constraint families (families.py) build their formulas with. Holds
solver terms, never a context: encoding.py owns the solver.

Over a range [lo, hi] of I, I is an integer variable: every multiple of I in the families is a
constant (an iteration distance, a quotient) times I, so the problem stays linear, and one
unsatisfiable check refutes every I of the range. The families' own decisions on I in Python
(does an occupancy exceed I? does a unit need constraints at all?) must be the same across the
range: `Encoding.holds_for` finds where one changes, and the range is cut there (`Split`).

Encoding (equivalent to the paper's time-indexed one, but independent of the cycle counts'
magnitude): for every op v an integer start `start[v]` of iteration 0 (instance i starts at
start[v] + i*I: uniqueness and consistency hold by construction) and an integer role
`role[v]` among K role slots. Per role slot w: `wg[w]` (a warpgroup, else one warp) and a
register budget `regs[w]`. Residues are exact: (start[a] - start[b]) mod I is expressed as a
disjunction of difference constraints over the few quotients the window allows (`residue_in`).
"""
from __future__ import annotations

from .liveness import holds
from .problem import Problem


class Split(Exception):
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
        # bounds on start differences every schedule meets (gaps.Gaps), where the constraints they
        # follow from are all asserted (set by encoding.JointEncoding; None: not known)
        self.gaps = None

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
        at hi differ it changes once, at the first I found by bisection: `Split` asks for [lo, that - 1]."""
        first = predicate(self.lo)
        if self.fixed or predicate(self.hi) == first:
            return first
        a, b = self.lo, self.hi  # predicate(a) == first != predicate(b)
        while b - a > 1:
            mid = (a + b) // 2
            a, b = (mid, b) if predicate(mid) == first else (a, mid)
        raise Split(b)

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

    def live_during(self, point, begin, end, span=None):
        """How many iterations' instances of an interval [begin, end) of iteration 0 cover the
        cycle `point`: sum over k of [begin + k*I <= point < end + k*I], as a sum of 0/1 terms.
        The ranges of the terms bound k; with `span` (bounds on point - begin and point - end that
        every schedule meets), the terms no schedule can make 1 are left out.

        Tried, not kept (docs/benchmarks.md, log, session 29): the terms every schedule makes 1 as
        the number 1. The first lexicographic check of attention_fwd_causal_hopper (h100) then ran
        into the hand-off's cap (2.4 -> 6.4 s); elsewhere it made no difference."""
        T = self.T
        diff = T.sub(point, begin)
        to_end = T.sub(point, end)
        terms = [T.ite(T.yand([self.le(self.times(k), diff), T.arith_lt_atom(to_end, self.times(k))]),
                       self.num(1), self.num(0)) for k in self.live_quotients() if self.may_cover(k, span)]
        return T.sum(terms) if terms else self.num(0)

    def may_cover(self, k: int, span) -> bool:
        """Can [k*I <= point - begin and point - end < k*I] hold at some I of the encoding, given
        span = (least, largest point - begin, least, largest point - end)? (None: not known.)"""
        if span is None:
            return True
        _, a_hi, b_lo, _ = span
        small, large = (self.lo, self.hi) if k >= 0 else (self.hi, self.lo)  # k*I's least and largest
        return k * small <= a_hi and b_lo < k * large

    def never_live(self, span) -> bool:
        """Does no iteration's instance of the interval ever cover the point (`span` as above)?"""
        return span is not None and not any(self.may_cover(k, span) for k in self.live_quotients())

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
