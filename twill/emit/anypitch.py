"""Rows at any pitch (issue #22): a loop's load whose rows are not 16 bytes apart, read with no copy.

A 2-d tensor map needs a row stride that is a multiple of 16 bytes (a GPT-2 vocabulary of 50257 bf16 is
100514 bytes a row), so the binding used to stage such an input into rows padded to 16 bytes (an extra read and
write of the tensor: 175 us against 47 us for cross-entropy over 1000 x 50257 bf16 on an H100). Here instead,
where the binding passes a negative row stride (binding_runtime._any_pitch: rows -NAME_row_stride elements
apart), the load role brings each of the tile's ROWS rows in one non-tensor bulk copy (cp.async.bulk, no tensor
map: `twill::bulk_rows`) of W = COLS + 16 / esize elements from the 16-byte boundary at or before the row's
first element: the row's tile lies s_r elements into it, s_r = (the row's first element) mod (16 / esize), 0 to
7 bf16. The copies fill the ring slot as ROWS rows of W, unswizzled (a slot of ROWS x W elements:
slot_elements), and the readers (`twill::rows_to_frag`, in place of tile_to_frag) shift each row by its s_r,
one element (2 or 4 bytes) a load: a row starts at any element boundary.

Why a bulk copy and not a box of a tensor map (the first version, a flat map of one row of every element, one
box a row, faulted on an H100 with "misaligned address", cudaError 716): cp.async.bulk.tensor needs its shared
destination 128-byte aligned (CUDA C++ Programming Guide, TMA: "Shared memory address: must be 128 byte
aligned"), and rows of W elements (272 bytes for 136 bf16, 528 for 132 f32) start at 16-byte multiples only.
cp.async.bulk needs 16 bytes of its global source and shared destination and a size of a multiple of 16 bytes
(PTX ISA, cp.async.bulk), which rows of W keep: ROW_ALIGN. Padding each row of the slot to 128 bytes instead
would take 384 bytes a row of 136 bf16 (41% more shared memory) and put every row on bank 0 (8-way conflicts
in the fragment reads), where 272 bytes (68 words) spread them. A bulk copy has no zero fill past the tensor:
each copy stops at the tensor's last 16-byte chunk (NAME_ap_end, the padded element count: the chunk holding a
valid byte is mapped memory), a row wholly past it is not read, and the producer arrives on the full barrier
with the bytes it issued (bulk_rows, in place of the ring's expect_full). A column past the row's end (the next
row's data) or a row past the tensor's (stale bytes, or none) reads 0 in rows_to_frag, as a 2-d map's zero fill
would, so the masks after it (ragged.py) are unchanged. With a row stride that is a multiple of 16 bytes the
same kernel runs its 2-d map, as before: the path is chosen at launch (args.NAME_ap_rs != 0), not at emit time.

Taken by a load of the loop whose rows are the grid's and whose columns the loop's, read row-major as they
lie, 2- or 4-byte elements, a row of at most 256 elements, read by register math alone (no tensor core, whose
descriptors need the swizzled tile), on a target with register fragments (sm_90a). Any other tensor keeps the
binding's staging copy.

Off by default (emit-cuda --any-pitch, KernelModel.any_pitch): the path has not yet run on a GPU (session 38's
first run, by tensor-map boxes, faulted; the bulk copies are unmeasured), and a device fault kills the caller's
CUDA context where the staging copy works. Without the option, no load is eligible: the kernel's text is as
before this module, and the binding's spec has no "any_pitch" key, so it stages.
"""
from __future__ import annotations

from .batch_groups import batch_index, shareable
from .model import EmitError, dtype_bytes, plain_box

CHUNK = 16  # bytes: a bulk copy's alignment of both addresses and of its size
ROW_ALIGN = CHUNK  # bytes: where each row of a slot starts (a bulk copy's destination; not a tensor copy's 128)
MAX_BOX = 256  # elements of a row's copy (as a box's, so one row of a tile is what a 2-d map's box reads)


