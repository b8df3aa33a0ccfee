"""Views, index arithmetic, constants and elementwise ops: what a value is, seen through each."""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, replace

from ..ir import TensorType
from ..knobs import Product
from . import indices, scalarexpr
from .addresses import REMAINDERS
from .opnames import COMMUTATIVE, ELEMENTWISE, SLOTS, TRANSPOSES, int_attr
from .parser import MOp
from .state import Lowering
from .values import INDEXED, SCALAR, Buf, Const, Indexed, LaunchScalar, Tile


def view(lw: Lowering, op: MOp) -> None:
    vals = lw.operands(op)
    val = vals[0] if vals else SCALAR
    if op.name in TRANSPOSES and isinstance(val, (Tile, Buf)):
        val = replace(val, flip=not val.flip)
    if op.name == "tt.expand_dims":
        val = indices.expand(val, int_attr(op, "axis"))
    elif op.name in TRANSPOSES:
        val = indices.transpose(val)
    if op.name == "tt.expand_dims" and isinstance(val, Tile) and int_attr(op, "axis") == 0 \
            and len(lw.type_of(val.ref).shape) == 1:
        val = replace(val, column=True)
    if op.name in SLOTS and isinstance(val, Buf):
        _slot(lw, op, val)
    if isinstance(val, Buf):
        lw.views.setdefault(val.index, []).extend(op.results)
    lw.bind(op, val)



def _slot(lw: Lowering, op: MOp, buf: Buf) -> None:
    """``ttg.memdesc_index %buf[%i]`` of a buffer with a leading buffer dimension (Triton's
    multi-buffering: one slot per stage in flight): every slot stands for the same tile, so the
    buffer is the one tile a slot holds, and which slot an access uses is dropped."""
    _, outs = lw.signature(op)
    name, mtype, span = lw.buffers[buf.index]
    if outs and outs[0].kind == "memdesc" and len(outs[0].shape) == len(mtype.shape) - 1 \
            and outs[0].shape == mtype.shape[1:]:
        lw.buffers[buf.index] = (name, replace(mtype, shape=outs[0].shape), span)


def scalar(lw: Lowering, op: MOp) -> None:
    lw.operands(op)  # still checks that they are defined
    if op.name == "tt.make_range":
        lw.bind(op, indices.make_range(int_attr(op, "start")))
    elif op.name == "tt.get_program_id" and op.tokens and op.tokens[0].text == "x":
        lw.bind(op, indices.symbol(indices.GRID_TERM))  # the grid's row tile (indices.py)
    else:
        lw.bind(op, SCALAR)


# Float arithmetic on two scalar constants, folded to the constant (Triton writes `x / N` for a
# compile-time N as x * splat(approx_divf(1.0, N))): a tile op then reads it as its {scalar = V}.
FOLDS = {"arith.addf": lambda a, b: a + b, "arith.subf": lambda a, b: a - b, "arith.mulf": lambda a, b: a * b,
         "arith.divf": lambda a, b: a / b, "tt.approx_divf": lambda a, b: a / b, "tt.precise_divf": lambda a, b: a / b}


def fold(lw: Lowering, op: MOp) -> bool:
    """Bind `op` to its constant where both operands are numeric constants (and a divisor is not 0)."""
    vals = lw.operands(op)
    if len(vals) != 2 or not all(isinstance(v, Const) and type(v.value) in (int, float) for v in vals):
        return False
    if op.name.endswith("divf") and vals[1].value == 0:
        return False
    lw.bind(op, Const(float(FOLDS[op.name](vals[0].value, vals[1].value))))
    return True


def no_op(lw: Lowering, op: MOp) -> None:
    lw.bind(op, SCALAR)


def constant(lw: Lowering, op: MOp) -> None:
    toks = op.tokens
    ins, _ = lw.signature(op)
    elem = ins[0].elem if ins else "i1"
    i = 0
    if toks and toks[0].is_("{"):  # an attribute dict first ({async_task_id = ...} on Hopper partitions)
        depth = 0
        for i, t in enumerate(toks):
            depth += t.is_("{") - t.is_("}")
            if depth == 0:
                break
        i += 1
    if i + 2 < len(toks) and toks[i].is_("dense") and toks[i + 1].is_("<"):
        i += 2
    lw.bind(op, Const(_literal(toks[i].text, elem)) if i < len(toks) else SCALAR)


def _literal(text: str, elem: str) -> float | bool | None:
    """``0.000000e+00``, ``0xFF800000`` (the bits of -inf as f32), ``true`` -> a Python value."""
    if text in ("true", "false"):
        return text == "true"
    try:
        if text.lower().startswith("0x"):
            bits = int(text, 16)
            if elem == "f32":
                return struct.unpack(">f", bits.to_bytes(4, "big"))[0]
            if elem == "f16":
                return struct.unpack(">e", bits.to_bytes(2, "big"))[0]
            if elem == "bf16":
                return struct.unpack(">f", (bits << 16).to_bytes(4, "big"))[0]
            if elem == "f64":
                return struct.unpack(">d", bits.to_bytes(8, "big"))[0]
            return bits
        return float(text)
    except (ValueError, OverflowError):
        return None


