"""The `mask` op's emitter (twill/vocab.py): element (r, c) of x where rows*r + cols*c + offset PRED 0,
else y's (or the `fill` constant), r and c the element's row and column in the op's tile.

The runtime's `twill::op_mask<PRED, ROWS, COLS, OFFSET>(out, x, y, row0)` (cuda_runtime/mask_sm90.cuh,
mask_sm100.cuh, in the kernels that have a mask: `runtime`) computes each element's position from its fragment layout; `row0` is the first row
of the rows this warpgroup holds, so a tile split over warpgroups is masked at its own rows.
"""
from __future__ import annotations

import math

from ..errors import Diagnostic
from .model import EmitError

RUNTIME = {"mask": {"sm_90a": "mask_sm90.cuh", "sm_100a": "mask_sm100.cuh"},  # opcode -> its headers, by target
           "join": {"sm_90a": "join_sm90.cuh", "sm_100a": "join_sm100.cuh"}}
PRED_CODES = {"eq": 0, "ne": 1, "lt": 2, "le": 3, "gt": 4, "ge": 5}  # twill::index_holds<PRED>


def fill_literal(value: float) -> str:
    if math.isinf(value):
        return "-INFINITY" if value < 0 else "INFINITY"
    return f"{float(value)!r}f".replace("e+", "e")


def emit_mask(call) -> list[str]:
    from .ops import _registers
    op = call.op
    if call.out is None or call.out.where != "reg" or len(call.out.type.shape) != 2:
        raise EmitError(Diagnostic(f"op '{op.name}': emit-cuda computes a mask into a register tile of rank 2",
                                   op.span, "give the mask a result in registers (@reg)"))
    lines, names = _registers(call)
    if len(names) == 1:
        names.append(fill_literal(float(op.attr("fill"))))
    params = f"{PRED_CODES[op.attr('pred')]}, {int(op.attr('rows'))}, {int(op.attr('cols'))}, {int(op.attr('offset'))}"
    return lines + [f"twill::op_mask<{params}>({', '.join([call.out.expr] + names)}, {call.row0});"]


def runtime(model) -> list[str]:
    """The target's headers of the mask and join ops, for a kernel that has them (else nothing:
    other kernels keep their text)."""
    from .runtime import _part
    graph = model.graph
    used = {op.opcode for op in graph.ops + graph.epilogue.ops + graph.prologue.ops}
    return [_part(RUNTIME[opcode][model.target.arch]).lstrip("\n") for opcode in RUNTIME if opcode in used]
