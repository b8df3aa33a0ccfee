"""The epilogue's `gather x, index` (docs/formats.md, "The epilogue"): one element a row of the tensor in
global memory that the loop's load x walks, at the column index[r] of row r (a cross-entropy's target
logit, `tl.load(X + row * stride + tl.load(TARGET + row))`).

Each thread reads, for each row it holds, one element with an ordinary `ld.global` (`twill::gather_rows`):
`x + batch * bs + r * rs + index[r]`, rs and bs the row and batch strides x's TMA map is encoded with (a
row pitch: Problem::NAME_row_stride, host.py), and an index checked against `cols`, the tensor's row length
along the loop. So the kernel's Args hold x's pointer beside its tensor map, its row length (`x_cols`, set by
launch() from the loop's extent) and its strides (`x_rs`, `x_bs`).
An index outside [0, cols) reads nothing and gives 0 (Triton's kernel would read whatever lies there; the
binding documents it). The index is the epilogue's fragment of an i32/i64 input, held as a float, exact
for indices below 2^24 (16.7M columns).
"""
from __future__ import annotations

from ..ir import Graph
from . import splits
from .lines import Lines
from .model import EmitError, local
from .ops import Arg, fragment_type


def gathered(graph: Graph) -> list[str]:
    """The loop's loads the epilogue's gathers read (each once, in the epilogue's order)."""
    return list(dict.fromkeys(op.operands[0].name for op in graph.epilogue.ops if op.opcode == "gather"))


def tensor_of(m, load: str):
    t = next((x for x in m.tensors if x.kind == "load" and x.value == load), None)
    if t is None or t.axes != ("m", "loop") or t.col_stride != 1 or t.column_major or t.iter_div != 1:
        raise EmitError(f"gather of load '{load}': emit-cuda gathers from a load whose rows are the grid's and whose "
                        "columns are the loop's, read row-major as they lie")
    return t


def arg_fields(m) -> list[str]:
    return [line for x in gathered(m.graph) for line in (
        f"int {tensor_of(m, x).name}_cols;  // the row length of load {x}'s tensor, for a gather",
        f"size_t {tensor_of(m, x).name}_rs, {tensor_of(m, x).name}_bs;  // its row and batch strides (its TMA map's)")]


def copy_lines(m) -> list[str]:
    """launch()'s lines that set the gathered tensors' row lengths and strides (host.py's NAME_rs and NAME_bs,
    the strides its tensor map is encoded with)."""
    out = []
    for x in gathered(m.graph):
        t = tensor_of(m, x)
        out.append(f"args.{t.name}_cols = static_cast<int>({splits.scale_loop(m, f'loop_elements(p, {t.tile[1]})')});")
        out.append(f"args.{t.name}_rs = {t.name}_rs;  args.{t.name}_bs = {t.name}_bs;")
    return out


def emit(fin, out: Lines, op, index: Arg) -> Arg:
    """`gather x, index` into a row fragment of the role that runs the epilogue."""
    m, r = fin.m, fin.body.r
    t = tensor_of(m, op.operands[0].name)
    if index.where != "reg":
        raise EmitError(f"gather '{op.name}': its index is no row vector the role holds")
    rows, _, batch = r._origin(t, "0")
    nrows, cols = r._extent(t, 0), f"args.{t.name}_cols"
    res = Arg(op.name, op.type, "reg", f"{local(op.name)}_ep")
    out(f"{fragment_type(m, op.type, fin.body.groups)} {res.expr};  // epilogue {op.name} = gather "
        + ", ".join(o.name for o in op.operands))
    base = (f"args.{t.name} + static_cast<size_t>({batch}) * args.{t.name}_bs + static_cast<size_t>({rows}) * "
            f"args.{t.name}_rs")
    out(f"twill::gather_rows({res.expr}, {index.expr}, {base}, {fin.body.row0(op.type.shape[0])}, {cols}, "
        f"args.{t.name}_rs, {nrows} - ({rows}));")
    return res
