"""Name the fused ops, inputs and carries, and build the `Graph`.

Names come from the TTGIR SSA names, which Triton derives from the Python variables: ``%qk_11`` ->
``qk`` (the ``_N`` Triton appends to keep names unique is dropped). A carry whose iter_arg has a
numeric name takes the name of the op yielded to it, else of its first reader. Carries claim their names
first, then inputs, then ops in program order. A taken name becomes ``CARRY_new`` for the op the
loop yields to that carry, else ``NAME_OPCODE``, else ``NAME_1``, ``NAME_2``...; a purely numeric SSA
name (``%12``) gives ``CARRY_new`` or ``OPCODE_K``. A copy into memory is named after what it copies
(``p_tmem``). Result-less ops (stores) are named ``OPCODE_K`` the way the `.tir` parser names them.
"""
from __future__ import annotations

import math
from dataclasses import replace
import re
from collections import Counter
from itertools import count

from ..errors import Diagnostic, InputError
from .. import counter, vocab
from ..ir import UNBATCHED, Graph, Op, Operand, TensorType, Value
from . import draw, prologue, scalarexpr
from .attach import attach
from .fuse import NATURAL, Body, Group
from .values import Const, Lowered, Note, Ref, Tile

_SUFFIX = re.compile(r"_\d+$")
_UNNAMED = re.compile(r"(arg)?\d+$")  # %12, %arg3: MLIR's own numbering, not a user's name
_KEYWORDS = {"kernel", "input", "carry", "loop", "yield"}


def base_name(ssa: str | None) -> str | None:
    """``qk_11`` -> ``qk``, ``acc#1`` -> ``acc``, ``12`` and ``arg3`` -> None."""
    if not ssa:
        return None
    name = _SUFFIX.sub("", ssa.split("#")[0])
    name = "".join(c if c.isalnum() or c in "_." else "_" for c in name)
    return None if not name or _UNNAMED.match(name) or not (name[0].isalpha() or name[0] == "_") else name


class _Names:
    def __init__(self):
        self.taken = set(_KEYWORDS)

    def claim(self, *candidates: str | None, fallback: str) -> str:
        for cand in candidates:
            if cand and cand not in self.taken:
                self.taken.add(cand)
                return cand
        for k in count(1 if any(candidates) else 0):
            if f"{fallback}_{k}" not in self.taken:
                self.taken.add(f"{fallback}_{k}")
                return f"{fallback}_{k}"


def init_text(init: object) -> tuple[str, str | None]:
    """A carry's initial value as `.tir` writes it, and what to warn about when it is not a constant."""
    if isinstance(init, Const) and isinstance(init.value, (bool, int, float)):
        v = float(init.value)
        if math.isnan(v):
            return "0", "a NaN constant"
        if math.isinf(v):
            return ("inf" if v > 0 else "-inf"), None
        return (str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)), None
    what = ("a constant that is not one splat value" if isinstance(init, Const) else
            "uninitialised memory" if init is None else "a value computed before the loop")
    return "0", what


PEELED_HINT = ("the start is an mma Triton's pipeliner peeled ahead of the loop (its first iterations' products, "
               "through tensor-memory copies: Triton 3.6 on sm_100 ping-pongs an accumulator two dots add into between "
               "two buffers), which the import does not fold back into the loop: import the dump from before the "
               "pipeliner (docs/ttgir-import.md, section 1)")


def _peeled_mma(nodes, init) -> bool:
    """Whether a carry's start is, through copies (tensor-memory loads and stores), an mma before the loop."""
    for _ in range(len(nodes)):
        if not isinstance(init, Tile) or init.ref.kind != "node":
            return False
        n = nodes[init.ref.index]
        if n is None or n.in_loop:
            return False
        if n.kind == "mma":
            return True
        if n.kind != "move" or not n.args:
            return False
        init = n.args[0]
    return False


