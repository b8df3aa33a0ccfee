"""Ops the importer does not know, or cannot express as one tile op (control flow in the body):
one `generic` node each, with a warning (an error under ``strict``)."""
from __future__ import annotations

from ..errors import InputError
from .opnames import opcode_token
from .parser import MOp
from .state import Lowering
from .types import last_top_level
from .values import SCALAR, Tile


def generic(lw: Lowering, op: MOp, why: str | None = None) -> None:
    """An op the importer does not know (or cannot express): one `generic` node with its tile operands."""
    vals = [lw.read(v) for v in lw.operands(op)]
    try:
        ins, outs = lw.signature(op)
    except InputError:
        ins, outs = [], None
    rtypes = outs if outs is not None else ins[-1:] * len(op.results)
    tiles = [t.tile() for t in rtypes if t.is_tile]
    tile_type = next((t for t in tiles if t is not None), None)
    opcode = opcode_token(op.name)
    if not any(isinstance(v, Tile) for v in vals) and tile_type is None:
        lw.note(op, f"unknown TTGIR op '{op.name}' on scalars only: dropped", unknown=True)
        lw.bind(op, SCALAR)
        return
    what = f"'{op.name}' ({why})" if why else f"unknown TTGIR op '{op.name}'"
    lw.note(op, f"{what}: imported as generic op '{opcode}'", unknown=True,
            hint=f"describe '{opcode}' in the machine file's ops, or give it {{cycles = N, unit = NAME}} in the .tir")
    tile = lw.node("generic", op, vals, tile_type, op.results[0] if op.results and tile_type else None)
    for name, rtype in zip(op.results, rtypes + [None] * len(op.results)):
        lw.env[name] = tile if rtype is not None and rtype.is_tile else SCALAR


def nested(lw: Lowering, op: MOp) -> None:
    """A loop or branch inside the loop body cannot be expressed as one tile op: it becomes one
    generic op that reads every tile its regions use from outside and makes the tiles it returns
    (``%r = scf.if %c -> (tensor<...>)``). Before the loop (an earlier loop, say), its effect on
    buffers is unknown: they no longer hold a known constant."""
    if not lw.in_loop:
        if op.name == "scf.for":  # an earlier loop: its results are stand-ins (loops in sequence)
            from .handover import earlier_loop
            earlier_loop(lw, op)
            return
        for b in lw.content:
            lw.content[b] = SCALAR
        lw.bind(op, SCALAR)
        return
    arrow = last_top_level(op.tokens, "->")
    try:
        rtypes = lw.types.read_list(op.tokens, arrow + 1)[0] if arrow is not None else []
    except InputError:
        rtypes = []
    vals = [lw.read(lw.value(name, tok)) for name, tok in _captured(lw, op)]
    tile_type = next((t.tile() for t in rtypes if t.is_tile and t.tile() is not None), None)
    what = f"'{op.name}' (control flow inside the loop body is not imported)"
    if not any(isinstance(v, Tile) for v in vals) and tile_type is None:  # index arithmetic: folded away
        lw.bind(op, SCALAR)
        return
    opcode = opcode_token(op.name)
    lw.note(op, f"{what}: imported as generic op '{opcode}'", unknown=True,
            hint=f"describe '{opcode}' in the machine file's ops, or give it {{cycles = N, unit = NAME}} in the .tir")
    tile = lw.node("generic", op, vals, tile_type, op.results[0] if op.results and tile_type else None)
    for name, rtype in zip(op.results, rtypes + [None] * len(op.results)):
        lw.env[name] = tile if rtype is not None and rtype.is_tile else SCALAR


def _captured(lw: Lowering, op: MOp) -> list[tuple[str, object]]:
    """The SSA values `op` and the ops in its regions use that are defined outside it, once each."""
    inner, uses = set(), {}
    todo = [op]
    while todo:
        o = todo.pop()
        inner.update(o.results)
        for name, tok in o.operands():
            uses.setdefault(name, tok)
        for region in o.regions:
            for block in region:
                inner.update(name for name, _ in block.args)
                todo.extend(block.ops)
    return [(n, t) for n, t in uses.items() if n not in inner and n.split("#")[0] not in inner
            and (n in lw.env or n + "#0" in lw.env)]
