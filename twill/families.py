"""The constraint families of the joint problem (stage 2), one function each in `FAMILIES`, yielding
(detail, formula) pairs over the terms of an `Encoding` (joint_terms.py), so that `explain` can guard
each item with an assumption literal. mod[a,b] below is (start[a] - start[b]) mod I.

- completion:  start[v] + cycles(v) <= L.
- dependence:  start[v] + d*I >= start[u] + lat(u) + (role[u] != role[v] ? X : 0)   (cross_role folded in);
               role[u] = role[v] for a pinned edge (problem.pinned_edges: no tile_handoff)
- capacity:    unit of capacity 1: occ(u) <= mod[v,u] <= I - occ(v) for ops u, v on it;
               larger capacity: at each op's start, the ops occupying the unit number <= cap.
- roles:       a warpgroup op runs on a warpgroup role; the warps of used roles fit the limit;
               role slots are used in order (symmetry breaking).
- variable_latency: a variable-latency op never shares a role with another kind of op.
- registers:   at the begin x of every register value and the start of every op that loads another
               role's value, on x's role w: reserve + sum over values v on w of regs(v, w) * live(v at x)
               + the values other roles produce that ops on w are reading at x
               + the register inputs an op on w reads (held the whole loop)
               + the scratch of the ops on w running at x (liveness.scratch) <= regs[w];
               live(v at t) counts the iterations whose instance of v is live at t. A value lives
               until its last same-role reader has finished with it (liveness.holds) and begins at
               its op's end when written in place of a dying operand (liveness.in_place_operands).
               The budgets of whole warpgroups fit the registers the CTA is launched with
               (liveness.register_file). Implied (encoding.IMPLIED: a cut, not guarded): summed
               over a period and the roles, the registers the intervals hold fit I times the
               launch (`_register_average`).
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

from .joint_terms import Encoding
from .liveness import (always_blocking, busy, holds, imports, in_place_operands, in_place_read, memory_holds, read_bytes,
                       register_pool, regs_per_thread, scratch, streamed_with, tmem_reads, written_in_place)
from .problem import Problem
from .symmetry import orderings


def completion(e: Encoding):
    for t in e.p.tasks:
        yield f"{t.name}", e.T.yand([e.le(e.num(0), e.start[t.name]),
                                    e.le(e.add(e.start[t.name], e.num(t.cycles)), e.L)])


def dependence(e: Encoding):
    T, p = e.T, e.p
    pinned = set(p.option("pinned", ()))  # no 2-d register tile handed to another role (problem.pinned_edges)
    for d in p.deps:
        delay = T.ite(e.same_role(d.src, d.dst), e.num(0), e.num(p.cross))
        lhs = e.add(e.start[d.dst], e.times(d.distance))
        yield f"{d.src}->{d.dst}", e.le(e.add(e.start[d.src], e.num(d.latency), delay), lhs)
        if not p.option("cross_role", True) and not p.task[d.src].variable_latency:
            yield f"no_cross:{d.src}->{d.dst}", e.same_role(d.src, d.dst)
        elif (d.src, d.dst) in pinned:
            yield f"no_handoff:{d.src}->{d.dst}", e.same_role(d.src, d.dst)


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
    """Each used role's budget, the register file, and at every check point the registers live on
    its role within the role's budget (module docstring)."""
    yield from _budgets(e)
    yield "per_sm", _register_file(e)
    values = _register_values(e.p)
    begin, end = _value_intervals(e, values)
    shape = {}
    points = _check_points(e, values, begin)
    for x, at, detail in points:
        if x not in shape:
            shape[x] = _role_shape(e, x)
        x_wg, x_regs = shape[x]
        yield detail, e.le(e.add(*_registers_at(e, x, x_wg, at, values, begin, end)), x_regs)
    yield "average", _register_average(e, values, begin, end, sorted(shape))
    carried = _carried_values(e.p, values)
    if carried:
        for x, _, detail in points:
            own = detail == x and x not in carried and not written_in_place(e.p, x)
            yield "carried", e.le(e.add(*_carried_at(e, x, shape[x][0], carried, own)), shape[x][1])



def _budgets(e: Encoding):
    """A used role's budget lies in [min_registers, registers_per_thread], in whole granules; an
    unused role's is 0."""
    T, lim = e.T, e.p.limits
    for w in range(e.K):
        bounded = T.yand([e.le(e.num(lim.min_registers), e.regs[w]),
                          e.le(e.regs[w], e.num(lim.registers_per_thread))])
        granule = e.var(f"granule[{w}]")
        yield f"budget[{w}]", T.yand([T.ite(e.used[w], bounded, e.eq(e.regs[w], e.num(0))),
                                      e.eq(e.regs[w], e.scale(lim.register_granule, granule))])


