"""Parse and print `.tir`, the tile-loop graph format (contract section 1).

One statement per line; ``#`` starts a comment, blank lines and spacing within a line are free::

    file     := "kernel" NAME  decl*  [prologue]  "loop" "{"  op*  [yield]  "}"  [epilogue]
                                         (twill.tir_prologue, twill.tir_epilogue)
    decl     := "input" NAME ":" type  |  "carry" NAME ":" type "=" init [attrs]   ({output = DTYPE})
              | "argument" NAME ["=" NAME {"," NAME}] ["{" "extent" "=" AXES "}"]
                                                            (an imported kernel's; twill.tir_arguments)
              | "extent" "loop" "=" INT                     (the loop's compile-time extent; twill.tir_arguments)
              | "knob" NAME "=" EXPR                        (a knob from scalar arguments; twill.knobs)
              | "grid" "split" "=" NAME                     (the loop split over a grid axis; twill.tir_grid)
              | "grid" "flat" "=" NAME                      (a flat map: every tensor NAME elements as rows; twill.tir_grid)
              | "grid" "rows" "=" INT                       (the kernel's rows of a padded tile; twill.tir_grid)
    op       := NAME "=" OPCODE [operands] ":" type [attrs]       (an op with a result)
              | OPCODE [operands] [":" type] [attrs]              (a store, a barrier)
    yield    := "yield" [NAME "=" NAME ("," NAME "=" NAME)*]     (carry = body result)
    operands := operand ("," operand)*        operand := NAME ["@" INT]
    type     := DTYPE "[" INT ("," INT)* "]" ["@" ("reg" | "smem" | "tmem")]
    attrs    := "{" [NAME "=" value ("," NAME "=" value)*] "}"
    init     := NUMBER | "inf" | "-inf" | "zero"          (kept as text: "0", "1.5", "-inf")
    value    := NUMBER | "true" | "false" | NAME | '"' STRING '"'
    NAME     := [A-Za-z_][A-Za-z0-9_.]*

Inputs, carries and results share one namespace. A plain operand names an input, a carry or a result
defined above (one defined below closes a distance-0 cycle or is an error); ``NAME@D`` (D >= 1) names
result NAME of D iterations earlier, above or below. A result-less op is named ``OPCODE_K`` (K counts
that opcode's result-less ops; ``_`` is appended while the name is taken).

A syntax error abandons its line only; names, cycles and yields are then checked over the whole file
and every problem is raised at once as one `InputError`. Opcodes are not checked here (that needs the
machine description): `Op.span` points at the opcode for the module that does.
"""
from __future__ import annotations

from collections import Counter, deque
from dataclasses import replace
from pathlib import Path

from . import vocab
from .errors import ErrorCollector, InputError, Span, did_you_mean
from .ir import CARRY_ATTRIBUTES, DTYPE_BITS, INPUT_ATTRIBUTES, UNBATCHED, OP_ATTRIBUTES, SPACES, Graph, Op, Operand, TensorType, Value
from .knobs import KnobLines, print_knobs
from .tir_arguments import ArgumentLines, print_arguments
from .tir_grid import GridLines, print_grid
from .tir_epilogue import EpilogueParser, print_epilogue
from .tir_prologue import PrologueParser
from .tir_text import (ATTR_RULES, INT, KEYWORDS, KINDS, MAX_COUNT, Line, Token, attribute_value, normalise_init,
                       print_ops, print_value)