def eligible(m, t) -> bool:
    """Whether load tensor `t` of model `m` takes rows at any pitch (the module docstring): only in a kernel
    emitted with the option (m.any_pitch: emit-cuda --any-pitch); without it the kernel is as before."""
    if (not m.any_pitch or t.kind != "load" or t.rank != 2 or plain_box(t) or t.axes != ("m", "loop") or t.col_stride != 1
            or t.col_offset or t.column_major or t.transposed or t.iter_div != 1 or t.per_iteration or shareable(t)
            or not m.target.register_fragments):
        return False
    esize = dtype_bytes(t.dtype)
    # (a slot of ROWS x W stays a whole number of KiB, the 2-d map's 1024-byte swizzle atoms aligned)
    if (esize not in (2, 4) or (t.tile[1] * esize) % CHUNK or width(t) > MAX_BOX or t.tile[0] > MAX_BOX
            or (t.tile[0] * CHUNK) % 1024 or (width(t) * esize) % ROW_ALIGN):
        return False
    from ..vocab import lookup
    for op in m.ops.values():
        if any(m.resolve(o)[0] == t.value for o in op.operands):
            d = lookup(op.opcode)
            if d is None or d.tensor_core:
                return False
    return True


def tensors(m) -> list:
    """The model's loads that take rows at any pitch."""
    return [t for t in m.tensors if eligible(m, t)]


def width(t) -> int:
    """W: the elements of one row's box, the tile's columns and one 16-byte chunk more."""
    return t.tile[1] + CHUNK // dtype_bytes(t.dtype)


def slot_elements(t) -> int:
    """A ring slot's elements: ROWS rows of W (ROWS x COLS, swizzled, where the 2-d map reads the tile)."""
    return t.tile[0] * width(t)


def slot_bytes(t) -> int:
    return slot_elements(t) * dtype_bytes(t.dtype)


def arg_fields(m) -> list[str]:
    """Args' fields of each such load: its row and batch strides where its rows lie at any pitch (0: the 2-d
    map), its rows (the tensor's, per batch entry)."""
    return [f"const void* {t.name}_ap_base;  long long {t.name}_ap_rs, {t.name}_ap_bs, {t.name}_ap_end;  "
            f"int {t.name}_ap_rows, {t.name}_ap_step, {t.name}_ap_bstep;  "
            f"// {t.value}'s rows at any pitch: its start, its strides in elements (rs 0: the 2-d map, rows 16-byte "
            "aligned), its elements to the end of its last 16-byte chunk, its rows, the strides mod 16 bytes' "
            "elements (anypitch.py)"
            for t in tensors(m)]


def map_lines(t, rows: str, cols: str, batch: str, dtype: str, esize: int, encode_2d: str) -> list[str]:
    """launch()'s checks and encoding of `t`'s map (host.py's _checks): where NAME_row_stride < 0 (rows at any
    pitch, read by bulk copies) a valid map of the tensor's first 16 bytes that the kernel never reads (its
    prefetch.tensormap sees a descriptor) and the tensor's padded end; else the 2-d map as for any TMA tensor
    (`encode_2d`: its encode call)."""
    n, a = t.name, CHUNK // esize
    return [
        f"if (p.{n}_batch_stride < 0) return cudaErrorInvalidValue;",
        f"const bool {n}_any = p.{n}_row_stride < 0;  // rows -{n}_row_stride elements apart, at any pitch "
        "(anypitch.py)",
        f"const uint64_t {n}_rs = {n}_any ? static_cast<uint64_t>(-p.{n}_row_stride) : p.{n}_row_stride > 0 ? "
        f"static_cast<uint64_t>(p.{n}_row_stride) : {cols};",
        f"const uint64_t {n}_bs = p.{n}_batch_stride > 0 ? static_cast<uint64_t>(p.{n}_batch_stride) : "
        f"{rows} * {n}_rs;",
        f"// the elements from the first row's to the end of the last row's 16-byte chunk (the bulk copies' bound)",
        f"const uint64_t {n}_end = (({batch} - 1) * {n}_bs + ({rows} - 1) * {n}_rs + {cols} + {a - 1}) / {a} * {a};",
        f"CUtensorMap tm_{n};",
        f"if ({n}_any) {{  // bulk copies, no map: rows 16-byte aligned at their start, a row at least a row long",
        f"  if (reinterpret_cast<uintptr_t>(p.{n}) % {CHUNK} != 0 || {n}_rs < {cols} ||",
        f"      !encode(&tm_{n}, {dtype}, {esize}, p.{n}, 1, {a}, 1, {a}, {a}, 1, {a}, 16))",
        "    return cudaErrorInvalidValue;",
        f"}} else if (!{encode_2d}) {{",
        "  return cudaErrorInvalidValue;",
        "}",
    ]