def build_graph(lowered: Lowered, body: Body, groups: list[Group], file: str,
                handed: dict | None = None, carry_names: dict | None = None) -> tuple[Graph, list[Note]]:
    """The graph of the fused groups, with names; also warnings about carries' initial values.
    `handed`, where given, gets {input name: its stand-in's hand-over key} (ttgir/handover.py);
    `carry_names` {index of the lowered carry: its graph name}."""
    root_of = {m: g.root for g in groups for m in g.members}
    carries, invariant = _live_carries(lowered, body, groups, root_of)
    names = _Names()
    live = [k for k in carries if k not in invariant]
    variables = _variables(lowered, body, groups, live)
    carry_name = {k: names.claim(variables.get(k) or _carry_base(lowered, body, groups, k), fallback="carry")
                  for k in live}
    if carry_names is not None:
        carry_names.update(carry_name)
    inputs: dict[Ref, str] = {}
    for r in (r for g in groups for r in g.operands):
        outside = r.kind == "node" and not body.nodes[r.index].in_loop
        if (outside or (r.kind == "carry" and r.index in invariant)) and r not in inputs:
            ssa = body.nodes[r.index].ssa if outside else lowered.carries[r.index].ssa
            inputs[r] = names.claim(base_name(ssa), fallback="input")
    pro, unscaled = _prologue(body, groups, inputs, names)
    yielded_to: dict[int, str] = {}
    for k, name in carry_name.items():
        yielded_to.setdefault(body.yields[k].ref.index, name)
    op_name: dict[int, str] = {}  # group root -> name, filled in program order

    def operand_name(r: Ref) -> str:
        if r in inputs:
            return inputs[r]
        return carry_name[r.index] if r.kind == "carry" else op_name[root_of[r.index]]

    _name_ops(groups, body, names, yielded_to, operand_name, op_name)
    real = {r: n for r, n in inputs.items() if r not in pro.computed} | pro.real
    if handed is not None:
        handed.update(_handed(body, real))
    graph_inputs = tuple(Value(name, _input_type(lowered, body, r, r not in inputs), "input",
                               span=_ref_span(lowered, body, r), attrs=_input_attrs(body, r)) for r, name in real.items())
    computed_inputs, block = pro.graph_parts()
    graph_carries, notes = [], _computed_inputs(body, {r: n for r, n in inputs.items() if r not in pro.computed})
    for k, name in carry_name.items():
        carry = lowered.carries[k]
        text, problem = init_text(carry.init)
        if problem and carry.init is not None and not _handed_over(lowered, carry.init):
            # a loaded value (addmm's beta * C), a non-splat constant; an earlier loop's result is
            # the sequence's to refuse (ttgir/sequence.py, which names the loop)
            raise InputError(Diagnostic(
                f"carry '{name}' starts from {problem}: a `.tir` carry starts from a constant, and the graph "
                "would start it from 0", carry.span, PEELED_HINT if _peeled_mma(body.nodes, carry.init) else
                "start the loop's value from a constant and apply what it started from after the loop "
                "(acc = zeros; ...; acc += beta * C), or give the kernel that value through an epilogue "
                "(docs/ttgir-import.md, section 5)"))
        if problem:
            notes.append(Note(Diagnostic(f"carry '{name}' starts from {problem}; written as 0", carry.span,
                                         severity="warning")))
        output = (("output", carry.output),) if carry.output else ()
        graph_carries.append(Value(name, carry.type, "carry", text, carry.span, output))
    launch: dict[str, str] = {}  # argument -> the prologue scalar a loop op reads (build._launch)
    ints: dict[str, str] = {}  # those of them that are integers, and their dtype (a causal mask's window: i32)
    exprs = _Computed(names, launch, ints)  # the prologue ops of scalars computed from arguments (scalarexpr.py)
    ops = tuple(out for g in groups
                for out in _launch(Op(op_name[g.root], g.opcode, tuple(Operand(unscaled.get((g.root, k), operand_name(r)))
                                                                   for k, r in enumerate(g.operands)), g.type,
                                      attrs=g.attrs, has_result=g.type is not None, span=g.span), names, launch, ints,
                                   body.nodes[g.root].factor, exprs))
    read = {o.name for op in ops for o in op.operands}  # a prologue scalar is a loop input where a loop op reads it
    block = replace(block, ops=tuple(_launch_one(o, names, launch, ints, exprs) for o in block.ops))  # the prologue's
    # the scalar ops first (they read scalars alone), each result an input of the loop as the block's results are
    block = replace(block, ops=tuple(exprs.ops) + block.ops)
    if launch:
        def kind(n: str) -> TensorType:
            return TensorType(ints.get(n, "f32"), (1,))
        block = replace(block, scalars=block.scalars + tuple(Value(n, kind(n), "scalar") for n in launch.values()))
        graph_inputs += tuple(Value(n, kind(n), "input", attrs=(("prologue", True),))
                              for n in launch.values() if n in read)  # before the block's results, as the parser has them
    graph_inputs += tuple(Value(op.name, op.type, "input", None, op.span, (("prologue", True),)) for op in exprs.ops)
    graph_inputs += computed_inputs
    yields = tuple((name, op_name[root_of[body.yields[k].ref.index]]) for k, name in carry_name.items())
    graph = Graph(lowered.kernel, graph_inputs, tuple(graph_carries), ops, yields, file=file, prologue=block)
    spans = {g.root: body.nodes[g.root].span for g in groups if g.type is None}
    graph = attach(graph, lowered, names, {lowered.carries[k].key or lowered.carries[k].ssa: n for k, n in carry_name.items()},
                  {body.nodes[g.root].ssa: op_name[g.root] for g in groups},
                  {body.nodes[r.index].ssa: n for r, n in real.items() if r.kind == "node"},
                  {f"{s.line}:{s.col}": op_name[root] for root, s in spans.items()}, natural_units(body), launch)
    return _with_knob(graph, body.exp2_scale, lowered, notes), notes


