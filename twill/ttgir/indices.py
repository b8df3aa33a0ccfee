"""Tensors computed from element indices, followed exactly: the affine index of each element, and the
comparisons of two of them (a mask) that a `mask` op of the vocabulary computes.

``tt.make_range {start = S}`` of a tile's dimension is ``Index((1,), S)``: element i holds i + S. The
value of an `Index` at element (d0, d1, ...) is ``sum(coefs[k] * dk) + const``; ``tt.expand_dims``
inserts a dimension of coefficient 0, ``tt.broadcast`` and layout views keep it, ``tt.trans`` swaps
the two, ``arith.addi``/``subi`` of two indices of one rank add their coefficients, and a splat
integer constant adds to (or, ``muli``, multiplies) the index. ``arith.cmpi`` of two indices (or of
one and a constant) is an `IndexMask`: the element holds where ``sum(coefs[k] * dk) + const PRED 0``.

Two scalars are followed too, as `terms` of an index: the grid's row program id (``tt.get_program_id
x``, term ``pid_x``) and the chosen loop's induction variable (term ``iv``), each with an integer
coefficient: ALiBi's ``offs_m[:, None] - cols[None, :]`` with ``offs_m = pid * 128 + arange(128)`` and
``cols = start_n + arange(64)`` is ``r - c + 128 pid - iv``. A scalar index (no dimension) is the
program id or the induction variable itself: everywhere else it stays the scalar it was (`scalar`).
``arith.sitofp`` of a 2-D index with terms is a `position` of the vocabulary (`position_attrs`, the
grid term read as the tile origin's row); a mask with terms is not a `mask` (an error at its line).

What is not affine in the element's position with constant coefficients (a program id or the loop's
induction variable added to it, a product of two indices, an ``andi`` of two masks) is plain
`INDEXED`: an op on a tile that reads it is an error at its line (nothing is dropped silently).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from .values import INDEXED, Const, Indexed


class UnexpressedMask(InputError):
    """An op of a tile reads element indices the import cannot express: the loop is a tile loop all
    the same (loops.py never leaves it out silently), and this is its error."""

# arith.cmpi predicate -> the mask's `pred` (unsigned comparisons of indices, which are >= 0, alike)
PREDICATES = {"eq": "eq", "ne": "ne", "slt": "lt", "sle": "le", "sgt": "gt", "sge": "ge",
              "ult": "lt", "ule": "le", "ugt": "gt", "uge": "ge"}
NEGATED = {"eq": "ne", "ne": "eq", "lt": "ge", "le": "gt", "gt": "le", "ge": "lt"}


@dataclass(frozen=True)
class Index(Indexed):
    """sum(coefs[k] * position[k]) + const, one coefficient per dimension of the tensor."""

    coefs: tuple[int, ...] = ()
    const: int = 0
    terms: tuple[tuple[str, int], ...] = ()  # (symbol, coefficient), sorted: pid_x, iv (module doc)


def symbol(name: str) -> Index:
    """A scalar index: the program id or the induction variable itself (module doc)."""
    return Index((), 0, ((name, 1),))


def scalar(val: object) -> object:
    """A scalar index where a plain scalar is wanted (an op on a tile: what it reads of it is folded
    away as before), else `val`."""
    from .values import SCALAR
    return SCALAR if isinstance(val, Index) and not val.coefs else val


def _terms(a: tuple, b: tuple, sign: int = 1, scale: int = 1) -> tuple:
    out = dict(a)
    for k, c in b:
        out[k] = out.get(k, 0) + sign * c
    return tuple(sorted((k, c * scale) for k, c in out.items() if c))


@dataclass(frozen=True)
class IndexMask(Indexed):
    """Element (d0, d1, ...) holds where sum(coefs[k] * dk) + const PRED 0."""

    pred: str = "ge"
    coefs: tuple[int, ...] = ()
    const: int = 0

    def negated(self) -> "IndexMask":
        return IndexMask(NEGATED[self.pred], self.coefs, self.const)


def make_range(start: int | None) -> Indexed:
    return Index((1,), start) if isinstance(start, int) else INDEXED


def expand(val: object, axis: int | None) -> object:
    """``tt.expand_dims {axis}`` of an index: a new dimension of coefficient 0."""
    if isinstance(val, Index) and not val.coefs:
        return val  # a scalar index splat: the same at every element of any rank
    if isinstance(val, (Index, IndexMask)) and isinstance(axis, int) and 0 <= axis <= len(val.coefs):
        coefs = val.coefs[:axis] + (0,) + val.coefs[axis:]
        return Index(coefs, val.const, val.terms) if isinstance(val, Index) else IndexMask(val.pred, coefs, val.const)
    return val


def transpose(val: object) -> object:
    if isinstance(val, (Index, IndexMask)) and len(val.coefs) == 2:
        coefs = val.coefs[::-1]
        return Index(coefs, val.const, val.terms) if isinstance(val, Index) else IndexMask(val.pred, coefs, val.const)
    return val


def _int(v: object) -> int | None:
    if isinstance(v, Const) and isinstance(v.value, (int, float)) and not isinstance(v.value, bool) \
            and float(v.value).is_integer():
        return int(v.value)
    return None


def _add(a: Index, b: Index, sign: int) -> Indexed:
    if not a.coefs and b.coefs:  # a scalar index broadcasts
        a = Index((0,) * len(b.coefs), a.const, a.terms)
    if not b.coefs and a.coefs:
        b = Index((0,) * len(a.coefs), b.const, b.terms)
    if len(a.coefs) != len(b.coefs):
        return INDEXED
    return Index(tuple(x + sign * y for x, y in zip(a.coefs, b.coefs)), a.const + sign * b.const,
                 _terms(a.terms, b.terms, sign))


def _affine(name: str, a: object, b: object) -> Indexed:
    """addi, subi, muli of indices and integer constants."""
    ka, kb = _int(a), _int(b)
    if isinstance(a, Index) and isinstance(b, Index) and name in ("arith.addi", "arith.subi"):
        return _add(a, b, 1 if name == "arith.addi" else -1)
    if isinstance(a, Index) and kb is not None:
        k, idx, first = kb, a, True
    elif isinstance(b, Index) and ka is not None:
        k, idx, first = ka, b, False
    else:
        return INDEXED
    if name == "arith.addi":
        return Index(idx.coefs, idx.const + k, idx.terms)
    if name == "arith.subi":  # idx - k, or k - idx
        return (Index(idx.coefs, idx.const - k, idx.terms) if first else
                Index(tuple(-c for c in idx.coefs), k - idx.const, _terms((), idx.terms, -1)))
    if name == "arith.muli":
        return Index(tuple(c * k for c in idx.coefs), idx.const * k, _terms((), idx.terms, 1, k))
    return INDEXED


def _compare(pred: str | None, a: object, b: object) -> Indexed:
    if pred not in PREDICATES:
        return INDEXED
    if isinstance(b, Index) and not isinstance(a, Index) and _int(a) is not None:
        a = Index(tuple(0 for _ in b.coefs), _int(a))
    if isinstance(a, Index) and not isinstance(b, Index) and _int(b) is not None:
        b = Index(tuple(0 for _ in a.coefs), _int(b))
    if not (isinstance(a, Index) and isinstance(b, Index)):
        return INDEXED
    diff = _add(a, b, -1)
    if not isinstance(diff, Index) or diff.terms:  # a mask offset by the program id or the loop: not a `mask`
        return INDEXED
    return IndexMask(PREDICATES[pred], diff.coefs, diff.const)


CONVERSIONS = {"arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast", "arith.index_castui"}


def combine(name: str, vals: list, pred: str | None) -> Indexed:
    """The index (or mask) an elementwise op on no tile makes of indices and constants; on scalar
    indices alone (the program id, the induction variable), a scalar index or, where it is none,
    the plain scalar they were before (`SCALAR`)."""
    out = _combine(name, vals, pred)
    if all(not isinstance(v, Indexed) or (isinstance(v, Index) and not v.coefs) for v in vals) \
            and not (isinstance(out, Index) and not out.coefs):
        from .values import SCALAR
        return SCALAR
    return out


def _combine(name: str, vals: list, pred: str | None) -> Indexed:
    if name in CONVERSIONS and len(vals) == 1:
        return vals[0] if isinstance(vals[0], Indexed) else INDEXED
    if name in ("arith.addi", "arith.subi", "arith.muli") and len(vals) == 2:
        return _affine(name, *vals)
    if name == "arith.cmpi" and len(vals) == 2:
        return _compare(pred, *vals)
    if name == "arith.xori" and len(vals) == 2 and isinstance(vals[0], IndexMask) and _int(vals[1]) in (1, -1):
        return vals[0].negated()  # not: xor with true
    return INDEXED


def mask_attrs(mask: IndexMask) -> tuple[tuple[str, object], ...] | None:
    """The `mask` op's attributes of a mask of a 2-D tile (None for another rank)."""
    if len(mask.coefs) != 2:
        return None
    return (("pred", mask.pred), ("rows", mask.coefs[0]), ("cols", mask.coefs[1]), ("offset", mask.const))


