"""What a kernel does after its loop, and which kernel argument feeds which tensor.

`lower_after` walks the ops that follow the chosen `scf.for` in its block, up to the stores, and
keeps what the stored values are computed from: the loop's results (the carries' last values),
scalar arguments (`sm_scale`), values loaded through a pointer argument (a scale, a bias row), and
splat constants. Elementwise arithmetic, conversions, layout views and broadcasts become the `.tir`
epilogue's ops (docs/ttgir-import.md); integer arithmetic on scalars is index arithmetic and is
folded away, as in the loop. Any other op on such a value is a located error naming it: the
epilogue would otherwise be written without it.

`arguments` follows every pointer of the function back to the argument it derives from (through
`tt.splat`, `tt.addptr`, `tt.broadcast`, `tt.make_tensor_ptr`, `tt.make_tensor_descriptor`,
`tt.advance`, layout views and loop iter_args), so that each argument can be matched to the load,
store, input or scalar of the graph it feeds (`Signature`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import Diagnostic, InputError, Span
from ..ir import TensorType
from .locs import position
from .parser import MOp
from .values import Const

POINTER_FLOW = {"tt.splat", "tt.addptr", "tt.broadcast", "tt.expand_dims", "ttg.convert_layout", "tt.advance",
                "tt.make_tensor_ptr", "tt.make_tensor_descriptor", "tt.reshape", "ttng.reinterpret_tensor_descriptor"}
LOADS = {"tt.load", "tt.descriptor_load", "tt.experimental_descriptor_load"}
STORES = {"tt.store", "tt.descriptor_store", "tt.experimental_descriptor_store", "ttng.async_tma_copy_local_to_global"}
VIEWS = {"ttng.warp_group_dot_wait", "ttg.convert_layout", "tt.broadcast", "tt.splat", "tt.expand_dims", "tt.reshape", "ttg.memdesc_index",
         "ttg.memdesc_subview", "ttng.tmem_subslice", "ttg.memdesc_reinterpret"}
MEMORY_STORES = {"ttng.tmem_store", "ttg.local_store"}
# TTGIR op -> (.tir opcode, commutative): binary arithmetic
BINARY = {"arith.addf": ("add", True), "arith.subf": ("sub", False), "arith.mulf": ("mul", True),
          "arith.divf": ("div", False), "tt.precise_divf": ("div", False), "arith.maxnumf": ("max", True),
          "arith.maximumf": ("max", True), "arith.minnumf": ("min", True), "arith.minimumf": ("min", True)}
UNARY = {"arith.negf": "neg", "math.exp": "exp", "math.log": "log", "math.log2": "log2", "math.sqrt": "sqrt",
         "math.rsqrt": "rsqrt", "math.absf": "abs", "math.tanh": "tanh"}
CONVERTS = {"arith.truncf", "arith.extf", "tt.fp_to_fp", "arith.sitofp", "arith.uitofp"}
TERNARY = {"arith.select": "select", "math.fma": "fma"}
FLOAT = ("f32", "f16", "bf16", "f64")
LN2 = 0.6931471805599453


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


@dataclass(frozen=True)
class RawEpilogue:
    ops: tuple = ()
    inputs: tuple = ()
    scalars: tuple = ()  # (argument name, dtype) read by some op
    stores: tuple = ()  # (EVal, pointer argument or None, span)


@dataclass(frozen=True)
class Signature:
    """The function's arguments in order, (name, kind: pointer | scalar | descriptor | other), and
    where pointers lead: SSA name of a load's result, or "LINE:COL" of a store -> argument name."""

    args: tuple = ()
    loads: dict = field(default_factory=dict)
    stores: dict = field(default_factory=dict)


# -- pointer provenance -----------------------------------------------------------------------

def _func_args(func: MOp, types) -> list[tuple[str, object]]:
    toks, out = func.tokens, []
    for i, tok in enumerate(toks[:-1]):
        if tok.kind == "ssa" and toks[i + 1].is_(":"):
            mtype, _ = types.read(toks, i + 2)
            out.append((tok.text[1:], mtype))
    return out


def _kind(mtype) -> str:
    if mtype.kind == "ptr" or (mtype.kind == "tensor" and mtype.elem == "ptr"):
        return "pointer"
    if mtype.kind == "desc":
        return "descriptor"
    return "scalar" if mtype.kind == "scalar" else "other"


COPIES = {"ttg.async_copy_global_to_local", "ttng.async_tma_copy_global_to_local", "ttng.async_tma_gather"}