POSITION_CASTS = ("arith.sitofp", "arith.uitofp")  # an index made a float: a `position` (indices.py)


def elementwise(lw: Lowering, op: MOp) -> None:
    vals = lw.operands(op)
    if not any(isinstance(v, (Tile, LaunchScalar)) for v in vals):
        if op.name in POSITION_CASTS and not lw.in_loop and len(vals) == 1 and vals[0] is SCALAR:
            arg = _int_argument(lw, op)
            if arg is not None:  # float(N) of an integer argument before the loop (a mean's s / N): the scalar N
                lw.bind(op, LaunchScalar(arg, dtype="i32", scale=Product.of(arg)))
                return
        if op.name in POSITION_CASTS and (lw.in_loop or lw.loop_iv is not None) and len(vals) == 1 and isinstance(vals[0], indices.Index) \
                and vals[0].coefs:
            lw.bind(op, _position(lw, op, vals[0]))
            return
        indexed = any(isinstance(v, Indexed) for v in vals)
        rows = _row_remainder(lw, op, vals) if indexed else None
        if rows is not None:  # `row % S` of the rows a program (one row a program, rowprog.py): prologue ops
            lw.bind(op, rows)
            return
        lw.bind(op, indices.combine(op.name, vals, _predicate(op)) if indexed else SCALAR)
        return
    vals = [indices.scalar(v) for v in vals]  # the program id, the loop's variable: scalars, as before
    if not any(isinstance(v, Tile) for v in vals):  # a launch scalar on no tile: a product, an expression
        lw.bind(op, _scalar_value(lw, op, vals))
        return
    factor = _factor(op, vals)
    # A float argument a binary op of one tile reads (x * sm_scale): the op's y where no fusion folds it
    # (build.py: a prologue scalar), else folded away as any scalar is (the exp2's scale).
    launch = [(v.name, i) for i, v in enumerate(vals) if isinstance(v, LaunchScalar) and v.name]
    # a scalar computed from arguments (x / (1 - p)): the prologue op computing it (build.py, scalarexpr.py)
    computed = [(v.expr, i) for i, v in enumerate(vals) if isinstance(v, LaunchScalar) and not v.name and v.expr]
    integer = any(isinstance(v, LaunchScalar) and v.name and v.dtype == "i32" for v in vals)  # float(N): N an int
    vals = [SCALAR if isinstance(v, LaunchScalar) else v for v in vals]
    # (before the loop too: a prologue op reading a launch scalar, as rstd = rsqrt(ss / N + eps) between loops)
    extra = (("launch", launch[0]),) + ((("launch_i32", True),) if integer else ()) \
        if len(launch) == 1 and len(vals) == 2 else (("launch_expr", computed[0]),) \
        if len(computed) == 1 and not launch and len(vals) == 2 else ()
    if not lw.in_loop:
        from .handover import convert  # an earlier loop's result converted: handed over in that dtype
        if convert(lw, op, vals):
            return
    ins, outs = lw.signature(op)
    mtype = outs[0] if outs else ins[-1] if ins else None
    if mtype is None:
        raise lw.src.error(f"'{op.name}' has no type", op.head)
    tt = _result_tile(lw, mtype, op)  # on a one-element tile (a reduction to a scalar): a scalar
    bound = _row_bound(lw, op, vals, tt)
    if bound is not None:
        lw.bind(op, bound)
        return
    if any(isinstance(v, Indexed) for v in vals):
        lw.bind(op, _masked(lw, op, vals, tt))
        return
    if op.name in ("arith.cmpf", "arith.cmpi"):
        tt = TensorType("i1", tt.shape)
    if lw.in_loop and _constant_first(lw, op, vals, tt):
        return
    if lw.in_loop and _comparison(lw, op, vals, tt, extra):
        return
    held = ()
    if lw.in_loop and op.name in CONSTANT_SIDES:
        vals, held = _filled(lw, op, vals, tt)
    attrs = _scalar_operand(op, vals) + extra + _numerator(lw, op, vals) + held
    if lw.in_loop:
        _unheld_operand(lw, op, vals, attrs, factor)
    lw.bind(op, lw.node(ELEMENTWISE[op.name], op, vals, tt, attrs=attrs, factor=factor))


def _numerator(lw: Lowering, op: MOp, vals: list) -> tuple:
    """`c / x` before the loop, c a constant (LayerNorm's rstd = 1 / sqrt(var + eps)): the `numerator`
    attribute, which the prologue computes as `recip x` (times c); ()  for any other op."""
    if lw.in_loop or op.name != "arith.divf" or len(vals) != 2 or not isinstance(vals[0], Const) \
            or not isinstance(vals[1], Tile):
        return ()
    c = vals[0].value
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(c):
        return ()
    return (("numerator", float(c)),)


