"""What an SSA value of TTGIR becomes during import, and the tile nodes the loop is built from.

Every SSA value is bound to one of:

- `SCALAR`: index arithmetic, pointers, descriptors, scalars: folded away (no tile dependence);
  `INDEXED` is the kind of it that varies per element (offsets from ``tt.make_range``, masks made of
  them), which arithmetic on a tile cannot drop without changing what the op computes;
- `Const`: a splat constant (``arith.constant dense<0xFF800000>``): a carry's initial value, or an
  accumulator that starts at zero; as an operand of arithmetic it is folded away like a scalar;
- `Tile`: a whole tile, made by a `Node` or carried by a `Carry`;
- `Buf`: a mutable buffer in shared or tensor memory (``ttng.tmem_alloc`` without a source), whose
  current content the lowering tracks in program order;
- `TOKEN`: an async token; tokens only order buffer accesses, which program order already does.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import Diagnostic, Span
from ..ir import TensorType


@dataclass(frozen=True)
class Ref:
    kind: str  # "node" or "carry"
    index: int


@dataclass(frozen=True)
class Scalar:
    pass


@dataclass(frozen=True)
class Indexed(Scalar):
    """A tensor computed from element indices (``tt.make_range``): offsets, and masks built from them."""


@dataclass(frozen=True)
class LaunchScalar(Scalar):
    """A float scalar argument of the function (attention's ``sm_scale``): folded away like any scalar,
    except where a binary op of one of the loop's tiles reads it and no fusion folds it (into the
    exp2's scale): then that op's y, a prologue scalar of the graph (the node's ``launch`` attribute,
    build.py)."""

    name: str = ""  # the argument; "" for a value computed from arguments and constants
    dtype: str = "f32"
    scale: object = None  # twill.knobs.Product: the value as a product of arguments and constants
    # scalarexpr.Expr: a value computed from arguments and constants ("" name), which a prologue op computes
    expr: object = None


@dataclass(frozen=True)
class Token:
    pass


@dataclass(frozen=True)
class Const:
    value: float | bool | None  # None: not one splat value


@dataclass(frozen=True)
class Tile:
    ref: Ref
    flip: bool = False  # seen transposed: the tile's .tir type is its layout in memory, this view swaps it
    column: bool = False  # a rank-1 tile seen through ``tt.expand_dims {axis = 0}``: one value per column


@dataclass(frozen=True)
class Buf:
    index: int
    flip: bool = False  # seen through a transpose (``ttg.memdesc_trans``): what it holds is read transposed


@dataclass(frozen=True)
class Entry:
    """A buffer's content at loop entry, not read yet in this iteration."""

    buf: int


SCALAR = Scalar()
INDEXED = Indexed()
TOKEN = Token()


@dataclass(frozen=True)
class Node:
    """One tile operation before fusion.

    `kind` is load, mma, rowmax, rowsum, exp2 (anchors of their own opcode), ew (cheap elementwise
    arithmetic), conv (a dtype conversion), move (a copy of a register tile into shared or tensor
    memory), store, arg (a tensor argument of the function), scalar (a float scalar argument a loop
    op reads: a prologue scalar), position (element positions, indices.py) or generic (an op the
    importer does not know). `mlir` is the TTGIR op it came from and `ssa` its result's SSA name.
    """

    index: int
    kind: str
    mlir: str
    ssa: str | None
    operands: tuple[Ref, ...]
    type: TensorType | None
    span: Span
    in_loop: bool
    attrs: tuple[tuple[str, object], ...] = ()  # .tir attributes of the op it becomes (transpose_b)
    args: tuple[object, ...] = ()  # every operand value as lowered, constants too (a peeled copy is matched by them)
    pos: tuple[int, ...] | None = None  # the source position of its op's loc (see locs.py)
    opcode: str | None = None  # the .tir opcode a node of kind reduce or scan becomes (reduce_sum, cumsum)
    # a multiply or divide of one tile by a scalar: the factor it scales the tile by (twill.knobs.Product),
    # None where the scalar is no product of the kernel's float arguments and constants
    factor: object = None


@dataclass(frozen=True)
class Carry:
    ssa: str  # the iteration argument, or the buffer, it stands for
    type: TensorType
    init: object  # the value before the loop (Const, Tile, SCALAR, or None for uninitialised memory)
    span: Span
    arg: int | None = None  # its index among the loop's iter_args (a tensor carried in SSA form)
    buf: int | None = None  # or the buffer whose content it carries (a tensor memory accumulator)
    output: str | None = None  # the dtype its final value is converted to after the loop (`truncf` to f16)
    key: str | None = None  # the name the epilogue reads it by where depipe.py cleared `ssa` (its iter_arg's)


@dataclass(frozen=True)
class Note:
    """A warning; `unknown` ones (an op the importer cannot express) are errors under --strict;
    `incomplete` ones (the graph would store something other than what the kernel stores) are
    errors unless the user named the loop (--loop N)."""

    diagnostic: Diagnostic
    unknown: bool = False
    incomplete: str = ""  # where it is an error: its message ("": it is not)


@dataclass(frozen=True)
class Lowered:
    """The loop of one function, lowered: tile nodes (those outside the loop included), carries,
    and for each carry the value the loop yields for it."""

    kernel: str
    nodes: tuple[Node, ...]
    carries: tuple[Carry, ...]
    yields: tuple[object, ...]
    notes: tuple[Note, ...]
    span: Span
    variables: tuple[str, ...] = ()  # the loop's variables as its loc names them (Triton lists them there)
    iter_args: tuple[str, ...] = ()  # the SSA names of its iter_args
    epilogue: object = None  # ttgir.epilogue.RawEpilogue: what the ops after the loop store
    signature: object = None  # ttgir.epilogue.Signature: the function's arguments and where they lead
