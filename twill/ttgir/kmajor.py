"""Loads of mma operands the tensor core reads K-major only, which the kernel reads MN-major: typed as
the emitted kernel must read them, their argument copied transposed by the binding.

wgmma and tcgen05.mma transpose only 16-bit operands: TF32 (an f32 dot), fp8 and int8 operands are
read K-major, a as M x K and b as N x K with K the contiguous dimension (`MmaInputs.transposable`).
A Triton kernel may load them the other way, B as a [K, N] row-major tensor (`B + rk[:, None] *
stride_bk + rn[None, :]`, the usual GEMM): Triton transposes the tile through registers on its way
into shared memory, which a TMA copy, moving a box as it lies, cannot. Such a load is typed here as
the kernel reads it, its shape reversed ([N, K]), with `{transposed = true}`: its argument is the
transpose of the tile's layout. The binding takes the tensor the Triton kernel takes ([*batch, K, N])
and hands the kernel its transpose `.mT`: read as it lies where that is K-major already (the `w.t()`
of a contiguous [N, K] weight), else copied into a K-major buffer once a call (binding_runtime._layout:
one read and one write of the operand, on the kernel's stream).

The rewrite is taken where it is exact: every reader of the load is an mma of such operands reading it
MN-major, as the same operand (a or b), and the load walks its argument plainly (no column stride,
offset or row per several iterations). Anything else is left as it is, and emit-cuda says why it
cannot read the operand.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import EmitError
from ..mma import FP8, MMA_INPUTS, operand_majors
from ..ir import Graph, Op
from ..vocab import mma_mismatch

_PLAIN_LOAD = ("col_stride", "col_offset", "iter_div", "transposed")  # a load with one of these is left as it is


def kmajor_loads(graph: Graph) -> Graph:
    """`graph` with each load read MN-major by K-major-only mmas typed K-major, `{transposed = true}`
    (see the module doc); the graph itself where there is none."""
    wants: dict[str, set[tuple[str, int]]] = {}  # load -> (mma, operand index) reading it MN-major
    other: set[str] = set()  # values some other reader reads
    for op in graph.ops:
        flips = _mn_major_operands(graph, op)
        for i, operand in enumerate(op.operands):
            if i in flips and operand.distance is None:
                wants.setdefault(operand.name, set()).add((op.name, i))
            else:
                other.add(operand.name)
    other.update(src for _, src in graph.yields)
    loads = {name: sorted(uses) for name, uses in wants.items()
             if name not in other and _plain_load(graph.by_name.get(name)) and len({i for _, i in uses}) == 1}
    if not loads:
        return graph
    flipped_in = {mma: i for uses in loads.values() for mma, i in uses}
    ops = []
    for op in graph.ops:
        if op.name in loads:
            op = replace(op, type=replace(op.type, shape=op.type.shape[::-1]), attrs=op.attrs + (("transposed", True),))
        elif op.name in flipped_in:
            op = _kmajor_attrs(graph, op, flipped_in[op.name])
        ops.append(op)
    return replace(graph, ops=tuple(ops))


def _mn_major_operands(graph: Graph, op: Op) -> set[int]:
    """The operand indices (0: a, 1: b) of mma `op` that its tensor core reads K-major only and that lie
    MN-major in the graph; empty for any other op, or an mma whose operands emit-cuda refuses anyway."""
    if op.opcode != "mma" or op.type is None or len(op.type.shape) != 2 or len(op.operands) < 2:
        return set()
    a, b = (graph.operand_type(o) for o in op.operands[:2])
    if a is None or b is None or len(a.shape) != 2 or len(b.shape) != 2 or mma_mismatch(op.type, [a, b]):
        return set()
    kind = MMA_INPUTS.get(a.dtype)
    if kind is None or kind.transposable or (b.dtype != a.dtype and not (a.dtype in FP8 and b.dtype in FP8)):
        return set()
    try:
        _, a_kmajor, b_kmajor = operand_majors(graph, op)
    except EmitError:
        return set()
    return {i for i, kmajor in ((0, a_kmajor), (1, b_kmajor)) if not kmajor}


def _plain_load(op: Op | None) -> bool:
    return (op is not None and op.opcode == "load" and op.type is not None and len(op.type.shape) == 2
            and op.type.space == "smem" and not any(op.attr(k) for k in _PLAIN_LOAD))


def _kmajor_attrs(graph: Graph, op: Op, index: int) -> Op:
    """The mma's `transpose_a` / `transpose_b` once operand `index` is typed K-major: where that operand
    is square (the shapes cannot tell) it says so, else the shapes do and the attribute goes."""
    key = ("transpose_a", "transpose_b")[index]
    shape = graph.operand_type(op.operands[index]).shape
    attrs = tuple((k, v) for k, v in op.attrs if k != key)
    if shape[0] == shape[1]:  # a K-major a is M x K (transpose_a false); a K-major b is N x K (transpose_b true)
        attrs += ((key, index == 1),)
    return replace(op, attrs=attrs)
