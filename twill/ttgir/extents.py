"""Which integer arguments of an imported kernel are extents of the graph's axes (docs/ttgir-import.md,
section 11, "Extents"; the `.tir` attribute `argument K {extent = loop}`, docs/formats.md).

The emitted kernel runs over the whole extent of its tensors along each axis, read from their shapes
by the binding. A Triton kernel runs over what its size arguments say: its loop to its upper bound,
its loads and stores up to their masks' bounds. The two agree where the caller passes sizes equal to
the tensors' extents; the binding checks that at each call, from what is recorded here:

- **the loop**: the chosen loop's upper bound, read as steps.py reads it (the extent E of
  ``range(0, E, BK)``, of ``range(0, tl.cdiv(E, BK))``, of the pipelined form's ``E - k * BK``),
  where E is one kernel argument: ``(E, "loop")``; where E is a compile-time constant (a
  `tl.constexpr`), the constant (`Extents.loop`). Bounds that read a program id (a causal or banded
  loop, whose range follows the query tile; a split of the loop) record nothing;
- **the masks**: each comparison of a load's or store's mask that is a bound of the tensor's edge
  along dimension d (bounds.py), ``position_d + ORIGIN < ARG`` with ARG one kernel argument and
  ORIGIN only program ids (or values computed from them) and induction variables (the tile's start: ``rows < M``, ``offs_k < K -
  k * BK``): ``(ARG, axis)``, the axis that dimension of the graph value the load or store is
  runs along as the binding names it (`m`, `n` or `loop`, twill.emit.tensors.value_axis; the
  tensor's `fixed` dimensions and an input's dimension along the loop record nothing). The loads and
  stores read are the chosen loop's and those outside every loop (the prologue's and epilogue's);
- **the descriptors** the kernel makes (``tt.make_tensor_descriptor %A, [%M, %K], ...``, after the
  pipeliner ``ttng.tensormap_create``, its shape innermost first): each
  dimension whose shape is one argument, with the axis of that dimension of what the pointer feeds
  (TMA's edge is the descriptor's shape).

An argument may bound several axes (attention's N_CTX: the queries' rows, `m`, and the keys, `loop`).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from .addresses import Addresses, poly_int
from .bounds import Masks
from .parser import MOp
from .merge import loop_bounds
from .steps import Walk, _extent, _mask_operand
from .types import TypeReader

AXES = ("m", "n", "loop")  # the binding's axes (SPEC's "axes" and each tensor's "dims")
MASKED = {"tt.load", "tt.store", "ttg.async_copy_global_to_local"}
POINTER_LOADS = {"tt.load", "ttg.async_copy_global_to_local"}


def _made(names):  # tt.make_tensor_descriptor %base, [shape], [strides]: (base, shape in dimension order)
    rank = (len(names) - 1) // 2
    return (names[0], names[1:1 + rank]) if names else (None, [])


def _created(names):  # ttng.tensormap_create %desc, %base, [box], [shape, innermost first], [strides], [elem strides]
    rank = (len(names) - 1) // 4
    return (names[1], names[2 + rank:2 + 2 * rank][::-1]) if rank else (None, [])


DESCRIPTORS = {"tt.make_tensor_descriptor": _made, "ttng.tensormap_create": _created}  # op -> (base, shape)


@dataclass(frozen=True)
class Extents:
    """(argument, axis) pairs, in the kernel's argument order then AXES' order; `loop`: the loop's
    extent where its upper bound is a compile-time constant."""

    args: tuple[tuple[str, str], ...] = ()
    loop: int | None = None


def extents(module, func: MOp, path: tuple[MOp, ...], graph, signature, reads_pid) -> Extents:
    """The extents of `graph` (imported from the loop `path` ends with, in `func`, the loops around
    it before it; `signature` its provenance.Signature,
    `reads_pid(name)` whether a value reads a program id): see the module doc."""
    loop = path[-1]
    found: set[tuple[str, str]] = set()
    constant = None
    addr = None
    bounds = loop_bounds(loop)
    if bounds is not None:
        walk = Walk(module, func, loop)
        addr = walk.addr
        upper_extent = _loop_extent(walk, bounds, reads_pid)
        if isinstance(upper_extent, int):
            constant = upper_extent
        elif upper_extent is not None:
            found.add((upper_extent, "loop"))
    if addr is None:
        addr = Addresses(func, TypeReader(module.source, module.aliases))
    axis_of = _axes(graph)
    targets = {n: t for n, t in graph.arguments if t is not None}
    masks = Masks(addr)
    types = TypeReader(module.source, module.aliases)
    for op in _masked_ops(func.body(), {id(p) for p in path}):
        pointer = (signature.stores.get(f"{op.head.line}:{op.head.col}") if op.name == "tt.store"
                   else signature.loads.get(op.results[0]) if op.results else None)
        mask = _mask_operand(op)
        if pointer is None or mask is None or targets.get(pointer) is None:
            continue
        flipped = _read_transposed(op, addr, types)
        for c in masks.compares(mask) or ():
            arg = _bound_argument(c, addr, reads_pid)
            if arg is None:
                continue
            rank = len(c.diff.coefs)
            # a load read column-major is the TTGIR tile transposed in the graph (memory._load_node)
            axis = axis_of(targets[pointer], rank - 1 - c.dim if flipped and rank == 2 else c.dim, rank)
            if axis is not None:
                found.add((arg, axis))
    for op in _masked_ops(func.body(), {id(p) for p in path}, DESCRIPTORS):
        pointer, shape = DESCRIPTORS[op.name]([n for n, _ in op.operands()])
        if targets.get(pointer) is None:
            continue
        for dim, name in enumerate(shape):
            value = addr.of(name)
            arg = _single_argument(value.const, addr) if value is not None and not value.coefs else None
            axis = axis_of(targets[pointer], dim, len(shape)) if arg is not None else None
            if axis is not None:
                found.add((arg, axis))
    found.update((arg, "m") for arg in module.grid_bound)  # a column-sum kernel's `cols < N` (colsum.py)
    order = {n: i for i, (n, _) in enumerate(graph.arguments)}
    args = tuple(sorted((p for p in found if p[0] in order), key=lambda p: (order[p[0]], AXES.index(p[1]))))
    return Extents(args, constant)


def _read_transposed(op: MOp, addr: Addresses, types: TypeReader) -> bool:
    """Whether the import made the graph value of load `op` the transpose of its TTGIR tile (a tile
    stored column-major: memory.column_major, the rule `_load_node` applies)."""
    from .memory import column_major, pointer_source
    if op.name not in POINTER_LOADS:
        return False
    source = pointer_source(types, op)
    return source is not None and column_major(addr, op, source) is not None


def _loop_extent(walk: Walk, bounds, reads_pid) -> str | int | None:
    """The argument (or the constant) the loop's upper bound is the extent of; None otherwise."""
    _, _, upper, step_name = bounds
    if reads_pid(upper) or reads_pid(step_name) or reads_pid(bounds[1]):
        return None
    st = walk.addr.of(step_name)
    step = poly_int(st.const) if st is not None and not st.coefs and st.base is None else None
    if step is None or step < 1:
        return None
    axes = walk.axes(step)
    if not axes or any(a.move != a.tile for a in axes):
        return None
    extent, _ = _extent(walk, upper, step, axes[0].tile)
    if extent is None:
        return None
    value = poly_int(extent)
    if value is not None:
        return value if value > 0 else None
    return _single_argument(extent, walk.addr)


