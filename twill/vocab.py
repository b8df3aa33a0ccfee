"""The op vocabulary: the one table of what every `.tir` opcode is.

Each `OpDef` holds an opcode's facts, so that no other module restates them:

- its operands: how many it takes (`arity`) and what each is (`roles`, for messages);
- its shape and dtype rule (`rule`): given the op's result and operand types, None or the reason they
  do not fit, which the `.tir` parser reports at the op's line (`check`);
- the attributes it takes and needs (``axis`` of a reduction, ``bits`` and ``shift`` of a dequant);
- its default unit and cost (`cost`: a rate class of the machine file's ``rates``, see below), issue
  and async defaults, and whether it reads its memory operands in place as the tensor core does
  (`tensor_core`: an mma holds its operands until it completes and updates operand 2 in place);
- its emitter kind (`emit`) and runtime helper (`helper`, ``twill::op_NAME``): emit-cuda's tables
  (`twill.emit.ops`) are built from these, so that a new elementwise op is one entry here and one
  helper in the runtime.

Costs. A machine file's ``ops.NAME`` entry still describes an opcode in full (contract section 2)
and wins; an opcode of the table that the file does not list costs ``elements * w * work / rate`` cycles
on its default unit, where ``rate`` is the file's ``rates.CLASS`` (elements per cycle per SM), ``w``
is 2 for 64-bit data, else 1, and ``work`` the entry's instructions per element (1 but for rand's
Philox rounds) (`generic_cycles`). The classes: ``alu`` (FP32 add, multiply, compare,
select), ``sfu`` (MUFU transcendentals), ``convert`` (F2F/I2F conversions), ``bit`` (integer logic
and shifts), ``dequant`` (shift, mask, int-to-float, subtract and multiply per element), ``reduce``
(a reduction or scan per input element). An opcode the table does not know works as before: the
machine file describes it, or the op carries ``{cycles, unit}``.

Shapes. Elementwise operands broadcast NumPy-style against a result of rank <= 2: a rank-1 ``T[M]``
operand means ``T[M,1]`` (one value per row), ``T[1,N]`` is one value per column; an op whose result is
``T[1,N]`` reads a rank-1 ``T[N]`` operand as a column vector (``convert x : T[1,N]`` turns a rank-1 tile
in shared memory into a column vector; emit-cuda reads it there in place). Elementwise ops
compute in f32 (bit ops in 32-bit integers) and round to the result's dtype: a conversion folded
into its producer costs nothing extra.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .ir import DTYPE_BITS, TensorType

FLOATS = ("f64", "f32", "tf32", "f16", "bf16", "f8e4m3", "f8e5m2", "f4")
INTS = ("i64", "i32", "i16", "i8", "i1")

# A rule gets (result type or None, operand types or None each, attributes) and returns a reason.
Rule = Callable[[TensorType | None, list, dict], "str | None"]


@dataclass(frozen=True)
class OpDef:
    name: str
    family: str  # unary, binary, ternary, convert, reduce, row, scan, dequant, mask, position, rand, join, mma, memory
    arity: tuple[int, ...]  # the operand counts it takes (empty: any)
    roles: tuple[str, ...]  # what each operand is, for messages
    rule: Rule | None
    unit: str
    cost: str | None  # the rate class of its generic cost (None: the machine file must list it)
    emit: str  # emitter kind: math, exp2, rescale, reduce, dequant, mask, position, rand, join, mma, load, store
    helper: str = ""  # runtime helper (twill::op_NAME) of register math
    attrs: tuple[str, ...] = ()  # attributes it takes
    needs: tuple[str, ...] = ()  # ... of which it requires
    issue: str = "warp_group"
    is_async: bool = False
    variable_latency: bool = False
    tensor_core: bool = False  # reads @smem/@tmem operands in place, holds them until done
    accumulator: int | None = None  # operand it updates in place (an mma's c)
    shape: str = ""  # its shape rule in words, for hints
    form: str = ""  # how it is written, where the roles do not say (dequant's optional zero)
    work: float = 1.0  # instructions per element at its rate class's rate (rand's Philox rounds: many)
    scratch: int = 0  # registers per thread its temporaries hold while it runs (liveness.scratch), on any machine

    @property
    def usage(self) -> str:
        roles = ", ".join(r if i < min(self.arity or (0,)) else f"[{r}]" for i, r in enumerate(self.roles))
        return f"{self.name} {roles}".strip()


# -- shape helpers ------------------------------------------------------------------------------

def as_2d(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The legacy convention: a rank-1 [M] value is one per row, [M, 1]."""
    return (shape[0], 1) if len(shape) == 1 else shape


