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

__all__ = ["EmitError", "KernelModel", "build_model", "emit_cuda"]


def emit_cuda(schedule: Schedule, machine: Machine) -> str:
    """The CUDA C++ file for `schedule` on `machine` (deterministic: same inputs, same bytes)."""
    from .cuda import render
    return render(build_model(schedule, machine))
