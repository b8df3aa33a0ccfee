"""A loop extent that is not a multiple of the tile: what the last, partial tile needs.

`Problem::loop_extent` lets a caller run the loop over any number of elements (keys, a GEMM's K):
the loop then takes ceil(extent / step) iterations and the last tile is partial. TMA fills the
rows past the end of a tensor with zeros, which is already right wherever they are summed: a
contraction (mma) or a rowsum adds nothing for them. A maximum or an exponential is not: a zero
key would take part in a row's maximum, and exp2 of it is not 0. So each register value that runs
along the loop and is read by rowmax or exp2 is masked in place on the last iteration before its
first such reader: its elements past the extent become -inf, which rowmax skips and exp2 turns
into 0 (FlashAttention's key mask). That is sound only where every reader of the value treats an
absent element as -inf; anywhere else the kernel refuses a partial tile (`Ragged.why_not`, which
emit-cuda writes into the file and `launch` enforces) rather than compute something else.
"""
from __future__ import annotations

from dataclasses import dataclass

MAX_LIKE = ("rowmax", "exp2")  # readers (of operand 0) for which an absent element is -inf


@dataclass(frozen=True)
class Ragged:
    step: int  # elements of the loop axis one iteration covers (0: no loaded tile runs along it)
    masks: tuple[tuple[str, str, int], ...]  # (op, value, dim): before op, value's elements past the extent become -inf
    why_not: str  # "" when a partial last tile is supported, else the reason

    @property
    def mask_at(self) -> dict[str, tuple[str, int]]:
        return {op: (value, dim) for op, value, dim in self.masks}


def plan(model) -> Ragged:
    """How `model`'s kernel handles a partial last tile (a pure function of the model)."""
    from .model import value_axis
    axis = value_axis(model.graph, model.mma_shape)
    steps = sorted({t.tile[d] for t in model.tensors if t.kind == "load" for d in range(2) if t.axes[d] == "loop"})
    if not steps:
        return Ragged(0, (), "no loaded tile runs along the loop")
    if len(steps) > 1:
        return Ragged(0, (), f"the loaded tiles cover {' and '.join(map(str, steps))} elements of the loop each")
    step = steps[0]
    order = {op.name: i for i, op in enumerate(model.graph.ops)}
    masks = []
    for value in sorted(model.uses):
        info = model.values.get(value)
        if info is None:
            continue
        dims = [d for d in range(len(info.type.shape)) if axis(value, d) == "loop"]
        readers = [u for u in model.uses[value] if model.ops[u.op].opcode in MAX_LIKE and u.index == 0]
        if not dims or not readers:
            continue
        first = min(readers, key=lambda u: (model.sched[u.op].start, order[u.op]))
        reader = f"{model.ops[first.op].opcode} {first.op}"

        def refuse(why: str) -> Ragged:
            return Ragged(step, (), f"{reader} reads {value}, which runs along the loop, {why}")
        if info.kind == "input" or model.is_load(value):
            return refuse("straight from memory: the zero fill past the extent would take part")
        others = sorted({u.op for u in model.uses[value]} - {u.op for u in readers})
        if others:
            return refuse(f"and so does {others[0]}, for which an absent element is not -inf")
        if any(u.distance for u in model.uses[value]):
            return refuse("in a later iteration")
        if info.type.space != "reg" or len(info.type.shape) != 2 or len(dims) != 1 or model.blackwell:
            return refuse("not as a register fragment of sm_90a, which is all the mask is emitted for")
        if any(u.role != info.role for u in readers):
            return refuse("in another role than the one computing it")
        masks.append((first.op, value, dims[0]))
    return Ragged(step, tuple(sorted(masks)), "")
