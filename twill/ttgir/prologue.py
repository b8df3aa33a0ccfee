"""The work before the loop that the loop reads: the graph's prologue (`.tir` `prologue { ... }`).

A tile the loop reads that is computed before it from data the caller has (dQ's
`lse2 = tl.load(LSE + rows) * log2(e)`) is a *computed input*: the prologue computes it once per
tile, before the loop, in the role that reads it (twill/emit/prologue.py). The ops before the loop
are followed back from that tile, through elementwise arithmetic and conversions of one vocabulary
opcode each (a constant operand is its `{scalar = V}`), to the loads and tensor arguments they read,
which are the graph's inputs. A tile computed by anything else before the loop (a reduction, an mma)
stays an input with a warning (build.py).

The exp2 scale. The import folds the kernel's scale of an exp2's argument into the loop's
`exp2_scale` (`exp2 s, b` is exp2((s - b) * exp2_scale)). Where the kernel subtracts b from the
scaled scores (`exp2(s * c - b)`, the fused chain's multiply feeding its subtraction), b is in the
scaled units and the loop reads `b / exp2_scale`: a prologue op `B_unscaled = div B, exp2_scale`
(the epilogue's rule for the carries an exp2 subtracts, the other way round).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import vocab
from ..ir import Epilogue, Op, Operand, TensorType, Value
from .fuse import ARITH_OPCODES, Body, Group
from .values import Ref

KNOB = "exp2_scale"
SOURCES = ("load", "arg", "move")  # data the caller has: an input of the graph


@dataclass
class Prologue:
    ops: list  # Op, in order
    computed: dict  # Ref -> name: the computed inputs (the prologue results the loop reads)
    real: dict  # Ref -> name: the inputs the prologue reads
    scalars: tuple = ()

    def graph_parts(self) -> tuple[tuple[Value, ...], Epilogue]:
        """The computed inputs (Value.computed) and the block."""
        vals = tuple(Value(op.name, op.type, "input", None, op.span, (("prologue", True),)) for op in self.ops)
        scalars = tuple(Value(KNOB, TensorType("f32", (1,)), "scalar") for _ in self.scalars[:1])
        return vals, Epilogue(scalars, tuple(self.ops), ())


def _opcode(n) -> str | None:
    if n.kind == "conv":
        return "convert"
    if n.kind == "position":  # each row's index (scalars._row_remainder)
        return "position"
    if n.kind == "ew" and n.mlir in ARITH_OPCODES:
        return ARITH_OPCODES[n.mlir]
    return None


def build(body: Body, inputs: dict, claim, base_name) -> Prologue | None:
    """The prologue computing each input of `inputs` (Ref -> name) that a node before the loop
    computes; None where there is none. `inputs` keeps the refs of data the caller has."""
    ops, computed, real, done = [], {}, {}, {}

    def walk(ref: Ref, name: str | None = None, reader: str = "input") -> str | None:
        if ref in done:
            return done[ref]
        n = body.nodes[ref.index] if ref.kind == "node" else None
        if n is None or n.kind in SOURCES:  # named after itself, else after what it is read for (lse2_in)
            real[ref] = name or claim(base_name(n.ssa if n is not None else None), f"{reader}_in", fallback="input")
            done[ref] = real[ref]
            return real[ref]
        opcode = _opcode(n)
        # a constant, a launch scalar, a scalar computed from launch scalars (build._launch)
        held = any(k in dict(n.attrs) for k in ("scalar", "launch", "launch_expr"))
        numerator = dict(n.attrs).get("numerator")
        if numerator is not None:  # c / x: recip x, times c
            opcode, held = "recip", True
        d = vocab.lookup(opcode) if opcode is not None else None
        if d is None or (d.family == "binary" and len(n.operands) == 1 and not held):
            return None
        out = name or claim(base_name(n.ssa), fallback=opcode)
        names = [walk(r, reader=out) for r in n.operands]
        if None in names:
            return None
        if numerator is not None:
            inv = out if numerator == 1.0 else claim(f"{out}_recip", fallback="recip")
            ops.append(Op(inv, "recip", tuple(Operand(x) for x in names), n.type, (), True, n.span))
            if numerator != 1.0:
                ops.append(Op(out, "mul", (Operand(inv),), n.type, (("scalar", numerator),), True, n.span))
            done[ref] = out
            return out
        attrs = n.attrs if opcode == "position" else \
            tuple((k, v) for k, v in n.attrs if k in ("scalar", "launch", "launch_i32", "launch_expr"))
        ops.append(Op(out, opcode, tuple(Operand(x) for x in names), n.type, attrs, True, n.span))
        done[ref] = out
        return out

    for ref, name in list(inputs.items()):
        n = body.nodes[ref.index] if ref.kind == "node" else None
        if n is None or n.kind in SOURCES:
            continue
        mark = (len(ops), dict(real), dict(done))
        if walk(ref, name) is None:
            del ops[mark[0]:]
            real, done = mark[1], mark[2]
            continue
        computed[ref] = name
    if not computed:
        return None
    return Prologue(ops, computed, real)


def scaled_subtrahends(body: Body, groups: list[Group], refs) -> dict[int, Ref]:
    """Group root -> the input ref its exp2 subtracts from the scaled scores (`exp2(s * c - b)`):
    the chain's subtraction reads b and the result of the chain's multiply by a scalar."""
    out = {}
    for g in groups:
        if g.opcode != "exp2" or len(g.operands) != 2 or g.operands[1] not in refs:
            continue
        b, members = g.operands[1], set(g.members)
        for i in g.members:
            n = body.nodes[i]
            if n.mlir != "arith.subf" or len(n.operands) != 2 or n.operands[1] != b:
                continue
            a = n.operands[0]
            if a.kind == "node" and a.index in members and body.nodes[a.index].mlir == "arith.mulf" \
                    and len(body.nodes[a.index].operands) == 1:
                out[g.root] = b
    return out
