"""`tt.clampf x, lo, hi, propagateNan = P` (`tl.clamp`) as the two ops Triton lowers it to: min(max(x, lo), hi).

Triton's NVIDIA lowering (ClampFOpConversion) computes `minnum(maxnum(x, lo), hi)` for propagateNan = none (a NaN x
gives lo: maxnum gives the other operand) and `minimum(maximum(x, lo), hi)` for all (a NaN x gives NaN). The import
reads it as `arith.maxnumf` and `arith.minnumf` (the vocabulary's `max` and `min`, fmaxf / fminf) or
`arith.maximumf` and `arith.minimumf` (`max_nan` and `min_nan`, PTX's max.NaN / min.NaN): two MOps standing for the
one, the first's result the clamp's with `_clamp_lo` before its SSA number (`out_40`: `out_clamp_lo_40`, which the
.tir names as `out_clamp_lo` in every dump whatever its numbering), both placed at the clampf's head, so every lowering that knows max and min
(the loop's, the epilogue's) knows a clamp.
"""
from __future__ import annotations

import re

from .lexer import Token
from .parser import MOp
from .types import last_top_level

CLAMP = "tt.clampf"
NAN_OPS = {False: ("arith.maxnumf", "arith.minnumf"), True: ("arith.maximumf", "arith.minimumf")}


def propagates_nan(op: MOp) -> bool:
    """Whether the clamp's `propagateNan` is `all` (none where the attribute is absent: Triton's default)."""
    toks = op.tokens
    for i in range(len(toks) - 2):
        if toks[i].text == "propagateNan" and toks[i + 1].is_("="):
            return toks[i + 2].text == "all"
    return False


def split(op: MOp) -> tuple[MOp, MOp] | None:
    """The clamp's max and min MOps (see the module docstring); None where it is not `x, lo, hi : TYPE`."""
    operands = op.operands()
    colon = last_top_level(op.tokens, ":")
    if len(operands) != 3 or colon is None or len(op.results) != 1:
        return None
    (x, tx), (lo, tlo), (hi, thi) = operands
    ty = op.tokens[colon:]
    comma = Token("punct", ",", op.head.line, op.head.col)
    low = re.sub(r"(_\d+)?$", lambda m: "_clamp_lo" + (m.group(1) or ""), op.results[0], count=1)
    first, second = NAN_OPS[propagates_nan(op)]
    tlow = Token("ssa", "%" + low, tx.line, tx.col)
    return (MOp(first, (low,), (tx, comma, tlo) + ty, (), op.head, op.loc),
            MOp(second, op.results, (tlow, comma, thi) + ty, (), op.head, op.loc))
