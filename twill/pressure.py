"""Register pressure over every role assignment, at every I: a relaxation of the joint problem
(stage 2) that forgets the times except the order that the dependences of distance 0 impose
within one iteration, so that one CP-SAT check answers for every I at once. Where no role
assignment fits, no joint schedule exists at any I, and the joint stage says so at once
(errors.NoScheduleError) instead of searching I.

What it keeps of the joint problem (joint_terms.py, families.py), all of it independent of I:

- roles: one slot of `cpsat_model.slots(p)` per op; a warpgroup op on a warpgroup role; a
  variable-latency op never with another kind; pinned groups (--group) together and apart; the two
  ends of a pinned edge (problem.pinned_edges: a register tile kept on its role) together; the
  warps of the used roles within the limit;
- the budgets and the register file (`families._budgets`, `_register_file`), exactly;
- at each check point of the registers family (the begin of every register value, the start of
  every op that loads another role's value, reads tensor memory or keeps scratch) a lower bound on
  the registers the point's role holds there: the reserve; the point's own value where it is not
  written in place (it lives at least one cycle from its start); each accumulator on the role, d
  instances for a read back d iterations later (`families._carried_values`: live at every cycle);
  each other value v on the role whose interval surely covers the point in iteration 0: v begins
  no later than the point (a path of distance-0 dependences from v to the point's op at least as
  long as v's in-place delay) and a reader c of v of distance 0 on v's role finishes with it after
  the point (a path from the point's op to c, plus what c holds, beyond the point's in-place delay);
  at the start of an op, each value it loads from another role, what it reads out of tensor memory
  and its scratch; the register inputs it reads.

Every schedule of the joint problem at any I meets all of these (a lower bound on each count, the
rest exact), so an infeasible relaxation proves that none exists. tests/test_pressure.py compares
it with the full solver's answer on small graphs."""
from __future__ import annotations

import time

import numpy as np

from .liveness import (holds, imports, read_bytes, register_pool, regs_per_thread, scratch, streamed_with, tmem_reads,
                       written_in_place)
from .problem import Problem

# CP-SAT's deterministic work limit for the check (seconds of its own clock: the answer does not depend
# on the machine's speed); most checks end in a small fraction of it
WORK_LIMIT = 2.0
NEG = -(1 << 40)


def _zero_paths(p: Problem) -> tuple[dict[str, int], np.ndarray]:
    """The longest path of distance-0 dependences from a to b (latencies summed; NEG where none, 0
    from an op to itself): start[b] - start[a] is at least that in every schedule at every I."""
    index = {t.name: i for i, t in enumerate(p.tasks)}
    n = len(index)
    w = np.full((n, n), NEG, dtype=np.int64)
    np.fill_diagonal(w, 0)
    for d in p.deps:
        if d.distance == 0:
            w[index[d.src], index[d.dst]] = max(w[index[d.src], index[d.dst]], d.latency)
    for k in range(n):
        np.maximum(w, w[:, k:k + 1] + w[k:k + 1, :], out=w)
        np.maximum(w, NEG, out=w)
    return index, w


def check_points(p: Problem) -> list[tuple[str, int]]:
    """(op x, px): the registers family's check points, at start[x] + [0, px] (px > 0 where x's
    value may begin at its op's end, written in place)."""
    values = [t.name for t in p.tasks if t.space == "reg" and t.bytes > 0]
    readers = {c for _, c in imports(p) + tmem_reads(p) + scratch(p)}
    readers |= {c for _, _, cs in p.register_inputs for c in cs}
    points = [(v, holds(p.task[v]) if written_in_place(p, v) else 0) for v in values]
    points += [(c, 0) for c in (t.name for t in p.tasks) if c in readers and (c, 0) not in points]
    return points


def live_counts(p: Problem, x: str, px: int, paths=None) -> dict[str, list[tuple[str, int]]]:
    """value v -> [(c, n)]: with v and op c on x's role, at least n instances of v are live at x's
    point in every schedule at every I (module doc):
    - (x, 1) for x's own value, not written in place (it lives at least one cycle from its start);
    - (c, d) for a reader c of v d >= 1 iterations later (c = v: an accumulator) with a path of
      distance-0 dependences from v to c at least as long as v's in-place delay less what c holds:
      v then lives at least d * I, so d instances cover every cycle;
    - (c, 1) for a reader c of distance 0 that finishes with v after the point, where v begins no
      later than the point (paths of distance 0 from v to x and from x to c), and (x, 1) where x
      reads v of d iterations back (that instance covers x's start until x has finished with it)."""
    values = {t.name for t in p.tasks if t.space == "reg" and t.bytes > 0}
    index, w = paths or _zero_paths(p)
    out: dict[str, list[tuple[str, int]]] = {}

    def put(v, c, n):
        if (c, n) not in out.setdefault(v, []):
            out[v].append((c, n))

    if x in values and not written_in_place(p, x):
        put(x, x, 1)
    for d in p.deps:
        v, c = d.src, d.dst
        if v not in values:
            continue
        hv = holds(p.task[v]) if written_in_place(p, v) else 0
        path = w[index[v], index[c]]
        if d.distance >= 1 and path > NEG // 2 and path + holds(p.task[c]) >= hv:
            put(v, c, d.distance)
        if v == x:
            continue
        if d.distance == 0:
            covers = (w[index[v], index[x]] >= hv and w[index[x], index[c]] > NEG // 2
                      and w[index[x], index[c]] + holds(p.task[c]) > px)
        else:
            covers = c == x and d.latency >= hv and holds(p.task[x]) > px
        if covers:
            put(v, c, 1)
    return out