def _bound_argument(c, addr: Addresses, reads_pid) -> str | None:
    """ARG where comparison `c` is ``position_d + ORIGIN < ARG`` (module doc), else None. ORIGIN's
    atoms are program ids, induction variables and values computed from program ids that the
    polynomials do not follow (a grouped ordering's ``pid // group`` rows)."""
    if c.kind != "bound" or c.pred != "lt" or poly_int(c.diff.coefs[c.dim]) != 1:
        return None
    args = [m[0] for m, k in c.diff.const if k == -1 and len(m) == 1 and m[0] in addr.args]
    if len(args) != 1:
        return None
    for m, k in c.diff.const:
        if m == (args[0],):
            continue
        if not m or any(not (a.startswith(("pid_", "iv:")) or (a.startswith("%") and reads_pid(a[1:]))) for a in m):
            return None  # a constant offset, another argument: no edge at the tensor's extent
    return args[0]


def _single_argument(poly, addr: Addresses) -> str | None:
    """The kernel argument `poly` is (one atom, coefficient 1), else None."""
    if len(poly) == 1 and poly[0][1] == 1 and len(poly[0][0]) == 1 and poly[0][0][0] in addr.args:
        return poly[0][0][0]
    return None


def _masked_ops(ops, path: set[int], names=MASKED):
    """The ops named `names` (loads and stores) of the chosen loop and of the loops around it, outside
    every other loop (`path`: the ids of the chosen loop and the loops around it)."""
    for op in ops:
        if op.name in names:
            yield op
        for region in op.regions:
            for block in region:
                if op.name != "scf.for" or id(op) in path:
                    yield from _masked_ops(block.ops, path, names)


def _axes(graph):
    """axis(target, dim, rank): the binding's axis of dimension `dim` of the tensor an argument
    feeds (`target`, its graph name) where its tile has `rank` dimensions, or None."""
    from ..emit.epilogue import extra_outputs
    from ..emit.model import EmitError, mma_shape
    from ..emit.tensors import value_axis
    try:
        mma = {op.name: mma_shape(graph, op) for op in graph.ops if op.opcode == "mma"}
        axis = value_axis(graph, mma)
        extra = {name[len("out_"):]: src for name, src, _ in extra_outputs(graph)}
    except (EmitError, InputError, KeyError):
        return lambda target, dim, rank: None
    src = dict(graph.yields)

    def of(target: str, dim: int, rank: int) -> str | None:
        value, kind = _value(graph, target, src, extra)
        t = _type(graph, value)
        if value is None or t is None or len(t.shape) != rank or rank not in (1, 2):
            return None
        found = axis(value, dim)
        if kind == "input" and found == "loop":
            return None  # an input is invariant along the loop: the binding reads it whole ("fixed")
        return found if found in AXES else None
    return of


def _value(graph, target: str, src: dict, extra: dict) -> tuple[str | None, str]:
    """The graph value whose dimensions the tensor `target` has, and what it is."""
    if target in graph.values:
        v = graph.values[target]
        return (src.get(target), "carry") if v.kind == "carry" else (target, "input")
    op = graph.by_name.get(target)
    if op is not None:
        if op.opcode == "store":
            return (op.operands[0].name if op.operands else None), "store"
        return target, "load"
    if target in extra:
        return extra[target], "output"
    return None, ""


def _type(graph, value: str | None):
    if value is None:
        return None
    if value in graph.values:
        return graph.values[value].type
    op = graph.by_name.get(value)
    return op.type if op is not None else None
