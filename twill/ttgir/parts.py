"""Column parts of a tile after the loop: the persistent tutorial's EPILOGUE_SUBTILE.

`acc = tl.reshape(acc, (BM, 2, BN // 2)); acc = tl.permute(acc, (0, 2, 1)); acc0, acc1 = tl.split(acc)`
(on sm_100 after the pipeliner, two `ttng.tmem_subslice`s of the accumulator) makes two tiles, each
a range of the accumulator's columns; each is converted and stored to its column range of C. The
epilogue follows such a value as a `Part` of a whole one (a column range), the elementwise ops on
the parts as the same op on the whole tile (one op, where the parts' ops are the same), and the
stores of the parts as ONE store of the whole tile, where the addresses prove it is that: every
part of one whole value stored to one argument, the parts' column ranges exactly the tile's columns
(no overlap, no gap), and each part's address the first part's moved by its column offset along a
column of stride 1 (docs/ttgir-import.md, section 11). Anything else on a part is a located error.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import Diagnostic, InputError, Span
from .parser import MOp


@dataclass(frozen=True)
class Shaped:
    """Columns of a tile [M, total] seen as [M, d1, d2, ...]: `dims` the column axes, each (size, column
    stride), from column `offset` (a part reshaped again: a split of a half)."""

    whole: object  # an EVal
    total: int
    dims: tuple
    offset: int = 0


@dataclass(frozen=True)
class Part:
    """Columns [start, start + width) of `whole` (an EVal, `total` columns wide)."""

    whole: object
    start: int
    width: int
    total: int


@dataclass(frozen=True)
class PartStore:
    part: Part
    arg: str | None
    span: Span
    address: object  # addresses.Addr of a pointer store; a tuple of Addr (coordinates) of a descriptor store
    kind: str  # "pointer" or "coords"


def reshaped(whole, in_shape, out_shape, offset: int = 0, total: int | None = None) -> Shaped | None:
    """[M, W] (columns offset.. of a tile `total` wide) -> [M, d1, ..., dk], d1 * ... * dk = W: row-major
    column strides."""
    if len(in_shape) != 2 or len(out_shape) < 3 or out_shape[0] != in_shape[0]:
        return None
    sizes = list(out_shape[1:])
    prod = 1
    for d in sizes:
        prod *= d
    if prod != in_shape[1]:
        return None
    strides, s = [], 1
    for d in reversed(sizes):
        strides.append(s)
        s *= d
    return Shaped(whole, in_shape[1] if total is None else total, tuple(zip(sizes, reversed(strides))), offset)


def permuted(s: Shaped, order: list[int] | None) -> Shaped | None:
    """tt.trans of a shaped tile that keeps the rows first."""
    if not order or order[0] != 0 or sorted(order) != list(range(len(s.dims) + 1)):
        return None
    return Shaped(s.whole, s.total, tuple(s.dims[o - 1] for o in order[1:]), s.offset)


def split(s: Shaped) -> tuple | None:
    """tt.split of the last axis (size 2, stride S): two halves, the second S columns right of the
    first. A half whose other axes (dropping those of size 1) are one axis of stride 1 is a Part, a
    contiguous column range; one of several axes is still Shaped (split again, a nested subtile);
    None where the columns of a half are not contiguous (a reshape [M, N/2, 2] split: the even and
    the odd columns)."""
    *rest, (two, stride) = s.dims
    rest = [d for d in rest if d[0] != 1]
    if two != 2 or not rest:
        return None
    if len(rest) == 1:
        size, step = rest[0]
        if step != 1:
            return None
        return tuple(Part(s.whole, s.offset + k * stride, size, s.total) for k in (0, 1))
    return tuple(Shaped(s.whole, s.total, tuple(rest), s.offset + k * stride) for k in (0, 1))


class Parted:
    """The epilogue walker's (epilogue._After's) handling of parts: what makes them and what reads them."""

    def subslice(self, op: MOp, whole: EVal) -> bool:
        """``ttng.tmem_subslice`` of the loop's buffer ``{offset = O}`` (Triton 3.6: ``{N = O}``) along its
        columns: a Part of the carry. False where its shapes are not [M, N] -> [M, W] with O + W <= N."""
        from .opnames import int_attr
        ins, outs = self.lw.signature(op)
        start = int_attr(op, "offset")
        start = int_attr(op, "N") if start is None else start
        if not ins or not outs or start is None or len(ins[0].shape) != 2 or len(outs[0].shape) != 2:
            return False
        (m, n), (m2, w) = ins[0].shape, outs[0].shape
        if m != m2 or start < 0 or start + w > n:
            return False
        self.bind(op, Part(whole, start, w, n))
        return True

    def on_part(self, op: MOp, vals: list) -> None:
        """An op reading a column part of a tile, or a tile reshaped to split it: views keep it, tt.trans
        and tt.split follow the columns, elementwise ops are the same op on the whole tiles, stores
        are recorded (merged into whole stores at the end); anything else is a located error."""
        from .epilogue import BINARY, CONVERTS, MEMORY_STORES, STORES, TERNARY, UNARY, VIEWS, EVal, _number
        parts = [v for v in vals if isinstance(v, (Part, Shaped))]
        x = parts[0]
        if op.name in STORES:
            from .memory import edge_mask, transposed_store
            edge_mask(self.lw, op, after_loop=True)
            transposed_store(self.lw, op)  # a column part's store: row-major only
            if not isinstance(x, Part):
                raise self.error(op, "a tile reshaped to 3 dimensions is stored after the loop: not imported")
            names = [n for n, _ in op.operands()]
            arg = self.sig.stores.get(f"{op.head.line}:{op.head.col}")
            addr = self.lw.addresses
            if op.name == "tt.store":
                self.part_stores.append(PartStore(x, arg, self.lw.span(op), addr.of(names[0]), "pointer"))
            else:
                self.part_stores.append(PartStore(x, arg, self.lw.span(op), tuple(addr.of(n) for n in names[1:-1]),
                                                  "coords"))
            return
        if op.name == "tt.trans" and isinstance(x, Shaped):
            order = _order(op)
            p = permuted(x, order)
            if p is None:
                raise self.error(op, f"'tt.trans' {order} of a reshaped tile after the loop moves its rows: not imported")
            self.bind(op, p)
            return
        if op.name == "tt.split" and isinstance(x, Shaped) and len(op.results) == 2:
            halves = split(x)
            if halves is None:
                raise self.error(op, "'tt.split' after the loop of columns that are not two ranges (a reshape to [M, N/2, 2] "
                                     "split: the even and the odd columns): only a split into two column ranges "
                                     "(reshape [M, 2, N/2], permute (0, 2, 1), split) is imported")
            for r, h in zip(op.results, halves):
                self.env[r] = h
            return
        if op.name == "tt.reshape" and isinstance(x, Part) and not self._same_elements(op):
            ins, outs = self.lw.signature(op)  # a half reshaped to be split again (a nested subtile)
            shaped = reshaped(x.whole, ins[0].shape, outs[0].shape, x.start, x.total) if ins and outs else None
            if shaped is None or ins[0].shape[1] != x.width:
                raise self.error(op, "'tt.reshape' after the loop of a column part of a tile, other than [M, W] to "
                                     "[M, d1, .., dk]: not imported")
            self.bind(op, shaped)
            return
        if op.name == "ttng.warp_group_dot_wait":
            for r, v in zip(op.results, vals):
                self.env[r] = v
            return
        if op.name in MEMORY_STORES and isinstance(x, Part) and vals[0] is x and len(vals) >= 2:
            self.env[op.operands()[1][0]] = x  # the buffer now holds the part (a TMA store's staging)
            return
        if op.name in ("ttg.convert_layout", "ttng.tmem_load", "ttg.local_load", "ttg.local_alloc") or (
                op.name in VIEWS and isinstance(x, Part) and self._same_elements(op)):
            self.bind(op, x)
            return
        elementwise = op.name in CONVERTS or op.name in UNARY or op.name in BINARY or op.name in TERNARY \
            or op.name in ("math.exp2", "arith.cmpf")
        others_ok = all(isinstance(v, Part) or _number(v) or (isinstance(v, EVal) and v.kind == "scalar")
                        for v in vals)
        spans = {(p.start, p.width, p.total) for p in parts if isinstance(p, Part)}
        if not elementwise or not others_ok or len(spans) != 1 or not all(isinstance(p, Part) for p in parts) \
                or not op.results:
            raise self.error(op, f"'{op.name}' after the loop on a column part of the loop's result (a half from "
                                 "tl.split or ttng.tmem_subslice): only elementwise ops with scalar operands and "
                                 "stores of the parts are imported",
                             "store the whole tile (one tl.store of the accumulator)")
        wholes = [v.whole if isinstance(v, Part) else v for v in vals]
        attrs = tuple(t.text for t in op.tokens[:next((i for i, t in enumerate(op.tokens) if t.is_(":")),
                                                      len(op.tokens))] if t.kind != "ssa")
        key = (op.name, tuple(map(repr, wholes)), attrs)
        if key not in self.whole_ops:
            shape = self._whole_shape(x)
            if shape is None or len(shape) != 2 or shape[1] != x.total:
                raise self.error(op, f"'{op.name}' after the loop on a column part of a value whose whole tile "
                                     "the importer cannot type: not imported")
            self.widen = shape
            try:
                self.whole_ops[key] = self.compute(op, wholes)
            finally:
                self.widen = None
        self.bind(op, Part(self.whole_ops[key], x.start, x.width, x.total))

    def _whole_shape(self, p: Part) -> tuple | None:
        """The shape of the tile `p` is a part of (None: not known)."""
        w = p.whole
        if w.kind == "op":
            return tuple(self.ops[w.key].type.shape)
        if w.kind == "input":
            return tuple(self.inputs[w.key].type.shape)
        carry = next((c for c in self.lw.carries if c.ssa == w.key), None) if w.kind == "carry" else None
        return tuple(carry.type.shape) if carry is not None else None


def _order(op: MOp) -> list[int] | None:
    """tt.trans's `order = array<i32: 0, 2, 1>`."""
    toks = [t.text.rstrip(",:") for t in op.tokens]
    if "order" not in toks:
        return None
    out = []
    for t in toks[toks.index("order") + 1:]:
        if t.lstrip("-").isdigit():
            out.append(int(t))
        elif out and t.startswith(">"):
            break
        elif t in ("}", ">", "}>"):
            break
    return out or None


