"""The joint problem (stage 2) at one I as a CP-SAT model (OR-Tools), for `--smt-backend cpsat`:
the same constraint families as families.py states in QF_LIA for Yices, in CP-SAT's terms. This
module and joint_cpsat.py are the only ones that hold CP-SAT objects; `CpJoint`'s API is
solver-neutral (statuses are `errors.Status`, values are keyed by op name).

The terms (readable names, as in joint_terms.py): `start[v]`, the role slot of v as one-hot
booleans `x[v,w]`, per slot `wg[w]` (a warpgroup) and `regs[w]` (its budget), and L. At a fixed I
every start is `I*q + r` with its residue r in [0, I); a modulo question becomes one on residues:

- capacity: an op occupying its unit `occ = m*I + rem` cycles covers every residue m times and the
  `rem` residues from r once more; the `rem` parts are intervals [r, r + rem) and their wrapped
  copies [r - I, r - I + rem), under one cumulative (NoOverlap at capacity 1) of capacity cap - sum m.
- live counts: the instances of an interval [B, E) covering a point P number
  floor((P - B) / I) - floor((P - E) / I) = qE - qB + [rP < rE] - [rP < rB].
- blocking: (start[v] - start[u]) mod I = rv - ru + I*[rv < ru], in {0} or [busy(u), I).

The semantics are liveness.py's (as verify.py checks them): a value's end is the max of its
readers' (`end[v]`), written in place when an operand dies at its op. Where families.py leaves an
end free above those bounds, here it is exactly their max; each schedule is the same either way.
"""
from __future__ import annotations

import itertools

from .liveness import (always_blocking, busy, holds, imports, in_place_operands, in_place_read, memory_holds, read_bytes,
                       register_pool, regs_per_thread, scratch, streamed_with, tmem_reads, written_in_place)
from .problem import Problem