# `c OP x` in the loop, a constant first operand of an op that does not commute: (the op on x, the op that then
# applies c as its {scalar}, the value of c for which that second op is nothing)
CONSTANT_FIRST = {"arith.divf": ("recip", "mul", 1.0), "arith.subf": ("neg", "add", 0.0)}


def _constant_first(lw: Lowering, op: MOp, vals: list, tt) -> bool:
    """`c / x` or `c - x` in the loop, c a finite constant and x a tile (Triton's sigmoid, 1 / (1 + exp(-x)), its
    -x written `0 - x` by Triton 3.6): `recip x` times c, `neg x` plus c (the second op left out where c is 1 or 0);
    bound, True. False for any other op (the node of `x / y` has no place for c)."""
    if op.name not in CONSTANT_FIRST or len(vals) != 2 or not isinstance(vals[0], Const) \
            or not isinstance(vals[1], Tile):
        return False
    c = vals[0].value
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(c):
        return False
    first, then, unit = CONSTANT_FIRST[op.name]
    if op.name == "arith.divf" and c == 0:
        return False
    if c == unit:
        lw.bind(op, lw.node("ew", op, [vals[1]], tt, opcode=first))
        return True
    inner = lw.node("ew", op, [vals[1]], tt, ssa=f"{op.results[0]}_{first}", opcode=first)
    lw.bind(op, lw.node("ew", op, [inner], tt, attrs=(("scalar", float(c)),), opcode=then))
    return True


# comparison predicate -> the table's comparison (twill.vocab.COMPARISONS): 1 where it holds, else 0. Signed integer
# and ordered float predicates (`une` the float `ne`: true where an operand is NaN, as the table's ne)
PREDICATES = {"arith.cmpf": {"oge": "ge", "ogt": "gt", "ole": "le", "olt": "lt", "oeq": "eq", "une": "ne"},
              "arith.cmpi": {"sge": "ge", "sgt": "gt", "sle": "le", "slt": "lt", "eq": "eq", "ne": "ne"}}
SWAPPED = {"ge": "le", "gt": "lt", "le": "ge", "lt": "gt", "eq": "eq", "ne": "ne"}  # c OP x is x SWAPPED c


def _comparison(lw: Lowering, op: MOp, vals: list, tt, launch: tuple = ()) -> bool:
    """A comparison in the loop of two tiles, or of a tile and a finite constant on either side (`mk != 0` of a
    loaded mask, select's condition), or of a tile and a float argument or a scalar computed from arguments
    (`launch`: the lowering's launch attributes; dropout's `tl.rand(seed, offs) > p`): the table's comparison,
    `ne mk {scalar = 0}` (a constant first swaps the predicate: `0 < x` is `gt x {scalar = 0}`), `gt r, p` (the
    argument a prologue scalar, build.py; first, the predicate swapped); bound, True. False for another predicate
    (unsigned, unordered: a generic op, as before) or operands (a scalar that is no constant)."""
    cmp = PREDICATES.get(op.name, {}).get(_predicate(op) or "")
    if cmp is None or len(vals) != 2 or not any(isinstance(v, Tile) for v in vals):
        return False
    if all(isinstance(v, Tile) for v in vals):
        lw.bind(op, lw.node("ew", op, vals, tt, opcode=cmp))
        return True
    tile = next(v for v in vals if isinstance(v, Tile))
    if launch and launch[0][0] in ("launch", "launch_expr"):  # the scalar is the op's y (build._launch_one)
        (key, (value, _)), *rest = launch
        lw.bind(op, lw.node("ew", op, [tile], tt, attrs=((key, (value, 1)), *rest),
                            opcode=cmp if isinstance(vals[0], Tile) else SWAPPED[cmp]))
        return True
    const = next(v for v in vals if not isinstance(v, Tile))
    if not (isinstance(const, Const) and _number(const.value) and math.isfinite(const.value)):
        return False
    cmp = cmp if isinstance(vals[0], Tile) else SWAPPED[cmp]
    lw.bind(op, lw.node("ew", op, [tile], tt, attrs=(("scalar", scalarexpr.attr_number(const.value)),), opcode=cmp))
    return True


CONSTANT_SIDES = ("arith.select", "math.fma")  # ternary ops that take a constant operand in any position


