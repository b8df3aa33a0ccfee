"""The whole flow, top to bottom: graph -> costs -> normalized problem -> modulo schedule ->
joint schedule -> verified `Schedule`. Each stage is a pure function in its own module; this
file only wires them in order and maps results back to the user's names.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable

from .errors import Diagnostic, InputError, NoScheduleError
from .errors import TimeLimitReached  # defined in errors.py (no cycle); twill.pipeline.TimeLimitReached still names it
from .ir import Graph
from .machine import Machine
from .modulo import ModuloResult, ModuloTimeout, modulo_schedule, rec_mii, res_mii, sequential
from .normalize import Normalization
from .options import ModelOptions
from .problem import Problem, problem_for
from .schedule import Scale, Schedule, ScheduledOp, graph_digest
from .verify import check


@dataclass(frozen=True)
class SolveOptions(ModelOptions):
    """The model options (twill/options.py) and what only shapes a run: none of these three
    changes the answer, so none is in a schedule's options or the cache key."""

    time_limit: float | None = None  # seconds for the whole search
    timings: bool = False  # record wall times in the schedule's stats
    cache: bool = False  # reuse a complete, verified schedule solved before (twill/cache.py)


Progress = Callable[[str, dict], None]


def _quiet(stage: str, info: dict) -> None:
    pass


def build_problem(graph: Graph, machine: Machine, options: ModelOptions,
                  deadline: float | None = None) -> tuple[Problem, Normalization]:
    """Stage 0 and the problem it feeds: machine cycles -> small integers (SCIP)."""
    return problem_for(graph, machine, options.model, deadline=deadline)


def schedule_from_modulo(problem: Problem, result: ModuloResult, norm: Normalization, graph: Graph,
                         machine: Machine, options: ModelOptions = ModelOptions()) -> Schedule:
    """Stage 1's answer as a schedule (stage "swp"), with the digests of what it was solved from."""
    from .tir import print_tir
    start = result.start
    tir = print_tir(graph)
    return Schedule(
        kernel=graph.kernel, machine=machine.name, machine_digest=machine.digest, arch=machine.arch, stage="swp",
        ii=result.ii, length=result.length, optimal=result.optimal,
        ops=tuple(_scheduled(t, start[t.name], None) for t in problem.tasks),
        scale=Scale(norm.map, norm.distortion, norm.unit_cycles),
        bounds=_bounds(result), graph_tir=tir, options=options.model.recorded(),
        graph_digest=graph_digest(tir), options_digest=options.model.digest(),
        length_optimal=not result.timed_out and result.length_floor is None,
        complete=norm.proven and not result.timed_out,
    )


def _scheduled(t, start: int, role: str | None) -> ScheduledOp:
    return ScheduledOp(t.name, t.opcode, t.unit, t.cycles, t.occupancy, start, role, t.issue, t.is_async,
                       t.variable_latency, t.streaming, t.machine_cycles)


def _bounds(result: ModuloResult) -> tuple[tuple[str, int], ...]:
    """Stage 1's answer; `swp_length_floor` only where its L is not proven least (modulo.py's doc)."""
    floor = () if result.length_floor is None else (("swp_length_floor", result.length_floor),)
    return (("res_mii", result.res_mii), ("rec_mii", result.rec_mii),
            ("swp_ii", result.ii), ("swp_length", result.length)) + floor


def solve(graph: Graph, machine: Machine, options: SolveOptions = SolveOptions(),
          progress: Progress = _quiet) -> Schedule:
    """All stages, or stage 1 alone (`swp_only`); solver files live in a scratch folder removed
    on every exit. A time limit that ends the search raises TimeLimitReached with the best
    schedule found (never None: stage 1's fallback always exists). Only a complete schedule is
    cached, and a cached one is served only once it passes every check (twill/cache.py)."""
    if not graph.ops:
        raise InputError(Diagnostic(f"{graph.file or graph.name}: the loop has no operations: there is nothing "
                                    "to schedule"))
    from .fileio import scratch
    began = time.monotonic()
    with scratch():
        try:
            return _cached_solve(graph, machine, options, progress)
        except NoScheduleError:
            if not tiles_pinned(graph, machine, options):
                raise
        # No schedule keeps every register tile on the role that computes it (the machine has no
        # communication.tile_handoff): solved again with such tiles handed between roles, which the
        # schedule records (its options' tile_handoff), as a slower schedule beats none. The time limit is
        # the whole solve's: the retry has what the first pass left of it.
        progress("handoff", {"retry": "register tiles handed between roles"})
        return _cached_solve(graph, machine, replace(options, tile_handoff=True), progress, began)


def tiles_pinned(graph: Graph, machine: Machine, options: SolveOptions) -> bool:
    """Did the solve keep register tiles on their roles by the machine's rule (problem.pinned_for), which
    it may drop (an option that says either way is the user's, or a retry's)?"""
    from .problem import pinned_for
    return options.tile_handoff is None and bool(pinned_for(graph, machine, options))


