"""`twill plot SCHEDULE.json -o chart.svg` (or `GRAPH.tir --gpu M`): a Gantt chart, SVG or PNG."""
from __future__ import annotations

import click

from .common import count, distinct_output, gpu_option, need_gpu, progress_printer, solve_options
from .main import main


@main.command("plot")
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True,
              help="the picture to write, .svg or .png (atomic)")
@gpu_option
@click.option("--swp-only", is_flag=True, help="for a graph: draw the modulo schedule alone (no warp roles)")
@click.option("--arrows", is_flag=True, help="draw the dependence edges between op instances")
@click.option("--loop", type=count(0), help="for a .ttgir input: which loop to import")
@click.option("-q", "--quiet", is_flag=True, help="no progress on stderr")
def plot(source, output, gpu, swp_only, arrows, loop, quiet):
    """Draw the unrolled program of SOURCE (a schedule .json, or a graph to solve first) as a Gantt
    chart: one lane per warp role and per functional unit, prologue and epilogue shaded, I marked."""
    distinct_output(source, output)
    from twill.errors import InputError
    from twill.plot import FORMATS, chart_data, render

    suffix = output.rsplit(".", 1)[-1].lower() if "." in output else ""
    if suffix not in FORMATS:
        raise InputError(f"cannot tell the picture format of '{output}': name it .svg or .png")
    schedule = _schedule(source, gpu, swp_only, loop, quiet)
    chart = chart_data(schedule)
    if arrows and not schedule.graph_tir:
        raise InputError(f"'{source}' embeds no graph, so there are no dependence arrows to draw")
    render(chart, output, arrows=arrows)
    click.echo(f"wrote {output}: {schedule.kernel}, I = {schedule.ii}, L = {schedule.length}, "
               f"{len(chart.lanes)} lanes, {schedule.copies} overlapped iterations", err=True)


def _schedule(source: str, gpu, swp_only: bool, loop, quiet: bool):
    """A schedule file as it is, or a graph solved on the spot (all stages, or --swp-only)."""
    from twill.errors import InputError

    if source.endswith(".json"):
        if swp_only:
            raise InputError(f"'{source}' is already a schedule: --swp-only is for a graph")
        from .common import checked_schedule
        return checked_schedule(source, gpu)[0]  # as emit-cuda checks it: --gpu names its machine
    from twill.fileio import load_graph
    from twill.pipeline import solve

    from .common import check_graph_file, check_loop
    check_graph_file(source)
    machine = need_gpu(gpu, "plot of a graph")
    check_loop(source, loop)
    graph = load_graph(source, loop)
    return solve(graph, machine, solve_options(swp_only=swp_only), progress_printer(quiet))
