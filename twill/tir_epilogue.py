"""The `epilogue { ... }` block of a `.tir` file: what each output tile does once, after the loop.

    epilogue := "epilogue" "{"  (scalar | op)*  [output]  "}"          (after the loop's "}")
    scalar   := "scalar" NAME ":" DTYPE                               (a number given at launch)
    op       := NAME "=" OPCODE [operands] ":" type [attrs]           (as in the loop; no NAME@D)
    output   := "output" item ("," item)*                             (output tensor = value)
    item     := NAME "=" NAME ["{" "atomic" "=" ("max" | "min" | "add") "}"]

An op reads the carries (their last values, as the loop leaves them), the inputs, the scalars and
the results of the block's ops above it; a loop body result is not readable (yield it as a carry).
Its opcode is one of the vocabulary's elementwise ops (not exp2, whose scale is the loop's
softmax knob), conversions, reductions or dequant (twill.vocab checks its operands); an input it
reads is read from global memory once per output tile. `output NAME = VALUE`: where NAME is a carry, its output tensor (out_NAME)
is written from VALUE instead of the carry's last value (and the implicit division of an
online-softmax accumulator by its running sum is not applied: the block says what is written);
any other NAME is one more output tensor, of the shape of a carry or one value per row of it. Outputs are written in f32, f16
or bf16 (or f8e4m3, f8e5m2): VALUE's dtype. `output NAME = VALUE {atomic = max}`: VALUE is
one f32 value (`reduce_max` of the tile's rows, then of those), and NAME a global f32 scalar each tile
updates atomically (max, min or add), which the caller initializes. Nothing in the block is scheduled.
"""
from __future__ import annotations

from . import vocab
from .errors import did_you_mean
from .ir import OUTPUT_DTYPES, Epilogue, Op, Operand, TensorType, Value
from .tir_text import KINDS, Line, print_ops

EPILOGUE_OUTPUT_DTYPES = OUTPUT_DTYPES + ("f8e4m3", "f8e5m2")  # an epilogue output may be fp8 (the FP8 GEMM's scaled C)
ATOMIC_KINDS = ("max", "min", "add")  # `output NAME = VALUE {atomic = K}`: a global scalar updated by each tile

# the ops an epilogue (and a prologue) runs; a position there is one value a row, [M] (each row's index in memory)
FAMILIES = ("unary", "binary", "ternary", "convert", "row", "reduce", "dequant", "join", "gather", "position")
SCALAR_DTYPES = ("f32", "i32", "i64")  # a Python float, a Python int, one of 64 bits (a rand's seed)
READABLE = ("input", "carry", "scalar", "epilogue")


REFUSED = ("exp2",)  # its scale is the kernel's exp2_scale, a knob of the loop's softmax: write exp


def allowed_opcodes() -> tuple[str, ...]:
    return tuple(sorted(d.name for d in vocab.VOCAB.values() if d.family in FAMILIES and d.name not in REFUSED))


