"""The tile-loop graph: one singly nested loop over tiles, in SSA form.

All core data is frozen. A `Graph` is what the `.tir` parser and the TTGIR importer produce and
what every stage reads; it never changes after construction.

Edges come from operands: an operand that names a body result defined above is a dependence of
distance 0, one that names a `carry` is a dependence of distance 1 on the result the loop yields
for that carry, and ``NAME@D`` is a dependence of distance D on body result NAME.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property

from .errors import Span

NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")  # a name of the .tir format
DTYPE_BITS = {
    "f64": 64, "f32": 32, "tf32": 32, "f16": 16, "bf16": 16, "f8e4m3": 8, "f8e5m2": 8, "f4": 4,
    "i64": 64, "i32": 32, "i16": 16, "i8": 8, "i1": 1,
}
SPACES = ("reg", "smem", "tmem")
OP_ATTRIBUTES = ("cycles", "occupancy", "unit", "issue", "async", "variable_latency", "depth",
                 "transpose_a", "transpose_b",  # which way emit-cuda reads a square a or b of an mma
                 "axis", "bits", "shift",  # of a reduction or scan; of a dequant (twill.vocab)
                 "scalar",  # the y of a binary op written with one operand (a ternary op's last, written with two)
                 "divided_by",  # of a select's scalar: the knob it is divided by (exp2_scale, ttgir/fuse.py)
                 "pred", "rows", "cols", "offset", "fill",  # of a mask of element indices (twill.vocab)
                 "grid", "loop",  # of a position: the coefficients of its tile's origin (twill.vocab)
                 "col_stride", "col_offset", "iter_div",  # of a load: how it walks its argument (ttgir/addresses.py)
                 "column_major",  # of a load: its kernel holds the argument as the transpose of its .tir layout
                 "transposed",  # of a load: its argument is the transpose of its .tir type, staged so by the binding
                 "upper", "upper_by", "lower", "lower_by", "arg",  # of a causal mask's band (ttgir/band.py)
                 "seed", "row", "col", "batch", "base", "rounds")  # of a rand: its Philox counter (twill/counter.py)
# output: the dtype the carry's final value is written out in; column_major: its argument holds the
# output's transpose (C [N, M] row-major for an [M, N] carry: a Triton store to C + n * stride + m)
CARRY_ATTRIBUTES = ("output", "column_major")
# batch: of a load or an input, `{batch = none}`: the kernel reads one tensor for every batch entry (the Triton
# kernel's address reads no batch program id: an attention mask [N, N] under Q [B, H, N, D]; ttgir/unbatched.py)
INPUT_ATTRIBUTES = ("batch",)
UNBATCHED = "none"
OUTPUT_DTYPES = ("f32", "f16", "bf16")
NOT_WRITTEN = "none"  # a carry's {output = none}: its final value is not written (an epilogue output is)


@dataclass(frozen=True)
class TensorType:
    dtype: str
    shape: tuple[int, ...]
    space: str = "reg"

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def bytes(self) -> int:
        return (self.elements * DTYPE_BITS[self.dtype] + 7) // 8

    @property
    def footprint(self) -> int:
        """Bytes the value occupies where it lives. Tensor memory is allocated by columns, each
        column all 128 lanes of 32-bit cells (PTX ISA, tcgen05.alloc): a [R, C] tile takes
        ceil(C * bits / 32) columns for every started 128 rows, so a 64-row tile costs as much
        as a 128-row one. Elsewhere the footprint is the bytes."""
        if self.space != "tmem":
            return self.bytes
        rows = self.shape[0]  # a rank-1 value is one per row (a row max, a row sum): one column
        cols = math.prod(self.shape[1:])
        return math.ceil(rows / 128) * 128 * 4 * math.ceil(cols * DTYPE_BITS[self.dtype] / 32)

    def __str__(self) -> str:
        dims = ",".join(str(d) for d in self.shape)
        space = "" if self.space == "reg" else f" @{self.space}"
        return f"{self.dtype}[{dims}]{space}"


@dataclass(frozen=True)
class Value:
    """A loop-invariant `input` or a loop-carried `carry` (with its initial value)."""

    name: str
    type: TensorType
    kind: str  # "input" | "carry" | "scalar" (an epilogue's number given at launch)
    init: str | None = None
    span: Span | None = field(default=None, compare=False)
    attrs: tuple[tuple[str, object], ...] = ()  # carries: {output = DTYPE}; inputs: {batch = none}

    @property
    def computed(self) -> bool:
        """An input the prologue computes (`.tir` `prologue { ... }`), not one read from memory."""
        return bool(dict(self.attrs).get("prologue"))

    @property
    def unbatched(self) -> bool:
        """Whether an input is one tensor for every batch entry (`{batch = none}`)."""
        return dict(self.attrs).get("batch") == UNBATCHED

    @property
    def written(self) -> bool:
        """Whether a carry's final value is written to global memory (not `{output = none}`)."""
        return dict(self.attrs).get("output") != NOT_WRITTEN

    @property
    def column_major(self) -> bool:
        """Whether a carry's output is written transposed (`{column_major = true}`)."""
        return bool(dict(self.attrs).get("column_major"))

    @property
    def output_dtype(self) -> str:
        """The dtype a carry's final value is written to global memory in (default: its own)."""
        dtype = dict(self.attrs).get("output", self.type.dtype)
        return self.type.dtype if dtype == NOT_WRITTEN else str(dtype)


@dataclass(frozen=True)
class Operand:
    name: str
    distance: int | None = None  # explicit NAME@D; None for a plain name
    span: Span | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return self.name if self.distance is None else f"{self.name}@{self.distance}"