def no_role_assignment(p: Problem, deadline: float | None = None, work_limit: float = WORK_LIMIT, pin=None) -> bool:
    """True where the relaxation (module doc) is infeasible: no joint schedule at any I. False where
    it is feasible or undecided within the work limit or by `deadline` (time.monotonic(); nothing proven). `pin` (tests): roles as
    (ops, warps, registers), one slot each in order, the relaxation asked of that assignment alone."""
    return role_partition(p, deadline, work_limit, pin)[0] == "infeasible"


def role_partition(p: Problem, deadline: float | None = None, work_limit: float = WORK_LIMIT, pin=None,
                   cuts=()) -> tuple[str, list[tuple[str, ...]] | None]:
    """The relaxation (module doc) with `cuts` (each a list of (a, b, same): at least one of them must
    fail, i.e. ops a and b on different roles where `same`, on one role where not): ("infeasible",
    None), ("feasible", its roles as blocks of ops in op order), or ("unknown", None)."""
    from .cpsat_model import _bounded, deterministic_solver, ortools_cp_model, slots
    cp = ortools_cp_model()
    lim = p.limits
    names = [t.name for t in p.tasks]
    values = {t.name for t in p.tasks if t.space == "reg" and t.bytes > 0}
    if not values and not p.register_inputs and not tmem_reads(p) and not scratch(p):
        return "feasible", None
    K = slots(p)
    m = cp.CpModel()
    on = {v: [m.new_bool_var(f"on[{v},{w}]") for w in range(K)] for v in names}
    for v in names:
        m.add_exactly_one(on[v])
    wg = [m.new_bool_var(f"wg[{w}]") for w in range(K)]
    used = [m.new_bool_var(f"used[{w}]") for w in range(K)]
    for w in range(K):
        m.add_max_equality(used[w], [on[v][w] for v in names])
    for t in p.tasks:
        if t.issue == "warp_group":
            for w in range(K):
                m.add_implication(on[t.name][w], wg[w])
    for a in p.tasks:
        for b in p.tasks:
            if a.variable_latency and not b.variable_latency:
                for w in range(K):
                    m.add_bool_or([on[a.name][w].Not(), on[b.name][w].Not()])
    groups = [g for g in p.option("groups", ()) if g]
    for g in groups:
        for v in g[1:]:
            for w in range(K):
                m.add(on[v][w] == on[g[0]][w])
    for i, g in enumerate(groups):
        for h in groups[i + 1:]:
            for w in range(K):
                m.add_bool_or([on[g[0]][w].Not(), on[h[0]][w].Not()])
    # a 2-d register tile its reader takes from registers stays on its role (problem.pinned_edges)
    for a, b in p.option("pinned", ()):
        for w in range(K):
            m.add(on[a][w] == on[b][w])
    # role slots used in order (the joint problem's own symmetry breaking: renumbering keeps a schedule)
    for w in range(1, K):
        m.add_implication(used[w], used[w - 1])
    big_terms, small_terms = [], []
    for w in range(K):
        b, s = m.new_bool_var(f"big[{w}]"), m.new_bool_var(f"small[{w}]")
        m.add_min_equality(b, [used[w], wg[w]])
        m.add_bool_and([used[w], wg[w].Not()]).only_enforce_if(s)
        m.add_bool_or([used[w].Not(), wg[w], s])
        big_terms.append(b)
        small_terms.append(s)
    wgsz = lim.warp_group
    most = -(-K // wgsz)
    packed = m.new_int_var(0, most, "packed")
    m.add(wgsz * packed >= sum(small_terms))
    m.add(wgsz * packed <= sum(small_terms) + wgsz - 1)
    groups_n = m.new_int_var(0, K, "groups")
    m.add(groups_n == sum(big_terms) + packed)
    m.add(wgsz * groups_n <= lim.warps)
    # budgets and the register file (families._budgets, _register_file)
    g = lim.register_granule
    regs = []
    for w in range(K):
        granule = m.new_int_var(0, lim.registers_per_thread // g + 1, f"granule[{w}]")
        r = m.new_int_var(0, lim.registers_per_thread, f"regs[{w}]")
        m.add(r == g * granule)
        m.add(r >= lim.min_registers).only_enforce_if(used[w])
        m.add(r == 0).only_enforce_if(used[w].Not())
        regs.append(r)
    top = m.new_int_var(0, lim.registers_per_thread, "top")
    for w in range(K):
        m.add(regs[w] <= top).only_enforce_if(small_terms[w])
    threads = 32 * wgsz
    per_sm = []
    for w in range(K):
        x = m.new_int_var(0, threads * lim.registers_per_thread, f"wg_regs[{w}]")
        m.add(x == threads * regs[w]).only_enforce_if(wg[w])
        m.add(x == 0).only_enforce_if(wg[w].Not())
        per_sm.append(x)
    packed_top = m.new_int_var(0, most * lim.registers_per_thread, "packed_top")
    m.add_multiplication_equality(packed_top, [packed, top])
    total = sum(per_sm) + threads * packed_top
    for n in range(0, K + 1):
        is_n = m.new_bool_var(f"groups={n}")
        m.add(groups_n == n).only_enforce_if(is_n)
        m.add(groups_n != n).only_enforce_if(is_n.Not())
        m.add(total <= register_pool(lim, max(n, 1))).only_enforce_if(is_n)
    # the check points
    loaded = imports(p) + tmem_reads(p)
    scratch_of = dict(scratch(p))
    paths = _zero_paths(p)
    for x, px in check_points(p):
        counts = live_counts(p, x, px, paths)
        for w in range(K):
            fixed4, fixed1, var4, var1 = lim.register_reserve, lim.register_reserve, [], []

            def add(nbytes, n):
                nonlocal fixed4, fixed1
                a, b = regs_per_thread(nbytes, wgsz), regs_per_thread(nbytes, 1)
                if isinstance(n, int):
                    fixed4, fixed1 = fixed4 + a * n, fixed1 + b * n
                else:
                    var4.append(a * n)
                    var1.append(b * n)

            for v, options in counts.items():
                sure = max([n for c, n in options if v == x and c == x] + [0])
                maybe = [(c, n) for c, n in options if n > sure and not (v == x and c == x)]
                if not maybe:
                    if sure:
                        add(p.task[v].register_bytes, sure)
                    continue
                n_var = m.new_int_var(sure, max(n for _, n in maybe), f"n[{x},{px},{v},{w}]")
                for c, n in maybe:
                    lits = [on[o][w] for o in {v, c} if o != x]
                    m.add(n_var >= n).only_enforce_if(lits)
                add(p.task[v].register_bytes, n_var)
            if px == 0:
                for v, c in loaded:
                    if c != x:
                        continue
                    if p.task[v].space == "tmem":
                        add(read_bytes(p, v, c), 1)
                    elif v != x and streamed_with(p, v, c) is None:
                        add(read_bytes(p, v, c), 1 - on[v][w])
                if scratch_of.get(x):
                    fixed4, fixed1 = fixed4 + scratch_of[x], fixed1 + scratch_of[x]
            for v, nbytes, readers in p.register_inputs:
                if x in readers:
                    add(nbytes, 1)
            m.add(fixed4 + sum(var4) <= regs[w]).only_enforce_if([on[x][w], wg[w]])
            m.add(fixed1 + sum(var1) <= regs[w]).only_enforce_if([on[x][w], wg[w].Not()])
    solver = deterministic_solver(cp, work_limit)
    prm = solver.parameters
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            return "unknown", None
        prm.max_time_in_seconds = left
    for w, (ops, warps, registers) in enumerate(pin or ()):
        m.add(regs[w] == registers)
        m.add(wg[w] == int(warps >= wgsz))
        for v in ops:
            m.add(on[v][w] == 1)
    together: dict = {}

    def same(a, b):
        key = (a, b) if names.index(a) < names.index(b) else (b, a)
        if key not in together:
            s = together[key] = m.new_bool_var(f"same[{key[0]},{key[1]}]")
            for w in range(K):
                m.add_bool_or([on[a][w].Not(), on[b][w].Not(), s])
                m.add_implication(on[a][w], on[b][w]).only_enforce_if(s)
        return together[key]

    for cut in cuts:
        m.add_bool_or([same(a, b).Not() if is_same else same(a, b) for a, b, is_same in cut])
    status = _bounded(solver, m, None)
    if status == cp.INFEASIBLE:
        return "infeasible", None
    if status not in (cp.OPTIMAL, cp.FEASIBLE):
        return "unknown", None
    slot = {v: next(w for w in range(K) if solver.value(on[v][w])) for v in names}
    blocks: dict[int, list[str]] = {}
    for v in names:
        blocks.setdefault(slot[v], []).append(v)
    return "feasible", sorted((tuple(b) for b in blocks.values()), key=lambda b: names.index(b[0]))