def _with_knob(graph: Graph, scale, lowered: Lowered, notes: list) -> Graph:
    """The graph with `knob exp2_scale = EXPR` (twill.knobs), the scale the fusion folded out
    (fuse.folded_scale), where it has an exp2. A graph without `argument` lines (the import found
    no stores after the loop to follow the arguments to) cannot name them: a warning says what
    to pass as the binding's exp2_scale instead."""
    if scale is None:
        return graph
    listed = {n for n, _ in graph.arguments}
    missing = [n for n in scale.names if n not in listed]
    if missing and not listed:
        notes.append(Note(Diagnostic(f"the graph lists no kernel arguments, so it cannot record its exp2 scale "
                                     f"{scale.text()}: call its binding with exp2_scale = {scale.text()}",
                                     lowered.span, severity="warning")))
        return graph
    if missing:
        raise InputError(Diagnostic(f"the softmax's scale {scale.text()} reads argument '{missing[0]}', which the "
                                    "imported graph does not list", lowered.span))
    return replace(graph, knobs=(("exp2_scale", scale),))


def natural_units(body: Body) -> bool:
    """Whether the loop's exp2 ops are the kernel's ``tl.exp`` (fuse.natural_exp): its scale of the
    scores is then exp2_scale / log2 e."""
    return any(n.kind == "exp2" and n.mlir == NATURAL for n in body.live())


class _Computed:
    """The prologue ops computing the scalars loop ops read that the kernel computes from its arguments and
    constants (scalarexpr.Expr; `1 - p`), in order, each once; the arguments they read are prologue scalars."""

    def __init__(self, names: "_Names", launch: dict, ints: dict):
        self.names, self.launch, self.ints = names, launch, ints
        self.ops: list[Op] = []
        self.done: dict = {}

    def name(self, expr) -> str:
        result, new = scalarexpr.ops(expr, self.names.claim, base_name, self._scalar, self.done)
        self.ops.extend(new)
        return result

    def _scalar(self, arg) -> str:
        if arg.name not in self.launch:
            self.launch[arg.name] = self.names.claim(arg.name, fallback="scalar")
        if arg.dtype == "i32":  # float(N) of an integer argument: the scalar N, an i32
            self.ints.setdefault(self.launch[arg.name], "i32")
        return self.launch[arg.name]


