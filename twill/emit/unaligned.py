"""Rows TMA cannot read as boxes, read where they lie (issue #22): a row pitch or a start off 16 bytes.

TMA needs a tensor's row and batch strides to be multiples of 16 bytes and its data to start on a 16-byte
boundary. GPT-2's vocabulary (50257 bf16 logits: rows of 100514 bytes), LayerNorm's rows of 781 halves or a
view x[:, :N] of such rows have no 2-d tensor map; the binding used to copy them into rows padded to 16 bytes
before every launch (binding_runtime._layout's "stage"), which for a row reduction costs as much as the
kernel. A load this module takes (`tensors`) is read **row by row** instead, chosen at the call:

- launch() (host.py) encodes the 2-d map as before where the tensor's layout allows; otherwise a flat map
  (`encode_rows`, `ROWS_ENCODER`): the whole tensor as one row of elements from the 16-byte boundary at or
  below its first element, a box of one swizzle block's row (128 bytes), and sets `args.NAME_rows`
  (`twill::RowPitch`: the strides, extents and that lead) with `flat = 1`;
- the load warp (roles.py's `_load`), where `flat` is set, issues one box per row of the tile, each at that
  row's address in the ring slot (`twill::load_rows`, cuda_runtime/rows.cuh). TMA swizzles by the
  shared-memory address, so a 128-byte row at offset 128 r of a 1024-byte-aligned block lands exactly as
  row r of a 2-d box would: the readers are unchanged. What a 2-d box's bounds would fill with zeros
  (rows past the extent, a block reaching past the last column) the warp writes itself with ordinary loads,
  then one arrival completes the slot on the same full mbarrier, with the TMA's bytes announced first;
- the binding (`Argument.unaligned`, binding_runtime._layout) takes such a tensor as it lies ("as is" with
  its strides) instead of staging it.

Only loads whose rows are the grid's and whose columns the loop's, in whole 128-byte swizzle blocks, read
by no mma (row reductions: cross-entropy, softmax, LayerNorm), loaded by a one-warp role, take the path,
so every other kernel's text is unchanged. Where the flat row would pass 2^31 elements (an int32 TMA
coordinate) launch() refuses and the binding stages as before.
"""
from __future__ import annotations

from dataclasses import replace

from ..registers import register_pool
from .model import dtype_bytes, plain_box, swizzle_bytes

# The least setmaxnreg budget of a warpgroup whose load warp reads rows a box a row (ptxas, CUDA 13.0, on the
# golden row kernels: cross-entropy's load warp spilled 20 bytes at the schedule's 24 and none at 32; the column
# split softmax's store pass and row_var's second loop 8 and 16 bytes at 32, none at 40).
ROW_REGISTERS = 40
ROW_BYTES = 128  # one box row: a 128-byte swizzle block's, so that each row's shared address is 128-byte aligned
MAX_FLAT = 2 ** 31  # elements of the flat row: TMA's coordinates are int32


def takes(m, t) -> bool:
    """Whether load tensor `t` of model `m` is read row by row where TMA cannot read it as boxes."""
    if t.kind != "load" or t.rank != 2 or plain_box(t) or t.axes != ("m", "loop") or t.per_iteration:
        return False
    if t.col_stride != 1 or t.col_offset or t.iter_div != 1 or t.column_major:
        return False
    rows, cols = t.tile
    if not 8 <= rows <= 256 or swizzle_bytes(cols * dtype_bytes(t.dtype), rows) != ROW_BYTES:
        return False
    role = m.values[t.value].role
    if role is None or m.role[role].warps != 1:
        return False
    return not any(m.ops[u.op].opcode == "mma" for u in m.uses.get(t.value, ()))


def tensors(m) -> list:
    """The loads read row by row where their layout needs it, in the model's order."""
    return [t for t in m.tensors if takes(m, t)]