def _filled(lw: Lowering, op: MOp, vals: list, tt) -> tuple[list, tuple]:
    """A select or fma in the loop reading a number constant beside tiles (`tl.where(mk != 0, qk, -1e6)`,
    `tl.where(keep, x / (1 - p), 0.0)`): a constant last operand (select's b, fma's c) is the op's `{scalar = V}`
    (the op written with two operands, twill.vocab), a constant elsewhere a `fill like {scalar = V}` node, a tile
    of V of the result's type, `like` a value operand that is a tile (select's condition where both sides are
    constants), as the epilogue's select does (epilogue.py). (the operands left, the attributes): other operands
    are left as they are (`_unheld_operand` then names a scalar that is no constant)."""
    if not any(isinstance(v, Tile) for v in vals) or not any(_constant(v) for v in vals):
        return vals, ()
    sides = vals[1:] if op.name == "arith.select" else vals
    like = next((v for v in sides if isinstance(v, Tile)), next(v for v in vals if isinstance(v, Tile)))
    held = ()
    if _constant(vals[-1]):
        held, vals = (("scalar", scalarexpr.attr_number(vals[-1].value)),), vals[:-1]
    out = list(vals)
    for i, v in enumerate(vals):
        if _constant(v) and (i > 0 or op.name != "arith.select"):
            out[i] = lw.node("ew", op, [like], tt, ssa=f"{op.results[0]}_fill{i}",
                             attrs=(("scalar", scalarexpr.attr_number(v.value)),), opcode="fill")
    return out, held


def _constant(v: object) -> bool:
    """A number constant (not a boolean, not NaN): a `{scalar = V}` may hold it."""
    return isinstance(v, Const) and _number(v.value) and not math.isnan(v.value)


def _int_argument(lw: Lowering, op: MOp) -> str | None:
    """The integer function argument `op` (a conversion) reads directly, else None."""
    (name, _), = op.operands()
    return name if name in lw.arg_spans else None


def _unheld_operand(lw: Lowering, op: MOp, vals: list, attrs: tuple, factor: object) -> None:
    """An op in the loop of several operands, one of them not a tile (a constant; a scalar of a
    ternary op) that neither its `scalar` attribute, its launch argument nor its factor holds, is an
    error at the op:
    the node lists its tiles only, so `tl.where(keep, p, 0.0)` (a select of a tile condition) would
    lose the 0.0 and `fma(x, 2.0, y)` the 2.0."""
    if len(vals) < 2 or all(isinstance(v, Tile) for v in vals) or attrs or factor is not None:
        return
    which = next(i for i, v in enumerate(vals) if not isinstance(v, Tile))
    if len(vals) == 2 and not isinstance(vals[which], Const):
        return  # x * s of a scalar s: build.py's error names what s is (a loaded scalar, say)
    v = vals[which]
    what = f"the constant {v.value}" if isinstance(v, Const) else "a scalar"
    raise lw.src.error(
        f"'{op.name}' reads {what} as its operand {which + 1} beside tiles, which the graph's op has no "
        "place for: it would compute with its tiles alone", op.head,
        hint="a select of a tile condition needs tiles on both sides (a causal or edge mask of the "
             "element indices is imported as a mask node); a binary op takes one constant as {scalar = V}")


SCALINGS = ("arith.mulf", "arith.divf")  # the ops whose scalar operand is a factor (twill.knobs.Product)


def _product(v: object):
    """A scalar value as a `Product` of the kernel's float arguments and constants, else None."""
    if isinstance(v, LaunchScalar):
        return v.scale
    if isinstance(v, Const) and type(v.value) in (int, float) and math.isfinite(v.value) and v.value != 0:
        return Product.number(v.value)
    return None


def _scalar_value(lw: Lowering, op: MOp, vals: list) -> object:
    """A scalar op of launch scalars and constants: a `LaunchScalar` with its product (`_scalar_product`) and its
    expression (scalarexpr.Expr, which the prologue computes where a tile op reads it); SCALAR where it is
    neither (an operand loaded, an op the prologue does not run on one value)."""
    product = _scalar_product(op, vals)
    operands = [_expr_operand(v) for v in vals]
    expr = None if None in operands else scalarexpr.of(op.name, operands, op.results[0] if op.results else "scalar",
                                                        lw.span(op))
    if expr is None:
        return product
    return LaunchScalar("", scale=product.scale if isinstance(product, LaunchScalar) else None, expr=expr)


def _expr_operand(v: object):
    """An operand of a scalar expression: an argument (scalarexpr.Arg), an expression, a finite number; None."""
    if isinstance(v, LaunchScalar):
        return v.expr if not v.name else scalarexpr.Arg(v.name, v.dtype)
    if isinstance(v, Const) and _number(v.value) and math.isfinite(v.value):
        return float(v.value)
    return None


def _scalar_product(op: MOp, vals: list) -> object:
    """A multiply or divide of two scalars that are products (``qk_scale = sm_scale * 1.44269504``): a
    `LaunchScalar` that is their product, which a tile op may read as its factor; any other: SCALAR."""
    parts = [_product(v) for v in vals]
    if op.name not in SCALINGS or len(parts) != 2 or None in parts:
        return SCALAR
    value = parts[0] * parts[1] if op.name == "arith.mulf" else parts[0] / parts[1]
    return SCALAR if value is None else LaunchScalar("", scale=value)


