"""`twill explain GRAPH --gpu M`: is stage 1's SWP bound realisable, and if not, why (a minimal unsat core)."""
from __future__ import annotations

import json

import click

from .common import gpu_option, graph_of, model_flags, options_from_flags, need_gpu, progress_printer
from .main import main


@main.command()
@click.argument("graph", type=click.Path(dir_okay=False))
@gpu_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@model_flags
def explain(graph, gpu, fmt, **flags):
    """Explain whether the SWP bound I0 of GRAPH is realisable: a minimal conflict, checked relaxations,
    and the smallest realisable I."""
    from twill.explain import explain as run, render_text

    machine = need_gpu(gpu, "explain")
    g = graph_of(graph, flags)
    ex = run(g, machine, options_from_flags(flags), progress_printer(flags["quiet"]))
    if fmt == "json":
        click.echo(json.dumps(ex.to_dict(), indent=2))
    else:
        click.echo(render_text(ex), nl=False)