def merged(stores: list[PartStore]) -> list[tuple]:
    """The stores of parts as stores of whole values: (whole EVal, argument, span), or a located
    error where the parts stored are not provably the whole tile stored once."""
    groups: dict = {}
    for st in stores:
        groups.setdefault((st.arg, st.part.whole), []).append(st)
    out = []
    for (arg, whole), group in groups.items():
        group.sort(key=lambda st: st.part.start)
        first, total = group[0], group[0].part.total
        end = 0
        for st in group:
            if st.part.start != end:
                what = "overlap" if st.part.start < end else "leave a gap between them"
                raise _error(st, f"the parts of the tile stored to '{arg}' {what} (columns "
                                 f"{st.part.start}..{st.part.start + st.part.width} after ..{end}): only stores "
                                 "of parts that are together the whole tile, each once, are imported")
            end += st.part.width
            _same_place(first, st)
        if end != total:
            raise _error(group[-1], f"the parts stored to '{arg}' are columns 0..{end} of a tile of {total}: "
                                    "an epilogue storing a part of a tile is not imported (the graph stores whole tiles)")
        out.append((whole, arg, first.span))
    return out


def _same_place(first: PartStore, st: PartStore) -> None:
    """st's address is first's moved right by the parts' column offset, along columns of stride 1."""
    from .addresses import poly_add, poly_int
    shift = st.part.start - first.part.start
    ok = False
    if first.kind == st.kind == "pointer" and first.address is not None and st.address is not None:
        a, b = first.address, st.address
        ok = (a.base == b.base and a.coefs == b.coefs and a.coefs and poly_int(a.coefs[-1]) == 1
              and poly_int(poly_add(b.const, a.const, -1)) == shift)
    elif first.kind == st.kind == "coords" and None not in first.address + st.address \
            and len(first.address) == len(st.address) >= 1:
        rows = all(x.const == y.const and not x.coefs and not y.coefs
                   for x, y in zip(first.address[:-1], st.address[:-1]))
        ok = rows and poly_int(poly_add(st.address[-1].const, first.address[-1].const, -1)) == shift
    if not ok:
        raise _error(st, f"this store of columns {st.part.start}..{st.part.start + st.part.width} of the tile "
                         "is not provably at the first part's address moved by that many columns (of stride 1): "
                         "the parts are not imported as one store of the tile")


def _error(st: PartStore, message: str) -> InputError:
    return InputError(Diagnostic(message, st.span, "store the whole tile (one tl.store of the accumulator)"))
