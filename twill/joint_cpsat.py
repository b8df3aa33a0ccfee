"""Stage 2 on CP-SAT (`--smt-backend cpsat`): the I/L escalation and the tie-breaks of joint.py,
each step an optimization that CP-SAT proves (the model: cpsat_model.py).

The same answers as the Yices search (joint.py), by the same definitions: I ascends from the SWP
bound, each I refuted (INFEASIBLE) within the same window, L <= I * (ceil(L0 / I) + 2), before the
next is tried; once one is not, L is minimized (OPTIMAL), then the roles, the cross-role edges, the
warps and the sum of starts, each fixed at its proven optimum before the next (one solve of them
weighted as their lexicographic order where it fits: `_tie_breaks`), and finally each op's start in
op order. Past a refuted SWP bound, a fully sequential I is checked first, as
joint.py does (no joint schedule at any I). One worker and a fixed seed: the same input gives
the same schedule.
"""
from __future__ import annotations

import math
import time

from .cpsat_model import CpJoint
from .errors import Diagnostic, NoScheduleError, Status
from .joint import (EXTRA_COPIES, TIE_BREAKS, JointResult, earliest_starts, length_floor, no_schedule_anywhere,
                    role_hints, sequential_ii, stage1_floor, window)
from .problem import Problem
from .symmetry import orderings

SEED = 1  # CP-SAT's random seed: fixed, so that a solve is reproducible


def _model(p: Problem, ii: int, swp_length: int, first_ii: int, extra_copies: int,
           swp_floor: int | None = None) -> CpJoint:
    model = CpJoint(p, ii, window(p, ii, swp_length, extra_copies),
                    length_floor(p, stage1_floor(swp_length, swp_floor) if ii == first_ii else 0))
    model.order_starts(orderings(p))  # keeps a schedule of every objective's optimum (symmetry.py)
    return model


def _at_one_ii(p, ii, first_ii, swp_length, extra_copies, deadline, report, tried, hint, swp_floor=None):
    """(status, JointResult or None) at one I: UNSAT refutes I; TIMEOUT with a result is a schedule
    whose L or tie-breaks were not proven."""
    t0 = time.monotonic()
    model = _model(p, ii, swp_length, first_ii, extra_copies, swp_floor)
    roles = role_hints(p, model.K)
    model.hint(hint, roles[0] if roles else None)

    def first():
        report("joint", {"I": ii, "minimizing": "L", "last check s": f"{time.monotonic() - t0:.2f}"})

    status, length = model.minimize("L", deadline, SEED, on_first=first)
    tried.append((ii, Status.SAT if length is not None else status))
    if length is None:
        return status, None
    return Status.SAT, _ties(model, ii, status, length, deadline, report, tried, t0)


def finish(p: Problem, ii: int, lmax: int, floor: int, starts: dict, roles: dict, deadline, report, tried,
           t0: float) -> JointResult | None:
    """`--smt-backend yices-cpsat`: at the least I, where Yices has found a schedule (`starts`,
    `roles`) and refuted every L below `floor`, CP-SAT proves the least L and the tie-breaks.
    None when the deadline comes before CP-SAT has a schedule (the caller keeps Yices')."""
    return finish_from(p, ii, lmax, {}, "L", floor, starts, roles, deadline, report, tried, t0)


# "lexicographic": the least starts, role slots and warps in order (joint._lex, _lex below)
PHASES = ("L", *(what for what, _ in TIE_BREAKS), "lexicographic")


