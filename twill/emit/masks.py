"""The `mask` op's emitter (twill/vocab.py): element (r, c) of x where rows*r + cols*c + offset PRED 0,
else y's (or the `fill` constant), r and c the element's row and column in the op's tile.

The runtime's `twill::op_mask<PRED, ROWS, COLS, OFFSET>(out, x, y, row0)` (cuda_runtime/mask_sm90.cuh,
mask_sm100.cuh, in the kernels that have a mask: `runtime`) computes each element's position from its fragment layout; `row0` is the first row
of the rows this warpgroup holds, so a tile split over warpgroups is masked at its own rows.
"""
from __future__ import annotations

import math

from ..errors import Diagnostic
from . import splits
from .model import EmitError

RUNTIME = {"mask": {"sm_90a": "mask_sm90.cuh", "sm_100a": "mask_sm100.cuh"},  # opcode -> its headers, by target
           "position": {"sm_90a": "mask_sm90.cuh", "sm_100a": "mask_sm100.cuh"},
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


def row_bounds(model) -> bool:
    """Whether the kernel computes a `rem`, a position of one value a row or a tail_mask with a per-row bound: the
    ops of rowbound_sm*.cuh, included in those kernels alone."""
    graph = model.graph
    return any(op.opcode == "rem" or (op.opcode == "position" and op.type is not None and len(op.type.shape) == 1)
               or (op.opcode == "tail_mask" and len(op.operands) == 2)
               for op in graph.ops + graph.epilogue.ops + graph.prologue.ops)


def runtime(model) -> list[str]:
    """The target's headers of the mask and join ops, for a kernel that has them (else nothing:
    other kernels keep their text)."""
    from .runtime import _part
    graph = model.graph
    used = {op.opcode for op in graph.ops + graph.epilogue.ops + graph.prologue.ops}
    parts = dict.fromkeys(RUNTIME[opcode][model.target.arch] for opcode in RUNTIME if opcode in used)
    return [_part(p).lstrip("\n") for p in parts]


def position_origin(model, op, iteration: str) -> str:
    """The C++ expression of a position's constant part, P*g0 + Q*l0 + K (twill/vocab.py): g0 the
    first row in memory of its dimension along the grid (the tied tensor's placement,
    tensors.grid_origin), l0 = iteration * kLoopStep (offset by causal_first where a causal loop
    starts per tile). An EmitError, located, where the tile has no such dimension."""
    from .ragged import causal
    from .tensors import grid_origin, value_axis
    m = model
    grid, loop, offset = (int(op.attr(k, 0)) for k in ("grid", "loop", "offset"))
    axis = value_axis(m.graph, m.mma_shape)
    axes = [axis(op.name, d) for d in range(len(op.type.shape))]  # (a rank-1 position: one value a row)
    terms = [str(offset)] if offset or not (grid or loop) else []

    def refuse(why: str, hint: str) -> EmitError:
        return EmitError(Diagnostic(f"op '{op.name}': {why}", op.span, hint))
    if grid:
        dims = [d for d in range(len(axes)) if axes[d] in ("m", "n")]
        origin = grid_origin(m.graph, m.mma_shape, m.tensors, op.name, dims[0]) if len(dims) == 1 else None
        if origin is None:
            raise refuse(f"grid = {grid}, but no one dimension of the tile follows the grid's rows or columns "
                         f"(its dimensions run along {' and '.join(map(str, axes))}) as an input or loaded tile does",
                         "a position's grid term is the first row of a tile dimension tied, through the ops, "
                         "to an input or load placed along the grid (attention's query rows)")
        terms.append(f"{grid} * ({origin})")
    if loop:
        if "loop" not in axes:
            raise refuse(f"loop = {loop}, but no dimension of the tile runs along the loop (they run along "
                         f"{' and '.join(map(str, axes))})", "a position's loop term is the first element along the loop "
                         "of a tile dimension that runs along it (attention's keys)")
        if m.ragged.step <= 0:
            raise refuse(f"loop = {loop}, but no loaded tile runs along the loop: its step is unknown",
                         "the loop term needs a loaded tile along the loop (attention's K)")
        first = "causal_first(args, tile) + " if causal(m).starts else splits.first(m)
        terms.append(f"{loop} * (({first}{iteration}) * kLoopStep)")
    return " + ".join(terms)


def emit_position(call) -> list[str]:
    """position {rows, cols, grid, loop, offset}: each element of a register tile from its row and
    column in the tile (its fragment layout: op_position of cuda_runtime/mask_sm*.cuh) plus the
    tile's origin (position_origin)."""
    op = call.op
    if call.out is None or call.out.where != "reg" or len(call.out.type.shape) not in (1, 2):
        raise EmitError(Diagnostic(f"op '{op.name}': emit-cuda computes a position into a register tile of rank 2 "
                                   "(or a vector of one value a row)",
                                   op.span, "give the position a result in registers (@reg)"))
    rows, cols = int(op.attr("rows")), int(op.attr("cols"))
    base = position_origin(call.model, op, call.iteration or "0")
    return [f"twill::op_position<{rows}, {cols}>({call.out.expr}, {base}, {call.row0});"]