class _Parser:
    """Reads a file statement by statement, then checks names, cycles and yields over all of it."""

    def __init__(self, file: str):
        self.file, self.errors = file, ErrorCollector()
        self.kernel, self.state, self.statements = "", "header", 0  # header, body, after, ignoring
        self.values: list[Value] = []
        self.ops: list[Op] = []
        self.yields: list[tuple[Operand, Operand]] = []  # (carry, result), kept with their spans
        self.defined: dict[str, tuple[str, Span]] = {}  # name -> (input|carry|result|stub, where)
        self.position: dict[str, int] = {}  # body result -> index of its op
        self.loop_span: Span | None = None
        self.yield_line: int | None = None
        self.yield_broken = False  # the yield line did not parse: do not report carries without one
        self.epilogue = EpilogueParser(self)
        self.prologue = PrologueParser(self)
        self.arguments = ArgumentLines(self)
        self.knobs = KnobLines(self)
        self.grid = GridLines(self)

    def parse(self, text: str) -> Graph:
        lines = [line.removesuffix("\r") for line in text.split("\n")]  # line numbers as editors count
        lines = lines[:-1] if lines[-1] == "" else lines
        for number, source in enumerate(lines, 1):
            line = Line(self.file, number, source)
            try:
                if line.tokens:
                    self.statement(line)
            except InputError as e:
                self.errors.diagnostics.extend(e.diagnostics)
                self.define_stub(line)
        self.check_end(lines)
        self.name_resultless_ops()
        self.check_operands()
        self.check_vocabulary()
        if self.state != "header":
            self.check_yields()
        self.prologue.check()
        self.epilogue.check()
        self.arguments.check()
        self.knobs.check()
        self.grid.check()
        self.grid.check_rows(next((op.type.shape[0] for op in self.ops if op.opcode == "mma" and op.type is not None
                                   and len(op.type.shape) == 2), None))
        self.errors.raise_if_any()
        read = {o.name for op in self.ops for o in op.operands}
        unread = {v.name for v in self.prologue.scalars} - read  # a prologue scalar is a loop input where read
        return Graph(self.kernel, tuple(v for v in self.values if v.kind == "input" and not (v.computed and v.name in unread)),
                     tuple(v for v in self.values if v.kind == "carry"), tuple(self.ops),
                     tuple((c.name, r.name) for c, r in self.yields), file=self.file, epilogue=self.epilogue.build(),
                     arguments=self.arguments.build(), prologue=self.prologue.build(),
                     also_fed=self.arguments.also_fed(), knobs=self.knobs.build(), split=self.grid.build(),
                     tile_rows=self.grid.rows_build(), flat=self.grid.flat_build(), extents=self.arguments.build_extents(), loop_extent=self.arguments.loop_extent)

    def statement(self, line: Line) -> None:
        first = line.peek()
        self.statements += 1
        if self.statements == 1 and first.text != "kernel":
            self.errors.error("missing 'kernel NAME' line: it must come first", line.span(first))
        if self.state == "body":
            self.body_statement(line, first)
        elif self.state == "epilogue":
            self.state = "epilogue" if self.epilogue.statement(line) else "after"
        elif self.state == "prologue":
            if not self.prologue.statement(line):
                self.state = "before loop"
                self.values.extend(self.prologue.inputs())
        elif self.state == "header" and first.text == "prologue" and not self.prologue.begun:
            self.prologue.begin(line)
            self.state = "prologue"
        elif self.state == "before loop" and first.text != "loop":
            self.errors.error(f"'{first.text}' after the prologue: only 'loop {{' follows it", line.span(first),
                              "inputs and carries are declared before the prologue")
        elif self.state == "after" and first.text == "epilogue" and not self.epilogue.begun:
            self.epilogue.begin(line)
            self.state = "epilogue"
        elif self.state == "after":
            self.errors.error("text after the loop", line.span(first),
                              "only an 'epilogue { ... }' block may follow the loop's '}'")
            self.state = "ignoring"  # the rest of the file, now that it is reported
        elif self.state == "header" and first.text in ("input", "carry"):
            self.declaration(line)
        elif self.state == "header" and first.text == "argument":
            self.arguments.line(line)
        elif self.state == "header" and first.text == "extent":
            self.arguments.extent_line(line)
        elif self.state == "header" and first.text == "knob":
            self.knobs.line(line)
        elif self.state == "header" and first.text == "grid":
            self.grid.line(line)
        elif self.state == "header" and first.text == "kernel":
            if self.statements != 1:
                self.errors.error("'kernel NAME' must be the first line, and only once", line.span(first))
            line.expect("kernel")
            self.kernel = line.next("the kernel's name").text
            line.end()
        elif self.state in ("header", "before loop") and first.text == "loop":
            self.loop_span, self.state = line.span(first), "body"
            line.expect("loop")
            line.expect("{", "'{' after 'loop'")
            line.end()
        elif self.state == "header":
            self.errors.error(f"'{first.text}' is not allowed before 'loop {{'", line.span(first),
                              "operations and 'yield' go inside 'loop { ... }'")

    def body_statement(self, line: Line, first: Token) -> None:
        if self.yield_line is not None and not line.at("}"):
            self.errors.error("'yield' must be the last statement of the loop", line.span(first),
                              f"the loop's 'yield' is on line {self.yield_line}")
        if line.at("=", 1) or first.text not in KEYWORDS:
            self.op_line(line)
        elif first.text == "yield":
            self.yield_statement(line)
        elif first.text == "}":
            line.expect("}")
            self.state = "after"
            line.end()
        else:
            self.errors.error(f"'{first.text}' is not allowed inside the loop", line.span(first))

    def declaration(self, line: Line) -> None:
        kind = line.next("'input' or 'carry'").text
        name = line.next(f"the {kind}'s name")
        line.expect(":", "':' and a type")
        type_, init = self.tensor_type(line), None
        if kind == "carry":
            line.expect("=", "'=' and the carry's initial value")
            tok = line.peek()
            if tok is None or not (tok.kind == "number" or tok.text in ("inf", "zero")):
                line.fail("an initial value (a number, inf, -inf or zero)")
            line.pos += 1
            init = normalise_init(tok.text)
        attrs = self.attributes(line, CARRY_ATTRIBUTES, "carry attribute") if kind == "carry" and line.at("{") else ()
        if kind == "input" and line.at("{"):
            attrs = self.attributes(line, INPUT_ATTRIBUTES, "input attribute")
            if dict(attrs).get("batch", UNBATCHED) != UNBATCHED:
                self.errors.error(f"input '{name.text}': attribute 'batch' must be {UNBATCHED} (one tensor for every batch "
                                  f"entry), found {dict(attrs)['batch']}", line.span(name),
                                  "leave it out for an input with an entry per batch entry")
                attrs = ()
        line.end()
        if self.define(name.text, kind, line.span(name)):
            self.values.append(Value(name.text, type_, kind, init, line.span(name), attrs))

    def yield_statement(self, line: Line) -> None:
        line.expect("yield")
        first, self.yield_line = self.yield_line is None, self.yield_line or line.number
        items = []
        while line.peek() is not None:
            if items:
                line.expect(",", "',' or the end of the line")
            carry = self.operand(line, "a carry's name", allow_distance=False)
            line.expect("=", "'=' and the result the next iteration sees")
            items.append((carry, self.operand(line, "a result name", allow_distance=False)))
        self.yields = items if first else self.yields

    def op_line(self, line: Line) -> None:
        op = self.parse_op(line)
        if op.opcode == "gather":
            self.errors.error(f"op '{op.name}': gather runs in the epilogue only (one element a row, after the loop)",
                              op.span, "gather x, index in the epilogue block: x a load of the loop, index an i32 [M]")
        self.ops.append(op)

    def parse_op(self, line: Line, kind: str = "result", distances: bool = True) -> Op:
        """One op line; its result is defined as a name of `kind`."""
        result = None
        if line.at("=", 1):
            result = line.next("a result name")
            line.expect("=")
        opcode, operands, type_ = line.next("an opcode"), [], None
        if line.peek() is not None and line.peek().kind == "name":
            operands.append(self.operand(line, "an operand", distances))
            while line.take(","):
                operands.append(self.operand(line, "an operand", distances))
        if line.take(":"):
            type_ = self.tensor_type(line)
        elif result is not None:
            line.fail("':' and the result type" if operands else "operands or ':' and the result type")
        attrs = self.attributes(line) if line.at("{") else ()
        line.end()
        if result is not None:
            self.define(result.text, kind, line.span(result))
        return Op(result.text if result else "", opcode.text, tuple(operands), type_, attrs, result is not None,
                  line.span(opcode))

    def operand(self, line: Line, what: str, allow_distance: bool = True) -> Operand:
        name = line.next(what)
        if not allow_distance or not line.take("@"):
            return Operand(name.text, None, line.span(name))
        tok = line.next("an iteration distance after '@'", ("number",))
        span = line.span(name, tok.col + len(tok.text) - name.col)
        if INT.fullmatch(tok.text) and int(tok.text) >= 1:
            return Operand(name.text, int(tok.text), span)
        self.errors.error(f"iteration distance must be an integer >= 1, found '{tok.text}'",
                          line.span(tok), f"write '{name.text}' for this iteration's value")
        return Operand(name.text, 1, span)

    def tensor_type(self, line: Line) -> TensorType:
        dtype = line.next("a dtype such as f16")
        self.known(line, dtype, DTYPE_BITS, "dtype")
        line.expect("[", "'[' and the dimensions")
        dims = [self.dimension(line)]
        while line.take(","):
            dims.append(self.dimension(line))
        line.expect("]", "',' or ']'")
        space = line.next("a memory space (reg, smem or tmem)") if line.take("@") else None
        space_ok = space is not None and self.known(line, space, SPACES, "memory space")
        return TensorType(dtype.text if dtype.text in DTYPE_BITS else "f32", tuple(dims),
                          space.text if space_ok else "reg")

    def known(self, line: Line, tok: Token, choices, what: str) -> bool:
        """Is `tok` one of `choices`? If not, say so and list them."""
        if tok.text not in choices:
            listing = f"{what}s: {', '.join(choices)}"
            did = did_you_mean(tok.text, choices)
            self.errors.error(f"unknown {what} '{tok.text}'", line.span(tok),
                              f"{did} ({listing})" if did else listing)
        return tok.text in choices

    def dimension(self, line: Line) -> int:
        tok = line.next("a dimension", ("number",))
        if INT.fullmatch(tok.text) and int(tok.text) > 0:
            return int(tok.text)
        self.errors.error(f"a dimension must be a positive integer, found '{tok.text}'", line.span(tok))
        return 1

    def attributes(self, line: Line, allowed=OP_ATTRIBUTES, what="attribute") -> tuple[tuple[str, object], ...]:
        line.expect("{")
        attrs: dict[str, object] = {}
        seen: list[str] = []
        while not line.take("}"):
            if seen:
                line.expect(",", "',' or '}'")
            key = line.next("an attribute name")
            line.expect("=", f"'=' and a value for '{key.text}'")
            tok = line.next("a number, true, false, a name or a string", ("number", "name", "string"))
            value, rule = attribute_value(tok), ATTR_RULES.get(key.text)
            if key.text in seen:
                self.errors.error(f"attribute '{key.text}' is given twice", line.span(key))
            elif not self.known(line, key, allowed, what):
                pass
            elif rule and not rule[0](value):
                self.errors.error(f"attribute '{key.text}' must be {rule[1]}, found {tok.text}",
                                  line.span(tok))
            elif type(value) is int and abs(value) > MAX_COUNT:
                self.errors.error(f"attribute '{key.text}' is {value}, past the limit of {MAX_COUNT} "
                                  "(twill.MAX_COUNT)", line.span(tok), "no tile loop needs a count this large")
            else:
                attrs[key.text] = value
            seen.append(key.text)
        return tuple(attrs.items())

    def define(self, name: str, kind: str, span: Span) -> bool:
        if name in self.defined:
            first = self.defined[name][1]
            self.errors.error(f"'{name}' is already defined", span, f"first defined on line {first.line}")
            return False
        self.defined[name] = (kind, span)
        if kind == "result":
            self.position[name] = len(self.ops)
        return True

    def define_stub(self, line: Line) -> None:
        """A line that failed to parse still defines its name (or makes its yields), so that no
        errors follow from it."""
        toks = line.tokens
        self.yield_broken |= toks[0].text == "yield" and self.state == "body"
        if len(toks) >= 2 and toks[1].kind == "name" and toks[0].text in ("input", "carry"):
            self.defined.setdefault(toks[1].text, ("stub", line.span(toks[1])))
        elif len(toks) >= 2 and toks[0].text == "scalar" and self.state in ("epilogue", "prologue"):
            self.defined.setdefault(toks[1].text, ("stub", line.span(toks[1])))
        elif len(toks) >= 2 and toks[0].kind == "name" and toks[1].text == "=" and self.state in ("body", "epilogue", "prologue"):
            self.defined.setdefault(toks[0].text, ("stub", line.span(toks[0])))

    def lookup(self, ref: Operand, allowed=("input", "carry", "result"), why="", hint=None) -> str | None:
        """The kind of what `ref` names, or None (and an error) if it names nothing allowed."""
        kind = self.defined.get(ref.name, (None,))[0]
        if kind is None:
            self.errors.error(f"undefined name '{ref.name}'", ref.span, did_you_mean(ref.name, self.defined))
        elif kind not in allowed + ("stub",):
            self.errors.error(f"{why}, but '{ref.name}' is {KINDS[kind]}", ref.span, hint)
        return kind if kind in allowed else None

    def name_resultless_ops(self) -> None:
        taken, counts = set(self.defined), Counter()
        for i, op in enumerate(self.ops):
            if not op.has_result:
                name = f"{op.opcode}_{counts[op.opcode]}"
                counts[op.opcode] += 1
                while name in taken:
                    name += "_"
                taken.add(name)
                self.ops[i] = replace(op, name=name)

    def check_end(self, lines: list[str]) -> None:
        last = lines[-1] if lines else ""
        at_end = Span(self.file, max(len(lines), 1), len(last) + 1, last)
        if self.statements == 0:
            self.errors.error("missing 'kernel NAME' line: it must come first", at_end)
        if self.state in ("header", "before loop"):
            self.errors.error("missing 'loop { ... }'", at_end, "the loop follows the input and carry lines")
        elif self.state == "body":
            self.errors.error("the loop is not closed: missing '}'", self.loop_span)
        elif self.state == "epilogue":
            self.errors.error("the epilogue is not closed: missing '}'", self.epilogue.span)
        elif self.state == "prologue":
            self.errors.error("the prologue is not closed: missing '}'", self.prologue.span)
        elif not self.ops and not self.errors.diagnostics:  # (an op line that did not parse is reported)
            self.errors.error("the loop has no operations: there is nothing to schedule", self.loop_span,
                              "write one op per line inside 'loop { ... }' (docs/formats.md)")

    def check_operands(self) -> None:
        """Operands must name something. A plain name of a result defined at or below its use is a
        distance-0 edge against source order: it closes a cycle (reported once) or comes too early."""
        consumers: dict[int, list[int]] = {}  # distance-0 edges: producer op -> consumer ops
        forward: list[tuple[int, Operand, int]] = []
        launch = {v.name for v in self.prologue.scalars}  # the prologue's scalars: loop inputs (tir_prologue)
        for j, op in enumerate(self.ops):
            for ref in op.operands:
                if ref.distance is None and ref.name in launch:
                    continue
                if ref.distance is not None:
                    self.lookup(ref, ("result",), f"'{ref}' needs a body result", f"write '{ref.name}'")
                elif self.lookup(ref, why="the loop reads inputs, carries and its own results") == "result":
                    consumers.setdefault(self.position[ref.name], []).append(j)
                    if self.position[ref.name] >= j:
                        forward.append((j, ref, self.position[ref.name]))
        cycles = set()
        for j, ref, producer in forward:
            path = _path(consumers, j, producer)
            hint = f"write {ref.name}@1 to read the previous iteration's value"
            if path is None:
                self.errors.error(f"'{ref.name}' is used before it is defined", ref.span, hint)
            elif frozenset(path) not in cycles:
                cycles.add(frozenset(path))
                start = path.index(min(path))
                ring = [self.ops[i].name for i in path[start:] + path[:start]]
                self.errors.error("dependence cycle of total distance 0: " + " -> ".join(ring + ring[:1]),
                                  ref.span, hint)

    def check_vocabulary(self) -> None:
        """Every op of a table opcode (twill.vocab) against its entry: operand count, attributes,
        shapes and dtypes, reported at the opcode with the op's usage as the hint. An opcode the
        table does not know is left to the machine description (twill.costs)."""
        broken = {d.span.line for d in self.errors.diagnostics if d.span is not None}
        types = {v.name: v.type for v in self.values}
        types.update({op.name: op.type for op in self.ops if op.has_result and op.type is not None})
        for op in self.ops:
            if op.span is not None and op.span.line in broken:
                continue  # its line already has an error (an unknown name, a bad type)
            ins = [types.get(o.name) for o in op.operands]
            problem = vocab.check(op.opcode, op.type, ins, dict(op.attrs))
            if problem is not None:
                self.errors.error(f"op '{op.name}': {problem[0]}", op.span, problem[1])

    def check_yields(self) -> None:
        carries = [v.name for v in self.values if v.kind == "carry"]
        yielded = set()
        for carry, result in self.yields:
            if carry.name not in self.defined:
                self.errors.error(f"yield of unknown carry '{carry.name}'", carry.span,
                                  did_you_mean(carry.name, carries))
            elif self.lookup(carry, ("carry",), "yield needs a carry") and carry.name in yielded:
                self.errors.error(f"carry '{carry.name}' is yielded twice", carry.span)
            yielded.add(carry.name)
            if self.lookup(result, ("result",), "yield needs a body result"):
                self.check_yield_type(carry, result)
        for name in carries if not self.yield_broken else ():
            if name not in yielded:
                self.errors.error(f"carry '{name}' without yield", self.defined[name][1],
                                  f"add '{name} = RESULT' to the loop's 'yield' line")

    def check_yield_type(self, carry: Operand, result: Operand) -> None:
        """The next iteration reads the carry as the result it yields: their shapes and dtypes
        must agree (a 192-key S tile rescaling a 128-column accumulator was taken silently)."""
        c = next((v for v in self.values if v.name == carry.name and v.kind == "carry"), None)
        r = self.ops[self.position[result.name]] if result.name in self.position else None
        if c is None or r is None or r.type is None or c.type is None:
            return
        broken = {d.span.line for d in self.errors.diagnostics if d.span is not None}
        if {c.span.line if c.span else None, r.span.line if r.span else None} & broken:
            return  # a type already reported as bad
        if (c.type.dtype, c.type.shape) != (r.type.dtype, r.type.shape):
            self.errors.error(f"carry '{carry.name}' is {c.type} but '{result.name}' is {r.type}", result.span,
                              f"the next iteration reads '{carry.name}' as '{result.name}': give both one type")


