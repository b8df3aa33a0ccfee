"""The graph's prologue (`.tir` `prologue { ... }`, twill.tir_prologue) in the emitted kernel.

The solver does not schedule the prologue: its results are loop-invariant register inputs of the
loop (`Value.computed`), which no global tensor holds. Each role that reads one computes it once per
tile, before its loop, where it would have read a register input from global memory
(`RoleBody._inputs`): the inputs the prologue reads are read from global memory into the role's
fragments as the epilogue reads them, and its ops go through the op vocabulary's register-math
emitters, as the epilogue's do (`epilogue.Finalizer`, whose code this reuses over the prologue).
"""
from __future__ import annotations

from ..ir import Graph
from .epilogue import KNOB, Finalizer
from .lines import Lines
from .model import ident, local
from .ops import Arg, fragment_type


def computed(graph: Graph) -> set[str]:
    return {v.name for v in graph.inputs if v.computed}


def needs(graph: Graph, names: set[str]) -> list[str]:
    """The prologue results `names` need (themselves included), in the block's order."""
    by_name = graph.prologue.by_name
    want, todo = set(), [n for n in names if n in by_name]
    while todo:
        n = todo.pop()
        if n not in want:
            want.add(n)
            todo.extend(o.name for o in by_name[n].operands if o.name in by_name)
    return [op.name for op in graph.prologue.ops if op.name in want]


def inputs_read(graph: Graph, names: set[str]) -> set[str]:
    """The inputs from memory that the prologue results `names` are computed from."""
    return {o.name for n in needs(graph, names) for o in graph.prologue.by_name[n].operands
            if o.name in graph.values and not graph.values[o.name].computed}


def unify(graph: Graph, union, key) -> None:
    """Tie each prologue op's dimensions to its operands' of equal size (tensors.py's dim classes):
    an input the prologue reads is placed along the grid axis of the loop tile its result meets."""
    for op in graph.prologue.ops:
        if op.type is None:
            continue
        for o in op.operands:
            v = graph.values.get(o.name)
            if v is None:
                continue
            t = v.type
            dims = (list(zip(range(len(t.shape)), range(len(t.shape)))) if len(t.shape) == len(op.type.shape)
                    else [(0, 0)] if len(t.shape) == 1 and len(op.type.shape) == 2 else [])
            for d, r in dims:
                if t.shape[d] == op.type.shape[r] and t.shape[d] != 1:
                    union(key(o.name, d), key(op.name, r))


class Prologue(Finalizer):
    """The prologue ops one role runs before its loop, each once, into local fragments."""

    def __init__(self, body):
        super().__init__(body, {})

    def arg(self, out: Lines, name: str) -> Arg:
        if name in self.done:
            return self.done[name]
        g = self.m.graph
        t = g.values[name].type if name in g.values else None
        if name in g.prologue.by_name:
            arg = self.op(out, g.prologue.by_name[name])
        elif name in {v.name for v in g.prologue.scalars}:  # a launch scalar (epilogue.launch_scalars)
            t = next(v.type for v in g.prologue.scalars if v.name == name)
            arg = Arg(name, t, "init", "args.exp2_scale" if name == KNOB else f"static_cast<float>(args.{ident(name)})")
        else:
            arg = self.input(out, name, t)
        self.done[name] = arg
        return arg


def emit(body, out: Lines, reads: set[str]) -> None:
    """Compute, before the loop, the prologue results the role's ops read (`reads`), each into
    the local the loop reads it by."""
    g = body.m.graph
    wanted = computed(g) & reads
    if not wanted:
        return
    p = Prologue(body)
    scalars = [v.name for v in g.prologue.scalars if v.name in wanted]  # read by the loop as they are
    for name in scalars + needs(g, wanted):
        arg = p.arg(out, name)
        if name in wanted:
            t = g.values[name].type
            out(f"{fragment_type(body.m, t, body.groups)} {local(name)} = {arg.expr};  // {name}: the graph's prologue (before the loop)")