def _launch(op: Op, names: "_Names", launch: dict, ints: dict, factor=None, exprs: _Computed | None = None) \
        -> tuple[Op, ...]:
    """An op whose TTGIR read a float argument (the lowering's ``launch`` attribute, values.LaunchScalar):
    a binary table op of one operand reads it as its y (or x), a prologue scalar named after it; any
    other op (the scale fused into an exp2) drops the attribute. A one-operand multiply or divide by a
    product of float arguments and constants (`factor`, twill.knobs.Product: `s * (sm_scale / softcap)`)
    is a chain of one op per argument (`mul x, sm_scale`, `div _, softcap`) and one for the constant,
    the last named as the op."""
    attrs = dict(op.attrs)
    if ("launch" not in attrs and "launch_int" not in attrs and "scalar" not in attrs and factor is not None
            and factor.names and op.opcode in ("mul", "div") and len(op.operands) == 1):
        return _factor_chain(op, factor, names, launch)
    return (_launch_one(op, names, launch, ints, exprs),)


def _factor_chain(op: Op, factor, names: "_Names", launch: dict) -> tuple[Op, ...]:
    steps = [("mul" if p > 0 else "div", n) for n, p in factor.powers for _ in range(abs(p))]
    steps += [("mul", None)] if factor.coef != 1.0 else []
    out, x = [], op.operands[0]
    for k, (opcode, arg) in enumerate(steps):
        last = k == len(steps) - 1
        name = op.name if last else names.claim(f"{op.name}_{arg or 'c'}", fallback=op.name)
        if arg is None:
            operands, attrs = (x,), (("scalar", factor.coef),)
        else:
            if arg not in launch:
                launch[arg] = names.claim(arg, fallback="scalar")
            operands, attrs = (x, Operand(launch[arg])), ()
        out.append(Op(name, opcode, operands, op.type, attrs, True, op.span))
        x = Operand(name)
    return tuple(out)


def _launch_one(op: Op, names: "_Names", launch: dict, ints: dict, exprs: _Computed | None = None) -> Op:
    attrs = dict(op.attrs)
    if "rand_seed" in attrs:  # a draw (ttgir/draw.py): its seed an i64 prologue scalar, its coefficients' i32 ones
        return _draw(op, names, launch, ints)
    integer = attrs.pop("launch_int", None)
    if integer is not None:  # an integer argument a causal mask's band reads (band.py): an i32 prologue scalar
        if integer not in launch:
            launch[integer] = names.claim(integer, fallback="scalar")
        ints.setdefault(launch[integer], "i32")
        return replace(op, attrs=tuple((k, launch[integer] if k == "arg" else v) for k, v in op.attrs
                                       if k != "launch_int"))
    found = attrs.pop("launch", None)
    integer = attrs.pop("launch_i32", False)  # float(N) of an integer argument: the scalar N, an i32
    computed = attrs.pop("launch_expr", None)  # a scalar computed from arguments (scalarexpr.Expr, its operand)
    rest = tuple((k, v) for k, v in op.attrs if k not in ("launch", "launch_i32", "launch_expr"))
    d = vocab.lookup(op.opcode)
    if found is None and computed is not None and exprs is not None and d is not None and d.family == "binary" \
            and len(op.operands) == 1 and "scalar" not in attrs:
        expr, index = computed
        y = Operand(exprs.name(expr))
        return replace(op, operands=(op.operands[0], y) if index else (y, op.operands[0]), attrs=rest)
    if found is None and d is not None and d.family == "binary" and len(op.operands) == 1 and "scalar" not in attrs \
            and d.arity != (1,):
        raise lost_operand(op)
    if found is None or d is None or d.family != "binary" or len(op.operands) != 1 or "scalar" in attrs:
        return replace(op, attrs=rest)
    arg, index = found
    if arg not in launch:
        launch[arg] = names.claim(arg, fallback="scalar")
    if integer:
        ints.setdefault(launch[arg], "i32")
    operands = (op.operands[0], Operand(launch[arg])) if index else (Operand(launch[arg]), op.operands[0])
    return replace(op, operands=operands, attrs=rest)


