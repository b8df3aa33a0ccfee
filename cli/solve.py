"""`twill solve GRAPH --gpu M`: all stages, or the modulo schedule alone with --swp-only."""
from __future__ import annotations

import click

from .common import Seconds, distinct_output, gpu_option, graph_or_sequence as graph_of_any, model_flags, options_from_flags, need_gpu, progress_printer
from .main import main


@main.command()
@click.argument("graph", type=click.Path(dir_okay=False))
@gpu_option
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="write the schedule JSON here (atomic)")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "yaml"]),
              help="stdout format [default: table; with -o, nothing unless asked]")
@click.option("--swp-only", is_flag=True, help="stop after the modulo-scheduling stage (no warp specialization)")
@click.option("--time-limit", type=Seconds(), help="seconds; exit 3 with the best schedule")
@click.option("--smt-backend", type=click.Choice(["yices", "z3", "cpsat", "yices-cpsat"]), default="yices",
              show_default=True, help="joint-stage solver: z3 for comparison only; cpsat: OR-Tools CP-SAT; "
              "yices-cpsat: Yices up to the first schedule, CP-SAT for the least L and the tie-breaks")
@click.option("--no-cache", "no_cache", is_flag=True, help="solve again even if this problem was solved before")
@click.option("--timings", is_flag=True, help="record wall times in the schedule (the file then varies)")
@model_flags
def solve(graph, gpu, output, fmt, swp_only, time_limit, smt_backend, no_cache, timings, **flags):
    """Find the optimal pipelined, warp-specialized schedule of GRAPH (.tir or .ttgir)."""
    distinct_output(graph, output)
    from twill.pipeline import TimeLimitReached, solve as run

    machine = need_gpu(gpu, "solve")
    g = graph_of_any(graph, flags)
    options = options_from_flags(flags, swp_only=swp_only, time_limit=time_limit, timings=timings, cache=not no_cache,
                            smt_backend=smt_backend)
    from twill.sequence import Sequence, solve_sequence
    if isinstance(g, Sequence):  # loops in sequence: each solved alone, one twill-sequence/1 file
        _emit_sequence(solve_sequence(g, machine, options, progress_printer(flags["quiet"])), fmt, output)
        return
    try:
        schedule = run(g, machine, options, progress_printer(flags["quiet"]))
    except TimeLimitReached as exc:
        if exc.schedule is None:
            raise
        _emit(exc.schedule, fmt, output)
        raise
    _emit(schedule, fmt, output)


def _emit(schedule, fmt, output):
    from twill.fileio import write_atomic
    from twill.report import render

    if output:
        write_atomic(output, schedule.to_json())
        click.echo(f"wrote {output}: I = {schedule.ii}, L = {schedule.length}"
                   f"{'' if schedule.optimal else ' (not proven optimal)'}", err=True)
    if fmt or not output:
        click.echo(render(schedule, fmt or "table"), nl=False)


def _emit_sequence(seq, fmt, output):
    from twill.fileio import write_atomic
    from twill.report import render

    if output:
        write_atomic(output, seq.to_json())
        click.echo(f"wrote {output}: {len(seq.names)} loops in sequence, " + ", ".join(
            f"{n}: I = {s.ii}, L = {s.length}{'' if s.optimal else ' (not proven optimal)'}"
            for n, s in zip(seq.names, seq.schedules)), err=True)
    if fmt == "json":
        click.echo(seq.to_json(), nl=False)
    elif fmt or not output:
        for n, s in zip(seq.names, seq.schedules):
            click.echo(f"== loop {n}")
            click.echo(render(s, fmt or "table"), nl=False)
