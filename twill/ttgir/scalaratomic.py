"""A tile reduced to one value after the loop, and a global scalar updated atomically by it: the FP8
training amax, `tl.atomic_max(AMAX, tl.max(tl.abs(acc)))` (docs/ttgir-import.md, section 11).

Triton writes the whole-tile reduction as `tt.reshape` of the [M, N] tile to [M * N] (`allow_reorder`),
then `tt.reduce` along axis 0 with a max, min or add combiner: the epilogue's `reduce_K x {axis = 1}`
(one value a row) then `reduce_K {axis = 0}` of that (one value, `f32[1]`). A float `tl.atomic_max`
(`_min`) is lowered by Triton to two masked integer atomics on the value's bits: `max` where the sign
bit is clear (non-negative floats order as their bits as signed ints) and `umin` where it is set
(negative floats order reversed as unsigned ints); `min` and `umax` for atomic_min. Both halves on one
pointer and one value are the float `max` (`min`); `tt.atomic_rmw fadd` of one value is `add`. Each is an
atomic output of the epilogue: `output AMAX = m {atomic = max}` (docs/formats.md, "The epilogue").

Anything else on these values is an error at its op: a reshaped tile read by anything but a reduction,
one half of a float atomic alone, an atomic on a tile (`MemoryUpdate`, epilogue.py: the split-K
GEMM's in-place tile update stays refused), a masked `fadd`.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import Diagnostic, InputError
from ..ir import TensorType


@dataclass(frozen=True)
class Flat:
    """A rank-2 tile of the epilogue reshaped to one dimension (read only by a whole-tile reduction)."""

    value: object  # the EVal of the [M, N] tile


@dataclass(frozen=True)
class Bits:
    """One f32 value of the epilogue bitcast to i32."""

    value: object


@dataclass(frozen=True)
class SignBit:
    """`Bits >> 31` (arith.shrui): the sign bit of the value."""

    value: object


@dataclass(frozen=True)
class SignTest:
    """`sign == 0` (nonneg) or `sign != 0` of the value: the mask of one half of a float atomic."""

    value: object
    nonneg: bool


@dataclass(frozen=True)
class ArgPointer:
    """A pointer argument of the kernel, as it is or bitcast (`!tt.ptr<f32> -> !tt.ptr<i32>`)."""

    arg: str


# (integer atomic, sign half) -> the float atomic it is half of
HALVES = {("max", True): "max", ("umin", False): "max", ("min", True): "min", ("umax", False): "min"}
FLOAT_RMW = {"fadd": "add"}
ATOMIC_HINT = "docs/ttgir-import.md, section 11 (\"A scalar atomic\")"


class ScalarAtomics:
    """The mixin of epilogue._After that reads these ops (self.env, self.add, self.error, self.sig...)."""

    def scalar_atomic(self, op, vals: list) -> bool:
        """Lower `op` if it is a step of a whole-tile reduction or a scalar atomic; False otherwise."""
        from .epilogue import EVal
        names = [n for n, _ in op.operands()]
        markers = (Flat, Bits, SignBit, SignTest, ArgPointer)
        if op.name == "tt.reshape" and vals and isinstance(vals[0], EVal) and self._flattens(op):
            self.bind(op, Flat(vals[0]))
            return True
        if any(isinstance(v, Flat) for v in vals):
            if op.name != "tt.reduce":
                raise self.error(op, f"'{op.name}' after the loop reads a tile reshaped to one dimension: only a "
                                     "reduction of the whole tile to one value (`tl.max(x)` with no axis) is imported")
            self.bind(op, self.whole_reduce(op, vals[0].value))
            return True
        if op.name == "tt.bitcast" and op.results and names:
            if isinstance(vals[0], EVal) and self._one_value(vals[0]):
                self.bind(op, Bits(vals[0]))
                return True
            arg = self._pointer_arg(names[0], vals[0])
            if arg is not None:
                self.bind(op, ArgPointer(arg))
                return True
            return False
        if op.name == "arith.shrui" and len(vals) == 2 and isinstance(vals[0], Bits) and _const(vals[1]) == 31:
            self.bind(op, SignBit(vals[0].value))
            return True
        if op.name == "arith.cmpi" and len(vals) == 2 and isinstance(vals[0], SignBit) and _const(vals[1]) == 0 \
                and op.tokens and op.tokens[0].text.rstrip(",") in ("eq", "ne"):
            self.bind(op, SignTest(vals[0].value, op.tokens[0].text.rstrip(",") == "eq"))
            return True
        if op.name == "tt.atomic_rmw" and len(vals) >= 2 and (isinstance(vals[1], Bits) or (
                isinstance(vals[1], EVal) and self._one_value(vals[1]))):
            self.rmw(op, names, vals)
            return True
        if any(isinstance(v, markers) for v in vals):
            raise self.error(op, f"'{op.name}' after the loop reads the bits of a reduced value or an atomic's "
                                 "pointer: only Triton's lowering of a float atomic max/min (a `max`/`umin` pair "
                                 "on the value's bits, masked by its sign) is imported", ATOMIC_HINT)
        return False

    def _flattens(self, op) -> bool:
        ins, outs = self.lw.signature(op)
        return bool(ins and outs) and len(ins[0].shape) == 2 and len(outs[0].shape) == 1 \
            and outs[0].shape[0] == ins[0].shape[0] * ins[0].shape[1]

    def _one_value(self, v) -> bool:
        t = self.ops[v.key].type if v.kind == "op" else self.inputs[v.key].type if v.kind == "input" else None
        return t is not None and t.shape == (1,)

    def _pointer_arg(self, name: str, value) -> str | None:
        if isinstance(value, ArgPointer):
            return value.arg
        pointers = {n for n, kind in self.sig.args if kind == "pointer"}
        return name if name in pointers else None

    def whole_reduce(self, op, x) -> object:
        """`tt.reduce` of a flattened [M, N] tile: `reduce_K x {axis = 1}` ([M]) then `{axis = 0}` ([1])."""
        from .opnames import ADD_COMBINERS, MAX_COMBINERS, MIN_COMBINERS
        combiner = [o.name for o in op.body() if o.name != "tt.reduce.return"]
        kind = next((k for k, names in (("sum", ADD_COMBINERS), ("max", MAX_COMBINERS), ("min", MIN_COMBINERS))
                     if len(combiner) == 1 and combiner[0] in names), None)
        t = self.ops[x.key].type if x.kind == "op" else None
        if kind is None:
            raise self.error(op, "'tt.reduce' of the whole tile after the loop: only a sum, max or min is imported")
        if t is None or x.kind != "op":  # (a carry: its type is the carry's)
            t = self._tile_type(x)
        rows = self.add(op, f"reduce_{kind}", [x], (("axis", 1),), TensorType("f32", (t.shape[0],)))
        return self.add(op, f"reduce_{kind}", [rows], (("axis", 0),), TensorType("f32", (1,)))

    def _tile_type(self, x) -> TensorType:
        carry = next((c for c in self.lw.carries if c.ssa == x.key), None)
        if x.kind == "carry" and carry is not None:
            return carry.type
        if x.kind == "input":
            return self.inputs[x.key].type
        raise InputError(Diagnostic("a whole-tile reduction of a value with no tile type", None))

    def rmw(self, op, names: list, vals: list) -> None:
        kind = op.tokens[0].text.rstrip(",") if op.tokens else ""
        arg = self._pointer_arg(names[0], vals[0])
        mask = vals[2] if len(vals) > 2 else None
        if arg is None:
            raise self.error(op, "'tt.atomic_rmw' after the loop of one value to an address that is no pointer "
                                 "argument of the kernel (only a global scalar, `tl.atomic_max(AMAX, v)`, is "
                                 "imported)", ATOMIC_HINT)
        if isinstance(vals[1], Bits):
            half = HALVES.get((kind, getattr(mask, "nonneg", None))) if isinstance(mask, SignTest) \
                and mask.value == vals[1].value else None
            if half is None:
                raise self.error(op, f"'tt.atomic_rmw {kind}' after the loop on the bits of a float is not a half "
                                     "of Triton's float atomic max/min (`max` masked by `sign == 0`, `umin` by "
                                     "`sign != 0`; `min` and `umax`)", ATOMIC_HINT)
            self.halves.append((vals[1].value, arg, half, isinstance(mask, SignTest) and mask.nonneg, self.lw.span(op)))
            return
        if kind not in FLOAT_RMW or mask is not None:
            raise self.error(op, f"'tt.atomic_rmw {kind}' after the loop of one value: only `fadd` with no mask, "
                                 "and a float max or min, update a global scalar", ATOMIC_HINT)
        self.halves.append((vals[1], arg, FLOAT_RMW[kind], None, self.lw.span(op)))

    def paired_atomics(self) -> tuple:
        """(value, argument, max | min | add, span) of each scalar atomic: a float max or min from both of
        its halves on one value and pointer (one half alone is an error at it)."""
        out, halves = [], {}
        for value, arg, kind, nonneg, span in self.halves:
            if nonneg is None:
                out.append((value, arg, kind, span))
                continue
            halves.setdefault((value, arg, kind), {})[nonneg] = span
        for (value, arg, kind), sides in halves.items():
            if len(sides) != 2:
                span = next(iter(sides.values()))
                raise InputError(Diagnostic(
                    f"'tt.atomic_rmw' of the bits of a float to {arg}: only the {'non-negative' if True in sides else 'negative'} "
                    f"half of a float atomic {kind} (the other sign's update is missing)", span, ATOMIC_HINT))
            out.append((value, arg, kind, sides[True]))
        return tuple(out)


def _const(v):
    from .values import Const
    return v.value if isinstance(v, Const) and isinstance(v.value, (int, float)) and not isinstance(v.value, bool) else None