def finish_from(p: Problem, ii: int, lmax: int, proven: dict[str, int], phase: str, floor: int, starts: dict,
                roles: dict, deadline, report, tried, t0: float) -> JointResult | None:
    """The hand-off from Yices (joint.py) at `phase` of PHASES: the phases before it proven (`proven`:
    objective -> its least value), `phase`'s objective refuted below `floor`, and a schedule of them
    (`starts`, `roles`: where CP-SAT looks first). CP-SAT proves `phase` and the ones after it, to the
    same answer as Yices would reach (each phase's optimum, then the lexicographic steps, which leave
    one schedule). None when the deadline comes before CP-SAT has a schedule (the caller keeps Yices')."""
    model = CpJoint(p, ii, lmax, floor if phase == "L" else proven["L"])
    model.order_starts(orderings(p))
    model.hint(starts, roles)
    for what, value in proven.items():  # each proven least: fixed (the proof of >= is Yices')
        if value is not None:
            model.bound(what, value)
            model.m.add(model.objective(what) >= value)
    if phase not in ("L", "lexicographic"):
        model.m.add(model.objective(phase) >= floor)
    if phase == "L":
        return _from_least_length(model, ii, deadline, report, tried, t0)[1]
    at = PHASES.index(phase) - 1  # its index in TIE_BREAKS (len(TIE_BREAKS) for "lexicographic")
    if phase == "lexicographic":
        status, _ = model.minimize("starts", deadline, SEED)  # a schedule of the proven values to start from
        if not model.solved():
            return None
        return _ties(model, ii, Status.SAT, proven["L"], deadline, report, tried, t0, at, status == Status.SAT)
    # `phase` and the tie-breaks after it, from here (one objective where it fits: _tie_breaks)
    return _ties(model, ii, Status.SAT, proven["L"], deadline, report, tried, t0, at)


def _from_least_length(model: CpJoint, ii: int, deadline, report, tried, t0):
    status, length = model.minimize("L", deadline, SEED)
    if length is None:
        return status, None
    return Status.SAT, _ties(model, ii, status, length, deadline, report, tried, t0)


def _ties(model: CpJoint, ii: int, status, length: int, deadline, report, tried, t0, start_at: int = 0,
          going: bool = True) -> JointResult | None:
    """From the least L (status SAT: proven), the tie-breaks in order from TIE_BREAKS[start_at] (`going`:
    the ones before it were proven), each fixed at its optimum, then the lexicographic steps. None when
    the model has no solution yet and the deadline came first (a hand-off's first solve)."""
    done = status == Status.SAT
    ties = done and going
    if ties:
        model.bound("L", length)
        ties = _tie_breaks(model, [what for what, _ in TIE_BREAKS[start_at:]], deadline,
                           lambda what: report("joint", {"I": ii, "L": length, "minimizing": what,
                                                         "last check s": f"{time.monotonic() - t0:.2f}"}))
        if ties:
            ties = _lex(model, deadline)
    if not model.solved():
        return None
    slot, start = model.roles(), model.starts()
    result = JointResult(ii, length if done else model.makespan(), tuple((v, start[v]) for v in model.names),
                         tuple((v, slot[v]) for v in model.names), tuple(sorted(model.role_warps().items())),
                         True, done, tuple(tried), ties)
    return result


LEX_BITS = 56  # the weights of one lexicographic objective stay below 2**LEX_BITS
# The tie-breaks as one objective (radix weights) where it fits in LEX_BITS: on 7 corpus graphs that hand
# off, CP-SAT's tie-break CPU 25.6 -> 18.7 s (docs/benchmarks.md, log, session 28b; one graph worse).
ONE_SHOT_TIES = True


