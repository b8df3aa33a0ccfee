"""Turn lowered tile nodes into the ops a scheduler should see.

Five rewrites run in order over the loop's nodes, then the survivors are grouped:

0. `natural_exp`: ``math.exp(x)`` of a softmax, e^x = 2^(x log2 e), is the exp2 node it equals, the
   constant log2 e one more factor of the scale that emit-cuda's `exp2_scale` folds in, so that
   ``tl.exp(s * sm_scale - m)`` fuses as Triton's ``exp2(s * qk_scale - m)`` does (exp2_scale =
   sm_scale * log2 e). Only an exp whose argument is the softmax's subtraction of a row vector
   (``x - m[:, None]``, ``m_i - m``), in a loop with no ``math.exp2`` (one scale for all its
   exponentials); any other exp (SSD's decays, a sigmoid) stays ``exp``, which needs no scale.
1. `merge_conversions`: a dtype conversion (``arith.truncf`` of P to f16) whose producer is
   elementwise becomes part of that producer: the producer's result takes the narrower dtype and every
   consumer reads it (the exp2 that makes P is what writes f16 P).
2. `fold_moves`: a copy of a register tile into shared or tensor memory (``ttng.tmem_store``,
   ``ttg.local_alloc`` of a computed tile) whose producer is elementwise and has no other consumer folds
   into the producer, whose result now lives in that memory. Other copies stay, as `convert` ops.
3. `inline_unary`: a cheap elementwise op on one tile (``qk * scale``)
   read by several elementwise consumers is recomputed inside each of them rather than kept as an op.
4. `group`: a chain of elementwise ops fuses into one op. A producer with exactly one consumer (and not
   yielded) fuses into that consumer when both are elementwise, the group keeps at most one anchor
   (exp2, rowmax, rowsum) and it stays one op of the vocabulary (twill/vocab.py) with an operand count
   its entry allows (or a prefix of the dequant chain). A group's opcode is its anchor's; without one:
   `dequant` for (float((packed >> S) & mask) - zero) * scale, `rescale` for a multiply or divide by a
   broadcast lower-rank tile, `convert` for conversions only, else the root op's (ARITH_OPCODES). A
   group no table op computes (an unfinished dequant chain) is one op per node.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..errors import Diagnostic, InputError, Span
from ..knobs import Product
from .. import vocab
from ..vocab import LIBM
from ..ir import DTYPE_BITS, TensorType
from .lower import opcode_token
from .values import Lowered, Node, Note, Ref, Tile

FUSABLE = {"ew", "conv", "exp2", "rowmax", "rowsum", "causal_mask"}
ANCHORS = {"exp2", "rowmax", "rowsum", "causal_mask"}
FIXED_OPCODES = {"load": "load", "mma": "mma", "store": "store", "move": "convert", "column": "convert"}
ARITH_OPCODES = {  # TTGIR elementwise op -> the table opcode (twill.vocab) it is alone
    "arith.mulf": "mul", "arith.muli": "mul", "arith.addf": "add", "arith.addi": "add",
    "arith.subf": "sub", "arith.subi": "sub", "arith.maxnumf": "max", "arith.maximumf": "max_nan",
    "arith.maxsi": "max", "arith.maxui": "max", "arith.select": "select",
    "arith.divf": "div", "tt.precise_divf": "div", "arith.minnumf": "min", "arith.minimumf": "min_nan",
    "arith.minsi": "min", "arith.minui": "min", "arith.andi": "and", "arith.ori": "or", "arith.xori": "xor",
    "arith.shli": "shl", "arith.shrsi": "shr", "arith.shrui": "shr", "arith.negf": "neg", "math.absf": "abs",
    "math.fma": "fma", "math.exp": "exp", "math.log": "log", "math.log2": "log2", "math.sqrt": "sqrt",
    "math.rsqrt": "rsqrt", "math.tanh": "tanh", **{f"math.{n}": n for n in LIBM},
    "math.roundeven": "rint", "arith.remsi": "rem", "arith.remui": "rem", "arith.remf": "rem",
}
INT_TO_FLOAT = {"arith.uitofp", "arith.sitofp"}
RESCALE_OPS = {"arith.mulf"}  # a divide is `div` (rescale multiplies)


NATURAL = "math.exp"  # the mlir of an exp2 node that `natural_exp` made from e^x


@dataclass(frozen=True)
class Body:
    """Nodes by index (None once rewritten away) and the value yielded for each carry."""

    nodes: tuple[Node | None, ...]
    yields: tuple[object, ...]
    carry_types: tuple[TensorType, ...]
    exp2_scale: object = None  # twill.knobs.Product: the scale the fusion folded out (`folded_scale`)

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


def natural_exp(body: Body) -> Body:
    """Rewrite 0: a softmax's ``math.exp`` is an exp2 node (module doc); its mlir stays ``math.exp``
    (`NATURAL`), which tells the import that the loop's exponentials are in natural units."""
    live = body.live()
    if any(n.kind == "exp2" for n in live):
        return body  # exp and exp2 in one loop: the graph's one exp2_scale cannot serve both units
    consumers = body.consumers()
    nodes = list(body.nodes)
    for n in live:
        if n.kind == "ew" and n.mlir == NATURAL and len(n.operands) == 1 and _softmax_argument(body, n, consumers):
            nodes[n.index] = replace(n, kind="exp2")
    return Body(tuple(nodes), body.yields, body.carry_types)


