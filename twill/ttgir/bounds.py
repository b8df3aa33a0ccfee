"""Masks compared with bounds given at launch: what each one is, and whether the graph may drop it.

A Triton kernel guards the edges of its tensors with masks of the element's index against a bound
the launch gives (``tl.load(p, mask=offs_k < K - k * BK, other=0)``, ``tl.store(p, c, mask=(rm < M) &
(rn < N))``, ``tl.where(start_n + cols < N_KV, s, -inf)``). The graph does not carry such masks: the
emitted kernel reads its tiles with TMA, which fills the elements past a tensor's end with zeros, writes
them with TMA stores, which drop the elements past its end, and masks a partial last tile of the
loop itself (docs/emit-cuda.md). So a mask is dropped where it is one of those, and an error at its
TTGIR line where it is anything else: dropped, the kernel would compute something else.

Each comparison (``arith.cmpi``) of a mask (the ``arith.andi`` of several) is evaluated with the
address polynomials of `addresses.py` (the element's position, program ids, induction variables,
scalar arguments), as ``sum(coef_d * position_d) + rest PRED 0``:

- a **bound** of dimension d: ``coef_d * position_d + offset < bound`` with one positive constant
  position coefficient and a bound that reads a scalar the launch gives (an argument, or a value
  computed from one): the tensor's edge;
- **uniform**: no position term (a whole-tile predicate, as Triton's pipeliner guards the copies of
  iterations past the loop's end with);
- **always** true: ``0 <= index`` of an index of positions and program ids with coefficients >= 0
  (the lower half of a block pointer's `boundary_check`, ``offs >= 0 & offs < M``);
- anything else (a constant bound, a product of indices, a comparison of two positions: a causal or
  banded mask) is not a bound.

A load's mask is dropped where every comparison is a bound, uniform or always true and the load's `other` is 0
(or absent): TMA's zero fill computes the same. A store's where every comparison is a bound or uniform.
``select(mask, x, -inf)`` in the loop is dropped where its mask is one bound of the dimension that
runs along the loop, ``iv + position < UB`` with UB the loop's own upper bound: that is the loop's
partial last tile, which emit-cuda masks to -inf before each rowmax and exp2 (`emit/ragged.py`; a
kernel whose masked value has another reader refuses a partial tile at launch instead).
"""
from __future__ import annotations

from dataclasses import dataclass

from .addresses import Addr, Addresses, poly_int


@dataclass(frozen=True)
class Compare:
    """One comparison of a mask: ``sum(coefs[d] * position[d]) + const PRED 0``, PRED lt or le
    (gt/ge are negated into them), None where a side is not a polynomial."""

    pred: str
    diff: Addr | None
    kind: str  # "bound", "uniform" or "other"
    dim: int = -1  # a bound's dimension


NORMAL = {"slt": ("lt", 1), "ult": ("lt", 1), "sle": ("le", 1), "ule": ("le", 1),
          "sgt": ("lt", -1), "ugt": ("lt", -1), "sge": ("le", -1), "uge": ("le", -1)}
VIEWS = {"tt.splat", "tt.broadcast", "ttg.convert_layout"}


def _atoms(poly) -> set[str]:
    return {a for monomial, _ in poly for a in monomial}


def _classify(pred: str, diff: Addr | None) -> Compare:
    if diff is None:
        return Compare(pred, None, "other")
    ints = [poly_int(c) for c in diff.coefs]
    if _never_negative(pred, ints, diff):
        return Compare(pred, diff, "always")
    if not diff.coefs or all(c == 0 for c in ints):
        return Compare(pred, diff, "uniform" if all(c == 0 for c in ints) else "other")
    if any(c is None for c in ints) or sum(1 for c in ints if c) != 1:
        return Compare(pred, diff, "other")
    dim = next(d for d, c in enumerate(ints) if c)
    # the bound: a term of a launch scalar subtracted (not a program id nor an induction variable)
    launch = any(c < 0 and any(not (a.startswith("pid_") or a.startswith("iv:")) for a in m)
                 for m, c in diff.const if m)
    if ints[dim] > 0 and launch:
        return Compare(pred, diff, "bound", dim)
    return Compare(pred, diff, "other")


