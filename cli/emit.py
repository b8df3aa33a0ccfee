"""`twill emit-cuda SCHEDULE.json -o kernel.cu` (or `GRAPH.tir --gpu M`): CUDA C++ for a schedule."""
from __future__ import annotations

import click

from .common import Seconds, check_file, distinct_output, gpu_option, graph_of, model_flags, model_options, progress_printer
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
@model_flags
def emit_cuda(source, gpu, output, binding, swp_only, time_limit, **flags):
    """CUDA C++ (sm_90a or sm_100a) for the warp roles of SOURCE: a schedule .json, or a graph
    (.tir, .ttgir) that is solved first with --gpu."""
    distinct_output(source, output)
    if binding and not output:
        from twill.errors import Diagnostic, InputError
        raise InputError(Diagnostic("--binding writes its files beside the kernel's, so it needs -o K.cu",
                                    hint="add -o kernel.cu"))
    from twill.pipeline import TimeLimitReached

    pending = None
    if source.endswith(".json"):
        from twill.fileio import load_schedule
        schedule = load_schedule(source)
        machine = _machine_for(schedule, gpu)
        check_file(schedule, machine, source)
    else:
        from twill.pipeline import solve

        from .common import need_gpu
        machine = need_gpu(gpu, "emit-cuda of a graph")
        graph = graph_of(source, flags)
        options = model_options(flags, swp_only=swp_only, time_limit=time_limit)
        try:
            schedule = solve(graph, machine, options, progress_printer(flags["quiet"]))
        except TimeLimitReached as exc:
            if exc.schedule is None:
                raise
            schedule, pending = exc.schedule, exc
    _write(schedule, machine, output, binding)
    if pending is not None:
        raise pending


def _machine_for(schedule, gpu: str | None):
    from twill.errors import Diagnostic, InputError
    from twill.machine import bundled_specs, load_machine

    if gpu is None:
        if schedule.machine not in bundled_specs():
            raise InputError(Diagnostic(f"the schedule was solved for machine '{schedule.machine}', which is not "
                                        f"a bundled spec ({', '.join(sorted(bundled_specs()))})",
                                        hint="pass the machine description it was solved with: --gpu PATH.yaml"))
        machine = load_machine(schedule.machine)
        if schedule.arch and schedule.arch != machine.arch:
            raise InputError(Diagnostic(f"the schedule says arch {schedule.arch}, but {schedule.machine} is "
                                        f"{machine.arch}", hint="solve it again for the machine you mean"))
        if schedule.machine_digest and schedule.machine_digest != machine.digest:
            raise InputError(Diagnostic(f"the schedule was solved with a machine description named "
                                        f"'{schedule.machine}' that is not the bundled {schedule.machine} "
                                        f"(its limits, units or op costs differ)",
                                        hint="pass the machine description it was solved with: --gpu PATH.yaml"))
        return machine
    machine = load_machine(gpu)
    if schedule.arch and machine.arch != schedule.arch:
        raise InputError(Diagnostic(f"the schedule was solved for {schedule.machine} ({schedule.arch}) but --gpu "
                                    f"{gpu} is {machine.arch}", hint="drop --gpu, or solve again for this machine"))
    return machine


def _write(schedule, machine, output, binding=None) -> None:
    from twill.emit import build_model
    from twill.emit.cuda import render
    from twill.fileio import write_atomic

    model = build_model(schedule, machine)
    text = render(model)
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
