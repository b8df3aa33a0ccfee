"""Lower one `scf.for` of a TTGIR function to tile nodes, carries and yields.

The function is walked in program order up to and through the chosen loop: ops before the loop are
lowered too (so the Q tile loaded before an attention loop is known as a tile), but only nodes inside
the loop become graph ops; tiles from before the loop that the loop reads become `input`s.

Per-op behaviour lives in `HANDLERS` (TTGIR op name -> function). An op that is not in it is a
`generic` node named after the op, with a warning (an error under ``strict``). Buffers (tensor memory
accumulators, mutable shared memory) are tracked by content in program order: a read before any write
in the body reads the content of the previous iteration, which becomes a carry of that buffer.
"""
from __future__ import annotations

import math
import struct
from dataclasses import replace

from ..errors import Diagnostic, InputError, Span
from ..ir import TensorType
from . import epilogue
from .locs import name as loc_name, names as loc_names, position
from .parser import Module, MOp
from .types import TypeReader, last_top_level
from .values import INDEXED, SCALAR, TOKEN, Buf, Carry, Const, Entry, Indexed, Lowered, Node, Note, Ref, Scalar, Tile, Token

# Ops that cost nothing at tile level: the result is the operand, seen through a new layout or shape.
VIEWS = {
    "ttg.convert_layout", "tt.trans", "ttg.memdesc_trans", "tt.broadcast", "tt.expand_dims", "tt.reshape",
    "ttg.memdesc_reshape", "tt.splat", "ttg.memdesc_subview", "ttg.memdesc_index", "ttg.memdesc_subslice",
    "ttng.tmem_subslice", "ttg.memdesc_reinterpret", "tt.bitcast", "arith.bitcast",
}
# Index, pointer and program-id arithmetic: always folded away.
SCALAR_OPS = {
    "tt.get_program_id", "tt.get_num_programs", "tt.make_range", "tt.addptr", "tt.advance",
    "tt.make_tensor_ptr", "tt.make_tensor_descriptor", "tt.int_to_ptr", "tt.ptr_to_int",
    "arith.index_cast", "arith.index_castui", "ub.poison", "ttng.tensormap_create",
    "ttng.reinterpret_tensor_descriptor", "ttg.global_scratch_alloc",
}
# Hints and deallocations: no effect on the tile-level schedule.
NO_OPS = {"tt.assume", "llvm.intr.assume", "ttg.local_dealloc", "ttng.tmem_dealloc", "tt.return", "tt.reduce.return",
          "tt.scan.return"}
# What Triton's pipeliner adds to order memory accesses: async groups, barriers, fences (tokens only).
ORDERING_OPS = {
    "ttg.async_commit_group", "ttg.async_wait", "ttng.init_barrier", "ttng.inval_barrier", "ttng.wait_barrier",
    "ttng.barrier_expect", "ttng.arrive_barrier", "ttng.fence_async_shared", "ttng.tc_gen5_commit",
    "ttng.async_tma_store_wait", "ttng.async_tma_store_token_wait", "ttg.barrier", "gpu.barrier",
    "ttng.tensormap_fenceproxy_acquire", "ttng.fence", "ttng.async_copy_mbarrier_arrive",
}
ASYNC_COPIES = {"ttg.async_copy_global_to_local", "ttng.async_tma_copy_global_to_local", "ttng.async_tma_gather"}
# Elementwise ops (on scalars they are index arithmetic) -> node kind when a tile flows through.
_EW = ("addf subf mulf divf negf remf maxnumf minnumf maximumf minimumf select cmpf cmpi addi subi muli "
       "divsi divui remsi remui andi ori xori shli shrsi shrui maxsi minsi maxui minui").split()
_CONV = "truncf extf trunci extsi extui sitofp uitofp fptosi fptoui".split()
ELEMENTWISE = {
    **{f"arith.{n}": "ew" for n in _EW}, **{f"arith.{n}": "conv" for n in _CONV},
    "tt.fp_to_fp": "conv", "math.exp2": "exp2", "math.exp": "exp2", "math.fma": "ew", "math.absf": "ew",
    "tt.clampf": "ew", "tt.precise_divf": "ew",
}
LOADS = {"tt.load", "tt.descriptor_load", "tt.experimental_descriptor_load", "tt.descriptor_gather"}
STORES = {"tt.store", "tt.descriptor_store", "tt.experimental_descriptor_store", "tt.descriptor_scatter",
          "ttng.async_tma_copy_local_to_global", "ttng.async_tma_scatter"}
MAX_COMBINERS = {"arith.maxnumf", "arith.maximumf", "arith.maxf", "arith.maxsi", "arith.maxui"}
ADD_COMBINERS = {"arith.addf", "arith.addi"}
MIN_COMBINERS = {"arith.minnumf", "arith.minimumf", "arith.minf", "arith.minsi", "arith.minui"}


