"""The C++ types of emitted values: element types, a warpgroup's fragment of a register tile (per
target, FRAGMENTS), and a staged tile read in place (VIEWS)."""
from __future__ import annotations

from typing import Callable

from ..ir import TensorType
from .model import EmitError, KernelModel

CTYPE = {"f16": "__half", "bf16": "__nv_bfloat16", "f32": "float", "tf32": "float", "f64": "double",
         "i32": "int32_t", "i16": "int16_t", "i8": "int8_t", "i64": "int64_t",
         "f8e4m3": "__nv_fp8_e4m3", "f8e5m2": "__nv_fp8_e5m2"}  # the fp8 types: cuda_fp8.h (runtime.mma_extension)
TMA_DTYPE = {"f16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16", "bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
             "f32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32", "tf32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
             "f64": "CU_TENSOR_MAP_DATA_TYPE_FLOAT64", "i32": "CU_TENSOR_MAP_DATA_TYPE_INT32",
             "i64": "CU_TENSOR_MAP_DATA_TYPE_INT64", "i16": "CU_TENSOR_MAP_DATA_TYPE_UINT16",
             "i8": "CU_TENSOR_MAP_DATA_TYPE_UINT8", "f8e4m3": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
             "f8e5m2": "CU_TENSOR_MAP_DATA_TYPE_UINT8"}  # TMA moves 8-bit floats as bytes


def ctype(dtype: str) -> str:
    if dtype not in CTYPE:
        raise EmitError(f"dtype {dtype} has no CUDA element type in emit-cuda")
    return CTYPE[dtype]


def fragment_type(model: KernelModel, t: TensorType, groups: int) -> str:
    """The C++ type of a warpgroup's share of a register value, in its target's layout (FRAGMENTS);
    a scalar (f32[1]) is a float."""
    if t.shape in ((1,), (1, 1)):
        return "float"
    if vector_kind(t) == "rows" and len(t.shape) == 2:
        t = TensorType(t.dtype, t.shape[:1], t.space)
    return FRAGMENTS[model.target.arch](t, groups)


def _tmem_fragment(t: TensorType, groups: int) -> str:
    """sm_100a: a row per thread of a warpgroup (tcgen05.ld's 32x32b), a column vector in each."""
    if vector_kind(t) == "cols":
        return f"twill::TCols<{t.shape[1]}>"
    r = _tmem_rows(t)
    if len(t.shape) == 1:
        return "twill::TScal" if r == 128 else f"twill::TScalR<{r}>"
    n = t.shape[1]
    if t.dtype in ("f16", "bf16"):
        return f"twill::TRow16<{n}, {ctype(t.dtype)}{'' if r == 128 else f', {r}'}>"
    if t.dtype == "i32":  # an integer accumulator, read out of tensor memory as it is
        return f"twill::TRowS32<{n}{'' if r == 128 else f', {r}'}>"
    return f"twill::TRow<{n}{'' if r == 128 else f', {r}'}>"


def _wgmma_fragment(t: TensorType, groups: int) -> str:
    """sm_90a: the wgmma accumulator layout, each warpgroup 64-row blocks of the rows."""
    if vector_kind(t) == "cols":
        return f"twill::Cols<{t.shape[1]}>"
    rows = t.shape[0]
    if rows % (64 * groups):
        from ..errors import Diagnostic
        raise EmitError(Diagnostic(f"a {rows}-row tile cannot be split over {groups} warpgroup(s) of 64-row wgmma "
                                   "blocks", hint=f"give the loop's row tiles a multiple of {64 * groups} rows"))
    mb = rows // (64 * groups)
    if len(t.shape) == 1:
        return f"twill::Rows<{mb}>"
    n = t.shape[1]
    if n % 8:
        raise EmitError(f"a tile of {n} columns does not fit the wgmma accumulator layout (a multiple of 8)")
    if t.dtype in ("f16", "bf16"):
        return f"twill::Frag16<{mb}, {n}, {ctype(t.dtype)}>"
    if t.dtype in ("f8e4m3", "f8e5m2"):  # P of FP8 attention (mma8_sm90.cuh)
        return f"twill::Frag8<{mb}, {n}, {ctype(t.dtype)}>"
    if t.dtype == "i32":  # an s8 wgmma's s32 accumulators
        return f"twill::FragS32<{mb}, {n}>"
    return f"twill::Frag<{mb}, {n}>"


def vector_kind(t: TensorType) -> str | None:
    """'rows' for a value per row ([M], [M, 1]), 'cols' for a value per column ([1, N]), else None."""
    if len(t.shape) == 1 or (len(t.shape) == 2 and t.shape[1] == 1 and t.shape[0] > 1):
        return "rows"
    return "cols" if len(t.shape) == 2 and t.shape[0] == 1 else None


def _tmem_rows(t: TensorType) -> int:
    """sm_100a: a warpgroup holds a 128-row tile one row per thread, or a 64-row one (tcgen05's
    M = 64 layout) in lanes 0-15 of each warp."""
    rows = t.shape[0]
    if rows not in (64, 128):
        raise EmitError(f"a {rows}-row tile: on sm_100a a warpgroup holds 128-row or 64-row tiles")
    return rows


def view_type(model: KernelModel, t: TensorType, groups: int) -> str:
    """The C++ type reading a staged tile in place (see fragment_type for the register one)."""
    return VIEWS[model.target.arch](t, groups)


def _tmem_view(t: TensorType, groups: int) -> str:
    T = ctype(t.dtype)
    r = "" if _tmem_rows(t) == 128 else f", {_tmem_rows(t)}"
    return f"twill::RowsView<{T}{r}>" if len(t.shape) == 1 else f"twill::View<{t.shape[1]}, {T}{r}>"


def _wgmma_view(t: TensorType, groups: int) -> str:
    T = ctype(t.dtype)
    mb = t.shape[0] // (64 * groups)
    return f"twill::RowsView<{mb}, {T}>" if len(t.shape) == 1 else f"twill::View<{mb}, {t.shape[1]}, {T}>"


# The C++ types of a warpgroup's share of a register tile, and of a staged tile read in place.
FRAGMENTS: dict[str, Callable[[TensorType, int], str]] = {"sm_90a": _wgmma_fragment, "sm_100a": _tmem_fragment}
VIEWS: dict[str, Callable[[TensorType, int], str]] = {"sm_90a": _wgmma_view, "sm_100a": _tmem_view}
