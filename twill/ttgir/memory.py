"""Loads, stores, async copies, ordering ops and buffers (shared and tensor memory) and their content."""
from __future__ import annotations

from dataclasses import replace

from ..ir import UNBATCHED, TensorType
from .addresses import REMAINDERS, Unexpressed
from .generic import generic
from .parser import MOp
from .state import Lowering
from .types import last_top_level
from .values import SCALAR, TOKEN, Buf, Const, Tile

POINTER_LOADS = {"tt.load", "ttg.async_copy_global_to_local"}  # loads through a tensor of pointers


def load(lw: Lowering, op: MOp) -> None:
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
    edge_mask(lw, op)
    if not mtype.shape and not lw.in_loop and _per_batch(lw, op):  # a head's ALiBi slope: an input f32[1]
        lw.bind(op, lw.node("load", op, vals, TensorType(_scalar_dtype(lw, mtype, op), (1,), "reg")))
        return
    if not mtype.shape:  # one element through a scalar pointer: a scalar, whatever it scales
        lw.note(op, f"'{op.name}' of one {mtype.elem} in the loop: a scalar, folded away like index arithmetic "
                    "(a tile op that reads it is imported without it)", unknown=True)
        lw.bind(op, SCALAR)
        return
    tile = _load_node(lw, op, vals, lw.tile_type(mtype, op, "smem"), ins[0] if ins else None)
    lw.bind(op, _masked_in_registers(lw, op, tile))


def _per_batch(lw: Lowering, op: MOp) -> bool:
    """Whether a scalar load before the loop reads one value per batch entry: ``P[pid_y]`` or
    ``P[pid_y % N]`` of a pointer argument P (Triton's ``tl.load(SLOPES + off_bh % H)``), the batch
    the grid's second axis (emit-cuda's batch entries; the binding broadcasts [H] over [B, H])."""
    names = op.operands()
    a = lw.addresses.of(names[0][0]) if lw.addresses is not None and names else None
    atom = a.atom if a is not None and a.base is not None else None
    if atom is None:
        return False
    if atom == "pid_y":
        return True
    d = lw.addresses.defs.get(atom[1:]) if atom.startswith("%") else None
    if d is None or d.name not in REMAINDERS or len(d.operands()) != 2:
        return False
    x, n = (lw.addresses.of(name) for name, _ in d.operands())
    return (x is not None and n is not None and not x.coefs and x.const == ((("pid_y",), 1),)
            and not n.coefs and n.base is None)


def _scalar_dtype(lw: Lowering, mtype, op: MOp) -> str:
    from .types import DTYPES
    if mtype.elem not in DTYPES:
        raise lw.src.error(f"'{op.name}' loads a '{mtype.elem}', which the .tir format has no dtype for", op.head)
    return DTYPES[mtype.elem]


def _load_node(lw: Lowering, op: MOp, vals, tt: TensorType, source) -> Tile:
    """The `load` node of a tile of type `tt` read from `source` (the MType of its addresses), with
    the attributes of how it walks its argument (addresses.py: a column stride, a row per D iterations)."""
    attrs = _view(lw, op)
    if (fill := loop_tail_fill(lw, op)) is not None:  # other=-inf past the loop's extent
        attrs = tuple(attrs) + (("fill", fill),)
    if lw.batch is not None and lw.batch.unbatched(op):  # the same tensor for every batch entry (unbatched.py)
        attrs = tuple(attrs) + (("batch", UNBATCHED),)
    if lw.transposed and len(tt.shape) == 2 and _base(lw, op) in lw.transposed:
        # a column-sum kernel's tile (colsum.py): the tile as the kernel reads it, its argument the transpose
        attrs = tuple(attrs) + (("transposed", True),)
    if source is not None and source.kind == "tensor" and source.elem == "ptr" and len(tt.shape) == 2 \
            and (how := _column_major(lw, op, source)):
        # Coalescing ordered the addresses dim 0 first: the tile is stored column-major in memory.
        # The .tir type is its layout there (as a TMA box would be), and this view of it is transposed.
        # Where the kernel's own addresses fix that (a unit stride it does not take as an argument),
        # {column_major = true}: it reads that memory whatever view of it the caller passes, so the
        # binding also takes the transposed view a caller holds (`w.t()` of an [N, K] weight).
        if how == "addresses":
            attrs = tuple(attrs) + (("column_major", True),)
        return replace(lw.node("load", op, vals, replace(tt, shape=tt.shape[::-1]), attrs=attrs), flip=True)
    return lw.node("load", op, vals, tt, attrs=attrs)