def _factor(op: MOp, vals: list) -> object:
    """x * c, c * x or x / c of one tile x: c (1 / c) as a `Product`; None where c is none."""
    tiles = [i for i, v in enumerate(vals) if isinstance(v, Tile)]
    if op.name not in SCALINGS or len(vals) != 2 or len(tiles) != 1 or (op.name == "arith.divf" and tiles != [0]):
        return None
    c = _product(vals[1 - tiles[0]])
    return c if c is None or op.name == "arith.mulf" else c.inverse()


def _position(lw: Lowering, op: MOp, index: "indices.Index") -> Tile:
    """``arith.sitofp`` of a 2-D index in the loop: a `position` node (indices.position_attrs), or
    an error at the op where the index has a term the op cannot say."""
    ins, outs = lw.signature(op)
    mtype = outs[0] if outs else None
    tt = lw.tile_type(mtype, op) if mtype is not None and mtype.kind != "scalar" else None
    if tt is None or len(tt.shape) != 2:
        return INDEXED
    grid_dim = 1 if index.coefs[0] == 0 and index.coefs[1] != 0 else 0
    attrs = indices.position_attrs(index, tt.shape[grid_dim], _loop_lower(lw))
    if isinstance(attrs, str):
        raise lw.src.error(f"'{op.name}' makes a float of element positions that a `position` cannot say: {attrs}",
                           op.head, hint="a position is rows*r + cols*c + grid*g0 + loop*l0 + offset of the "
                                         "element's row r and column c in the tile, g0 = program_id(0) x the tile's "
                                         "rows, l0 the loop's induction variable from a constant start "
                                         "(docs/ttgir-import.md, section 3)")
    return lw.node("position", op, [], tt, attrs=attrs, opcode="position")


def _loop_lower(lw: Lowering) -> int | None:
    """The chosen loop's constant lower bound (None where it is not one)."""
    from .addresses import poly_int
    loop = lw.addresses.loops.get(lw.loop_iv) if lw.addresses is not None and lw.loop_iv else None
    lower = lw.addresses.of(loop.lower) if loop is not None else None
    return poly_int(lower.const) if lower is not None and not lower.coefs and lower.base is None else None


def _predicate(op: MOp) -> str | None:
    return op.tokens[0].text.rstrip(",") if op.name in ("arith.cmpi", "arith.cmpf") and op.tokens else None


def _row_remainder(lw: Lowering, op: MOp, vals: list) -> Tile | None:
    """``row % S`` before the loop, `row` the tile's rows along the grid (``program id * ROWS + arange(ROWS)``, one
    row a program rewritten to ROWS rows a program: rowprog.py) and S an integer argument or constant: the prologue
    ops ``position {rows = 1, cols = 0, grid = 1} : f32[ROWS]`` (each row's index in memory) and ``rem`` of it by S
    (held as floats: exact below 2^24 rows). Megatron's causal softmax of scores laid out one query a row: its
    query is `row % seq_len`. None for any other op."""
    if op.name not in REMAINDERS or lw.in_loop or len(vals) != 2 or lw.addresses is None:
        return None
    row, (divisor, _) = vals[0], op.operands()[1]
    if not (isinstance(row, indices.Index) and row.coefs == (1,)):
        return None
    ins, outs = lw.signature(op)
    mtype = outs[0] if outs else ins[-1] if ins else None
    tt = lw.tile_type(mtype, op) if mtype is not None and mtype.kind != "scalar" else None
    if tt is None or len(tt.shape) != 1:
        return None
    attrs = indices.position_attrs(indices.Index((1, 0), row.const, row.terms), tt.shape[0], None)
    if isinstance(attrs, str) or dict(attrs).get("loop"):
        return None
    k = indices._int(vals[1])
    a = lw.addresses.of(divisor)
    arg = None
    if k is None and a is not None and a.base is None and a.atom is not None:
        name = a.atom
        mt = lw.addresses.args.get(name)
        arg = name if mt is not None and mt.kind == "scalar" and mt.elem in ("i32", "i64") else None
    if k is None and arg is None:
        return None
    f32 = TensorType("f32", tt.shape, tt.space)
    pos = lw.node("position", op, [], f32, ssa=f"{op.results[0]}_row", attrs=attrs, opcode="position")
    if arg is not None:
        extra = (("launch", (arg, 1)), ("launch_i32", True))
        return lw.node("ew", op, [pos, SCALAR], f32, attrs=extra)
    return lw.node("ew", op, [pos, Const(k)], f32, attrs=(("scalar", k),))


