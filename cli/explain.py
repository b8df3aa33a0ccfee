"""`twill explain GRAPH --gpu M`: is stage 1's SWP bound realisable, and if not, why (a minimal unsat core)."""
from __future__ import annotations

import json

import click

from .common import Seconds, gpu_option, graph_of, model_flags, options_from_flags, need_gpu, progress_printer
from .main import main


@main.command()
@click.argument("graph", type=click.Path(dir_okay=False))
@gpu_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--time-limit", type=Seconds(),
              help="seconds for the whole explanation; exit 3 after printing what it found when the limit cut it short")
@model_flags
def explain(graph, gpu, fmt, time_limit, **flags):
    """Explain whether the SWP bound I0 of GRAPH is realisable: a minimal conflict, checked relaxations,
    and the smallest realisable I."""
    from twill.errors import TimeLimitReached
    from twill.explain import explain as run, render_text

    machine = need_gpu(gpu, "explain")
    g = graph_of(graph, flags)
    ex = run(g, machine, options_from_flags(flags, time_limit=time_limit), progress_printer(flags["quiet"]))
    if fmt == "json":
        click.echo(json.dumps(ex.to_dict(), indent=2))
    else:
        click.echo(render_text(ex), nl=False)
    if time_limit is not None and not ex.complete:
        raise TimeLimitReached(None, f"the time limit ({time_limit:g} s) ended part of the explanation "
                                     "(what it cut is marked above)")
