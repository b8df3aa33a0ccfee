"""Loops in sequence: what the chosen loop reads of an earlier loop's results (docs/ttgir-import.md,
section 2, "Loops in sequence").

The walk to the chosen loop passes the loops before it (`generic.nested`). Each tile such a loop
returns (an iter_arg's final value), and each buffer its body writes (sm_100's tensor-memory
accumulator, read after the loop with `ttng.tmem_load`), becomes a *stand-in*: an `arg` node whose
`handover` attribute names the loop (its head's line and column) and the result index or buffer.
A conversion of a stand-in before the chosen loop (`arith.truncf` to f16) or its copy into shared
memory (`ttg.local_alloc`) is the same stand-in in the new dtype or space: the earlier loop writes
its carry in that dtype (its `{output = ...}`), and the later loop reads it as an input. Anything
else computed from a stand-in is what it was before (a prologue of the later loop, or an error).
"""
from __future__ import annotations

import re

from ..errors import InputError
from ..ir import TensorType
from .opnames import ELEMENTWISE
from .parser import MOp
from .types import last_top_level
from .values import SCALAR, TOKEN, Buf, Tile

# ops that write a buffer, and the operand (by position among the op's SSA operands) they write
WRITES = {"ttng.tc_gen5_mma": 2, "ttng.tc_gen5_mma_scaled": 2, "ttng.tmem_store": 1, "ttg.local_store": 1,
          "ttng.tmem_copy": 1}
KEY = "handover"


def loop_key(loop: MOp) -> str:
    """The loop a stand-in comes from, as the key names it: its head's line and column."""
    return f"{loop.head.line}:{loop.head.col}"


def earlier_loop(lw, op: MOp) -> None:
    """Bind the results of `op`, a loop before the chosen one: tiles become stand-ins, the rest
    scalars or tokens; each buffer its body writes holds a stand-in of its final content, the others
    are unknown (as any op before the loop with regions leaves them)."""
    arrow = last_top_level(op.tokens, "->")
    try:
        rtypes = lw.types.read_list(op.tokens, arrow + 1)[0] if arrow is not None else []
    except InputError:  # a type the reader does not know: no tile, as before
        rtypes = []
    args = _iter_args(op)
    for i, name in enumerate(op.results):
        rtype = rtypes[i] if i < len(rtypes) else None
        tile = rtype.tile() if rtype is not None and rtype.is_tile else None
        if tile is not None:  # named after its iter_arg, as the earlier loop's carry is (after the loop's result
            # where the iter_arg has MLIR's own name, %arg8: Triton 3.6 names no loop argument; after each
            # result's own name where the loop's results have theirs, as one row a program's rewrite names them)
            own = len(op.results) > 1 and "#" not in name
            arg = args[i] if i < len(args) and not own and not re.fullmatch(r"arg\d+", args[i]) else name.split("#")[0]
            lw.env[name] = _stand_in(lw, op, tile, f"{loop_key(op)}/r{i}", arg)
        else:
            lw.env[name] = TOKEN if rtype is not None and rtype.kind == "token" else SCALAR
    written = _written(lw, op)
    for b in list(lw.content):
        name, mtype, span = lw.buffers[b]
        tile = mtype.tile() if b in written else None
        lw.content[b] = _stand_in(lw, op, tile, f"{loop_key(op)}/b{name}", name) if tile is not None else SCALAR


def convert(lw, op: MOp, vals: list) -> bool:
    """A conversion of a stand-in before the chosen loop: the stand-in in the converted dtype."""
    tiles = [v for v in vals if isinstance(v, Tile)]
    if ELEMENTWISE.get(op.name) != "conv" or len(tiles) != 1 or source(lw, tiles[0]) is None:
        return False
    ins, outs = lw.signature(op)
    mtype = outs[0] if outs else None
    tile = mtype.tile() if mtype is not None and mtype.is_tile else None
    if tile is None:
        return False
    old = lw.type_of(tiles[0].ref)
    lw.bind(op, _stand_in(lw, op, TensorType(tile.dtype, tile.shape, old.space), source(lw, tiles[0]),
                          op.results[0] if op.results else None))
    return True


def move(lw, val, space: str, op: MOp):
    """A stand-in copied into `space` (`ttg.local_alloc` of it): the stand-in there; else None."""
    key = source(lw, val) if isinstance(val, Tile) else None
    if key is None:
        return None
    t = lw.type_of(val.ref)
    return _stand_in(lw, op, TensorType(t.dtype, t.shape, space), key, lw.nodes[val.ref.index].ssa)


def source(lw, tile: Tile) -> str | None:
    if tile.ref.kind != "node" or lw.in_loop:
        return None
    node = lw.nodes[tile.ref.index]
    return dict(node.attrs).get(KEY) if node.kind == "arg" else None


def _stand_in(lw, op: MOp, tile: TensorType, key: str, ssa: str | None) -> Tile:
    return lw.node("arg", op, [], tile, ssa, attrs=((KEY, key),))


def _written(lw, loop: MOp) -> set[int]:
    """The buffers (by index) an op in `loop`'s body writes, named directly (not through a view)."""
    out, todo = set(), [loop]
    while todo:
        o = todo.pop()
        at = WRITES.get(o.name)
        if at is not None:
            operands = o.operands()
            if at < len(operands):
                val = lw.env.get(operands[at][0])
                if isinstance(val, Buf):
                    out.add(val.index)
        for region in o.regions:
            for block in region:
                todo.extend(block.ops)
    return out


def _iter_args(loop: MOp) -> list[str]:
    """The SSA names of a loop's iter_args, in order (``iter_args(%m_38 = %init, ...)``)."""
    toks, out = loop.tokens, []
    i = next((k for k, t in enumerate(toks) if t.is_("iter_args")), None)
    if i is None:
        return out
    for k in range(i + 1, len(toks) - 1):
        if toks[k].is_(")"):
            break
        if toks[k].kind == "ssa" and toks[k + 1].is_("="):
            out.append(toks[k].text[1:])
    return out
