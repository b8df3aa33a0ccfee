"""The `argument` lines of a `.tir` file: the arguments of the kernel the graph was imported from.

    argument := "argument" NAME ["=" TARGET {"," TARGET}]   (in the header, one per argument, in order)

`twill import` writes one per Triton kernel argument, in the kernel's order, with the graph name of
what it feeds where the importer could follow it: an input, a load or store op of the loop, a
carry (its output tensor), a scalar of the prologue or epilogue or a new epilogue output. An argument without a
target (a size, a stride, a scalar the loop folds away) is listed so that the order is whole.
Several targets are loads that read one argument, each its own view of it (W4A16's even and odd
columns of SCALES: `{col_stride = 2, col_offset = 0 | 1}`); they must all be loads.
`emit-cuda --binding torch` takes a graph's tensors and scalars as these arguments, in this
order (docs/commands.md). A graph without `argument` lines takes its inputs and outputs.
"""
from __future__ import annotations

from .ir import Operand
from .tir_text import Line


class ArgumentLines:
    def __init__(self, owner):
        self.owner = owner
        self.items: list[tuple[Operand, Operand | None]] = []
        self.more: list[tuple[Operand, Operand]] = []  # (argument, a target after its first)

    def line(self, line: Line) -> None:
        line.expect("argument")
        name = self.owner.operand(line, "the argument's name", allow_distance=False)
        target = None
        if line.take("="):
            target = self.owner.operand(line, "the graph name it feeds", allow_distance=False)
            while line.take(","):
                self.more.append((name, self.owner.operand(line, "another load it feeds", allow_distance=False)))
        line.end()
        if any(n.name == name.name for n, _ in self.items):
            self.owner.errors.error(f"argument '{name.name}' is listed twice", name.span)
        self.items.append((name, target))

    def check(self) -> None:
        """A target names an input, a carry, a load or store op, a scalar (of the prologue or the
        epilogue), an epilogue output, once."""
        o = self.owner
        loops = {op.name for op in o.ops if op.opcode in ("load", "store")}
        outputs = {n.name for n, _ in o.epilogue.outputs}
        scalars = {v.name for v in o.epilogue.scalars + o.prologue.scalars}
        fed: dict[str, str] = {}
        known = set(o.defined) | loops | outputs
        for name, target in self.items:
            if target is None:
                continue
            kind = o.defined.get(target.name, (None,))[0]
            parts = {f"{target.name}0", f"{target.name}_0"} & known  # split rows (twill.split): one tensor
            if not (kind in ("input", "carry") or target.name in loops | outputs | scalars or parts):
                o.errors.error(f"argument '{name.name}' feeds '{target.name}', which is no input, carry, load or "
                               "store op, scalar (of the prologue or epilogue) or epilogue output", target.span)
            elif target.name in fed:
                o.errors.error(f"'{target.name}' is fed by both '{fed[target.name]}' and '{name.name}'", target.span)
            fed[target.name] = name.name
        for name, target in self.more:
            first = next(t for n, t in self.items if n.name == name.name)
            if target.name not in loops or first.name not in loops:
                o.errors.error(f"argument '{name.name}' feeds '{target.name}' as well: an argument feeds several "
                               "graph names only where each is a load of the loop (a view of it)", target.span)
            elif target.name in fed:
                o.errors.error(f"'{target.name}' is fed by both '{fed[target.name]}' and '{name.name}'", target.span)
            fed[target.name] = name.name

    def build(self) -> tuple[tuple[str, str | None], ...]:
        return tuple((n.name, t.name if t is not None else None) for n, t in self.items)

    def also_fed(self) -> tuple[tuple[str, str], ...]:
        return tuple((n.name, t.name) for n, t in self.more)


def print_arguments(arguments, also_fed=()) -> list[str]:
    width = max((len(n) for n, t in arguments if t is not None), default=0)
    more = {}
    for n, t in also_fed:
        more.setdefault(n, []).append(t)
    return [f"argument {n.ljust(width)} = {', '.join([t] + more.get(n, []))}" if t is not None else f"argument {n}"
            for n, t in arguments]
