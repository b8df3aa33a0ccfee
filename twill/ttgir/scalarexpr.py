"""Scalars computed from the kernel's arguments: the prologue's scalar ops (`.tir` `prologue { ... }`).

A float scalar argument that a binary op of one tile reads is a prologue scalar (build.py: `div x, p` with
`scalar p : f32`). A scalar the kernel computes from its float arguments (an integer one made a float by
`arith.sitofp`) and constants by arithmetic and the math library (dropout's `x / (1 - p)`: `arith.subf %one,
%p`; `math.sqrt` of an argument) is an `Expr`, a tree of table opcodes over the arguments; the op that reads it
reads the prologue op computing it, `f32[1]` ops each role runs once before its loop on one value
(emit/epilogue.py, SCALAR_MATH):

    prologue {
      scalar p : f32
      output_neg = neg p : f32[1]
      output     = add output_neg : f32[1] {scalar = 1}      # 1 - p
    }
    loop { ...  y = div x, output : f32[64,128] ... }

A constant operand is the op's `{scalar = V}`; a constant first operand of `sub` or `div` is the loop's rule
(scalars.CONSTANT_FIRST): `neg` then `add`, `recip` then `mul`. A product of arguments and constants that a
multiply or divide of a tile reads stays the chain of one op per argument (build._factor_chain).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import Span
from ..ir import Op, Operand, TensorType
from ..vocab import LIBM

# the table opcodes a scalar expression may apply: those the prologue runs on one value (emit-cuda's scalar
# forms); fuse.ARITH_OPCODES' integer, bitwise, select and fma ops are left out (the scalar is then no expression)
OPCODES = frozenset({"add", "sub", "mul", "div", "max", "min", "max_nan", "min_nan", "neg", "abs", "exp", "log",
                     "log2", "sqrt", "rsqrt", "tanh", *LIBM})
INTEGER_OPS = ("i", "si", "ui")  # arith.addi, arith.maxsi, ...: integer arithmetic, no expression
CONSTANT_FIRST = {"sub": ("neg", "add"), "div": ("recip", "mul")}  # c OP x: the op on x, then c as {scalar}


@dataclass(frozen=True)
class Arg:
    """A scalar argument of the kernel: a prologue scalar (`scalar NAME : f32`, i32 for an integer made a
    float)."""

    name: str
    dtype: str = "f32"


@dataclass(frozen=True)
class Expr:
    """`opcode` of `operands` (Expr or Arg) with the constant `scalar` (None: none), as one prologue op
    named after `ssa`, the TTGIR value it computes."""

    opcode: str
    operands: tuple
    scalar: float | None
    ssa: str
    span: Span | None = None

    def args(self) -> list[Arg]:
        out = []
        for o in self.operands:
            for a in (o.args() if isinstance(o, Expr) else [o]):
                if a not in out:
                    out.append(a)
        return out


def of(mlir: str, operands: list, ssa: str, span: Span | None) -> Expr | None:
    """The expression `mlir` computes from `operands` (each an Arg, an Expr or a finite number), None where it
    is none (an op the prologue cannot run on one value, no argument read, two constants, a constant divisor
    of 0)."""
    from .fuse import ARITH_OPCODES  # (fuse imports the lowering, which imports this)
    opcode = ARITH_OPCODES.get(mlir) if not mlir.endswith(INTEGER_OPS) else None
    opcode = opcode if opcode in OPCODES else None
    if opcode is None or not any(isinstance(o, (Arg, Expr)) for o in operands):
        return None
    numbers = [o for o in operands if not isinstance(o, (Arg, Expr))]
    if any(not math.isfinite(float(n)) for n in numbers) or len(numbers) > 1:
        return None
    if len(operands) == 1:
        return Expr(opcode, tuple(operands), None, ssa, span) if opcode not in CONSTANT_FIRST else None
    if len(operands) != 2:
        return None
    a, b = operands
    if not numbers:
        return Expr(opcode, (a, b), None, ssa, span)
    if not isinstance(b, (Arg, Expr)):  # x OP c
        if opcode == "div" and float(b) == 0:
            return None
        return Expr(opcode, (a,), float(b), ssa, span)
    if opcode in CONSTANT_FIRST:  # c - x, c / x
        first, then = CONSTANT_FIRST[opcode]
        inner = Expr(first, (b,), None, f"{ssa}_{first}", span)
        return inner if float(a) == (0.0 if opcode == "sub" else 1.0) else Expr(then, (inner,), float(a), ssa, span)
    return Expr(opcode, (b,), float(a), ssa, span)  # c + x, c * x, max(c, x): commutative


def ops(expr: Expr, claim, base_name, scalar, done: dict) -> tuple[str, list[Op]]:
    """The prologue ops computing `expr` (those not in `done` yet, Expr -> name; updated): (the name of its
    result, the new ops, operands before their readers). `scalar(arg)` is the prologue scalar an argument is."""
    out: list[Op] = []

    def walk(e) -> str:
        if isinstance(e, Arg):
            return scalar(e)
        if e in done:
            return done[e]
        names = [walk(o) for o in e.operands]
        name = claim(base_name(e.ssa), fallback=e.opcode)
        attrs = (("scalar", attr_number(e.scalar)),) if e.scalar is not None else ()
        out.append(Op(name, e.opcode, tuple(Operand(n) for n in names), TensorType("f32", (1,)), attrs, True, e.span))
        done[e] = name
        return name

    return walk(expr), out


def attr_number(v: float) -> int | float:
    """A number as a `{scalar = V}` holds it: an int where it is one (`15`, not `15.0`), else a float (inf too)."""
    return int(v) if float(v).is_integer() else float(v)
