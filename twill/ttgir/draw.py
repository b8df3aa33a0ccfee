"""A draw of random numbers (rand.py's `twill.philoxN %seed, %offsets`) lowered to the vocabulary's `rand`
(docs/ttgir-import.md, section 8, "Random numbers").

Triton's Philox counter is the offset the kernel computed for each element; the graph's `rand` says it as a
function of where the element is (twill/vocab.py):

    counter(r, c) = row * (g0 + r) + col * (l0 + c) + batch * b + base   (mod 2^32)

r and c the element's row and column in the tile, g0 the tile's first row along the grid's rows (program id x
its rows), l0 its first element along the loop (iteration x step), b the batch entry (program id y: attention's
heads, as the graph's batch). The offsets
are followed as polynomials of the element's position, the program ids, the loop's induction variable and the
scalar arguments (addresses.py), and must be that: the row's coefficient is the tile's row index's, and program
id x's is it times the tile's rows; the column's the loop variable's; program id y's the batch's; the rest
constants and arguments. Each coefficient is an integer or a sum of products of integer arguments (`N_CTX *
N_CTX`), which the graph's prologue takes as i32 scalars at launch; in a flat map (flatmap.py) the row's is the
view's row length, the loop's whole `extent`. The seed must be an integer argument of the kernel: the graph's
prologue takes it as an i64 scalar (Triton's `seed.to(tl.uint64)`: an i32 argument sign-extended, and any
Python int the binding gets). Anything else is an error at the draw, naming tl.rand.
"""
from __future__ import annotations

from ..counter import EXTENT, text
from .addresses import Poly, poly_add, poly_mul, poly_of
from .parser import MOp
from .rand import rounds_of
from .state import Lowering

HINT = ("tl.rand(seed, offsets) is imported where the seed is an integer argument and the offsets are the "
        "element's row times a coefficient plus its column (along the loop) times another, plus the batch "
        "entry's and constant terms, each coefficient an integer or a product of integer arguments "
        "(docs/ttgir-import.md, section 8, \"Random numbers\")")


def lower(lw: Lowering, op: MOp) -> None:
    """The draw as a `rand` node (module doc), bound to its result; an error at the draw where it cannot be."""
    (seed, _), (offsets, _) = op.operands()
    ins, outs = lw.signature(op)
    mtype = (outs or ins)[-1] if (outs or ins) else None
    tt = lw.tile_type(mtype, op) if mtype is not None and mtype.kind == "tensor" else None

    def refuse(why: str):
        return lw.src.error(f"tl.rand (the random numbers of '{op.name}', Triton's Philox rounds): {why}", op.head,
                            HINT)
    if tt is None or len(tt.shape) != 2:
        raise refuse("a draw of a tile of rank other than 2 after the import's rewrites")
    arg = _seed(lw, seed)
    if arg is None:
        raise refuse(f"its seed '%{seed}' is not an integer argument of the kernel (a value computed or loaded in "
                     "the kernel)")
    elt = _offsets_elt(lw, offsets)
    if elt != "i32":
        raise refuse(f"its offsets are {elt or 'of no integer type'}: 32-bit offsets are imported (the counter's "
                     "high word of 64-bit offsets is not built)")
    a = lw.addresses.of(offsets) if lw.addresses is not None else None
    if a is None or a.base is not None or len(a.coefs) != 2:
        raise refuse(f"its offsets '%{offsets}' are no sum of the element's row and column times coefficients "
                     "(a value loaded, divided or masked, or a product of two positions)")
    attrs = _counter(lw, a.coefs, a.const, tt.shape[0], refuse)
    attrs = (("rand_seed", arg),) + attrs + ((("rounds", rounds_of(op)),) if rounds_of(op) != 10 else ())
    lw.bind(op, lw.node("rand", op, [], tt, attrs=attrs, opcode="rand"))


def _seed(lw: Lowering, name: str) -> str | None:
    a = lw.addresses.of(name) if lw.addresses is not None else None
    if a is None or a.base is not None or a.coefs or len(a.const) != 1:
        return None
    (monomial, coef), = a.const
    arg = monomial[0] if len(monomial) == 1 else None
    if coef != 1 or arg not in lw.addresses.args or lw.addresses.args[arg].kind != "scalar" \
            or lw.addresses.args[arg].elem not in ("i32", "i64"):
        return None
    return arg


def _offsets_elt(lw: Lowering, name: str) -> str | None:
    op = lw.addresses.defs.get(name) if lw.addresses is not None else None
    if op is None:
        return None
    ins, outs = lw.signature(op)
    t = (outs or ins)[-1] if (outs or ins) else None
    return t.elem if t is not None else None


