"""Triton's reduction of a value and its index (`tl.argmax`, `tl.argmin`), read from its combiner.

`tl.argmax(x, axis)` is a ``tt.reduce`` of two tensors, the values and their indices (`tl.arange`), whose combiner
is Triton's `_argmax_combine_tie_break_left` (standard.py)::

    tie = v1 == v2 and i1 < i2        (arith.cmpf oeq, arith.cmpi slt, arith.andi)
    gt  = v1 > v2 or tie              (arith.cmpf ogt, arith.ori)
    return select(gt, v1, v2), select(gt, i1, i2)

and `tl.argmin`'s the same with `v1 < v2` (``olt``): the pair of the largest (smallest) value, ties to the smallest
index. `kind` reads that shape back, "max" or "min", or None for any other two-value combiner (an
`associative_scan` of the user's own, `tie_break_left=False`), which the import refuses. Where a value is NaN the
combiner is not associative (`NaN > v` and `NaN == v` are false), so Triton's own answer then depends on the order of
its reduction tree: the import gives no NaN rule of its own (docs/ttgir-import.md, section 8).
"""
from __future__ import annotations

from .parser import MOp

# the comparison that makes the first pair win -> the reduction's kind
KINDS = {"ogt": "max", "olt": "min"}
# the value's identity: a pair that the combiner always gives up for the other (-inf / +inf as MLIR prints f32),
# its index the largest i32, so that a tie with it is no tie
IDENTITY = {"max": "0xFF800000", "min": "0x7F800000"}
INDEX_IDENTITY = 2147483647


def _pred(op: MOp) -> str:
    return op.tokens[0].text.rstrip(",") if op.tokens else ""


def kind(op: MOp) -> str | None:
    """"max" or "min" where `op`, a ``tt.reduce`` of two tensors, combines them as `tl.argmax` / `tl.argmin` do
    (module doc); else None."""
    if len(op.regions) != 1 or len(op.regions[0]) != 1 or len(op.operands()) != 2:
        return None
    block = op.regions[0][0]
    args = [name for name, _ in block.args]
    if len(args) != 4:
        return None
    v1, i1, v2, i2 = args
    defs = {r: o for o in block.ops for r in o.results}

    def of(name: str, opname: str) -> tuple[MOp, list[str]] | None:
        o = defs.get(name)
        return (o, [n for n, _ in o.operands()]) if o is not None and o.name == opname else None
    ret = block.ops[-1] if block.ops else None
    if ret is None or ret.name != "tt.reduce.return" or len(ret.operands()) != 2 or len(block.ops) != 8:
        return None
    rv, ri = (n for n, _ in ret.operands())
    sv, si = of(rv, "arith.select"), of(ri, "arith.select")
    if sv is None or si is None or sv[1][1:] != [v1, v2] or si[1][1:] != [i1, i2] or sv[1][0] != si[1][0]:
        return None
    either = of(sv[1][0], "arith.ori")
    if either is None or len(either[1]) != 2:
        return None
    a, b = (of(n, "arith.cmpf") for n in either[1])
    gt, tie_name = (a, either[1][1]) if a is not None and _pred(a[0]) in KINDS else (b, either[1][0])
    tie = of(tie_name, "arith.andi")
    if gt is None or _pred(gt[0]) not in KINDS or gt[1] != [v1, v2] or tie is None:
        return None
    parts = {defs[n].name: (defs[n], [m for m, _ in defs[n].operands()]) for n in tie[1] if n in defs}
    eq, lt = parts.get("arith.cmpf"), parts.get("arith.cmpi")
    if eq is None or lt is None or _pred(eq[0]) != "oeq" or eq[1] != [v1, v2] or _pred(lt[0]) != "slt" or lt[1] != [i1, i2]:
        return None
    return KINDS[_pred(gt[0])]
