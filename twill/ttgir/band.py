"""Masks of a band of diagonals in one loop: causal and sliding-window attention written as one loop.

``tl.where(keep, s, -inf)`` of the scores, whose rows are the query tile's (``offs_m = pid * BM +
arange(BM)``) and whose columns run along the loop (``cols = start_n + arange(BN)``), with ``keep``
a comparison or an ``&`` of comparisons of the key ``k = iv + c`` against the query ``q = pid * BM +
r``, each offset by constants and at most one integer argument given at launch (the window):

    keep = (cols[None, :] <= offs_m[:, None]) & (cols[None, :] > offs_m[:, None] - WINDOW)

Each comparison is a bound of the diagonal offset ``d = k - q``: ``d <= U + a * w`` (an upper bound)
or ``d >= L + b * w`` (a lower one), w the argument. The conjunction is the graph's ``causal_mask x
{upper = U[, upper_by = a][, lower = L][, lower_by = b][, arg = w]}`` (at most one bound of each
side; ``upper`` 0 and nothing else is the plain causal mask, written ``causal_mask x``), which
emit-cuda computes from the query tile's first row and the iteration's first key, and from which it
derives each query tile's first and last key block (docs/emit-cuda.md, "Causal loops").

Read with `bounds.Masks` (the comparisons' sides as polynomials of the element's position, the
program ids, the induction variables and the arguments). Since emit-cuda runs each tile's loop over
the key blocks the band keeps, the loop's own bounds must visit every key the band keeps:
`covers` evaluates them (a small interpreter of the scalar arithmetic they are computed with) at
sample program ids and arguments, and a loop that could skip a kept key is an error at the select.
"""
from __future__ import annotations

from ..band import BAND_ATTRS, Band, from_attrs  # noqa: F401 (the op's band, re-exported)
from .addresses import poly_int

GRID_ATOM = "pid_x"


def read(compares, key_start, rows: int, int_args: set[str]) -> Band | str:
    """The band of `compares` (bounds.Compare of a 2-D mask, dim 0 the query rows and dim 1 the
    keys), or why it is none. `key_start` is the polynomial of the iteration's first key: the loop's
    induction variable in the loop (``((("iv:IV",), 1),)``), its lower bound in a copy Triton's
    pipeliner peeled before it."""
    if not compares:
        return "the mask has no comparison"
    start = dict(key_start)
    uppers, lowers, args = [], [], set()
    for c in compares:
        if c.diff is None or c.pred not in ("lt", "le") or len(c.diff.coefs) != 2:
            return "a comparison is not affine in the element's row and column (or an equality)"
        a, b = (poly_int(x) for x in c.diff.coefs)
        if a is None or b is None or b not in (1, -1) or a != -b:
            return ("a comparison is not of the key (the column plus the loop's induction variable) against the "
                    "query (the row plus the program id times the rows)")
        s = b  # the comparison is s * d + K + T PRED 0 with d = key - query
        rest = dict(c.diff.const)
        for monomial, coef in list(start.items()) + [((GRID_ATOM,), -rows)]:
            if rest.get(monomial) != s * coef:
                return "a comparison does not compare the key with the query (the loop's and the program id's terms)"
            del rest[monomial]
        const, scalars = 0, {}
        for monomial, coef in rest.items():
            if not isinstance(coef, int):
                return "a comparison has a coefficient that is not an integer"
            if monomial == ():
                const = coef
            elif len(monomial) == 1 and monomial[0] in int_args:
                scalars[monomial[0]] = coef
            else:
                return f"a comparison reads {' * '.join(monomial)}"
        if len(scalars) > 1:
            return "a comparison reads two arguments"
        args.update(scalars)
        strict = 1 if c.pred == "lt" else 0
        (name, coef), = scalars.items() if scalars else ((None, 0),)
        if s == 1:  # d + K + T PRED 0: d <= -K - T (- 1 if strict)
            uppers.append((-const - strict, -coef))
        else:  # -d + K + T PRED 0: d >= K + T (+ 1 if strict)
            lowers.append((const + strict, coef))
    if len(args) > 1:
        return "the comparisons read two arguments"
    if len(uppers) != 1 or len(lowers) > 1:
        return (f"{len(uppers)} upper and {len(lowers)} lower bounds of the key's offset from its query (a band has "
                "one upper bound and at most one lower one)")
    (u, ub), = uppers
    low = lowers[0] if lowers else (None, 0)
    return Band(u, ub, low[0], low[1], next(iter(args), None))