def _never_negative(pred: str, ints: list, diff: Addr) -> bool:
    """``0 <= index`` of an index that is a sum of positions and program ids with coefficients >= 0
    (a block pointer's boundary check, ``offs >= 0`` beside ``offs < M``): true at every element."""
    if pred != "le" or any(c is None or c > 0 for c in ints) or not any(ints):
        return False
    for monomial, c in diff.const:
        if not isinstance(c, int) or c > 0 or any(not a.startswith("pid_") for a in monomial):
            return False
    return True


class Masks:
    """The comparisons of the masks of one function (`addresses` evaluates their sides)."""

    def __init__(self, addresses: Addresses):
        self.addr = addresses

    def compares(self, name: str, depth: int = 0) -> list[Compare] | None:
        """The comparisons `name` (an i1 tensor) is the conjunction of; None where it is anything else."""
        op = self.addr.defs.get(name) or self.addr.defs.get(name.split("#")[0])
        if op is None or depth > 64:
            return None
        args = [n for n, _ in op.operands()]
        if op.name == "arith.andi" and len(args) == 2:
            a, b = self.compares(args[0], depth + 1), self.compares(args[1], depth + 1)
            return None if a is None or b is None else a + b
        if op.name in VIEWS and args:
            return self.compares(args[0], depth + 1)
        if op.name == "tt.expand_dims" and args:
            inner = self.compares(args[0], depth + 1)
            axis = _axis(op)
            if inner is None or axis is None:
                return None
            return [_classify(c.pred, Addr(c.diff.base, c.diff.coefs[:axis] + ((),) + c.diff.coefs[axis:],
                                           c.diff.const) if c.diff is not None and c.diff.coefs else c.diff)
                    for c in inner]
        if op.name == "arith.cmpi" and len(args) == 2 and op.tokens:
            norm = NORMAL.get(op.tokens[0].text.rstrip(","))
            if norm is None:
                return [Compare("", None, "other")]
            a, b = self.addr.of(args[0]), self.addr.of(args[1])
            if a is None or b is None:
                return [Compare(norm[0], None, "other")]
            diff = a.plus(b, -1) if norm[1] > 0 else b.plus(a, -1)
            return [_classify(norm[0], diff)]
        if op.name == "arith.constant":
            return []  # a splat true (a mask of every element)
        return None

    def edge_only(self, name: str) -> bool:
        """Whether mask `name` only guards the edges of tensors (every comparison a bound or uniform)."""
        cs = self.compares(name)
        return cs is not None and all(c.kind in ("bound", "uniform", "always") for c in cs)

    def loop_tail(self, name: str, iv: str | None, negated: bool = False, peeled: bool = False) -> int | None:
        """The dimension d where mask `name` (its complement, `negated`) is ``iv + position_d < UB``
        with UB the upper bound of the loop of induction variable `iv` (the loop's partial last
        tile), else None."""
        cs = self.compares(name)
        if negated:  # not (d <= 0) is -d < 0; the complement of a conjunction is no one comparison
            if not cs or len(cs) != 1 or cs[0].pred != "le" or cs[0].diff is None:
                return None
            d = cs[0].diff
            flipped = Addr(d.base, tuple(_neg(c) for c in d.coefs), _neg(d.const))
            cs = [_classify("lt", flipped)]
        if not cs or iv is None or iv not in self.addr.loops:
            return None
        bounds = [c for c in cs if c.kind == "bound"]
        if len(bounds) != 1 or any(c.kind != "uniform" for c in cs if c is not bounds[0]):
            return None
        c = bounds[0]
        if c.pred != "lt" or poly_int(c.diff.coefs[c.dim]) != 1:
            return None
        upper = self.addr.of(self.addr.loops[iv].upper)
        if upper is None or upper.coefs:
            return None
        if c.diff.const == _plus_iv(upper.const, iv):
            return c.dim
        # a copy Triton's pipeliner peeled before the loop: iteration j's mask, `position + j * step < UB`
        from .addresses import poly_add
        rest = dict(poly_add(c.diff.const, upper.const))
        if peeled and set(rest) <= {()}:
            return c.dim
        return None


def _neg(poly):
    return tuple((m, -c) for m, c in poly)


def _plus_iv(upper_const, iv: str):
    """The constant part of ``iv - UB``."""
    from .addresses import poly_add
    return poly_add((((f"iv:{iv}",), 1),), upper_const, -1)


def _axis(op) -> int | None:
    from .opnames import int_attr
    return int_attr(op, "axis")