def _counter(lw: Lowering, coefs: tuple, const: Poly, rows: int, refuse) -> tuple:
    """The rand attributes (rand_row, rand_col, rand_batch, rand_base: polynomials of the arguments) of offsets
    `coefs[0] * r + coefs[1] * c + const` on a tile of `rows` rows (module doc)."""
    row, col = coefs
    loop = f"iv:{lw.loop_iv}" if lw.loop_iv else None
    by_atom: dict[str, dict] = {}
    rest: dict = {}
    for monomial, c in const:
        special = [x for x in monomial if x.startswith(("pid_", "iv:"))]
        if len(special) > 1:
            raise refuse(f"its offsets multiply {special[0]} by {special[1]}")
        if not special:
            rest[monomial] = c
            continue
        atom = special[0]
        others = tuple(x for x in monomial if x != atom)
        by_atom.setdefault(atom, {})[others] = c
    unknown = sorted(set(by_atom) - {"pid_x", "pid_y"} - ({loop} if loop else set()))
    if unknown:
        what = "another loop's induction variable" if unknown[0].startswith("iv:") else f"program id {unknown[0][4:]}"
        raise refuse(f"its offsets read {what} (the counter is read from the tile's row, its column along the loop "
                     "and the batch entry)")
    grid = poly_of(by_atom.get("pid_x", {}))
    if grid != poly_mul(row, poly_of({(): rows})):
        raise refuse(f"its offsets read program id x times {_text(grid) or 0}, not the row's coefficient "
                     f"{_text(row) or 0} times the tile's {rows} rows: the counter is no function of the element's "
                     "row along the grid")
    along = poly_of(by_atom.get(loop, {})) if loop else ()
    peeled = not lw.in_loop and not along  # a copy of the loop's first iteration before it (Triton's pipeliner)
    if along != col and not peeled:
        raise refuse(f"its offsets read the loop's induction variable times {_text(along) or 0}, not the column's "
                     f"coefficient {_text(col) or 0}: the counter is no function of the element's column along the "
                     "loop")
    from .scalars import _loop_lower
    lower = _loop_lower(lw) if col and not peeled else 0  # (a peeled copy's offsets read the start itself)
    if lower is None:
        raise refuse("the loop does not start at a constant: its induction variable is no iteration x step")
    offset = poly_add(poly_of(rest), poly_mul(col, poly_of({(): lower}))) if lower else poly_of(rest)
    for p in (row, col, offset, poly_of(by_atom.get("pid_y", {}))):
        for monomial, _ in p:
            bad = [x for x in monomial if x.startswith("%") or x not in lw.addresses.args
                   or lw.addresses.args[x].kind != "scalar" or lw.addresses.args[x].elem != "i32"]
            if bad:
                raise refuse(f"its offsets read '{bad[0]}', which is no i32 argument of the kernel")
    flat = lw.flat
    out = [("rand_row", _flat(row, flat)), ("rand_col", col)]
    batch = poly_of(by_atom.get("pid_y", {}))
    out += [("rand_batch", batch)] if batch else []
    out += [("rand_base", offset)] if offset else []
    if flat and any(flat in m for p in (col, batch, offset) for m, _ in p):
        raise refuse(f"its offsets read the flat map's element count '{flat}' other than as its view's row")
    return tuple(out)


def _flat(row: Poly, flat: str | None) -> Poly:
    """A flat map's row coefficient: its size argument stands for the view's row length (flatmap.py), `extent`."""
    if flat is None:
        return row
    return tuple((tuple(EXTENT if x == flat else x for x in m), c) for m, c in row)


def _text(p: Poly) -> str:
    """A polynomial of arguments as text, for messages ('' for 0)."""
    return str(text(p)) if p else ""


def coefficient(p: Poly, names: dict) -> int | str:
    """The `.tir` value of a coefficient: an integer, else its text with each argument its prologue scalar's name."""
    return text(tuple(sorted((tuple(sorted(names.get(x, x) for x in m)), c) for m, c in p)))


def arguments(attrs: dict) -> list[str]:
    """The integer arguments a rand node's coefficients read (EXTENT excepted), in order of first use."""
    out: list[str] = []
    for key in ("rand_row", "rand_col", "rand_batch", "rand_base"):
        for monomial, _ in attrs.get(key, ()):
            out += [x for x in monomial if x != EXTENT and x not in out]
    return out


__all__ = ["EXTENT", "arguments", "coefficient", "lower"]