def broadcasts(operand: tuple[int, ...], result: tuple[int, ...]) -> bool:
    """Does `operand` broadcast to `result` (each dimension equal or 1, ranks aligned right after
    the rank-1 = per-row convention)? A rank-1 [N] operand of a [1, N] result is read as a column
    vector, one value per column (N > 1: a rank-1 operand otherwise never fits a one-row result)."""
    if len(operand) == 1 and len(result) == 2 and result == (1, operand[0]) and operand[0] > 1:
        return True  # a rank-1 value used as a column vector: the result says so ([N] -> [1, N])
    a, r = as_2d(operand), as_2d(result)
    if len(a) > len(r):
        return False
    a = (1,) * (len(r) - len(a)) + a
    return all(x in (1, y) for x, y in zip(a, r))


def _t(t) -> str:
    return f"{t.dtype}[{','.join(map(str, t.shape))}]"


def _elementwise(kinds: dict[int, tuple[str, ...]] | None = None) -> Rule:
    """Every operand broadcasts to the result; `kinds`: operand index -> the dtypes it may have."""
    def rule(out, ins, attrs):
        if out is None:
            return None
        for i, t in enumerate(ins):
            if t is None:
                continue
            if kinds and i in kinds and t.dtype not in kinds[i]:
                return f"operand {i + 1} is {t.dtype}, and this op takes {'integer' if kinds[i] == INTS else 'float'} data"
            if not broadcasts(t.shape, out.shape):
                return (f"operand {i + 1} is {_t(t)}, which does not broadcast to the result {_t(out)} "
                        f"(a dimension must equal the result's or be 1; a rank-1 [M] is one value per row)")
        return None
    return rule


def _row(out, ins, attrs):
    """rowmax/rowsum: x [M, N] (or [M]) reduced along its last axis to [M]; the running value and
    factor are per row too."""
    if out is None or not ins or ins[0] is None:
        return None
    if len(out.shape) > 2 or (len(out.shape) == 2 and out.shape[1] != 1):
        return f"the result is {_t(out)}: a row reduction gives one value per row, [M] or [M,1]"
    if ins[0].shape[0] != out.shape[0]:
        return f"x is {_t(ins[0])} and the result {_t(out)}: their rows differ"
    for i, t in enumerate(ins[1:], 2):
        if t is not None and not broadcasts(t.shape, out.shape):
            return f"operand {i} is {_t(t)}, not one value per row of the result {_t(out)}"
    return None


def _arg_row(out, ins, attrs):
    """rowargmax/rowargmin x, index: of each row of x [M, N] (float), the index (index's element, i32 or i64, of
    x's shape or broadcast to it) of its largest / smallest value, ties to the smaller index: [M] of index's dtype."""
    if out is None or len(ins) != 2 or None in ins:
        return None
    x, idx = ins
    if len(x.shape) != 2 or x.dtype not in FLOATS:
        return f"x is {_t(x)}: an arg reduction reads the rows of a rank-2 float tile"
    if idx.dtype not in ("i32", "i64") or not broadcasts(idx.shape, x.shape):
        return f"index is {_t(idx)}: the i32 or i64 index of each element of x {_t(x)} (or a row of them, [1,N])"
    if as_2d(out.shape) != (x.shape[0], 1) or out.dtype != idx.dtype:
        return f"the result is {_t(out)}: one index a row of x, {idx.dtype}[{x.shape[0]}]"
    return None