@dataclass(frozen=True)
class Op:
    """One tile operation of the loop body. `name` is its result, or a generated name."""

    name: str
    opcode: str
    operands: tuple[Operand, ...]
    type: TensorType | None
    attrs: tuple[tuple[str, object], ...] = ()
    has_result: bool = True
    span: Span | None = field(default=None, compare=False)

    def attr(self, key: str, default=None):
        return dict(self.attrs).get(key, default)

    @property
    def unbatched(self) -> bool:
        """Whether a load reads one tensor for every batch entry (`{batch = none}`)."""
        return self.opcode == "load" and self.attr("batch") == UNBATCHED


@dataclass(frozen=True)
class Edge:
    """`dst` of iteration i+distance reads what `src` of iteration i produced."""

    src: str
    dst: str
    distance: int
    operand: int  # index of the operand of dst
    carry: str | None = None  # the carry it flows through, if any


@dataclass(frozen=True)
class Epilogue:
    """What each output tile does once after the loop (the `.tir` `epilogue { ... }` block):
    `ops` over the carries' last values, the inputs, the `scalars` (numbers given at launch) and
    the block's own results, and `outputs`, (name, value): the value written as output tensor
    out_NAME. A NAME that is a carry replaces what its output is written from (the carry's last
    value, divided by its running sum for an online-softmax accumulator); any other NAME is one
    more output. Nothing here is scheduled: the solver sees only the loop."""

    scalars: tuple[Value, ...] = ()  # kind "scalar": a number the kernel takes at launch
    ops: tuple[Op, ...] = ()
    outputs: tuple[tuple[str, str], ...] = ()  # (output name, value)
    span: Span | None = field(default=None, compare=False)
    # (output name, value, "max" | "min" | "add"): a global scalar updated atomically by each tile's one
    # value (`output amax = m {atomic = max}`: the FP8 amax); the caller initializes it
    atomics: tuple[tuple[str, str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.scalars or self.ops or self.outputs or self.atomics)

    @cached_property
    def by_name(self) -> dict[str, Op]:
        return {op.name: op for op in self.ops}

    def output_of(self, carry: str) -> str | None:
        """The epilogue value written as carry's output, or None (written from the carry)."""
        return dict(self.outputs).get(carry)


@dataclass(frozen=True)
class Graph:
    kernel: str
    inputs: tuple[Value, ...]
    carries: tuple[Value, ...]
    ops: tuple[Op, ...]
    yields: tuple[tuple[str, str], ...]  # (carry, body result)
    file: str = field(default="<graph>", compare=False)
    epilogue: Epilogue = Epilogue()  # after the loop, once per tile (empty: the carries are written)
    arguments: tuple[tuple[str, str | None], ...] = ()  # an imported kernel's arguments: (name, what it feeds)
    prologue: Epilogue = Epilogue()  # before the loop, once per tile: its results are inputs (Value.computed)
    # (argument, target) for each target after an argument's first: loads that are views of one
    # argument (`argument SCALES = s_even, s_odd`: strided loads of its even and odd columns)
    also_fed: tuple[tuple[str, str], ...] = ()
    # (knob, twill.knobs.Product): a launch knob computed from the kernel's scalar arguments
    # (`knob exp2_scale = sm_scale * 1.4426950408889634`: the scale the import folded into exp2)
    knobs: tuple[tuple[str, object], ...] = ()
    # the argument each split of the loop runs over (`grid split = SPLIT_LEN`, twill.tir_grid): the
    # loop is split over a grid axis, the outputs have a leading dimension of splits; None: no split
    split: str | None = None
    # the rows of the kernel's tile where the graph's mma tiles are padded to the tensor core's M
    # (`grid rows = 16`, twill.tir_grid; twill.split.pad_rows): each program's rows are one batch entry,
    # the padded rows zero on load and never stored; None: the tiles are the kernel's
    tile_rows: int | None = None
    # a flat map over elements (`grid flat = n_elements`, twill.tir_grid; twill.ttgir.flatmap): every tensor of
    # the kernel is n_elements elements, viewed as [n_elements / C, C] rows, C the loop's extent; None: not flat
    flat: str | None = None
    # (argument, axis) for each kernel argument that is the extent of an axis of the tensors ("m", "n"
    # or "loop", as the binding names them: `argument K {extent = loop}`, twill.ttgir.extents); the
    # binding checks the caller's value against the tensors' shapes. Argument order, then m, n, loop.
    extents: tuple[tuple[str, str], ...] = ()
    # the loop's extent where the kernel bounds it by a compile-time constant (`extent loop = 4096`)
    loop_extent: int | None = None

    @cached_property
    def by_name(self) -> dict[str, Op]:
        return {op.name: op for op in self.ops}

    def op(self, name: str) -> Op:
        return self.by_name[name]

    @cached_property
    def values(self) -> dict[str, Value]:
        return {v.name: v for v in self.inputs + self.carries}

    @cached_property
    def edges(self) -> tuple[Edge, ...]:
        yielded = dict(self.yields)
        out = []
        for op in self.ops:
            for i, operand in enumerate(op.operands):
                if operand.distance is not None:
                    out.append(Edge(operand.name, op.name, operand.distance, i))
                elif operand.name in yielded and operand.name in self.values:
                    out.append(Edge(yielded[operand.name], op.name, 1, i, carry=operand.name))
                elif operand.name in self.by_name:
                    out.append(Edge(operand.name, op.name, 0, i))
        return tuple(out)

    def operand_type(self, operand: Operand) -> TensorType | None:
        """The type of the value an operand reads (a carry reads its declared type)."""
        if operand.distance is None and operand.name in self.values:
            return self.values[operand.name].type
        op = self.by_name.get(operand.name)
        return op.type if op else None