def _register_file(e: Encoding):
    """The register file: whole warpgroups at their budgets, within what the CTA is launched with."""
    T, lim = e.T, e.p.limits
    big, packed, top = e.warpgroups()
    threads = 32 * lim.warp_group
    most = -(-e.K // lim.warp_group)  # warpgroups the one-warp roles can fill
    per_sm = [T.ite(e.wg[w], e.scale(threads, e.regs[w]), e.num(0)) for w in range(e.K)]
    per_sm += [T.ite(e.eq(packed, e.num(g)), e.scale(threads * g, top), e.num(0)) for g in range(1, most + 1)]
    groups = e.add(big, packed)
    pool = e.num(register_pool(lim, 1))
    for n in range(2, e.K + 1):
        pool = T.ite(e.eq(groups, e.num(n)), e.num(register_pool(lim, n)), pool)
    return e.le(e.add(*per_sm), pool)


def _value_intervals(e: Encoding, values):
    """(begin, end) terms of each register value: it lives until its last same-role reader has
    finished with it (at least its own latency), from its start, or from its end when written in
    place of a same-role operand that dies at it. The ends' definitions go to e.defs."""
    T, p = e.T, e.p
    end, begin = {}, {}
    for t in values:
        end[t.name] = e.var(f"reg_end[{t.name}]")
        e.defs.append(e.le(e.add(e.start[t.name], e.num(max(t.cycles, 1))), end[t.name]))
        for d in p.deps:
            if d.src == t.name:
                done = e.add(e.start[d.dst], e.affine(d.distance, holds(p.task[d.dst])))
                e.defs.append(T.implies(e.same_role(d.src, d.dst), e.le(done, end[t.name])))
    for t in values:
        done = [T.yand([e.same_role(d.src, t.name),
                        e.le(end[d.src], e.add(e.start[t.name], e.affine(d.distance, holds(t))))])
                for d in in_place_operands(p, t.name)]
        if in_place_read(p, t.name):  # over the registers of its own read of tensor memory, whatever the roles
            begin[t.name] = e.add(e.start[t.name], e.num(holds(t)))
            continue
        begin[t.name] = (T.ite(T.yor(done), e.add(e.start[t.name], e.num(holds(t))), e.start[t.name])
                         if done else e.start[t.name])
    return begin, end


def _check_points(e: Encoding, values, begin):
    """(op x, the point, detail): where register values begin, the starts of ops that load another
    role's value, and the starts of ops reading a register input (their role may hold no value)."""
    p = e.p
    readers = {c for _, c in imports(p) + tmem_reads(p) + scratch(p)}
    points = [(t.name, begin[t.name], t.name) for t in values]
    points += [(c, e.start[c], f"{c}:reads" if c in begin else c) for c in e.names if c in readers]
    covered = {x for x, _, _ in points}
    points += [(c, e.start[c], f"{c}:input") for c in dict.fromkeys(c for _, _, cs in p.register_inputs for c in cs)
               if c not in covered]
    return points


def _register_average(e: Encoding, values, begin, end, hosts: list[str]):
    """The register file over one period, implied by the check points (an item of IMPLIED: a cut for
    the search, left out where explain guards the items). On a role w that hosts a check point the
    registers in use change only where an interval begins, each a check point of w, so they fit R_w
    at every cycle; summed over the I cycles of a period (an interval [b, e) covers e - b of them,
    counting its iterations' instances) and over the roles, threads times registers:

        I * (reserve * threads of each role hosting a check point) + sum over register values of
        cost(v) * (end_v - begin_v) + the cross-role reads, tensor-memory reads and scratch, each
        cost * its reader's cycles  <=  I * (the registers the CTA is launched with),

    where cost is the cheaper of a warpgroup's and one warp's registers for the bytes (equal for
    whole fragments), and the budgets fit the launch as `_register_file` says. It does not depend on
    the roles except through the cross-role reads: a bound on the lifetimes of all values together,
    which the check points state only through sums of case splits. Linear over a range of I too
    (every multiple of I is a constant times I)."""
    T, p, lim = e.T, e.p, e.p.limits
    threads = 32 * lim.warp_group

    def cost(nbytes: int) -> int:
        return min(threads * regs_per_thread(nbytes, lim.warp_group), 32 * regs_per_thread(nbytes, 1))

    terms = [T.ite(T.yor([e.same_slot(x, w) for x in hosts]),
                   T.ite(e.wg[w], e.times(threads * lim.register_reserve), e.times(32 * lim.register_reserve)),
                   e.num(0)) for w in range(e.K)] if hosts else []
    terms += [e.scale(cost(v.register_bytes), e.T.sub(end[v.name], begin[v.name])) for v in values]
    for v, c in imports(p) + tmem_reads(p):
        held = cost(read_bytes(p, v, c)) * max(p.task[c].cycles, 1)
        if p.task[v].space == "tmem":  # read out of tensor memory by c's role, whoever wrote it
            terms.append(e.num(held))
            continue
        here = T.ynot(e.same_role(v, c))
        others = streamed_with(p, v, c)
        if others is not None:  # held only where another reader of v runs on c's role
            here = T.yand([here, T.yor([e.same_role(o, c) for o in others])]) if others else T.false()
        terms.append(T.ite(here, e.num(held), e.num(0)))
    terms += [e.num(32 * k * max(p.task[c].cycles, 1)) for c, k in scratch(p)]
    big, packed, _ = e.warpgroups()
    groups = e.add(big, packed)
    pool = e.times(register_pool(lim, 1))
    for n in range(2, e.K + 1):
        pool = T.ite(e.eq(groups, e.num(n)), e.times(register_pool(lim, n)), pool)
    return e.le(e.add(e.num(0), *terms), pool)


def _carried_values(p: Problem, values) -> dict:
    """value -> d for the register values an op reads back d >= 1 iterations later (an accumulator):
    read on its own role, it lives from at most holds(v) after its start until d * I + holds(v) after
    it, so d of its instances are live at every cycle of the loop, whatever the schedule."""
    out = {}
    for d in p.deps:
        if d.src == d.dst and d.distance >= 1 and d.src in {v.name for v in values}:
            out[d.src] = max(out.get(d.src, 0), d.distance)
    return out


def _carried_at(e: Encoding, x: str, x_wg, carried: dict, own: bool) -> list:
    """The registers per thread x's role holds at every cycle: the reserve and its carried values,
    and with `own`, x's value at its own begin (its start: not written in place, it lives at least
    one cycle from there). An implied item of IMPLIED: a lower bound on what `_registers_at` counts
    at x's point, stated without the case splits on iterations that the count needs."""
    T, p, lim = e.T, e.p, e.p.limits
    terms = [e.num(lim.register_reserve)]
    if own:
        b = p.task[x].register_bytes
        terms.append(T.ite(x_wg, e.num(regs_per_thread(b, lim.warp_group)), e.num(regs_per_thread(b, 1))))
    for v, k in carried.items():
        b = p.task[v].register_bytes
        held = T.ite(x_wg, e.num(k * regs_per_thread(b, lim.warp_group)), e.num(k * regs_per_thread(b, 1)))
        terms.append(held if v == x else T.ite(e.same_role(x, v), held, e.num(0)))
    return terms


def _role_shape(e: Encoding, x: str):
    """The shape and budget of x's role, as per-op terms (saves a factor of K role slots)."""
    T = e.T
    x_wg, x_regs = e.var(f"role_is_wg[{x}]", e.bool), e.var(f"role_regs[{x}]")
    for w in range(e.K):
        e.defs.append(T.implies(e.same_slot(x, w), T.yand([T.iff(x_wg, e.wg[w]), e.eq(x_regs, e.regs[w])])))
    return x_wg, x_regs


def _span(e: Encoding, x: str, px: int, v: str, hv: int, least: int, ends) -> tuple | None:
    """Bounds on (point - begin, point - end) for a point at start[x] + [0, px] and an interval of
    op v beginning at start[v] + [0, hv], at least `least` long, and ending at most at the latest of
    start[c] + d * I + off over `ends` (c, off, d): what `Encoding.live_during` reads, from the gaps
    every schedule meets (None where they are not known: explain's guarded encodings)."""
    g = e.gaps
    if g is None:
        return None
    a_lo, a_hi = g.lo(x, v) - hv, g.hi(x, v) + px
    b_lo = min(g.lo(x, c) - off - d * e.hi for c, off, d in ends)
    return a_lo, a_hi, b_lo, g.hi(x, v) + px - least


def _in_place_hold(p: Problem, v: str, hold) -> int:
    """How far past v's start its interval may begin: `hold(v)` where v may be written in place."""
    return hold(p.task[v]) if written_in_place(p, v) else 0


def _registers_at(e: Encoding, x: str, x_wg, at, values, begin, end) -> list:
    """The registers per thread x's role holds at `at`: the reserve, the register inputs its ops read,
    its live values, and the values it reads from other roles (or out of tensor memory). Intervals
    that no schedule has cover the point are left out (`_span`)."""
    T, p, lim = e.T, e.p, e.p.limits

    def per_thread(nbytes, n):
        return T.ite(x_wg, e.scale(regs_per_thread(nbytes, lim.warp_group), n),
                     e.scale(regs_per_thread(nbytes, 1), n))

    px = _in_place_hold(p, x, holds) if x in begin and at == begin[x] else 0
    terms = [e.num(lim.register_reserve)]
    for v, nbytes, readers in p.register_inputs:  # held for the whole loop by each role reading it
        here = T.yor([e.same_role(x, c) if c != x else T.true() for c in readers])
        terms.append(T.ite(here, per_thread(nbytes, e.num(1)), e.num(0)))
    for v in values:
        least = max(v.cycles, 1)
        span = _span(e, x, px, v.name, _in_place_hold(p, v.name, holds), least,
                     [(v.name, least, 0)] + [(d.dst, holds(p.task[d.dst]), d.distance)
                                             for d in p.deps if d.src == v.name])
        if e.never_live(span):
            continue
        n = e.live_during(at, begin[v.name], end[v.name], span)
        terms.append(per_thread(v.register_bytes, n) if v.name == x else
                     T.ite(e.same_role(x, v.name), per_thread(v.register_bytes, n), e.num(0)))
    for v, c in imports(p) + tmem_reads(p):
        cycles = max(p.task[c].cycles, 1)
        span = _span(e, x, px, c, 0, cycles, [(c, cycles, 0)])
        if e.never_live(span):
            continue
        n = e.live_during(at, e.start[c], e.add(e.start[c], e.num(cycles)), span)
        if p.task[v].space == "tmem":  # read out of tensor memory by c's role, whoever wrote it
            here = e.same_role(x, c) if c != x else T.true()
        else:  # a register value loaded from another role
            here = T.yand([e.same_role(x, c), T.ynot(e.same_role(v, c))]) if c != x else T.ynot(e.same_role(v, c))
            others = streamed_with(p, v, c)
            if others is not None:  # held only where another reader of v runs on c's role
                here = T.yand([here, T.yor([e.same_role(o, c) for o in others])]) if others else T.false()
        terms.append(T.ite(here, per_thread(read_bytes(p, v, c), n), e.num(0)))
    for c, k in scratch(p):  # an op's temporaries while it runs, on its role
        cycles = max(p.task[c].cycles, 1)
        span = _span(e, x, px, c, 0, cycles, [(c, cycles, 0)])
        if e.never_live(span):
            continue
        n = e.live_during(at, e.start[c], e.add(e.start[c], e.num(cycles)), span)
        terms.append(e.scale(k, n) if c == x else T.ite(e.same_role(x, c), e.scale(k, n), e.num(0)))
    return terms


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
                least = max(t.cycles, 1)
                items.append((t.name, t.bytes, begin, ends[t.name], _in_place_hold(p, t.name, memory_holds), least,
                              [(t.name, least, 0)] + [(d.dst, memory_holds(p.task[d.dst]), d.distance)
                                                      for d in p.deps if d.src == t.name]))
            elif space == "smem" and t.space == "reg":
                # A register value read by another role is staged through shared memory.
                end = e.var(f"staged_end[{t.name}]")
                e.defs.append(e.le(e.start[t.name], end))
                for d in p.deps:
                    if d.src == t.name:
                        e.defs.append(T.implies(T.ynot(e.same_role(d.src, d.dst)),
                                                e.le(e.add(e.start[d.dst], e.times(d.distance)), end)))
                items.append((t.name, t.bytes, e.start[t.name], end, 0, 0,
                              [(t.name, 0, 0)] + [(d.dst, 0, d.distance) for d in p.deps if d.src == t.name]))
        if fixed > limit:
            yield f"{space}:resident", T.false()
        if not items:
            continue
        for u, _, at, _, pu, _, _ in items:
            terms = [e.num(fixed)]
            for v, nbytes, begin, end, hv, least, last in items:
                span = _span(e, u, pu, v, hv, least, last)
                if not e.never_live(span):
                    terms.append(e.scale(nbytes, e.live_during(at, begin, end, span)))
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


def symmetry_breaking(e: Encoding) -> list:
    """start[x0] <= start[x1] <= ... for each chain of interchangeable ops (symmetry.orderings): every
    optimum has a renaming that satisfies them, so they cut no objective value. Not a family: a
    check that assumes only some items of the families need not be symmetric (explain's cores)."""
    return [e.le(e.start[a], e.start[b]) for chain in orderings(e.p) for a, b in zip(chain, chain[1:])]


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