def _reduce(out, ins, attrs):
    """reduce_* {axis = A}: x with dimension A removed (or kept as 1); a second operand is a running
    value of the result's shape."""
    if out is None or not ins or ins[0] is None:
        return None
    shape, axis = ins[0].shape, attrs.get("axis")
    if not isinstance(axis, int) or not -len(shape) <= axis < len(shape):
        return f"axis = {axis} is not an axis of x {_t(ins[0])} (0..{len(shape) - 1})"
    axis %= len(shape)
    removed = shape[:axis] + shape[axis + 1:]
    kept = shape[:axis] + (1,) + shape[axis + 1:]
    if out.shape not in (removed, kept) and not (len(removed) == 0 and out.shape == (1,)):
        return f"reducing x {_t(ins[0])} along axis {axis} gives [{','.join(map(str, removed))}], not {_t(out)}"
    if len(ins) > 1 and ins[1] is not None and not broadcasts(ins[1].shape, out.shape):
        return f"the running value is {_t(ins[1])}, not of the result's shape {_t(out)}"
    return None


def _scan(out, ins, attrs):
    if out is None or not ins or ins[0] is None:
        return None
    axis = attrs.get("axis")
    if not isinstance(axis, int) or not -len(ins[0].shape) <= axis < len(ins[0].shape):
        return f"axis = {axis} is not an axis of x {_t(ins[0])}"
    if out.shape != ins[0].shape:
        return f"a scan keeps its input's shape: x is {_t(ins[0])}, the result {_t(out)}"
    return None


def _dequant(out, ins, attrs):
    """dequant packed, [zero,] scale: (float((packed >> shift) & (2^bits - 1)) - zero) * scale."""
    if out is None or not ins or ins[0] is None:
        return None
    packed, bits, shift = ins[0], attrs.get("bits"), attrs.get("shift", 0)
    if packed.dtype not in INTS or packed.dtype == "i1":
        return f"packed is {packed.dtype}: it must be an integer tile (i8, i16, i32, i64) holding the codes"
    if out.dtype not in FLOATS:
        return f"the result is {out.dtype}: a dequant gives float data (f16, bf16, f32)"
    width = DTYPE_BITS[packed.dtype]
    if not isinstance(bits, int) or not 1 <= bits <= 8:
        return f"bits = {bits}: a code has 1 to 8 bits"
    if not isinstance(shift, int) or shift < 0 or shift + bits > width:
        return f"shift = {shift} and bits = {bits} do not fit a {width}-bit {packed.dtype} element"
    if packed.shape != out.shape:
        return f"packed is {_t(packed)} and the result {_t(out)}: one code per result element"
    for i, t in enumerate(ins[1:], 2):
        if t is None:
            continue
        if t.dtype not in FLOATS:
            return f"{('zero' if len(ins) == 3 and i == 2 else 'scale')} is {t.dtype}: it must be float data"
        if not broadcasts(t.shape, out.shape):
            return f"operand {i} is {_t(t)}, which does not broadcast to the result {_t(out)}"
    return None


MASK_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")


def _mask(out, ins, attrs):
    """mask x[, y] {pred, rows, cols, offset[, fill]}: element (r, c) of the result is x's where
    rows * r + cols * c + offset PRED 0 (r, c its row and column in the tile), else y's or `fill`."""
    if out is None:
        return None
    if len(out.shape) != 2:
        return f"the result is {_t(out)}: a mask compares a rank-2 tile's row and column indices"
    if attrs.get("pred") not in MASK_PREDICATES:
        return f"pred = {attrs.get('pred')}: it is one of {', '.join(MASK_PREDICATES)}"
    if (len(ins) == 1) != ("fill" in attrs):
        return ("a mask with one operand takes its other value from 'fill', one with two operands from y"
                if len(ins) == 1 else "a mask of two operands takes no 'fill'")
    return _elementwise()(out, ins, attrs)


POSITION_TERMS = ("rows", "cols", "grid", "loop", "offset")


def _position(out, ins, attrs):
    """position {rows = A, cols = B[, grid = P][, loop = Q][, offset = K]}: element (r, c) of a rank-2
    tile is A*r + B*c + P*g0 + Q*l0 + K, r and c its row and column in the tile, g0 the first row in
    memory of the tile's dimension along the grid's rows, l0 the first element along the loop of its
    dimension along the loop (iteration * step); integer coefficients."""
    if out is None:
        return None
    if len(out.shape) not in (1, 2):
        return f"the result is {_t(out)}: a position is a rank-2 tile of its elements' row and column positions " \
               "(or a rank-1 [M] of its rows')"
    if len(out.shape) == 1 and any(attrs.get(k, 0) for k in ("cols", "loop")):
        return f"the result is {_t(out)}, one value a row: its position has no column or loop term"
    if out.dtype not in ("f32", "f16", "bf16", "i32"):
        return f"the result is {out.dtype}: a position is computed in f32, f16, bf16 or i32"
    for key in POSITION_TERMS:
        v = attrs.get(key, 0)
        if isinstance(v, bool) or not isinstance(v, int):
            return f"{key} = {v}: a position's coefficients are integers"
    return None


