"""A grid axis whose extent is not a multiple of the tile: the last row or column of tiles is partial.

`Problem::m_extent` and `n_extent` let a caller give M and N in elements (a GEMM of 1000 x 1096
rows and columns under 128 x 128 tiles): the grid then takes ceil(extent / tile) tiles along the
axis and the last one reaches past the end. Every tensor map along the axis is encoded with the
true extent, so TMA fills the rows and columns of a load past the end with zeros and drops those of
a store; emit-cuda's own stores (stores.py: the threads' stores and atomics) test each element
against the extent. A padded element is computed, then, but never written.

That is sound only where no written element depends on a padded one, that is, where no op reduces
along the axis: a row sum across N in the epilogue, an mma whose contraction runs along M. An op
reduces along an axis when one of its operands has a dimension along it and its result has none
(`value_axis` places every dimension of the loop and the epilogue on an axis). Such a kernel, and a
causal one (its trip counts follow the query tile's diagonal), refuses a partial tile along the
axis: the reason is written into the file as kPartialM / kPartialN, `launch` refuses an extent that
is not whole tiles there, and the binding raises an ArgumentError naming it.
"""
from __future__ import annotations

GRID_AXES = ("m", "n")
FIELD = {"m": "m_extent", "n": "n_extent"}  # Problem's and Args' field of each axis
CONSTANT = {"m": "kPartialM", "n": "kPartialN"}  # the kernel file's flag of each axis


def plan(model, causal: bool) -> dict[str, str]:
    """For each grid axis the kernel's tensors run along: "" where a partial last tile is supported,
    else why not (a pure function of the model)."""
    from .tensors import value_axis
    axes = sorted({a for t in model.tensors for a in t.axes if a in GRID_AXES})
    axis = value_axis(model.graph, model.mma_shape)
    reduced = _reductions(model.graph, axis)
    out = {}
    for ax in axes:
        if ax == "m" and causal:
            out[ax] = "the loop's trip count follows each query tile's diagonal (causal)"
        elif ax in reduced:
            out[ax] = f"op '{reduced[ax]}' reduces along {ax.upper()}, so padded elements would enter its result"
        else:
            out[ax] = ""
    return out


def _reductions(graph, axis) -> dict[str, str]:
    """Grid axis -> the first op (loop, then epilogue, then prologue) with an operand dimension
    along it and no result dimension along it."""
    from . import epilogue
    blocks = (graph.ops, graph.epilogue.ops, graph.prologue.ops)
    types = {op.name: op.type for block in blocks for op in block if op.type is not None}

    def type_of(name: str):
        return types.get(name) or epilogue.value_type(graph, name)

    def axes_of(name: str, t) -> set[str]:
        return {axis(name, d) for d in range(len(t.shape))} if t is not None else set()

    found: dict[str, str] = {}
    for block in blocks:
        for op in block:
            if op.type is None:
                continue
            kept = axes_of(op.name, op.type)
            for o in op.operands:
                t = type_of(o.name)
                if t is not None and len(op.type.shape) == 1 and len(t.shape) == 2 and t.shape[0] == op.type.shape[0]:
                    kept = kept | {axis(o.name, 0)}  # a row reduction keeps its operand's rows
                for ax in (axes_of(o.name, t) - kept) & set(GRID_AXES):
                    found.setdefault(ax, op.name)
    return found


def problem_lines(partial: dict[str, str]) -> list[str]:
    """Problem's fields: one extent per grid axis the kernel has."""
    doc = {"m": ("rows", "tiles_m"), "n": ("columns", "tiles_n")}
    lines = []
    for ax in GRID_AXES:
        if ax in partial:
            what, tiles = doc[ax]
            lines.append(f"int {FIELD[ax]} = 0;  // {what} along the grid in elements, where not {tiles} whole tiles: "
                         f"tiles_{ax} = ceil({FIELD[ax]} / the tile) (the last partial; {CONSTANT[ax]})")
    return lines


def constant_lines(partial: dict[str, str]) -> list[str]:
    """kPartialM / kPartialN and, where false, why."""
    lines = []
    for ax in GRID_AXES:
        if ax in partial:
            why = partial[ax]
            lines.append(f"constexpr bool {CONSTANT[ax]} = {'false' if why else 'true'};"
                         + (f"  // {why}" if why else f"  // Problem::{FIELD[ax]} may end inside a tile"))
    return lines


def launch_checks(partial: dict[str, str], tensors) -> list[str]:
    """launch's checks of m_extent / n_extent: 0 (whole tiles), or inside the last tile of every
    tensor placed along the axis, and only where the kernel takes a partial tile."""
    lines = []
    for ax in GRID_AXES:
        if ax not in partial:
            continue
        f, tiles = FIELD[ax], f"p.tiles_{ax}"
        lines.append(f"if (p.{f} < 0 || (p.{f} != 0 && !{CONSTANT[ax]})) return cudaErrorInvalidValue;")
        for t in tensors:
            for d, label in t.placed_dims():
                if t.axes[d] == ax:
                    step = f"p.{t.name}_{label}_step"
                    lines.append(f"if (p.{f} != 0 && (p.{f} <= ({tiles} - 1) * {step} || p.{f} > {tiles} * {step})) "
                                 f"return cudaErrorInvalidValue;")
    return lines


def extent(ax: str, tiles: str, step: str, prefix: str = "p.") -> str:
    """A tensor's extent along grid axis `ax` in elements: the caller's, else whole tiles."""
    return f"twill::grid_extent({prefix}{FIELD[ax]}, {tiles}, {step})"