def _draw(op: Op, names: "_Names", launch: dict, ints: dict) -> Op:
    """A rand node's counter (ttgir/draw.py: the seed argument, polynomials of arguments) as the op's attributes
    (twill/counter.py), each argument a prologue scalar given at launch: the seed i64, the others i32."""
    attrs = dict(op.attrs)

    def scalar(arg: str, dtype: str) -> str:
        if arg not in launch:
            launch[arg] = names.claim(arg, fallback="scalar")
        ints[launch[arg]] = dtype if dtype == "i64" else ints.get(launch[arg], dtype)
        return launch[arg]
    seed = scalar(attrs["rand_seed"], "i64")
    for arg in draw.arguments(attrs):
        scalar(arg, "i32")
    out = [("seed", seed)]
    for key in counter.TERMS:
        p = attrs.get(f"rand_{key}", ())
        if p or key in ("row", "col"):
            out.append((key, draw.coefficient(p, launch)))
    out += [("rounds", attrs["rounds"])] if "rounds" in attrs else []
    return replace(op, attrs=tuple(out))


def lost_operand(op: Op) -> InputError:
    """A loop op of one tile and a scalar that is no constant and no float argument (`s * (sm_scale /
    softcap)`, a scalar loaded from memory) where no fusion folds the scalar into the exp2's scale: the
    graph has no name for its y, so the import stops at the op rather than write an op without it."""
    return InputError(Diagnostic(
        f"'{op.opcode}' of a loop tile reads a scalar that is neither a constant nor one of the kernel's float "
        "arguments (a value computed from several arguments, or loaded): the graph has no operand for it", op.span,
        "compute the scalar on the host and pass it as one float argument (`qk * scale` with scale = sm_scale / "
        "softcap), or make it a constant (docs/ttgir-import.md, section 3)"))


def _prologue(body: Body, groups: list[Group], inputs: dict, names: "_Names"):
    """The prologue (ttgir/prologue.py) of the inputs computed before the loop, with the
    `div B, exp2_scale` of each input an exp2 subtracts from its scaled scores; and, per (group
    root, operand index), the name the op reads instead of the input."""
    pro = prologue.build(body, inputs, names.claim, base_name) or prologue.Prologue([], {}, {})
    unscaled = {}
    for root, ref in prologue.scaled_subtrahends(body, groups, set(inputs)).items():
        b = inputs[ref]
        name = next((op.name for op in pro.ops if op.opcode == "div" and op.operands[1].name == prologue.KNOB
                     and _divides(pro.ops, op, b)), None)
        if name is None:
            name = names.claim(f"{b}_unscaled", fallback=f"{b}_unscaled")
            t = _ref_type_body(body, ref)
            span = body.nodes[ref.index].span if ref.kind == "node" else None
            read = b
            if natural_units(body):  # exp(s * c - b): b / c = b * log2 e / exp2_scale
                read = names.claim(f"{b}_log2e", fallback=f"{b}_log2e")
                pro.ops.append(Op(read, "mul", (Operand(b),), t, (("scalar", LOG2E),), True, span))
            pro.ops.append(Op(name, "div", (Operand(read), Operand(prologue.KNOB)), t, (), True, span))
            pro.scalars = (prologue.KNOB,)
            if ref not in pro.computed and ref not in pro.real:
                pro.real[ref] = b
        unscaled[(root, 1)] = name
    return pro, unscaled


def _divides(ops, div: Op, b: str) -> bool:
    """Whether prologue op `div` (x / exp2_scale) divides b, or b * log2 e (a natural-exp loop's)."""
    x = div.operands[0].name
    made = next((op for op in ops if op.name == x), None)
    return x == b or (made is not None and made.opcode == "mul" and [o.name for o in made.operands] == [b]
                      and dict(made.attrs).get("scalar") == LOG2E)