@dataclass(frozen=True)
class RowBound(Indexed):
    """The columns of a row below a bound of its own: element (r, c) holds where l0 + c < b[r] + offset, l0 the
    tile's first column along the loop, b a rank-1 tile of one value a row computed before the loop."""
    bound: Tile = None
    offset: int = 0


def _row_bound(lw: Lowering, op: MOp, vals: list, tt: TensorType) -> RowBound | None:
    """``cmpi PRED, iv + c + k, B`` in the loop (or B on the left), iv + c the loop's columns and B a rank-1 tile
    of one value a row broadcast along them, PRED an upper bound (iv + c < B, <=): a `RowBound`, which a select
    of it makes a `tail_mask x, B {fill, offset}` (`_masked`). None for any other op."""
    if op.name != "arith.cmpi" or not lw.in_loop or len(vals) != 2 or len(tt.shape) != 2:
        return None
    pred = indices.PREDICATES.get(_predicate(op) or "")
    flip = {"gt": "lt", "ge": "le", "lt": "gt", "le": "ge"}
    a, b = vals
    if isinstance(b, indices.Index) and isinstance(a, Tile):
        a, b, pred = b, a, flip.get(pred)
    if not (isinstance(a, indices.Index) and isinstance(b, Tile) and not b.column
            and a.coefs == (0, 1) and dict(a.terms) == {indices.LOOP_TERM: 1} and len(a.terms) == 1):
        return None
    t = lw.type_of(b.ref)
    lower = _loop_lower(lw)
    if len(t.shape) != 1 or t.shape[0] != tt.shape[0] or lower is None or b.flip:
        return None
    if pred not in ("lt", "le"):
        raise indices.UnexpressedMask(*lw.src.error(
            f"'{op.name}' compares the loop's columns with a bound of each row's own other than from above "
            f"({pred}): a tail_mask keeps a row's columns below its bound (`cols < b`, `cols <= b`), the columns "
            "from 0", op.head, hint="docs/ttgir-import.md, section 8 (\"A bound of each row's columns\")").diagnostics)
    # iv + c + k PRED b, iv = lower + l0: l0 + c < b - k - lower (+ 1 for <=)
    return RowBound(b, (1 if pred == "le" else 0) - a.const - lower)


def _masked(lw: Lowering, op: MOp, vals: list, tt: TensorType) -> object:
    """``arith.select %m, %a, %b`` of an index mask of the 2-D tile (indices.py): a `mask` node,
    `mask a[, b] {pred, rows, cols, offset[, fill]}`; a constant side is the `fill`, a constant kept
    side keeps the other with the predicate negated. Any other op of a tile that reads element
    indices is an error at its line: the graph would compute something else."""
    m = vals[0] if len(vals) == 3 and op.name == "arith.select" else None
    if isinstance(m, RowBound) and isinstance(vals[1], Tile) and isinstance(vals[2], Const) \
            and _number(vals[2].value) and not math.isnan(vals[2].value):  # a bound of each row's own (_row_bound)
        extra = (("offset", m.offset),) if m.offset else ()
        return lw.node("tail_mask", op, [vals[1], m.bound], lw.type_of(vals[1].ref),
                       attrs=(("fill", float(vals[2].value)),) + extra, opcode="tail_mask")
    attrs = indices.mask_attrs(m) if isinstance(m, indices.IndexMask) and len(tt.shape) == 2 else None
    a, b = (vals[1], vals[2]) if attrs is not None else (None, None)
    if attrs is not None and not isinstance(a, Tile) and isinstance(b, Tile):
        m, a, b = m.negated(), b, a
        attrs = indices.mask_attrs(m)
    fill = b.value if isinstance(b, Const) else None
    tail = _loop_tail(lw, op, vals)
    if tail is not None:
        return tail
    banded = _band(lw, op, vals, tt)
    if banded is not None:
        return banded
    if attrs is None or not isinstance(a, Tile) or not (isinstance(b, Tile) or _number(fill)):
        if not lw.in_loop:  # before the loop: only what the loop reads of it matters (an error there)
            return INDEXED
        if op.name == "arith.select" and any(isinstance(v, Tile) and v.ref.kind == "carry" for v in vals[1:3]):
            raise indices.UnexpressedMask(*lw.src.error(
                f"'{op.name}' reads a tensor computed from element indices that the import cannot express as a "
                "mask of the tile, and keeps a carried tile where it is off: a partial tile carried through the loop "
                "under its edge masks (torch-inductor's looped reduction, `acc = "
                "tl.where(rmask & xmask, acc + v, acc)` of an [XBLOCK, RBLOCK] tile reduced after the loop, or "
                "its Welford triple), which the import has no form for", op.head,
                hint="a reduction over a loop imports as a row carry of one row a program or of a row block "
                     "(`acc += tl.sum(v, axis=1)`, loads masked with `other=0`: docs/ttgir-import.md, sections 8 "
                     "and 25); a column sum as ttgir/colsum.py's form (section 24)").diagnostics)
        raise indices.UnexpressedMask(*lw.src.error(
            f"'{op.name}' reads a tensor computed from element indices that the import cannot express "
            "as a mask of the tile" + _random_source(lw, op), op.head,
            hint="a mask is imported as `mask` where it is `select(r*A + c*B + C PRED 0, x, y)` of the tile's "
                 "row r and column c with constant A, B, C, and `select(iv + c < UB, x, -inf)` as the loop's "
                 "partial last tile, and `select(keep, x, -inf)` with keep an `&` of bounds of key - query "
                 "(a causal or sliding-window band: the key iv + column against the query program id * rows + "
                 "row, offset by constants and at most one integer argument) as a `causal_mask` (docs/ttgir-"
                 "import.md, section 3); other masks offset by the program id or the loop's induction variable "
                 "are not").diagnostics)
    operands = [a] if not isinstance(b, Tile) else [a, b]
    extra = (("fill", float(fill)),) if not isinstance(b, Tile) else ()
    return lw.node("mask", op, operands, tt, attrs=attrs + extra, opcode="mask")


