"""The global tensors of an emitted kernel: which tensor every input, load, output carry and store
reads or writes, and along which grid axis each tile dimension moves (`m`: blockIdx.x, `n`:
blockIdx.y, `loop`: the loop counter, `fixed`: the whole extent is one tile), found by a
union-find over the tile dimensions the mmas and elementwise ops tie together."""
from __future__ import annotations

from dataclasses import replace

from ..ir import Graph, TensorType
from . import epilogue, prologue
from .model import LOAD_OPCODES, EmitError, GlobalTensor, MmaShape, ident


class _Classes:
    """Union-find over tile dimensions (value, dim)."""

    def __init__(self):
        self.parent: dict[tuple[str, int], tuple[str, int]] = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b):
        self.parent[self.find(a)] = self.find(b)


def _dim_classes(graph: Graph, mma: dict[str, MmaShape]) -> _Classes:
    cls = _Classes()
    values = graph.values
    carry_src = dict(graph.yields)

    def key(operand_name: str, dim: int):
        # A carry and the result it yields are one value as far as shapes go.
        return (carry_src.get(operand_name, operand_name) if operand_name in values and
                values[operand_name].kind == "carry" else operand_name, dim)

    for op in graph.ops:
        if op.type is None or op.opcode in LOAD_OPCODES:
            continue
        names = [o.name for o in op.operands]
        types = [graph.operand_type(o) for o in op.operands]
        rank = len(op.type.shape)
        if op.opcode == "mma":
            s = mma[op.name]
            a, b = names[0], names[1]
            cls.union(key(a, 0 if s.a_kmajor else 1), (op.name, 0))
            cls.union(key(a, 1 if s.a_kmajor else 0), key(b, 1 if s.b_kmajor else 0))
            cls.union(key(b, 0 if s.b_kmajor else 1), (op.name, 1))
            if len(names) > 2:
                cls.union(key(names[2], 0), (op.name, 0))
                cls.union(key(names[2], 1), (op.name, 1))
            continue
        for name, t in zip(names, types):
            if t is None:
                continue
            if rank == 1 and len(t.shape) >= 1:  # a row reduction or a row vector op
                cls.union(key(name, 0), (op.name, 0))
            elif len(t.shape) == rank and t.shape == op.type.shape:
                for d in range(rank):
                    cls.union(key(name, d), (op.name, d))
            elif len(t.shape) == 1 and rank == 2 and t.shape[0] == op.type.shape[0]:
                cls.union(key(name, 0), (op.name, 0))  # a per-row operand broadcast along columns
            elif len(t.shape) == 2 == rank and t.shape[0] == 1 < op.type.shape[0] and t.shape[1] == op.type.shape[1]:
                cls.union(key(name, 1), (op.name, 1))  # a per-column operand [1, N] broadcast along rows
    epilogue.unify(graph, cls.union, key)
    prologue.unify(graph, cls.union, key)
    return cls


def _carried_sum(graph: Graph, name: str, seen=None) -> bool:
    """Whether an mma's accumulator `name` is a carry, or made from one by the loop's ops of its
    shape (attention's `rescale acc, alpha`, the first half of a dot split along K): its K then runs
    along the loop. An accumulator made fresh in the iteration (MLA's `mma qr, kr, qk`, where qk is
    this iteration's `mma q, k`) sums over a dimension of the tile, not over the loop."""
    seen = seen if seen is not None else set()
    value = graph.values.get(name)
    if value is not None and value.kind == "carry":
        return True
    op = graph.by_name.get(name)
    if op is None or name in seen or op.type is None:
        return False
    seen.add(name)
    if op.opcode == "mma":
        return len(op.operands) > 2 and _carried_sum(graph, op.operands[2].name, seen)
    return any(_carried_sum(graph, o.name, seen) for o in op.operands
               if (t := graph.operand_type(o)) is not None and t.shape == op.type.shape)