def _softmax_argument(body: Body, n: Node, consumers: dict) -> bool:
    """Whether exp node n's argument is, through single-reader scales (a multiply or divide of one
    tile) and conversions, a subtraction x - b of a row vector b of x: b [M] with x [M, N] (read
    broadcast along the rows) or [M] (the running max's correction ``m_i - m``)."""
    ref, reader = n.operands[0], n.index
    for _ in range(32):
        p = _in_loop_node(body, ref)
        if p is None or consumers.get(p.index) != [reader] or p.index in body.yielded():
            return False
        if p.mlir == "arith.subf" and len(p.operands) == 2:
            x, b = (_type(body, r) for r in p.operands)
            return (x is not None and b is not None and len(b.shape) == 1
                    and tuple(x.shape[:1]) == tuple(b.shape) and len(x.shape) in (1, 2))
        if not (p.kind == "conv" or p.kind == "ew" and p.mlir in SCALES) or len(p.operands) != 1:
            return False
        ref, reader = p.operands[0], p.index
    return False


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


def scale_through_select(body: Body) -> tuple[Body, dict[int, Product]]:
    """Rewrite 2b: a select whose constant side is its `{scalar = K}` (`tl.where(c, x * s, K)`) and whose
    tile side is a scale, a multiply or divide of one tile x by a scalar s (a constant or a float argument:
    the node's `factor`, not 0), read by the select alone, where every reader of the select is an op that
    folds a scale (exp2, rowmax, causal_mask) or another such scale: the scale moves past the select,
    select(c, x * s, K) == select(c, x, K / s) * s, until none is left under it (`x * sm_scale * 1.44`:
    both). The select reads x and the scale node is gone; the select's entry in the map returned (select
    index -> the product of the scales moved) is the scale its readers see on top of x, which
    `folded_scale` counts on their paths, as it does a scale `inline_unary` recomputed away, and by which
    K is divided: `fuse` writes `{divided_by = exp2_scale}` where the fold's exp2_scale is that product
    (emit-cuda reads K / exp2_scale), and runs the fusion again without this rewrite where it is not.

    Exactness: the tile side is the same x * s; the constant side is fl(fl(K / s) * s), K exactly where
    K / s is representable (s a power of two; K = 0, or +-inf with s > 0) and within an ulp of K
    otherwise, finite wherever K / s is (|K| <= FLT_MAX * |s|). Folded into the exp2, masked elements
    read exp2((K / s - m) * s) for the kernel's exp2(K - m * s): the rounding of the fold itself
    (exp2((x - m) * s) for exp2(x * s - m)), which every softmax's folded scale has."""
    moved: dict[int, Product] = {}
    while True:
        consumers, yielded = body.consumers(), body.yielded()
        swap = next(((n, y) for n in body.live() for y in [_scale_under(body, n, consumers, yielded)]
                     if y is not None), None)
        if swap is None:
            return body, moved
        n, y = swap
        moved[n.index] = moved.get(n.index, Product()) * y.factor
        nodes = list(body.nodes)
        nodes[n.index] = replace(n, operands=(n.operands[0], y.operands[0]))
        nodes[y.index] = None
        body = Body(tuple(nodes), body.yields, body.carry_types)