def _input_type(lowered: Lowered, body: Body, ref: Ref, prologue_only: bool):
    """An input's type; one only the prologue reads is read into registers (not staged in shared memory)."""
    t = _ref_type(lowered, body, ref)
    return replace(t, space="reg") if prologue_only and t.space == "smem" else t


def _input_attrs(body: Body, ref: Ref) -> tuple:
    """An input's attributes: `{batch = none}` where it is a tile loaded before the loop (or its copy into
    another memory) whose load reads one tensor for every batch entry (unbatched.py)."""
    n = body.nodes[ref.index] if ref.kind == "node" else None
    while n is not None and n.kind == "move" and len(n.refs) == 1 and n.refs[0].kind == "node":
        n = body.nodes[n.refs[0].index]
    if n is not None and n.kind == "load" and dict(n.attrs).get("batch") == UNBATCHED:
        return (("batch", UNBATCHED),)
    return ()


def _ref_type_body(body: Body, ref: Ref):
    return body.nodes[ref.index].type if ref.kind == "node" else body.carry_types[ref.index]


LOG2E = 1.4426950408889634
BEFORE_LOOP_SOURCES = ("load", "arg", "move")  # what an input from before the loop may be: data the caller has


def _computed_inputs(body: Body, inputs: dict) -> list[Note]:
    """A tile the loop reads that is computed before it (dQ's `lse * log2(e)`) becomes an input,
    which the kernel's caller does not have: a warning at the op that computes it (an error under
    --strict), since the graph has no prologue to compute it in."""
    notes = []
    for r, name in inputs.items():
        n = body.nodes[r.index] if r.kind == "node" else None
        if n is not None and n.kind not in BEFORE_LOOP_SOURCES:
            notes.append(Note(Diagnostic(
                f"'{n.mlir}' before the loop computes the tile '{name}' the loop reads: imported as an input "
                "that the kernel's caller gives, which the kernel's arguments do not hold", n.span,
                "the graph has no prologue (work before the loop): give the loop the tile, or compute it "
                "in the loop (docs/ttgir-import.md, section 9)", "warning"), True))
    return notes


def _variables(lowered: Lowered, body: Body, groups: list[Group], live: list[int]) -> dict[int, str]:
    """Names for the carries whose iter_arg names no variable (``%arg7``; or a peeled value's, which
    depipe.py clears), from the variables the loop's loc names (Triton names an `scf.for` after each
    variable it carries) that no iter_arg and no other carry is named after: a carry whose yielded op
    (or first reader) is named after one of them takes it; then if one carry and one variable are
    left, that carry takes that variable (m_i, whose iter_arg became %m_new_118 or %arg7)."""
    unnamed = [j for j in live if not base_name(lowered.carries[j].ssa)]
    taken = {base_name(a) for a in lowered.iter_args} | {base_name(lowered.carries[j].ssa) for j in live}
    free = [v for v in dict.fromkeys(lowered.variables) if v not in taken]
    out = {}
    for j in unnamed:
        guess = _carry_base(lowered, body, groups, j)
        if guess in free:
            out[j] = guess
            free.remove(guess)
    left = [j for j in unnamed if j not in out]
    if len(left) == 1 and len(free) == 1:
        out[left[0]] = free[0]
    return out


def _carry_base(lowered: Lowered, body: Body, groups: list[Group], k: int) -> str | None:
    """A carry's name: its iter_arg's (or buffer's); where that is MLIR's numbering (``%arg15``, as
    Triton's pipeliner leaves some iter_args), the name of the op the loop yields to it, else of the
    first op that reads it."""
    own = base_name(lowered.carries[k].ssa)
    if own:
        return own
    y = body.yields[k]
    if isinstance(y, Tile) and y.ref.kind == "node" and body.nodes[y.ref.index] is not None:
        name = base_name(body.nodes[y.ref.index].ssa)
        if name:
            return name
    reader = next((g for g in groups if Ref("carry", k) in g.operands), None)
    return base_name(body.nodes[reader.root].ssa) if reader is not None else None