def _base(lw: Lowering, op: MOp) -> str | None:
    """The pointer argument a load's addresses start from (addresses.py), or None."""
    names = op.operands()
    a = lw.addresses.of(names[0][0]) if lw.addresses is not None and names else None
    return a.base if a is not None else None


def _masked_in_registers(lw: Lowering, op: MOp, tile: Tile) -> Tile:
    """An f32 tile loaded with `{fill = -inf}` is read by its rowmax and exp2 straight from shared memory,
    where TMA's zero fill stands past the loop's extent and emit-cuda masks only registers: its readers
    read it through `tail_mask {fill = -inf}` (the Triton tutorial's fused softmax of an fp32 row, n_cols
    not a multiple of the tile). A narrower tile is converted to f32 first, and the conversion in
    registers is what emit-cuda masks (emit/ragged.py)."""
    node = lw.nodes[tile.ref.index]
    fill = dict(node.attrs).get("fill")
    if fill not in (float("-inf"), float("inf")) or node.type.dtype != "f32" or len(node.type.shape) != 2:
        return tile
    return lw.node("tail_mask", op, [tile], replace(node.type, space="reg"), ssa=None, attrs=(("fill", fill),),
                   opcode="tail_mask")


def _column_major(lw: Lowering, op: MOp, source) -> str | None:
    return column_major(lw.addresses, op, source)


def column_major(addresses, op: MOp, source) -> str | None:
    """Whether a 2-D load through pointers reads a tile stored column-major ("addresses" or
    "order", else None): its addresses' coefficient of the row index is 1 and the column's is not
    (addresses.py), else (neither is 1: strides given at launch) the coalesced layout's order, dim 0
    first. The order alone misleads where Triton cannot prove the columns contiguous (`offs_n % N`, a
    stride not specialized to 1). Such a load's graph value is the TTGIR tile transposed (`_load_node`),
    which extents.py reads too: dimension d of the TTGIR tile is dimension 1 - d of the graph's."""
    from .addresses import poly_int
    names = op.operands()
    a = addresses.of(names[0][0]) if addresses is not None and names else None
    if a is not None and a.base is not None and len(a.coefs) == 2:
        rows, cols = (poly_int(c) for c in a.coefs)
        if cols == 1 and rows != 1:
            return None
        if rows == 1 and cols != 1:
            return "addresses"
    return "order" if source.order == (0, 1) else None


def pointer_source(types, op: MOp):
    """The tensor-of-pointers type a `tt.load` or `ttg.async_copy_global_to_local` reads (what `load` and
    `async_copy` hand `_load_node` as its source), or None."""
    if op.name == "tt.load":
        ins, _ = types.signature(op.tokens)
        source = ins[0] if ins else None
    else:
        colon = last_top_level(op.tokens, ":")
        source = types.read(op.tokens, colon + 1)[0] if colon is not None else None
    ok = source is not None and source.kind == "tensor" and source.elem == "ptr" and len(source.shape) == 2
    return source if ok else None


def _view(lw: Lowering, op: MOp) -> tuple:
    """The load's attributes of how it walks its argument (addresses.py); a located error where the
    graph cannot say it."""
    if lw.addresses is None or op.name not in POINTER_LOADS:
        return ()
    try:
        return lw.addresses.view(op)
    except Unexpressed as e:
        raise lw.src.error(f"'{op.name}': {e}", op.head, hint="a load's row may advance once per D iterations "
                           "((iv + c) // (D * step), the loop from 0; docs/ttgir-import.md, section 3)")


def async_copy(lw: Lowering, op: MOp) -> None:
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
    edge_mask(lw, op)
    _, mtype, _ = lw.buffers[buf.index]
    lw.content[buf.index] = _load_node(lw, op, [v for v in vals if not isinstance(v, Buf)],
                                       lw.tile_type(mtype, op, "smem"), source)
    lw.bind(op, TOKEN)


def _mask_and_other(op: MOp) -> tuple[str | None, str | None]:
    """The SSA names of a load's or store's mask and `other`: ``tt.load %p, %mask, %other``,
    ``tt.store %p, %v, %mask``, ``ttg.async_copy_global_to_local %p, %buf mask %m other %o``."""
    toks, names = op.tokens, op.operands()
    if op.name == "ttg.async_copy_global_to_local":
        after = {toks[i - 1].text: toks[i].text[1:] for i in range(1, len(toks)) if toks[i].kind == "ssa"}
        return after.get("mask"), after.get("other")
    if op.name == "tt.load":
        return (names[1][0] if len(names) > 1 else None), (names[2][0] if len(names) > 2 else None)
    if op.name == "tt.store":
        return (names[2][0] if len(names) > 2 else None), None
    return None, None


