"""Turn lowered tile nodes into the ops a scheduler should see.

Four rewrites run in order over the loop's nodes, then the survivors are grouped:

1. `merge_conversions`: a dtype conversion (``arith.truncf`` of P to f16) whose producer is
   elementwise becomes part of that producer: the producer's result takes the narrower dtype and every
   consumer reads it (the exp2 that makes P is what writes f16 P).
2. `fold_moves`: a copy of a register tile into shared or tensor memory (``ttng.tmem_store``,
   ``ttg.local_alloc`` of a computed tile) whose producer is elementwise and has no other consumer folds
   into the producer, whose result now lives in that memory. Other copies stay, as `convert` ops.
3. `inline_unary`: a cheap elementwise op on one tile (``qk * scale``, a select with an index mask)
   read by several elementwise consumers is recomputed inside each of them rather than kept as an op.
4. `group`: a chain of elementwise ops fuses into one op. A producer with exactly one consumer (and not
   yielded) fuses into that consumer when both are elementwise and the group keeps at most one anchor
   (exp2, rowmax, rowsum). A group's opcode is its anchor's; without one: `rescale` for a multiply or
   divide by a broadcast lower-rank tile, `convert` for conversions only, else the root op's
   arithmetic (`mul`, `add`, `sub`, `max`, `select`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import Diagnostic, Span
from ..ir import TensorType
from .lower import opcode_token
from .values import Lowered, Node, Note, Ref, Tile

FUSABLE = {"ew", "conv", "exp2", "rowmax", "rowsum", "causal_mask"}
ANCHORS = {"exp2", "rowmax", "rowsum", "causal_mask"}
FIXED_OPCODES = {"load": "load", "mma": "mma", "store": "store", "move": "convert"}
ARITH_OPCODES = {
    "arith.mulf": "mul", "arith.muli": "mul", "arith.addf": "add", "arith.addi": "add",
    "arith.subf": "sub", "arith.subi": "sub", "arith.maxnumf": "max", "arith.maximumf": "max",
    "arith.maxsi": "max", "arith.maxui": "max", "arith.select": "select",
}
RESCALE_OPS = {"arith.mulf", "arith.divf"}


@dataclass(frozen=True)
class Body:
    """Nodes by index (None once rewritten away) and the value yielded for each carry."""

    nodes: tuple[Node | None, ...]
    yields: tuple[object, ...]
    carry_types: tuple[TensorType, ...]

    def live(self):
        return [n for n in self.nodes if n is not None and n.in_loop]

    def node(self, ref: Ref) -> Node | None:
        return self.nodes[ref.index] if ref.kind == "node" else None

    def consumers(self) -> dict[int, list[int]]:
        """node index -> the in-loop nodes that read it (each once), in order."""
        out: dict[int, list[int]] = {}
        for n in self.live():
            for ref in dict.fromkeys(n.operands):
                if ref.kind == "node":
                    out.setdefault(ref.index, []).append(n.index)
        return out

    def yielded(self) -> set[int]:
        return {y.ref.index for y in self.yields if isinstance(y, Tile) and y.ref.kind == "node"}


def _substitute(body: Body, alias: dict[int, Ref], retype: dict[int, TensorType]) -> Body:
    """Drop the aliased nodes, point their readers at what they alias, and apply new types."""
    def resolve(ref: Ref) -> Ref:
        while ref.kind == "node" and ref.index in alias:
            ref = alias[ref.index]
        return ref

    nodes = []
    for n in body.nodes:
        if n is None or n.index in alias:
            nodes.append(None)
            continue
        ops = tuple(resolve(r) for r in n.operands)
        nodes.append(replace(n, operands=ops, type=retype.get(n.index, n.type)))
    yields = tuple(Tile(resolve(y.ref)) if isinstance(y, Tile) else y for y in body.yields)
    return Body(tuple(nodes), yields, body.carry_types)


def _in_loop_node(body: Body, ref: Ref) -> Node | None:
    node = body.node(ref)
    return node if node is not None and node.in_loop else None


def merge_conversions(body: Body) -> Body:
    """Rewrite 1: a conversion of an elementwise op's result becomes that op's result dtype."""
    alias, retype = {}, {}
    for n in body.live():
        producer = _in_loop_node(body, n.operands[0]) if n.kind == "conv" and len(n.operands) == 1 else None
        if producer is None or producer.kind not in FUSABLE - {"rowmax", "rowsum"} or producer.index in retype:
            continue
        retype[producer.index] = replace(producer.type, dtype=n.type.dtype)
        alias[n.index] = n.operands[0]
    return _substitute(body, alias, retype)


def fold_moves(body: Body) -> Body:
    """Rewrite 2: a copy into memory that is an elementwise op's only reader moves that op's result."""
    consumers, yielded = body.consumers(), body.yielded()
    alias, retype = {}, {}
    for n in body.live():
        producer = _in_loop_node(body, n.operands[0]) if n.kind == "move" else None
        if (producer is None or producer.kind not in FUSABLE or consumers.get(producer.index) != [n.index]
                or producer.index in yielded):
            continue
        retype[producer.index] = replace(producer.type, space=n.type.space)
        alias[n.index] = n.operands[0]
    return _substitute(body, alias, retype)


def inline_unary(body: Body) -> Body:
    """Rewrite 3: a one-tile elementwise op read only by elementwise ops is recomputed in each,
    until none is left (``qk * scale + c`` is two of them: inlining the add leaves the multiply
    with its readers)."""
    while True:
        consumers, yielded = body.consumers(), body.yielded()
        alias = {}
        for n in body.live():
            readers = consumers.get(n.index, [])
            if (n.kind == "ew" and len(n.operands) == 1 and len(readers) >= 2 and n.index not in yielded
                    and all(body.nodes[r].kind in FUSABLE for r in readers)):
                alias[n.index] = n.operands[0]
        if not alias:
            return body
        body = _substitute(body, alias, {})


@dataclass(frozen=True)
class Group:
    """One graph op: `members` (node indices) fused, `root` the one whose result the group yields."""

    root: int
    members: tuple[int, ...]
    opcode: str
    operands: tuple[Ref, ...]
    type: TensorType | None
    span: Span
    attrs: tuple[tuple[str, object], ...] = ()  # the root node's .tir attributes


def group(body: Body) -> tuple[list[Group], list[Note]]:
    """Rewrite 4: fuse single-reader elementwise chains (one anchor at most); one Group per graph op,
    in program order of their roots, and a note for each chain no opcode describes."""
    consumers, yielded = body.consumers(), body.yielded()
    owner: dict[int, int] = {}  # member -> root
    members: dict[int, list[int]] = {}
    for n in body.live():
        owner[n.index], members[n.index] = n.index, [n.index]
        if n.kind not in FUSABLE:
            continue
        for ref in n.operands:
            p = _in_loop_node(body, ref)
            if (p is None or p.kind not in FUSABLE or consumers.get(p.index) != [n.index] or p.index in yielded
                    or owner[p.index] == n.index):
                continue
            mine, theirs = members[n.index], members[owner[p.index]]
            if _anchors(body, mine) + _anchors(body, theirs) > 1:
                continue
            root = owner[p.index]
            for m in theirs:
                owner[m] = n.index
            members[n.index] = sorted(mine + theirs)
            del members[root]
    groups, notes = [], []
    for root in sorted(members):
        idx = members[root]
        inside = set(idx)
        outside = [r for m in idx for r in body.nodes[m].operands if not (r.kind == "node" and r.index in inside)]
        operands = tuple(outside if len(idx) == 1 else dict.fromkeys(outside))  # a fused chain reads each once
        operands = _reduced_first(body, idx, operands)
        node = body.nodes[root]
        opcode, note = _opcode(body, idx, operands)
        if note:
            notes.append(note)
        groups.append(Group(root, tuple(idx), opcode, operands, node.type, node.span, node.attrs))
    return groups, notes


def _reduced_first(body: Body, idx: list[int], operands: tuple[Ref, ...]) -> tuple[Ref, ...]:
    """A fused rowmax / rowsum reads the tile it reduces first (`rowsum p, l, alpha`), whatever
    the order of the arithmetic around it (Triton's causal kernel writes `l * corr + sum(p)`)."""
    reduced = [r for i in idx if body.nodes[i].kind in ("rowmax", "rowsum") for r in body.nodes[i].operands[:1]]
    if len(reduced) != 1 or reduced[0] not in operands:
        return operands
    return (reduced[0],) + tuple(r for r in operands if r != reduced[0])


def _anchors(body: Body, idx: list[int]) -> int:
    return sum(body.nodes[i].kind in ANCHORS for i in idx)


def _opcode(body: Body, idx: list[int], operands: tuple[Ref, ...]) -> tuple[str, Note | None]:
    nodes = [body.nodes[i] for i in idx]
    root = nodes[-1]
    anchor = next((n.kind for n in nodes if n.kind in ANCHORS), None)
    if anchor:
        return anchor, None
    if root.opcode:  # the lowering named it (a reduction along an axis, a scan)
        return root.opcode, None
    if root.kind in FIXED_OPCODES:
        return FIXED_OPCODES[root.kind], None
    if root.kind == "generic":
        return opcode_token(root.mlir), None  # already reported when lowered
    if all(n.kind == "conv" for n in nodes):
        return "convert", None
    ranks = [_rank(body, r) for r in operands]
    if all(n.mlir in RESCALE_OPS or n.kind == "conv" for n in nodes) and any(
            r is not None and r < len(root.type.shape) for r in ranks):
        return "rescale", None
    if root.mlir in ARITH_OPCODES:
        return ARITH_OPCODES[root.mlir], None
    opcode = opcode_token(root.mlir)
    return opcode, Note(Diagnostic(f"'{root.mlir}' on tiles has no .tir opcode: imported as generic op '{opcode}'",
                                   root.span, f"describe '{opcode}' in the machine file's ops", "warning"), True)


def _rank(body: Body, ref: Ref) -> int | None:
    t = body.carry_types[ref.index] if ref.kind == "carry" else body.nodes[ref.index].type
    return len(t.shape) if t is not None else None


def fuse(lowered: Lowered) -> tuple[Body, list[Group], list[Note]]:
    """Run the four rewrites and group what is left; also return the final body."""
    body = Body(lowered.nodes, lowered.yields, tuple(c.type for c in lowered.carries))
    for rewrite in (merge_conversions, fold_moves, inline_unary):
        body = rewrite(body)
    groups, notes = group(body)
    return body, groups, notes
