"""The graph's epilogue (`.tir` `epilogue { ... }`, twill.ir.Epilogue) in the emitted kernel.

The solver does not schedule the epilogue: it runs once per output tile after the loop, in the
role that writes the output (Program.final_role: the role holding the carry's last value), on the
registers of that role. Its model in the schedule is that role's registers after the loop, which
the loop's own register budget bounds (the last values are already held there; each epilogue value
is one more fragment of the output's tile, which ptxas allocates within the same budget).

Here, per output an epilogue writes:

- which global tensor it is (`tensors`): a carry's output (out_CARRY, in the value's dtype) or a
  new one (out_NAME), placed as the carry of its shape it derives from (its *anchor*) is, so that
  the role that writes the anchor's output writes it;
- which last values it needs (`final_values`): the carries its ops read, transitively;
- its ops, emitted through the op vocabulary's register-math emitters (`twill.emit.ops`) after the
  role has read the last values and before the output is written (`compute`); a scalar is a float
  of the kernel's Args, an input read from global memory into the role's fragment.

The implicit rules stay for what the epilogue does not write: a carry it does not name is written
from its last value (divided by its running sum for an online-softmax accumulator; in its
`{output = DTYPE}`).
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import Diagnostic
from .. import vocab
from ..ir import Graph, Op, TensorType
from .lines import Lines
from .model import EmitError, ident, local
from .ops import Arg, OpCall, ctype, emitter, fragment_type, vector_kind


# One-element ops, as float expressions of their operands (what the runtime's op_* compute per element).
SCALAR_MATH = {
    "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "div": "({0} / {1})",
    "max": "fmaxf({0}, {1})", "min": "fminf({0}, {1})",
    "max_nan": "twill::max_nan({0}, {1})", "min_nan": "twill::min_nan({0}, {1})", "neg": "(-{0})", "abs": "fabsf({0})",
    "exp": "expf({0})", "log": "logf({0})", "log2": "log2f({0})", "sqrt": "sqrtf({0})", "rsqrt": "rsqrtf({0})",
    "recip": "(1.f / {0})", "tanh": "tanhf({0})", "sigmoid": "(1.f / (1.f + expf(-{0})))", "convert": "{0}",
    "fma": "fmaf({0}, {1}, {2})", "select": "({0} != 0.f ? {1} : {2})",
    "ge": "({0} >= {1} ? 1.f : 0.f)", "gt": "({0} > {1} ? 1.f : 0.f)", "le": "({0} <= {1} ? 1.f : 0.f)",
    "lt": "({0} < {1} ? 1.f : 0.f)", "eq": "({0} == {1} ? 1.f : 0.f)", "ne": "({0} == {1} ? 0.f : 1.f)",
    "fill": "((void){0}, {1})",
    **{op: f"{fn}({{0}})" for op, fn in vocab.LIBM.items()},
}


def outputs(graph: Graph) -> dict[str, str]:
    """Output name -> the epilogue value written to it."""
    return dict(graph.epilogue.outputs)


def value_type(graph: Graph, name: str) -> TensorType | None:
    e = graph.epilogue
    if name in e.by_name:
        return e.by_name[name].type
    scalar = next((v for v in e.scalars if v.name == name), None)
    if scalar is not None:
        return scalar.type
    v = graph.values.get(name)
    return v.type if v is not None else None


def carries_read(graph: Graph, value: str) -> list[str]:
    """The carries epilogue value `value` is computed from, in first-read order (itself, if a carry)."""
    e, carries = graph.epilogue, {c.name for c in graph.carries}
    out, seen, todo = [], set(), [value]
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        if name in carries:
            out.append(name)
        elif name in e.by_name:
            todo.extend(o.name for o in e.by_name[name].operands)
    return out


def anchor(graph: Graph, name: str) -> str:
    """The carry whose output tiles output `name` follows: the carry itself, else the first carry
    of the value's shape (then: whose rows it has) that it is computed from, else of any carry."""
    carries = {c.name: c for c in graph.carries}
    if name in carries:
        return name
    value = outputs(graph)[name]
    shape = value_type(graph, value).shape
    read = carries_read(graph, value)
    for fits in (lambda c: c.type.shape == shape, lambda c: c.type.shape[:1] == shape,
                 lambda c: len(shape) == 2 and c.type.shape == (shape[0], shape[1] // 2)):  # a join of two
        found = [c for c in read if fits(carries[c])] or [c.name for c in graph.carries if fits(c)]
        if found:
            return found[0]
    raise EmitError(f"epilogue output '{name}' is {value_type(graph, value)}: the shape of no carry")


def output_dtype(graph: Graph, carry) -> str:
    """The dtype carry's output is written in: its epilogue value's, else {output = DTYPE}'s."""
    value = outputs(graph).get(carry.name)
    return value_type(graph, value).dtype if value is not None else carry.output_dtype


def extra_outputs(graph: Graph) -> list[tuple[str, str, TensorType]]:
    """(tensor name, the anchor's body result, type) of each output that is not a carry's."""
    carries, src = {c.name for c in graph.carries}, dict(graph.yields)
    return [(f"out_{name}", src[anchor(graph, name)], value_type(graph, value))
            for name, value in graph.epilogue.outputs if name not in carries]


def output_name(tensor: str, graph: Graph) -> str | None:
    """The epilogue output (or carry) whose tensor is `tensor` (a C++ name), if any."""
    names = [n for n, _ in graph.epilogue.outputs] + [c for c, _ in graph.yields]
    return next((n for n in names if ident(f"out_{n}") == tensor), None)


def written(model, t) -> str | None:
    """The epilogue value output tensor t is written from, or None (the implicit rules)."""
    name = output_name(t.name, model.graph)
    return outputs(model.graph).get(name) if name is not None else None


def final_values(model, t) -> list[str] | None:
    """The body results whose last values the epilogue output t needs (None: not one)."""
    value = written(model, t)
    if value is None:
        return None
    src = dict(model.graph.yields)
    return [src[c] for c in carries_read(model.graph, value)]


def unify(graph: Graph, union, key) -> None:
    """Tie each epilogue op's dimensions to those of its operands of equal size (a [1, N] bias to
    the tile's columns, a [M] row vector to its rows), so that an input the epilogue reads is placed
    along the grid axis of the tile it meets (model._dim_classes)."""
    e = graph.epilogue
    for op in e.ops:
        if op.type is None:
            continue
        for o in op.operands:
            t = value_type(graph, o.name)
            if t is None or o.name in {v.name for v in e.scalars}:
                continue
            ref = (o.name, None) if o.name in e.by_name else None
            dims = (list(zip(range(len(t.shape)), range(len(t.shape)))) if len(t.shape) == len(op.type.shape)
                    else [(0, 0)] if len(t.shape) == 1 and len(op.type.shape) == 2 else [])
            for d, r in dims:
                if t.shape[d] == op.type.shape[r] and t.shape[d] != 1:
                    union(key(o.name, d) if ref is None else (o.name, d), (op.name, r))


KNOB = "exp2_scale"  # an epilogue scalar of this name is the kernel's exp2 scale (Args.exp2_scale), not a new one


def scalar_names(graph: Graph) -> list[str]:
    return [v.name for v in graph.epilogue.scalars]


def launch_scalars(graph: Graph) -> list:
    """The scalars a launch passes (every epilogue scalar but the exp2 scale, which it has already,
    then the prologue's the epilogue does not declare: one number per name)."""
    out = [v for v in graph.epilogue.scalars if v.name != KNOB]
    names = {v.name for v in out}
    return out + [v for v in graph.prologue.scalars if v.name != KNOB and v.name not in names]


def scalar_label(graph: Graph, name: str) -> str:
    """What a launch scalar is, for comments: an epilogue's, or the prologue's (read by the loop)."""
    return "epilogue scalar" if name in scalar_names(graph) else "prologue scalar"


SCALAR_CTYPES = {"f32": "float", "i32": "int", "i64": "long long"}  # a launch scalar's C++ type, by its dtype


def scalar_ctype(dtype: str) -> str:
    return SCALAR_CTYPES.get(dtype, "float")


def arg_fields(model) -> list[str]:
    return [f"{scalar_ctype(v.type.dtype)} {ident(v.name)};  // {scalar_label(model.graph, v.name)} {v.name}"
            for v in launch_scalars(model.graph)]


def problem_fields(model) -> list[str]:
    return [f"  {scalar_ctype(v.type.dtype)} {ident(v.name)} = 0;  // {scalar_label(model.graph, v.name)} {v.name}"
            for v in launch_scalars(model.graph)]


def copy_fields(model) -> list[str]:
    return [f"  args.{ident(v.name)} = p.{ident(v.name)};" for v in launch_scalars(model.graph)]


# -- the code after the loop ------------------------------------------------------------------------

class Finalizer:
    """The epilogue ops one role runs after its loop, each computed once into a local fragment."""

    def __init__(self, body, finals: dict[str, str]):
        self.body, self.m, self.finals = body, body.m, finals  # finals: body result -> its last value's local
        self.done: dict[str, Arg] = {}

    def compute(self, out: Lines, t) -> str | None:
        """The local holding what output tensor t is written from, emitting the ops it needs;
        None where the epilogue does not write t."""
        value = written(self.m, t)
        if value is None:
            return None
        arg = self.arg(out, value)
        if arg.where != "reg":
            raise EmitError(f"output {t.name} is written from '{value}', which is no tile the role computes")
        return arg.expr

    def arg(self, out: Lines, name: str) -> Arg:
        if name in self.done:
            return self.done[name]
        m, g = self.m, self.m.graph
        e = g.epilogue
        t = value_type(g, name)
        if name in e.by_name:
            arg = self.op(out, e.by_name[name])
        elif name in scalar_names(g):
            arg = Arg(name, t, "init", "args.exp2_scale" if name == KNOB else f"static_cast<float>(args.{ident(name)})")
        elif name in g.values and g.values[name].kind == "carry":
            arg = Arg(name, t, "reg", self.finals[m.carry_source[name]])
        else:
            arg = self.input(out, name, t)
        self.done[name] = arg
        return arg

    def op(self, out: Lines, op: Op) -> Arg:
        if op.opcode == "gather":  # its x is the loop's load, read in global memory (gather.py)
            from .gather import emit
            return emit(self, out, op, self.arg(out, op.operands[1].name))
        args = tuple(self.arg(out, o.name) for o in op.operands)
        if op.type.elements == 1:  # one value (a product of two scales): a float every thread computes
            return self.scalar(out, op, args)
        if op.opcode == "div" and len(args) == 2 and vector_kind(args[1].type) == "rows" \
                and vector_kind(op.type) is None and args[1].where == "reg":
            # x / l with l one value per row (attention's O / l): each row's reciprocal once, then a
            # multiply per element. A division per element is ~8x the work (ops.cuh, op_normalize).
            inv = Arg(f"{op.name}_inv", args[1].type, "reg", f"{local(op.name)}_inv")
            out(f"{fragment_type(self.m, args[1].type, self.body.groups)} {inv.expr};")
            self._call(out, replace(op, opcode="recip", operands=op.operands[1:]), inv, args[1:])
            return self._call(out, replace(op, opcode="mul"), Arg(op.name, op.type, "reg", f"{local(op.name)}_ep"),
                              (args[0], inv), declare=True)
        return self._call(out, op, Arg(op.name, op.type, "reg", f"{local(op.name)}_ep"), args, declare=True)

    def _call(self, out: Lines, op: Op, res: Arg, args: tuple, declare: bool = False) -> Arg:
        if declare:
            out(f"{fragment_type(self.m, op.type, self.body.groups)} {res.expr};  // epilogue {op.name} = {op.opcode} "
                + ", ".join(o.name for o in op.operands))
        call = OpCall(self.m, op, self.body.role.name, res, args, self.body.row0(res.type.shape[0]), self.body.groups)
        out(*emitter(self.m, op.opcode)(call))
        return res

    def scalar(self, out: Lines, op: Op, args: tuple) -> Arg:
        if op.opcode not in SCALAR_MATH or any(a.where != "init" for a in args):
            raise EmitError(Diagnostic(f"epilogue op '{op.name}': a one-element {op.opcode} of "
                                       + ", ".join(str(a.type) for a in args) + " has no scalar form in emit-cuda",
                                       op.span))
        names = [a.expr for a in args]
        if op.attr("scalar") is not None:
            from .ops import _divided, _float_literal
            names.append(_divided(op, _float_literal(op.attr("scalar"))))
        expr = SCALAR_MATH[op.opcode].format(*names)
        if op.opcode == "convert" and op.type.dtype in ("i8", "i16", "i32", "i64"):
            expr = f"truncf({expr})"
        out(f"const float {local(op.name)}_ep = {expr};  // epilogue {op.name} = {op.opcode} "
            + ", ".join(o.name for o in op.operands))
        return Arg(op.name, op.type, "init", f"{local(op.name)}_ep")

    def input(self, out: Lines, name: str, t: TensorType) -> Arg:
        """An input, read from global memory: one value (a float), a row or column vector or a tile
        (the role's fragment of it, as the loop's register inputs are read)."""
        m, r = self.m, self.body.r
        tensor = next(x for x in m.tensors if x.kind == "input" and x.value == name)
        if t.elements == 1:
            _, _, batch = r._origin(tensor, "0")
            nrows = "1" if tensor.rank == 1 else r._extent(tensor, 0)
            base = f"args.{tensor.name} + static_cast<size_t>({batch}) * {nrows} * {r._extent(tensor, 1)}"
            return Arg(name, t, "init", f"twill::to_float<{ctype(t.dtype)}>(({base})[0])")
        frag = f"{local(name)}_ep"
        out(f"{fragment_type(m, t, self.body.groups)} {frag};  // epilogue input {name}")
        r.read_input(out, frag, tensor, self.body.row0(t.shape[0]), cols_vector=vector_kind(t) == "cols")
        return Arg(name, t, "reg", frag)