def value_axis(graph: Graph, mma: dict[str, MmaShape]):
    """axis(value, dim): which axis ("loop", "m", "n" or "fixed") dimension dim of a graph value runs along."""
    cls = _dim_classes(graph, mma)
    carry_src = dict(graph.yields)
    # The loop runs along the K of accumulating mmas (a GEMM's K; attention's keys forward, its
    # queries backward); in a loop without one, along the N of the others.
    loop_classes = set()
    for op in graph.ops:
        if op.opcode == "mma" and mma[op.name].accumulate and _carried_sum(graph, op.operands[2].name):
            a = op.operands[0].name
            loop_classes.add(cls.find((a, 1 if mma[op.name].a_kmajor else 0)))
    if not loop_classes:
        loop_classes = {cls.find((op.name, 1)) for op in graph.ops if op.opcode == "mma"}
    if not loop_classes:  # no mma: a row reduction carried from iteration to iteration walks along its rows
        loop_classes = {cls.find(d) for d in carried_row_reductions(graph)}
    row_classes = set()
    if not loop_classes and not mma:  # a pass that reads per-row inputs (a normalize-and-store loop): its
        row_classes, loop_classes = _row_input_pass(graph, cls)  # rows are the grid's, its columns the loop's
    if not loop_classes and not mma:  # a map over a row's columns (SwiGLU of one row a program): its rows the grid's
        row_classes, loop_classes = _row_map_pass(graph, cls)
    # Grid axes follow the output carries: rows along blockIdx.x, columns along blockIdx.y.
    m_classes, n_classes = set(row_classes), set()
    for carry in graph.carries:
        src = carry_src.get(carry.name)
        if src is None:
            continue
        shape = carry.type.shape
        if len(shape) >= 1 and cls.find((src, 0)) not in loop_classes:
            m_classes.add(cls.find((src, 0)))
        if len(shape) >= 2 and cls.find((src, 1)) not in loop_classes:
            n_classes.add(cls.find((src, 1)))

    def axis(value: str, dim: int) -> str:
        c = cls.find((value, dim))
        return "loop" if c in loop_classes else "m" if c in m_classes else "n" if c in n_classes else "fixed"

    return axis


def grid_origin(graph: Graph, mma: dict[str, MmaShape], tensors, value: str, dim: int) -> str | None:
    """The C++ expression of the first row in memory of dimension `dim` of `value` along a grid axis:
    the placement (`NAME_rows_step`, `NAME_rows_offset`) of the input or loaded tensor whose
    dimension is tied to it (the query tile q of attention's scores, or q0 / q1 of its row parts);
    None where no tensor of the grid axis is tied to it."""
    from .model import DIM_LABELS
    cls = _dim_classes(graph, mma)
    axis = value_axis(graph, mma)
    want = cls.find((value, dim))
    if axis(value, dim) not in ("m", "n"):
        return None
    for t in tensors:
        if t.kind not in ("input", "load") or t.rank != 2:
            continue
        for d in range(2):
            if t.axes[d] == axis(value, dim) and cls.find((t.value, d)) == want:
                label, grid = DIM_LABELS[d], "tile.m" if t.axes[d] == "m" else "tile.n"
                return f"{grid} * args.{t.name}_{label}_step + args.{t.name}_{label}_offset"
    return None


ROW_REDUCTIONS = ("rowsum", "rowmax", "reduce_sum", "reduce_max", "reduce_min")


def _row_input_pass(graph: Graph, cls: _Classes) -> tuple[set, set]:
    """(row classes, loop classes) of a loop with no mma and no carried row reduction whose 2-d tiles read
    an input of one value a row (RMSNorm's second pass: `rescale x, rstd`, rstd [64] handed over or computed
    by the prologue): the same rows every iteration, so the loop walks the tiles' columns. Empty sets
    where no 2-d op reads such an input."""
    row_inputs = {v.name: v.type.shape[0] for v in graph.inputs if v.type is not None and len(v.type.shape) == 1}
    rows = set()
    for op in graph.ops:  # (a scalar, f32[1], is no per-row input: Gemma's `offset + W_row` is [1, N], a column vector)
        if op.type is not None and len(op.type.shape) == 2 and op.type.shape[0] > 1 and any(
                row_inputs.get(o.name) == op.type.shape[0] for o in op.operands):
            rows.add(cls.find((op.name, 0)))
    cols = {cls.find((op.name, 1)) for op in graph.ops
            if op.type is not None and len(op.type.shape) == 2 and cls.find((op.name, 0)) in rows}
    return rows, cols - rows


def _row_map_pass(graph: Graph, cls: _Classes) -> tuple[set, set]:
    """(row classes, loop classes) of a loop with no mma, no carried reduction and no per-row input whose extent is
    the kernel's (an argument `{extent = loop}` or `extent loop = N`: the import says the loop walks a tensor's
    columns, as one row a program's column loop does): its 2-d tiles' rows are the grid's, their columns the loop's.
    Empty sets for any other loop (a graph written by hand: tiles of each iteration, as before)."""
    if graph.loop_extent is None and not any(axis == "loop" for _, axis in graph.extents):
        return set(), set()
    twos = [op.name for op in graph.ops if op.type is not None and len(op.type.shape) == 2]
    # a [1, N] value (a bias row `B + cols`, broadcast over the rows) has no rows of the grid: its dimension 0 is
    # one row, fixed, where taller tiles run along the grid's rows
    tall = [op.name for op in graph.ops if op.type is not None and len(op.type.shape) == 2 and op.type.shape[0] > 1]
    rows = {cls.find((n, 0)) for n in (tall or twos)}
    return rows, {cls.find((n, 1)) for n in twos} - rows