class EpilogueParser:
    """The block's statements, read line by line for the file's parser (`owner`, twill.tir's
    `_Parser`, whose names, errors and op syntax it shares), and its checks once the file is read.
    With `keyword = "prologue"` it reads the prologue (twill.tir_prologue): the same statements but
    'output', over the inputs and scalars only."""

    keyword = "epilogue"
    readable = READABLE

    def __init__(self, owner):
        self.owner, self.begun, self.span = owner, False, None
        self.scalars: list[Value] = []
        self.ops: list[Op] = []
        self.outputs: list[tuple[Operand, Operand]] = []
        self.atomics: dict[str, str] = {}  # output name -> its atomic kind
        self.output_line: int | None = None

    def begin(self, line: Line) -> None:
        self.begun, self.span = True, line.span(line.peek())
        line.expect(self.keyword)
        line.expect("{", f"'{{' after '{self.keyword}'")
        line.end()

    def statement(self, line: Line) -> bool:
        """Read one statement; False once the block's '}' closes it."""
        first = line.peek()
        if self.output_line is not None and not line.at("}"):
            self.owner.errors.error("'output' must be the last statement of the epilogue", line.span(first),
                                    f"the epilogue's 'output' is on line {self.output_line}")
        if first.text == "}" and not line.at("=", 1):
            line.expect("}")
            line.end()
            return False
        if first.text == "scalar" and not line.at("=", 1):
            self.scalar(line)
        elif first.text == "output" and not line.at("=", 1) and self.keyword == "epilogue":
            self.output(line)
        elif first.text in ("input", "carry", "loop", "yield", "epilogue", "prologue", "kernel", "output") \
                and not line.at("=", 1):
            self.owner.errors.error(f"'{first.text}' is not allowed inside the {self.keyword}", line.span(first),
                                    f"the {self.keyword} holds 'scalar' lines, ops"
                                    + (" and one 'output' line" if self.keyword == "epilogue" else ""))
        else:
            self.ops.append(self.owner.parse_op(line, self.keyword))
        return True

    def scalar(self, line: Line) -> None:
        line.expect("scalar")
        name = line.next("the scalar's name")
        line.expect(":", "':' and a dtype (f32, i32 or i64)")
        dtype = line.next("a dtype (f32, i32 or i64)")
        line.end()
        if dtype.text not in SCALAR_DTYPES:
            self.owner.errors.error(f"a scalar is f32, i32 or i64, not '{dtype.text}'", line.span(dtype),
                                    "f32: a Python float at launch; i32: a Python int; i64: a Python int of 64 bits "
                                    "(a rand's seed)")
        shared = self.keyword == "epilogue" and self.owner.defined.get(name.text, (None,))[0] == "scalar" \
            and name.text in {v.name for v in self.owner.prologue.scalars}  # the prologue's too: one number
        if shared or self.owner.define(name.text, "scalar", line.span(name)):
            self.scalars.append(Value(name.text, TensorType(dtype.text if dtype.text in SCALAR_DTYPES else "f32", (1,)),
                                      "scalar", None, line.span(name)))

    def output(self, line: Line) -> None:
        line.expect("output")
        first, self.output_line = self.output_line is None, self.output_line or line.number
        items = []
        while line.peek() is not None:
            if items:
                line.expect(",", "',' or the end of the line")
            name = self.owner.operand(line, "an output's name", allow_distance=False)
            line.expect("=", "'=' and the value written to it")
            items.append((name, self.owner.operand(line, "a value", allow_distance=False)))
            if line.take("{"):
                line.expect("atomic", "'atomic' (the only attribute of an output)")
                line.expect("=", "'=' and max, min or add")
                kind = line.next("max, min or add")
                if kind.text not in ATOMIC_KINDS:
                    line.fail("max, min or add (the atomic update of the output)")
                line.expect("}", "'}'")
                if first:
                    self.atomics[name.name] = kind.text
        if not items:
            line.fail("an output: NAME = VALUE")
        self.outputs = items if first else self.outputs

    # -- checks, once the whole file is read ------------------------------------------------------
    def check(self) -> None:
        if not self.begun:
            return
        types = self.check_ops()
        if self.keyword != "epilogue":
            return
        self.check_outputs(types)
        if self.ops and not self.outputs and self.output_line is None:
            self.owner.errors.error("the epilogue writes nothing: its ops have no 'output' line", self.span,
                                    "end the block with 'output NAME = VALUE' (NAME a carry, or a new output)")

    def check_ops(self) -> dict[str, TensorType]:
        """Each op's operands name something readable above it, its opcode is one an epilogue
        runs, and it fits its vocabulary entry. Returns the types of every readable name."""
        o, errors = self.owner, self.owner.errors
        types = {v.name: v.type for v in o.values}
        types.update({v.name: v.type for v in self.scalars})
        allowed = allowed_opcodes()
        seen: set[str] = set()
        for op in self.ops:
            broken = {d.span.line for d in errors.diagnostics if d.span is not None}
            for k, ref in enumerate(op.operands):
                if op.opcode == "gather" and k == 0:
                    self.check_table(ref, types)
                else:
                    self.check_operand(ref, seen)
            d = vocab.lookup(op.opcode)
            if op.opcode not in allowed:
                known = d is not None or op.opcode == "store"
                what = (f"opcode '{op.opcode}' is not allowed in the {self.keyword}" if known
                        else f"unknown opcode '{op.opcode}' in the {self.keyword}")
                did = None if known else did_you_mean(op.opcode, allowed)
                errors.error(what, op.span, (did + "; " if did else "") + f"the {self.keyword} runs the vocabulary's "
                             "elementwise ops (exp, not exp2), conversions, reductions and dequant; it reads "
                             "inputs where the loop loads")
            elif not op.has_result:
                errors.error(f"op '{op.name}' has no result: the {self.keyword} writes through "
                             + ("its 'output' line" if self.keyword == "epilogue" else "its results, which the loop reads"),
                             op.span)
            elif op.span is None or op.span.line not in broken:
                problem = vocab.check(op.opcode, op.type, [types.get(r.name) for r in op.operands], dict(op.attrs))
                if problem is not None:
                    errors.error(f"op '{op.name}': {problem[0]}", op.span, problem[1])
            if op.has_result and op.type is not None:
                types[op.name] = op.type
                seen.add(op.name)
        return types

    def check_table(self, ref: Operand, types: dict) -> None:
        """A gather's x: a `load` of the loop, whose tensor (not its last tile) the gather reads in global memory."""
        o = self.owner
        load = next((op for op in o.ops if op.name == ref.name), None)
        if self.keyword != "epilogue" or load is None or load.opcode != "load" or ref.distance is not None:
            o.errors.error(f"a gather reads the tensor of a load of the loop, but '{ref}' is "
                           + ("no op of the loop" if load is None else f"a '{load.opcode}'" if load.opcode != "load"
                              else "not written as one (no iteration distance)" if ref.distance is not None
                              else "read in the prologue"),
                           ref.span, "gather x, index: x a loop's load [M, K], index an i32/i64 [M] (an input)")
            return
        types[ref.name] = load.type

    def check_operand(self, ref: Operand, seen: set[str]) -> None:
        o = self.owner
        if ref.distance is not None:
            o.errors.error(f"'{ref}': the {self.keyword} runs once, {'after' if self.keyword == 'epilogue' else 'before'} "
                           "the loop, so an iteration distance has no meaning here", ref.span, f"write '{ref.name}'")
            return
        kind = o.lookup(ref, self.readable, f"the {self.keyword} reads " + (
                        "the carries' last values, inputs, scalars and its own results" if self.keyword == "epilogue"
                        else "the inputs, scalars and its own results"), "yield it as a carry to read its last value"
                        if self.keyword == "epilogue" else "the prologue runs before the loop")
        if kind == self.keyword and ref.name not in seen:
            o.errors.error(f"'{ref.name}' is used before it is defined", ref.span,
                           "an epilogue op reads the results of the ops above it")

    def check_outputs(self, types: dict[str, TensorType]) -> None:
        o = self.owner
        carries = {v.name: v for v in o.values if v.kind == "carry"}
        shapes = {c.type.shape for c in carries.values()} | {c.type.shape[:1] for c in carries.values()} \
            | {(c.type.shape[0], 2 * c.type.shape[1]) for c in carries.values() if len(c.type.shape) == 2}  # a join
        named: set[str] = set()
        for name, value in self.outputs:
            if name.name in named:
                o.errors.error(f"output '{name.name}' is written twice", name.span)
            named.add(name.name)
            kind = o.defined.get(name.name, (None,))[0]
            if kind in ("input", "scalar"):  # each is an argument of the kernel already
                o.errors.error(f"output '{name.name}' names {KINDS[kind]}: an output is a carry (written from "
                               "the value instead) or a name of no input or scalar", name.span)
            kind = o.lookup(value, ("carry", "epilogue"), "an output is written from a carry or an epilogue result")
            t = types.get(value.name) if kind else None
            if t is None:
                continue
            if name.name in self.atomics:
                if name.name in carries or t != TensorType("f32", (1,)):
                    o.errors.error(f"output '{name.name}' {{atomic = {self.atomics[name.name]}}} is a global scalar "
                                   f"updated by one value a tile: " + (f"'{name.name}' is a carry" if name.name in carries
                                   else f"'{value.name}' is {t}, not f32[1]"), value.span, "reduce the tile to one "
                                   "value first: reduce_max x {axis = 1}, then reduce_max of that {axis = 0}")
                continue
            if t.dtype not in EPILOGUE_OUTPUT_DTYPES:
                o.errors.error(f"output '{name.name}' would be written in {t.dtype}: outputs are "
                               f"{', '.join(EPILOGUE_OUTPUT_DTYPES)}", value.span, f"convert '{value.name}' first")
            want = carries[name.name].type.shape if name.name in carries else None
            if want is not None and t.shape != want:
                o.errors.error(f"carry '{name.name}' is {carries[name.name].type}, but '{value.name}' is {t}",
                               value.span, "a carry's output is written from a value of its shape")
            elif want is None and t.shape not in shapes:
                o.errors.error(f"output '{name.name}' is {t}: neither the shape of a carry, its rows nor the join of "
                               "two", value.span, "a new output is written by the tiles of a carry of its shape (or one "
                               "value per row, or the [M, 2N] join of two [M, N] carries)")

    def build(self) -> Epilogue:
        return Epilogue(tuple(self.scalars), tuple(self.ops), tuple((n.name, v.name) for n, v in self.outputs
                                                                   if n.name not in self.atomics),
                        self.span, tuple((n.name, v.name, self.atomics[n.name]) for n, v in self.outputs
                                         if n.name in self.atomics))


def print_epilogue(e: Epilogue, keyword: str = "epilogue") -> list[str]:
    """The block's canonical lines (none for an empty epilogue); `keyword`: or the prologue's."""
    if not e:
        return []
    width = max((len(v.name) for v in e.scalars), default=0)
    lines = [f"{keyword} {{", *(f"  scalar {v.name.ljust(width)} : {v.type.dtype}" for v in e.scalars),
             *print_ops(e.ops)]
    items = [f"{n} = {v}" for n, v in e.outputs] + [f"{n} = {v} {{atomic = {k}}}" for n, v, k in e.atomics]
    if items:
        lines.append("  output " + ", ".join(items))
    return lines + ["}"]
