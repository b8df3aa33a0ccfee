"""Schedule -> CUDA C++ (`twill emit-cuda`).

`emit_cuda(schedule, machine)` returns the text of one .cu file: a fixed runtime that owns the
synchronisation (runtime.py), the kernel's budgets and shared memory, one device function per warp
role whose body follows the schedule window by window (program.py, cuda.py, roles.py), per-opcode
code from tables (ops.py), and the kernel skeleton and host launcher from templates (kernel.py,
host.py, cuda_runtime/*.tpl). The model of the kernel (roles, tensors, layouts) is model.py, built
by build.py for one Target (target.py: all that differs between sm_90a and sm_100a). Nothing here
runs a solver: a schedule goes in, text comes out.
"""
from __future__ import annotations

from ..machine import Machine
from ..schedule import Schedule
from .build import build_model
from .model import EmitError, KernelModel

__all__ = ["EmitError", "KernelModel", "build_model", "emit_cuda", "emitted"]


def emit_cuda(schedule: Schedule, machine: Machine) -> str:
    """The CUDA C++ file for `schedule` on `machine` (deterministic: same inputs, same bytes)."""
    return emitted(schedule, machine)[1]


def emitted(schedule: Schedule, machine: Machine, **options) -> tuple[KernelModel, str]:
    """(model, CUDA text) of the kernel emit-cuda writes for `schedule`: its loop split over the grid by columns where
    it splits (colsplit.py: no carry, or carries that are folds, whose partials the binding combines: a
    sequence's K.py, or the kernel's own binding; or the kernel itself, where its epilogue reads them: fixup.py),
    else, or where the emitter refuses the split (a store along
    the loop without TMA; a fold's carry not written out), the loop as the schedule has it. The split kernel's
    Problem::splits defaults to 1: called without the binding, it is the unsplit kernel. `options`: build_model's."""
    if schedule.graph_tir:
        from ..tir import parse_tir
        from .binding import fold_outputs
        from .colsplit import column_graph, fixed_up
        from .cuda import Renderer, render
        split = column_graph(parse_tir(schedule.graph_tir, f"<graph of {schedule.kernel}>"))
        if split is not None:
            try:
                model = build_model(schedule, machine, graph=split, **options)
                if fixed_up(split) or fold_outputs(Renderer(model)) is not None:
                    return model, render(model)
            except EmitError:
                pass
    from .cuda import render
    model = build_model(schedule, machine, **options)
    return model, render(model)