def _tie_breaks(model: CpJoint, whats: list[str], deadline, report) -> bool:
    """Each of `whats` (TIE_BREAKS' objectives, in order) at its least value given the ones before it,
    fixed there. Where their ranges fit in LEX_BITS, one solve of sum(objective_i * weight_i) with
    weight_i the product of the later ranges (+ 1): its optimum is exactly the lexicographic one, and
    each value is a digit of it; else one solve each."""
    weights, radix = [], 1
    for what in reversed(whats):
        weights.append(radix)
        radix *= model.top(what) + 1
    weights.reverse()
    if ONE_SHOT_TIES and len(whats) > 1 and radix < 2 ** LEX_BITS:
        report(", ".join(whats))
        status, value = model.minimize(("weighted", tuple(zip(whats, weights))), deadline, SEED)
        if status != Status.SAT:
            return False
        for what, weight in zip(whats, weights):
            model.bound(what, value // weight)
            value %= weight
        return True
    for what in whats:
        report(what)
        status, value = model.minimize(what, deadline, SEED)
        if status != Status.SAT:
            return False
        model.bound(what, value)
    return True


def _lex(model: CpJoint, deadline) -> bool:
    """joint.LEX's steps: the least starts in op order, then the least role slots in op order, then the
    fewest warps per slot in slot order, among the schedules of every optimum before them."""
    return (_lex_least(model, "starts:lex", model.names, model.lmax, model.starts, deadline)
            and (model.K == 1 or _lex_least(model, "roles:lex", model.names, model.K - 1, model.roles, deadline))
            and _lex_least(model, "warps:lex", [str(w) for w in range(model.K)], model.p.limits.warp_group,
                           lambda: {str(w): n for w, n in model.role_warps().items()}, deadline))


def _lex_least(model: CpJoint, kind: str, items, top: int, values, deadline) -> bool:
    """The lexicographically least values of `items` (each in [0, top]) among the model's solutions: a few
    items at a time, as one objective sum(term(item_i) * R**(k - i)) with R = top + 1 > every value
    (exactly the lexicographic order of those k), each chunk's optimum fixed before the next."""
    radix = top + 1
    k = max(1, LEX_BITS // radix.bit_length())
    one = {"starts:lex": "start", "roles:lex": "role", "warps:lex": "warps"}[kind]
    value, i, fixed = values(), 0, {}
    while i < len(items):
        # at its least possible value in the last solution (0, or a start at its earliest given the
        # starts fixed before it: joint.earliest_starts): fixed there, no solve
        least = earliest_starts(model.p, model.ii, fixed)[items[i]] if kind == "starts:lex" else 0
        if value[items[i]] <= least:
            model.bound(f"{one}:{items[i]}", value[items[i]])
            fixed[items[i]] = value[items[i]]
            i += 1
            continue
        chunk = items[i:i + k]
        status, _ = model.minimize((kind, tuple(chunk), radix), deadline, SEED)
        if status != Status.SAT:
            return False
        value = values()
        for v in chunk:
            model.bound(f"{one}:{v}", value[v])
            fixed[v] = value[v]
        i += len(chunk)
    return True


def _feasible_anywhere(p, last, swp_length, extra_copies, deadline) -> None:
    """Once the SWP bound fails: if no role assignment fits the registers (pressure.py), or even a
    fully sequential I is infeasible, no I is."""
    no_schedule_anywhere(p, deadline)
    model = CpJoint(p, last, window(p, last, swp_length, extra_copies))
    status, _ = model.minimize("L", deadline, SEED, on_first=None)
    if status == Status.UNSAT:
        raise NoScheduleError(Diagnostic("no joint schedule exists at any initiation interval under these limits",
                                         hint="run `twill explain` to see which constraints conflict"))


def solve_joint(p: Problem, first_ii: int, swp_length: int, time_limit: float | None = None,
                max_ii: int | None = None, progress=None, extra_copies: int = EXTRA_COPIES,
                deadline: float | None = None, first_refuted: bool = False,
                swp_starts: tuple[tuple[str, int], ...] = (), swp_floor: int | None = None) -> JointResult | None:
    """joint.solve_joint's contract, on CP-SAT: None when the time limit ends the search before any
    schedule; NoScheduleError when no I up to `max_ii` (or a fully sequential I) works. Stage 1's
    starts (`swp_starts`) and joint.role_hint's roles are where the search looks first."""
    if time_limit is not None:
        deadline = min(deadline or math.inf, time.monotonic() + time_limit)
    report = progress or (lambda stage, info: None)
    last = max_ii or sequential_ii(p)
    tried: list = []
    ii = first_ii
    if first_refuted:
        tried.append((first_ii, Status.UNSAT))
        ii += 1
    checked_any = max_ii is not None
    while ii <= last:
        if ii > first_ii and not checked_any:
            _feasible_anywhere(p, last, swp_length, extra_copies, deadline)
            checked_any = True
        report("joint", {"I": ii, "proving": "no schedule"} if ii > first_ii else {"I": ii})
        status, result = _at_one_ii(p, ii, first_ii, swp_length, extra_copies, deadline, report, tried,
                                    dict(swp_starts), swp_floor)
        if result is not None:
            return result
        if status != Status.UNSAT:
            return None
        ii += 1
    raise NoScheduleError(Diagnostic(f"no joint schedule with I <= {last}",
                                     hint="raise --max-ii, or run `twill explain`"))
