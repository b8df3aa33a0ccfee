"""What a kernel does after its loop: the ops that become the graph's epilogue.

`lower_after` walks the ops that follow the chosen `scf.for` in its block, up to the stores, and
keeps what the stored values are computed from: the loop's results (the carries' last values),
scalar arguments (`sm_scale`), values loaded through a pointer argument (a scale, a bias row), and
splat constants. Elementwise arithmetic, conversions, layout views and broadcasts become the `.tir`
epilogue's ops (docs/ttgir-import.md, section 11); integer arithmetic on scalars is index
arithmetic and is folded away, as in the loop. Any other op on such a value is a located warning
naming it (an error under --strict), and the graph then has no epilogue (`with_epilogue`).
Which argument feeds which tensor is provenance.py's; the result goes into the graph in attach.py.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import Diagnostic, InputError, Span
from ..ir import TensorType
from ..vocab import LIBM
from .locs import position
from .parser import MOp
from .opnames import ATOMICS
from .provenance import LOADS, STORES, Signature, func_args, signature  # noqa: F401 (signature: lower.py's)
from . import clamps
from .rand import is_draw
from .values import Const
from .parts import Part, Parted, Shaped, merged, reshaped
from .scalaratomic import ScalarAtomics

VIEWS = {"ttng.warp_group_dot_wait", "ttg.convert_layout", "tt.broadcast", "tt.splat", "tt.expand_dims", "tt.reshape", "ttg.memdesc_index",
         "ttg.memdesc_subview", "ttng.tmem_subslice", "ttg.memdesc_reinterpret"}
SLICES = {"ttng.tmem_subslice", "ttg.memdesc_subview", "ttg.memdesc_subslice"}  # a part of a buffer
MEMORY_STORES = {"ttng.tmem_store", "ttg.local_store"}
# TTGIR op -> (.tir opcode, commutative): binary arithmetic
BINARY = {"arith.addf": ("add", True), "arith.subf": ("sub", False), "arith.mulf": ("mul", True),
          "arith.divf": ("div", False), "tt.precise_divf": ("div", False), "arith.maxnumf": ("max", True),
          "arith.maximumf": ("max_nan", True), "arith.minnumf": ("min", True), "arith.minimumf": ("min_nan", True)}
UNARY = {"arith.negf": "neg", "math.exp": "exp", "math.log": "log", "math.log2": "log2", "math.sqrt": "sqrt",
         "math.rsqrt": "rsqrt", "math.absf": "abs", "math.tanh": "tanh", **{f"math.{n}": n for n in LIBM}}
CONVERTS = {"arith.truncf", "arith.extf", "tt.fp_to_fp", "arith.sitofp", "arith.uitofp"}
TERNARY = {"arith.select": "select", "math.fma": "fma"}
# arith.cmpf predicate -> the vocabulary's comparison (1 where it holds, else 0). The ordered ones are
# false where an operand is NaN, as the emitted `a >= b` is; `une` is true there, as `ne` is. The
# other unordered ones (true on NaN) have no op.
COMPARE = {"oge": "ge", "ogt": "gt", "ole": "le", "olt": "lt", "oeq": "eq", "une": "ne"}
SWAPPED = {"ge": "le", "gt": "lt", "le": "ge", "lt": "gt", "eq": "eq", "ne": "ne"}  # c OP x is x SWAPPED c
FLOAT = ("f32", "f16", "bf16", "f64", "f8e4m3", "f8e5m2")  # (an fp8 output: the FP8 GEMM's scaled C)
LN2 = 0.6931471805599453


def _number(v) -> bool:
    """A splat constant the epilogue can take: an int or a float (not a boolean)."""
    return isinstance(v, Const) and isinstance(v.value, (int, float)) and not isinstance(v.value, bool)


class MemoryUpdate(InputError):
    """A read-modify-write of global memory (`tl.atomic_add`) of the loop's results: the graph's
    outputs are stored, so without it the kernel would overwrite what it must add to. Never a
    warning (a graph without an epilogue would be silently wrong)."""


class ColumnReduction(InputError):
    """A carried rank-2 tile reduced after the loop along its first axis (`tl.sum(acc, axis=0)`: column sums
    of a loop over rows, the layer-norm backward's dw/db): the graph reduces along a row, so the graph
    without it would store the carry itself. Never a warning."""


@dataclass(frozen=True)
class EVal:
    """A value after the loop: kind carry (`key` its Carry.ssa), op (an index into ops), scalar (a
    scalar argument's name), input (a RawInput's index)."""

    kind: str
    key: object
    column: bool = False  # a rank-1 value seen through tt.expand_dims {axis = 0}


@dataclass
class RawOp:
    opcode: str
    operands: list
    type: TensorType
    ssa: str
    span: Span
    attrs: tuple = ()


@dataclass(frozen=True)
class RawInput:
    arg: str  # the pointer argument it is loaded through
    type: TensorType
    ssa: str
    span: Span
    unbatched: bool = False  # its load reads one tensor for every batch entry (unbatched.py): `{batch = none}`


@dataclass(frozen=True)
class RawEpilogue:
    ops: tuple = ()
    inputs: tuple = ()
    scalars: tuple = ()  # (argument name, dtype) read by some op
    stores: tuple = ()  # (EVal, pointer argument or None, span)
    atomics: tuple = ()  # (EVal of one value, pointer argument, "max" | "min" | "add", span): scalaratomic.py
    transposed: tuple = ()  # the pointer arguments stored transposed (memory.transposed_store): C^T


# -- the ops after the loop -------------------------------------------------------------------

class _After(Parted, ScalarAtomics):
    def __init__(self, lw, sig: Signature):
        self.lw, self.sig = lw, sig
        self.env: dict[str, object] = {}  # SSA name -> EVal or Const
        self.ops: list[RawOp] = []
        self.inputs: list[RawInput] = []
        self.stores: list[tuple] = []
        self.transposed: list[str] = []  # pointer arguments a carry is stored to transposed
        # (TTGIR op, source position) of each loop op -> what a copy of it after the loop is: the
        # carry's last value for an op the loop yields (the drained last iteration), else PEELED
        self.peeled: dict[tuple, object] = {}
        self.int_args: set[str] = set()  # integer scalar arguments: a float conversion of one is a scalar
        self.part_stores: list[PartStore] = []  # stores of column parts of a tile (parts.py)
        self.whole_ops: dict[tuple, EVal] = {}  # an op on parts, as the op on the whole tiles: one per op
        self.widen: tuple | None = None  # the whole tile's shape, while an op on parts is computed whole
        self.halves: list[tuple] = []  # the halves of scalar float atomics (scalaratomic.py)

    def error(self, op: MOp, message: str, hint: str | None = None) -> InputError:
        return InputError(Diagnostic(message, self.lw.span(op), hint))

    def get(self, name: str):
        """What an operand is here: a value of the epilogue, or a constant from before the loop."""
        for key in (name, name + "#0"):
            if key in self.env:
                return self.env[key]
            if isinstance(self.lw.env.get(key), Const):
                return self.lw.env[key]
        return None

    def result_type(self, op: MOp) -> TensorType:
        outs = self._outs(op)
        mtype = outs[0] if outs else None
        if mtype is None:
            raise self.error(op, f"'{op.name}' after the loop: its result type cannot be read")
        if mtype.kind == "scalar":
            from .types import DTYPES
            return TensorType(DTYPES.get(mtype.elem, "f32"), (1,))
        tt = mtype.tile()
        if tt is None:
            raise self.error(op, f"'{op.name}' after the loop makes a tile of '{mtype.elem}', which .tir has no dtype for")
        return replace(tt, shape=self.widen) if self.widen is not None else tt

    def add(self, op: MOp, opcode: str, operands: list, attrs=(), type_=None) -> EVal:
        t = type_ or self.result_type(op)
        if len(t.shape) == 1 and any(isinstance(o, EVal) and o.column for o in operands):
            t = replace(t, shape=(1,) + t.shape)
        self.ops.append(RawOp(opcode, operands, t, op.results[0] if op.results else "", self.lw.span(op), attrs))
        return EVal("op", len(self.ops) - 1, column=len(t.shape) == 2 and t.shape[0] == 1)

    def columnize(self, v: EVal) -> EVal:
        """v seen through expand_dims {axis = 0}: a rank-1 op or input is one value per column."""
        target = self.ops[v.key] if v.kind == "op" else self.inputs[v.key] if v.kind == "input" else None
        if target is not None and len(target.type.shape) == 1:
            t = replace(target.type, shape=(1,) + target.type.shape)
            if v.kind == "op":
                target.type = t
                for i, o in enumerate(target.operands):
                    if isinstance(o, EVal) and o.kind in ("op", "input"):
                        target.operands[i] = self.columnize(o)
            else:
                self.inputs[v.key] = replace(target, type=t)
        return replace(v, column=True)

    def lower(self, op: MOp) -> None:
        peeled = self.peeled.get((op.name, position(op.loc, self.lw.locs))) if op.loc else None
        if peeled is not None:  # a copy of a loop op, drained after the loop by Triton's pipeliner
            self.bind(op, peeled)
            return
        if op.name == "scf.if" and op.results:
            self.branch(op)
            return
        vals = [self.get(n) for n, _ in op.operands()]
        if op.name == "scf.for" or any(v is LATER for v in vals):
            # a later loop of a sequence, and what is computed from its results (LayerNorm's rstd from the
            # variance loop's, after the mean loop): that loop's epilogue, not this one's
            for r in op.results:
                self.env[r] = LATER
                self.lw.env.setdefault(r, _scalar())
            return
        if any(isinstance(v, (Part, Shaped)) for v in vals):
            self.on_part(op, vals)
            return
        if self.scalar_atomic(op, vals):  # a whole-tile reduction and an atomic update of one value by it
            return
        if is_draw(op):  # tl.rand's rounds (rand.py) after the loop: a `rand` of the output tile is not built
            raise self.error(op, "tl.rand after the loop (random numbers of the output tile, Triton's Philox rounds: a "
                                 "GEMM's dropout in its epilogue): not imported; a `rand` is drawn in the loop",
                             "docs/ttgir-import.md, section 8 (\"Random numbers\") says what is imported")
        live = [v for v in vals if isinstance(v, EVal)]
        names = [n for n, _ in op.operands()]
        if op.name in ("arith.sitofp", "arith.uitofp") and len(names) == 1 and names[0] in self.int_args \
                and op.results:  # float(N) of an integer argument (a mean's s / N): the scalar N
            self.bind(op, EVal("scalar", names[0]))
            return
        if op.name == "ttng.tmem_subslice" and live and op.results and self.subslice(op, live[0]):
            return
        if op.name in SLICES and live and not self._same_elements(op):
            raise InputError(*self.error(
                op, f"'{op.name}' after the loop takes a part of the loop's result (the persistent tutorial's "
                    "`tl.split` of the accumulator into halves, each stored): an epilogue of parts of a tile is "
                    "not imported; the graph would store the whole tile where the kernel stores a part",
                "store the whole tile (one tl.store of the accumulator)").diagnostics)
        if op.name in ("ttng.tmem_load", "ttg.local_load") and live and op.results:
            self.bind(op, live[0])  # a carried buffer's last value, of any dtype (an i32 accumulator)
            return
        if op.name == "tt.load" and op.results and op.results[0] in self.sig.loads and self._float(op) \
                and self.lw.addresses is not None and self.lw.addresses.loaded_from(names[0], op.head.line):
            self.bind(op, gathered_element(self, op))
        elif op.name in LOADS and op.results and op.results[0] in self.sig.loads and self._float(op):
            self.load(op)
        elif op.name in STORES:
            self.store(op, vals)
        elif op.name in ATOMICS and live:
            raise MemoryUpdate(*self.error(
                op, f"'{op.name}' after the loop updates memory in place with the loop's results (an atomic "
                    "read-modify-write, `tl.atomic_add`/`tl.atomic_cas`); a graph's outputs are stored whole, "
                    "so its kernel would overwrite what this one adds to",
                "write the partial results to their own buffer (split-K: one slice a split, summed by a "
                "second pass) and store them with tl.store").diagnostics)
        elif op.name in MEMORY_STORES and live and live[0] is vals[0]:  # the buffer now holds the value
            self.env[op.operands()[1][0]] = live[0]
        elif not live or not op.results or not self._float(op):
            self.fold(op)  # no data of the epilogue; integer results are index arithmetic and masks
        elif op.name in ("ttng.tmem_load", "ttg.local_load", "ttg.local_alloc", "ttng.tmem_alloc"):
            # a carried buffer's last value read, or a value copied into memory (for a TMA store)
            self.bind(op, live[0])
        elif op.name == "ttng.warp_group_dot_wait":  # result k is operand k, waited for (two dots' waits)
            for r, v in zip(op.results, vals):
                if isinstance(v, EVal):
                    self.env[r] = v
                else:
                    self.lw.env.setdefault(r, _scalar())
        elif op.name in VIEWS and not (op.name == "tt.reshape" and not self._same_elements(op)):
            v = live[0]
            if op.name == "tt.expand_dims" and _axis(op) == 0:
                v = self.columnize(v)
            self.bind(op, v)
        else:
            self.bind(op, self.compute(op, vals))

    def branch(self, op: MOp) -> None:
        """``scf.if`` after the loop (the pipeliner's guarded drain of the last iteration): its
        branches are walked like the ops around them, and each result is what a branch yields of
        the epilogue's values (a carry's last value first), else nothing the epilogue reads."""
        yielded: list[list] = []
        for region in op.regions:
            for block in region:
                for inner in block.ops:
                    if inner.name == "scf.yield":
                        yielded.append([self.get(n) for n, _ in inner.operands()])
                    else:
                        self.lower(inner)
        for k, r in enumerate(op.results):
            found = [ys[k] for ys in yielded if k < len(ys) and isinstance(ys[k], EVal)]
            carry = [v for v in found if v.kind == "carry"]
            self.env[r] = (carry or found or [PEELED])[0]
            self.lw.env.setdefault(r, _scalar())

    def _same_elements(self, op: MOp) -> bool:
        """A reshape that only adds or drops dimensions of 1 ([128] <-> [128, 1]) is a view; one that
        moves elements between dimensions (W4A16's [128, 64, 2] -> [128, 128]) is not."""
        ins, outs = self.lw.signature(op)
        return bool(ins and outs) and [d for d in ins[0].shape if d != 1] == [d for d in outs[0].shape if d != 1]

    def _outs(self, op: MOp) -> list:
        """The op's result types; a load's, where only its pointer's is printed (`tt.load %p : !tt.ptr<f32>`)."""
        ins, outs = self.lw.signature(op)
        if outs or not ins:
            return outs
        if op.name not in LOADS:  # `arith.mulf %a, %b : f32`: one type for all
            return ins[-1:]
        src = ins[0]
        if src.kind == "ptr" and not src.shape:
            return [type(src)("scalar", (), src.elem)]
        return [type(src)("tensor", src.shape, src.pointee if src.elem == "ptr" else src.elem)]

    def _float(self, op: MOp) -> bool:
        try:
            outs = self._outs(op)
        except InputError:
            return False
        t = outs[0].tile() if outs and outs[0].kind != "scalar" else None
        elem = t.dtype if t is not None else (outs[0].elem if outs else "")
        return elem in FLOAT

    def fold(self, op: MOp) -> None:
        """Not data of the epilogue: lowered as the loop's ops are (constants, index arithmetic)."""
        for name, _ in op.operands():
            self.lw.env.setdefault(name, self.lw.env.get(name.split("#")[0], None) or _scalar())
        if op.name == "scf.yield":
            return
        try:
            lower_op(self.lw, op)
        except InputError:  # after the loop, what the epilogue does not read may be anything
            for r in op.results:
                self.lw.env.setdefault(r, _scalar())
            return
        for r in op.results:
            v = self.lw.env.get(r)
            if isinstance(v, Const):
                self.env[r] = v

    def bind(self, op: MOp, v) -> None:
        for r in op.results:
            self.env[r] = v

    def load(self, op: MOp) -> None:
        t = self.result_type(op)
        self.inputs.append(RawInput(self.sig.loads[op.results[0]], t, op.results[0], self.lw.span(op),
                                    self.lw.batch is not None and self.lw.batch.unbatched(op)))
        self.env[op.results[0]] = EVal("input", len(self.inputs) - 1)

    def store(self, op: MOp, vals: list) -> None:
        from .memory import edge_mask, stores_transposed
        edge_mask(self.lw, op, after_loop=True)
        value = next((v for v in vals if isinstance(v, EVal)), None)
        if value is None:
            return
        arg = self.sig.stores.get(f"{op.head.line}:{op.head.col}")
        if stores_transposed(self.lw, op):  # a carry's output only (attach._outputs refuses any other)
            self.transposed.append(arg)
        self.stores.append((value, arg, self.lw.span(op)))

    def compute(self, op: MOp, vals: list) -> EVal:
        name = op.name
        if name == "tt.reshape" and vals and isinstance(vals[0], EVal) and not (
                vals[0].kind == "op" and self.ops[vals[0].key].opcode == "join"):
            ins, outs = self.lw.signature(op)
            shaped = reshaped(vals[0], ins[0].shape, outs[0].shape) if ins and outs else None
            if shaped is not None:
                return shaped
            if ins and outs and len(ins[0].shape) == 2 and len(outs[0].shape) == 1:
                raise self.error(op, "'tt.reshape' after the loop of a tile to one dimension (a reduction of the "
                                     "whole tile to one value, `tl.max(x)` with no axis, as an amax): the epilogue "
                                     "has no whole-tile reduction (only `reduce_* {axis = 1}`, one value a row), "
                                     "nor an atomic output", "reduce along axis 1 in the kernel and store the "
                                     "row values; reduce them on the host")
        if name in ("tt.join", "tt.reshape"):
            return self.join(op, vals)
        if name in CONVERTS and isinstance(vals[0], EVal) and vals[0].kind == "op" and self.ops[vals[0].key].opcode == "join":
            j = self.ops[vals[0].key]  # a join converted: the join rounds to the new dtype (a permutation
            return self.add(op, "join", list(j.operands), type_=replace(j.type, dtype=self.result_type(op).dtype))
        if name in CONVERTS:
            return self.add(op, "convert", [vals[0]])
        if name in UNARY:
            return self.add(op, UNARY[name], [vals[0]])
        if name == "math.exp2":  # exp2 x = exp(x * ln 2): the epilogue's exp2 would apply exp2_scale
            x = self.add(op, "mul", [vals[0]], (("scalar", LN2),), self.result_type(op))
            return self.add(op, "exp", [x])
        if name in BINARY:
            return self.binary(op, *BINARY[name], vals)
        if name == clamps.CLAMP and len(vals) == 3 and (parts := clamps.split(op)) is not None:  # min(max(x, lo), hi)
            low = self.binary(parts[0], *BINARY[parts[0].name], vals[:2])
            return self.binary(parts[1], *BINARY[parts[1].name], [low, vals[2]])
        if name == "tt.reduce":
            return self.reduce(op, vals)
        if name == "arith.cmpf" and op.tokens and op.tokens[0].text.rstrip(",") in COMPARE and len(vals) == 2:
            cmp = COMPARE[op.tokens[0].text.rstrip(",")]
            if isinstance(vals[0], Const) and isinstance(vals[1], EVal):  # c OP x: x OP' c
                cmp, vals = SWAPPED[cmp], [vals[1], vals[0]]
            return self.binary(op, cmp, False, vals, type_=TensorType("f32", self.result_type(op).shape))
        if name in TERNARY and any(isinstance(v, EVal) for v in vals) and all(
                isinstance(v, EVal) or _number(v) for v in vals):
            # a constant operand (`tl.where(x > 0, x, 0.0)`) is a tile of it: `fill` shaped like a tile operand
            sides = vals[1:] if name == "arith.select" else vals  # (a value operand, not select's condition)
            like = next((v for v in sides if isinstance(v, EVal)), next(v for v in vals if isinstance(v, EVal)))
            t = self.result_type(op)
            return self.add(op, TERNARY[name], [v if isinstance(v, EVal) else self.add(
                op, "fill", [like], (("scalar", float(v.value)),), t) for v in vals])
        raise self.error(op, f"'{op.name}' after the loop computes what is stored from the loop's results, and "
                             "the epilogue has no op for it", "the epilogue imports elementwise arithmetic, "
                             "conversions, exp/log/sqrt/tanh and layout views (docs/ttgir-import.md)")

    def reduce(self, op: MOp, vals: list) -> EVal:
        """``tt.reduce`` of one rank-2 tile along its last axis with an add, max or min combiner (a row
        norm's `tl.sum(acc * acc, axis=1)`): `reduce_sum`/`reduce_max`/`reduce_min x {axis = 1}`, one
        value a row."""
        from .opnames import ADD_COMBINERS, MAX_COMBINERS, MIN_COMBINERS
        body = op.body()
        combiner = [o.name for o in body if o.name != "tt.reduce.return"]
        kind = next((k for k, names in (("sum", ADD_COMBINERS), ("max", MAX_COMBINERS), ("min", MIN_COMBINERS))
                     if combiner and combiner[0] in names), None)
        x = vals[0] if len(vals) == 1 else None
        axis = _axis(op)
        if kind is None or len(combiner) != 1 or not isinstance(x, EVal) or axis is None:
            raise self.error(op, "'tt.reduce' after the loop: only a sum, max or min of one tile along its last "
                                 "axis is an epilogue op")
        ins, _ = self.lw.signature(op)
        shape = ins[0].tile().shape if ins and ins[0].tile() is not None else ()
        if len(shape) == 2 and axis % 2 == 0:
            raise ColumnReduction(Diagnostic(
                f"'tt.reduce' after the loop sums a {list(shape)} tile along axis 0 (one value a column: a loop over "
                "rows adding column partials, as the layer-norm backward's dw/db): the graph reduces along a row "
                "(the last axis, one value per grid row), and a loop whose grid runs over columns is not imported",
                self.lw.span(op), "not built: it would import as the row sum of the transposed tile (the columns "
                "the grid's rows, a [64] carry summing each loaded tile's columns), with the load read transposed "
                "(docs/ttgir-import.md, section 21)"))
        if len(shape) != 2 or axis % 2 != 1:
            raise self.error(op, f"'tt.reduce' after the loop along axis {axis} of a {list(shape)} tile: the "
                                 "epilogue reduces a rank-2 tile along its last axis (one value a row)")
        return self.add(op, f"reduce_{kind}", [x], (("axis", 1),))

    def join(self, op: MOp, vals: list) -> EVal:
        """``tt.join %x, %y`` of two [M, N] tiles, [M, N, 2], seen through ``tt.reshape`` to [M, 2N]:
        the columns interleaved (x's column j is column 2j, y's 2j + 1), the vocabulary's `join`."""
        t = self.result_type(op)
        x = vals[0] if vals else None
        if op.name == "tt.reshape" and isinstance(x, EVal) and x.kind == "op" and self.ops[x.key].opcode == "join" \
                and self.ops[x.key].type.shape == t.shape:
            return x  # the join's [M, N, 2] is the [M, 2N] it was typed as
        if op.name == "tt.join" and len(vals) == 2 and all(isinstance(v, EVal) for v in vals) and len(t.shape) == 3 \
                and t.shape[2] == 2:
            return self.add(op, "join", list(vals), type_=TensorType(t.dtype, (t.shape[0], 2 * t.shape[1])))
        raise self.error(op, f"'{op.name}' after the loop: only a join of two [M, N] tiles seen as [M, 2N] (a "
                             "tt.reshape of it) is an epilogue op")

    def binary(self, op: MOp, opcode: str, commutative: bool, vals: list, type_=None) -> EVal:
        x, y = vals[0], vals[1]
        if isinstance(x, EVal) and isinstance(y, EVal):
            return self.add(op, opcode, [x, y], type_=type_)
        const, value = (y, x) if isinstance(x, EVal) else (x, y)
        if not _number(const):
            raise self.error(op, f"'{op.name}' after the loop reads a value the importer cannot follow (neither a "
                                 "loop result, an argument, a load nor a splat constant)")
        c = float(const.value)
        if isinstance(x, EVal) or commutative:
            return self.add(op, opcode, [value], (("scalar", c),), type_)
        t = self.result_type(op)
        if opcode == "sub" and c == 0.0:  # 0 - x (Triton 3.6's sigmoid): -x
            return self.add(op, "neg", [value], type_=t)
        if opcode == "sub":  # c - x = -x + c
            return self.add(op, "add", [self.add(op, "neg", [value], type_=t)], (("scalar", c),), t)
        if opcode == "div":  # c / x = recip(x) * c
            r = self.add(op, "recip", [value], type_=t)
            return r if c == 1.0 else self.add(op, "mul", [r], (("scalar", c),), t)
        raise self.error(op, f"'{op.name}' after the loop with a constant first operand has no epilogue op")


INDEX_VIEWS = {"arith.extsi", "arith.extui", "ttg.convert_layout"}  # what an index may pass through, unchanged


def gathered_element(walk: _After, op: MOp) -> EVal:
    """`tl.load(X + row * stride + tl.load(IDX + row))` after the loop: one element a row of the tensor X a
    load of the loop walks, at the column loaded per row (a cross-entropy's target logit), the graph's
    `gather x, idx` (x that load, idx an i32/i64 [M] input). Its pointer must be X's row pointer plus the
    loaded index as it is (extended, not scaled or offset): any other address through a loaded value is
    an error at the load."""
    lw = walk.lw
    ptr = op.operands()[0][0]
    add = lw.addresses.defs.get(ptr.split("#")[0])
    refuse = lambda why: walk.error(op, f"'{op.name}' reads an address computed from a loaded value {why}: a gather "
                                    "is imported as one element a row, `X + row * stride + tl.load(IDX + row)`",
                                    "docs/ttgir-import.md, section 8 (\"The target's logit\")")
    if add is None or add.name != "tt.addptr" or op.operands()[1:]:
        raise refuse("through another pointer or with a mask")
    (base, _), (idx, _) = add.operands()
    if lw.addresses.loaded_from(base, op.head.line) is not None:
        raise refuse("as its row's pointer")
    row = lw.addresses.of(base)
    if row is None or row.base is None or len(row.coefs) != 1:
        raise refuse("to a pointer that is no row's of a tensor")
    src = lw.addresses.defs.get(idx.split("#")[0])
    while src is not None and src.name in INDEX_VIEWS:
        src = lw.addresses.defs.get(src.operands()[0][0].split("#")[0])
    if src is None or src.name != "tt.load" or not src.results or src.results[0] not in walk.sig.loads \
            or src.operands()[1:]:
        raise refuse("that is not a loaded index as it is (`IDX[row]`, no arithmetic on it, no mask)")
    it = walk.result_type(src)
    if it.dtype not in ("i32", "i64"):
        raise refuse(f"of {it.dtype} (an index is i32 or i64)")
    walk.inputs.append(RawInput(walk.sig.loads[src.results[0]], it, src.results[0], lw.span(src)))
    index = EVal("input", len(walk.inputs) - 1)
    return walk.add(op, "gather", [EVal("source", walk.sig.loads[op.results[0]]), index])


def lower_op(lw, op: MOp) -> None:
    from .lower import lower_op as lower  # (lower.py imports this module)
    lower(lw, op)


def _axis(op: MOp) -> int | None:
    from .lower import int_attr
    return int_attr(op, "axis")


def _scalar():
    from .values import SCALAR
    return SCALAR


def with_epilogue(lowered, walk, sig: Signature):
    """`lowered` with the epilogue `walk()` finds, or, where the ops after the loop are beyond it
    (an op the epilogue has no form for: the W4A16 kernel's tt.join, the unrolled diagonal block
    of a causal kernel), without one and with a located warning naming the op (an error under
    --strict, as an unknown op in the loop is, and wherever the import chose the loop: loops.py):
    the outputs are then the carries' last values."""
    from .values import Note
    from .indices import UnexpressedMask
    try:
        return replace(lowered, epilogue=walk(), signature=sig)
    except (UnexpressedMask, MemoryUpdate, ColumnReduction):
        raise  # a mask or an atomic dropped would change what is stored: never a warning
    except InputError as e:
        d = e.diagnostics[0]
        note = Note(Diagnostic(d.message + "; the graph has no epilogue: its outputs are the carries' last values, "
                               "not what the kernel stores", d.span, d.hint, "warning"), unknown=True,
                    incomplete=d.message + ": the graph would store the carries' last values, not what the kernel stores")
        return replace(lowered, notes=lowered.notes + (note,), signature=sig)


PEELED = Const(None)  # an intermediate of a drained iteration: no value of the epilogue
LATER = Const(None)  # a result of a later loop of a sequence (or computed from one): no value of this epilogue


def lower_after(lw, func: MOp, loop: MOp, after, sig: Signature, yields=(), starts=()) -> RawEpilogue:
    """The epilogue of `loop`: what the ops `after` it compute from its results and store. A copy
    of a loop op (same op, same source position: what Triton's pipeliner drains after the loop) is
    the last iteration's, which the graph's loop runs: the carry's last value where the loop yields
    it, else nothing the epilogue reads. Each of `starts` (accstart.Start: a carry the import starts
    from 0) is computed again here and added to its carry's last value."""
    walk = _After(lw, sig)
    from .values import Tile
    yielded = {y.ref.index: c.ssa for c, y in zip(lw.carries, yields) if isinstance(y, Tile) and y.ref.kind == "node"}
    for i, n in enumerate(lw.nodes):
        if n.in_loop and n.pos is not None:
            walk.peeled.setdefault((n.mlir, n.pos), PEELED)
            if i in yielded:
                walk.peeled[(n.mlir, n.pos)] = EVal("carry", yielded[i])
    by_arg = {c.arg: c for c in lw.carries if c.arg is not None}
    for k, r in enumerate(loop.results):
        lw.env.setdefault(r, _scalar())
        if k in by_arg:
            walk.env[r] = EVal("carry", by_arg[k].ssa)
    for c in lw.carries:
        if c.buf is not None:
            for name in [lw.buffers[c.buf][0]] + lw.views.get(c.buf, []):
                walk.env[name] = EVal("carry", c.ssa)
    for n, dtype in _func_arg_dtypes(lw, func).items():
        if dtype == "f32":  # an integer argument is a size or a stride: index arithmetic
            walk.env[n] = EVal("scalar", n)
        elif dtype in ("i32", "i64"):  # ... unless converted to a float (`s / N`): then a scalar
            walk.int_args.add(n)
    for op in func.body():  # float(N) computed before the loop (Triton hoists LayerNorm's N above its loops)
        operands = op.operands()
        if op.name in ("arith.sitofp", "arith.uitofp") and op.results and len(operands) == 1 \
                and operands[0][0] in walk.int_args:
            walk.env.setdefault(op.results[0], EVal("scalar", operands[0][0]))
    for s in starts:
        _add_start(walk, lw.carries[s.carry], s)
    for op in after:
        walk.lower(op)
    walk.stores.extend(merged(walk.part_stores))
    atomics = walk.paired_atomics()
    used = _live(walk, atomics)
    read_scalars = sorted({o.key for i in used for o in walk.ops[i].operands if isinstance(o, EVal) and o.kind == "scalar"},
                          key=[n for n, _ in sig.args].index)
    dtypes = {n: t for n, t in _func_arg_dtypes(lw, func).items()}
    return RawEpilogue(tuple(walk.ops), tuple(walk.inputs), tuple((n, dtypes.get(n, "f32")) for n in read_scalars),
                       tuple(walk.stores), atomics, tuple(dict.fromkeys(a for a in walk.transposed if a is not None)))


def _add_start(walk: _After, carry, start) -> None:
    """The carry's last value, read after the loop, becomes that value plus its start: the start's
    float ops computed again (its loads are the epilogue's inputs; index arithmetic is the loop's)."""
    for op in start.ops:
        if walk._float(op):
            walk.lower(op)
    init = walk.get(start.ssa)
    last = EVal("carry", carry.ssa)
    if not isinstance(init, EVal) or init == last:
        raise walk.error(start.ops[-1], f"the start of carry '{carry.ssa}' computed before the loop is not a "
                                        "tile the epilogue can compute (a load, elementwise arithmetic, a conversion)")
    walk.ops.append(RawOp("add", [last, init], replace(carry.type, space="reg"), start.ssa, carry.span))
    total = EVal("op", len(walk.ops) - 1)
    for name, v in list(walk.env.items()):
        if v == last:
            walk.env[name] = total


def _live(walk: _After, atomics=()) -> list[int]:
    """The ops some stored value (or atomic update's value) is computed from."""
    out, todo = set(), [v for v, _, _ in walk.stores] + [a[0] for a in atomics]
    while todo:
        v = todo.pop()
        if isinstance(v, EVal) and v.kind == "op" and v.key not in out:
            out.add(v.key)
            todo.extend(walk.ops[v.key].operands)
    return sorted(out)


def _func_arg_dtypes(lw, func: MOp) -> dict[str, str]:
    out = {}
    for name, mtype, _ in func_args(func, lw.types):
        if mtype.kind == "scalar":
            out[name] = "f32" if mtype.elem in ("f32", "f16", "bf16", "f64") else "i32"
    return out
