"""Rank-1 tiles read as columns: ``v[None, :]``, which Triton writes ``tt.expand_dims %v {axis = 0}``.

A `.tir` rank-1 operand ``T[N]`` means one value per row (twill/vocab.py); one value per column is
``T[1,N]``. The importer has one type per value, so:

- a rank-1 tile of the loop that every reader sees as columns (a bias row added to every row) is
  typed ``T[1,N]``;
- a rank-1 tile read both ways (``cum[:, None] - cum[None, :]``) keeps its rank-1 type for the reads
  per row, and its reads per column get a copy of it computed in column form, op for op, back to
  where the values sit in shared memory: a tile in shared memory (a load, an input) is read as a
  column vector by ``convert x : T[1,N]`` (`column` node); an elementwise op or conversion is the
  same op on the column forms of its rank-1 operands; ``cumsum {axis = 0}`` of a rank-1 tile is
  ``cumsum {axis = 1}`` of its operand's column form. A value with no column form (a row reduction
  of a 2-D tile, a carry) read as columns too is an error at the reading op.
"""
from __future__ import annotations

import re
from dataclasses import replace

from ..errors import Diagnostic, InputError
from ..ir import TensorType
from .values import Lowered, Node, Ref, Tile

ELEMENTWISE_KINDS = {"ew", "conv", "exp2"}  # the same op on the column forms of its operands
_SUFFIX = re.compile(r"_\d+$")


def show_columns(lowered: Lowered) -> Lowered:
    """The loop's rank-1 tiles read as columns (see the module docstring)."""
    seen = _uses(lowered)
    nodes = list(lowered.nodes)
    both = set()
    for i, ways in seen.items():
        n = nodes[i]
        if True not in ways or n.type is None or len(n.type.shape) != 1:
            continue
        if ways == {True} and n.in_loop:
            nodes[i] = replace(n, type=replace(n.type, shape=(1,) + n.type.shape))
        else:
            both.add(i)
    if not both:
        return replace(lowered, nodes=tuple(nodes))
    return _with_copies(replace(lowered, nodes=tuple(nodes)), both)


def _uses(lowered: Lowered) -> dict[int, set[bool]]:
    """node index -> how the loop reads it: True for a read as columns, False per row (or yielded)."""
    uses: dict[int, set[bool]] = {}
    for n in lowered.nodes:
        if n.in_loop:
            for a in n.args:
                if isinstance(a, Tile) and a.ref.kind == "node":
                    uses.setdefault(a.ref.index, set()).add(a.column)
    for y in lowered.yields:
        if isinstance(y, Tile) and y.ref.kind == "node":
            uses.setdefault(y.ref.index, set()).add(False)
    return uses


class _Copies:
    """The new node list, built in order: each original node preceded by the column copies it reads."""

    def __init__(self, lowered: Lowered, both: set[int]):
        self.old, self.out, self.both = lowered.nodes, [], both  # both: the tiles read both ways
        self.at: dict[int, int] = {}  # old index -> new index
        self.col: dict[int, int] = {}  # old index -> new index of its column copy

    def add(self, node: Node) -> int:
        self.out.append(replace(node, index=len(self.out)))
        return len(self.out) - 1

    def column(self, i: int, reader: Node) -> int:
        """The new index of node i's column form, made (with those it reads) on first use."""
        if i in self.col:
            return self.col[i]
        n = self.old[i]
        t = n.type
        if n.kind in ELEMENTWISE_KINDS or (n.kind == "scan" and n.opcode == "cumsum"):
            args = tuple(self._column_arg(a, reader) for a in n.args)
            attrs = tuple((k, 1 if k == "axis" else v) for k, v in n.attrs) if n.kind == "scan" else n.attrs
            copy = replace(n, ssa=_col_name(n.ssa), type=_as_column(t), in_loop=True, attrs=attrs, args=args)
        elif t is not None and t.space == "smem":
            copy = replace(n, kind="column", mlir="tt.expand_dims", ssa=_col_name(n.ssa), in_loop=True, attrs=(),
                           args=(Tile(Ref("node", self.at[i])),), type=TensorType(t.dtype, (1,) + t.shape, "reg"),
                           opcode="convert")
        else:
            raise InputError(Diagnostic(
                f"'%{n.ssa}' ({_text(t)}) is read both per row and, through tt.expand_dims {{axis = 0}}, per "
                f"column; the importer reads a column copy of a tile in shared memory or recomputes it from "
                f"one, and '{n.mlir}' makes it from neither", reader.span,
                hint="compute the column form from the loaded tile in the kernel (e.g. a second tl.cumsum)"))
        self.col[i] = self.add(_with_refs(copy))
        return self.col[i]

    def _column_arg(self, a: object, reader: Node) -> object:
        if not isinstance(a, Tile) or a.ref.kind != "node":
            if isinstance(a, Tile):  # a carry read by the column form: no copy of it exists
                raise InputError(Diagnostic("a loop-carried rank-1 tile is read per column: the importer has "
                                            "no column form of a carry", reader.span))
            return a
        t = self.old[a.ref.index].type
        if t is None or len(t.shape) != 1 or t.shape == (1,):  # a scalar broadcasts either way
            return Tile(Ref("node", self.at[a.ref.index]))
        return Tile(Ref("node", self.column(a.ref.index, reader)))

    def original(self, n: Node) -> None:
        """`n` renumbered, its reads per column of a tile read both ways pointed at the copy. Its
        operands are its tile args in order (depipe.py renumbers the carries in operands only)."""
        args = tuple(self._read(a, n) for a in n.args)
        tiles = [a for a in args if isinstance(a, Tile)]
        if len(tiles) == len(n.operands):
            operands = tuple(t.ref if t.ref.kind == "node" else r for t, r in zip(tiles, n.operands))
        else:
            operands = tuple(Ref("node", self.at[r.index]) if r.kind == "node" else r for r in n.operands)
        self.at[n.index] = self.add(replace(n, args=args, operands=operands))

    def _read(self, a: object, reader: Node) -> object:
        if not isinstance(a, Tile) or a.ref.kind != "node":
            return a
        if a.column and a.ref.index in self.both:
            return Tile(Ref("node", self.column(a.ref.index, reader)), a.flip)
        return replace(a, ref=Ref("node", self.at[a.ref.index]))


def _with_copies(lowered: Lowered, both: set[int]) -> Lowered:
    """The nodes with the column copies of `both` inserted before their first readers, renumbered."""
    c = _Copies(lowered, both)
    for n in lowered.nodes:
        c.original(n)

    def moved(v: object) -> object:
        return replace(v, ref=Ref("node", c.at[v.ref.index])) if isinstance(v, Tile) and v.ref.kind == "node" else v
    carries = tuple(replace(k, init=moved(k.init)) for k in lowered.carries)
    return replace(lowered, nodes=tuple(c.out), carries=carries, yields=tuple(moved(y) for y in lowered.yields))


def _with_refs(n: Node) -> Node:
    return replace(n, operands=tuple(a.ref for a in n.args if isinstance(a, Tile)))


def _as_column(t: TensorType | None) -> TensorType | None:
    return None if t is None else replace(t, shape=(1,) + t.shape) if len(t.shape) == 1 else t


def _col_name(ssa: str | None) -> str | None:
    return None if ssa is None else _SUFFIX.sub("", ssa.split("#")[0]) + "_col"


def _text(t: TensorType | None) -> str:
    return "no type" if t is None else f"{t.dtype}[{','.join(map(str, t.shape))}]"