def _rand(out, ins, attrs):
    """rand {seed, row, col[, batch][, base][, rounds]}: Triton's Philox stream at each element's counter
    (twill/counter.py), as a float in [0, 1) (f32: tl.rand) or the word's bits (i32: tl.randint)."""
    if out is None:
        return None
    if len(out.shape) != 2:
        return f"the result is {_t(out)}: a rand draws the elements of a rank-2 tile, by their row and column"
    if out.dtype not in ("f32", "i32"):
        return (f"the result is {out.dtype}: a rand gives f32 (tl.rand: uniform in [0, 1)) or i32 (tl.randint: the "
                "Philox word's bits)")
    from .counter import check
    return check(attrs)


def _load(out, ins, attrs):
    """load {batch = none}: the one tensor every batch entry reads (twill/ir.py)."""
    from .ir import UNBATCHED
    if "batch" in attrs and attrs["batch"] != UNBATCHED:
        return (f"batch = {attrs['batch']}: a load's batch is {UNBATCHED} (one tensor for every batch entry) or not "
                "given (an entry per batch entry)")
    return None


def _join(out, ins, attrs):
    """join x, y: the columns of x and y interleaved, x's column j the result's 2j, y's 2j + 1."""
    if out is None or len(ins) != 2 or None in ins:
        return None
    x, y = ins
    if x.shape != y.shape or len(x.shape) != 2:
        return f"x is {_t(x)} and y {_t(y)}: join interleaves two rank-2 tiles of one shape"
    if out.shape != (x.shape[0], 2 * x.shape[1]):
        return f"joining two {_t(x)} gives [{x.shape[0]},{2 * x.shape[1]}], not {_t(out)}"
    return None


def _gather(out, ins, attrs):
    """gather x, index: element r is x's tensor at row r, column index[r] (one element a row)."""
    if out is None or len(ins) != 2 or None in ins:
        return None
    x, idx = ins
    if len(x.shape) != 2:
        return f"x is {_t(x)}: a gather reads the rows of a rank-2 tile's tensor"
    if idx.dtype not in ("i32", "i64") or as_2d(idx.shape) != (x.shape[0], 1):
        return f"index is {_t(idx)}: one i32 or i64 column a row, [{x.shape[0]}]"
    if out.shape not in ((x.shape[0],), (x.shape[0], 1)) or out.dtype != x.dtype:
        return f"gathering one element a row of {_t(x)} gives {x.dtype}[{x.shape[0]}], not {_t(out)}"
    return None


def mma_mismatch(out: TensorType | None, ins: list) -> str | None:
    """Why the rank-2 operands of an mma cannot multiply into its result (None when they can):
    a is [M, K] or [K, M], b is [K, N] or [N, K], the result [M, N]."""
    types = ins[:2]
    if out is None or len(types) < 2 or any(t is None or len(t.shape) != 2 for t in types + [out]):
        return None
    (m, n), a, b = out.shape, types[0].shape, types[1].shape
    if m not in a:
        return f"a is {a[0]}x{a[1]}, and neither dimension is the result's {m} rows"
    k = a[1] if a[0] == m else a[0]
    if b not in ((k, n), (n, k)):
        return f"b is {b[0]}x{b[1]}, neither {k}x{n} nor {n}x{k} (K = {k} from a, N = {n} from the result)"
    return None


def _mma(out, ins, attrs):
    if out is None:
        return None
    if len(out.shape) != 2:
        return f"the result is {_t(out)}: an mma gives a rank-2 [M, N] tile"
    for what, t in zip(("a", "b"), ins):
        if t is not None and len(t.shape) != 2:
            return f"{what} is {_t(t)}: an mma multiplies rank-2 tiles"
    if (why := mma_mismatch(out, ins)) is not None:
        return f"the shapes of this mma do not agree: {why}"
    if len(ins) == 3 and ins[2] is not None and ins[2].shape != out.shape:
        return f"the accumulator c is {_t(ins[2])}, not the result's {_t(out)}"
    return None


