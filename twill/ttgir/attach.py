"""The epilogue and the arguments of an imported kernel, into its graph (`attach`, called by
build.py once the loop's names are chosen): the ops the stores need, named; each store an output;
each kernel argument the graph name it feeds (docs/ttgir-import.md, section 11)."""
from __future__ import annotations

from dataclasses import replace

from ..errors import Diagnostic, InputError
from ..ir import UNBATCHED, TensorType
from .epilogue import EVal, RawEpilogue
from .provenance import Signature

KNOB = "exp2_scale"  # the epilogue scalar that is the kernel's exp2 scale (twill.emit.epilogue.KNOB)
LN2 = 0.6931471805599453  # a natural-exp loop's exp2_scale holds log2 e besides the kernel's scale


def attach(graph, lowered, names, carries: dict, ops: dict, inputs: dict, stores: dict, natural: bool = False,
           launch: dict | None = None):
    """`graph` with the loop's epilogue and the function's arguments. `names` claims fresh graph
    names (build._Names); the dicts map SSA names (stores: "LINE:COL") to the graph's names of the
    carries, the loop's ops and the inputs. `natural`: the loop's exp2 ops are the kernel's
    ``tl.exp`` (fuse.natural_exp), so its scale is exp2_scale * ln 2."""
    from ..ir import Epilogue
    raw, sig = lowered.epilogue, lowered.signature
    if raw is None:
        return graph
    loads = {op.name for op in graph.ops if op.opcode == "load"}
    sources = {}  # argument -> the loop's load of it (what an epilogue gather reads)
    for ssa, arg in lowered.signature.loads.items():
        if ops.get(ssa) in loads:
            sources.setdefault(arg, ops[ssa])
    namer = _Namer(graph, raw, names, carries, natural, launch or {}, sources)
    outputs, written = _outputs(raw, namer, carries, {c.name: c.type.shape for c in graph.carries})
    atomics = _atomics(raw, namer, written)
    overridden = {n for n, _ in outputs}
    stored = overridden | set(written.values())
    carries_out = tuple(replace(c, attrs=tuple(kv for kv in c.attrs if kv[0] != "output")) if c.name in overridden
                        else c if c.name in stored else _unwritten(c) for c in graph.carries)
    flipped = _transposed(raw, written)
    carries_out = tuple(replace(c, attrs=c.attrs + (("column_major", True),)) if c.name in flipped else c
                        for c in carries_out)
    named = namer.named
    scalars = {v.key: named[("scalar", v.key)] for v in _scalar_evals(raw) if ("scalar", v.key) in named}
    scalars.update({a: n for a, n in (launch or {}).items() if a not in scalars})  # the loop's (build._launch)
    targets, also = _targets(sig, ops, inputs, stores, scalars,
                       {raw.inputs[k].arg: named[("input", k)] for k in range(len(raw.inputs)) if ("input", k) in named},
                       written, {op.name for op in graph.ops if op.opcode == "load"})
    epilogue = Epilogue(tuple(namer.scalars), tuple(namer.eops), tuple(outputs), atomics=atomics)
    return replace(graph, inputs=graph.inputs + tuple(namer.new_inputs), carries=carries_out, epilogue=epilogue,
                   arguments=tuple((n, targets.get(n)) for n, _ in sig.args), also_fed=also)


def _unwritten(carry):
    """A carry the kernel never stores (attention's running max and sum, W4A16's two halves that only
    their join is written from): `{output = none}`, so the emitted kernel writes only what Triton's does."""
    from ..ir import NOT_WRITTEN
    return replace(carry, attrs=tuple(kv for kv in carry.attrs if kv[0] != "output") + (("output", NOT_WRITTEN),))