def shifted(band: Band, by: int) -> Band:
    """The band of the keys `by` later: what a mask computed `by` keys ahead of its iteration keeps
    of that iteration's keys (d + by in the band)."""
    return Band(band.upper + by, band.upper_by, None if band.lower is None else band.lower + by, band.lower_by,
                band.arg)


# -- the loop's bounds against the band ---------------------------------------------------------------

INT_OPS = {
    "arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b, "arith.muli": lambda a, b: a * b,
    "arith.maxsi": max, "arith.minsi": min, "arith.maxui": max, "arith.minui": min,
    "arith.divsi": lambda a, b: int(a / b) if b else None,  # rounds toward zero, as MLIR's
    "arith.divui": lambda a, b: a // b if b and a >= 0 else None,
    "arith.ceildivsi": lambda a, b: -(-a // b) if b else None,
    "arith.floordivsi": lambda a, b: a // b if b else None,
    "arith.remsi": lambda a, b: int(__import__("math").fmod(a, b)) if b else None,
}
PASS = ("arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast", "arith.index_castui")


def evaluate(addr, name: str, env: dict, depth: int = 0) -> int | None:
    """The value of scalar `name` under `env` (program ids as pid_x, ... and the arguments by
    name), from the ops that compute it (`addr.defs`); None where an op is not integer arithmetic."""
    if name in env:
        return env[name]
    if depth > 64:
        return None
    op = addr.defs.get(name) or addr.defs.get(name.split("#")[0])
    if op is None:
        return None
    args = [n for n, _ in op.operands()]
    if op.name == "arith.constant":
        from .addresses import int_constant
        v = int_constant(op)
        return v if isinstance(v, int) and not isinstance(v, bool) else None
    if op.name == "tt.get_program_id":
        return env.get(f"pid_{op.tokens[0].text if op.tokens else 'x'}")
    vals = [evaluate(addr, a, env, depth + 1) for a in args]
    if any(v is None for v in vals):
        return None
    if op.name in PASS and len(vals) == 1:
        return vals[0]
    if op.name in INT_OPS and len(vals) == 2:
        return INT_OPS[op.name](*vals)
    return None


def covers(addr, iv: str, band: Band, rows: int, arg_names: list[str], ahead: int = 0) -> str | None:
    """None where the loop of `iv` visits every key the band keeps for every row of the query tile
    (keys >= 0), at sample program ids and argument values (multiples of 16 for the band's
    argument, a large extent for any other); else why not, with the sample that shows it. `ahead`:
    the loop computes its masks that many keys ahead, its first iteration's peeled before it (it
    visits keys lower bound to upper bound + ahead)."""
    loop = addr.loops.get(iv)
    if loop is None:
        return "the loop's bounds are not read"
    samples = [0, 16, 64, 100, 128, 256, 1024] if band.arg else [0]
    for pid in range(0, 9):
        for w in samples:
            env = {"pid_x": pid, "pid_y": 1, "pid_z": 1}
            env.update({a: 1 << 20 for a in arg_names})
            if band.arg:
                env[band.arg] = w
            lo, hi, step = (evaluate(addr, n, env) for n in (loop.lower, loop.upper, loop.step))
            if lo is None or hi is None or not step or step <= 0:
                return "the loop's bounds are not integer arithmetic of the program ids and the arguments"
            hi += ahead
            q0 = pid * rows
            for r in (0, rows - 1):
                first = q0 + r + (band.lower + band.lower_by * w if band.lower is not None else -(1 << 30))
                last = q0 + r + band.upper + band.upper_by * w
                first = max(first, 0)
                if first > last:
                    continue
                if lo > first or hi <= last:
                    at = f"program id {pid}" + (f", {band.arg} = {w}" if band.arg else "")
                    return (f"at {at} the loop runs over keys {lo} to {hi - 1}, but the mask keeps keys {first} to "
                            f"{last} of row {r}")
    return None
