"""A quick joint schedule at a given I: a role partition guessed, then a list schedule with those roles.

It proves nothing: the joint stage uses it as a model to start from (the starts and roles assumed in
one check of the exact encoding, which then holds a schedule to minimize L from). Where it finds one at
the SWP bound, that I is optimal, since no joint schedule has a smaller I than stage 1's.

Partitions tried, in order (each with the variable-latency ops on one producer role; ops joined by a
pinned edge, `problem.pinned_edges`, on one role): every other op on one role; the role hints' guesses
(`joint.role_hints`: each connected part a role, each unit a role); and the other ops in a topological
order cut into 2, 3, ... consecutive runs, as many as the warps allow (fewer registers per role, at the
price of cross-role edges); then, within a deadline, the register relaxation's partitions
(pressure.role_partition), each failed one cut from the next proposal. Each partition is list scheduled
twice: ops in a topological order of their distance-0 edges, tallest first (`ims.heights`), and ops in
an order that ends values early, each no earlier than the one before it (an iteration nearly in
sequence: few values live at once); each op at the first start from its earliest one, the cross-role
delay included, at which its occupancy fits the modulo reservation table and no blocking op of its
role waits on one in progress (verify.check_blocking's rule, both ways). The first schedule that
`verify` accepts (every family, the registers and memory included, at the budgets the joint stage
gives) within the window is a candidate. Where a fixed partition's schedules fail, `repair` moves one op
(with the ops pinned to it) at a time from a role over its registers to another role or a new one: of the
ops holding registers at that role's peak cycle, the move whose list schedule has the fewest registers
over the limit (`_assess`), while that improves. The answer is the least L found; the search stops at
once at `floor` (the joint stage's proven lower bound on L: that schedule's I and L are then optimal).

Measured (docs/benchmarks.md, log, session 31: solver34): on the corpus' random_n32_s7 (h200) one at the SWP
bound in 0.13 s; on the larger random DAGs none at the bound, every partition's list schedule over the
registers (a role at 416-544 registers per thread against 255 on random_n40_s8) or shared memory.
With the repair (session 31: solver35): random_n32_s7 at its floor (I 564, L 485) in 0.7 s, random_n40_s8 at its
floor (I 554, L 614) in 2.8 s; still none on random_n48 and up, where the register file itself overflows
(a list schedule that starts every ready op at once: holding ops back is what is missing).
"""
from __future__ import annotations

import itertools
import time
from dataclasses import replace

from .ims import heights
from .greedy import _Table
from .liveness import (always_blocking, busy, imports, live_intervals, live_ring, read_bytes, regs_per_thread,
                       scratch, streamed_with, tmem_reads)
from .problem import Problem
from .schedule import Schedule


def _order(p: Problem, height: dict[str, int]) -> list[str]:
    preds = {t.name: {d.src for d in p.deps if d.dst == t.name and d.distance == 0 and d.src != t.name}
             for t in p.tasks}
    index = {t.name: i for i, t in enumerate(p.tasks)}
    placed: list[str] = []
    done: set[str] = set()
    while len(placed) < len(p.tasks):
        ready = [v for v in index if v not in done and preds[v] <= done]
        v = min(ready or [v for v in index if v not in done], key=lambda v: (-height[v], index[v]))
        placed.append(v)
        done.add(v)
    return placed


def _tight_order(p: Problem) -> list[str]:
    """A topological order of the distance-0 edges that keeps few values live: among ready ops, the one
    whose placement ends the most values (every reader of an input then placed), then the one whose
    inputs are the most recent, then the problem's order."""
    preds = {t.name: {d.src for d in p.deps if d.dst == t.name and d.distance == 0 and d.src != t.name}
             for t in p.tasks}
    readers = {t.name: {d.dst for d in p.deps if d.src == t.name and d.distance == 0} for t in p.tasks}
    index = {t.name: i for i, t in enumerate(p.tasks)}
    placed: list[str] = []
    done: set[str] = set()
    at: dict[str, int] = {}
    while len(placed) < len(p.tasks):
        ready = [v for v in index if v not in done and preds[v] <= done] or [v for v in index if v not in done]

        def key(v):
            ends = sum(1 for u in preds[v] if readers[u] <= done | {v})
            return (-ends, -max((at[u] for u in preds[v]), default=-1), index[v])

        v = min(ready, key=key)
        at[v] = len(placed)
        placed.append(v)
        done.add(v)
    return placed