# -- the table ----------------------------------------------------------------------------------

# Elementwise functions of one float from CUDA's math library: opcode -> its C function. The one home of
# these ops: the importer reads `math.OPCODE` and libdevice's `__nv_FUNCTION` as OPCODE (ttgir/parser.py,
# opnames.py, fuse.py, epilogue.py), emit-cuda writes `TWILL_UNARY(OPCODE, FUNCTION(v))` into the kernels that
# use one (emit/runtime.libm_part) and the epilogue's scalar form `FUNCTION(x)`. Costed as an SFU op (their
# polynomial and range reduction take several FMA-rate instructions each; no machine file names them).
LIBM = {"erf": "erff", "erfc": "erfcf", "sin": "sinf", "cos": "cosf", "tan": "tanf", "asin": "asinf",
        "acos": "acosf", "atan": "atanf", "sinh": "sinhf", "cosh": "coshf", "log10": "log10f", "log1p": "log1pf",
        "expm1": "expm1f", "floor": "floorf", "ceil": "ceilf", "round": "roundf", "trunc": "truncf",
        "rint": "rintf"}  # rint: to the nearest integer, ties to even (libdevice's rint, MLIR's math.roundeven)


def _unary(name: str, cost: str = "sfu", helper: str = "") -> OpDef:
    return OpDef(name, "unary", (1,), ("x",), _elementwise(), "sfu" if cost == "sfu" else "alu", cost,
                 "math", helper or f"op_{name}")


COMPARISONS = ("ge", "gt", "le", "lt", "eq", "ne")


def _binary(name: str, cost: str = "alu", ints: bool = False, arity=(1, 2), roles=("x", "y"), helper="") -> OpDef:
    """x OP y; written with one operand, y is the `scalar` attribute (a constant the importer read;
    without it the op still schedules, but emit-cuda refuses it: its y is unknown)."""
    kinds = {0: INTS, 1: INTS} if ints else None
    return OpDef(name, "binary", arity, roles, _elementwise(kinds), "alu", cost, "math", helper or f"op_{name}",
                 attrs=("scalar",), form=f"{name} x, y : TYPE (or {name} x : TYPE {{scalar = V}})")


def _divided_by(out, ins, attrs) -> str | None:
    """A select's {divided_by = K}: K is the knob exp2_scale, and divides the scalar b."""
    if "divided_by" not in attrs:
        return None
    if attrs["divided_by"] != "exp2_scale":
        return f"'divided_by' names the knob exp2_scale (the scale folded into the exp2), not {attrs['divided_by']!r}"
    if "scalar" not in attrs:
        return "'divided_by' divides the 'scalar' b of a two-operand select, and this one has no scalar"
    return None


def _row_bound(out, ins, attrs) -> str | None:
    """tail_mask's b: one value a row ([M]) of a rank-2 x [M, N]; its offset an integer."""
    k = attrs.get("offset", 0)
    if isinstance(k, bool) or not isinstance(k, int):
        return f"offset = {k}: a tail_mask's offset is an integer"
    if out is None or len(ins) < 2 or ins[1] is None:
        return None if len(ins) >= 2 or not k else "'offset' offsets the bound b, and this tail_mask has none"
    if len(out.shape) != 2 or len(ins[1].shape) != 1 or ins[1].shape[0] != out.shape[0]:
        return f"b is {_t(ins[1])}: a tail_mask's bound is one value a row ([{out.shape[0]}]) of a rank-2 x"
    return None


def _both(first, second):
    """A rule that is `first`'s reason, else `second`'s."""
    def rule(out, ins, attrs):
        return first(out, ins, attrs) or second(out, ins, attrs)
    return rule