def signature(func: MOp, types, locs=None) -> Signature:
    """The arguments of `func` and the pointer argument behind each load (keyed by the SSA name
    the load's node gets: its result, or for a TMA copy without one the variable its loc names)
    and each store (keyed by its position)."""
    from .locs import name as loc_name
    args = _func_args(func, types)
    prov = {name: name for name, t in args if _kind(t) in ("pointer", "descriptor")}
    loads, stores = {}, {}

    def walk(ops):
        for op in ops:
            names = [n.split("#")[0] for n, _ in op.operands()]
            src = next((prov[n] for n in names if n in prov), None)
            if op.name == "ttng.tensormap_create" and len(names) > 1 and names[1] in prov:
                prov[names[0]] = prov[names[1]]  # it writes the descriptor (operand 0) of a pointer (1)
            elif op.name in POINTER_FLOW and src is not None:
                for r in op.results:
                    prov[r.split("#")[0]] = src
            elif op.name in LOADS and src is not None and op.results:
                loads[op.results[0]] = src
            elif op.name in COPIES and src is not None:
                key = op.results[0] if op.results else loc_name(op.loc, locs or {})
                if key:
                    loads.setdefault(key, src)
            elif op.name in STORES and src is not None:
                stores[f"{op.head.line}:{op.head.col}"] = src
            if op.name == "scf.for":
                toks = op.tokens
                for i in range(len(toks) - 2):
                    if toks[i].kind == "ssa" and toks[i + 1].is_("=") and toks[i + 2].kind == "ssa":
                        init = toks[i + 2].text[1:].split("#")[0]
                        if init in prov:
                            prov[toks[i].text[1:]] = prov[init]
            for region in op.regions:
                for block in region:
                    walk(block.ops)
    walk(func.body())
    return Signature(tuple((n, _kind(t)) for n, t in args), loads, stores)


# -- the ops after the loop -------------------------------------------------------------------

class _After:
    def __init__(self, lw, sig: Signature):
        self.lw, self.sig = lw, sig
        self.env: dict[str, object] = {}  # SSA name -> EVal or Const
        self.ops: list[RawOp] = []
        self.inputs: list[RawInput] = []
        self.stores: list[tuple] = []
        # (TTGIR op, source position) of each loop op -> what a copy of it after the loop is: the
        # carry's last value for an op the loop yields (the drained last iteration), else PEELED
        self.peeled: dict[tuple, object] = {}

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
        return tt

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
        live = [v for v in vals if isinstance(v, EVal)]
        if op.name in LOADS and op.results and op.results[0] in self.sig.loads and self._float(op):
            self.load(op)
        elif op.name in STORES:
            self.store(op, vals)
        elif op.name in MEMORY_STORES and live and live[0] is vals[0]:  # the buffer now holds the value
            self.env[op.operands()[1][0]] = live[0]
        elif not live or not op.results or not self._float(op):
            self.fold(op)  # no data of the epilogue; integer results are index arithmetic and masks
        elif op.name in ("ttng.tmem_load", "ttg.local_load", "ttg.local_alloc", "ttng.tmem_alloc"):
            # a carried buffer's last value read, or a value copied into memory (for a TMA store)
            self.bind(op, live[0])
        elif op.name in VIEWS:
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
            self.lw.lower(op)
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
        self.inputs.append(RawInput(self.sig.loads[op.results[0]], t, op.results[0], self.lw.span(op)))
        self.env[op.results[0]] = EVal("input", len(self.inputs) - 1)

    def store(self, op: MOp, vals: list) -> None:
        value = next((v for v in vals if isinstance(v, EVal)), None)
        if value is None:
            return
        arg = self.sig.stores.get(f"{op.head.line}:{op.head.col}")
        self.stores.append((value, arg, self.lw.span(op)))

    def compute(self, op: MOp, vals: list) -> EVal:
        name = op.name
        if name in CONVERTS:
            return self.add(op, "convert", [vals[0]])
        if name in UNARY:
            return self.add(op, UNARY[name], [vals[0]])
        if name == "math.exp2":  # exp2 x = exp(x * ln 2): the epilogue's exp2 would apply exp2_scale
            x = self.add(op, "mul", [vals[0]], (("scalar", LN2),), self.result_type(op))
            return self.add(op, "exp", [x])
        if name in BINARY:
            return self.binary(op, *BINARY[name], vals)
        if name in TERNARY and not any(isinstance(v, Const) for v in vals):
            return self.add(op, TERNARY[name], list(vals))
        raise self.error(op, f"'{op.name}' after the loop computes what is stored from the loop's results, and "
                             "the epilogue has no op for it", "the epilogue imports elementwise arithmetic, "
                             "conversions, exp/log/sqrt/tanh and layout views (docs/ttgir-import.md)")

    def binary(self, op: MOp, opcode: str, commutative: bool, vals: list) -> EVal:
        x, y = vals[0], vals[1]
        if isinstance(x, EVal) and isinstance(y, EVal):
            return self.add(op, opcode, [x, y])
        const, value = (y, x) if isinstance(x, EVal) else (x, y)
        if not isinstance(const, Const) or not isinstance(const.value, (int, float)) or isinstance(const.value, bool):
            raise self.error(op, f"'{op.name}' after the loop reads a value the importer cannot follow (neither a "
                                 "loop result, an argument, a load nor a splat constant)")
        c = float(const.value)
        if isinstance(x, EVal) or commutative:
            return self.add(op, opcode, [value], (("scalar", c),))
        t = self.result_type(op)
        if opcode == "sub":  # c - x = -x + c
            return self.add(op, "add", [self.add(op, "neg", [value], type_=t)], (("scalar", c),), t)
        if opcode == "div":  # c / x = recip(x) * c
            r = self.add(op, "recip", [value], type_=t)
            return r if c == 1.0 else self.add(op, "mul", [r], (("scalar", c),), t)
        raise self.error(op, f"'{op.name}' after the loop with a constant first operand has no epilogue op")


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
    --strict, as an unknown op in the loop is): the outputs are then the carries' last values."""
    from .values import Note
    try:
        return replace(lowered, epilogue=walk(), signature=sig)
    except InputError as e:
        d = e.diagnostics[0]
        note = Note(Diagnostic(d.message + "; the graph has no epilogue: its outputs are the carries' last values, "
                               "not what the kernel stores", d.span, d.hint, "warning"), unknown=True)
        return replace(lowered, notes=lowered.notes + (note,), signature=sig)