def _path(consumers: dict[int, list[int]], start: int, goal: int) -> list[int] | None:
    """The shortest path start -> ... -> goal along distance-0 edges (BFS in op order), or None."""
    parent: dict[int, int | None] = {start: None}
    queue = deque([start])
    while queue and goal not in parent:
        node = queue.popleft()
        for nxt in sorted(consumers.get(node, ())):
            if nxt not in parent:
                parent[nxt] = node
                queue.append(nxt)
    if goal not in parent:
        return None
    path = [goal]
    while parent[path[-1]] is not None:
        path.append(parent[path[-1]])
    return path[::-1]


def parse_tir(text: str, file: str = "<string>") -> Graph:
    """Parse `.tir` text; raise one `InputError` listing every problem found."""
    return _Parser(file).parse(text)


def load_tir(path) -> Graph:
    """Read and parse a `.tir` file; `Graph.file` and every span name `path` as given."""
    file = str(path)
    try:
        text = Path(file).read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot read '{file}': {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise InputError(f"cannot read '{file}': it is not UTF-8 text") from None
    return parse_tir(text, file)


def print_tir(graph: Graph) -> str:
    """Canonical, column-aligned `.tir` text: `parse_tir(print_tir(g)) == g` for every parsed graph."""
    name_w = max((len(v.name) for v in graph.inputs + graph.carries if not v.computed), default=0)
    type_w = max((len(str(v.type)) for v in graph.carries), default=0)
    lines = [f"kernel {graph.kernel}", *print_arguments(graph.arguments, graph.also_fed, graph.extents, graph.loop_extent), *print_knobs(graph.knobs), *print_grid(graph.split, graph.tile_rows, graph.flat)]
    lines += [f"input {v.name.ljust(name_w)} : {v.type}" + (f" {{batch = {UNBATCHED}}}" if v.unbatched else "")
              for v in graph.inputs if not v.computed]
    lines += [f"carry {v.name.ljust(name_w)} : {str(v.type).ljust(type_w)} = {v.init or '0'}"
              + (" {" + ", ".join(f"{k} = {print_value(x)}" for k, x in v.attrs) + "}" if v.attrs else "")
              for v in graph.carries]
    lines += [*print_epilogue(graph.prologue, "prologue"), "loop {", *print_ops(graph.ops)]
    if graph.yields:
        lines.append("  yield " + ", ".join(f"{carry} = {result}" for carry, result in graph.yields))
    return "\n".join(lines + ["}", *print_epilogue(graph.epilogue)]) + "\n"