class _Namer:
    """The graph's names of the epilogue's values, claimed as they are first read: its inputs,
    scalars and ops (collected in `new_inputs`, `scalars`, `eops`)."""

    def __init__(self, graph, raw, names, carries: dict, natural: bool = False, launch: dict | None = None,
                 sources: dict | None = None):
        self.graph, self.raw, self.names, self.carries, self.natural = graph, raw, names, carries, natural
        self.sources = sources or {}  # argument -> the loop's load of it
        self.launch = launch or {}  # argument -> the prologue's (or loop's) scalar of it: one number
        self.named: dict[tuple, str] = {}  # (kind, key) -> graph name
        self.new_inputs, self.scalars, self.eops = [], [], []
        self.scaled = _exp2_units(graph)

    def scale(self, name: str, span) -> str:
        """Carry `name` as the kernel holds it: times the exp2 scale where the loop's exp2 subtracts it."""
        from ..ir import Op, Operand, Value
        if name not in self.scaled:
            return name
        if ("scaled", name) not in self.named:
            if not any(v.name == KNOB for v in self.scalars):
                self.scalars.append(Value(KNOB, TensorType("f32", (1,)), "scalar"))
            self.named[("scaled", name)] = self.names.claim(f"{name}_scaled", fallback=f"{name}_scaled")
            t = next(c.type for c in self.graph.carries if c.name == name)
            self.eops.append(Op(self.named[("scaled", name)], "mul", (Operand(name), Operand(KNOB)), t, (), True, span))
            if self.natural:  # the kernel's scale is exp2_scale / log2 e: m in the units of its tl.exp
                scaled = self.named[("scaled", name)]
                self.named[("scaled", name)] = self.names.claim(f"{name}_natural", fallback=f"{name}_natural")
                self.eops.append(Op(self.named[("scaled", name)], "mul", (Operand(scaled),), t, (("scalar", LN2),),
                                    True, span))
        return self.named[("scaled", name)]

    def name_of(self, v: EVal, span) -> str:
        """The graph's name of epilogue value `v` (claimed, and its op or input added, on first use)."""
        from ..ir import Value
        from .build import base_name
        key, raw = (v.kind, v.key), self.raw
        if key in self.named:
            return self.named[key]
        if v.kind == "carry":
            if v.key not in self.carries:
                raise InputError(Diagnostic(f"the value stored here reads the loop's result '%{v.key}', which the "
                                            "graph does not carry (no op of the loop computes it)", span))
            return self.carries[v.key]
        if v.kind == "source":  # a gather's table: the loop's load of the argument, read in global memory
            if v.key not in self.sources:
                raise InputError(Diagnostic(f"a gather after the loop reads '{v.key}', which no load of the loop "
                                            "walks: the graph's gather reads the tensor of a loop's load", span))
            return self.sources[v.key]
        if v.kind == "input":
            inp = raw.inputs[v.key]
            self.named[key] = self.names.claim(base_name(inp.arg), base_name(inp.ssa), fallback="input")
            self.new_inputs.append(Value(self.named[key], inp.type, "input", span=inp.span,
                                         attrs=(("batch", UNBATCHED),) if inp.unbatched else ()))
        elif v.kind == "scalar":
            self.named[key] = self.launch.get(v.key) or self.names.claim(base_name(v.key), fallback="scalar")
            dtype = dict(raw.scalars).get(v.key, "f32")
            self.scalars.append(Value(self.named[key], TensorType(dtype, (1,)), "scalar"))
        else:
            self.named[key] = self._op(raw.ops[v.key])
        return self.named[key]

    def _op(self, op) -> str:
        from ..ir import Op, Operand
        from .build import base_name
        operands = tuple(Operand(self.scale(self.name_of(o, op.span), op.span) if o.kind == "carry"
                                 else self.name_of(o, op.span)) for o in op.operands)
        base = base_name(op.ssa)  # else (%6) after its first operand: out_convert
        after = f"{operands[0].name}_{op.opcode}" if operands else None
        name = self.names.claim(base, base and f"{base}_{op.opcode}", after, fallback=op.opcode)
        self.eops.append(Op(name, op.opcode, operands, op.type, op.attrs, True, op.span))
        return name


def _outputs(raw, namer: _Namer, carries: dict, shape_of: dict) -> tuple[list, dict]:
    """The epilogue's outputs ([(name, value)]) and, per stored argument, the graph name written."""
    from .build import base_name
    outputs, written = [], {}
    for v, arg, span in raw.stores:
        if v.kind == "carry":  # a carry stored as it is: its output
            written[arg] = namer.name_of(v, span)
            continue
        plain = _converted_carry(raw, v)
        if plain is not None and plain.key in carries:  # a carry written in another dtype: {output = DTYPE}
            written[arg] = namer.name_of(plain, span)
            continue
        value = namer.name_of(v, span)
        t = raw.ops[v.key].type if v.kind == "op" else None
        reads = [carries[c] for c in _carries_read(raw, v) if c in carries]
        done = {n for n, _ in outputs}
        same = [c for c in dict.fromkeys(reads) if shape_of[c] == (t.shape if t else ())]
        anchor = same[0] if len(same) == 1 and same[0] not in done else None  # the one carry it is made of
        out = anchor or namer.names.claim(base_name(arg), fallback="out")
        outputs.append((out, value))
        if arg is not None:
            written[arg] = out
    return outputs, written


def _atomics(raw, namer: _Namer, written: dict) -> tuple:
    """The epilogue's atomic outputs (name, value, kind): a global scalar (its pointer argument) updated
    by each tile's one value (scalaratomic.py); the argument feeds it."""
    from .build import base_name
    out = []
    for v, arg, kind, span in raw.atomics:
        value = namer.name_of(v, span)
        name = namer.names.claim(base_name(arg), fallback="out")
        out.append((name, value, kind))
        written[arg] = name
    return tuple(out)


