"""twill: optimal software pipelining and warp specialization for Tensor Core GPUs.

The command line (`twill solve`, `explain`, `emit-cuda`, `import`, `plot`) is a thin layer over
this package. The same steps from Python:

    from twill import emit_cuda, load_graph, load_machine, solve, SolveOptions
    from twill.verify import verify

    graph = load_graph("examples/attention_fwd_hopper.tir")   # or a Triton .ttgir
    machine = load_machine("h100")                             # a bundled name or a .yaml path
    schedule = solve(graph, machine, SolveOptions(time_limit=60))
    assert verify(schedule, graph, machine) == []              # every constraint family, in Python
    cuda = emit_cuda(schedule, machine)                        # the text of one .cu file

Errors are `twill.errors.TwillError`s (InputError for bad input, NoScheduleError, ...). The names
above are imported on first use, so `import twill` loads no solver. docs/architecture.md shows
the pipeline stage by stage.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

# The largest count any input may give (a machine description's warps, registers, bytes, units and depths, a .tir
# integer attribute, an integer option): 2^31 - 1, far past any GPU. A count of 2^63 reached CP-SAT as a coefficient
# it cannot hold (a TypeError from the solver), and a shared memory of 2^63 bytes overflowed into "no schedule
# exists" (fuzz42, session 42). Here, with no import, so that the CLI's options read it and `twill --help` stays fast.
MAX_COUNT = 2**31 - 1

_API = {
    "load_graph": "fileio",
    "load_machine": "machine",
    "solve": "pipeline",
    "SolveOptions": "pipeline",
    "Schedule": "schedule",
    "emit_cuda": "emit",
}
__all__ = sorted(_API) + ["__version__"]


def __getattr__(name: str):
    if name in _API:
        return getattr(importlib.import_module(f".{_API[name]}", __name__), name)
    raise AttributeError(f"module 'twill' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_API))