def _joined(p: Problem, key: dict[str, object]) -> dict[str, object]:
    """`key` with the ends of every pinned edge given one key (union-find over the keys)."""
    up: dict[object, object] = {k: k for k in key.values()}

    def root(k):
        while up[k] != k:
            up[k] = up[up[k]]
            k = up[k]
        return k

    for a, b in p.option("pinned", ()):
        if a in key and b in key:
            up[root(key[a])] = root(key[b])
    return {v: root(k) for v, k in key.items()}


def _slots(p: Problem, key: dict[str, object], slots: int) -> tuple[dict[str, int], dict[int, int]] | None:
    """Role slots numbered by first use in op order (the encoding's symmetry breaking wants it) and
    their warps; None when there are too many roles or warps, or a role mixes variable-latency ops
    with others."""
    key = _joined(p, key)
    slot: dict[object, int] = {}
    for t in p.tasks:
        slot.setdefault(key[t.name], len(slot))
    roles = {t.name: slot[key[t.name]] for t in p.tasks}
    lim = p.limits
    warps: dict[int, int] = {}
    kinds: dict[int, set[bool]] = {}
    for t in p.tasks:
        s = roles[t.name]
        kinds.setdefault(s, set()).add(t.variable_latency)
        one = t.variable_latency and t.issue != "warp_group"
        warps[s] = max(warps.get(s, 1), 1 if one else lim.warp_group)
    if len(slot) > slots or any(len(k) > 1 for k in kinds.values()):
        return None
    groups = sum(1 for w in warps.values() if w >= lim.warp_group)
    singles = sum(1 for w in warps.values() if w < lim.warp_group)
    packed = -(-singles // lim.warp_group) if singles else 0
    if lim.warp_group * (groups + packed) > lim.warps:
        return None
    return roles, warps


def partitions(p: Problem, order: list[str], slots: int):
    """The role partitions tried, as {op: key} (see the module's docstring), without repeats."""
    from .joint import role_hint, unit_hint
    load = {t.name: "load" for t in p.tasks if t.variable_latency}
    rest = [v for v in order if v not in load]
    yield {**load, **{v: "one" for v in rest}}
    for guess in (role_hint, unit_hint):
        hint = guess(p, slots)
        if hint is not None:
            yield dict(hint)
    for k in range(2, min(slots, len(rest)) + 1):
        yield {**load, **{v: i * k // max(len(rest), 1) for i, v in enumerate(rest)}}


def list_schedule(p: Problem, ii: int, order: list[str], roles: dict[str, int],
                  in_order: bool = False) -> dict[str, int] | None:
    """Starts at `ii` with `roles` fixed, or None where an op finds no start (see the module's docstring)."""
    task, table, start, last = p.task, _Table(p, ii), {}, 0
    cross = {(d.src, d.dst): p.cross if roles[d.src] != roles[d.dst] else 0 for d in p.deps}
    blocking = always_blocking(p) | {d.dst for d in p.deps if roles[d.src] != roles[d.dst]}
    ins = {v: [d for d in p.deps if d.dst == v] for v in order}
    outs = {v: [d for d in p.deps if d.src == v] for v in order}
    for v in order:
        t = task[v]
        if any(d.dst == v and d.latency > d.distance * ii for d in outs[v]):
            return None
        lo = max([0] + [start[d.src] + d.latency + cross[d.src, d.dst] - d.distance * ii
                        for d in ins[v] if d.src in start] + ([last] if in_order else []))
        hi = min([start[d.dst] + d.distance * ii - d.latency - cross[d.src, d.dst]
                  for d in outs[v] if d.dst in start], default=lo + ii - 1)
        mates = [u for u in start if roles[u] == roles[v]]
        s = lo
        while s <= min(hi, lo + ii - 1):
            if t.occupancy and table.blocked(t.unit, t.occupancy, s) is not None:
                s += 1
                continue
            if v in blocking and any(((s - start[u]) % ii or ii) < busy(task[u]) for u in mates):
                s += 1
                continue
            if any(u in blocking and ((start[u] - s) % ii or ii) < busy(t) for u in mates):
                s += 1
                continue
            break
        else:
            return None
        if t.occupancy:
            table.place(t.unit, t.occupancy, s)
        start[v] = last = s
    return start


PROPOSALS = 12  # partitions proposed by pressure.role_partition after the fixed ones


class Budget:
    """When a search stops: at a deadline (time.monotonic() seconds; None: none) or, with `schedules`,
    once that many list schedules are made (a count of work, the same on any machine and at any load:
    where it ends first, the answer does not depend on the machine's speed)."""

    def __init__(self, deadline: float | None = None, schedules: int | None = None):
        self.deadline, self.left = deadline, schedules

    def spend(self) -> None:
        if self.left is not None:
            self.left -= 1

    def over(self) -> bool:
        return ((self.deadline is not None and time.monotonic() >= self.deadline)
                or (self.left is not None and self.left <= 0))


def _budget(limit) -> Budget:
    return limit if isinstance(limit, Budget) else Budget(limit)


def _proposed(p: Problem, budget: Budget, failed: list):
    """Partitions from the register relaxation (pressure.role_partition), each one cut from the next
    proposal once it failed: `failed` holds (blocks, the blocks whose registers did not fit); such a
    block is cut alone (not all of its ops on one role), any other failure cuts the whole partition.
    The cuts are heuristic (a role's registers depend on the starts): they steer, they prove nothing."""
    from .pressure import role_partition
    for _ in range(PROPOSALS):
        if budget.over():
            return
        cuts = []
        for blocks, heavy in failed:
            if heavy:
                cuts += [[(b[0], v, True) for v in b[1:]] for b in heavy if len(b) > 1]
            else:
                cuts.append([(b[0], v, True) for b in blocks for v in b[1:]]
                            + [(a[0], b[0], False) for i, a in enumerate(blocks) for b in blocks[i + 1:]])
        verdict, blocks = role_partition(p, budget.deadline, cuts=cuts)
        if verdict != "feasible" or not blocks:
            return
        yield {v: i for i, b in enumerate(blocks) for v in b}


def joint_heuristic(p: Problem, ii: int, lmax: int, slots: int, deadline: float | None = None, propose: bool = True,
                    floor: int = 0, near: int | None = None, schedules: int | None = None):
    """(starts, roles, role warps, L) of the least L that verify accepts at `ii` within L <= lmax, or None
    (also where `deadline`, time.monotonic() seconds, comes first with nothing found): the fixed
    partitions' list schedules, then `repair` from each of them (least score first), then (with
    `propose`, only where nothing was found) the register relaxation's partitions. Stops at once where
    a schedule's L is `floor` (a proven lower bound: nothing shorter exists). With `near`, only partitions
    whose list schedule (before the repair) ends by `near` are repaired (the repair moves ops between roles,
    which seldom shortens a schedule much: a quick look for one at the floor). With `schedules`, it also
    stops (with what it found) once it has made that many list schedules (`Budget`)."""
    from .joint import JointResult, handoff_violations
    budget = Budget(deadline, schedules)
    height = heights(p, ii)
    if height is None or p.option("groups", ()):
        return None
    order, tight = _order(p, height), _tight_order(p)
    orders = ((order, False), (tight, True))
    seen: list[dict[str, int]] = []
    failed: list = []
    starting: list = []  # (score, i, roles): the fixed partitions, for `repair`
    best = None
    names = [t.name for t in p.tasks]

    def better(found):
        nonlocal best
        if found is not None and (best is None or found[3] < best[3]):
            best = found
        return best is not None and best[3] <= floor

    def out_of_time():
        return budget.over()

    def tried(key, repairable):
        """The partition's list schedules offered to `better`; True once the floor is reached."""
        numbered = _slots(p, key, slots)
        if numbered is None or numbered[0] in seen:
            if numbered is None:
                failed.append((_blocks(names, key), []))
            return False
        roles, warps = numbered
        seen.append(roles)
        heavy, least = None, None
        for ops, in_order in orders:
            start = list_schedule(p, ii, ops, roles, in_order)
            budget.spend()
            length = None if start is None else max(start[t.name] + t.cycles for t in p.tasks)
            if length is None or length > lmax:
                continue
            result = JointResult(ii, length, tuple((v, start[v]) for v in names),
                                 tuple((v, roles[v]) for v in names), tuple(sorted(warps.items())), False, False, ())
            bad = handoff_violations(p, result)
            if not bad:
                if better((start, roles, warps, length)):
                    return True
                continue
            if repairable:
                score = _assess(p, ii, start, roles, warps)[0]
                least = score if least is None or score < least else least
            heavy = _heavy(p, result, bad) if heavy is None else heavy
        if least is not None and (near is None or least[2] <= near):
            starting.append((least, len(starting), roles))
        failed.append((_blocks(names, roles), heavy or []))
        return False

    for key in partitions(p, order, slots):
        if tried(key, True) or out_of_time():
            return best
    if _repaired(p, ii, lmax, slots, starting, orders, budget, better) or best is not None or not propose:
        return best
    for key in _proposed(p, budget, failed):
        if tried(key, False) or best is not None or out_of_time():
            return best
    return best


def _repaired(p, ii, lmax, slots, starting, orders, budget: Budget, better) -> bool:
    """`repair` from each partition of `starting` ((score, index, roles)), least score first, each answer
    offered to `better`; True once `better` says the floor is reached."""
    for _, _, roles in sorted(starting, key=lambda x: x[:2]):
        if budget.over():
            return False
        if better(repair(p, ii, lmax, slots, roles, orders, budget)):
            return True
    return False


def _blocks(names: list[str], key: dict) -> list[tuple[str, ...]]:
    order = list(dict.fromkeys(key[v] for v in names))
    return [tuple(v for v in names if key[v] == k) for k in order]


def _heavy(p: Problem, result, bad: list[str]) -> list[tuple[str, ...]]:
    """The roles (their ops) whose own registers did not fit (verify's message names the role), where
    every failure is of that kind; else [] (the whole partition failed)."""
    from .joint import schedule_of
    if not all(b.startswith("registers: role ") for b in bad):
        return []
    named = {b.split()[2].rstrip(":") for b in bad}
    base = Schedule(kernel=p.kernel, machine=p.machine, arch="", stage="joint", ii=result.ii, length=result.length,
                    optimal=False, ops=())
    s = schedule_of(p, result, base)
    return [r.ops for r in s.roles if r.name in named]


# -- register repair: ops moved off a role whose registers do not fit -------------------------------

REPAIR_STEPS = 12  # moves at most, per starting partition
REPAIR_CANDIDATES = 8  # ops tried per move: the largest holders at the heavy role's peak cycle


def _role_need(s: Schedule, p: Problem, role, lives, loaded) -> tuple[int, list[tuple[int, str]]]:
    """liveness.role_register_use's peak on `role` (registers per thread), and (registers, op) for the
    ops of the role holding registers at that cycle: the same sums, by whole arrays."""
    import numpy as np
    lim, ii = p.limits, s.ii
    ops = s.by_name
    held: list[tuple[str, int, int, int]] = []  # (op of the role it counts for, begin, end, registers)
    for v in role.ops:
        task = p.task[v]
        if v in lives and task.space == "reg":
            held.append((v, lives[v][3], lives[v][1], regs_per_thread(task.register_bytes, role.warps)))
    for v, c in loaded:
        if ops[c].role != role.name or (ops[v].role == role.name and p.task[v].space == "reg"):
            continue
        others = streamed_with(p, v, c) if p.task[v].space == "reg" else None
        if others is not None and not any(ops[o].role == role.name for o in others):
            continue
        held.append((c, ops[c].start, ops[c].start + max(p.task[c].cycles, 1),
                     regs_per_thread(read_bytes(p, v, c), role.warps)))
    for c, k in scratch(p):
        if ops[c].role == role.name:
            held.append((c, ops[c].start, ops[c].start + max(p.task[c].cycles, 1), k))
    inputs = sum(regs_per_thread(nbytes, role.warps) for v, nbytes, readers in p.register_inputs
                 if any(ops[c].role == role.name for c in readers))
    if not held:
        return (lim.register_reserve + inputs if inputs else lim.min_registers), []
    rings = [live_ring(b, e, ii) * k for _, b, e, k in held]
    use = np.sum(rings, axis=0)
    t = int(np.argmax(use))
    return lim.register_reserve + inputs + int(use[t]), [(int(r[t]), v) for r, (v, _, _, _) in zip(rings, held) if r[t]]


def _assess(p: Problem, ii: int, start: dict[str, int], roles: dict[str, int], warps: dict[int, int]):
    """(score, the ops worth moving) of a list schedule: the score orders (violations other than the
    registers, registers per thread over the limit summed over the roles plus the register file's excess
    in per-thread units, L); the ops are those holding registers at a heavy role's peak cycle, largest
    first. A score of (0, 0, L) is one verify accepts (verify is still what decides)."""
    from .joint import JointResult, schedule_of
    from .registers import grow_budgets, register_file
    from .schedule import Role
    from .verify import FAMILIES
    names = [t.name for t in p.tasks]
    length = max(start[t.name] + t.cycles for t in p.tasks)
    result = JointResult(ii, length, tuple((v, start[v]) for v in names), tuple((v, roles[v]) for v in names),
                         tuple(sorted(warps.items())), False, False, ())
    base = Schedule(kernel=p.kernel, machine=p.machine, arch="", stage="joint", ii=ii, length=length,
                    optimal=False, ops=())
    s = schedule_of(p, result, base)
    lim = p.limits
    lives, loaded = live_intervals(s, p), imports(p) + tmem_reads(p)
    over, movable, needs = 0, [], []
    for r in s.roles:
        need, at_peak = _role_need(s, p, r, lives, loaded)
        needs.append((r.warps, need, not all(p.task[o].variable_latency for o in r.ops)))
        if need > lim.registers_per_thread:
            over += need - lim.registers_per_thread
            movable += [(-k, v) for k, v in at_peak if not p.task[v].variable_latency]
    g = lim.register_granule
    used, pool = register_file(lim, [(w, -(-n // g) * g) for w, n, _ in needs])
    over += max(0, used - pool) // (32 * lim.warp_group)
    s = replace(s, roles=tuple(Role(r.name, r.warps, b, r.ops) for r, b in zip(s.roles, grow_budgets(lim, needs))))
    other = sum(1 for family, check in FAMILIES.items() if family != "registers" for _ in check(s, p))
    ops = list(dict.fromkeys(v for _, v in sorted(movable)))[:REPAIR_CANDIDATES]
    return (other, over, length), ops


def _units(p: Problem) -> dict[str, tuple[str, ...]]:
    """Each op's unit of moving: the ops joined to it by pinned edges (one role always)."""
    key = _joined(p, {t.name: t.name for t in p.tasks})
    return {t.name: tuple(u.name for u in p.tasks if key[u.name] == key[t.name]) for t in p.tasks}


def repair(p: Problem, ii: int, lmax: int, slots: int, roles: dict[str, int], orders, deadline=None):
    """From `roles`, moves of one op (with the ops pinned to it) to another role or a new one, the move
    whose best list schedule (over `orders`: (ops, in_order) pairs) scores least (`_assess`) each step,
    while the score improves; (starts, roles, warps, L) once verify accepts one within `lmax`, else None.
    A greedy local search over partitions with verify as the judge: it proves nothing. `deadline`: a
    time.monotonic() deadline or a `Budget`."""
    budget = _budget(deadline)
    units = _units(p)

    def best_of(key):
        numbered = _slots(p, key, slots)
        if numbered is None:
            return None
        rl, warps = numbered
        found = None
        for ops, in_order in orders:
            start = list_schedule(p, ii, ops, rl, in_order)
            budget.spend()
            if start is None:
                continue
            score, movable = _assess(p, ii, start, rl, warps)
            if found is None or score < found[0]:
                found = (score, movable, start, rl, warps)
        return found

    current = best_of(roles)
    if current is None:
        return None
    for _ in range(REPAIR_STEPS):
        score, movable, start, rl, warps = current
        if score[:2] == (0, 0) and score[2] <= lmax:
            return start, rl, warps, score[2]
        if budget.over():
            return None
        targets = sorted(set(rl.values()) - {rl[v] for v in rl if p.task[v].variable_latency})
        step = None
        for v in movable:
            for target in targets + [max(rl.values()) + 1]:
                if target == rl[v]:
                    continue
                key = dict(rl)
                for u in units[v]:
                    key[u] = target
                found = best_of(key)
                if found is not None and found[0] < score and (step is None or found[0] < step[0]):
                    step = found
            if budget.over():
                break
        if step is None:
            return None
        current = step
    return None
