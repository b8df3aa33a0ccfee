"""Stage 2: joint software pipelining and warp specialization, searched with an SMT solver.

The problem is built and solved by encoding.py (its variables, constraint families and solver,
behind `JointEncoding`); this module searches over I and L and turns the answer into a schedule.

Escalation: the SWP bound I0 is checked at one I, with L up to the window of the copies stage 1
needed plus two (`window`). Past it, I is refuted in ranges: one encoding with I a variable in
[lo, hi] (window copies * I), whose unsatisfiability refutes every I of the range at once; ranges
double in width while they are refuted and cost at most twice as much an I as the check of one I before
them (`_next_width`: else one I at a time from then on). In the first satisfiable range, the least satisfiable I is
found by binary search on I within that encoding. The first satisfiable I is optimal: every smaller
I was unsatisfiable within its window, as in the paper (which allows no extra copy). At that I, on
an encoding of that one I: L is minimized, then the number of roles, the cross-role edges and the
warps and the sum of the starts, each by tightening a bound until unsat.
Every check is made under assumptions on one solver context, and each bound a check refutes is
kept as a fact, so what the solver learns carries from one check to the next.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

from .encoding import JointEncoding
from .errors import Diagnostic, NoScheduleError, Status, TimeLimitReached
from .problem import Problem
from .registers import grow_budgets
from .schedule import Buffer, Role, Schedule, ScheduledOp


@dataclass(frozen=True)
class JointResult:
    ii: int
    length: int
    starts: tuple[tuple[str, int], ...]
    roles: tuple[tuple[str, int], ...]  # op -> role slot
    role_warps: tuple[tuple[int, int], ...]  # slot -> warps
    optimal: bool  # every smaller I was shown unsatisfiable
    length_optimal: bool  # L was minimized to the end (a time limit can cut it short)
    tried: tuple[tuple[int, Status], ...]  # (I, what its check answered), in order
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


def copies(swp_length: int, ii: int, extra_copies: int = EXTRA_COPIES) -> int:
    """The window at `ii` in copies of I: window(...) == copies(...) * ii."""
    return math.ceil(swp_length / ii) + extra_copies


def same_window_upto(swp_length: int, ii: int, last: int) -> int:
    """The largest I in [ii, last] whose window has as many copies as ii's (ceil(L0 / I) the same)."""
    c = math.ceil(swp_length / ii)
    return last if c <= 1 else min(last, (swp_length - 1) // (c - 1))


def length_floor(p: Problem, swp_length: int = 0) -> int:
    """A lower bound on the joint L at every I: stage 1's unit bound with the cross-role delays that
    every joint schedule pays (`modulo.length_bound(p, p.cross)`: a load and the op it feeds are
    never on one role), the critical path among them; and at the SWP bound, stage 1's proven L."""
    from .modulo import length_bound
    return max(swp_length, length_bound(p, p.cross))


def stage1_floor(swp_length: int, swp_floor: int | None) -> int:
    """What stage 1 proved L at least: its L, or where that is not proven least, its floor
    (modulo.ModuloResult.length_floor: the window is the same, the floor lower)."""
    return swp_length if swp_floor is None else swp_floor


FROM_BELOW = 16  # candidate lengths the search for the least L tries one at a time from below
# The least L's search checks its floor first (stage 1's proven L at the SWP bound, often the answer),
# then bisects: on the corpus' fa4_p3_d64 the bisection's first check (L <= 460, satisfiable) took
# 13 s where the floor 445 is satisfiable in 3-6 s (docs/benchmarks.md, log, session 28).
PROBE_FLOOR = True


def _numbered(p: Problem, key: dict[str, object], slots: int) -> dict[str, int] | None:
    """Roles by `key` (ops of one key share a role; "load" marks the one-warp producer), slots
    numbered in op order as the role slots' order wants; None when it needs more slots or warps than
    there are (every role but the producer a warpgroup)."""
    slot: dict[object, int] = {}
    for t in p.tasks:
        slot.setdefault(key[t.name], len(slot))
    groups = [k for k in slot if k != "load"]
    warps = p.limits.warp_group * len(groups) + (1 if "load" in slot else 0)
    if len(slot) > slots or warps > p.limits.warps:
        return None
    return {t.name: slot[key[t.name]] for t in p.tasks}


def role_hint(p: Problem, slots: int) -> dict[str, int] | None:
    """A guess at the roles, for finding a first schedule faster (never for a proof): the
    variable-latency ops in one producer role, and each connected part of the other ops (its
    dependences, either way) a role of its own: the halves of a sub-tiled graph, numbered in op
    order as the role slots' order wants. None when it needs more slots or warps than there are."""
    part = {t.name: t.name for t in p.tasks if not t.variable_latency}

    def root(v):
        while part[v] != v:
            part[v] = part[part[v]]
            v = part[v]
        return v

    for d in p.deps:
        if d.src in part and d.dst in part:
            part[root(d.src)] = root(d.dst)
    return _numbered(p, {t.name: ("load" if t.variable_latency else root(t.name)) for t in p.tasks}, slots)


def unit_hint(p: Problem, slots: int) -> dict[str, int] | None:
    """The second guess, where the graph is one connected part (a random DAG): the producer, and a
    role per unit of the other ops. On the corpus' 28-op random DAG it finds a schedule of the least
    L in 3 s where the search without a hint took 25 s."""
    return _numbered(p, {t.name: ("load" if t.variable_latency else ("unit", t.unit)) for t in p.tasks}, slots)


def role_hints(p: Problem, slots: int) -> list[dict[str, int]]:
    hints = []
    for guess in (role_hint, unit_hint):
        hint = guess(p, slots)
        if hint is not None and hint not in hints:
            hints.append(hint)
    return hints


HINT_SHARE = 0.25  # of the time left (at most HINT_SECONDS) the ascent under each role hint may take
HINT_SECONDS = 5.0  # CPU seconds (wall seconds until session 42)


def _hinted_first_length(enc: JointEncoding, p: Problem, lb: int, lmax: int, deadline):
    """The ascent of `_first_length` under each of `role_hints`' roles in turn, each within a share
    of the time left: a model to start the search for the least L from (SAT), or nothing learnt
    (any other answer). The share is of the wall time left (the time limit's clock); HINT_SECONDS is CPU
    time of the process (`JointEncoding.cpu_until`), so that at load a hint gets the search it gets on an
    idle machine (docs/benchmarks.md, log, session 42: solver42)."""
    for hint in role_hints(p, enc.slots):
        share = None if deadline is None else time.monotonic() + HINT_SHARE * (deadline - time.monotonic())
        enc.cpu_until = time.process_time() + HINT_SECONDS
        try:
            status, _ = _first_length(enc, lb, lmax, share, hint)
        finally:
            enc.cpu_until = None
        if status == Status.SAT:
            return status
    return Status.TIMEOUT


# At the SWP bound, once the role hints found nothing: the whole window searched one role partition at a
# time (`_by_partitions`) before the plain ascent. On the corpus' random_n32_s7 (32 ops, h200) Yices with
# the roles free answers nothing at I0 in minutes; pinned to the register relaxation's partitions it
# refutes 23 of them (0.1-5 s each) and the 24th has a schedule (docs/benchmarks.md, log, session 30).
# Off: on the corpus it proves nothing more within 60 s and loses two answers that the plain ascent gives
# in the time the partitions take (gemm_chain_m192_x3_p3_h200 proven in 9.1 CPU s without, timeout with;
# attn_fwd_m256_d128_x2_h100 "no schedule at any I" in 3.0 s without, timeout with; gemm_chain_m256_x3_p4_h100
# 30.3 against 39.6 CPU s) (docs/benchmarks.md, log, session 30b).
BY_PARTITIONS = False


def _by_partitions(enc: JointEncoding, p: Problem, deadline, length: int | None = None, cuts: list | None = None) -> Status:
    """The whole window of `enc` (with `length`, only L <= length) decided one role partition at a time
    (a logic-based Benders loop): pressure.py's relaxation (every register bound of every role
    assignment, CP-SAT) proposes a partition of the ops into roles, Yices checks the window with the
    roles pinned to it, and an unsat answer's core (relations between ops: same role, other role) is a
    cut, at this encoding's I only, for the relaxation's next proposal. SAT: a schedule (the model is
    the encoding's); UNSAT: none in the window (every partition either breaks the relaxation or fell to
    a core); TIMEOUT: neither by the deadline (or the relaxation undecided: nothing is concluded).

    `cuts` (kept by the caller across calls): (k, core) pairs, k the L bound the core was found under
    (None: the core did not need it). A core found under L <= k holds under every smaller bound, so a
    search for the least L (`_least_length_by_partitions`) carries the cuts of its satisfiable checks
    (the partitions refuted before the one that fit) down to the next, tighter, check."""
    from .pressure import role_partition
    cuts = [] if cuts is None else cuts
    at_most = None if length is None else {"L": length}
    while deadline is None or time.monotonic() < deadline:
        valid = [core for k, core in cuts if k is None or (length is not None and length <= k)]
        verdict, blocks = role_partition(p, deadline, cuts=valid)
        if verdict == "infeasible":
            return Status.UNSAT
        if verdict != "feasible" or blocks is None:
            return Status.TIMEOUT
        status, core = enc.check_partition(blocks, deadline, at_most)
        if status != Status.UNSAT:
            return status
        if not core:
            return Status.UNSAT  # unsat whatever the roles
        cuts.append((length if enc.core_bounded else None, core))
    return Status.TIMEOUT


# After a first schedule that the partitions found (the role hints found none): the least L searched the
# same way, by bisection on `L <= k`. Off: on the corpus' gemm_chain_m256_x3_p4_h100 a pinned partition's
# check at L <= 1295 (the optimum) answered nothing in 44 s where Yices with the roles free proves it in
# 17 s; on random_n32_s7 the refutations at its floor (0.05-0.4 s each) went past 60 partitions, each core
# 27-34 of the ~38 relations, undecided by the deadline (docs/benchmarks.md, log, session 30b).
LENGTH_BY_PARTITIONS = False


def _least_length_by_partitions(enc: JointEncoding, p: Problem, lo: int, deadline, cuts: list) -> tuple[int, bool]:
    """The least L >= lo (proven: `length_floor`) of a schedule of `enc`, from its last model, by
    bisection with `_by_partitions(..., length=k)` at each step: (the least L found, proven). Each
    refuted bound is asserted as a fact (L > k); the model is left at the least L found."""
    hi = enc.makespan()
    first = lo if PROBE_FLOOR else None
    while lo < hi:
        mid = lo if lo == first else (lo + hi) // 2
        status = _by_partitions(enc, p, deadline, mid, cuts)
        if status == Status.TIMEOUT:
            return hi, False
        if status == Status.SAT:
            hi = min(mid, enc.makespan())
        else:
            lo = mid + 1
            enc.bound_below("L", lo)
    return hi, True


# Where the role hints find no first schedule: a list-scheduled joint schedule (joint_greedy.py), its
# starts and roles assumed in one check, the model the search for the least L starts from. On the
# corpus' random_n32_s7 (h200, I0 = 564) it finds one in 0.13 s where Yices with the roles free answers
# nothing in a minute (docs/benchmarks.md, log, session 31: solver34).
HEURISTIC = True
HEURISTIC_SECONDS = 3.0  # at most, and at most HINT_SHARE of the time left


def _heuristic_model(enc: JointEncoding, p: Problem, lmax: int, deadline, floor: int = 0, at_floor: bool = False,
                     seconds: float = HEURISTIC_SECONDS, schedules: int | None = None) -> Status:
    """SAT with the encoding's model at joint_greedy's schedule (its least L found, down to `floor`, a
    proven bound), or TIMEOUT (nothing learnt). With `at_floor`, only a schedule at the floor counts (L
    is then proven least at once, before any role hint's ascent). `schedules`: at most that many list
    schedules (joint_greedy.Budget), besides the `seconds`."""
    from .joint_greedy import joint_heuristic
    left = seconds if deadline is None else min(seconds, HINT_SHARE * (deadline - time.monotonic()))
    near = floor + floor * FLOOR_FIRST_NEAR // 100 if at_floor else None
    found = joint_heuristic(p, enc.lo, lmax, enc.slots, time.monotonic() + left, propose=not at_floor, floor=floor,
                            near=near, schedules=schedules)
    if found is None or (at_floor and found[3] > floor):
        return Status.TIMEOUT
    start, roles, _, length = found
    status = enc.check(deadline, {"L": length}, roles=roles, starts=start)
    return Status.SAT if status == Status.SAT else Status.TIMEOUT


# Before the role hints' ascents at the SWP bound: the heuristic for at most this long, kept only where its
# schedule's L is the proven floor (then no ascent is needed). On the corpus' random_n32_s7 (h200) the
# hints' ascents took 8 s of a pass before the heuristic's schedule at the floor (docs/benchmarks.md, log,
# session 31: solver35).
# A count of list schedules (joint_greedy.Budget), not seconds, bounds it first (was 1 s): random_n40_s8
# (b200) reaches its floor (I 554, L 614: both optimal) after 338 list schedules, 1.6 CPU s, 2.4-7.4 s wall
# by load, where the 1 s cap then cost 11 s of role hints' ascents that ended with nothing; on most corpus
# graphs the heuristic has no partition near the floor and ends by itself (10-72 schedules, 0.01-1.2 s);
# a count makes where it stops the same at any load (docs/benchmarks.md, log, session 40: solver40).
FLOOR_FIRST_SCHEDULES = 500
FLOOR_FIRST_SECONDS = 10.0  # and at most HINT_SHARE of the time left
FLOOR_FIRST_NEAR = 2  # percent above the floor: the partitions repaired there (joint_heuristic's `near`)


# The time kept from the plain ascent at the SWP bound for the search of a quick joint schedule above it
# (`_fallback`) where the ascent ends with nothing: at most FALLBACK_SECONDS, and at most FALLBACK_SHARE of
# the time left when the ascent begins.
FALLBACK_SECONDS = 8.0
FALLBACK_SHARE = 0.15


def _fallback(p: Problem, first_ii: int, swp_length: int, extra_copies: int, slots: int, deadline) -> JointResult | None:
    """Under a time limit, where neither joint_greedy nor the plain ascent (before the time kept for this)
    found anything at the SWP bound: the least I above it (by doubling steps from the bound towards the
    sequential I, then bisection between the last two) at which it finds a joint schedule, as an answer not proven optimal in anything: what the time limit
    returns if the exact search ends with nothing (on the corpus' random_n40_s8, I0 = 554: no joint
    schedule from Yices in a minute, this one in seconds)."""
    from .joint_greedy import joint_heuristic
    end = deadline
    names = [t.name for t in p.tasks]

    def at(ii):
        if time.monotonic() >= end:
            return None
        lmax = window(p, ii, swp_length, extra_copies)
        found = joint_heuristic(p, ii, lmax, slots, end, propose=False, floor=lmax)  # the first found
        if found is None:
            return None
        start, roles, warps, length = found
        return JointResult(ii, length, tuple((v, start[v]) for v in names), tuple((v, roles[v]) for v in names),
                           tuple(sorted(warps.items())), False, False, (), False)

    gap, step, below = sequential_ii(p) - first_ii, 1, first_ii
    best = None
    while best is None and time.monotonic() < end:
        ii = min(first_ii + step, first_ii + max(gap, 1))
        best = at(ii)
        if best is None:
            if ii >= first_ii + gap:
                return None
            below, step = ii, step * 4
    while best is not None and best.ii - below > 1 and time.monotonic() < end:
        mid = (below + best.ii) // 2
        found = at(mid)
        best, below = (found, below) if found is not None else (best, mid)
    return best


# At the SWP bound, once the quick first schedules (the heuristic at the floor, the role hints) found nothing:
# one plain check of L at its floor, for at most this many CPU seconds, before the register relaxation and the
# heuristic's longer search. On the corpus' gemm_chain_m256_x2_p4_h200 it is satisfiable in 0.1 s, after 2 CPU s
# of the relaxation and the heuristic that found nothing (docs/benchmarks.md, log, session 42: solver42). Only
# where asserting the encoding took less (a stopped check costs its revival later: `JointEncoding._live`).
QUICK_FLOOR_SECONDS = 0.5


def _quick_floor(enc: JointEncoding, lb: int, deadline) -> Status:
    """SAT with the encoding's model at L <= lb, found within QUICK_FLOOR_SECONDS of CPU time on a context
    of its own (`check_aside`), or TIMEOUT (nothing learnt, whatever that check answered). The encoding's
    own context gets only the found starts and roles as one check: an UNSAT or stopped check there would
    change what its solver has learnt, and with it how long the later checks take, by a factor of ten
    either way (tried: on the corpus' attn_fwd_m256_d128_x2_h100 the ascent's check of L <= 848 then ran
    46 s where the base refuted every L up to the window in 0.7 s)."""
    if not QUICK_FLOOR_SECONDS or enc.assert_seconds > QUICK_FLOOR_SECONDS:
        return Status.TIMEOUT
    status, starts, roles = enc.check_aside(deadline, {"L": lb}, cpu_seconds=QUICK_FLOOR_SECONDS)
    if status != Status.SAT:
        return Status.TIMEOUT
    return Status.SAT if enc.check(deadline, {"L": lb}, roles=roles, starts=starts) == Status.SAT else Status.TIMEOUT


def _first_length(enc: JointEncoding, lb: int, lmax: int, deadline, roles=None):
    """Ascend from L <= lb in doubling steps up to the window (method.md: L from stage 1's length
    upward): checks near the optimum are the cheap ones, a loose bound lets the solver wander.
    Returns (status, the largest bound proven unsat).

    Tried, not kept (docs/benchmarks.md, log): one unit at a time for the first 16 lengths (the
    first satisfiable is then the least), and a time budget per check with a looser bound when it
    runs out. A satisfiable check's time depends on what the solver did before it by a factor of
    ten either way, and each helped one graph as much as it hurt another."""
    proven_below, cap, step = lb - 1, lb, 1
    while True:
        cap = min(cap, lmax)
        status = enc.check(deadline, {"L": cap}, roles=roles)
        if status != Status.UNSAT:
            return status, proven_below
        proven_below = cap
        if cap >= lmax:
            return Status.UNSAT, proven_below
        cap, step = cap + step, step * 2


TIE_BREAKS = (("roles", 1), ("cross-role edges", 0), ("warps", 1),
              ("starts", 0))  # then as soon as possible: the least sum of starts among those schedules

HANDOFF_SECONDS = 1.0  # Yices' time on one phase after the first schedule before CP-SAT takes it over
# CPU seconds of the process (time.process_time()), as HANDOFF_CHECK_SECONDS: in wall seconds (until session
# 42) the load decided where a phase went; at load 3.5 attn_fwd_m128_d128_x2_h200's sum of starts (0.9 s of
# Yices at load 1) ran past 1 s and CP-SAT redid it in 4 s (docs/benchmarks.md, log, session 42: solver42).
# 1 s (was 4 s): every example's phases take Yices 0.31 s at most (the sum of starts of the causal forward;
# load 2), while on the corpus Yices ran the whole 4 s where CP-SAT then took 0.3-1 s: a lexicographic check
# (attn_fwd_m128_d64_x2_b200), the sum of starts' refutations of 0.2-0.3 s each (tmem_gemm_m256_x2_p4)
# (docs/benchmarks.md, log, session 32: solver36).
# The phases that may be handed over: not L, which CP-SAT proved far slower than Yices where Yices needed
# more than HANDOFF_SECONDS for it (the corpus' fa4_p3_d64: Yices 10 s, CP-SAT not within 60 s).
HANDED_OFF = ("roles", "cross-role edges", "warps", "starts", "lexicographic")
# The fewest roles and the sum of starts go to CP-SAT as soon as one Yices check of them runs past
# this: where Yices proves them (the examples) each check is quick (0.01-0.25 s at load 1), where it
# stalls one check runs for seconds (the corpus' random_n18-n28) (docs/benchmarks.md, log, session 28).
HANDOFF_CHECK_SECONDS = {"roles": 1.0, "starts": 0.3}
# starts 0.3 s (was 1 s): the examples' checks of it take 0.01-0.09 s (load 2); on the corpus' random_n18-n24
# the checks that stall run into any cap, and CP-SAT from Yices' last model is as quick (session 32: solver36).


def _handoff_available(p: Problem) -> bool:
    """The default backend hands a phase that Yices does not finish in HANDOFF_SECONDS to CP-SAT
    (joint_cpsat.finish_from); the answer is the same either way."""
    return p.option("smt_backend", "yices") == "yices"


def _minimize(enc: JointEncoding, below: int, deadline, report, handoff=None):
    """At a satisfiable (I, L): least L, then fewest roles, cross-role edges and warps, earliest starts,
    then the lexicographic steps (`_lex`). Returns (L, L proven, all proven), or a JointResult where
    `handoff(phase, proven, floor)` (CP-SAT) took over a phase of HANDED_OFF that Yices did not finish
    in HANDOFF_SECONDS.

    Every phase's answer is its proven optimum and the lexicographic steps leave one schedule, so the
    result does not depend on which solver proved which phase (nor on the machine's speed)."""
    phases = [("L", lambda d: enc.minimize("L", below + 1, d, enc.makespan, from_below=FROM_BELOW,
                                           probe_floor=PROBE_FLOOR), below + 1)]

    def tie_break(what, floor, budget):  # (`handoff` as it is now: None once CP-SAT has found nothing)
        cap = HANDOFF_CHECK_SECONDS.get(what) if handoff is not None else None
        return enc.minimize(what, floor, budget, check_seconds=cap)

    phases += [(what, lambda d, what=what, floor=floor: tie_break(what, floor, d), floor) for what, floor in TIE_BREAKS]
    phases.append(("lexicographic", lambda d: (None, _lex(enc, d)), 0))
    proven: dict[str, int] = {}
    length = None
    for what, run, floor in phases:
        if what != "L":
            report("joint", {"I": enc.lo, "L": length, "minimizing": what, "last check s": _secs(enc)})
        stays = handoff is None or what not in HANDED_OFF
        enc.cpu_until = None if stays else time.process_time() + HANDOFF_SECONDS  # (CPU s: the same at any load)
        try:
            value, finished = run(deadline)
        finally:
            enc.cpu_until = None
        if what == "L":
            length = value
        if finished:
            proven[what] = value
            continue
        bad = []
        if not stays and (deadline is None or time.monotonic() < deadline):
            result = handoff(what, proven, enc.floor.get(what, floor))
            bad = [] if result is None else handoff_violations(enc.p, result)
            if result is not None and not bad:
                return result
            if bad:  # a discrepancy between the two models: this phase and the rest on Yices alone
                report("joint", {"I": enc.lo, "L": length, "minimizing": what, "hand-off rejected": bad[0]})
        # Yices alone from here, this phase with the whole deadline: after a rejected hand-off, or where
        # CP-SAT found nothing without a deadline (never, with one)
        if bad or (not stays and deadline is None):
            handoff = None
            value, finished = run(deadline)
            if what == "L":
                length = value
            if finished:
                proven[what] = value
                continue
        return length, what != "L", False
    return length, True, True


def handoff_violations(p: Problem, result: JointResult) -> list[str]:
    """What verify (twill/verify.py) finds wrong with a schedule that CP-SAT's hand-off returned, at
    the budgets `joint_schedule` gives it: the two models state the same constraints
    (cpsat_model.py, families.py), and this keeps a discrepancy between them from reaching the
    answer (the phase then continues on Yices alone, which costs time, never correctness)."""
    from .verify import FAMILIES
    base = Schedule(kernel=p.kernel, machine=p.machine, arch="", stage="joint", ii=result.ii, length=result.length,
                    optimal=False, ops=())
    s = schedule_of(p, result, base)
    s = replace(s, roles=budgets(p, s))
    return [str(v) for check in FAMILIES.values() for v in check(s, p)]


def _lex(enc: JointEncoding, deadline) -> bool:
    """After the least sum of starts, which more than one schedule can reach (the halves of a
    sub-tiled graph swapped), the lexicographically least starts in op order among them, then the
    least role slots in op order (slots are numbered in order of first use, so this picks one
    partition of the ops into roles) and the fewest warps per slot: one schedule, whatever path the
    solver took (joint_cpsat._lex takes the same steps)."""
    return (_lex_least(enc, [f"start:{v}" for v in enc.names], deadline)
            and _lex_least(enc, [f"role:{v}" for v in enc.names], deadline)
            and _lex_least(enc, [f"warps:{w}" for w in range(enc.slots)], deadline))


def _lex_least(enc: JointEncoding, objectives: list[str], deadline) -> bool:
    """Each objective in turn at its least value given the ones before it: checked just under its
    value in the last model; nearly always refuted at once, then fixed. A start already at its
    earliest (`earliest_starts`, given the starts fixed before it) is fixed with no check."""
    fixed: dict[str, int] = {}
    for objective in objectives:
        now = enc.value(objective)
        kind, _, op = objective.partition(":")
        least = earliest_starts(enc.p, enc.lo, fixed)[op] if kind == "start" and enc.lo == enc.hi else 0
        status = Status.UNSAT if now <= least else enc.check(deadline, {objective: now - 1})
        if status == Status.TIMEOUT:
            return False
        if status == Status.SAT and not enc.minimize(objective, 0, deadline)[1]:
            return False
        if status == Status.UNSAT:
            enc.bound(objective, now)
        if kind == "start":
            fixed[op] = enc.value(objective)
    return True


def earliest_starts(p: Problem, ii: int, fixed: dict[str, int]) -> dict[str, int]:
    """Per op, a start no joint schedule at `ii` goes below once the starts in `fixed` are fixed there:
    the longest path of the dependences (start(dst) >= start(src) + latency - distance * I, every
    distance; an edge between a variable-latency op and another kind with the cross-role delay, which
    it always pays: families.variable_latency) from 0 and from the fixed starts. An op whose start in
    a schedule of the fixed prefix equals this is at its least there: the lexicographic steps fix it
    with no solve (docs/benchmarks.md, log, session 32: solver37)."""
    vl = {t.name: t.variable_latency for t in p.tasks}
    weight = [(d.src, d.dst, d.latency + (p.cross if vl[d.src] != vl[d.dst] else 0) - d.distance * ii)
              for d in p.deps if d.dst not in fixed]
    least = {t.name: fixed.get(t.name, 0) for t in p.tasks}
    for _ in range(len(p.tasks)):  # no cycle of positive weight at a feasible I: n passes settle every path
        changed = False
        for src, dst, w in weight:
            if least[src] + w > least[dst]:
                least[dst], changed = least[src] + w, True
        if not changed:
            break
    return least


def _secs(enc: JointEncoding) -> str:
    return f"{enc.last_check_seconds:.2f}"


def _check_any_ii(p, last, swp_length, extra_copies, deadline, relaxed: bool = False) -> None:
    """Once the SWP bound fails: if even a fully sequential I is unsatisfiable, no I is.

    Tried, not kept (docs/benchmarks.md, log): a budget for this check (2 s, or doubling budgets
    between ranges of the escalation). The corpus' unsplit 256-row forward on h100 needs it for
    10-19 s and it is the whole answer there (no I at all); with a budget that solve timed out.
    The register pressure of every role assignment comes first (pressure.py: one CP-SAT check, a
    relaxation at every I at once), unless `relaxed` (it ran already: `solve_joint`, `_at_one_ii`)."""
    if not relaxed:
        no_schedule_anywhere(p, deadline)
    if deadline is not None and time.monotonic() >= deadline:
        return
    with JointEncoding(p, last, window(p, last, swp_length, extra_copies)) as enc:
        status = enc.check(deadline)
    if status == Status.UNSAT:
        raise NoScheduleError(Diagnostic(NO_SCHEDULE, hint="run `twill explain` to see which constraints conflict"))


NO_SCHEDULE = "no joint schedule exists at any initiation interval under these limits"


def no_schedule_anywhere(p: Problem, deadline: float | None = None) -> None:
    """NoScheduleError where no role assignment fits the registers (pressure.py), whatever I."""
    from .pressure import no_role_assignment
    if no_role_assignment(p, deadline):
        raise NoScheduleError(Diagnostic(NO_SCHEDULE, hint="run `twill explain` to see which constraints conflict"))


def _at_one_ii(p, ii, first_ii, swp_length, extra_copies, deadline, report, tried, swp_floor=None, spare=None,
               relaxed=None):
    """The search at one I: (status, the JointResult when satisfiable). At the SWP bound L ascends
    from stage 1's length at once; past it a whole-window check comes first (most I there are refuted,
    and one check refutes an I faster than the ascent through its lengths).

    With register tiles kept on their roles (problem.pinned_edges) and `relaxed` an empty list (the
    relaxation has not run: `solve_joint`), the register relaxation over every role assignment
    (pressure.py; NoScheduleError where none fits, at any I) runs at the SWP bound once the quick first
    schedules (the heuristic at the floor, the role hints) found nothing, before the longer searches,
    and `relaxed` records that it ran.

    Tried, not kept (docs/benchmarks.md, log, session 26): at the SWP bound, CP-SAT from stage 1's
    starts where Yices' ascent found no schedule in 10 s; it found none on the 7 corpus graphs waiting
    there either."""
    lmax = window(p, ii, swp_length, extra_copies)
    may_hand_off = _handoff_available(p)
    with JointEncoding(p, ii, lmax) as enc:
        lb = length_floor(p, stage1_floor(swp_length, swp_floor) if ii == first_ii else 0)
        cuts: list = []
        whole = Status.SAT if ii == first_ii else enc.check(deadline)
        if (whole == Status.SAT and HEURISTIC
                and _heuristic_model(enc, p, lmax, deadline, lb, at_floor=True, seconds=FLOOR_FIRST_SECONDS,
                                     schedules=FLOOR_FIRST_SCHEDULES) == Status.SAT):
            status, below = Status.SAT, lb - 1
        elif whole == Status.SAT and _hinted_first_length(enc, p, lb, lmax, deadline) == Status.SAT:
            status, below = Status.SAT, lb - 1  # (lb itself is proven: `length_floor`)
        elif ii == first_ii and _quick_floor(enc, lb, deadline) == Status.SAT:
            status, below = Status.SAT, lb - 1
        else:
            if relaxed == [] and ii == first_ii and p.option("pinned", ()):
                no_schedule_anywhere(p, deadline)  # NoScheduleError where no role assignment fits
                relaxed.append(ii)
            if whole == Status.SAT and HEURISTIC and _heuristic_model(enc, p, lmax, deadline, lb) == Status.SAT:
                status, below = Status.SAT, lb - 1
            elif ii == first_ii and HEURISTIC and deadline is not None and spare is not None:
                # the plain ascent, less the time kept for `_fallback` where it ends with nothing
                reserve = min(FALLBACK_SECONDS, FALLBACK_SHARE * (deadline - time.monotonic()))
                status, below = _first_length(enc, lb, lmax, deadline - reserve)
                if status == Status.TIMEOUT:
                    found = _fallback(p, ii, swp_length, extra_copies, enc.slots, deadline)
                    if found is not None:
                        spare.append(found)
                        report("joint", {"I": found.ii, "L": found.length, "found": "a quick schedule, not proven"})
            elif (ii == first_ii and BY_PARTITIONS and may_hand_off
                  and (found := _by_partitions(enc, p, deadline, cuts=cuts)) != Status.TIMEOUT):
                status, below = found, (lb - 1 if found == Status.SAT else lmax)
                if found == Status.SAT and LENGTH_BY_PARTITIONS:
                    report("joint", {"I": ii, "L": enc.makespan(), "minimizing": "L", "by": "role partitions"})
                    enc.break_symmetry()
                    least, proven = _least_length_by_partitions(enc, p, lb, deadline, cuts)
                    below = least - 1 if proven else enc.floor.get("L", lb) - 1
            else:
                status, below = _first_length(enc, lb, lmax, deadline) if whole == Status.SAT else (whole, lmax)
        tried.append((ii, status))
        if status != Status.SAT:
            return status, None
        length = enc.makespan()
        if p.option("smt_backend") == "yices-cpsat":  # L and the tie-breaks on CP-SAT (joint_cpsat.finish)
            from .joint_cpsat import finish
            result = finish(p, ii, lmax, below + 1, enc.starts(), enc.roles(), deadline, report, tried,
                            time.monotonic())
            if result is not None:
                return status, result
        if not enc.symmetric:
            enc.break_symmetry()  # after the first schedule: finding one is slower with it, proofs are not
        report("joint", {"I": ii, "L": length, "minimizing": "L", "last check s": _secs(enc)})
        handoff = None
        if may_hand_off:
            from .joint_cpsat import finish_from

            def handoff(phase, proven, floor):
                return finish_from(p, ii, lmax, proven, phase, floor, enc.starts(), enc.roles(), deadline, report,
                                   tried, time.monotonic())
        out = _minimize(enc, below, deadline, report, handoff)
        if isinstance(out, JointResult):
            return status, out
        length, done, ties = out
        slot, warps = enc.roles(), enc.role_warps()
        start = enc.starts()
        result = JointResult(ii, length, tuple((v, start[v]) for v in enc.names), tuple((v, slot[v]) for v in enc.names),
                             tuple(sorted(warps.items())), True, done, tuple(tried), ties)
        return status, result


def _least_in_range(p, lo, hi, swp_length, extra_copies, deadline, report, tried):
    """(status, hi', I): every I of [lo, hi'] refuted at once (UNSAT, hi' <= hi where the encoding's
    own case splits on I end the range), or the least satisfiable I in it (SAT)."""
    with JointEncoding.over(p, lo, hi, copies(swp_length, lo, extra_copies)) as enc:
        hi = enc.hi
        report("joint", {"I": f"{lo}..{hi}" if hi > lo else lo, "proving": "no schedule"})
        status = enc.check(deadline)
        if status == Status.UNSAT:
            tried += [(ii, Status.UNSAT) for ii in range(lo, hi + 1)]
        if status != Status.SAT:
            return status, hi, None
        report("joint", {"I": f"{lo}..{enc.value('I')}", "minimizing": "I", "last check s": _secs(enc)})
        least, done = enc.minimize("I", lo, deadline)
        if not done:
            return Status.TIMEOUT, hi, None
        tried += [(ii, Status.UNSAT) for ii in range(lo, least)]
        return status, hi, least


# A refuted range is "dearer" than checking its I's one at a time where it took more than this many times the
# last single I's seconds an I and more than RANGE_DEARER_SECONDS in all (a cheap range is never worth leaving;
# timings of a tenth of a second vary by more than the factor between runs).
RANGE_DEARER = 2.0
RANGE_DEARER_SECONDS = 1.0


def _next_width(width: int, span: int, per_ii: float, single: float | None) -> tuple[int, float | None]:
    """(the next range's width, the CPU seconds one I's check took) after a refuted range of `span` I's that took
    `per_ii` CPU seconds an I (its encoding's build included). A range pays where its encoding is built once for
    many I's whose checks are cheap (attention_fwd_simple on b200: 13.8 s -> 5.8 s; the corpus' causal attention
    on h200, 0.03-0.3 s an I in ranges against 0.34 s for one); where the checks are what costs, an encoding over
    a range is harder for the solver than the encodings of its I's one by one (held-out attn_bool_mask on h200:
    I 132..133 2.8 s, 134..137 5.8 s, 138..145 13 s, each I alone 0.1-0.6 s with its build; 146..161
    satisfiable in 55 s, 160 alone in 0.6 s), so once a range is dearer an I than the check of one I before it
    (RANGE_DEARER), the rest of the search checks one I at a time (width 0: for good). Which way the search goes
    changes only its time: every I below the answer is refuted either way."""
    if span == 1:
        return 2 * width, per_ii  # (0 stays 0)
    if single is not None and per_ii > RANGE_DEARER * single and per_ii * span > RANGE_DEARER_SECONDS:
        return 0, single
    return 2 * width, single


# With register tiles kept on their roles (problem.pinned_edges), the register relaxation (pressure.py,
# which keeps a pinned edge's ops on one role) refutes the first pass of 6 corpus graphs (no schedule at any
# I; then the pipeline's retry with the hand-off) in 0.2-6 s of CP-SAT, where the search at the SWP bound
# and the sequential I's check took 4.6-8.2 CPU s or the whole minute. It runs before that search: from
# this many ops before the SWP bound's encoding is built (random_n90_s12's takes 5.9 CPU s, random_n48_s9's
# 1.2 s, the relaxation 0.6 and 0.3 s), on smaller graphs once the quick first schedules found nothing
# (`_at_one_ii`), so that those solved at once (0.1-1 s) do not pay its 0.1-0.3 s (docs/benchmarks.md,
# log, session 33: solver38).
EARLY_RELAXATION_OPS = 40


def solve_joint(p: Problem, first_ii: int, swp_length: int, time_limit: float | None = None,
                max_ii: int | None = None, progress=None, extra_copies: int = EXTRA_COPIES,
                deadline: float | None = None, first_refuted: bool = False,
                swp_starts: tuple[tuple[str, int], ...] = (), swp_floor: int | None = None) -> JointResult | None:
    """I/L escalation. Returns None when the time limit (or `deadline`, time.monotonic() seconds,
    whichever comes first) ends the search first; raises NoScheduleError when no I up to `max_ii`
    (or a fully sequential I) works. With `first_refuted`, the caller has proven `first_ii`
    unsatisfiable (explain's core) and the search starts above it. `swp_floor`: stage 1's floor on L
    where its L (`swp_length`: then only the window's copies) is not proven least."""
    if p.option("smt_backend") == "cpsat":  # the same search on CP-SAT (joint_cpsat.py)
        from .joint_cpsat import solve_joint as on_cpsat
        return on_cpsat(p, first_ii, swp_length, time_limit, max_ii, progress, extra_copies, deadline, first_refuted,
                        swp_starts, swp_floor)
    if time_limit is not None:
        deadline = min(deadline or math.inf, time.monotonic() + time_limit)
    report = progress or (lambda stage, info: None)
    last = max_ii or sequential_ii(p)
    tried: list = []
    spare: list[JointResult] = []  # a quick joint schedule above the SWP bound, for the time limit (`_fallback`)
    relaxed: list[int] = []  # the register relaxation ran (here or in `_at_one_ii`)
    if p.option("pinned", ()) and len(p.tasks) >= EARLY_RELAXATION_OPS and not first_refuted:
        no_schedule_anywhere(p, deadline)
        relaxed.append(first_ii)
    if first_refuted:
        tried.append((first_ii, Status.UNSAT))
    else:
        report("joint", {"I": first_ii})
        status, result = _at_one_ii(p, first_ii, first_ii, swp_length, extra_copies, deadline, report, tried,
                                    swp_floor, spare, relaxed)
        if status != Status.UNSAT:
            return result or (spare[0] if spare else None)
    if max_ii is None:
        _check_any_ii(p, last, swp_length, extra_copies, deadline, bool(relaxed))
    lo, width, single = first_ii + 1, 1, None
    while lo <= last:
        if deadline is not None and time.monotonic() >= deadline:  # no encoding built for a check that cannot run
            return spare[0] if spare else None
        hi = min(last, lo + max(width, 1) - 1, same_window_upto(swp_length, lo, last))
        began = time.process_time()  # (CPU seconds, as the hand-off's budgets: the same at any load)
        status, hi, least = _least_in_range(p, lo, hi, swp_length, extra_copies, deadline, report, tried)
        if status == Status.TIMEOUT:
            return spare[0] if spare else None
        if status == Status.UNSAT:
            width, single = _next_width(width, hi - lo + 1, (time.process_time() - began) / (hi - lo + 1), single)
            lo = hi + 1
            continue
        report("joint", {"I": least})
        status, result = _at_one_ii(p, least, first_ii, swp_length, extra_copies, deadline, report, tried)
        if status != Status.UNSAT:
            return result or (spare[0] if spare else None)
        lo, width = least + 1, 1  # (the range said satisfiable: defensive, never seen)
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
    the CTA is launched with (the rule: twill/registers.py, `grow_budgets`)."""
    from .liveness import role_register_use
    lim = p.limits
    roles = []
    for r in schedule.roles:
        # A role that never holds a register value (a TMA producer) has only the machine's minimum to
        # meet: the reserve is counted where values live, as the joint stage checks it.
        use = role_register_use(schedule, p, r)
        need = int(use.used[use.held > 0].max()) if use.held.any() else lim.min_registers
        roles.append((r.warps, need, not all(p.task[o].variable_latency for o in r.ops)))
    return tuple(Role(r.name, r.warps, b, r.ops) for r, b in zip(schedule.roles, grow_budgets(lim, roles)))


def joint_schedule(p: Problem, swp, base: Schedule, options, progress, deadline: float | None = None,
                   first_refuted: bool = False) -> Schedule:
    result = solve_joint(p, swp.ii, swp.length, options.time_limit, options.max_ii, progress, deadline=deadline,
                         first_refuted=first_refuted, swp_starts=swp.starts, swp_floor=swp.length_floor)
    if result is None:
        raise TimeLimitReached(None, "the time limit ended the joint search before any schedule was found")
    sched = schedule_of(p, result, base)
    sched = replace(sched, roles=budgets(p, sched),
                    complete=result.optimal and result.length_optimal and result.ties_done)
    if not sched.complete:
        what = ("optimality was proven" if not result.optimal else "L was proven minimal (I is optimal)"
                if not result.length_optimal else "the tie-breaks (roles, cross-role edges, warps, starts) ended")
        raise TimeLimitReached(sched, f"the time limit ended the search before {what}")
    return sched


def schedule_of(p: Problem, result: JointResult, base: Schedule) -> Schedule:
    """The joint stage's answer as `base` with its ops, roles (budgets 0: `budgets` sets them),
    buffers and cross-role edges."""
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
    return replace(base, stage="joint", ii=result.ii, length=result.length, optimal=result.optimal,
                   length_optimal=result.length_optimal,
                   ops=ops, roles=roles, buffers=buffers, cross_role_edges=tuple(dict.fromkeys(cross)))
