"""The `argument` lines of a `.tir` file: the arguments of the kernel the graph was imported from.

    argument := "argument" NAME ["=" TARGET {"," TARGET}] ["{" "extent" "=" AXES "}"]
                                       (in the header, one per argument, in order)
    AXES     := AXIS | "[" AXIS {"," AXIS} "]"      AXIS := "m" | "n" | "loop"
    extent   := "extent" "loop" "=" INT             (the loop's extent, a compile-time constant)

`twill import` writes one per Triton kernel argument, in the kernel's order, with the graph name of
what it feeds where the importer could follow it: an input, a load or store op of the loop, a
carry (its output tensor), a scalar of the prologue or epilogue or a new epilogue output. An argument without a
target (a size, a stride, a scalar the loop folds away) is listed so that the order is whole.
Several targets are loads that read one argument, each its own view of it (W4A16's even and odd
columns of SCALES: `{col_stride = 2, col_offset = 0 | 1}`), or an input and then one output (a carry
or an epilogue output) written over it in place (addmm's `argument C = C, acc`).
`emit-cuda --binding torch` takes a graph's tensors and scalars as these arguments, in this
order (docs/commands.md). A graph without `argument` lines takes its inputs and outputs.

`{extent = loop}` (or `m`, `n`, several as `[m, loop]`) says the argument is the extent of the
kernel's tensors along that axis, as the binding names them: the loop, the grid's rows (`m`) or
columns (`n`) (twill.ttgir.extents records them at import); the binding checks a value the caller
passes against the tensors' shapes. `extent loop = N` says the kernel's loop runs to the
compile-time constant N, which the tensors' extent along the loop must then be.
"""
from __future__ import annotations

from .errors import did_you_mean
from .ir import Operand
from .tir_text import Line

AXES = ("m", "n", "loop")  # the axes an extent bounds, in printing order (the binding's names)
ATTRIBUTES = ("extent",)