def edge_mask(lw: Lowering, op: MOp, after_loop: bool = False) -> None:
    """A load's or store's mask is dropped where it only guards the edges of the tensor (bounds.py:
    TMA fills a load past the end with zeros and drops a store's elements there); any other mask,
    or a load's `other` that is not 0, is an error at the op: dropped, it would change the result."""
    gathered(lw, op, lw.in_loop and not after_loop)
    if not after_loop:
        transposed_store(lw, op)
    if lw.masks is None:
        return
    mask, other = _mask_and_other(op)
    if mask is not None and not lw.masks.edge_only(mask):
        raise _refused(lw.src.error(
            f"'{op.name}' is masked by '%{mask}', which is not a bound of the tensor's edge: the emitted "
            "kernel reads and writes whole tiles, guarded at the tensor's end only", op.head,
            hint="a load's or store's mask is imported where each comparison is `index < BOUND` with BOUND "
                 "given at launch (`offs_k < K - k * BLOCK_K`, `rows < M`) (docs/ttgir-import.md, section 3)"))
    if mask is not None and other is not None:
        val = lw.env.get(other, lw.env.get(other + "#0"))
        if not (isinstance(val, Const) and isinstance(val.value, (int, float)) and val.value == 0) \
                and loop_tail_fill(lw, op) is None:
            raise _refused(lw.src.error(
                f"'{op.name}' fills the masked elements with '%{other}', not 0: the emitted kernel's TMA "
                "loads fill the elements past the tensor's end with zeros", op.head,
                hint="load with other=0 and mask the value after the load (`tl.where(cols < N, x, -inf)` in the "
                     "loop is the partial last tile's mask)"))


def loop_tail_fill(lw: Lowering, op: MOp) -> float | None:
    """-inf (+inf) where a load in the chosen loop fills with -inf (`other=float('-inf')`; +inf: tl.argmin's) the elements its
    mask drops and that mask is the loop's partial last tile alone (`off + cols < N`, bounds.loop_tail):
    the load's `{fill = -inf}`; any other constant but 0 likewise (`other=1.0` before tl.cumprod: `{fill = 1}`,
    session 42), which emit/ragged.py then finds read by nothing but elementwise ops, prefix scans and clipped
    stores, or takes whole tiles only. Whole tiles never read the fill; emit-cuda's kernel fills with zeros,
    so it takes no partial last tile of such a loop (emit/ragged.py), rather than a maximum or a sum of
    exponentials over zeros. Else None (any other `other`, or a mask of anything but the loop's tail)."""
    if op.name not in ("tt.load", "ttg.async_copy_global_to_local") or not lw.in_loop or lw.masks is None:
        return None
    mask, other = _mask_and_other(op)
    val = lw.env.get(other, lw.env.get(other + "#0")) if other is not None else None
    if mask is None or not (isinstance(val, Const) and isinstance(val.value, (int, float))
                            and not isinstance(val.value, bool) and val.value != 0):
        return None
    return float(val.value) if lw.masks.loop_tail(mask, lw.loop_iv) is not None else None


def gathered(lw: Lowering, op: MOp, in_loop: bool) -> None:
    """A load's or store's addresses or mask computed from a value loaded from memory (a paged KV
    cache's block table, varlen attention's cu_seqlens start, an expert's row index) are an error at
    the op: the emitted kernel places every tile by the program ids and the loop's step alone, so
    the graph would read and write other memory than the kernel (the import used to fold such a
    scalar away with a warning)."""
    if lw.addresses is None:
        return
    names = [n for n, _ in op.operands()]
    mask, _ = _mask_and_other(op)
    for name in names[:1] + ([mask] if mask else []):
        src = lw.addresses.loaded_from(name, op.head.line)
        if src is None or src is op:
            continue
        what = "addresses" if name == names[0] else "mask"
        raise _refused(lw.src.error(
            f"'{op.name}' {'reads' if op.name != 'tt.store' else 'writes'} {what} computed from a value loaded "
            f"from memory (the '{src.name}' at line {src.head.line}): an indirect, data-dependent "
            f"{'address' if what == 'addresses' else 'bound'} (a block table's page, a cu_seqlens start) is "
            "not imported", op.head,
            hint="the emitted kernel places each tile by its program ids and the loop's step only; pass the "
                 "offsets as launch arguments or one launch per sequence (docs/ttgir-import.md, section 3); a loop "
                 "that runs to a length loaded per batch (key padding, varlen) is not built: section 9 says what it "
                 "needs"))


    # in the loop any division; before it and after it a division with no remainder beside it (GQA's
    # packed heads, `r // G` and `r % G` of the query tile, read and stored alike, permute rows the
    # graph computes apart; `r // 2` alone reads or writes one row for two)
    div = None
    if names and in_loop:
        div = lw.addresses.divided_index(names[0], op.head.line)
    elif names and op.name in ("tt.load", "tt.store", "ttg.async_copy_global_to_local"):
        div = lw.addresses.unpaired_division(names[0], op.head.line)
    if div is not None:
        raise _refused(lw.src.error(
            f"'{op.name}' {'reads' if op.name != 'tt.store' else 'writes'} addresses computed with an integer division "
            f"of the tile's indices (the '{div.name}' at line {div.head.line}: `offs // W`, as an implicit-GEMM "
            "convolution's pixel rows" + ("" if in_loop else ", with no remainder `offs % W` beside it: several "
                                          "rows of the tile on one row of memory") + "): no affine function of "
            "the element's position, which is how the graph places a tile", op.head,
            hint="the emitted kernel reads tile (i, j) of a row-major tensor at row i, column j; gather the rows "
                 "first (im2col) or index them with one stride per dimension"))


