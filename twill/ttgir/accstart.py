"""An accumulator that starts from a value computed before the loop (docs/ttgir-import.md, section 5).

`addmm` starts its accumulator from a tile the kernel loads and scales before the loop
(``acc = tl.load(C) * beta``) and then only adds products to it (``acc = tl.dot(a, b, acc)``). A `.tir`
carry starts from a constant, but such a carry needs no other start: its last value is the start plus
the sum of the products, so the import starts it from 0 and adds the start in the epilogue, where the
ops that computed it before the loop (loads, elementwise arithmetic, conversions) are computed again.

A carry is *additive* when every iteration passes it, unread by anything else, through a chain of
mmas as their accumulator to the value it yields: a carry that is also rescaled (attention's
``acc * alpha``), compared or stored in the loop is not, and stays build.py's error.
"""
from __future__ import annotations

from dataclasses import dataclass

from .opnames import LOADS
from .parser import MOp
from .values import Const, Ref, Tile


@dataclass(frozen=True)
class Start:
    """Carry `carry`'s start, computed before the loop by `ops` (in program order) as SSA `ssa`."""

    carry: int
    ssa: str
    ops: tuple[MOp, ...]


ZERO = Const(0.0)


def additive(nodes, carry: int, yielded) -> bool:
    """Whether the loop only accumulates mma products into carry `carry` (module doc), whose value for
    the next iteration is `yielded`."""
    if not isinstance(yielded, Tile):
        return False
    cur = Ref("carry", carry)
    while cur != yielded.ref:
        users = [n for n in nodes if n.in_loop and cur in n.operands]
        if len(users) != 1:
            return False
        n = users[0]
        if n.kind != "mma" or len(n.args) < 3 or not isinstance(n.args[2], Tile) or n.args[2].ref != cur \
                or any(isinstance(a, Tile) and a.ref == cur for a in n.args[:2]):
            return False
        cur = Ref("node", n.index)
    return not any(n.in_loop and cur in n.operands for n in nodes)


def computed_before(ssa: str, before: list[MOp]) -> tuple[MOp, ...] | None:
    """The ops of `before` (the ops ahead of the loop in its block) that compute `ssa`, in program
    order, following float operands back to loads; None where `ssa` is no result of them."""
    made = {r: op for op in before for r in op.results}
    if ssa not in made:
        return None
    need, todo = set(), [ssa]
    while todo:
        name = todo.pop()
        op = made.get(name) or made.get(name.split("#")[0])
        if op is None or id(op) in need:
            continue
        need.add(id(op))
        if op.name not in LOADS:
            todo.extend(n for n, _ in op.operands())
    return tuple(op for op in before if id(op) in need)


def starts(nodes, carries, yields, before: list[MOp]) -> list[Start]:
    """The additive carries (module doc) whose start is a tile computed before the loop by `before`."""
    out = []
    for k, (c, y) in enumerate(zip(carries, yields)):
        init = _stored(nodes, c.init)
        if not isinstance(init, Tile) or init.ref.kind != "node" or nodes[init.ref.index].in_loop:
            continue
        ssa = nodes[init.ref.index].ssa
        ops = computed_before(ssa, before) if ssa else None
        if ops and additive(nodes, k, y):
            out.append(Start(k, ssa, ops))
    return out


def _stored(nodes, init):
    """What a carry starts from: through the copy into a tensor-memory accumulator (the tile stored
    into it), and through the first iteration Triton's pipeliner peeled ahead of the loop (an mma
    copy of the loop's own, same op and source position: its accumulator is the start; depipe.py
    drops the copy)."""
    loop_ops = {(n.mlir, n.pos) for n in nodes if n.in_loop and n.pos is not None}
    while isinstance(init, Tile) and init.ref.kind == "node":
        n = nodes[init.ref.index]
        if n.in_loop or not n.args:
            break
        if n.kind == "move":
            init = n.args[0]
        elif n.kind == "mma" and len(n.args) >= 3 and n.pos is not None and (n.mlir, n.pos) in loop_ops:
            init = n.args[2]
        else:
            break
    return init