RANDOM = "triton/language/random.py"  # tl.rand, tl.randint, tl.randn: philox rounds of the element's offset


def _random_source(lw: Lowering, op: MOp) -> str:
    """', a random number (tl.rand's philox rounds, ...)' where the op was inlined from Triton's
    random-number library (its location names triton/language/random.py), else ''."""
    from .locs import files
    if any(f.endswith(RANDOM) for f in files(op.loc, lw.locs)):
        return (": a random number (tl.rand/tl.randint/tl.randn, Triton's philox rounds of the elements' "
                "offsets, as dropout draws), which the graph has no op for")
    return ""


def _loop_tail(lw: Lowering, op: MOp, vals: list) -> object | None:
    """``select(iv + position < UB, x, -inf)`` in the loop, UB the loop's upper bound: the mask of
    the loop's partial last tile (bounds.py), which emit-cuda applies itself before each rowmax and
    exp2 (emit/ragged.py): the value is x. None for any other select."""
    if not (op.name == "arith.select" and len(vals) == 3 and lw.masks is not None):
        return None
    names = [n for n, _ in op.operands()]
    x, y, neg = vals[1], vals[2], False
    if isinstance(x, Const) and isinstance(y, Tile):  # select(m, -inf, x): the mask negated
        x, y, neg = y, x, True
    zero = isinstance(y, Const) and y.value == 0 and lw.in_loop and isinstance(x, Tile) and _reads_a_load(lw, x)
    if not (isinstance(x, Tile) and isinstance(y, Const) and (y.value == -math.inf or zero)):
        return None
    dim = lw.masks.loop_tail(names[0], lw.loop_iv, negated=neg, peeled=not lw.in_loop)
    if dim is None:
        return None
    # the partial last tile: emitted as a mask of the loop's extent, that of the tensors it reads. -inf: x,
    # masked by emit-cuda before each of its rowmax and exp2 readers (emit/ragged.py), its only readers. A 0
    # fill of a loaded tile (or its conversion) is TMA's own fill past the extent: x. A 0 fill of a value
    # computed from loads (LayerNorm's `tl.where(cols < N, x - mean, 0.)`: the load's 0 gives -mean there)
    # is the graph's `tail_mask x {fill = 0}`, which emit-cuda computes on the partial last tile alone.
    if zero and not _loaded_as_is(lw, x):
        return lw.node("tail_mask", op, [x], lw.type_of(x.ref), attrs=(("fill", 0.0),), opcode="tail_mask")
    return x


def _loaded_as_is(lw: Lowering, tile: Tile) -> bool:
    """Whether `tile` is a tile the loop loads, or conversions of one (its elements past the loop's extent
    TMA's zero fill, converted: 0)."""
    ref = tile.ref
    while ref.kind == "node" and lw.nodes[ref.index] is not None:
        node = lw.nodes[ref.index]
        if node.kind == "load":
            return True
        if node.kind != "conv" or len(node.operands) != 1:
            return False
        ref = node.operands[0]
    return False


def _reads_a_load(lw: Lowering, tile: Tile) -> bool:
    """Whether `tile` is computed in the loop from a tile the loop loads."""
    todo, seen = [tile.ref], set()
    while todo:
        ref = todo.pop()
        if ref in seen or ref.kind != "node":
            continue
        seen.add(ref)
        node = lw.nodes[ref.index]
        if node is None or not node.in_loop:
            continue
        if node.kind == "load":
            return True
        todo.extend(node.operands)
    return False


