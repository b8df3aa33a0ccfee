"""`twill emit-cuda SCHEDULE.json -o kernel.cu` (or `GRAPH.tir --gpu M`): CUDA C++ for a schedule."""
from __future__ import annotations

import os

import click

from .common import (Seconds, checked_schedule, count, distinct_output, gpu_option, model_flags, options_from_flags,
                     progress_printer)
from .main import main


@main.command("emit-cuda")
@click.argument("source", type=click.Path(dir_okay=False))
@gpu_option
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="write the .cu file here (atomic; left untouched when unchanged) [default: stdout]")
@click.option("--binding", type=click.Choice(["torch"]),
              help="also write what a PyTorch user imports beside -o K.cu: K.py (a function over torch tensors, "
                   "built with nvcc on first use) and K_entry.cu (its extern \"C\" entry point)")
@click.option("--swp-only", is_flag=True, help="for a graph: solve the modulo schedule only (emit-cuda derives roles)")
@click.option("--time-limit", type=Seconds(),
              help="for a graph: seconds of search; exit 3 after emitting the best schedule")
@click.option("--no-ptxas-loop", "no_ptxas", is_flag=True,
              help="do not compile the kernel with nvcc to check ptxas's registers, spills and wgmma "
                   "serialization against the model (and solve again where they disagree); also TWILL_PTXAS_LOOP=0")
@click.option("--ctas-per-sm", "ctas", type=count(1),
              help="run up to this many CTAs of the kernel per SM, as many as the roles' registers and shared "
                   "memory fit (docs/emit-cuda.md) [default: 2 where one computing warpgroup does more than mmas and "
                   "fits the 128 registers two CTAs get, else 1]")
@click.option("--tile-copies/--no-tile-copies", "copies", default=None,
              help="a persistent GEMM-like kernel runs two warpgroups of its computing role, taking the CTA's "
                   "tiles in turn, so one's epilogue overlaps the other's main loop, where registers and shared "
                   "memory allow (docs/emit-cuda.md) [default: where the loop runs an mma and the epilogue computes]")
@click.option("--load-rings", "load_rings", type=click.Choice(["solved", "latency"]), default="solved",
              show_default=True,
              help="how deep each TMA load's ring is: the depth the schedule was solved at, or deepened after the "
                   "solve to cover the load's typical latency in the shared memory left (docs/emit-cuda.md; off by "
                   "default until measured on a GPU)")
@click.option("--any-pitch", "any_pitch", is_flag=True,
              help="a row kernel's input whose rows are not 16 bytes apart (50257 bf16) is read where it lies, by "
                   "bulk copies, not staged by the binding into padded rows (docs/emit-cuda.md); off by default "
                   "until run on a GPU")
@model_flags
def emit_cuda(source, gpu, output, binding, swp_only, time_limit, no_ptxas, ctas, copies, load_rings, any_pitch,
              **flags):
    """CUDA C++ (sm_90a or sm_100a) for the warp roles of SOURCE: a schedule .json, or a graph
    (.tir, .ttgir) that is solved first with --gpu."""
    distinct_output(source, output)
    if binding and not output:
        from twill.errors import Diagnostic, InputError
        raise InputError(Diagnostic("--binding writes its files beside the kernel's, so it needs -o K.cu",
                                    hint="add -o kernel.cu"))
    from twill.pipeline import TimeLimitReached
    from twill.sequence import Sequence, is_sequence_file

    from .common import graph_or_sequence
    found = None if source.endswith(".json") else graph_or_sequence(source, flags)
    if source.endswith(".json") and is_sequence_file(source) or isinstance(found, Sequence):
        _emit_sequence(source, gpu, output, binding, swp_only, time_limit, no_ptxas, ctas, flags, found, load_rings,
                       any_pitch)
        return
    pending, options = None, None
    if source.endswith(".json"):
        schedule, machine = checked_schedule(source, gpu)
    else:
        from twill.pipeline import solve

        from .common import need_gpu
        machine = need_gpu(gpu, "emit-cuda of a graph")
        graph = found
        options = options_from_flags(flags, swp_only=swp_only, time_limit=time_limit)
        try:
            schedule = solve(graph, machine, options, progress_printer(flags["quiet"]))
        except TimeLimitReached as exc:
            if exc.schedule is None:
                raise
            schedule, pending = exc.schedule, exc
    chosen = {}
    from twill.errors import EmitError
    try:
        if _ptxas_on(no_ptxas):
            schedule, chosen = _ptxas_loop(schedule, machine, options if pending is None else None,
                                           flags["quiet"], ctas, copies, load_rings, any_pitch)
        _write(schedule, machine, output, binding, ctas, copies, load_rings, any_pitch, **chosen)
    except EmitError as exc:
        from .common import at_ops
        raise at_ops(exc, found, source) from None
    if pending is not None:
        raise pending


def _ptxas_on(no_ptxas: bool) -> bool:
    """Whether emit-cuda checks its kernels with ptxas: not --no-ptxas-loop, nor TWILL_PTXAS_LOOP=0."""
    return not no_ptxas and os.environ.get("TWILL_PTXAS_LOOP", "1") != "0"