def with_registers(m):
    """`m` with each warpgroup holding such a load's warp at ROW_REGISTERS or more, where the CTA's pool holds
    it (setmaxnreg only moves registers; where it does not, emit-cuda's ptxas loop gives the role what ptxas
    counts). The role keeps the schedule's count: the file's header notes the warpgroup's budget."""
    roles = {m.values[t.value].role for t in tensors(m)}
    if not roles:
        return m
    lim = m.machine.limits
    groups = tuple(replace(g, registers=max(g.registers, ROW_REGISTERS)) if roles & set(g.roles) else g
                   for g in m.warpgroups)
    if 32 * lim.warp_group * sum(g.registers for g in groups) > register_pool(lim, len(groups)):
        return m
    return replace(m, warpgroups=groups)


def arg_fields(m) -> list[str]:
    """Args' fields: each such load's pitch (its pointer is in Args: Renderer.pointer_tensors)."""
    return [f"twill::RowPitch {t.name}_rows;  // load {t.value}: flat = 1 where TMA cannot read its rows as boxes "
            "(unaligned.py)" for t in tensors(m)]


def encode_lines(t, esize: int, rows: str, cols: str, batch: str, tma: str) -> list[str]:
    """launch()'s lines for such a load's map: the 2-d map (`tma`, encode's call) where the layout allows,
    else the flat one, and its pitch for Args."""
    n = t.name
    return [
        f"twill::RowPitch {n}_rows{{}};  // flat: the rows TMA cannot read as boxes, read one box a row (unaligned.py)",
        f"if (unaligned(p.{n}, {esize}, {n}_rs, {n}_bs)) {{",
        f"  if (!encode_rows(&tm_{n}, {_dtype(t)}, {esize}, p.{n}, {rows}, {cols}, {batch}, {n}_rs, {n}_bs, "
        f"{ROW_BYTES // esize}, &{n}_rows))",
        "    return cudaErrorInvalidValue;",
        f"}} else if (!{tma}) {{",
        "  return cudaErrorInvalidValue;",
        "}",
    ]


def copy_lines(m) -> list[str]:
    return [f"args.{t.name}_rows = {t.name}_rows;" for t in tensors(m)]


def _dtype(t) -> str:
    from .ops import TMA_DTYPE
    return TMA_DTYPE[t.dtype]


# The host's flat map (host.tpl's {{rows_encoder}}, only in kernels with such a load).
ROWS_ENCODER = """
// A layout TMA cannot read as boxes: a row or batch stride that is not a multiple of 16 bytes, or data off a
// 16-byte boundary (emit/unaligned.py).
static inline bool unaligned(const void* ptr, uint64_t esize, uint64_t row_stride, uint64_t batch_stride) {
  return (row_stride * esize) % 16 || (batch_stride * esize) % 16 || reinterpret_cast<uintptr_t>(ptr) % 16;
}

// Such a tensor as one flat row of every element from the 16-byte boundary at or below its start to its last,
// in boxes of one row of a swizzle block (box_cols elements, 128 bytes), and the pitch its load warp reads it
// with (twill::load_rows). False where the flat row passes int32's coordinates or an element is not aligned to
// its size.
static inline bool encode_rows(CUtensorMap* map, CUtensorMapDataType type, uint64_t esize, const void* ptr,
                               uint64_t rows, uint64_t cols, uint64_t batch, uint64_t row_stride,
                               uint64_t batch_stride, uint32_t box_cols, twill::RowPitch* pitch) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(ptr);
  if (at % esize || rows == 0 || cols == 0 || batch == 0) return false;
  const uint64_t lead = (at % 16) / esize;
  const uint64_t flat = lead + (batch - 1) * batch_stride + (rows - 1) * row_stride + cols;
  if (flat >= (uint64_t(1) << 31)) return false;
  const uint64_t stride = (flat * esize + 15) / 16 * 16 / esize;  // the map's other (unit) dimensions
  pitch->rs = static_cast<int>(rows > 1 ? row_stride : 0);
  pitch->bs = static_cast<int>(batch > 1 ? batch_stride : 0);
  pitch->rows = static_cast<int>(rows);
  pitch->cols = static_cast<int>(cols);
  pitch->lead = static_cast<int>(lead);
  pitch->flat = 1;
  return encode(map, type, esize, reinterpret_cast<const char*>(ptr) - at % 16, 1, flat, 1, stride, stride, 1,
                box_cols, 128);
}"""