_DEFS = [
    OpDef("load", "memory", (), (), _load, "tma", None, "load", issue="warp", is_async=True, variable_latency=True,
          attrs=("col_stride", "col_offset", "iter_div", "column_major", "transposed", "fill", "batch")),
    OpDef("store", "memory", (), ("x",), None, "tma", None, "store", issue="warp", is_async=True),
    OpDef("mma", "mma", (2, 3), ("a", "b", "c"), _mma, "tensor", None, "mma", is_async=True,
          tensor_core=True, accumulator=2,
          shape="a is [M, K] (or [K, M]), b [K, N] (or [N, K]), c and the result [M, N]"),
    OpDef("exp2", "unary", (1, 2), ("x", "b"), _elementwise(), "sfu", "sfu", "exp2", "op_exp2"),
    OpDef("rowmax", "row", (1, 2), ("x", "m"), _row, "alu", "reduce", "math", "op_rowmax"),
    OpDef("rowsum", "row", (1, 2, 3), ("x", "l", "alpha"), _row, "alu", "reduce", "math", "op_rowsum"),
    OpDef("rescale", "binary", (2,), ("x", "alpha"), _elementwise(), "alu", "alu", "rescale", "op_rescale"),
    OpDef("convert", "convert", (1,), ("x",), _elementwise(), "alu", "convert", "math", "op_convert"),
    *[_unary(n) for n in ("exp", "log", "log2", "sqrt", "rsqrt", "recip", "tanh", "sigmoid")],
    *[_unary(n) for n in LIBM],  # CUDA's math library, one float each (emitted from LIBM alone)
    *[_unary(n, "alu") for n in ("abs", "neg")],
    *[_binary(n) for n in ("add", "mul", "max", "min")],
    # max_nan / min_nan: max and min that give NaN where either operand is NaN (arith.maximumf / minimumf:
    # `tl.maximum(..., propagate_nan=ALL)`, `tl.clamp(..., propagate_nan=ALL)`); max and min give the other operand
    # there (arith.maxnumf / minnumf, Triton's default), as fmaxf and fminf do
    *[_binary(n) for n in ("max_nan", "min_nan")],
    # comparisons: 1 where x OP y holds, else 0 (a float tile: select's condition, leaky ReLU's x >= 0)
    *[_binary(n) for n in COMPARISONS],
    # fill x {scalar = V}: a tile of V shaped like x (a constant side of select or fma, `tl.where(c, x, 0)`)
    _binary("fill", arity=(1,)),
    _binary("sub", arity=(1, 2, 3), roles=("x", "y", "z")),  # with z: (x - y) * z, the dS of attention
    _binary("div", "sfu"),
    # rem x, y: x - trunc(x / y) * y, the remainder of a division truncated toward zero (arith.remsi of integers
    # held as floats, exact below 2^24; arith.remf): `row % seq_len` of a row's position
    _binary("rem", "sfu"),
    *[_binary(n, "bit", ints=True, helper=f"op_bit_{n}" if n in ("and", "or", "xor") else "")
      for n in ("and", "or", "xor", "shl", "shr")],
    # select cond, a, b: a where cond is nonzero, else b; written with two operands, b is the `scalar` attribute
    # (`tl.where(mk != 0, qk, -1e6)`: `select cond, qk : T {scalar = -1000000}`); with {divided_by = exp2_scale},
    # b is V / exp2_scale (the kernel's `tl.where(c, qk * scale, V)` with the scale folded into the exp2's)
    OpDef("select", "ternary", (2, 3), ("cond", "a", "b"), _both(_elementwise(), _divided_by), "alu", "alu", "math",
          "op_select", attrs=("scalar", "divided_by"),
          form="select cond, a, b : TYPE (or select cond, a : TYPE {scalar = V}, V its b; "
               "{scalar = V, divided_by = exp2_scale}: V / exp2_scale)"),
    OpDef("mask", "mask", (1, 2), ("x", "y"), _mask, "alu", "alu", "mask", "op_mask",
          attrs=("pred", "rows", "cols", "offset", "fill"), needs=("pred", "rows", "cols", "offset"),
          form="mask x[, y] : TYPE {pred = P, rows = A, cols = B, offset = C[, fill = V]}",
          shape="element (r, c) is x's where A*r + B*c + C P 0 (P one of eq ne lt le gt ge), else y's or fill"),
    # tail_mask x {fill = V}: x, its elements past the loop's extent (those of a partial last tile along the
    # loop) V: Triton's `tl.where(cols < N, v, V)` of a value computed in the loop (emit/ragged.py). With a
    # per-row bound b ([M], one value a row, a prologue result), on every iteration too: element (r, c) is V
    # where l0 + c >= b[r] + K (l0 the tile's first column along the loop, K the `offset`, 0 by default):
    # `tl.where(cols <= row % S, v, V)` of a row's columns is {offset = 1} of b = row % S
    OpDef("tail_mask", "mask", (1, 2), ("x", "b"), _both(_elementwise(), _row_bound), "alu", "alu", "tail", "",
          attrs=("fill", "offset"), needs=("fill",),
          form="tail_mask x[, b] : TYPE {fill = V[, offset = K]}",
          shape="x's type; its elements past the loop's extent (on a partial last tile) are V, and with b [M] "
                "those of columns l0 + c >= b[r] + K on every iteration"),
    OpDef("position", "position", (0,), (), _position, "alu", "alu", "position", "op_position",
          attrs=("rows", "cols", "grid", "loop", "offset"), needs=("rows", "cols"),
          form="position : TYPE {rows = A, cols = B[, grid = P][, loop = Q][, offset = K]}",
          shape="element (r, c) is A*r + B*c + P*g0 + Q*l0 + K: r, c its row and column in the tile, g0 the first "
                "row in memory of its dimension along the grid's rows, l0 = iteration * step, the first element "
                "along the loop of its dimension along the loop (ALiBi's q - k: rows = 1, cols = -1, grid = 1, "
                "loop = -1)"),
    # rand {seed, row, col, ...}: Triton's random numbers (tl.rand, tl.randint) at each element's Philox counter
    # (twill/counter.py; emit/rand.py). Per element 10 rounds of two 32 x 32 -> 64-bit multiplies and two
    # three-input xors, the counter's multiply-adds and the conversion to a float: ~48 integer instructions at the
    # `bit` rate (64 a clock per SM on Hopper), and the rounds' state (4 words, 2 keys, the counter) a few elements
    # at a time in flight while it runs (ptxas interleaves them): 16 registers of scratch
    OpDef("rand", "rand", (0,), (), _rand, "alu", "bit", "rand", "", attrs=("seed", "row", "col", "batch", "base",
          "rounds"), needs=("seed", "row", "col"), work=48.0, scratch=16,
          form="rand : TYPE {seed = S, row = A, col = B[, batch = P][, base = K][, rounds = N]}",
          shape="element (r, c) draws Triton's Philox stream (tl.rand, f32; tl.randint, i32) at counter A*(g0 + r) + "
                "B*(l0 + c) + P*b + K: g0 the tile's first row along the grid, l0 its first element along the loop, b "
                "the batch entry; A, B, P, K integers or products of i32 prologue scalars (or extent, the loop's whole "
                "extent); S the i64 prologue scalar of the seed"),
    OpDef("join", "join", (2,), ("x", "y"), _join, "alu", "alu", "join", "op_join",
          shape="x and y [M, N], the result [M, 2N]: x's column j is column 2j, y's column 2j + 1"),
    # gather x, index: one element a row of the tensor the loop's load x walks, at column index[r] (an epilogue's
    # cross-entropy target logit, `tl.load(X + row * stride + tl.load(IDX + row))`; emit/gather.py)
    OpDef("gather", "gather", (2,), ("x", "index"), _gather, "alu", "alu", "gather", "",
          shape="x a loop's load [M, K] (its tensor in global memory), index i32 or i64 [M]: the result [M] of x's "
                "dtype, element r the tensor's row r at column index[r] (0 where index[r] is outside the row)"),
    OpDef("fma", "ternary", (2, 3), ("a", "b", "c"), _elementwise(), "alu", "alu", "math", "op_fma",
          attrs=("scalar",), form="fma a, b, c : TYPE (or fma a, b : TYPE {scalar = V}, V its c)"),
    *[OpDef(f"reduce_{n}", "reduce", (1, 2), ("x", "init"), _reduce, "alu", "reduce", "reduce", f"op_reduce_{n}",
            attrs=("axis",), needs=("axis",)) for n in ("sum", "max", "min", "prod")],
    # rowargmax x, index (rowargmin): tl.argmax / tl.argmin along a tile's rows, the index of each row's largest
    # (smallest) value, ties to the smaller index (Triton's combiner, twill/ttgir/argreduce.py); the value itself is
    # rowmax x (reduce_min x {axis = 1}). Per element a compare and two selects: `work` 2
    *[OpDef(f"rowarg{n}", "row", (2,), ("x", "index"), _arg_row, "alu", "reduce", "math", f"op_rowarg{n}",
            work=2.0, shape="x [M, N] float, index i32/i64 [M, N] or [1, N]: the result [M] of index's dtype")
      for n in ("max", "min")],
    *[OpDef(n, "scan", (1,), ("x",), _scan, "alu", "reduce", "reduce", f"op_{n}", attrs=("axis",), needs=("axis",))
      for n in ("cumsum", "cumprod", "cummax", "cummin")],  # a forward running sum (product, max, min) along the
    # axis: tl.cumsum, tl.cumprod, tl.associative_scan of tl.maximum / tl.minimum (NaN skipped, as fmaxf / fminf)
    OpDef("dequant", "dequant", (2, 3), ("packed", "zero", "scale"), _dequant, "alu", "dequant", "dequant",
          "op_dequant", attrs=("bits", "shift"), needs=("bits",), form="dequant packed, [zero,] scale : TYPE {bits = B, shift = S}",
          shape="(float((packed >> shift) & (2^bits - 1)) - zero) * scale; packed an integer tile of the "
                "result's shape, zero and scale float and broadcast"),
]
VOCAB: dict[str, OpDef] = {d.name: d for d in _DEFS}
# Attributes some opcode of the table takes (the parser accepts them on those opcodes only).
OPCODE_ATTRIBUTES = tuple(dict.fromkeys(a for d in _DEFS for a in d.attrs))
RATE_CLASSES = ("alu", "sfu", "convert", "bit", "dequant", "reduce")