GRID_TERM, LOOP_TERM = "pid_x", "iv"


def position_attrs(index: Index, rows: int, lower: int | None) -> tuple[tuple[str, object], ...] | str:
    """The `position` attributes of a 2-D index (element (r, c) is A r + B c + P g0 + Q l0 + K), or
    why it has none: the program id's coefficient must be P times the tile's `rows` (g0 = pid *
    rows: the tile's first row along the grid), the induction variable's is Q (l0 = iv - `lower`,
    the loop from a constant `lower`)."""
    if len(index.coefs) != 2:
        return f"a position of a rank-{len(index.coefs)} tile (a position is a 2-D tile's)"
    terms = dict(index.terms)
    unknown = sorted(set(terms) - {GRID_TERM, LOOP_TERM})
    if unknown:
        return f"it reads {unknown[0]}"
    pid, iv = terms.get(GRID_TERM, 0), terms.get(LOOP_TERM, 0)
    if pid % rows:
        return (f"its row program id's coefficient {pid} is not a multiple of the tile's {rows} rows "
                "(the grid term is the first row of the tile: program id x tile rows)")
    if iv and lower is None:
        return "the loop does not start at a constant: its induction variable is no iteration x step"
    attrs = [("rows", index.coefs[0]), ("cols", index.coefs[1])]
    attrs += [("grid", pid // rows)] if pid else []
    attrs += [("loop", iv)] if iv else []
    const = index.const + iv * (lower or 0)
    attrs += [("offset", const)] if const else []
    return tuple(attrs)