def carried_row_reductions(graph: Graph) -> list[tuple[str, int]]:
    """(value, 1) for each 2-d tile a row reduction that a carry accumulates reads (`total_new = rowsum
    x, total`, yielded to total): in a loop without an mma, its columns run along the loop (a row
    statistic's pass over the row), so its loads walk the row rather than being per-iteration tiles."""
    out = []
    for _, src in graph.yields:
        op = graph.by_name.get(src)
        if op is None or op.opcode not in ROW_REDUCTIONS or not op.operands or op.type is None:
            continue
        x = op.operands[0]
        t = graph.operand_type(x)
        if (t is not None and len(t.shape) == 2 and len(op.type.shape) == 1 and x.distance is None
                and x.name in graph.by_name and op.attr("axis", 1) in (1, -1)):
            out.append((x.name, 1))
    return out


def _tensors(graph: Graph, mma: dict[str, MmaShape]) -> tuple[GlobalTensor, ...]:
    axis = value_axis(graph, mma)
    carry_src = dict(graph.yields)
    out = []

    def add(name, value, kind, t: TensorType, per_iteration_ok: bool, dtype: str | None = None):
        if len(t.shape) not in (1, 2):
            raise EmitError(f"value '{value}' is rank {len(t.shape)}: emit-cuda moves rank-1 and rank-2 tiles")
        if len(t.shape) == 1:
            tile, axes = (1, t.shape[0]), ("fixed", axis(value, 0))
        else:
            tile, axes = (t.shape[0], t.shape[1]), (axis(value, 0), axis(value, 1))
        if kind == "input":
            axes = tuple("fixed" if a == "loop" else a for a in axes)  # invariant: the whole extent
        per_iter = per_iteration_ok and "loop" not in axes
        out.append(GlobalTensor(ident(name), value, kind, dtype or t.dtype, tile, axes, per_iter, len(t.shape)))

    for v in graph.inputs:
        if not v.computed:  # the prologue's results: computed before the loop, in no tensor (prologue.py)
            add(v.name, v.name, "input", v.type, False)
            if v.unbatched:
                out[-1] = replace(out[-1], unbatched=True)
    for op in graph.ops:
        if op.opcode in LOAD_OPCODES and op.type is not None:
            add(op.name, op.name, "load", op.type, True)
            out[-1] = _viewed(out[-1], op)
    for op in graph.ops:
        if op.opcode == "store" and op.operands:
            t = graph.operand_type(op.operands[0])
            if t is not None:
                add(f"{op.name}", op.operands[0].name, "store", t, True)
    written = set(epilogue.outputs(graph))  # an epilogue's output line writes its carry, whatever the carry says
    for carry in graph.carries:
        src = carry_src.get(carry.name)
        if src is not None and (carry.written or carry.name in written):
            add(f"out_{carry.name}", src, "output", carry.type, False, epilogue.output_dtype(graph, carry))
            if carry.column_major and carry.name not in epilogue.outputs(graph):
                out[-1] = _transposed(out[-1])
            elif carry.column_major:
                raise EmitError(f"carry '{carry.name}': an epilogue output of a column-major carry is not emitted")
    for name, src, t in epilogue.extra_outputs(graph):  # an epilogue's new outputs, placed as their carry's
        add(name, src, "output", t, False)
    return tuple(out)


def _transposed(t: GlobalTensor) -> GlobalTensor:
    """A carry's `{column_major = true}` output: its argument holds the tile's transpose (C [N, M]
    row-major for an [M, N] carry), so the tensor is that layout, tile and axes swapped as a column-major
    load's .tir type is its memory's; stores.py writes element (r, c) of the value at (c, r) of it."""
    from dataclasses import replace
    if t.rank != 2:
        raise EmitError(f"output '{t.value}': a column-major output is a 2-d tile")
    return replace(t, tile=t.tile[::-1], axes=t.axes[::-1], column_major=True)


def _viewed(t: GlobalTensor, op) -> GlobalTensor:
    """Load `t` as its op's attributes view its argument: `{col_stride = S, col_offset = O}` loads the
    row of S times the tile's columns that holds them (one TMA box; the readers take every S-th
    element from the O-th, ColsView), `{iter_div = D}` reads a per-iteration tile's row per D iterations."""
    from dataclasses import replace
    stride, offset, div = (int(op.attr(k, d)) for k, d in (("col_stride", 1), ("col_offset", 0), ("iter_div", 1)))
    if stride > 1 and (t.tile[0] != 1 or not 0 <= offset < stride):
        raise EmitError(f"load '{op.name}': a strided view (col_stride = {stride}, col_offset = {offset}) is "
                        "emitted for a one-row tile with an offset below the stride")
    if div > 1 and not t.per_iteration:
        raise EmitError(f"load '{op.name}': iter_div = {div} needs a tile read once per iteration (no axis along "
                        "the loop)")
    return replace(t, tile=(t.tile[0], t.tile[1] * stride), col_stride=stride, col_offset=offset, iter_div=div,
                   column_major=bool(op.attr("column_major", False)), transposed=bool(op.attr("transposed", False)),
                   unbatched=op.unbatched)
