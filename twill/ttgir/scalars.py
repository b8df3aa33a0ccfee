"""Views, index arithmetic, constants and elementwise ops: what a value is, seen through each."""
from __future__ import annotations

import math
import struct
from dataclasses import replace

from ..ir import TensorType
from .opnames import COMMUTATIVE, ELEMENTWISE, SLOTS, TRANSPOSES, int_attr
from .parser import MOp
from .state import Lowering
from .values import INDEXED, SCALAR, Buf, Const, Indexed, Tile


def view(lw: Lowering, op: MOp) -> None:
    vals = lw.operands(op)
    val = vals[0] if vals else SCALAR
    if op.name in TRANSPOSES and isinstance(val, (Tile, Buf)):
        val = replace(val, flip=not val.flip)
    if op.name == "tt.expand_dims" and isinstance(val, Tile) and int_attr(op, "axis") == 0 \
            and len(lw.type_of(val.ref).shape) == 1:
        val = replace(val, column=True)
    if op.name in SLOTS and isinstance(val, Buf):
        _slot(lw, op, val)
    if isinstance(val, Buf):
        lw.views.setdefault(val.index, []).extend(op.results)
    lw.bind(op, val)



def _slot(lw: Lowering, op: MOp, buf: Buf) -> None:
    """``ttg.memdesc_index %buf[%i]`` of a buffer with a leading buffer dimension (Triton's
    multi-buffering: one slot per stage in flight): every slot stands for the same tile, so the
    buffer is the one tile a slot holds, and which slot an access uses is dropped."""
    _, outs = lw.signature(op)
    name, mtype, span = lw.buffers[buf.index]
    if outs and outs[0].kind == "memdesc" and len(outs[0].shape) == len(mtype.shape) - 1 \
            and outs[0].shape == mtype.shape[1:]:
        lw.buffers[buf.index] = (name, replace(mtype, shape=outs[0].shape), span)


def scalar(lw: Lowering, op: MOp) -> None:
    lw.operands(op)  # still checks that they are defined
    lw.bind(op, INDEXED if op.name == "tt.make_range" else SCALAR)


def no_op(lw: Lowering, op: MOp) -> None:
    lw.bind(op, SCALAR)


def constant(lw: Lowering, op: MOp) -> None:
    toks = op.tokens
    ins, _ = lw.signature(op)
    elem = ins[0].elem if ins else "i1"
    i = 0
    if toks and toks[0].is_("{"):  # an attribute dict first ({async_task_id = ...} on Hopper partitions)
        depth = 0
        for i, t in enumerate(toks):
            depth += t.is_("{") - t.is_("}")
            if depth == 0:
                break
        i += 1
    if i + 2 < len(toks) and toks[i].is_("dense") and toks[i + 1].is_("<"):
        i += 2
    lw.bind(op, Const(_literal(toks[i].text, elem)) if i < len(toks) else SCALAR)


def _literal(text: str, elem: str) -> float | bool | None:
    """``0.000000e+00``, ``0xFF800000`` (the bits of -inf as f32), ``true`` -> a Python value."""
    if text in ("true", "false"):
        return text == "true"
    try:
        if text.lower().startswith("0x"):
            bits = int(text, 16)
            if elem == "f32":
                return struct.unpack(">f", bits.to_bytes(4, "big"))[0]
            if elem == "f16":
                return struct.unpack(">e", bits.to_bytes(2, "big"))[0]
            if elem == "bf16":
                return struct.unpack(">f", (bits << 16).to_bytes(4, "big"))[0]
            if elem == "f64":
                return struct.unpack(">d", bits.to_bytes(8, "big"))[0]
            return bits
        return float(text)
    except (ValueError, OverflowError):
        return None


def elementwise(lw: Lowering, op: MOp) -> None:
    vals = lw.operands(op)
    if not any(isinstance(v, Tile) for v in vals):
        lw.bind(op, INDEXED if any(isinstance(v, Indexed) for v in vals) else SCALAR)
        return
    if any(isinstance(v, Indexed) for v in vals):
        lw.note(op, f"'{op.name}' reads a tensor computed from element indices (a mask, say), which a "
                    "tile-loop graph cannot express: the op is imported without it", unknown=True,
                hint="a .tir op computes the same function of every element; a causal or boundary mask "
                     "of the tile is not imported (emit-cuda masks only a ragged last tile)")
    ins, outs = lw.signature(op)
    mtype = outs[0] if outs else ins[-1] if ins else None
    if mtype is None:
        raise lw.src.error(f"'{op.name}' has no type", op.head)
    tt = _result_tile(lw, mtype, op)  # on a one-element tile (a reduction to a scalar): a scalar
    if op.name in ("arith.cmpf", "arith.cmpi"):
        tt = TensorType("i1", tt.shape)
    lw.bind(op, lw.node(ELEMENTWISE[op.name], op, vals, tt, attrs=_scalar_operand(op, vals)))



def _scalar_operand(op: MOp, vals: list) -> tuple:
    """A splat constant that is the second operand of a binary op on one tile (or either, for a
    commutative one) as the `scalar` attribute the fusion step reads (a dequant's shift and mask)."""
    tiles = [v for v in vals if isinstance(v, Tile)]
    if len(vals) != 2 or len(tiles) != 1 or not (isinstance(vals[1], Const) or op.name in COMMUTATIVE):
        return ()
    const = next((v for v in vals if isinstance(v, Const)), None)
    value = const.value if const is not None else None
    if value is None or isinstance(value, bool) or not math.isfinite(value):
        return ()
    return (("scalar", int(value) if float(value).is_integer() else value),)



def _result_tile(lw: Lowering, mtype, op: MOp) -> TensorType:
    """The tile type of a result, a scalar written as a one-element tile."""
    if mtype.kind == "scalar":
        from .types import DTYPES
        if mtype.elem not in DTYPES:
            raise lw.src.error(f"'{op.name}' makes a '{mtype.elem}', which the .tir format has no dtype for", op.head)
        return TensorType(DTYPES[mtype.elem], (1,), "reg")
    return lw.tile_type(mtype, op)



def yield_(lw: Lowering, op: MOp) -> None:
    lw.yielded = lw.operands(op)