def _band(lw: Lowering, op: MOp, vals: list, tt: TensorType) -> object | None:
    """``select(keep, x, -inf)`` of the chosen loop, keep a comparison or an ``&`` of comparisons of
    the key (``iv + column``) against the query (``program id * rows + row``): a `causal_mask` node
    with the band's bounds (band.py). Before the loop, the copy Triton's pipeliner peeled (the key
    from the loop's lower bound) is one too. None for any other select. In the loop, where the
    loop's bounds do not visit every key the band keeps, but would were the mask computed one or two
    blocks ahead (sm_100's S and softmax after the pipeliner), the node records the shifts that would
    (`ahead`) and depipe.py settles it against the peeled copy; otherwise that is an error at the
    select. The shifts are recorded where the loop covers the band as read too: a mask computed a
    block ahead whose band, as read, is narrower (`iv + 64 + c <= q` is `d <= -64` of the key `iv + c`)
    is covered by the loop all the same, and only its peeled copy tells the band it serves."""
    if not (op.name == "arith.select" and len(vals) == 3 and lw.masks is not None and lw.loop_iv is not None
            and len(tt.shape) == 2):
        return None
    from . import band
    x, y = vals[1], vals[2]
    if not (isinstance(x, Tile) and isinstance(y, Const) and y.value == -math.inf):
        return None
    compares = lw.masks.compares([n for n, _ in op.operands()][0])
    addr = lw.masks.addr
    loop = addr.loops.get(lw.loop_iv)
    if compares is None or loop is None:
        return None
    ints = {n for n, t in addr.args.items() if t.kind == "scalar" and t.elem in ("i32", "i64")}
    if not lw.in_loop:  # a peeled copy: its key starts at the loop's lower bound
        lower = addr.of(loop.lower)
        if lower is None or lower.coefs:
            return None
        found = band.read(compares, lower.const, tt.shape[0], ints)
        return None if isinstance(found, str) else lw.node("causal_mask", op, [x], lw.type_of(x.ref),
                                                           attrs=found.attrs())
    found = band.read(compares, (((f"iv:{lw.loop_iv}",), 1),), tt.shape[0], ints)
    if isinstance(found, str):
        return None
    why = band.covers(addr, lw.loop_iv, found, tt.shape[0], sorted(ints))
    step = band.evaluate(addr, loop.step, {})
    shifts = tuple(k * step for k in (1, 2) if step and band.covers(
        addr, lw.loop_iv, band.shifted(found, k * step), tt.shape[0], sorted(ints), k * step) is None)
    if why is not None and not shifts:
        raise band_error(lw.src, op.head, why)
    # whether the mask is computed ahead is depipe.py's to say (a peeled copy of it before the loop):
    # the shifts under which the loop covers the band it then serves, and why it does not as read
    ahead = (("ahead", (shifts, why)),) if shifts else ()
    attrs = found.attrs() + ((("launch_int", found.arg),) if found.arg else ()) + ahead
    return lw.node("causal_mask", op, [x], lw.type_of(x.ref), attrs=attrs)


def band_error(src_or_span, head, why: str):
    """The error of a band the loop does not cover: at the select, the loop a tile loop all the same
    (indices.UnexpressedMask: loops.py never leaves it out silently)."""
    from ..errors import Diagnostic
    hint = ("a causal or sliding-window mask in one loop is imported where the loop runs over every key block the "
            "mask keeps (docs/ttgir-import.md, section 3)")
    message = f"'arith.select' masks a band of keys around each query, but the loop does not visit every key it keeps: {why}"
    if head is None:  # a span (depipe.py)
        return indices.UnexpressedMask(Diagnostic(message, src_or_span, hint))
    return indices.UnexpressedMask(*src_or_span.error(message, head, hint=hint).diagnostics)


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)



def _scalar_operand(op: MOp, vals: list) -> tuple:
    """A splat constant that is the second operand of a binary op on one tile (or either, for a
    commutative one) as the `scalar` attribute the fusion step reads (a dequant's shift and mask)."""
    tiles = [v for v in vals if isinstance(v, Tile)]
    if len(vals) != 2 or len(tiles) != 1 or not (isinstance(vals[1], Const) or op.name in COMMUTATIVE):
        return ()
    const = next((v for v in vals if isinstance(v, Const)), None)
    value = const.value if const is not None else None
    if value is None or isinstance(value, bool) or not math.isfinite(value):
        return ()
    return (("scalar", scalarexpr.attr_number(value)),)



def _result_tile(lw: Lowering, mtype, op: MOp) -> TensorType:
    """The tile type of a result, a scalar written as a one-element tile."""
    if mtype.kind == "scalar":
        from .types import DTYPES
        if mtype.elem not in DTYPES:
            raise lw.src.error(f"'{op.name}' makes a '{mtype.elem}', which the .tir format has no dtype for", op.head)
        return TensorType(DTYPES[mtype.elem], (1,), "reg")
    return lw.tile_type(mtype, op)



def yield_(lw: Lowering, op: MOp) -> None:
    lw.yielded = lw.operands(op)

