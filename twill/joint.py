"""Stage 2: joint software pipelining and warp specialization, searched with Yices2.

The problem at one I is built by encoding.py (its variables and constraint families); this
module searches over I and L and turns the answer into a schedule.

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

from .encoding import build
from .errors import Diagnostic, NoScheduleError
from .liveness import register_file
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
    ties_done: bool = True  # the tie-breaks after L ran to the end (a time limit can cut them short)


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
    ties = done
    for what, term, floor in steps:
        report("joint", {"I": e.ii, "L": length, "minimizing": what})
        model, _, finished = _bound(ctx, e, y, term, model.get_integer_value(term), floor, deadline, model)
        ties = ties and finished
    return model, length, done, ties


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
        if deadline is not None and time.monotonic() >= deadline:
            return None
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
            model, length, done, ties = _minimize(ctx, e, y, p, model, length, below, deadline, report)
            result = JointResult(
                ii, length, tuple((v, model.get_integer_value(e.start[v])) for v in e.names),
                tuple((v, model.get_integer_value(e.role[v])) for v in e.names),
                tuple((w, model.get_integer_value(e.warps(w))) for w in range(e.K)), True, done, tuple(tried), ties)
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
    sched = replace(sched, roles=budgets(p, sched), complete=result.optimal and result.length_optimal and result.ties_done)
    if not sched.complete:
        from .pipeline import TimeLimitReached
        what = "optimality was proven" if not result.optimal else "L was proven minimal (I is optimal)"
        raise TimeLimitReached(sched, f"the time limit ended the search before {what}")
    return sched
