"""`twill explain GRAPH --gpu M`: is stage 1's SWP bound realisable, and if not, why (a minimal unsat core)."""
from __future__ import annotations

import json

import click

from .common import gpu_option, need_gpu, progress_printer, solve_options
from .main import main


@main.command()
@click.argument("graph", type=click.Path(dir_okay=False))
@gpu_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--normalize-bound", type=click.IntRange(1), default=300, show_default=True,
              help="U: the largest sum of normalized costs")
@click.option("--max-ii", type=click.IntRange(1), help="give up the search for a realisable I above this")
@click.option("--warps", type=click.IntRange(1), help="override the machine's warp limit")
@click.option("--registers", type=click.IntRange(24, 255), help="reduced per-thread register ceiling")
@click.option("--no-cross-role", "no_cross", is_flag=True, help="forbid producer and consumer on different roles")
@click.option("--depth", type=click.IntRange(1), help="ring-buffer depth of streaming loads")
@click.option("--loop", type=int, help="for a .ttgir input: which loop to import")
@click.option("-q", "--quiet", is_flag=True, help="no progress on stderr")
def explain(graph, gpu, fmt, normalize_bound, max_ii, warps, registers, no_cross, depth, loop, quiet):
    """Explain whether the SWP bound I0 of GRAPH is realisable: a minimal conflict, checked relaxations,
    and the smallest realisable I."""
    from twill.explain import explain as run, render_text
    from twill.fileio import load_graph

    machine = need_gpu(gpu, "explain")
    g = load_graph(graph, loop)
    options = solve_options(normalize_bound=normalize_bound, max_ii=max_ii, warps=warps, registers=registers,
                            cross_role=not no_cross, depth=depth)
    ex = run(g, machine, options, progress_printer(quiet))
    if fmt == "json":
        click.echo(json.dumps(ex.to_dict(), indent=2))
    else:
        click.echo(render_text(ex), nl=False)