def _transposed(raw, written: dict) -> set[str]:
    """The carries stored transposed (`C + offs_n[None, :] * stride_cn + offs_m[:, None]`: C is [N, M]
    row-major): their `{column_major = true}`, which emit-cuda writes as the tile's transpose and the
    binding takes as [N, M]. A transposed store of anything else (an epilogue's new output, a carry
    stored twice, one way and the other) is an error at the store."""
    from .memory import TRANSPOSED, TRANSPOSED_HINT
    out, plain = set(), set()
    for v, arg, span in raw.stores:
        carry = v if v.kind == "carry" else _converted_carry(raw, v)
        if arg not in raw.transposed:
            plain.add(written.get(arg))
            continue
        if carry is None or written.get(arg) is None:
            raise InputError(Diagnostic(f"'tt.store' {TRANSPOSED}: only a carry (the accumulator, or it converted) "
                                        "is written transposed, and this stores a value computed after the loop",
                                        span, TRANSPOSED_HINT))
        out.add(written[arg])
    if out & plain:
        raise InputError(Diagnostic(f"carry '{sorted(out & plain)[0]}' is stored both transposed and row-major: "
                                    "the graph writes a carry's output one way", raw.stores[0][2], TRANSPOSED_HINT))
    return out


def _targets(sig: Signature, ops: dict, inputs: dict, stores: dict, scalars: dict, ep_inputs: dict, written: dict,
             load_ops: set = frozenset()):
    """Argument name -> the graph name it feeds (the first found, in the order: loads of the loop,
    inputs, the epilogue's inputs, stores of the loop, the epilogue's outputs, scalars)."""
    out: dict[str, str] = {}
    # the loop's loads first: an SSA name a load has in one loop may be another op's in a sibling loop (Triton's
    # printer reuses names there: add + RMSNorm's second loop's `%h_24 = arith.addf`, its first loop's `%h_24 =
    # tt.load` of R), which would make R feed the add
    for ssa, arg in sig.loads.items():
        if ops.get(ssa) in load_ops:
            out.setdefault(arg, ops[ssa])
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
    targets = {a: t for a, t in out.items() if fed[t] == a}
    # a tensor the loop loads and stores (a residual updated in place) is written in place too
    stored = {arg: stores[pos] for pos, arg in sig.stores.items() if pos in stores}
    loaded = {ops[ssa] for ssa in sig.loads if ops.get(ssa) in load_ops}
    return targets, _also_fed(sig, ops, targets, load_ops) + _in_place(
        sig, targets, set(inputs.values()) | set(ep_inputs.values()), written) + _in_place(sig, targets, loaded, stored)


def _also_fed(sig: Signature, ops: dict, targets: dict, load_ops: set) -> tuple[tuple[str, str], ...]:
    """(argument, load) for each further load of the loop that reads an argument whose first target
    is a load of the loop too: views of one tensor (W4A16's even and odd columns of SCALES). A graph op
    that is no load (`load_ops`) is not one, though its SSA name is a load's elsewhere (Triton's printer
    reuses names in sibling loops: LayerNorm's variance loop's `%x_18 = arith.subf`, its last loop's
    `%x_18 = tt.load`)."""
    loads = {ops[ssa] for ssa in sig.loads if ssa in ops}
    also = []
    for ssa, arg in sig.loads.items():
        name = ops.get(ssa)
        if name is not None and name in load_ops and targets.get(arg) in loads and targets[arg] != name and (arg, name) not in also:
            also.append((arg, name))
    order = {n: i for i, (n, _) in enumerate(sig.args)}
    return tuple(sorted(also, key=lambda x: order[x[0]]))


def _in_place(sig: Signature, targets: dict, inputs: set, written: dict) -> tuple[tuple[str, str], ...]:
    """(argument, output) for each argument the kernel reads as an input and stores an output to
    (addmm's C, read before the loop and written after it; a residual the loop loads and stores its tiles
    to): the binding writes the output over the tensor passed, as the kernel does."""
    return tuple((arg, written[arg]) for arg, _ in sig.args
                 if targets.get(arg) in inputs and written.get(arg) not in (None, targets[arg]))


def _converted_carry(raw: RawEpilogue, v: EVal) -> EVal | None:
    """The carry `v` is a conversion of, to a dtype its output can be written in (the implicit rule
    `{output = DTYPE}` the loop's import already set), else None."""
    from ..ir import OUTPUT_DTYPES
    op = raw.ops[v.key] if v.kind == "op" else None
    if op is None or op.opcode != "convert" or op.type.dtype not in OUTPUT_DTYPES:
        return None
    x = op.operands[0]
    return x if isinstance(x, EVal) and x.kind == "carry" else None


def _exp2_units(graph) -> set[str]:
    """The carries the loop's exp2 ops subtract (`exp2 x, b`: exp2((x - b) * exp2_scale)): the import
    folds the kernel's scale of x into exp2_scale (attention's qk_scale), so such a carry is the
    kernel's value divided by it (m = the row max of the unscaled scores), and the kernel's value,
    which its epilogue reads (LSE = m + log2 l), is the carry times exp2_scale."""
    yielded = {r: c for c, r in graph.yields}
    out = set()
    for op in graph.ops:
        if op.opcode == "exp2" and len(op.operands) == 2:
            b = op.operands[1].name
            out |= {b} & {c.name for c in graph.carries} | ({yielded[b]} if b in yielded else set())
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