def _cached_solve(graph: Graph, machine: Machine, options: SolveOptions, progress: Progress,
                  began: float | None = None) -> Schedule:
    """`_solve`, through the cache where `options.cache` asks for it; `began` (time.monotonic()): when
    the time limit started (None: now)."""
    if not options.cache:
        return _solve(graph, machine, options, progress, began)
    from . import cache
    digest = cache.key(graph, machine, options.model)
    hit = cache.load(digest, graph, machine, options.model)
    if hit is not None and not options.timings:
        progress("cache", {"hit": digest[:12]})
        return hit
    schedule = _solve(graph, machine, options, progress, began)  # an incomplete one raises: never stored
    cache.store(digest, replace(schedule, stats=()), graph, machine, options.model)
    return schedule


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.01, deadline - time.monotonic())


def _solve(graph: Graph, machine: Machine, options: SolveOptions, progress: Progress,
           began: float | None = None) -> Schedule:
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    # The stages stop a little before the limit (5%, at most a second): checking and printing
    # the schedule they leave fits in what remains. The limit runs from `began` (a retry's is the
    # first pass' start).
    limit = options.time_limit
    began = time.monotonic() if began is None else began
    deadline = None if limit is None else began + limit - min(1.0, 0.05 * limit)

    # Stage 0: normalize costs (SCIP).
    progress("normalize", {})
    problem, norm = build_problem(graph, machine, options, deadline)
    timings["normalize_seconds"] = time.perf_counter() - t0

    # Stage 1: optimal modulo schedule, the SWP bound (PuLP + CBC); out of time, the sequential one.
    t1 = time.perf_counter()
    try:
        # Stage 2 reads only stage 1's I and L: the earliest starts are its tie-break for --swp-only.
        swp = modulo_schedule(problem, options.max_ii, _left(deadline),
                              on_try=lambda ii: progress("modulo", {"I": ii}), earliest=options.swp_only)
    except ModuloTimeout:
        swp = sequential(problem, res_mii(problem), rec_mii(problem))
    timings["ilp_seconds"] = time.perf_counter() - t1
    if swp is None:
        raise NoScheduleError(f"no modulo schedule with I <= {options.max_ii}: raise --max-ii")
    schedule = schedule_from_modulo(problem, swp, norm, graph, machine, options)

    # Stage 2: joint software pipelining and warp specialization (Yices2), if stage 1 finished.
    if not options.swp_only and schedule.complete:
        schedule = _joint(problem, swp, schedule, replace(options, time_limit=_left(deadline)), progress)
        timings["smt_seconds"] = time.perf_counter() - t1 - timings["ilp_seconds"]
    elif not options.swp_only:  # the joint stage got no time: stage 1's schedule, its roles derived
        schedule = replace(schedule, optimal=False)

    timings["solve_seconds"] = time.perf_counter() - t0
    if options.timings:  # wall times make the file differ run to run: only on request
        schedule = schedule.with_stats(**{k: round(v, 3) for k, v in timings.items()})

    # Every schedule is checked by the independent verifier before anyone sees it.
    check(schedule, graph, machine)
    schedule = with_latency_slack(schedule, graph, machine, options)
    if not schedule.complete:
        raise TimeLimitReached(schedule, _unfinished(schedule, options, norm, swp))
    return schedule


def with_latency_slack(schedule: Schedule, graph: Graph, machine: Machine, options: ModelOptions) -> Schedule:
    """The schedule with the slack of its ops that have a latency interval (twill/slack.py)."""
    from .costs import bind
    from .slack import latency_slack
    costs = bind(graph, machine.restricted(depth=options.depth))
    intervals = {c.name: c.latency_range for c in costs if c.latency_range is not None}
    if not intervals:
        return schedule
    depths = {c.name: c.depth for c in costs if c.streaming}
    return replace(schedule, latency_slack=latency_slack(schedule, graph, intervals, depths))


def _joint(problem: Problem, swp: ModuloResult, base: Schedule, options: SolveOptions, progress) -> Schedule:
    """The joint stage; a time limit that stops it gives its schedule so far (complete=False), or,
    with none found, stage 1's schedule (not proven: emit-cuda derives its roles)."""
    from .joint import joint_schedule
    try:
        return joint_schedule(problem, swp, base, options, progress)
    except TimeLimitReached as exc:
        return replace(exc.schedule or replace(base, optimal=False), complete=False)


def _unfinished(schedule: Schedule, options: SolveOptions, norm: Normalization, swp: ModuloResult) -> str:
    """What the time limit cut short, in words."""
    if not norm.proven:
        what = "cost normalization (stage 0) finished"
    elif swp.timed_out and not swp.optimal:
        what = "the modulo-scheduling stage found a schedule; this is the sequential one"
    elif swp.timed_out:
        what = "the modulo-scheduling stage proved L minimal"
    elif not options.swp_only and schedule.stage == "swp":
        what = "the joint stage found a schedule; this is stage 1's, with warp roles to be derived"
    elif not schedule.optimal:
        what = "optimality was proven"
    elif not schedule.length_optimal:
        what = "L was proven minimal (I is optimal)"
    else:
        what = "the tie-breaks (fewest roles, cross-role edges, warps, earliest starts) finished"
    limit = "" if options.time_limit is None else f" ({options.time_limit:g} s)"
    return f"the time limit{limit} ended the search before {what}: not proven"