def _scale_under(body: Body, n: Node, consumers: dict, yielded: set) -> Node | None:
    """The scale select n's tile side is, where `scale_through_select` may move it past n; else None."""
    if not (n.mlir == "arith.select" and len(n.operands) == 2 and "scalar" in dict(n.attrs)
            and n.index not in yielded and consumers.get(n.index)):
        return None
    y = _in_loop_node(body, n.operands[1])
    if (y is None or y.kind != "ew" or y.mlir not in SCALES or len(y.operands) != 1 or y.factor is None
            or y.factor.coef == 0 or "numerator" in dict(y.attrs) or consumers.get(y.index) != [n.index]
            or y.index in yielded):
        return None
    return y if all(_folds_scale(body, r, consumers, yielded, n.index) for r in consumers[n.index]) else None


def _folds_scale(body: Body, i: int, consumers: dict, yielded: set, came: int | None = None, depth: int = 0) -> bool:
    """Node i (reading node `came`) folds a scale: an exp2, rowmax or causal_mask; a scale of one tile, or a
    conversion, whose readers all do; the subtraction x - b of a softmax whose x is `came`, read by an exp2
    alone (the exp2's group, whose path `folded_scale` follows). Any other op would keep the scale from the
    fold (`x * s + bias`), so the scale stays under the select."""
    n = body.nodes[i]
    if n.kind in SCALED:
        return True
    readers = consumers.get(i, [])
    if not readers or i in yielded or depth > 32:
        return False
    if n.kind == "ew" and n.mlir == "arith.subf" and len(n.operands) == 2:
        return (n.operands[0] == Ref("node", came) and n.operands[1] != n.operands[0] and len(readers) == 1
                and body.nodes[readers[0]].kind == "exp2")
    scale = n.kind == "ew" and n.mlir in SCALES and len(n.operands) == 1 and n.factor is not None
    return (scale or n.kind == "conv" and len(n.operands) == 1) and all(
        _folds_scale(body, r, consumers, yielded, i, depth + 1) for r in readers)


def inline_unary(body: Body) -> Body:
    """Rewrite 3: a scale (a multiply or divide of one tile by a scalar) read only by elementwise
    chains that each end in an op whose exp2_scale folds a scale in (exp2, rowmax, causal_mask:
    `SCALED`) is recomputed in each, that is folded into their scale, until none is left
    (``qk * scale + c`` is two of them: inlining the add leaves the multiply with its readers). Any
    other one-tile op read several times (``exp(m_i - m)``, a scale on its way to `tl.exp`) stays an
    op: dropped, the graph would compute something else."""
    while True:
        consumers, yielded = body.consumers(), body.yielded()
        alias = {}
        for n in body.live():
            readers = consumers.get(n.index, [])
            if (n.kind == "ew" and n.mlir in SCALES and len(n.operands) == 1 and len(readers) >= 2
                    and n.index not in yielded and all(_reaches_scaled(body, r, consumers, yielded) for r in readers)):
                alias[n.index] = n.operands[0]
        if not alias:
            return body
        body = _substitute(body, alias, {})


SCALES = {"arith.mulf", "arith.divf"}