class ArgumentLines:
    def __init__(self, owner):
        self.owner = owner
        self.items: list[tuple[Operand, Operand | None]] = []
        self.more: list[tuple[Operand, Operand]] = []  # (argument, a target after its first)
        self.extents: list[tuple[str, str]] = []  # (argument, axis)
        self.loop_extent: int | None = None
        self.loop_extent_seen = False

    def line(self, line: Line) -> None:
        line.expect("argument")
        name = self.owner.operand(line, "the argument's name", allow_distance=False)
        target = None
        if line.take("="):
            target = self.owner.operand(line, "the graph name it feeds", allow_distance=False)
            while line.take(","):
                self.more.append((name, self.owner.operand(line, "another load it feeds", allow_distance=False)))
        axes = self._attributes(line) if line.at("{") else ()
        line.end()
        if any(n.name == name.name for n, _ in self.items):
            self.owner.errors.error(f"argument '{name.name}' is listed twice", name.span)
        self.items.append((name, target))
        self.extents += [(name.name, a) for a in axes]

    def _attributes(self, line: Line) -> tuple[str, ...]:
        """`{extent = AXIS}` or `{extent = [AXIS, ...]}`: the axes the argument is the extent of."""
        line.expect("{")
        axes: list[str] = []
        while not line.at("}"):
            key = line.next("an argument attribute ('extent')")
            if key.text not in ATTRIBUTES:
                self.owner.errors.error(f"unknown argument attribute '{key.text}': an argument line takes "
                                        "{extent = AXIS} (AXIS: m, n or loop)", line.span(key),
                                        did_you_mean(key.text, ATTRIBUTES))
            elif axes:
                self.owner.errors.error("'extent' given twice: list several axes as [m, loop]", line.span(key))
            line.expect("=", "'=' after the attribute's name")
            listed = line.take("[")
            while True:
                tok = line.next("an axis (m, n or loop)")
                if tok.text not in AXES:
                    self.owner.errors.error(f"unknown axis '{tok.text}': an extent bounds m (the grid's rows), n "
                                            "(its columns) or loop", line.span(tok), did_you_mean(tok.text, AXES))
                elif tok.text in axes:
                    self.owner.errors.error(f"axis '{tok.text}' listed twice", line.span(tok))
                elif key.text in ATTRIBUTES:
                    axes.append(tok.text)
                if not (listed and line.take(",")):
                    break
            if listed:
                line.expect("]", "',' or ']' in the list of axes")
            if not line.take(","):
                break
        line.expect("}", "'}' after the argument's attributes")
        return tuple(sorted(axes, key=AXES.index))

    def extent_line(self, line: Line) -> None:
        """`extent loop = N`: the loop's extent, a compile-time constant of the kernel."""
        line.expect("extent")
        axis = line.next("the axis ('loop')")
        if axis.text != "loop":
            self.owner.errors.error(f"'extent {axis.text}': an extent line gives the loop's compile-time extent "
                                    "(`extent loop = N`); the grid's are the tensors'", line.span(axis))
        line.expect("=", "'=' after the axis")
        tok = line.next("the loop's extent (an integer >= 1)", ("number",))
        line.end()
        value = int(tok.text) if tok.text.isdigit() else None
        if value is None or value < 1:
            self.owner.errors.error(f"the loop's extent must be an integer >= 1, not '{tok.text}'", line.span(tok))
        elif self.loop_extent_seen:
            self.owner.errors.error("a second 'extent loop' line: the loop has one extent", line.span(tok))
        self.loop_extent_seen = True
        self.loop_extent = value if self.loop_extent is None else self.loop_extent

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
        carries = {n for n, (kind, *_) in o.defined.items() if kind == "carry"}

        def whole(names: set[str]) -> set[str]:  # with the tensors split into row parts (twill.split): STEM0, STEM_0
            return names | {n[:-1].removesuffix("_") for n in names if n.endswith("0")}

        inputs = whole({n for n, (kind, *_) in o.defined.items() if kind == "input"})
        for name, target in self.more:
            first = next(t for n, t in self.items if n.name == name.name)
            views = target.name in loops and first.name in loops
            in_place = (first.name in inputs and target.name in whole(carries | outputs)
                        and sum(1 for n, _ in self.more if n.name == name.name) == 1)
            if not (views or in_place):
                o.errors.error(f"argument '{name.name}' feeds '{target.name}' as well: an argument feeds several "
                               "graph names only where each is a load of the loop (a view of it), or where it is an "
                               "input and then one output written over it (in place)", target.span)
            elif target.name in fed:
                o.errors.error(f"'{target.name}' is fed by both '{fed[target.name]}' and '{name.name}'", target.span)
            fed[target.name] = name.name

    def build(self) -> tuple[tuple[str, str | None], ...]:
        return tuple((n.name, t.name if t is not None else None) for n, t in self.items)

    def also_fed(self) -> tuple[tuple[str, str], ...]:
        return tuple((n.name, t.name) for n, t in self.more)

    def build_extents(self) -> tuple[tuple[str, str], ...]:
        return tuple(self.extents)


def print_arguments(arguments, also_fed=(), extents=(), loop_extent=None) -> list[str]:
    width = max((len(n) for n, t in arguments if t is not None), default=0)
    more, axes = {}, {}
    for n, t in also_fed:
        more.setdefault(n, []).append(t)
    for n, a in extents:
        axes.setdefault(n, []).append(a)

    def attrs(n):
        found = sorted(axes.get(n, ()), key=AXES.index)
        if not found:
            return ""
        return " {extent = " + (found[0] if len(found) == 1 else "[" + ", ".join(found) + "]") + "}"
    lines = [(f"argument {n.ljust(width)} = {', '.join([t] + more.get(n, []))}" if t is not None else f"argument {n}")
             + attrs(n) for n, t in arguments]
    return lines + ([f"extent loop = {loop_extent}"] if loop_extent is not None else [])