def lookup(opcode: str) -> OpDef | None:
    return VOCAB.get(opcode)


def check(opcode: str, out: TensorType | None, ins: list, attrs: dict) -> tuple[str, str] | None:
    """(reason, hint) when an op of a table opcode does not fit its entry, else None. `ins` holds
    the operand types (None for an operand whose type is unknown)."""
    d = VOCAB.get(opcode)
    if d is None:
        return None
    usage = "usage: " + (d.form or f"{d.usage} : TYPE" + (" {" + ", ".join(f"{a} = A" for a in d.attrs) + "}"
                                                         if d.attrs else ""))
    usage += f"; {d.shape}" if d.shape else ""
    if d.family == "ternary" and len(ins) == scalar_arity(d) and "scalar" not in attrs:
        return (f"{opcode} takes 3 operands, and this one has {len(ins)} (and no {{scalar = V}} for its "
                f"{d.roles[-1]})"), usage
    if d.arity and len(ins) not in d.arity:
        counts = " or ".join(map(str, d.arity))
        return f"{opcode} takes {counts} operand{'s' if d.arity != (1,) else ''}, and this one has {len(ins)}", usage
    for key in d.needs:
        if key not in attrs:
            return f"{opcode} needs the attribute '{key}'", usage
    for key in attrs:
        if key in OPCODE_ATTRIBUTES and key not in d.attrs:
            return f"{opcode} takes no attribute '{key}'", usage
    if "scalar" in attrs and len(ins) != scalar_arity(d):
        n = scalar_arity(d)
        last = f"y of a one-operand {opcode}" if n == 1 else f"{d.roles[-1]} of a {n}-operand {opcode}"
        return f"'scalar' is the {last}, and this one has {len(ins)} operand{'s' if len(ins) != 1 else ''}", usage
    if d.family != "memory" and out is None:
        return f"{opcode} gives a result: write 'NAME = {opcode} ... : TYPE'", usage
    if d.rule is not None and (why := d.rule(out, ins, attrs)) is not None:
        return why, usage
    return None


def scalar_arity(d: OpDef) -> int:
    """How many operands an op of `d` is written with where its last operand is the `scalar` attribute: 1 for a
    binary op (its y), 2 for a ternary one (select's b, fma's c)."""
    return 2 if d.family == "ternary" else 1


def generic_cycles(opcode: str, elements: float, dtype_bits: int, rates: dict[str, float]) -> float | None:
    """The generic cost of a table opcode: elements * (2 for 64-bit data, else 1) * work / rates[class];
    None when it has none or the machine gives no rate for its class."""
    d = VOCAB.get(opcode)
    if d is None or d.cost is None or d.cost not in rates:
        return None
    return elements * (2 if dtype_bits >= 64 else 1) * d.work / rates[d.cost]