def ortools_cp_model():
    """OR-Tools' CP-SAT module (a dependency of twill; imported only when a CP-SAT phase runs: the
    import alone takes over a second).

    A Ctrl-C that lands while its extension modules initialise comes out of the import as
    `ImportError: initialization failed`, not as a KeyboardInterrupt. So while the main thread imports it,
    SIGINT and SIGTERM are only noted (blocking them would not do: another thread, a deadline's timer,
    takes a signal its thread does not block, and the import still sees it), and the first one noted is
    handed to its own handler right after the import (a KeyboardInterrupt, the CLI's Terminated)."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        from ortools.sat.python import cp_model
        return cp_model
    noted: list[int] = []
    held = {sig: signal.signal(sig, lambda signum, frame: noted.append(signum))
            for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        from ortools.sat.python import cp_model
    finally:
        for sig, handler in held.items():
            signal.signal(sig, handler)
    if noted and callable(held[noted[0]]):
        held[noted[0]](noted[0], None)
    elif noted and held[noted[0]] == signal.SIG_DFL:
        signal.raise_signal(noted[0])
    return cp_model


def slots(p: Problem) -> int:
    """Role slots, as joint_terms.Encoding counts them."""
    lim = p.limits
    by_warp = sum(1 for t in p.tasks if t.issue == "warp")
    return max(1, min(len(p.tasks), lim.warps, lim.warps // lim.warp_group + by_warp))


class CpJoint:
    """The joint model at one I with L <= lmax (and L >= floor); holds the CP-SAT model."""

    # the constraint families, in the order they are stated (a test may state fewer: a subclass)
    FAMILIES = ("_dependence", "_capacity", "_roles", "_variable_latency", "_registers", "_memory", "_blocking")

    def __init__(self, p: Problem, ii: int, lmax: int, floor: int = 0):
        self.cp = cp_model = ortools_cp_model()
        self.m = m = cp_model.CpModel()
        self.p, self.ii, self.lmax = p, ii, lmax
        self.names = [t.name for t in p.tasks]
        self.K = K = slots(p)
        self._hint: dict = {}
        self.L = m.new_int_var(min(floor, lmax), lmax, "L")
        m.add(self.L >= floor)
        self.start = {v: m.new_int_var(0, lmax, f"start[{v}]") for v in self.names}
        self._split: dict = {}  # key -> (q, r) of an expression I*q + r
        self._lt: dict = {}
        self._same: dict = {}
        self.x = {v: [m.new_bool_var(f"x[{v},{w}]") for w in range(K)] for v in self.names}
        self.wg = [m.new_bool_var(f"wg[{w}]") for w in range(K)]
        self.used = [m.new_bool_var(f"used[{w}]") for w in range(K)]
        self.regs = [m.new_int_var(0, p.limits.registers_per_thread, f"regs[{w}]") for w in range(K)]
        for t in p.tasks:
            m.add(self.start[t.name] + t.cycles <= self.L)
            m.add_exactly_one(self.x[t.name])
        for w in range(K):
            for v in self.names:
                m.add_implication(self.x[v][w], self.used[w])
            m.add_bool_or([self.used[w].Not()] + [self.x[v][w] for v in self.names])
        self.role = {v: sum(w * self.x[v][w] for w in range(1, K)) if K > 1 else 0 for v in self.names}
        for family in self.FAMILIES:
            getattr(self, family)()

    # -- helpers -----------------------------------------------------------------------------------
    def split(self, key, expr, lo: int, hi: int):
        """(q, r) with expr = I*q + r, 0 <= r < I, for expr in [lo, hi]; one pair per key."""
        if key not in self._split:
            q = self.m.new_int_var(lo // self.ii, hi // self.ii, f"q[{key}]")
            r = self.m.new_int_var(0, self.ii - 1, f"r[{key}]")
            self.m.add(expr == self.ii * q + r)
            self._split[key] = (q, r)
        return self._split[key]

    def qr(self, v: str):
        return self.split(v, self.start[v], 0, self.lmax)

    def lt(self, a, b):
        """The boolean [a < b] of two residue variables."""
        key = (a.index, b.index)
        if key not in self._lt:
            lit = self._lt[key] = self.m.new_bool_var(f"lt[{a.name},{b.name}]")
            self.m.add(a < b).only_enforce_if(lit)
            self.m.add(a >= b).only_enforce_if(lit.Not())
        return self._lt[key]

    def same(self, a: str, b: str):
        """The boolean: a and b run on one role."""
        if a == b:
            return self.m.new_constant(1)
        key = (a, b) if a < b else (b, a)
        if key not in self._same:
            s = self._same[key] = self.m.new_bool_var(f"same[{key[0]},{key[1]}]")
            for xa, xb in zip(self.x[a], self.x[b]):
                self.m.add_bool_or([xa.Not(), xb.Not(), s])
                self.m.add_bool_or([xa.Not(), xb, s.Not()])
        return self._same[key]

    def live(self, point, begin, end):
        """Instances of [begin, end) covering `point` (each a (q, r) pair): qE - qB + [rP < rE] - [rP < rB]."""
        (_, rp), (qb, rb), (qe, re) = point, begin, end
        return qe - qb + self.lt(rp, re) - self.lt(rp, rb)

    def bound_of(self, t) -> int:
        """How far past iteration 0's window an interval of op t's can reach."""
        dist = max((d.distance for d in self.p.deps), default=0)
        return self.lmax + dist * self.ii + max(holds(t), t.occupancy, t.cycles, 1) + 1

    # -- the families ------------------------------------------------------------------------------
    def _dependence(self):
        p, m = self.p, self.m
        pinned = set(p.option("pinned", ()))
        for d in p.deps:
            gap = self.start[d.dst] + d.distance * self.ii - self.start[d.src]
            if p.cross:
                m.add(gap >= d.latency + p.cross * (1 - self.same(d.src, d.dst)))
            else:
                m.add(gap >= d.latency)
            if (not p.option("cross_role", True) and not p.task[d.src].variable_latency) \
                    or (d.src, d.dst) in pinned:
                m.add_bool_and([self.same(d.src, d.dst)])

    def _capacity(self):
        p, m, ii = self.p, self.m, self.ii
        for unit, cap in p.caps:
            ops = [t for t in p.tasks if t.unit == unit and t.occupancy > 0]
            if sum(-(-t.occupancy // ii) for t in ops) <= cap:
                continue
            base = sum(t.occupancy // ii for t in ops)
            if base > cap:
                m.add_bool_or([])  # more than cap instances at every cycle
                continue
            intervals = []
            for t in ops:
                rem = t.occupancy % ii
                if rem:
                    _, r = self.qr(t.name)
                    intervals.append(m.new_fixed_size_interval_var(r, rem, f"occ[{t.name}]"))
                    intervals.append(m.new_fixed_size_interval_var(r - ii, rem, f"occ_wrap[{t.name}]"))
            if cap - base == 1:
                m.add_no_overlap(intervals)
            elif intervals:
                m.add_cumulative(intervals, [1] * len(intervals), cap - base)

    def _roles(self):
        p, m, K = self.p, self.m, self.K
        lim = p.limits
        for t in p.tasks:
            if t.issue == "warp_group":
                for w in range(K):
                    m.add_implication(self.x[t.name][w], self.wg[w])
        self.big = [m.new_bool_var(f"big[{w}]") for w in range(K)]  # used and a warpgroup
        self.small = [m.new_bool_var(f"small[{w}]") for w in range(K)]  # used and one warp
        for w in range(K):
            m.add_bool_and([self.used[w], self.wg[w]]).only_enforce_if(self.big[w])
            m.add_bool_or([self.used[w].Not(), self.wg[w].Not(), self.big[w]])
            m.add_bool_and([self.used[w], self.wg[w].Not()]).only_enforce_if(self.small[w])
            m.add_bool_or([self.used[w].Not(), self.wg[w], self.small[w]])
        wgsz = lim.warp_group
        self.packed = m.new_int_var(0, -(-K // wgsz), "small_warpgroups")
        m.add(sum(self.small) <= wgsz * self.packed)
        m.add(wgsz * self.packed <= sum(self.small) + wgsz - 1)
        m.add(wgsz * (sum(self.big) + self.packed) <= lim.warps)
        groups = [g for g in p.option("groups", ()) if g]
        for g in groups:
            for v in g[1:]:
                m.add_bool_and([self.same(g[0], v)])
        for g, h in itertools.combinations(groups, 2):
            m.add_bool_and([self.same(g[0], h[0]).Not()])
        # symmetry breaking: op j uses a slot at most one above every slot used by ops before it
        prefix = None
        for j, v in enumerate(self.names):
            if j == 0:
                m.add_bool_and([self.x[v][0]])
                prefix = m.new_constant(0)
                continue
            m.add(self.role[v] <= prefix + 1)
            nxt = m.new_int_var(0, K - 1, f"prefix[{v}]")
            m.add_max_equality(nxt, [prefix, self.role[v]])
            prefix = nxt
        self._budgets()

    def _budgets(self):
        p, m, K, lim = self.p, self.m, self.K, self.p.limits
        wgsz = lim.warp_group
        for w in range(K):
            g = m.new_int_var(0, lim.registers_per_thread // lim.register_granule, f"granule[{w}]")
            m.add(self.regs[w] == lim.register_granule * g)
            m.add(self.regs[w] >= lim.min_registers).only_enforce_if(self.used[w])
            m.add(self.regs[w] == 0).only_enforce_if(self.used[w].Not())
        top = m.new_int_var(0, lim.registers_per_thread, "small_registers")
        for w in range(K):
            m.add(self.regs[w] <= top).only_enforce_if(self.small[w])
        threads = 32 * wgsz
        per_sm = []
        for w in range(K):
            t = m.new_int_var(0, lim.registers_per_thread, f"wg_regs[{w}]")
            m.add(t == self.regs[w]).only_enforce_if(self.wg[w])
            m.add(t == 0).only_enforce_if(self.wg[w].Not())
            per_sm.append(threads * t)
        most = -(-K // wgsz)
        packed_regs = m.new_int_var(0, most * lim.registers_per_thread, "packed_registers")
        m.add_multiplication_equality(packed_regs, [self.packed, top])
        groups = m.new_int_var(0, K + most, "warpgroups")
        m.add(groups == sum(self.big) + self.packed)
        table = [register_pool(lim, n) if 2 <= n <= K else register_pool(lim, 1) for n in range(K + most + 1)]
        pool = m.new_int_var(min(table), max(table), "pool")
        m.add_element(groups, table, pool)
        m.add(sum(per_sm) + threads * packed_regs <= pool)

    def _variable_latency(self):
        m = self.m
        vl = [t.name for t in self.p.tasks if t.variable_latency]
        if not vl:
            return
        for w in range(self.K):
            has = m.new_bool_var(f"hosts_variable_latency[{w}]")
            for a in vl:
                m.add_implication(self.x[a][w], has)
            for t in self.p.tasks:
                if not t.variable_latency:
                    m.add_implication(self.x[t.name][w], has.Not())

    def _ends(self, t, readers, key: str):
        """end[t] = the max of t's own end and its readers' (a list of (literal or None, expression))."""
        m = self.m
        own = self.start[t.name] + max(t.cycles, 1)
        hi = self.bound_of(t) + max((holds(u) for u in self.p.tasks), default=1)
        end = m.new_int_var(0, hi, f"{key}_end[{t.name}]")
        terms = [own]
        for lit, expr in readers:
            if lit is None:
                terms.append(expr)
            else:
                e = m.new_int_var(0, hi, f"{key}_by[{t.name},{len(terms)}]")
                m.add(e == expr).only_enforce_if(lit)
                m.add(e == own).only_enforce_if(lit.Not())
                terms.append(e)
        m.add_max_equality(end, terms)
        return end, hi

    def _begins(self, values, ends, hold_of, key: str, on_role: bool):
        """begin[t]: its start, or its start + hold when an operand of its space dies at t."""
        m, out = self.m, {}
        for t in values:
            hold = hold_of(t)
            done = []
            for d in in_place_operands(self.p, t.name):
                if d.src not in ends:
                    continue
                lit = m.new_bool_var(f"{key}_in_place[{t.name},{d.src}]")
                cond = ends[d.src][0] <= self.start[t.name] + d.distance * self.ii + hold
                if on_role:
                    s = self.same(d.src, t.name)
                    m.add(cond).only_enforce_if([lit])
                    m.add_implication(lit, s)
                    m.add(ends[d.src][0] > self.start[t.name] + d.distance * self.ii + hold).only_enforce_if(
                        [lit.Not(), s])
                else:
                    m.add(cond).only_enforce_if(lit)
                    m.add(ends[d.src][0] > self.start[t.name] + d.distance * self.ii + hold).only_enforce_if(lit.Not())
                done.append(lit)
            if on_role and in_place_read(self.p, t.name):  # over its own read of tensor memory, whatever the roles
                b = self.start[t.name] + hold
                out[t.name] = b, self.split(f"{key}_begin[{t.name}]", b, 0, self.lmax + hold)
                continue
            if not done:
                out[t.name] = self.start[t.name], self.qr(t.name)
                continue
            late = m.new_bool_var(f"{key}_late[{t.name}]")
            m.add_max_equality(late, done)
            b = self.start[t.name] + hold * late
            out[t.name] = b, self.split(f"{key}_begin[{t.name}]", b, 0, self.lmax + hold)
        return out

    def _registers(self):
        p, m, lim = self.p, self.m, self.p.limits
        values = [t for t in p.tasks if t.space == "reg" and t.bytes > 0]
        ends = {}
        for t in values:
            readers = [(self.same(t.name, d.dst), self.start[d.dst] + d.distance * self.ii + holds(p.task[d.dst]))
                       for d in p.deps if d.src == t.name]
            end, hi = self._ends(t, readers, "reg")
            ends[t.name] = end, self.split(f"reg_end[{t.name}]", end, 0, hi)
        begins = self._begins(values, ends, holds, "reg", True)
        clamp = {t.name for t in values if holds(t) > max(t.cycles, 1) and written_in_place(p, t.name)}
        loaded = imports(p) + tmem_reads(p)
        temps = scratch(p)
        readers = {c for _, c in loaded + temps}
        points = [(t.name, begins[t.name][1]) for t in values]
        points += [(c, self.qr(c)) for c in self.names if c in readers]
        covered = {x for x, _ in points}
        points += [(c, self.qr(c)) for c in dict.fromkeys(c for _, _, cs in p.register_inputs for c in cs)
                   if c not in covered]
        for x, at in points:
            terms = []  # (coefficient for a warpgroup role, for a one-warp role, term)
            for v, nbytes, cs in p.register_inputs:
                if x in cs:
                    here = 1
                else:
                    here = m.new_bool_var(f"holds_input[{x},{v}]")
                    for c in cs:
                        m.add_implication(self.same(x, c), here)
                terms.append((regs_per_thread(nbytes, lim.warp_group), regs_per_thread(nbytes, 1), here))
            for v in values:
                n = self.live(at, begins[v.name][1], ends[v.name][1])
                nbytes = v.register_bytes  # a vector's fragment, replication included
                terms.append((regs_per_thread(nbytes, lim.warp_group), regs_per_thread(nbytes, 1),
                              self._if(None if v.name == x else self.same(x, v.name), n, v.name in clamp)))
            for v, c in loaded:
                if p.task[v].space == "tmem":  # read out of tensor memory by c's role, whoever wrote it
                    here = None if c == x else self.same(x, c)
                else:  # a register value loaded from another role
                    others = streamed_with(p, v, c)
                    if others is not None and not others:
                        continue  # streamed through c, its role's only reader of it
                    here = m.new_bool_var(f"loads[{x},{v},{c}]")
                    # held where c's role is x's, v runs elsewhere (and another reader of v is on c's role)
                    for o in (others if others is not None else [None]):
                        m.add_bool_or([self.same(v, c), here] + ([] if c == x else [self.same(x, c).Not()])
                                      + ([] if o is None else [self.same(o, c).Not()]))
                n = self.live(at, self.qr(c), self.read_end(c))
                nbytes = read_bytes(p, v, c)
                terms.append((regs_per_thread(nbytes, lim.warp_group), regs_per_thread(nbytes, 1), self._if(here, n)))
            for c, k in temps:  # an op's temporaries while it runs, on its role (registers per thread)
                n = self.live(at, self.qr(c), self.read_end(c))
                terms.append((k, k, self._if(None if c == x else self.same(x, c), n)))
            x_wg = m.new_bool_var(f"role_is_wg[{x}]")
            x_regs = m.new_int_var(0, lim.registers_per_thread, f"role_regs[{x}]")
            for w in range(self.K):
                m.add(x_wg == self.wg[w]).only_enforce_if(self.x[x][w])
                m.add(x_regs == self.regs[w]).only_enforce_if(self.x[x][w])
            m.add(lim.register_reserve + sum(a * t for a, _, t in terms) <= x_regs).only_enforce_if(x_wg)
            m.add(lim.register_reserve + sum(b * t for _, b, t in terms) <= x_regs).only_enforce_if(x_wg.Not())

    def read_end(self, c: str):
        """(q, r) of the end of op c's run, start + max(cycles, 1): a read or scratch held while c runs."""
        cycles = max(self.p.task[c].cycles, 1)
        return self.split(f"read_end[{c}]", self.start[c] + cycles, 0, self.lmax + cycles)

    def _if(self, lit, n, clamp: bool = False):
        """A term at least n where `lit` holds (None: always), else at least 0 (the constraints it
        appears in are upper bounds, so the solver keeps it least)."""
        if lit is None and not clamp:
            return n
        dist = max((d.distance for d in self.p.deps), default=0)
        span = self.lmax + dist * self.ii + 2 * max((max(holds(u), u.cycles, 1) for u in self.p.tasks), default=1)
        t = self.m.new_int_var(0, span // self.ii + 3, "live")
        if lit is None:
            self.m.add(t >= n)
        else:
            self.m.add(t >= n).only_enforce_if(lit)
        return t

    def _memory(self):
        p, m = self.p, self.m
        for space, limit in (("smem", p.limits.smem_bytes), ("tmem", p.limits.tmem_bytes)):
            fixed = dict(p.invariant_bytes).get(space, 0)
            fixed += sum(t.bytes * t.depth for t in p.tasks if t.streaming and t.space == space)
            if fixed > limit:
                m.add_bool_or([])
            own = [t for t in p.tasks if t.space == space and not t.streaming and t.bytes]
            ends = {}
            for t in own:
                readers = [(None, self.start[d.dst] + d.distance * self.ii + memory_holds(p.task[d.dst]))
                           for d in p.deps if d.src == t.name]
                end, hi = self._ends(t, readers, space)
                ends[t.name] = end, self.split(f"{space}_end[{t.name}]", end, 0, hi)
            begins = self._begins(own, ends, memory_holds, space, False)
            items = [(t.bytes, begins[t.name][1], ends[t.name][1]) for t in own]
            if space == "smem":
                for t in p.tasks:
                    if t.space != "reg" or t.streaming or not t.bytes:
                        continue
                    cross = [(self.same(t.name, d.dst).Not(), self.start[d.dst] + d.distance * self.ii)
                             for d in p.deps if d.src == t.name]
                    if not cross:
                        continue
                    hi = self.bound_of(t)
                    end = m.new_int_var(0, hi, f"staged_end[{t.name}]")
                    terms = [self.start[t.name]]
                    for lit, expr in cross:
                        e = m.new_int_var(0, hi, f"staged_by[{t.name},{len(terms)}]")
                        m.add(e == expr).only_enforce_if(lit)
                        m.add(e == self.start[t.name]).only_enforce_if(lit.Not())
                        terms.append(e)
                    m.add_max_equality(end, terms)
                    items.append((t.bytes, self.qr(t.name), self.split(f"staged_end[{t.name}]", end, 0, hi)))
            for _, at, _ in items:
                m.add(fixed + sum(nbytes * self.live(at, b, e) for nbytes, b, e in items) <= limit)

    def _blocking(self):
        p, m, ii = self.p, self.m, self.ii
        static = always_blocking(p)
        for v in self.names:
            ins = [d.src for d in p.deps if d.dst == v]
            if v not in static and not ins:
                continue
            if v in static:
                blk = []
            else:
                b = m.new_bool_var(f"blocking[{v}]")
                for u in ins:
                    m.add_implication(self.same(u, v).Not(), b)
                blk = [b]
            _, rv = self.qr(v)
            for u in p.tasks:
                held = busy(u)
                if u.name == v or held <= 1:
                    continue
                when = blk + [self.same(u.name, v)]
                if held > ii:
                    m.add_bool_or([lit.Not() for lit in when])
                    continue
                _, ru = self.qr(u.name)
                diff = rv - ru + ii * self.lt(rv, ru)
                allowed = [[0, 0]] + ([[held, ii - 1]] if held < ii else [])
                m.add_linear_expression_in_domain(diff, self.cp.Domain.from_intervals(allowed)).only_enforce_if(when)

    # -- objectives and solving --------------------------------------------------------------------
    def objective(self, name: str):
        """The objectives joint.py's search minimizes, by the names encoding.OBJECTIVES uses ("start:OP",
        "role:OP" and "warps:W" included), and (KIND, items, radix) for KIND "starts:lex", "roles:lex" or
        "warps:lex": sum(term(item_i) * radix**(len(items) - 1 - i)), lexicographic where radix exceeds
        every term's value."""
        if isinstance(name, tuple) and name[0] == "weighted":
            return sum(self.objective(what) * weight for what, weight in name[1])
        if isinstance(name, tuple):
            kind, items, radix = name
            one = {"starts:lex": "start", "roles:lex": "role", "warps:lex": "warps"}[kind]
            return sum(self.objective(f"{one}:{v}") * radix ** (len(items) - 1 - i) for i, v in enumerate(items))
        kind, _, op = name.partition(":")
        if kind == "start":
            return self.start[op]
        if kind == "role":
            return self.role[op]
        if kind == "warps" and op:
            w = int(op)
            return self.p.limits.warp_group * self.big[w] + self.small[w]
        return {
            "L": lambda: self.L,
            "roles": lambda: sum(self.used),
            "cross-role edges": lambda: sum(1 - self.same(d.src, d.dst) for d in self.p.deps),
            "warps": lambda: sum(self.p.limits.warp_group * b for b in self.big) + sum(self.small),
            "starts": lambda: sum(self.start.values()),
        }[name]()

    def top(self, name: str) -> int:
        """An upper bound on an objective of TIE_BREAKS' (for the radix of a weighted objective)."""
        wgsz = self.p.limits.warp_group
        return {"L": self.lmax, "roles": self.K, "cross-role edges": len(self.p.deps),
                "warps": self.K * wgsz, "starts": self.lmax * len(self.names)}[name]

    def order_starts(self, chains) -> None:
        """start[a] <= start[b] along each chain of interchangeable ops (symmetry.orderings)."""
        for chain in chains:
            for a, b in zip(chain, chain[1:]):
                self.m.add(self.start[a] <= self.start[b])

    def bound(self, name: str, k: int) -> None:
        """objective <= k from now on."""
        self.m.add(self.objective(name) <= k)

    def hint(self, starts: dict[str, int], roles: dict[str, int] | None) -> None:
        """Where the search looks first (never a constraint): starts (stage 1's), and roles."""
        self._hint = {self.start[v]: s for v, s in starts.items() if v in self.start}
        for v, w in (roles or {}).items():
            for k, x in enumerate(self.x[v]):
                self._hint[x] = int(k == w)

    def minimize(self, name: str, deadline, seed: int, on_first=None, linearization: int = 0):
        """(Status, the objective's value in the best solution or None): SAT when proven optimal,
        UNSAT when the model has no solution, TIMEOUT otherwise (the best solution, if any, kept).
        One worker, a fixed seed: the same model gives the same answer."""
        import time
        from .errors import Status
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return Status.TIMEOUT, None
        m, cp = self.m, self.cp
        m.clear_hints()
        for var, val in (getattr(self, "_solution", None) or self._hint).items():
            m.add_hint(var, val)
        m.minimize(self.objective(name))
        solver = cp.CpSolver()
        prm = solver.parameters
        prm.num_workers = 1
        prm.random_seed = seed
        prm.log_search_progress = False
        prm.linearization_level = linearization
        if left is not None:
            prm.max_time_in_seconds = left
        callback = _First(on_first) if on_first else None
        status = _bounded(solver, m, callback)
        if status in (cp.OPTIMAL, cp.FEASIBLE):
            keep = [self.L, *self.start.values(), *self.regs, *self.wg] + [x for xs in self.x.values() for x in xs]
            self._solution = {v: solver.value(v) for v in keep}
            self._values = {"roles": {v: next(w for w, x in enumerate(xs) if solver.boolean_value(x))
                                      for v, xs in self.x.items()},
                            "objective": int(round(solver.objective_value))}
            return (Status.SAT if status == cp.OPTIMAL else Status.TIMEOUT), self._values["objective"]
        if status == cp.INFEASIBLE:
            return Status.UNSAT, None
        if status == cp.MODEL_INVALID:
            raise RuntimeError(f"CP-SAT: invalid model ({m.validate()})")
        return Status.TIMEOUT, None

    # -- the last solution, in the graph's names ---------------------------------------------------
    def solved(self) -> bool:
        """Whether a solve has found a solution (the values below are the last one's)."""
        return getattr(self, "_solution", None) is not None

    def starts(self) -> dict[str, int]:
        return {v: self._solution[self.start[v]] for v in self.names}

    def roles(self) -> dict[str, int]:
        return dict(self._values["roles"])

    def role_warps(self) -> dict[int, int]:
        slot = self.roles()
        wgsz = self.p.limits.warp_group
        return {w: (0 if w not in slot.values() else wgsz if self._solution[self.wg[w]] else 1)
                for w in range(self.K)}

    def makespan(self) -> int:
        start = self.starts()
        return max([start[t.name] + t.cycles for t in self.p.tasks] + [0])


class _First:
    """A solution callback that calls `report()` at the first solution only."""

    def __new__(cls, report):
        cp_model = ortools_cp_model()

        class First(cp_model.CpSolverSolutionCallback):
            def __init__(self):
                super().__init__()
                self.seen = False

            def on_solution_callback(self):
                if not self.seen:
                    self.seen = True
                    report()
        return First()


def deterministic_solver(cp, work_limit: float):
    """A CP-SAT solver whose answer does not depend on the machine: one worker, a fixed seed, a
    deterministic work limit (iteration.py, pressure.py)."""
    solver = cp.CpSolver()
    prm = solver.parameters
    prm.num_workers = 1
    prm.random_seed = 1
    prm.log_search_progress = False
    prm.max_deterministic_time = work_limit
    return solver


def _bounded(solver, model, callback):
    """solver.solve in a worker thread (worker.run_stoppable), so that Ctrl-C in the main thread stops
    the search (`stop_search`) and is raised again once the solver has returned. CP-SAT's own SIGINT
    handler is off: it sets the process's handler back to the default when the solve ends, so that a
    later Ctrl-C killed the process (exit -2, nothing written, no message) instead of raising here."""
    from .worker import run_stoppable
    solver.parameters.catch_sigint_signal = False
    return run_stoppable(lambda: solver.solve(model, callback), solver.stop_search)[0]