def _ptxas_loop(schedule, machine, options, quiet: bool, ctas: int | None = None, copies: bool | None = None,
                load_rings: str = "solved", any_pitch: bool = False):
    """(the schedule whose kernel ptxas agrees with, the emitter's options the loop chose: one CTA per tile,
    kernel<false>'s ring position hidden, kernel<true>'s parameters per tile: twill/ptxas_loop.py); what it
    found and what it changed on stderr (with -q: only a change)."""
    from twill.ptxas_loop import emitter, resolver, run

    lines = []
    emit = emitter(machine, ctas_per_sm=ctas, tile_copies=copies, load_rings=load_rings,
                   any_pitch=any_pitch)
    result = run(schedule, machine, emit, resolver(schedule, machine, options), lines.append)
    if not quiet or result.changed:
        for line in lines:
            click.echo(line, err=True)
    return result.schedule, result.build_options


def _write(schedule, machine, output, binding=None, ctas: int | None = None, copies: bool | None = None,
           load_rings: str = "solved", any_pitch: bool = False, **chosen) -> None:
    """`chosen`: the ptxas loop's emitter options (one_tile_per_cta, hidden_position, tile_args)."""
    from twill.emit import emitted
    from twill.fileio import write_atomic

    model, text = emitted(schedule, machine, ctas_per_sm=ctas, tile_copies=copies, load_rings=load_rings,
                         any_pitch=any_pitch, **chosen)
    if not output:
        click.echo(text, nl=False)
        return
    files = {output: text}
    if binding == "torch":
        from twill.emit.binding import binding_files
        files.update(binding_files(model, output))
    for path, body in files.items():
        changed = write_atomic(path, body, only_if_changed=True)
        what = (f"kernel {schedule.kernel} for {machine.arch}, {len(schedule.roles) or 'derived'} role(s)"
                if path == output else f"its {binding} binding")
        click.echo(f"{'wrote' if changed else 'unchanged'} {path}: {what}", err=True)


def _emit_sequence(source, gpu, output, binding, swp_only, time_limit, no_ptxas, ctas, flags, found=None,
                   load_rings: str = "solved", any_pitch: bool = False) -> None:
    """Loops in sequence: each loop's kernel K.LOOP.cu (and binding K.LOOP.py) as alone, and with
    --binding the sequence's K.py that runs them in order (twill/emit/sequence.py)."""
    from twill.errors import Diagnostic, InputError
    from twill.sequence import load_sequence_schedule, solve_sequence

    from .common import check_file, machine_for, need_gpu
    if not output:
        raise InputError(Diagnostic("loops in sequence are emitted as one kernel file per loop, beside -o K.cu",
                                    hint="add -o kernel.cu (K.LOOP.cu are written, and K.py with --binding)"))
    options = None
    if source.endswith(".json"):
        seq = load_sequence_schedule(source)
        machines = []
        for name, s in zip(seq.names, seq.schedules):
            machine = machine_for(s, gpu, f"{source} (loop {name})")
            check_file(s, machine, f"{source} (loop {name})")
            machines.append(machine)
    else:
        machine = need_gpu(gpu, "emit-cuda of a graph")
        options = options_from_flags(flags, swp_only=swp_only, time_limit=time_limit)
        seq = solve_sequence(found, machine, options, progress_printer(flags["quiet"]))
        machines = [machine] * len(seq.names)
    from twill.emit.binding import binding_files
    from twill.emit.cuda import Renderer
    from twill.emit.sequence import loop_kernel, loop_path, sequence_binding
    from twill.fileio import write_atomic
    renderers, files = [], {}  # every file made before any is written: a failed loop leaves all as they were
    for name, s, machine in zip(seq.names, seq.schedules, machines):
        chosen = {}
        if _ptxas_on(no_ptxas):
            s, chosen = _ptxas_loop(s, machine, options, flags["quiet"], ctas, load_rings=load_rings,
                                    any_pitch=any_pitch)
        model, text = loop_kernel(s, machine, ctas_per_sm=ctas, **chosen,
                                  smem_parts=len(seq.names),  # side by side in the one kernel (seqfuse.py)
                                  load_rings=load_rings, any_pitch=any_pitch)
        path = loop_path(output, name)
        files[path] = (text, f"kernel {s.kernel} for {machine.arch}, {len(s.roles) or 'derived'} role(s)")
        if binding == "torch":
            files.update({p: (t, f"its {binding} binding") for p, t in binding_files(model, path, combine=False).items()})
        renderers.append((name, Renderer(model)))
    from twill.emit.seqfuse import compiled, fused_entry, fused_path, fused_source, plan as fuse_plan
    fp, fused = fuse_plan(renderers), None  # the loops as one kernel, where they walk one grid of row tiles
    text = "" if fp.why_not else fused_source(seq.kernel, renderers, fp)
    if text and _ptxas_on(no_ptxas):
        fp = compiled(fp, text, machines[0].arch)  # refused where ptxas spills it (its loops' kernels were checked)
    if fp.why_not:
        click.echo(f"one kernel per loop: {fp.why_not}", err=True)
    else:
        path = fused_path(output)
        files[path] = (text, f"kernel {seq.kernel}, its {len(seq.names)} loops as one")
        entry = path[:-3] + "_entry.cu"
        if binding == "torch":
            files[entry] = (fused_entry(seq.kernel, os.path.basename(path), renderers), "its torch binding's entry")
        fused = (os.path.basename(path), os.path.basename(entry))
    if binding == "torch":
        stem = output[:-3] if output.endswith(".cu") else output
        files[stem + ".py"] = (sequence_binding(seq.kernel, output, renderers, seq.handovers, fused, fp.why_not),
                               f"kernel {seq.kernel}, its {len(seq.names)} loops run in order")
    for path, (text, what) in files.items():
        changed = write_atomic(path, text, only_if_changed=True)
        click.echo(f"{'wrote' if changed else 'unchanged'} {path}: {what}", err=True)

