"""Sub-tiling: a graph whose tiles have M rows as `parts` independent graphs of M / parts rows.

FA3 and CUTLASS's cooperative GEMM run a 128-row tile as two 64-row halves on two consumer
warpgroups; Triton does the same with `num_warps = 8` (the mma layout's warpsPerCTA = [8, 1]).
The Twill paper sub-tiles its graphs by hand (examples/gemm_hopper.tir, attention_fwd_hopper.tir);
`split_rows` does it for any graph, so a Triton kernel imported with its 128-row tile can be
scheduled as the halves it runs as.

Which values have rows: an mma's result, its first operand (a, used M x K) and its accumulator
all share the mma's M rows; an elementwise op or a row reduction shares the rows of every tile it
reads or makes whose first dimension is M; a carry shares them with the op that yields it. The
second operand of an mma (K, V, a GEMM's B) has none: the parts read it as it is. Every value
with rows becomes `parts` values (NAME0, NAME1, ...: a load becomes loads of its rows, a carry
carries, an input inputs), and each op that makes one is repeated for each part.
"""
from __future__ import annotations

import math
from dataclasses import replace

from .errors import Diagnostic, InputError
from .ir import Graph, Op, Operand, Value


def split_rows(graph: Graph, parts: int) -> Graph:
    """`graph` with the rows of its row-carrying values split into `parts` (see the module doc)."""
    if parts == 1:
        return graph
    rows, m = _row_values(graph)
    if not rows:
        raise InputError(Diagnostic(f"{graph.file}: no mma in the loop gives its tiles rows to split",
                                    hint="sub-tiling splits the M rows of a loop's mma tiles"))
    if m % parts or (m // parts) % 64:
        raise InputError(Diagnostic(f"{graph.file}: {m} rows cannot be split into {parts} parts of a multiple of "
                                    "64 rows (a wgmma's M)", hint="split into parts of 64 or 128 rows"))
    rows = rows | _epilogue_row_inputs(graph, rows, m)
    names = {v.name for v in graph.inputs + graph.carries} | {op.name for op in graph.ops}
    part = {v: [_part_name(v, i, names) for i in range(parts)] for v in rows}

    def operand(o: Operand, i: int) -> Operand:
        return replace(o, name=part[o.name][i]) if o.name in rows else o

    def value(v: Value) -> list[Value]:
        if v.name not in rows:
            return [v]
        return [replace(v, name=part[v.name][i], type=_fewer_rows(v.type, m // parts)) for i in range(parts)]

    ops = []
    for op in graph.ops:
        if op.name not in rows:
            ops.append(op)
            continue
        for i in range(parts):
            ops.append(replace(op, name=part[op.name][i], operands=tuple(operand(o, i) for o in op.operands),
                               type=_fewer_rows(op.type, m // parts), attrs=_part_attrs(op, i * (m // parts))))
    yields = [(part[c][i] if c in rows else c, part[r][i] if r in rows else r)
              for c, r in graph.yields for i in range(parts if c in rows else 1)]
    epilogue, arguments = _split_epilogue(graph, rows, part, m, parts, names)
    split = Graph(graph.kernel, tuple(v for x in graph.inputs for v in value(x)),
                  tuple(v for x in graph.carries for v in value(x)), tuple(ops), tuple(yields), file=graph.file,
                  epilogue=epilogue, arguments=arguments, also_fed=graph.also_fed, knobs=graph.knobs, split=graph.split,
                  extents=graph.extents, loop_extent=graph.loop_extent,
                  prologue=_split_prologue(graph, rows, part, m, parts))
    from .tir import parse_tir, print_tir
    return parse_tir(print_tir(split), graph.file)  # checked as any graph, result-less ops named afresh


def grow_rows(graph: Graph, factor: int) -> Graph:
    """`graph` with `factor` of its row tiles computed at once: every value with the rows of the
    loop's mma tiles (as `split_rows` finds them) gets factor x M rows, and the values without
    rows (a GEMM's B, attention's K and V) stay as they are, read once for all of them.
    `split_rows(grow_rows(g, k), k)` is k parts of M rows, each a tile of g, that share those
    reads: CUTLASS's 256-row cooperative GEMM tile, whose SM loads a quarter fewer bytes per
    FLOP than a 128 x 128 tile's (48 KB per 64 columns of K for two tiles instead of 64 KB)."""
    if factor == 1:
        return graph
    return _taller(graph, lambda m: m * factor, "growing takes several row tiles of a loop's mma at once",
                   "import without --grow-rows")


# The fewest rows of the tensor core's mma: a wgmma's m64, and tcgen05's M = 64 (or 128)
MMA_MIN_ROWS = 64


def pad_rows(graph: Graph) -> Graph:
    """`graph` whose loop's mma tiles have fewer rows than the tensor core's smallest M (GQA
    decode's 16 query heads of one KV head, a dot Triton runs on mma.sync) with those tiles padded
    to MMA_MIN_ROWS rows, and `grid rows = M` recording the kernel's own: every value with the rows
    of the mma tiles (as `split_rows` finds them) gets 64, the values without rows (K, V) stay as
    they are. The cost model so sees the 64-row mma that runs. The padded rows are zero where
    loaded (TMA fills a partial tile's rows past the tensor's extent) and never stored (each
    program's rows are a partial last tile of one batch entry: docs/emit-cuda.md, "Fewer rows than
    the tensor core's"); rows are independent through every op that keeps them (a row reduction
    reduces along the columns), so nothing a padded row computes reaches a stored row. The graph as
    it is where its tiles have MMA_MIN_ROWS rows or more."""
    if all(op.type is None or len(op.type.shape) != 2 or op.type.shape[0] >= MMA_MIN_ROWS
           for op in graph.ops if op.opcode == "mma"):
        return graph
    rows, m = _row_values(graph)
    if not rows or m >= MMA_MIN_ROWS:
        return graph
    if graph.split:
        raise InputError(Diagnostic(f"{graph.file}: a split of the loop (grid split = {graph.split}) with tiles of "
                                    f"{m} rows, fewer than the tensor core's {MMA_MIN_ROWS}: padding a split "
                                    "kernel's rows is not built", _first_mma(graph).span))
    padded = _taller(graph, lambda _: MMA_MIN_ROWS, f"padding gives the tiles of a loop's mma {MMA_MIN_ROWS} rows",
                     f"put {MMA_MIN_ROWS} or more rows in the dot's tile (a larger BLOCK_M)")
    return replace(padded, tile_rows=m)


def _first_mma(graph: Graph) -> Op:
    return next(op for op in graph.ops if op.opcode == "mma")


def _taller(graph: Graph, rows_of, why: str, hint: str) -> Graph:
    """`graph` with every value with the rows of the loop's mma tiles made rows_of(M) rows tall."""
    rows, m = _row_values(graph)
    if not rows:
        raise InputError(Diagnostic(f"{graph.file}: no mma in the loop gives its tiles rows to grow", hint=why))
    masked = [op for op in graph.prologue.ops + graph.ops + graph.epilogue.ops
              if op.opcode in ("mask", "causal_mask") and (op.name in rows or any(o.name in rows for o in op.operands))]
    if masked:
        raise InputError(Diagnostic(f"{graph.file}: op '{masked[0].name}' masks the rows of a tile: its row "
                                    "indices would change with the tile's height", masked[0].span, hint=hint))
    rows = rows | _epilogue_row_inputs(graph, rows, m)
    grown = set(rows)
    for op in graph.epilogue.ops:  # an epilogue op with the rows, over a grown value
        if op.type is not None and op.type.shape[:1] == (m,) and any(o.name in grown for o in op.operands):
            grown.add(op.name)
    tall = rows_of(m)

    def more(t):
        return None if t is None else replace(t, shape=(tall,) + tuple(t.shape[1:]))

    def value(v: Value) -> Value:
        return replace(v, type=more(v.type)) if v.name in grown else v

    def op(o: Op) -> Op:
        return replace(o, type=more(o.type)) if o.name in grown else o

    bigger = replace(graph, inputs=tuple(value(v) for v in graph.inputs),
                     carries=tuple(value(v) for v in graph.carries), ops=tuple(op(o) for o in graph.ops),
                     prologue=replace(graph.prologue, ops=tuple(op(o) for o in graph.prologue.ops)),
                     epilogue=replace(graph.epilogue, ops=tuple(op(o) for o in graph.epilogue.ops)))
    from .tir import parse_tir, print_tir
    return _spans_of(graph, parse_tir(print_tir(bigger), graph.file))


def _spans_of(old: Graph, new: Graph) -> Graph:
    """`new` (reparsed from `old` made taller) with each op's and value's span from `old`: where the
    import read it (its TTGIR line), not the line of the text it was reparsed from."""
    spans = {o.name: o.span for o in old.ops + old.prologue.ops + old.epilogue.ops} | \
        {v.name: v.span for v in old.inputs + old.carries}

    def keep(x):
        return replace(x, span=spans[x.name]) if spans.get(x.name) is not None else x

    return replace(new, inputs=tuple(map(keep, new.inputs)), carries=tuple(map(keep, new.carries)),
                   ops=tuple(map(keep, new.ops)), prologue=replace(new.prologue, ops=tuple(map(keep, new.prologue.ops))),
                   epilogue=replace(new.epilogue, ops=tuple(map(keep, new.epilogue.ops))))


def auto_grow(graph: Graph) -> int:
    """The row tiles `--grow-rows auto` computes at once: 2 where the loop is a plain GEMM's (only
    loads and mmas, an mma reading a load without rows, tiles of 64 or 128 rows whose accumulators
    fit half of a warpgroup's registers, 128 x 128 f32, as each grown tile is one warpgroup's) and its epilogue
    computes at most one op over each tile besides conversions (a scale), else 1. Measured on an
    H100 (docs/ttgir-import.md, "Growing"): 3-8% faster (32% on an 8192 x 8192 fp8 GEMM) from about
    one wave of grown tiles up, up to 1.9x slower with fewer tiles than SMs; where the epilogue
    computes (GEMM + GELU) or the loop does (W4A16's dequantization), slower at the size measured."""
    from .vocab import lookup
    if any(op.opcode not in ("load", "mma") for op in graph.prologue.ops + graph.ops):
        return 1
    try:
        rows, m = _row_values(graph)
    except InputError:
        return 1
    loads = {op.name for op in graph.ops if op.opcode == "load"}
    shared = any(op.opcode == "mma" and len(op.operands) > 1 and op.operands[1].name in loads - rows
                 for op in graph.ops)
    if not rows or m not in (64, 128) or not shared:
        return 1
    held = sum(math.prod(c.type.shape) for c in graph.carries if c.name in rows and c.type is not None)
    if held > 128 * 128:  # a grown tile is one warpgroup's: its accumulators in half its registers
        return 1
    moves = {"join", "convert"}
    per_tile = [op for op in graph.epilogue.ops if op.type is not None and op.type.shape[:1] == (m,)
                and getattr(lookup(op.opcode), "family", None) not in moves]
    outputs = [n for n, v in graph.epilogue.outputs] or [c.name for c in graph.carries]
    if len(per_tile) > len(outputs):
        return 1
    try:
        grow_rows(graph, 2)
    except InputError:
        return 1
    return 2


def auto_parts(graph: Graph, warpgroups: int) -> int:
    """The parts `--split-rows auto` makes: the warpgroups the kernel's author ran the rows of its
    mma tiles on (Triton's mma layout, `twill.ttgir.row_warpgroups`), where each part keeps a
    multiple of 64 rows (a wgmma's M) and the rows can be split at all; else 1, the graph as it is."""
    if warpgroups < 2:
        return 1
    try:
        _, m = _row_values(graph)
    except InputError:  # an mma reads a row tile as its second operand: no split, and no error for asking
        return 1
    if not (m and m % (64 * warpgroups) == 0):
        return 1
    try:
        split_rows(graph, warpgroups)
    except InputError:  # the rows cannot be split (an epilogue input with the rows): the graph whole
        return 1
    return warpgroups


def _part_attrs(op: Op, row0: int) -> tuple:
    """A part's attributes: a mask of element indices (twill.vocab) compares the tile's rows, so the
    part starting at row `row0` counts its rows from there (offset + rows * row0)."""
    if op.opcode != "mask":
        return op.attrs
    a = dict(op.attrs)
    return tuple((k, a["offset"] + a["rows"] * row0 if k == "offset" else v) for k, v in op.attrs)


def _row_values(graph: Graph) -> tuple[set[str], int]:
    """The names of the values that share the rows of the loop's mma tiles (a fixpoint), and M."""
    types = {v.name: v.type for v in graph.inputs + graph.carries} | {o.name: o.type for o in graph.ops if o.type}
    rows: set[str] = set()
    mmas = [op for op in graph.ops if op.opcode == "mma" and op.type is not None and len(op.type.shape) == 2]
    for op in mmas:
        a = types.get(op.operands[0].name)
        if a is not None and a.shape and a.shape[0] == op.type.shape[0]:  # a used M x K (not transposed)
            rows |= {op.name, op.operands[0].name} | {o.name for o in op.operands[2:]}
    if not rows:
        return rows, 0
    m = next(types[n].shape[0] for n in rows)
    changed = True
    while changed:
        before = len(rows)
        for op in graph.prologue.ops + graph.ops:  # a prologue op: as an elementwise op of the loop
            if op.opcode == "mma":
                if op.name in rows:
                    rows |= {op.operands[0].name} | {o.name for o in op.operands[2:]}
                continue
            tiles = [o.name for o in op.operands if o.name in types and types[o.name].shape[:1] == (m,)]
            if op.name in rows or any(t in rows for t in tiles):  # a store of a row tile is split with it
                rows |= set(tiles) | ({op.name} if op.type is None or op.type.shape[:1] == (m,) else set())
        for c, r in graph.yields:  # a carry and the op that yields it
            if c in rows or r in rows:
                rows |= {c, r}
        changed = len(rows) != before
    for op in mmas:
        if len(op.operands) > 1 and op.operands[1].name in rows:
            raise InputError(Diagnostic(f"{graph.file}: op '{op.name}' reads the row-split '{op.operands[1].name}' "
                                        "as its second operand; the rows cannot be split", op.span))
    return rows, m


def _epilogue_row_inputs(graph: Graph, rows: set[str], m: int) -> set[str]:
    """The inputs only the epilogue reads that have the M rows (a per-row scale or sum `[M]`, a
    residual `[M, N]`) where an epilogue op reads them beside a split value: split with it, each
    part reading its rows (as a split prologue input is: LSE0, LSE1)."""
    loop_reads = {o.name for op in graph.ops for o in op.operands} | {o.name for op in graph.prologue.ops
                                                                       for o in op.operands}
    with_rows = {op.name for op in graph.epilogue.ops if op.type is not None and op.type.shape[:1] == (m,)}
    with_rows |= {v.name for v in graph.inputs if v.type is not None and v.type.shape[:1] == (m,)}
    # the epilogue values of M rows joined to a split value through ops of M rows, either way
    # (addmm's `acc + mul C, beta`: C and its product are split as acc is)
    joined, grew = set(rows), True
    while grew:
        grew = False
        for op in graph.epilogue.ops:
            near = {op.name} | {o.name for o in op.operands}
            if op.name in with_rows and near & joined and not near & with_rows <= joined:
                joined |= near & with_rows
                grew = True
    return {v.name for v in graph.inputs if v.name in joined and v.name not in loop_reads and v.name not in rows
            and v.type is not None and v.type.shape[:1] == (m,) and not v.computed}


def _split_epilogue(graph: Graph, rows: set[str], part: dict, m: int, parts: int, names: set[str]):
    """The epilogue of the split graph: an op reading a split value (or a split op's result) is one
    op per part when its result has the M rows, and so is an output written from one; the argument
    that fed a split value feeds its parts, which the binding takes as one tensor (`STEM`)."""
    e = graph.epilogue
    split = set(rows)
    inputs = {v.name: v.type for v in graph.inputs if v.type is not None}
    ops = []
    names |= {op.name for op in e.ops} | {n for n, _ in e.outputs}
    for op in e.ops:
        if not any(o.name in split for o in op.operands) or op.type is None or op.type.shape[:1] != (m,):
            if any(o.name in split for o in op.operands):
                raise InputError(Diagnostic(f"epilogue op '{op.name}' combines the rows of split values: they "
                                            "cannot be split", op.span))
            ops.append(op)
            continue
        whole = [o.name for o in op.operands if o.name not in split and o.name in inputs
                 and inputs[o.name].shape[:1] == (m,)]
        if whole:  # an input of the epilogue with the M rows (a per-row scale): not split (yet)
            raise InputError(Diagnostic(f"epilogue op '{op.name}' reads '{whole[0]}', which has the {m} rows of "
                                        "the split tiles: an input of the epilogue is not split into parts",
                                        op.span, hint="import without --split-rows"))
        split.add(op.name)
        part[op.name] = [_part_name(op.name, i, names) for i in range(parts)]
        for i in range(parts):
            operands = tuple(replace(o, name=part[o.name][i]) if o.name in split else o for o in op.operands)
            ops.append(replace(op, name=part[op.name][i], operands=operands, type=_fewer_rows(op.type, m // parts)))
    outputs = []
    for name, value in e.outputs:
        if value not in split:
            outputs.append((name, value))
            continue
        if name not in part:
            part[name] = [_part_name(name, i, names) for i in range(parts)]
        outputs += [(part[name][i], part[value][i]) for i in range(parts)]
    return replace(e, ops=tuple(ops), outputs=tuple(outputs)), graph.arguments


def _split_prologue(graph: Graph, rows: set[str], part: dict, m: int, parts: int):
    """The prologue of the split graph: each part computes the rows it reads. A prologue op with
    rows (its result is a computed input that a split loop op reads, or it reads a split input) is
    one op per part over that part's operands, as a loop op is; the others stay whole. A prologue
    op whose result has no rows but that reads a row value would combine the parts' rows: refused."""
    p = graph.prologue
    ops = []
    for op in p.ops:
        if op.name not in rows:
            if any(o.name in rows for o in op.operands):
                raise InputError(Diagnostic(f"prologue op '{op.name}' combines the rows of split values: they "
                                            "cannot be split", op.span))
            ops.append(op)
            continue
        for i in range(parts):
            operands = tuple(replace(o, name=part[o.name][i]) if o.name in rows else o for o in op.operands)
            ops.append(replace(op, name=part[op.name][i], operands=operands, type=_fewer_rows(op.type, m // parts),
                               attrs=_part_attrs(op, i * (m // parts))))
    return replace(p, ops=tuple(ops))


def _fewer_rows(t, rows: int):
    return None if t is None else replace(t, shape=(rows,) + tuple(t.shape[1:]))


def _part_name(name: str, i: int, taken: set[str]) -> str:
    """NAME0, NAME1, ... (NAME_0 where a name ends in a digit or NAMEi is taken)."""
    cand = f"{name}{i}" if not name[-1].isdigit() else f"{name}_{i}"
    while cand in taken:
        cand += "_"
    taken.add(cand)
    return cand