def _live_carries(lowered: Lowered, body: Body, groups: list[Group], root_of: dict) -> tuple[list[int], set[int]]:
    """The carries some op reads, and those of them the loop never changes (which become inputs)."""
    used = {r.index for g in groups for r in g.operands if r.kind == "carry"}
    carries, invariant = [], set()
    for k, (carry, y) in enumerate(zip(lowered.carries, body.yields)):
        if k not in used:
            continue
        if isinstance(y, Tile) and y.ref == Ref("carry", k):
            invariant.add(k)
        elif not (isinstance(y, Tile) and y.ref.kind == "node" and y.ref.index in root_of):
            raise InputError(Diagnostic(f"the loop yields for '%{carry.ssa}' a value that no tile op of the body "
                                        "computes; the importer cannot express this carry", carry.span))
        carries.append(k)
    return carries, invariant


def _name_ops(groups: list[Group], body: Body, names: _Names, yielded_to: dict[int, str],
              operand_name, op_name: dict[int, str]) -> None:
    """Fill `op_name` (group root -> name, see the module docstring): ops in program order, then
    the result-less ones."""
    counters: dict[str, count] = {}
    for g in (g for g in groups if g.type is not None):
        node, carry = body.nodes[g.root], yielded_to.get(g.root)
        new = f"{carry}_new" if carry else None
        if node.kind == "move" and g.operands:
            cand = f"{operand_name(g.operands[0])}_{g.type.space}"
        else:
            cand = base_name(node.ssa)
        if cand is None:
            counter = counters.setdefault(g.opcode, count())
            cand = new or next(f"{g.opcode}_{k}" for k in counter if f"{g.opcode}_{k}" not in names.taken)
        op_name[g.root] = names.claim(cand, new, f"{cand}_{g.opcode}", fallback=cand)
    resultless: Counter = Counter()
    for g in (g for g in groups if g.type is None):  # as the .tir parser names them: OPCODE_K
        name = f"{g.opcode}_{resultless[g.opcode]}"
        resultless[g.opcode] += 1
        while name in names.taken:
            name += "_"
        names.taken.add(name)
        op_name[g.root] = name


def _ref_type(lowered: Lowered, body: Body, r: Ref):
    return body.nodes[r.index].type if r.kind == "node" else lowered.carries[r.index].type


def _handed(body: Body, real: dict) -> dict[str, str]:
    """{input name: its hand-over key} for the inputs that are earlier loops' results (stand-ins,
    ttgir/handover.py), and {input name: "~" + key} for those computed from one before the loop."""
    def key_of(index: int, seen: set) -> tuple[str, bool] | None:
        node = body.nodes[index]
        if node is None or index in seen:
            return None
        seen.add(index)
        own = dict(node.attrs).get("handover")
        if own is not None and node.kind == "arg":
            return own, True
        for r in node.operands:
            if r.kind == "node" and body.nodes[r.index] is not None and not body.nodes[r.index].in_loop:
                found = key_of(r.index, seen)
                if found is not None:
                    return found[0], False
        return None

    out = {}
    for r, n in real.items():
        found = key_of(r.index, set()) if r.kind == "node" else None
        if found is not None:
            out[n] = found[0] if found[1] else "~" + found[0]
    return out


def _ref_span(lowered: Lowered, body: Body, r: Ref):
    return body.nodes[r.index].span if r.kind == "node" else lowered.carries[r.index].span


def _handed_over(lowered: Lowered, init) -> bool:
    """Whether a carry's start is an earlier loop's result (a hand-over stand-in, ttgir/handover.py)."""
    from .handover import KEY
    return isinstance(init, Tile) and init.ref.kind == "node" and KEY in dict(lowered.nodes[init.ref.index].attrs)
