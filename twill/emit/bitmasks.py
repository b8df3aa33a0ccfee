"""Comparison tiles held as bits: a comparison (ge gt le lt eq ne, with or without {scalar}) whose every
reader is a select's condition on the comparison's own role is held in `twill::Bits` (sm_90a), one bit an
element, rather than as a float fragment of 0s and 1s (32 registers a thread for a 64 x 64 tile over a
warpgroup, where the bits take one). The cost model already counts an i1 tile at one bit an element
(TensorType.bytes, liveness.py and registers.py read it): held as bits, the emitter now holds what the
model charges. The select reads its condition through the same `at` as before, so its code is unchanged.

(Why bits and not the comparison computed inside the select: the select runs where its other operand is
ready, after the wgmma that computes it, which may be after the comparison's operand, a loaded tile, has
been released to its producer; the schedule and the rings keep the comparison where it was.)"""
from __future__ import annotations

from ..ir import TensorType
from ..vocab import COMPARISONS
from .fragments import vector_kind


def held_as_bits(model) -> frozenset[str]:
    """The comparisons of `model`'s loop held as bits (see the module docstring): a rank-2 i1 register tile,
    no carry, read by at least one op and only as operand 0 (the condition) of selects on its role."""
    if not model.target.register_fragments:
        return frozenset()
    out = set()
    for op in model.graph.ops:
        t = op.type
        if op.opcode not in COMPARISONS or not _tile(t) or model.carry_of(op.name) is not None:
            continue
        uses = model.uses.get(op.name, ())
        role = model.op_role[op.name]
        if uses and all(model.ops[u.op].opcode == "select" and u.index == 0 and u.role == role for u in uses):
            out.add(op.name)
    return frozenset(out)


def _tile(t: TensorType | None) -> bool:
    return (t is not None and t.dtype == "i1" and t.space == "reg" and len(t.shape) == 2
            and vector_kind(t) is None)


def bits_type(t: TensorType, groups: int) -> str:
    """The C++ type of a warpgroup's share of comparison tile `t` held as bits (sm_90a's fragment layout)."""
    mb = t.shape[0] // (64 * groups)
    return f"twill::Bits<{mb}, {t.shape[1]}>"