def opcode_token(mlir_name: str) -> str:
    """A TTGIR op name as a `.tir` opcode: every character other than a letter, digit or '_'
    becomes '_' (``tt.foo`` -> ``tt_foo``, ``ttng.tmem_copy`` -> ``ttng_tmem_copy``)."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in mlir_name)


class _Lowering:
    """The state of one walk: SSA bindings, nodes so far, buffers and their content, carries."""

    def __init__(self, module: Module):
        self.src, self.types = module.source, TypeReader(module.source, module.aliases)
        self.locs = module.locs or {}
        self.env: dict[str, object] = {}
        self.nodes: list[Node] = []
        self.buffers: list[tuple[str, object, Span]] = []  # (SSA name, MType, span)
        self.views: dict[int, list[str]] = {}  # buffer -> the SSA names of views of it (a slot of it)
        self.content: dict[int, object] = {}
        self.at_entry: dict[int, object] = {}
        self.carries: list[Carry] = []
        self.notes: list[Note] = []
        self.in_loop = False
        self.yielded: list[object] | None = None

    # -- helpers ----------------------------------------------------------------------------------

    def span(self, op: MOp) -> Span:
        return self.src.span(op.head, len(op.head.text))

    def value(self, name: str, tok) -> object:
        for key in (name, name + "#0"):
            if key in self.env:
                return self.env[key]
        raise self.src.error(f"use of undefined value '%{name}'", tok)

    def operands(self, op: MOp) -> list[object]:
        return [self.value(name, tok) for name, tok in op.operands()]

    def bind(self, op: MOp, *vals: object) -> None:
        """Bind the op's results in order; results beyond `vals` repeat the last value. SSA names
        are defined once in a function: a second definition is an error."""
        for i, name in enumerate(op.results):
            if name in self.env:
                raise self.src.error(f"'%{name.split('#')[0]}' is defined twice", op.head)
            self.env[name] = vals[min(i, len(vals) - 1)] if vals else SCALAR

    def note(self, op: MOp, message: str, unknown: bool = False, hint: str | None = None) -> None:
        if self.in_loop:
            self.notes.append(Note(Diagnostic(message, self.span(op), hint, "warning"), unknown))

    def node(self, kind: str, op: MOp, operands, type_: TensorType | None, ssa: str | None = "", attrs=(),
             opcode: str | None = None) -> Tile:
        ssa = (op.results[0] if op.results else None) if ssa == "" else ssa
        if ssa is None and kind == "load":  # a TMA copy has no result: the variable its loc names
            ssa = loc_name(op.loc, self.locs)
        refs = tuple(v.ref for v in operands if isinstance(v, Tile))
        self.nodes.append(Node(len(self.nodes), kind, op.name, ssa, refs, type_, self.span(op), self.in_loop,
                               tuple(attrs), tuple(operands), position(op.loc, self.locs), opcode))
        return Tile(Ref("node", len(self.nodes) - 1))

    def type_of(self, ref: Ref) -> TensorType:
        return self.nodes[ref.index].type if ref.kind == "node" else self.carries[ref.index].type

    def tile_type(self, mtype, op: MOp, space: str | None = None) -> TensorType:
        tt = mtype.tile(space)
        if tt is None:
            raise self.src.error(f"'{op.name}' makes a tile of element type '{mtype.elem}', which "
                                 "the .tir format has no dtype for", op.head)
        return tt

    def signature(self, op: MOp):
        return self.types.signature(op.tokens)

    def read(self, val: object) -> object:
        """The tile a memory operand holds now (a buffer's content, or the tile itself)."""
        if not isinstance(val, Buf):
            return val
        content = self.content.get(val.index)
        if isinstance(content, Entry):  # read before written in this iteration: last iteration's value
            name, mtype, span = self.buffers[val.index]
            self.carries.append(Carry(name, self.tile_type_at(mtype, span), self.at_entry.get(val.index),
                                      span, None, val.index))
            content = Tile(Ref("carry", len(self.carries) - 1))
            self.content[val.index] = content
        if content is None:
            return SCALAR
        return replace(content, flip=content.flip != val.flip) if isinstance(content, Tile) and val.flip else content

    def tile_type_at(self, mtype, span: Span) -> TensorType:
        tt = mtype.tile()
        if tt is None:
            raise InputError(Diagnostic(f"a buffer of element type '{mtype.elem}' has no .tir dtype", span))
        return tt

    def move(self, val: object, space: str, op: MOp) -> object:
        """A register tile copied into `space`: a loaded tile is already in shared memory; any other
        becomes a `move` node (the fusion step folds it into its producer where it can)."""
        if not isinstance(val, Tile):
            return val
        if val.ref.kind == "node" and self.nodes[val.ref.index].kind == "load" and space == "smem":
            return val
        t = self.type_of(val.ref)
        return replace(self.node("move", op, [val], TensorType(t.dtype, t.shape, space)), flip=val.flip)

    # -- walking ----------------------------------------------------------------------------------

    def lower(self, op: MOp) -> None:
        if op.name in HANDLERS:
            HANDLERS[op.name](self, op)
        elif op.name in ELEMENTWISE:
            elementwise(self, op)
        else:
            generic(self, op)


# -- handlers -------------------------------------------------------------------------------------

TRANSPOSES = {"tt.trans", "ttg.memdesc_trans"}


def view(lw: _Lowering, op: MOp) -> None:
    vals = lw.operands(op)
    val = vals[0] if vals else SCALAR
    if op.name in TRANSPOSES and isinstance(val, (Tile, Buf)):
        val = replace(val, flip=not val.flip)
    if op.name == "tt.expand_dims" and isinstance(val, Tile) and int_attr(op, "axis") == 0 \
            and len(lw.type_of(val.ref).shape) == 1:
        val = replace(val, column=True)
    if op.name in SLOTS and isinstance(val, Buf):
        _slot(lw, op, val)
    if isinstance(val, Buf):
        lw.views.setdefault(val.index, []).extend(op.results)
    lw.bind(op, val)


SLOTS = {"ttg.memdesc_index", "ttg.memdesc_subview"}


def _slot(lw: _Lowering, op: MOp, buf: Buf) -> None:
    """``ttg.memdesc_index %buf[%i]`` of a buffer with a leading buffer dimension (Triton's
    multi-buffering: one slot per stage in flight): every slot stands for the same tile, so the
    buffer is the one tile a slot holds, and which slot an access uses is dropped."""
    _, outs = lw.signature(op)
    name, mtype, span = lw.buffers[buf.index]
    if outs and outs[0].kind == "memdesc" and len(outs[0].shape) == len(mtype.shape) - 1 \
            and outs[0].shape == mtype.shape[1:]:
        lw.buffers[buf.index] = (name, replace(mtype, shape=outs[0].shape), span)


def scalar(lw: _Lowering, op: MOp) -> None:
    lw.operands(op)  # still checks that they are defined
    lw.bind(op, INDEXED if op.name == "tt.make_range" else SCALAR)


def no_op(lw: _Lowering, op: MOp) -> None:
    lw.bind(op, SCALAR)


def constant(lw: _Lowering, op: MOp) -> None:
    toks = op.tokens
    ins, _ = lw.signature(op)
    elem = ins[0].elem if ins else "i1"
    i = 0
    if toks and toks[0].is_("{"):  # an attribute dict first ({async_task_id = ...} on Hopper partitions)
        depth = 0
        for i, t in enumerate(toks):
            depth += t.is_("{") - t.is_("}")
            if depth == 0:
                break
        i += 1
    if i + 2 < len(toks) and toks[i].is_("dense") and toks[i + 1].is_("<"):
        i += 2
    lw.bind(op, Const(_literal(toks[i].text, elem)) if i < len(toks) else SCALAR)


def _literal(text: str, elem: str) -> float | bool | None:
    """``0.000000e+00``, ``0xFF800000`` (the bits of -inf as f32), ``true`` -> a Python value."""
    if text in ("true", "false"):
        return text == "true"
    try:
        if text.lower().startswith("0x"):
            bits = int(text, 16)
            if elem == "f32":
                return struct.unpack(">f", bits.to_bytes(4, "big"))[0]
            if elem == "f16":
                return struct.unpack(">e", bits.to_bytes(2, "big"))[0]
            if elem == "bf16":
                return struct.unpack(">f", (bits << 16).to_bytes(4, "big"))[0]
            if elem == "f64":
                return struct.unpack(">d", bits.to_bytes(8, "big"))[0]
            return bits
        return float(text)
    except (ValueError, OverflowError):
        return None


def elementwise(lw: _Lowering, op: MOp) -> None:
    vals = lw.operands(op)
    if not any(isinstance(v, Tile) for v in vals):
        lw.bind(op, INDEXED if any(isinstance(v, Indexed) for v in vals) else SCALAR)
        return
    if any(isinstance(v, Indexed) for v in vals):
        lw.note(op, f"'{op.name}' reads a tensor computed from element indices (a mask, say), which a "
                    "tile-loop graph cannot express: the op is imported without it", unknown=True,
                hint="a .tir op computes the same function of every element; a causal or boundary mask "
                     "of the tile is not imported (emit-cuda masks only a ragged last tile)")
    ins, outs = lw.signature(op)
    mtype = outs[0] if outs else ins[-1] if ins else None
    if mtype is None:
        raise lw.src.error(f"'{op.name}' has no type", op.head)
    tt = _result_tile(lw, mtype, op)  # on a one-element tile (a reduction to a scalar): a scalar
    if op.name in ("arith.cmpf", "arith.cmpi"):
        tt = TensorType("i1", tt.shape)
    lw.bind(op, lw.node(ELEMENTWISE[op.name], op, vals, tt, attrs=_scalar_operand(op, vals)))


COMMUTATIVE = {"arith.addf", "arith.addi", "arith.mulf", "arith.muli", "arith.maxnumf", "arith.minnumf",
               "arith.maximumf", "arith.minimumf", "arith.andi", "arith.ori", "arith.xori"}


def _scalar_operand(op: MOp, vals: list) -> tuple:
    """A splat constant that is the second operand of a binary op on one tile (or either, for a
    commutative one) as the `scalar` attribute the fusion step reads (a dequant's shift and mask)."""
    tiles = [v for v in vals if isinstance(v, Tile)]
    if len(vals) != 2 or len(tiles) != 1 or not (isinstance(vals[1], Const) or op.name in COMMUTATIVE):
        return ()
    const = next((v for v in vals if isinstance(v, Const)), None)
    value = const.value if const is not None else None
    if value is None or isinstance(value, bool) or not math.isfinite(value):
        return ()
    return (("scalar", int(value) if float(value).is_integer() else value),)


def load(lw: _Lowering, op: MOp) -> None:
    vals = lw.operands(op)
    ins, outs = lw.signature(op)
    if outs:
        mtype = outs[0]
    elif ins and ins[0].kind == "tensor" and ins[0].elem == "ptr":  # tt.load %ptrs : tensor<..x!tt.ptr<f16>>
        mtype = type(ins[0])("tensor", ins[0].shape, ins[0].pointee)
    elif ins and ins[0].kind == "ptr":  # a block pointer: !tt.ptr<tensor<...>>
        mtype = type(ins[0])("tensor", ins[0].shape, ins[0].elem)
    else:
        raise lw.src.error(f"cannot tell the tile type '{op.name}' loads", op.head)
    if not mtype.shape:  # one element through a scalar pointer: a scalar, whatever it scales
        lw.note(op, f"'{op.name}' of one {mtype.elem} in the loop: a scalar, folded away like index arithmetic "
                    "(a tile op that reads it is imported without it)", unknown=True)
        lw.bind(op, SCALAR)
        return
    lw.bind(op, _load_node(lw, op, vals, lw.tile_type(mtype, op, "smem"), ins[0] if ins else None))


def _load_node(lw: _Lowering, op: MOp, vals, tt: TensorType, source) -> Tile:
    """The `load` node of a tile of type `tt` read from `source` (the MType of its addresses)."""
    if source is not None and source.kind == "tensor" and source.elem == "ptr" and len(tt.shape) == 2 \
            and source.order == (0, 1):
        # Coalescing ordered the addresses dim 0 first: the tile is stored column-major in memory.
        # The .tir type is its layout there (as a TMA box would be), and this view of it is transposed.
        return replace(lw.node("load", op, vals, replace(tt, shape=tt.shape[::-1])), flip=True)
    return lw.node("load", op, vals, tt)


def async_copy(lw: _Lowering, op: MOp) -> None:
    """What Triton's pipeliner made of a load: ``ttg.async_copy_global_to_local %ptrs, %buf mask ...``
    and ``ttng.async_tma_copy_global_to_local %desc[...] %buf, %barrier, %pred``: buffer `buf` (the
    first buffer operand; a barrier follows it) now holds the loaded tile. The copy's result is a token."""
    vals = lw.operands(op)
    buf = next((v for v in vals if isinstance(v, Buf)), None)
    if buf is None:
        generic(lw, op, "it writes no buffer the importer knows")
        return
    colon = last_top_level(op.tokens, ":")  # the result type is printed without its `!ttg.memdesc`
    source = lw.types.read(op.tokens, colon + 1)[0] if colon is not None else None
    source = source if source is not None and source.kind == "tensor" else None
    _, mtype, _ = lw.buffers[buf.index]
    lw.content[buf.index] = _load_node(lw, op, [v for v in vals if not isinstance(v, Buf)],
                                       lw.tile_type(mtype, op, "smem"), source)
    lw.bind(op, TOKEN)


def token(lw: _Lowering, op: MOp) -> None:
    """An op that only orders memory accesses (a barrier, an async group, a fence): program order
    already does, so it is dropped; its results are tokens."""
    lw.operands(op)
    lw.bind(op, TOKEN)


def store(lw: _Lowering, op: MOp) -> None:
    vals = [lw.read(v) for v in lw.operands(op)]
    if any(isinstance(v, Tile) for v in vals):
        lw.node("store", op, vals, None, None)
    lw.bind(op, TOKEN)


def _layout(lw: _Lowering, a: object, b: object) -> tuple[tuple[str, object], ...]:
    """`transpose_a` / `transpose_b` of an mma whose operand is square, where the shapes cannot tell
    emit-cuda which way it lies in memory: the dot reads a as M x K and b as K x N, so an operand
    seen through a transpose (K in Q K^T, loaded as keys x D; a column-major load) lies the other way.
    A non-square operand's .tir type, its layout in memory, already says so."""
    return layout_attrs(*((lw.type_of(v.ref).shape, v.flip) if isinstance(v, Tile) else None for v in (a, b)))


def layout_attrs(a, b) -> tuple[tuple[str, object], ...]:
    """The rule of `_layout` for operands given as (shape, flip), or None for a non-tile."""
    attrs = []
    for key, val, default in (("transpose_a", a, None), ("transpose_b", b, False)):
        if val is None:
            continue
        shape, flip = val
        if len(shape) == 2 and shape[0] == shape[1] and (flip or default is not None):
            attrs.append((key, flip))
    return tuple(attrs)


def dot(lw: _Lowering, op: MOp) -> None:
    """``tt.dot`` / ``ttng.warp_group_dot a, b, c``: an mma; a constant accumulator (zero) is dropped."""
    vals = [lw.read(v) for v in lw.operands(op)]
    ins, outs = lw.signature(op)
    if len(vals) < 3 or not outs:
        raise lw.src.error(f"'{op.name}' needs operands a, b, c and a result type", op.head)
    _check_dot_shapes(lw, op, vals[0], vals[1], outs[0].shape)
    lw.bind(op, lw.node("mma", op, vals[:3], lw.tile_type(outs[0], op), attrs=_layout(lw, vals[0], vals[1])))


def _check_dot_shapes(lw: _Lowering, op: MOp, a: object, b: object, result: tuple[int, ...]) -> None:
    """A dot makes an M x N tile of an M x K and a K x N operand (each as the dot sees it)."""
    if len(result) != 2:
        raise lw.src.error(f"'{op.name}' must make a 2-D tile (M x N), not one of shape "
                           f"{'x'.join(map(str, result)) or 'scalar'}", op.head)
    seen = [(lw.type_of(v.ref).shape[::-1] if v.flip else lw.type_of(v.ref).shape) if isinstance(v, Tile) else None
            for v in (a, b)]
    if seen[0] is not None and len(seen[0]) == 2 and seen[0][0] != result[0]:
        raise lw.src.error(f"'{op.name}' makes {result[0]} rows from an operand a of {seen[0][0]} rows", op.head)
    if seen[1] is not None and len(seen[1]) == 2 and seen[1][1] != result[1]:
        raise lw.src.error(f"'{op.name}' makes {result[1]} columns from an operand b of {seen[1][1]} columns",
                           op.head)


def dot_wait(lw: _Lowering, op: MOp) -> None:
    """``ttng.warp_group_dot_wait %a, %b {pendings = 0}``: its results are its operands, waited for."""
    vals = [v for v in lw.operands(op) if not isinstance(v, Token)]
    for name, val in zip(op.results, vals):
        lw.env[name] = val


def tc_gen5_mma(lw: _Lowering, op: MOp) -> None:
    """``ttng.tc_gen5_mma a, b, d[tok], useD, pred``: d (tensor memory) = a*b (+ d when useD)."""
    vals = lw.operands(op)
    memories = [v for v in vals if isinstance(v, (Tile, Buf))]
    flags = [v for v in vals if isinstance(v, (Const, Scalar))]
    if len(memories) < 3 or not isinstance(memories[2], Buf):
        generic(lw, op)
        return
    a, b, d = lw.read(memories[0]), lw.read(memories[1]), memories[2]
    use_d = flags[0] if flags else Const(True)
    acc = Const(0.0) if use_d == Const(False) else lw.read(d)  # d is overwritten: as if it held 0
    name, mtype, _ = lw.buffers[d.index]
    ssa = op.results[0] if op.results else name
    lw.content[d.index] = lw.node("mma", op, [a, b, acc], lw.tile_type(mtype, op, "tmem"), ssa, _layout(lw, a, b))
    lw.bind(op, TOKEN)


def alloc(lw: _Lowering, op: MOp) -> None:
    """``ttg.local_alloc`` / ``ttng.tmem_alloc``: an immutable allocation of a source is that tile in
    memory; a mutable one is a buffer (holding the source, if any) whose content is tracked."""
    vals = lw.operands(op)
    _, outs = lw.signature(op)
    mtype = outs[0] if outs else None
    if mtype is None or mtype.kind != "memdesc":
        raise lw.src.error(f"'{op.name}' must have a !ttg.memdesc result type", op.head)
    content = lw.move(vals[0], mtype.space, op) if vals else None
    if vals and not mtype.mutable:
        lw.bind(op, content, TOKEN)
        return
    lw.buffers.append((op.results[0] if op.results else op.name, mtype, lw.span(op)))
    lw.content[len(lw.buffers) - 1] = content
    lw.bind(op, Buf(len(lw.buffers) - 1), TOKEN)


def memory_store(lw: _Lowering, op: MOp) -> None:
    """``ttg.local_store src, buf`` / ``ttng.tmem_store src, buf[tok], pred``: buf now holds src."""
    vals = lw.operands(op)
    if len(vals) < 2 or not isinstance(vals[1], Buf):
        generic(lw, op)
        return
    _, mtype, _ = lw.buffers[vals[1].index]
    lw.content[vals[1].index] = lw.move(vals[0], mtype.space, op)
    lw.bind(op, TOKEN)


def memory_load(lw: _Lowering, op: MOp) -> None:
    """``ttg.local_load`` / ``ttng.tmem_load``: the consumer reads the tile where it lives; a register
    tile stored to shared memory and loaded back (one warp partition handing a row max to another) is
    the register tile itself."""
    vals = lw.operands(op)
    val = lw.read(vals[0]) if vals else SCALAR
    if op.name == "ttg.local_load" and isinstance(val, Tile) and val.ref.kind == "node":
        node = lw.nodes[val.ref.index]
        source = node.args[0] if node.kind == "move" and node.args else None
        if isinstance(source, Tile) and lw.type_of(source.ref).space == "reg":
            val = source
    lw.bind(op, val, TOKEN)


def reduce(lw: _Lowering, op: MOp) -> None:
    """``tt.reduce`` over the last axis with a max combiner is a rowmax, with an add one a rowsum
    (a rank-2 tile to one value per row, the legacy ops); any other axis, a min combiner, or a
    reduction to a scalar is ``reduce_max`` / ``reduce_sum`` / ``reduce_min {axis = A}``. A scalar
    result is written as a one-element tile (``f32[1]``)."""
    vals = lw.operands(op)
    ins, outs = lw.signature(op)
    combiner = _combiner(op)
    axis = int_attr(op, "axis")
    if not any(isinstance(v, Tile) for v in vals):
        lw.bind(op, SCALAR)
        return
    if combiner is None or len(vals) != 1 or not ins or not outs or axis is None:
        why = "combiner is not a single max, min or add" if combiner is None else \
            "it reduces several tensors" if len(vals) != 1 else "its axis or types cannot be read"
        generic(lw, op, why)
        return
    rank = len(ins[0].shape)
    if combiner in ("max", "add") and rank == 2 and axis == rank - 1:
        lw.bind(op, lw.node({"max": "rowmax", "add": "rowsum"}[combiner], op, vals, lw.tile_type(outs[0], op)))
        return
    lw.bind(op, lw.node("reduce", op, vals, _result_tile(lw, outs[0], op), attrs=(("axis", axis),),
                        opcode=f"reduce_{'sum' if combiner == 'add' else combiner}"))


def scan(lw: _Lowering, op: MOp) -> None:
    """``tt.scan`` with an add combiner, forward: ``cumsum {axis = A}``; other scans are generic."""
    vals = lw.operands(op)
    ins, outs = lw.signature(op)
    axis = int_attr(op, "axis")
    reverse = any(t.is_("reverse") and i + 2 < len(op.tokens) and op.tokens[i + 2].is_("true")
                  for i, t in enumerate(op.tokens))
    if not any(isinstance(v, Tile) for v in vals):
        lw.bind(op, SCALAR)
    elif _combiner(op, "tt.scan.return") == "add" and len(vals) == 1 and outs and axis is not None and not reverse:
        lw.bind(op, lw.node("scan", op, vals, lw.tile_type(outs[0], op), attrs=(("axis", axis),), opcode="cumsum"))
    else:
        generic(lw, op, "a scan other than a forward sum")


def _result_tile(lw: _Lowering, mtype, op: MOp) -> TensorType:
    """The tile type of a result, a scalar written as a one-element tile."""
    if mtype.kind == "scalar":
        from .types import DTYPES
        if mtype.elem not in DTYPES:
            raise lw.src.error(f"'{op.name}' makes a '{mtype.elem}', which the .tir format has no dtype for", op.head)
        return TensorType(DTYPES[mtype.elem], (1,), "reg")
    return lw.tile_type(mtype, op)


def _combiner(op: MOp, ret_name: str = "tt.reduce.return") -> str | None:
    if len(op.regions) != 1 or len(op.regions[0]) != 1:
        return None
    block = op.regions[0][0]
    args = {name for name, _ in block.args}
    ret = next((o for o in block.ops if o.name == ret_name), None)
    if ret is None or len(block.ops) != 2 or len(args) != 2:
        return None
    comb = block.ops[0]
    if {n for n, _ in comb.operands()} != args or [n for n, _ in ret.operands()] != list(comb.results):
        return None
    return ("max" if comb.name in MAX_COMBINERS else "add" if comb.name in ADD_COMBINERS else
            "min" if comb.name in MIN_COMBINERS else None)


def int_attr(op: MOp, key: str) -> int | None:
    """The integer value of attribute `key = N` in the op's text, or None (absent or not an integer)."""
    toks = op.tokens
    for i in range(len(toks) - 2):
        if toks[i].is_(key) and toks[i + 1].is_("="):
            try:
                return int(toks[i + 2].text)
            except ValueError:
                return None
    return None


def causal_mask(lw: _Lowering, op: MOp) -> None:
    """A select of loops.Merge's causal mask: `causal_mask x` of the tile it keeps."""
    vals = lw.operands(op)
    lw.bind(op, lw.node("causal_mask", op, [vals[1]], lw.type_of(vals[1].ref)))


def yield_(lw: _Lowering, op: MOp) -> None:
    lw.yielded = lw.operands(op)


def generic(lw: _Lowering, op: MOp, why: str | None = None) -> None:
    """An op the importer does not know (or cannot express): one `generic` node with its tile operands."""
    vals = [lw.read(v) for v in lw.operands(op)]
    try:
        ins, outs = lw.signature(op)
    except InputError:
        ins, outs = [], None
    rtypes = outs if outs is not None else ins[-1:] * len(op.results)
    tiles = [t.tile() for t in rtypes if t.is_tile]
    tile_type = next((t for t in tiles if t is not None), None)
    opcode = opcode_token(op.name)
    if not any(isinstance(v, Tile) for v in vals) and tile_type is None:
        lw.note(op, f"unknown TTGIR op '{op.name}' on scalars only: dropped", unknown=True)
        lw.bind(op, SCALAR)
        return
    what = f"'{op.name}' ({why})" if why else f"unknown TTGIR op '{op.name}'"
    lw.note(op, f"{what}: imported as generic op '{opcode}'", unknown=True,
            hint=f"describe '{opcode}' in the machine file's ops, or give it {{cycles = N, unit = NAME}} in the .tir")
    tile = lw.node("generic", op, vals, tile_type, op.results[0] if op.results and tile_type else None)
    for name, rtype in zip(op.results, rtypes + [None] * len(op.results)):
        lw.env[name] = tile if rtype is not None and rtype.is_tile else SCALAR


def nested(lw: _Lowering, op: MOp) -> None:
    """A loop or branch inside the loop body cannot be expressed as one tile op: it becomes one
    generic op that reads every tile its regions use from outside and makes the tiles it returns
    (``%r = scf.if %c -> (tensor<...>)``). Before the loop (an earlier loop, say), its effect on
    buffers is unknown: they no longer hold a known constant."""
    if not lw.in_loop:
        for b in lw.content:
            lw.content[b] = SCALAR
        lw.bind(op, SCALAR)
        return
    arrow = last_top_level(op.tokens, "->")
    try:
        rtypes = lw.types.read_list(op.tokens, arrow + 1)[0] if arrow is not None else []
    except InputError:
        rtypes = []
    vals = [lw.read(lw.value(name, tok)) for name, tok in _captured(lw, op)]
    tile_type = next((t.tile() for t in rtypes if t.is_tile and t.tile() is not None), None)
    what = f"'{op.name}' (control flow inside the loop body is not imported)"
    if not any(isinstance(v, Tile) for v in vals) and tile_type is None:  # index arithmetic: folded away
        lw.bind(op, SCALAR)
        return
    opcode = opcode_token(op.name)
    lw.note(op, f"{what}: imported as generic op '{opcode}'", unknown=True,
            hint=f"describe '{opcode}' in the machine file's ops, or give it {{cycles = N, unit = NAME}} in the .tir")
    tile = lw.node("generic", op, vals, tile_type, op.results[0] if op.results and tile_type else None)
    for name, rtype in zip(op.results, rtypes + [None] * len(op.results)):
        lw.env[name] = tile if rtype is not None and rtype.is_tile else SCALAR


def _captured(lw: _Lowering, op: MOp) -> list[tuple[str, object]]:
    """The SSA values `op` and the ops in its regions use that are defined outside it, once each."""
    inner, uses = set(), {}
    todo = [op]
    while todo:
        o = todo.pop()
        inner.update(o.results)
        for name, tok in o.operands():
            uses.setdefault(name, tok)
        for region in o.regions:
            for block in region:
                inner.update(name for name, _ in block.args)
                todo.extend(block.ops)
    return [(n, t) for n, t in uses.items() if n not in inner and n.split("#")[0] not in inner
            and (n in lw.env or n + "#0" in lw.env)]


HANDLERS = {
    **{name: view for name in VIEWS}, **{name: scalar for name in SCALAR_OPS},
    **{name: no_op for name in NO_OPS}, **{name: load for name in LOADS}, **{name: store for name in STORES},
    **{name: token for name in ORDERING_OPS}, **{name: async_copy for name in ASYNC_COPIES},
    "arith.constant": constant,
    "tt.dot": dot, "ttng.warp_group_dot": dot, "ttng.warp_group_dot_wait": dot_wait,
    "ttng.tc_gen5_mma": tc_gen5_mma,
    "ttg.local_alloc": alloc, "ttng.tmem_alloc": alloc,
    "ttg.local_store": memory_store, "ttng.tmem_store": memory_store,
    "ttg.local_load": memory_load, "ttng.tmem_load": memory_load,
    "tt.reduce": reduce, "tt.scan": scan, "scf.yield": yield_,
    "scf.for": nested, "scf.if": nested, "scf.while": nested,
}


# -- the loop -------------------------------------------------------------------------------------

def func_name(func: MOp) -> str:
    sym = next((t.text for t in func.tokens if t.kind == "symbol"), "@kernel")[1:].strip('"')
    return opcode_token(sym) if sym else "kernel"


def _bind_arguments(lw: _Lowering, func: MOp) -> None:
    """Function arguments (``%x: type`` in the signature): tensors are tiles, the rest scalars."""
    toks = func.tokens
    for i, tok in enumerate(toks[:-1]):
        if tok.kind == "ssa" and toks[i + 1].is_(":"):
            mtype, _ = lw.types.read(toks, i + 2)
            if mtype.is_tile:
                arg = MOp("arg", (tok.text[1:],), (), (), tok)  # stands in for the op that made it
                lw.env[tok.text[1:]] = lw.node("arg", arg, [], lw.tile_type_at(mtype, lw.src.span(tok)))
            else:
                lw.env[tok.text[1:]] = SCALAR


def _loop_header(lw: _Lowering, loop: MOp):
    """(induction variable, [(iter_arg, init name, token)], [result MType])."""
    toks = loop.tokens
    iv = toks[0].text[1:] if toks and toks[0].kind == "ssa" else None
    pairs, i = [], next((k for k, t in enumerate(toks) if t.is_("iter_args")), None)
    if i is not None:
        i += 2
        while i + 2 < len(toks) and toks[i].kind == "ssa" and toks[i + 1].is_("="):
            pairs.append((toks[i].text[1:], toks[i + 2].text[1:], toks[i + 2]))
            i += 4 if i + 3 < len(toks) and toks[i + 3].is_(",") else 3
    arrow = last_top_level(toks, "->")
    types = lw.types.read_list(toks, arrow + 1)[0] if arrow is not None else []
    if len(types) != len(pairs):
        raise lw.src.error(f"cannot read the loop's {len(pairs)} iter_args types", loop.head)
    return iv, pairs, types


def _enter(lw: _Lowering, op: MOp, inner: MOp):
    """Step into `op`, a loop or branch around the chosen loop: its induction variable and scalar
    iter_args are scalars, a tile it carries is a value from before the chosen loop (an input), and
    the ops of the block that holds `inner` come next."""
    if op.name == "scf.for":
        iv, pairs, types = _loop_header(lw, op)
        if iv:
            lw.env[iv] = SCALAR
        for (arg, _, tok), mtype in zip(pairs, types):
            if mtype.is_tile:
                stand_in = MOp("arg", (arg,), (), (), tok)
                lw.env[arg] = lw.node("arg", stand_in, [], lw.tile_type_at(mtype, lw.src.span(tok)))
            else:
                lw.env[arg] = TOKEN if mtype.kind == "token" else SCALAR
    for region in op.regions:
        for block in region:
            if any(o is inner for o in block.ops):
                for name, _ in block.args:  # scf.while's "after" block, say: scalars
                    lw.env.setdefault(name, SCALAR)
                return block.ops
    raise AssertionError("the path to a loop goes through the blocks that hold it")


def lower_loop(module: Module, func: MOp, path: tuple[MOp, ...], scalar_args: frozenset = frozenset(),
               merge=None) -> Lowered:
    """Lower `func` up to and through the loop that ends `path` (the loops and branches around it
    first); iter_args in `scalar_args` are treated as scalars. With `merge` (loops.Merge, whose last
    loop ends `path`), the loops merged into it: its carries start from the first loop's inits and
    its masks become `causal_mask` nodes."""
    lw = _Lowering(module)
    _bind_arguments(lw, func)
    ops, loop = func.body(), path[-1]
    for outer, inner in zip(path, path[1:] + (None,)):
        for op in ops:
            if op is outer:
                break
            lw.lower(op)
        if inner is not None:
            ops = _enter(lw, outer, inner)
    iv, pairs, types = _loop_header(lw, loop)
    if iv:
        lw.env[iv] = SCALAR
    inits = [lw.value(init, tok) for (_, init, tok) in
             (pairs if merge is None else [(a, i, t) for (a, _, t), i in zip(pairs, merge.inits)])]
    for k, ((arg, _, tok), mtype, init) in enumerate(zip(pairs, types, inits)):
        if isinstance(init, Buf):
            lw.env[arg] = init
        elif mtype.is_tile and k not in scalar_args:
            name = arg if merge is None else merge.names[k]
            lw.carries.append(Carry(name, lw.tile_type(mtype, loop), init, lw.src.span(tok), k))
            lw.env[arg] = Tile(Ref("carry", len(lw.carries) - 1))
        else:
            lw.env[arg] = TOKEN if mtype.kind == "token" else SCALAR
    for b in range(len(lw.buffers)):
        lw.at_entry[b], lw.content[b] = lw.content.get(b), Entry(b)
    lw.in_loop = True
    for op in loop.body():
        if merge is not None and merge.is_mask(op):
            causal_mask(lw, op)
        else:
            lw.lower(op)
    if lw.yielded is None and pairs:
        raise lw.src.error(f"the loop has {len(pairs)} iter_args but no scf.yield: what it carries to the next "
                           "iteration is not said", loop.head, hint="the body must end with 'scf.yield' of one "
                           "value per iter_arg")
    yielded = lw.yielded or []
    if lw.yielded is not None and len(yielded) != len(pairs):
        raise lw.src.error(f"the loop has {len(pairs)} iter_args but its scf.yield gives {len(yielded)} "
                           f"value{'s' if len(yielded) != 1 else ''}", loop.head)
    yields = [(yielded[c.arg] if c.arg < len(yielded) else SCALAR) if c.arg is not None else lw.content[c.buf]
              for c in lw.carries]
    after = list(ops)[next(i for i, o in enumerate(ops) if o is loop) + 1:]
    carries = _output_dtypes(lw, loop, after)
    lowered = Lowered(func_name(func), tuple(lw.nodes), tuple(carries), tuple(yields), tuple(lw.notes),
                      lw.span(loop), tuple(loc_names(loop.loc, lw.locs)), tuple(arg for arg, _, _ in pairs))
    sig = epilogue.signature(func, lw.types, lw.locs)  # (after the Lowered is taken: the walk lowers the ops after the loop)
    return epilogue.with_epilogue(lowered, lambda: epilogue.lower_after(lw, func, loop, after, sig, yields), sig)


CONVERSIONS = {"arith.truncf", "tt.fp_to_fp"}


def _output_dtypes(lw: _Lowering, loop: MOp, after) -> list[Carry]:
    """Each carry with the dtype its final value is converted to after the loop, if any: the
    accumulator Triton truncates to f16 before its store is written out in f16 (`{output = f16}`),
    also after arithmetic on it (attention's O / l, which follows O: of the carries an op reads, the
    one of highest rank). A value is followed through the ops after the loop by data flow from the
    loop's results (and from a buffer carry's memory)."""
    seed: dict[str, int] = {}  # SSA name -> the carry it derives from
    for k, c in enumerate(lw.carries):
        if c.arg is not None and c.arg < len(loop.results):
            seed[loop.results[c.arg]] = k
        elif c.buf is not None:
            for name in [lw.buffers[c.buf][0]] + lw.views.get(c.buf, []):
                seed[name] = k
    found: dict[int, str] = {}
    for op in after:
        ks = [seed[key] for name, _ in op.operands() for key in (name, name + "#0") if key in seed]
        if not ks:
            continue
        k = max(ks, key=lambda j: len(lw.carries[j].type.shape))  # O / l follows O, the whole tile
        for r in op.results:
            seed.setdefault(r, k)
        if op.name in CONVERSIONS and k not in found:
            try:
                _, outs = lw.signature(op)
            except InputError:
                continue
            tt = outs[0].tile() if outs else None
            if (tt is not None and tt.dtype in ("f16", "bf16", "f32") and tt.dtype != lw.carries[k].type.dtype
                    and tt.shape == lw.carries[k].type.shape):  # P computed from m is not m's output
                found[k] = tt.dtype
    return [replace(c, output=found.get(k)) for k, c in enumerate(lw.carries)]


def show_columns(lowered: Lowered) -> Lowered:
    """A rank-1 tile of the loop that every reader sees through ``tt.expand_dims {axis = 0}`` (a bias
    row, added to every row) is typed ``T[1,N]``: a rank-1 operand means one value per row. A tile
    read both ways keeps its rank-1 type (the importer has one type per value)."""
    uses: dict[int, set[bool]] = {}
    for n in lowered.nodes:
        if n.in_loop:
            for a in n.args:
                if isinstance(a, Tile) and a.ref.kind == "node":
                    uses.setdefault(a.ref.index, set()).add(a.column)
    for y in lowered.yields:
        if isinstance(y, Tile) and y.ref.kind == "node":
            uses.setdefault(y.ref.index, set()).add(False)
    nodes = list(lowered.nodes)
    for i, seen in uses.items():
        n = nodes[i]
        if seen == {True} and n.in_loop and n.type is not None and len(n.type.shape) == 1:
            nodes[i] = replace(n, type=replace(n.type, shape=(1,) + n.type.shape))
    return replace(lowered, nodes=tuple(nodes))