def copy_lines(m, rows_of) -> list[str]:
    """launch()'s lines that set the Args fields of arg_fields (rows_of(t): the C++ of t's rows)."""
    return [f"args.{t.name}_ap_base = p.{t.name};  "
            f"args.{t.name}_ap_rs = {t.name}_any ? static_cast<long long>({t.name}_rs) : 0;  "
            f"args.{t.name}_ap_bs = static_cast<long long>({t.name}_bs);  "
            f"args.{t.name}_ap_end = static_cast<long long>({t.name}_end);  "
            f"args.{t.name}_ap_rows = static_cast<int>({rows_of(t)});  "
            f"args.{t.name}_ap_step = static_cast<int>({t.name}_rs % {CHUNK // dtype_bytes(t.dtype)});  "
            f"args.{t.name}_ap_bstep = static_cast<int>({t.name}_bs % {CHUNK // dtype_bytes(t.dtype)});"
            for t in tensors(m)]


def load_lines(t, dst: str, bar: str, row0: str, col0: str, batch: str) -> tuple[str, str]:
    """The load role's branch for one tile: (the condition, the call of twill::bulk_rows, which arrives on the
    full barrier `bar` with its bytes itself)."""
    from .ops import ctype
    first = (f"static_cast<long long>({batch}) * args.{t.name}_ap_bs + static_cast<long long>({row0}) * "
             f"args.{t.name}_ap_rs + ({col0})")
    return (f"args.{t.name}_ap_rs != 0",
            f"twill::bulk_rows<{ctype(t.dtype)}, {t.tile[0]}, {width(t)}>({dst}, args.{t.name}_ap_base, {bar}, "
            f"{first}, args.{t.name}_ap_rs, args.{t.name}_ap_end);  // rows at any pitch (anypitch.py)")


def row_offsets(t) -> list[int]:
    """The bytes from a ring slot's start at which bulk_rows writes each row (each a multiple of ROW_ALIGN)."""
    return [r * width(t) * dtype_bytes(t.dtype) for r in range(t.tile[0])]


def read_lines(m, t, src: str, dst: str, row0: str, iteration: str, split: bool, fixed_up: bool,
               plain: str) -> list[str]:
    """A reader's lines for tile `src` of t into fragment `dst` (the warpgroup's rows from row0): the shifted
    read where the rows lie at any pitch, else `plain` (tile_to_frag)."""
    from . import splits
    from .ops import ctype
    rows, cols = t.tile
    origin = f"tile.m * args.{t.name}_rows_step + args.{t.name}_rows_offset"
    batch = batch_index(t, split, fixed_up)
    if m.ragged.step:
        if not iteration:
            raise EmitError(f"load '{t.value}' at any pitch is read outside the loop, where its partial last tile "
                            "is not known (anypitch.py)")
        valid = f"(({iteration}) == n - 1 ? {splits.loop_tail(m)} : {cols})"
    else:
        valid = str(cols)
    # (32-bit: the strides mod 16 bytes' elements; 64-bit products here spilled the fixed-up cross-entropy)
    shift = f"({batch}) * args.{t.name}_ap_bstep + ({origin}) * args.{t.name}_ap_step"
    return [f"if (args.{t.name}_ap_rs != 0) twill::rows_to_frag<{ctype(t.dtype)}, {rows}, {cols}>({dst}, {src}, "
            f"{row0}, {shift}, args.{t.name}_ap_step, args.{t.name}_ap_rows - ({origin}), "
            f"{valid});  // rows at any pitch (anypitch.py)",
            f"else {plain}"]