PEELED = Const(None)  # an intermediate of a drained iteration: no value of the epilogue


def lower_after(lw, func: MOp, loop: MOp, after, sig: Signature, yields=()) -> RawEpilogue:
    """The epilogue of `loop`: what the ops `after` it compute from its results and store. A copy
    of a loop op (same op, same source position: what Triton's pipeliner drains after the loop) is
    the last iteration's, which the graph's loop runs: the carry's last value where the loop yields
    it, else nothing the epilogue reads."""
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
    for op in after:
        walk.lower(op)
    used = _live(walk)
    read_scalars = sorted({o.key for i in used for o in walk.ops[i].operands if isinstance(o, EVal) and o.kind == "scalar"},
                          key=[n for n, _ in sig.args].index)
    dtypes = {n: t for n, t in _func_arg_dtypes(lw, func).items()}
    return RawEpilogue(tuple(walk.ops), tuple(walk.inputs), tuple((n, dtypes.get(n, "f32")) for n in read_scalars),
                       tuple(walk.stores))


def _live(walk: _After) -> list[int]:
    """The ops some stored value is computed from."""
    out, todo = set(), [v for v, _, _ in walk.stores]
    while todo:
        v = todo.pop()
        if isinstance(v, EVal) and v.kind == "op" and v.key not in out:
            out.add(v.key)
            todo.extend(walk.ops[v.key].operands)
    return sorted(out)


def _func_arg_dtypes(lw, func: MOp) -> dict[str, str]:
    out = {}
    for name, mtype in _func_args(func, lw.types):
        if mtype.kind == "scalar":
            out[name] = "f32" if mtype.elem in ("f32", "f16", "bf16", "f64") else "i32"
    return out


# -- into the graph ---------------------------------------------------------------------------

