"""The whole flow, top to bottom: graph -> costs -> normalized problem -> modulo schedule ->
joint schedule -> verified `Schedule`. Each stage is a pure function in its own module; this
file only wires them in order and maps results back to the user's names.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable

from .costs import bind
from .errors import Diagnostic, InputError, NoScheduleError, did_you_mean
from .errors import TimeLimitReached  # defined in errors.py (no cycle); twill.pipeline.TimeLimitReached still names it
from .ir import Graph
from .machine import Machine
from .modulo import ModuloResult, ModuloTimeout, modulo_schedule
from .normalize import Normalization, normalize
from .problem import Problem, distinct_costs, make_problem
from .schedule import Scale, Schedule, ScheduledOp
from .verify import check, verify


@dataclass(frozen=True)
class SolveOptions:
    swp_only: bool = False
    normalize_bound: int = 300
    time_limit: float | None = None  # seconds for the whole search
    max_ii: int | None = None
    cross_role: bool = True  # allow producer and consumer on different roles
    warps: int | None = None  # override limits.warps
    registers: int | None = None  # override limits.registers_per_thread (a reduced budget)
    depth: int | None = None  # ring-buffer depth of streaming loads
    timings: bool = False  # record wall times in the schedule's stats
    cache: bool = False  # reuse a proven-optimal schedule solved before (twill/cache.py)
    smt_backend: str = "yices"  # "z3" for comparison only
    groups: tuple[tuple[str, ...], ...] = ()  # ops pinned together on one role, each group its own role


Progress = Callable[[str, dict], None]


def _quiet(stage: str, info: dict) -> None:
    pass


def build_problem(graph: Graph, machine: Machine, options: SolveOptions) -> tuple[Problem, Normalization]:
    """Stage 0 and the problem it feeds: machine cycles -> small integers (SCIP)."""
    _check_groups(graph, options.groups)
    machine = machine.restricted(options.warps, options.registers, options.depth)
    costs = bind(graph, machine)
    norm = normalize(distinct_costs(costs, machine), options.normalize_bound)
    problem = make_problem(graph, machine, costs, norm.as_dict(),
                           {"cross_role": options.cross_role, "smt_backend": options.smt_backend,
                            "groups": options.groups})
    return problem, norm


def _check_groups(graph: Graph, groups: tuple[tuple[str, ...], ...]) -> None:
    """--group names ops of the graph, each at most once."""
    names = {op.name for op in graph.ops}
    seen: set[str] = set()
    for g in groups:
        for name in g:
            if name not in names:
                raise InputError(Diagnostic(f"--group names '{name}', which is not an op of kernel "
                                            f"'{graph.kernel}'", None,
                                            did_you_mean(name, sorted(names)) or f"its ops: {', '.join(sorted(names))}"))
            if name in seen:
                raise InputError(Diagnostic(f"--group names op '{name}' twice: each op is in at most one group",
                                            None, None))
            seen.add(name)


def model_options(options: SolveOptions) -> tuple[tuple[str, object], ...]:
    """The options that change the model, as the schedule records them (verify applies them)."""
    recorded = {"warps": options.warps, "registers": options.registers, "depth": options.depth,
                "cross_role": None if options.cross_role else False,
                "groups": tuple(tuple(g) for g in options.groups) or None}
    return tuple(sorted((k, v) for k, v in recorded.items() if v is not None))


def schedule_from_modulo(problem: Problem, result: ModuloResult, norm: Normalization, graph: Graph,
                         machine: Machine) -> Schedule:
    from .tir import print_tir
    start = result.start
    return Schedule(
        kernel=graph.kernel, machine=machine.name, machine_digest=machine.digest, arch=machine.arch, stage="swp",
        ii=result.ii, length=result.length, optimal=result.optimal,
        ops=tuple(_scheduled(t, start[t.name], None) for t in problem.tasks),
        scale=Scale(norm.map, norm.distortion, norm.unit_cycles),
        bounds=_bounds(result), graph_tir=print_tir(graph),
    )


def _scheduled(t, start: int, role: str | None) -> ScheduledOp:
    return ScheduledOp(t.name, t.opcode, t.unit, t.cycles, t.occupancy, start, role, t.issue, t.is_async,
                       t.variable_latency, t.streaming, t.machine_cycles)


def _bounds(result: ModuloResult) -> tuple[tuple[str, int], ...]:
    return (("res_mii", result.res_mii), ("rec_mii", result.rec_mii),
            ("swp_ii", result.ii), ("swp_length", result.length))


def solve(graph: Graph, machine: Machine, options: SolveOptions = SolveOptions(),
          progress: Progress = _quiet) -> Schedule:
    if not graph.ops:
        raise InputError(Diagnostic(f"{graph.file or graph.name}: the loop has no operations: there is nothing "
                                    "to schedule"))
    if not options.cache:
        return _solve(graph, machine, options, progress)
    from . import cache
    digest = cache.key(graph, machine, options)
    hit = cache.load(digest)
    if hit is not None and not options.timings and not verify(hit, graph, machine):
        progress("cache", {"hit": digest[:12]})
        return hit
    schedule = _solve(graph, machine, options, progress)
    cache.store(digest, replace(schedule, stats=()))
    return schedule


def _solve(graph: Graph, machine: Machine, options: SolveOptions, progress: Progress) -> Schedule:
    timings: dict[str, float] = {}
    t0 = time.perf_counter()

    # Stage 0: normalize costs (SCIP).
    progress("normalize", {})
    problem, norm = build_problem(graph, machine, options)
    timings["normalize_seconds"] = time.perf_counter() - t0

    # Stage 1: optimal modulo schedule, the SWP bound (PuLP + CBC).
    t1 = time.perf_counter()
    try:
        swp = modulo_schedule(problem, options.max_ii, options.time_limit,
                              on_try=lambda ii: progress("modulo", {"I": ii}))
    except ModuloTimeout:
        raise TimeLimitReached(None, "the time limit ended the modulo-scheduling stage before any schedule "
                                     "was found") from None
    timings["ilp_seconds"] = time.perf_counter() - t1
    if swp is None:
        raise NoScheduleError(f"no modulo schedule with I <= {options.max_ii}: raise --max-ii")
    schedule = replace(schedule_from_modulo(problem, swp, norm, graph, machine), options=model_options(options))

    # Stage 2: joint software pipelining and warp specialization (Yices2).
    if not options.swp_only:
        from .joint import joint_schedule
        t2 = time.perf_counter()
        if options.time_limit is not None:  # the limit is for the whole search: pass on what is left
            options = replace(options, time_limit=max(0.01, options.time_limit - (t2 - t0)))
        schedule = joint_schedule(problem, swp, schedule, options, progress)
        timings["smt_seconds"] = time.perf_counter() - t2

    timings["solve_seconds"] = time.perf_counter() - t0
    if options.timings:  # wall times make the file differ run to run: only on request
        schedule = schedule.with_stats(**{k: round(v, 3) for k, v in timings.items()})

    # Every schedule is checked by the independent verifier before anyone sees it.
    check(schedule, graph, machine)
    return schedule
