"""The state of one lowering walk: SSA bindings, the nodes so far, buffers and their content, carries."""
from __future__ import annotations

from dataclasses import replace

from ..errors import Diagnostic, InputError, Span
from ..ir import TensorType
from .locs import name as loc_name, position
from .parser import Module, MOp
from .types import TypeReader
from .values import SCALAR, Buf, Carry, Entry, Node, Note, Ref, Tile


class Lowering:
    """The state of one walk: SSA bindings, nodes so far, buffers and their content, carries."""

    def __init__(self, module: Module):
        self.src, self.types = module.source, TypeReader(module.source, module.aliases)
        self.locs = module.locs or {}
        self.env: dict[str, object] = {}
        self.nodes: list[Node] = []
        self.buffers: list[tuple[str, object, Span]] = []  # (SSA name, MType, span)
        self.views: dict[int, list[str]] = {}  # buffer -> the SSA names of views of it (a slot of it)
        self.content: dict[int, object] = {}
        self.at_entry: dict[int, object] = {}
        self.carries: list[Carry] = []
        self.notes: list[Note] = []
        self.in_loop = False
        self.yielded: list[object] | None = None
        self.merge_entry: dict[int, object] = {}  # buffer content where a merged pair's first loop starts
        self.addresses = None  # addresses.Addresses of the function: how each load walks its argument
        self.masks = None  # bounds.Masks of the function: which masks guard a tensor's edge only
        self.batch = None  # unbatched.BatchReads of the function: which loads read one tensor for every batch entry
        self.loop_iv: str | None = None  # the chosen loop's induction variable
        self.khalves: dict = {}  # a tt.split result -> (the tile, which half, K): a dot split along K (ksplit.py)
        self.kpending = None  # (mma, a, b) of the first half of such a dot, until its second half
        self.arg_spans: dict = {}  # argument name -> its span in the signature
        self.flat = module.flat  # a flat map's size argument (flatmap.py), else None
        self.transposed = module.transposed  # pointer arguments a column-sum kernel reads transposed (colsum.py)

    # -- helpers ----------------------------------------------------------------------------------

    def span(self, op: MOp) -> Span:
        return self.src.span(op.head, len(op.head.text))

    def value(self, name: str, tok) -> object:
        for key in (name, name + "#0"):
            if key in self.env:
                return self.env[key]
        raise self.src.error(f"use of undefined value '%{name}'", tok)

    def operands(self, op: MOp) -> list[object]:
        return [self.value(name, tok) for name, tok in op.operands()]

    def bind(self, op: MOp, *vals: object) -> None:
        """Bind the op's results in order; results beyond `vals` repeat the last value. SSA names
        are defined once in a function: a second definition is an error."""
        for i, name in enumerate(op.results):
            if name in self.env:
                raise self.src.error(f"'%{name.split('#')[0]}' is defined twice", op.head)
            self.env[name] = vals[min(i, len(vals) - 1)] if vals else SCALAR

    def note(self, op: MOp, message: str, unknown: bool = False, hint: str | None = None) -> None:
        if self.in_loop:
            self.notes.append(Note(Diagnostic(message, self.span(op), hint, "warning"), unknown))

    def node(self, kind: str, op: MOp, operands, type_: TensorType | None, ssa: str | None = "", attrs=(),
             opcode: str | None = None, factor: object = None) -> Tile:
        ssa = (op.results[0] if op.results else None) if ssa == "" else ssa
        if ssa is None and kind == "load":  # a TMA copy has no result: the variable its loc names
            ssa = loc_name(op.loc, self.locs)
        refs = tuple(v.ref for v in operands if isinstance(v, Tile))
        self.nodes.append(Node(len(self.nodes), kind, op.name, ssa, refs, type_, self.span(op), self.in_loop,
                               tuple(attrs), tuple(operands), position(op.loc, self.locs), opcode, factor))
        return Tile(Ref("node", len(self.nodes) - 1))

    def type_of(self, ref: Ref) -> TensorType:
        return self.nodes[ref.index].type if ref.kind == "node" else self.carries[ref.index].type

    def tile_type(self, mtype, op: MOp, space: str | None = None) -> TensorType:
        tt = mtype.tile(space)
        if tt is None:
            raise self.src.error(f"'{op.name}' makes a tile of element type '{mtype.elem}', which "
                                 "the .tir format has no dtype for", op.head)
        return tt

    def signature(self, op: MOp):
        return self.types.signature(op.tokens)

    def read(self, val: object) -> object:
        """The tile a memory operand holds now (a buffer's content, or the tile itself)."""
        if not isinstance(val, Buf):
            return val
        content = self.content.get(val.index)
        if isinstance(content, Entry):  # read before written in this iteration: last iteration's value
            name, mtype, span = self.buffers[val.index]
            self.carries.append(Carry(name, self.tile_type_at(mtype, span), self.at_entry.get(val.index),
                                      span, None, val.index))
            content = Tile(Ref("carry", len(self.carries) - 1))
            self.content[val.index] = content
        if content is None:
            return SCALAR
        return replace(content, flip=content.flip != val.flip) if isinstance(content, Tile) and val.flip else content

    def tile_type_at(self, mtype, span: Span) -> TensorType:
        tt = mtype.tile()
        if tt is None:
            raise InputError(Diagnostic(f"a buffer of element type '{mtype.elem}' has no .tir dtype", span))
        return tt

    def move(self, val: object, space: str, op: MOp) -> object:
        """A register tile copied into `space`: a loaded tile is already in shared memory; any other
        becomes a `move` node (the fusion step folds it into its producer where it can)."""
        if not isinstance(val, Tile):
            return val
        from .handover import move  # an earlier loop's result in memory: the same hand-over
        handed = move(self, val, space, op)
        if handed is not None:
            return handed
        if val.ref.kind == "node" and self.nodes[val.ref.index].kind == "load" and space == "smem":
            return val
        t = self.type_of(val.ref)
        if t.space == space and space == "tmem":  # read out of tensor memory and stored back (Triton 3.6 between two
            return val  # mmas into one accumulator on sm_100): the same value where it already is, no copy
        return replace(self.node("move", op, [val], TensorType(t.dtype, t.shape, space)), flip=val.flip)

    # -- walking ----------------------------------------------------------------------------------