def _reaches_scaled(body: Body, i: int, consumers: dict, yielded: set, depth: int = 0) -> bool:
    """Whether node i is, or leads through single-reader elementwise ops to, an op that folds a scale."""
    n = body.nodes[i]
    if n.kind in SCALED:
        return True
    readers = consumers.get(i, [])
    if n.kind not in ("ew", "conv") or len(readers) != 1 or i in yielded or depth > 32:
        return False
    return _reaches_scaled(body, readers[0], consumers, yielded, depth + 1)


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
    in program order of their roots, and a note for each chain no opcode describes. A chain that
    grew through prefixes no one op computes faithfully and did not end in one is grouped again,
    each join faithful; what still is not one table op (a dequant prefix) is one op per node."""
    groups, notes = [], []
    for idx in _grow(body, body.live(), strict=False):
        made = _as_group(body, idx)
        if made is None and len(idx) > 1 and not _dequant_prefix(body, idx):
            made = [_as_group(body, sub) for sub in _grow(body, [body.nodes[i] for i in idx], strict=True)]
        if made is None or isinstance(made, list) and None in made:  # no table op computes it: one op per node
            made = [_as_group(body, [i]) for i in idx]
        for g, note in ([made] if isinstance(made, tuple) else made):
            if note:
                notes.append(note)
            groups.append(g)
    return groups, notes


def _grow(body: Body, nodes: list[Node], strict: bool) -> list[list[int]]:
    """The chains of `nodes` (a producer with one reader joins it), in order of their roots; with
    `strict`, only into chains one op computes faithfully."""
    consumers, yielded = body.consumers(), body.yielded()
    among = {n.index for n in nodes}
    owner: dict[int, int] = {}  # member -> root
    members: dict[int, list[int]] = {}
    for n in nodes:
        owner[n.index], members[n.index] = n.index, [n.index]
        if n.kind not in FUSABLE:
            continue
        pending = [p.index for p in map(lambda r: _in_loop_node(body, r), dict.fromkeys(n.operands))
                   if p is not None and p.index in among and p.kind in FUSABLE and consumers.get(p.index) == [n.index]
                   and p.index not in yielded and owner[p.index] != n.index]
        while pending:  # a producer that cannot join yet may once another has (l * alpha + rowsum)
            joined = [p for p in pending if _join(body, members, owner, n.index, p, strict)]
            pending = [p for p in pending if p not in joined]
            if not joined:
                break
    return [members[root] for root in sorted(members)]


def _join(body: Body, members: dict, owner: dict, n: int, p: int, strict: bool = False) -> bool:
    """Fuse p's group into n's if the chain keeps one anchor at most and stays one table op."""
    mine, theirs = members[n], members[owner[p]]
    chain = sorted(mine + theirs)
    if _anchors(body, mine) + _anchors(body, theirs) > 1 or not (
            _as_group(body, chain) is not None if strict else _may_fuse(body, chain)):
        return False
    root = owner[p]
    for m in theirs:
        owner[m] = n
    members[n] = sorted(mine + theirs)
    del members[root]
    return True


def _outside(body: Body, idx: list[int]) -> tuple[Ref, ...]:
    inside = set(idx)
    outside = [r for m in idx for r in body.nodes[m].operands if not (r.kind == "node" and r.index in inside)]
    return tuple(outside if len(idx) == 1 else dict.fromkeys(outside))  # a fused chain reads each once


def _as_group(body: Body, idx: list[int], final: bool = True) -> tuple[Group, Note | None] | None:
    """The one graph op the nodes `idx` fuse into, or None where no table op computes them (or,
    `final`, where the op would not compute what the chain does: `_faithful`; a chain still growing
    may pass through such a prefix, `s * scale - m` on its way to the exp2)."""
    operands = _reduced_first(body, idx, _outside(body, idx))
    node = body.nodes[idx[-1]]
    found = _dequant(body, idx, operands)
    if found is None and len(idx) > 1 and _dequant_prefix(body, idx):
        return None
    if found is not None:
        opcode, attrs, note = found
    else:
        (opcode, note), attrs = _opcode(body, idx, operands), node.attrs
    if final and len(idx) > 1 and found is None and not _faithful(body, idx, opcode):
        return None
    d = vocab.lookup(opcode)
    if d is not None:
        if d.arity and len(operands) not in d.arity and len(idx) > 1:
            return None
        attrs = tuple((k, v) for k, v in attrs if k not in vocab.OPCODE_ATTRIBUTES or k in d.attrs)
        if len(operands) != vocab.scalar_arity(d):
            attrs = tuple((k, v) for k, v in attrs if k != "scalar")
    return Group(idx[-1], tuple(idx), opcode, operands, _where(body, opcode, operands, node.type), node.span,
                 attrs), note


def _where(body: Body, opcode: str, operands: tuple[Ref, ...], t: TensorType | None) -> TensorType | None:
    """A causal mask of a tile in tensor memory (sm_100's S) masks it where it lies: its result is
    @tmem too, so the softmax reads S from tensor memory as it does unmasked."""
    if opcode == "causal_mask" and t is not None and len(operands) == 1:
        src = _type(body, operands[0])
        if src is not None and src.space == "tmem" and src.shape == t.shape:
            return replace(t, space="tmem")
    return t


# What may fuse into a group besides its root and conversions, so that the one op still computes the
# chain: around an anchor, the arithmetic its opcode spells (exp2 x, b is exp2((x - b) * scale);
# rowmax x, m is max(m, rowmax(x)); rowsum x, l, alpha is l * alpha + rowsum(x)). Before an exp2, a
# rowmax or a causal mask (or after a rowmax: max(m, rowmax(s) * scale)), an op of a tile and a
# scalar is the scale that exp2_scale folds in.
AROUND = {"exp2": {"arith.subf": "up"}, "rowmax": {"arith.maxnumf": "down", "arith.maximumf": "down"},
          "rowsum": {"arith.mulf": "side", "arith.addf": "down"}, "causal_mask": {}}  # up: feeds the anchor
SCALED = {"exp2", "rowmax", "causal_mask"}
WHOLE = {"dequant", "rescale", "convert"}  # opcodes whose chains are checked where they are found


def _faithful(body: Body, idx: list[int], opcode: str) -> bool:
    """Does the one op `opcode` of the chain `idx` compute what the chain computes? Besides the root
    (or the anchor), a member is a conversion or an op `AROUND` the anchor allows (a mask of element
    indices is an op of its own, `mask`, never a member); after an exp2 only conversions
    follow (p = exp2(...) * y is two ops); no member reads one value twice (x * x). A chain of other
    elementwise ops is one op per node."""
    if opcode in WHOLE:
        return True
    nodes = [body.nodes[i] for i in idx]
    anchor = next((n for n in nodes if n.kind in ANCHORS), None)
    center = anchor or next((n for n in reversed(nodes) if n.kind != "conv"), nodes[-1])
    if any(len(set(n.operands)) < len(n.operands) for n in nodes):
        return False  # x * x: the fused op would read x once
    after = _downstream(body, idx, center.index)
    for n in nodes:
        if n is center or n.kind == "conv":
            continue
        if anchor is None or (n.index in after and anchor.kind == "exp2"):
            return False
        where = "down" if n.index in after else "up" if center.index in _downstream(body, idx, n.index) else "side"
        role = AROUND[anchor.kind].get(n.mlir)  # (an op the anchor does not spell is no member: exp(m_i - m))
        if role is not None and role in (where, "side" if where == "down" else None):
            continue
        if anchor.kind in SCALED and len(n.operands) == 1 and n.kind == "ew" and n.mlir in SCALES:
            continue  # a scale the knob folds in; any other function of the tile (|x|) is an op of its own
        return False
    return True


def _downstream(body: Body, idx: list[int], start: int) -> set[int]:
    """The members of `idx` that read `start`'s result, directly or through other members."""
    inside, out, grew = set(idx), set(), True
    while grew:
        grew = False
        for i in idx:
            if i not in out and any(r.kind == "node" and (r.index == start or r.index in out)
                                    for r in body.nodes[i].operands) and i in inside:
                out.add(i)
                grew = True
    return out


def _reduced_first(body: Body, idx: list[int], operands: tuple[Ref, ...]) -> tuple[Ref, ...]:
    """A fused rowmax / rowsum reads the tile it reduces first (`rowsum p, l, alpha`), whatever
    the order of the arithmetic around it (Triton's causal kernel writes `l * corr + sum(p)`)."""
    reduced = [r for i in idx if body.nodes[i].kind in ("rowmax", "rowsum") for r in body.nodes[i].operands[:1]]
    if len(reduced) != 1 or reduced[0] not in operands:
        return operands
    return (reduced[0],) + tuple(r for r in operands if r != reduced[0])


def _may_fuse(body: Body, idx: list[int]) -> bool:
    """Whether the chain `idx` may grow: it is one table op, or the start of a dequant chain."""
    return _dequant_prefix(body, idx) or _as_group(body, idx, final=False) is not None


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
    ranks = [None if (_type(body, r) is not None and _type(body, r).shape == (1,)) else _rank(body, r)
             for r in operands]  # a one-element operand (a scalar per batch entry) is no row vector
    if any(n.mlir == "arith.divf" for n in nodes) and all(n.mlir == "arith.divf" or n.kind == "conv" for n in nodes):
        return "div", None  # x / l: `rescale` multiplies (x * alpha), so a divide stays a divide
    if all(n.mlir in RESCALE_OPS or n.kind == "conv" for n in nodes) and any(
            r is not None and r < len(root.type.shape) for r in ranks):
        return "rescale", None
    if root.mlir in ARITH_OPCODES:
        return ARITH_OPCODES[root.mlir], None
    opcode = opcode_token(root.mlir)
    return opcode, Note(Diagnostic(f"'{root.mlir}' on tiles has no .tir opcode: imported as generic op '{opcode}'",
                                   root.span, f"describe '{opcode}' in the machine file's ops", "warning"), True)


# -- the dequant chain: (float((packed >> S) & (2^B - 1)) - zero) * scale -------------------------------

def _steps(body: Body, idx: list[int]) -> list[str]:
    """The chain's nodes as dequant steps: shift, mask, int->float, zero, scale ('' for any other)."""
    out = []
    for i in idx:
        n = body.nodes[i]
        out.append({"arith.shrui": "shift", "arith.shrsi": "shift", "arith.andi": "mask", "arith.subf": "zero",
                    "arith.mulf": "scale"}.get(n.mlir, "float" if n.mlir in INT_TO_FLOAT else ""))
    return out


ORDER = ("shift", "mask", "float", "zero", "scale")


def _dequant_prefix(body: Body, idx: list[int]) -> bool:
    """The nodes are a chain, in order, of the dequant steps (each once, a prefix of the whole)."""
    steps = _steps(body, idx)
    if "" in steps or len(set(steps)) != len(steps) or [ORDER.index(x) for x in steps] != sorted(
            ORDER.index(x) for x in steps):
        return False
    return "zero" not in steps and "scale" not in steps or _floats(body, idx)


def _floats(body: Body, idx: list[int]) -> bool:
    """The chain turns integers into floats before its zero and scale steps (an int->float node, or
    the bit op that a conversion merged into: its result float, its operand integer)."""
    first = body.nodes[idx[0]]
    src = _type(body, first.operands[0]) if first.operands else None
    before = [body.nodes[i] for i, st in zip(idx, _steps(body, idx)) if st in ("shift", "mask", "float")]
    return (src is not None and src.dtype in vocab.INTS and bool(before)
            and before[-1].type is not None and before[-1].type.dtype in vocab.FLOATS)


def _dequant(body: Body, idx: list[int], operands) -> tuple[str, tuple, None] | None:
    """('dequant', attrs, None) when `idx` is a whole dequant chain whose constants are known: an
    unsigned shift by S and/or a mask of B ones, to float, then minus a zero, times a scale."""
    steps = _steps(body, idx)
    if not _dequant_prefix(body, idx) or "scale" not in steps or not ({"shift", "mask"} & set(steps)):
        return None
    nodes = dict(zip(steps, (body.nodes[i] for i in idx)))
    packed = _type(body, nodes[steps[0]].operands[0])
    shift = dict(nodes["shift"].attrs).get("scalar") if "shift" in nodes else 0
    mask = dict(nodes["mask"].attrs).get("scalar") if "mask" in nodes else None
    if not isinstance(shift, int) or "shift" in nodes and nodes["shift"].mlir != "arith.shrui" and mask is None:
        return None
    if "zero" in nodes and body.nodes[idx[steps.index("zero") - 1]].index != getattr(
            nodes["zero"].operands[0], "index", None):
        return None  # zero - x, not x - zero
    width = DTYPE_BITS[packed.dtype]
    if mask is None:
        bits = width - shift
    elif isinstance(mask, int) and mask > 0 and mask & (mask + 1) == 0:
        bits = mask.bit_length()
    else:
        return None
    if not 1 <= bits <= 8 or shift + bits > width or len(operands) != 1 + ("zero" in steps) + 1:
        return None
    return "dequant", (("bits", bits), ("shift", shift)), None


def _type(body: Body, ref: Ref) -> TensorType | None:
    return body.carry_types[ref.index] if ref.kind == "carry" else body.nodes[ref.index].type


def _rank(body: Body, ref: Ref) -> int | None:
    t = body.carry_types[ref.index] if ref.kind == "carry" else body.nodes[ref.index].type
    return len(t.shape) if t is not None else None


def fuse(lowered: Lowered) -> tuple[Body, list[Group], list[Note]]:
    """Run the rewrites and group what is left; also return the final body, whose `exp2_scale`
    is the scale the fusion folded out of the graph (`folded_scale`). Where a scale moved past a select
    (`scale_through_select`) is not the exp2_scale the fold finds (more scales after the select, a loop
    whose selects' scales differ), the fusion runs again without that rewrite: the scales stay ops."""
    body = Body(lowered.nodes, lowered.yields, tuple(c.type for c in lowered.carries))
    for rewrite in (natural_exp, merge_conversions, fold_moves):
        body = rewrite(body)
    moved_body, moved = scale_through_select(body)
    if moved:
        try:
            done = _fuse(moved_body, moved)
        except UnexpressedScale:
            done = None
        if done is not None:
            return done
    return _fuse(body, {})


def _fuse(body: Body, moved: dict) -> tuple[Body, list[Group], list[Note]] | None:
    before = body
    body = inline_unary(body)
    groups, notes = group(body)
    scale = folded_scale(before, body, groups, moved)
    if moved:
        groups = _divided(body, groups, moved, scale)
        if groups is None:
            return None
    return replace(body, exp2_scale=scale), groups, notes


def _divided(body: Body, groups: list[Group], moved: dict, scale: Product | None) -> list[Group] | None:
    """Each select a scale moved past (`scale_through_select`) with its K divided by that scale s: `{scalar
    = K * (exp2_scale / s), divided_by = exp2_scale}`, where exp2_scale / s is a number (1 but for a
    natural exp's log2 e) and the select is its group's root; else None."""
    out = list(groups)
    for sel, s in moved.items():
        at = next((i for i, g in enumerate(out) if g.root == sel and g.opcode == "select"), None)
        ratio = scale / s if scale is not None and at is not None else None
        if ratio is None or ratio.powers:
            return None
        g = out[at]
        k = dict(g.attrs)["scalar"]
        k = k if math.isclose(ratio.coef, 1.0, rel_tol=1e-6) else k * ratio.coef
        attrs = tuple((a, k if a == "scalar" else v) for a, v in g.attrs) + (("divided_by", KNOB),)
        out[at] = replace(g, attrs=attrs)
    return out


KNOB = "exp2_scale"


# -- the scale folded into exp2_scale ---------------------------------------------------------------

def folded_scale(before: Body, after: Body, groups: list[Group], moved: dict | None = None) -> Product | None:
    """The kernel's scale of the scores that the graph drops (emit-cuda's `exp2_scale`: `exp2 s, b`
    is exp2((s - b) * exp2_scale)), as a product of the kernel's float arguments and constants; None
    for a loop with no exp2. The scales dropped are the multiplies `inline_unary` recomputed away
    and the one-tile members of a group anchored by exp2, rowmax or causal_mask (`_faithful`). Each
    anchor's is the product of those on the path of the tile it reads (for `exp2 x - b`, x's path;
    b's is 1 or the same); the anchors that scale must agree, and a softmax's `tl.exp` is log2 e
    more (`natural_exp`). A dropped scale that is no such product (a tensor's value, an integer
    argument) or that no anchor's path accounts for is an error at its TTGIR line. A select in `moved`
    (`scale_through_select`) carries the scales moved past it onto its readers' paths."""
    moved = moved or {}
    dropped = {n.index for n in before.live() if after.nodes[n.index] is None}
    anchored = [(g, next(i for i in g.members if after.nodes[i].kind in SCALED)) for g in groups
                if g.opcode in SCALED and any(after.nodes[i].kind in SCALED for i in g.members)]
    for g, a in anchored:
        dropped |= {i for i in g.members if i != a and _is_scale(after.nodes[i])}
    seen: set[int] = set()

    def path(ref: Ref, g: Group) -> Product:
        n = _in_loop_node(before, ref)
        if n is None:
            return Product()
        if n.index in dropped:
            seen.add(n.index)
            if n.factor is None and n.mlir not in SCALES:
                raise _not_a_scale(n)
            if n.factor is None:
                raise _refuse(n, "scales the scores by a value that is no product of the kernel's float "
                                 "arguments and constants")
            return n.factor * path(n.operands[0], g)
        if n.kind == "conv" and len(n.operands) == 1:
            return path(n.operands[0], g)
        if n.index in moved:  # select(c, x, K / s) * s: s on top of x's path
            return moved[n.index] * path(n.operands[1], g)
        if n.index in g.members and n.mlir == "arith.subf" and len(n.operands) == 2:
            x, b = path(n.operands[0], g), path(n.operands[1], g)
            if not (b.is_one() or b.same(x)):
                raise _refuse(n, f"subtracts values of two scales ({x.text()} and {b.text()}) before the exp2")
            if b.is_one() and not x.is_one() and not _unscaled(before, n.operands[1], dropped):
                raise _refuse(n, f"subtracts a value that is no row maximum of the scores (a tile loaded or "
                                 f"computed apart: the forward's logsumexp M of a backward, a bias) from scores "
                                 f"scaled by {x.text()}: the graph's `exp2 s, b` is exp2((s - b) * exp2_scale), "
                                 f"which would scale it too")
            return x
        return Product()

    found: tuple[Node, Product] | None = None
    for g, a in anchored:
        node = before.nodes[a]  # its operands before `inline_unary` recomputed their scales away
        scale = path(node.operands[0], g) if node.operands else Product()
        if node.kind == "rowmax":  # max(m, rowmax(s) * c): the scale after the reduction
            for i in sorted(_downstream(after, list(g.members), a)):
                if i in dropped:
                    seen.add(i)
                    if after.nodes[i].factor is None:
                        raise _refuse(after.nodes[i], "scales the row maximum by a value that is no product "
                                                      "of the kernel's float arguments and constants")
                    scale = scale * after.nodes[i].factor
        if scale.is_one():
            continue
        if found is not None and not found[1].same(scale):
            raise _refuse(node, f"reads scores scaled by {scale.text()}, where '{found[0].mlir}' at line "
                                f"{found[0].span.line} reads them scaled by {found[1].text()}: one exp2_scale "
                                "cannot serve both")
        found = found or (node, scale)
    lost = sorted(dropped - seen)
    if lost:
        raise _refuse(before.nodes[lost[0]], "scales a value on its way to an exp2, rowmax or causal mask "
                                             "through an op that keeps no record of the scale")
    if not any(n.kind == "exp2" for n in after.live()):
        return None
    scale = found[1] if found else Product()
    natural = any(n.kind == "exp2" and n.mlir == NATURAL for n in after.live())
    return scale * Product.number(LOG2E) if natural else scale


LOG2E = 1.4426950408889634


def _is_scale(n: Node) -> bool:
    """A one-tile elementwise member that a scaled anchor's group drops (`_faithful`)."""
    return n.kind == "ew" and len(n.operands) == 1


class UnexpressedScale(InputError):
    """A softmax's scale the knob cannot record: the loop is a tile loop all the same (loops.py never
    leaves it out silently, as with indices.UnexpressedMask), and this is its error."""


def _unscaled(body: Body, ref: Ref, dropped: set) -> bool:
    """Whether `b` of a softmax's `s * c - b` is in the graph's units, those of the unscaled scores
    (emit-cuda computes exp2((s - b) * exp2_scale)): a row maximum of the scores (`rowmax`; times
    the scale, `max(m, rowmax(s) * c)`, the scale folded out), the running maximum a carry holds, a
    maximum of those, or an input computed before the loop (dQ's `lse2`, which the prologue divides
    by exp2_scale). A tile loaded in the loop (dK/dV's M per query block) or computed there otherwise
    is in the kernel's scaled units, which the graph cannot say."""
    for _ in range(32):
        if ref.kind == "carry":
            return True
        n = body.nodes[ref.index]
        if n is None:
            return False
        if not n.in_loop:  # an input: the prologue reads b / exp2_scale (prologue.scaled_subtrahends)
            return True
        if n.kind == "rowmax":
            return True
        if n.kind == "conv" and len(n.operands) == 1 or n.index in dropped and n.factor is not None:
            ref = n.operands[0]
            continue
        if n.kind == "ew" and n.mlir in MAXIMA and n.operands:
            return all(_unscaled(body, r, dropped) for r in n.operands)
        return False
    return False


MAXIMA = {"arith.maxnumf", "arith.maximumf"}


def _not_a_scale(n: Node) -> InputError:
    """An op other than a multiply or divide between the loaded tile and the row's max or exp2 (a max of |x|)."""
    return UnexpressedScale(Diagnostic(
        f"'{n.mlir}' stands between the row's tile and its max or exp2, and is no scale: the import reads a row's "
        "max as a softmax's (the max of the scores, scaled only by multiplications by float arguments and constants, "
        "which it folds into exp2_scale); a max of another function of the row (|x|: a quantization's absmax) is "
        "not imported", n.span,
        "a row's max of the values loaded (or scaled by a float argument) is imported (docs/ttgir-import.md, "
        "\"The exp2 scale\")"))


def _refuse(n: Node, what: str) -> InputError:
    return UnexpressedScale(Diagnostic(
        f"'{n.mlir}' {what}: the import folds the scale of a softmax's scores into the kernel's exp2_scale, "
        "which the binding computes from the kernel's scalar arguments", n.span,
        "scale the scores by a float argument or a constant (qk * sm_scale, qk * qk_scale with qk_scale = "
        "sm_scale * 1.44269504) (docs/ttgir-import.md, \"The exp2 scale\")"))
