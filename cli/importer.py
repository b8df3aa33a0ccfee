"""`twill import KERNEL.ttgir -o GRAPH.tir`: a Triton TTGIR dump to a tile-loop graph."""
from __future__ import annotations

import click

from .common import MAX_COUNT, NOT_TTGIR, check_graph_file, count, distinct_output
from .main import main


def _parts(ctx, param, value):
    """--split-rows, --grow-rows: a count of at least 1, or `auto`."""
    if value == "auto":
        return value
    try:
        parts = int(value)
    except ValueError:
        parts = 0
    if not 1 <= parts <= MAX_COUNT:
        raise click.BadParameter(f"{value!r} is neither a count of at least 1 nor 'auto' (a count is at most {MAX_COUNT})")
    return parts


@main.command("import")
@click.argument("ttgir", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="write the .tir here (atomic); else stdout")
@click.option("--loop", type=count(0),
              help="which scf.for (0-based, file order; default: the innermost tile loop, or the tile loops in "
                   "sequence as a .tir of several named loops)")
@click.option("--strict", is_flag=True, help="an op the importer does not know is an error, not a warning")
@click.option("--split-rows", default="1", metavar="N|auto", callback=_parts,
              help="sub-tile: the rows of the loop's mma tiles as N independent parts (as Triton's num_warps = 8 "
                   "runs a 128-row tile on 2 warpgroups); auto: as many as the warpgroups Triton's mma layout "
                   "spreads them over (warpsPerCTA = [4 N, 1]), where each part keeps a multiple of 64 rows")
@click.option("--grow-rows", default="1", metavar="K|auto", callback=_parts,
              help="compute K of the kernel's row tiles at once, each a part of its own (with --split-rows N: "
                   "K x N parts), sharing the loads that have no rows (a GEMM's B): fewer bytes per FLOP; "
                   "auto: 2 for a plain GEMM loop whose epilogue computes little (docs/ttgir-import.md)")
def import_(ttgir, output, loop, strict, split_rows, grow_rows):
    """Read a TTGIR dump (before or after Triton's pipeliner) and write the loop's .tir graph."""
    distinct_output(ttgir, output)
    check_graph_file(ttgir, NOT_TTGIR)
    from twill.fileio import write_atomic
    from twill.tir import print_tir
    from twill.ttgir import load_ttgir

    # tile loops one after the other: a sequence of loops (each loop whole: `auto` sub-tiles no loop of a sequence)
    if loop is None and split_rows in (1, "auto") and grow_rows in (1, "auto"):
        from twill.fileio import read_text
        from twill.sequence import Sequence
        from twill.tir_sequence import print_sequence
        from twill.ttgir.sequence import import_sequence
        found, warnings = import_sequence(read_text(ttgir, "TTGIR file"), ttgir, strict=strict)
        if isinstance(found, Sequence):
            for w in warnings:
                click.echo(w.render(), err=True)
            text = print_sequence(found)
            if output:
                write_atomic(output, text, only_if_changed=True)
                click.echo(f"wrote {output}: kernel {found.kernel}, {len(found.names)} loops in sequence ("
                           + ", ".join(f"{n}: {len(g.ops)} ops" for n, g in zip(found.names, found.graphs)) + ")",
                           err=True)
            else:
                click.echo(text, nl=False)
            return
    graph, warnings = load_ttgir(ttgir, loop=loop, strict=strict, split_rows=split_rows, grow_rows=grow_rows)
    for w in warnings:
        click.echo(w.render(), err=True)
    text = print_tir(graph)
    if output:
        write_atomic(output, text, only_if_changed=True)
        click.echo(f"wrote {output}: kernel {graph.kernel}, {len(graph.ops)} ops, {len(graph.carries)} carries",
                   err=True)
    else:
        click.echo(text, nl=False)