def attach(graph, lowered, names, carries: dict, ops: dict, inputs: dict, stores: dict):
    """`graph` with the loop's epilogue and the function's arguments. `names` claims fresh graph
    names (build._Names); the dicts map SSA names (stores: "LINE:COL") to the graph's names of the
    carries, the loop's ops and the inputs."""
    from ..ir import Epilogue, Op, Operand, Value
    from .build import base_name
    raw, sig = lowered.epilogue, lowered.signature
    if raw is None:
        return graph
    live = _live_ops(raw)
    named: dict[tuple, str] = {}  # (kind, key) -> graph name
    new_inputs, scalars, eops = [], [], []

    def name_of(v: EVal, span) -> str:
        key = (v.kind, v.key)
        if key in named:
            return named[key]
        if v.kind == "carry":
            if v.key not in carries:
                raise InputError(Diagnostic(f"the value stored here reads the loop's result '%{v.key}', which the "
                                            "graph does not carry (no op of the loop computes it)", span))
            return carries[v.key]
        if v.kind == "input":
            inp = raw.inputs[v.key]
            named[key] = names.claim(base_name(inp.arg), base_name(inp.ssa), fallback="input")
            new_inputs.append(Value(named[key], inp.type, "input", span=inp.span))
        elif v.kind == "scalar":
            named[key] = names.claim(base_name(v.key), fallback="scalar")
            dtype = dict(raw.scalars).get(v.key, "f32")
            scalars.append(Value(named[key], TensorType(dtype, (1,)), "scalar"))
        else:
            op = raw.ops[v.key]
            operands = tuple(Operand(name_of(o, op.span)) for o in op.operands)
            base = base_name(op.ssa)
            named[key] = names.claim(base, base and f"{base}_{op.opcode}", fallback=op.opcode)
            eops.append(Op(named[key], op.opcode, operands, op.type, op.attrs, True, op.span))
        return named[key]

    outputs, written = [], {}
    shape_of = {c.name: c.type.shape for c in graph.carries}
    for v, arg, span in raw.stores:
        if v.kind == "carry":  # a carry stored as it is: its output
            written[arg] = name_of(v, span)
            continue
        plain = _converted_carry(raw, v)
        if plain is not None and plain.key in carries:  # a carry written in another dtype: {output = DTYPE}
            written[arg] = name_of(plain, span)
            continue
        value = name_of(v, span)
        t = raw.ops[v.key].type if v.kind == "op" else None
        reads = [carries[c] for c in _carries_read(raw, v) if c in carries]
        done = {n for n, _ in outputs}
        same = [c for c in dict.fromkeys(reads) if shape_of[c] == (t.shape if t else ())]
        anchor = same[0] if len(same) == 1 and same[0] not in done else None  # the one carry it is made of
        out = anchor or names.claim(base_name(arg), fallback="out")
        outputs.append((out, value))
        if arg is not None:
            written[arg] = out
    del live
    overridden = {n for n, _ in outputs}
    carries_out = tuple(replace(c, attrs=tuple(kv for kv in c.attrs if kv[0] != "output")) if c.name in overridden
                        else c for c in graph.carries)
    targets = _targets(sig, ops, inputs, stores, {v.key: named[("scalar", v.key)] for v in _scalar_evals(raw)
                                                 if ("scalar", v.key) in named},
                       {raw.inputs[k].arg: named[("input", k)] for k in range(len(raw.inputs)) if ("input", k) in named},
                       written)
    epilogue = Epilogue(tuple(scalars), tuple(eops), tuple(outputs))
    return replace(graph, inputs=graph.inputs + tuple(new_inputs), carries=carries_out, epilogue=epilogue,
                   arguments=tuple((n, targets.get(n)) for n, _ in sig.args))


def _targets(sig: Signature, ops: dict, inputs: dict, stores: dict, scalars: dict, ep_inputs: dict, written: dict):
    """Argument name -> the graph name it feeds (the first found, in the order: loads of the loop,
    inputs, the epilogue's inputs, stores of the loop, the epilogue's outputs, scalars)."""
    out: dict[str, str] = {}
    for ssa, arg in sig.loads.items():
        for table in (ops, inputs):
            if ssa in table:
                out.setdefault(arg, table[ssa])
    for arg, name in ep_inputs.items():
        out.setdefault(arg, name)
    for pos, arg in sig.stores.items():
        if pos in stores:
            out.setdefault(arg, stores[pos])
    for arg, name in list(written.items()) + list(scalars.items()):
        if arg is not None:
            out.setdefault(arg, name)
    fed = {}
    for arg in [n for n, _ in sig.args if n in out]:  # one argument per graph name
        fed.setdefault(out[arg], arg)
    return {a: t for a, t in out.items() if fed[t] == a}


def _converted_carry(raw: RawEpilogue, v: EVal) -> EVal | None:
    """The carry `v` is a conversion of, to a dtype its output can be written in (the implicit rule
    `{output = DTYPE}` the loop's import already set), else None."""
    from ..ir import OUTPUT_DTYPES
    op = raw.ops[v.key] if v.kind == "op" else None
    if op is None or op.opcode != "convert" or op.type.dtype not in OUTPUT_DTYPES:
        return None
    x = op.operands[0]
    return x if isinstance(x, EVal) and x.kind == "carry" else None


def _live_ops(raw: RawEpilogue) -> set[int]:
    out, todo = set(), [v for v, _, _ in raw.stores]
    while todo:
        v = todo.pop()
        if isinstance(v, EVal) and v.kind == "op" and v.key not in out:
            out.add(v.key)
            todo.extend(raw.ops[v.key].operands)
    return out


def _carries_read(raw: RawEpilogue, v: EVal) -> list[str]:
    out, todo, seen = [], [v], set()
    while todo:
        x = todo.pop(0)
        if not isinstance(x, EVal) or (x.kind, x.key) in seen:
            continue
        seen.add((x.kind, x.key))
        if x.kind == "carry":
            out.append(x.key)
        elif x.kind == "op":
            todo.extend(raw.ops[x.key].operands)
    return out


def _scalar_evals(raw: RawEpilogue) -> list[EVal]:
    return [o for op in raw.ops for o in op.operands if isinstance(o, EVal) and o.kind == "scalar"]