TRANSPOSED = ("writes its tile transposed: the address steps by 1 along the tile's rows and by a stride along its "
              "columns (`C + offs_n[None, :] * stride + offs_m[:, None]`, C^T)")


def stores_transposed(lw: Lowering, op: MOp) -> bool:
    """Whether a ``tt.store`` of a 2-D tile writes it transposed: its addresses step by 1 along the
    tile's rows and by anything else along its columns (``C + offs_n[None, :] * stride_cn +
    offs_m[:, None]``: C is [N, M] row-major and holds the tile's transpose). Loads read such a tile
    as `{column_major = true}` (`_column_major`); a carry stored so after the loop is the carry's
    `{column_major = true}` output (attach._outputs), any other such store an error (`transposed_store`)."""
    from .addresses import poly_int
    names = op.operands()
    if op.name != "tt.store" or lw.addresses is None or not names:
        return False
    a = lw.addresses.of(names[0][0])
    if a is None or a.base is None or len(a.coefs) != 2:
        return False
    rows, cols = (poly_int(c) for c in a.coefs)
    return bool(rows == 1 and cols != 1 and a.coefs[1])


def transposed_store(lw: Lowering, op: MOp) -> None:
    """A store in the loop that writes its tile transposed (`stores_transposed`) is an error at the
    store: the graph's store op and the emitted kernel write such a tile row-major, and the binding
    would take C [N, M] for [M, N] (silently so where M == N)."""
    if stores_transposed(lw, op):
        raise lw.src.error(f"'{op.name}' {TRANSPOSED}, and the emitted kernel stores a tile in the loop row-major",
                           op.head, hint=TRANSPOSED_HINT)


TRANSPOSED_HINT = ("store the tile row-major (`offs_m[:, None] * stride + offs_n[None, :]`) and transpose the result "
                   "outside the kernel; after the loop, a carry (the accumulator, or it converted) may be stored "
                   "transposed (docs/ttgir-import.md, section 3)")


def _refused(err):
    """A mask the import does not express: an error of its own kind, which no caller turns into a
    warning (loops.py keeps the loop a tile loop, the epilogue does not drop it)."""
    from .indices import UnexpressedMask
    return UnexpressedMask(*err.diagnostics)


def token(lw: Lowering, op: MOp) -> None:
    """An op that only orders memory accesses (a barrier, an async group, a fence): program order
    already does, so it is dropped; its results are tokens."""
    lw.operands(op)
    lw.bind(op, TOKEN)


def store(lw: Lowering, op: MOp) -> None:
    edge_mask(lw, op)
    vals = [lw.read(v) for v in lw.operands(op)]
    if any(isinstance(v, Tile) for v in vals):
        lw.node("store", op, vals, None, None)
    lw.bind(op, TOKEN)



def alloc(lw: Lowering, op: MOp) -> None:
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


def memory_store(lw: Lowering, op: MOp) -> None:
    """``ttg.local_store src, buf`` / ``ttng.tmem_store src, buf[tok], pred``: buf now holds src."""
    vals = lw.operands(op)
    if len(vals) < 2 or not isinstance(vals[1], Buf):
        generic(lw, op)
        return
    _, mtype, _ = lw.buffers[vals[1].index]
    lw.content[vals[1].index] = lw.move(vals[0], mtype.space, op)
    lw.bind(op, TOKEN)


def memory_load(lw: Lowering, op: MOp) -> None:
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

