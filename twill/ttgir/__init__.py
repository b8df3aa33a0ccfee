"""Import a Triton TTGIR dump (before or after Triton's own pipeliner) as a tile-loop graph.

    graph, warnings = import_ttgir(text, "attn.ttgir")          # the loop with the most tile ops
    graph, warnings = load_ttgir("attn.ttgir", loop=1, strict=True)

The stages read top to bottom (docs/ttgir-import.md says what each keeps, folds and drops):

    text -> before_pipeliner (dump.py)        from a whole pass-by-pass dump, the IR before the pipeliner
         -> parse_module (parser.py)          MLIR text to a tree of operations, any dialect
         -> collapse_draws (rand.py)          tl.rand's inlined Philox rounds, checked by value, as one op
         -> merge_partitions (partitions.py)  a warp-specialized loop's partitions as one loop
         -> merge_candidates (merge.py)       loops in sequence that are one masked loop (causal attention)
         -> choose_loop (loops.py)            which scf.for is the graph; loops left out are errors or warnings
         -> lower_loop (lower.py)             one scf.for to tile nodes, carries and yields; the walk's
                                              state in state.py, the op groups in opnames.py, the
                                              handlers in scalars.py, memory.py, compute.py, generic.py,
                                              carries' output dtypes in outputs.py, column reads in columns.py
         -> depipeline (depipe.py)            Triton's pipelining undone: delays, peeled starts, source order
         -> fuse (fuse.py)                    elementwise chains to single ops; copies folded
         -> build_graph (build.py)            readable names; a frozen `twill.ir.Graph`
         -> kmajor_loads (kmajor.py)          a TF32 / fp8 / int8 operand loaded MN-major typed as the
                                              tensor core reads it, K-major, `{transposed = true}`
         -> check_grid (grid.py)              program ids the graph does not represent: an error
                                              (a loop's range that moves with one, a store offset by one)

Tile loops in sequence are an error here (`loops.SiblingLoops`); `sequence.import_sequence` imports
them as a `twill.sequence.Sequence`, each loop through the same stages, its reads of earlier loops'
results handed over (handover.py).

Warnings are `Diagnostic`s with severity "warning" (an op the importer does not know, a carry
that does not start from a constant). With ``strict`` the unknown-op ones are errors. Malformed input
is an `InputError` pointing at the line and column.
"""
from __future__ import annotations

import os
import re
from dataclasses import replace

from ..errors import Diagnostic, InputError
from ..fileio import read_text
from ..ir import Graph
from ..split import MMA_MIN_ROWS, auto_grow, auto_parts, grow_rows as grow_rows_of, pad_rows, split_rows as split_rows_of
from .build import build_graph
from .depipe import depipeline
from .dump import before_pipeliner
from .fuse import fuse
from .kmajor import kmajor_loads
from .grid import UnexpressedGrid, check as check_grid
from .lower import lower_loop, show_columns
from .loops import choose_loop
from .merge import Merge, loop_shape, merge_candidates
from .parser import Module, MOp, parse_module
from .rowprog import rows_per_program
from .partitions import merge_partitions
from .rand import collapse as collapse_draws
from .values import Note, Tile

__all__ = ["import_ttgir", "load_ttgir", "row_parts", "row_warpgroups", "target_capability"]


def import_ttgir(text: str, file: str = "<string>", loop: int | None = None,
                 strict: bool = False, split_rows: int | str = 1, grow_rows: int | str = 1) -> tuple[Graph, list[Diagnostic]]:
    """The tile-loop graph of one top-level `scf.for` of `text`, and the import's warnings.

    `split_rows` sub-tiles the graph (twill.split): a count of parts, or "auto", the warpgroups
    Triton's mma layout puts the rows on, counted on the module parsed here (`split.auto_parts`).
    A split graph gets no hint to split it. `grow_rows` > 1 computes that many of the kernel's row
    tiles at once (twill.split.grow_rows), each its own part (with a count of split parts, each
    tile split into them; with "auto", not split), and "auto" grows where `split.auto_grow` says.

    `loop` picks the N-th loop (0-based, counting every function's loops in file order, an outer
    loop before the loops inside it); by default the innermost loop that computes tiles is taken, and
    several such loops one after the other are an error (loops.py). A whole ``MLIR_ENABLE_DUMP`` log is
    accepted too: the copy of the IR printed before the pipeliner is used.
    """
    module, loops, merged, merge_of, absorbed = _module_loops(text, file)
    if loop is not None and not 0 <= loop < len(loops):
        raise InputError(Diagnostic(f"{file}: there is no loop {loop}; the file has {len(loops)} "
                                    f"loop{'s' if len(loops) > 1 else ''} (0..{len(loops) - 1})"))
    if loop in absorbed:
        loop = next(k for k, (_, path) in enumerate(loops) if path[-1] is merged[loop][1][-1])
    graph, notes = choose_loop(module, loops, loop,
                               lambda func, path: _import_loop(module, func, path, merge_of.get(id(path[-1]))),
                               absorbed)
    if not graph.ops:
        raise InputError(Diagnostic(f"{file}: no loop of the file computes a tile: nothing to schedule",
                                    hint="twill schedules tile loops (loads, dots, reductions); dump a kernel "
                                         "with such a loop"))
    graph = _padded(graph)
    groups = _row_warpgroups(module)
    grow, parts = row_parts(graph, text, groups, split_rows, grow_rows)
    graph = grow_rows_of(graph, grow) if grow > 1 else graph
    hint = _warpgroups_hint(groups, graph, file) if parts == 1 else None
    if hint is not None:
        notes = [*notes, hint]
    graph = split_rows_of(graph, parts) if parts > 1 else graph
    unknown = [n.diagnostic for n in notes if n.unknown]
    if strict and unknown:
        raise InputError(*(replace(d, severity="error") for d in unknown))
    return graph, [n.diagnostic for n in notes]


def _padded(graph: Graph) -> Graph:
    """The graph with a dot of fewer rows than the tensor core's smallest M padded to it
    (twill.split.pad_rows: GQA decode's 16 query heads become a 64-row tile, `grid rows = 16`); where
    the rows cannot be padded, an error at the dot naming why."""
    try:
        return pad_rows(graph)
    except InputError as err:
        mma = next((op for op in graph.ops if op.opcode == "mma" and op.type is not None), None)
        if mma is None:
            raise
        d = err.diagnostics[0]
        raise InputError(Diagnostic(
            f"'{mma.name}' makes a tile of {mma.type.shape[0]} rows, fewer than the {MMA_MIN_ROWS} of the tensor core's "
            f"smallest mma (wgmma, tcgen05), and its rows cannot be padded to {MMA_MIN_ROWS}: "
            + d.message.split(": ", 1)[-1], mma.span,
            hint=d.hint or f"make the dot's rows (M) {MMA_MIN_ROWS} or more (a larger BLOCK_M)")) from None


def row_parts(graph: Graph, text: str, warpgroups: int, split_rows: int | str = 1,
              grow_rows: int | str = 1) -> tuple[int, int]:
    """(row tiles grown into one, parts split into) for `import_ttgir`'s `split_rows` and
    `grow_rows` on the graph as imported, `text` its dump and `warpgroups` Triton's for its rows.
    "auto" grows for Hopper only: the rule was measured there (split.auto_grow); tcgen05 on sm_100
    has its own answer to a taller tile (a CTA pair's MMA), not built. Each grown tile is a part,
    split further only where a count of parts is given."""
    if graph is not None and graph.tile_rows:  # padded (pad_rows): one 64-row tile per program, neither grown nor split
        given = [f"--{n} {v}" for n, v in (("grow-rows", grow_rows), ("split-rows", split_rows)) if v != "auto" and int(v) > 1]
        if given:
            raise InputError(Diagnostic(f"{graph.file}: {' and '.join(given)}: the kernel's tiles have {graph.tile_rows} "
                                        f"rows, padded to {MMA_MIN_ROWS} (grid rows = {graph.tile_rows}), which are "
                                        "neither grown nor split (not built)", hint="import without them"))
        return 1, 1
    grow = (auto_grow(graph) if target_capability(text) == 90 else 1) if grow_rows == "auto" else int(grow_rows)
    if grow > 1:
        return grow, grow * (1 if split_rows == "auto" else int(split_rows))
    return 1, auto_parts(graph, warpgroups) if split_rows == "auto" else int(split_rows)


def _one_block(func: MOp, text: str, file: str) -> None:
    """A function whose body is several blocks (an early return under a condition, `if start_m *
    BLOCK_M >= seq_len: return`, is a `cf.cond_br` to a block that returns) is an error at the
    branch: the import reads the first block alone, and would find no loop or drop the condition."""
    from .lexer import Source
    blocks = func.regions[0] if func.regions else ()
    if len(blocks) <= 1 or not blocks[0].ops:
        return
    branch = blocks[0].ops[-1]
    raise Source(text, file).error(
        f"'{branch.name}' branches the kernel's body into {len(blocks)} blocks (an early return under a condition): "
        "control flow outside structured scf ops is not imported", branch.head,
        hint="guard the tile with masks instead of returning early (or launch only the tiles that have work)")


STORES = {"tt.store", "tt.descriptor_store", "ttng.async_tma_copy_local_to_global", "ttng.async_tma_store"}


def _flattened(func: MOp, module: Module) -> None:
    """A loop whose body runs a dot and, under an `scf.if`, stores (Triton's `tl.range(..., flatten=True)` over a
    persistent kernel's tiles: the tile loop and its K loop fused into one loop of tiles x K steps, the accumulator
    reset and the tile stored when a tile's last K step is reached) is an error at the loop. Taken apart it is no
    loop twill has: the K loop is gone, and the tile loop's range moves with the program id."""
    from .loops import DOTS
    from .parser import walk
    for op in walk(func.body()):
        if op.name != "scf.for":
            continue
        body = list(op.body())
        if not any(o.name in DOTS for o in body):
            continue
        guarded = next((o for o in body if o.name == "scf.if" and any(x.name in STORES for x in walk(o.body()))), None)
        if guarded is not None:
            raise module.source.error(
                f"'scf.for' runs a persistent kernel's tiles and their K steps as one loop (Triton's `tl.range(..., "
                f"flatten=True)`: a dot in the loop, and the tile's store under the 'scf.if' at line "
                f"{guarded.head.line}, taken when a tile's last K step is reached): a flattened loop nest is not "
                "imported", op.head,
                hint="write the tile loop without flatten=True: its K loop is then the graph, run once per tile "
                     "(docs/ttgir-import.md, section 2)")


def _module_loops(text: str, file: str):
    """The module, its loops ((function, path) pairs), the merge candidates, each merged loop's
    `Merge` by id of its loop, and the loops absorbed into a merged pair."""
    source = before_pipeliner(text, file)
    module = rows_per_program(merge_partitions(collapse_draws(parse_module(source, file))))
    for func in module.functions():
        _one_block(func, source, file)
        _flattened(func, module)
    loops = [(func, path) for func in module.functions() for path in _loops(func.body())]
    if not loops:
        raise InputError(Diagnostic(f"{file}: no scf.for loop in any function",
                                    hint="dump the TTGIR of a kernel with a loop, before the pipeliner"))
    # A loop merged into its masked neighbour (merge.py) is not a loop of its own: the pair is imported
    # as the masked loop, which `--loop` naming either one picks.
    merged = merge_candidates(loops, lambda func, m: _same_graph(module, loops, func, m))
    merge_of = {id(path[-1]): m for _, path, m in merged if m is not None}
    absorbed = frozenset(k for k, (_, path) in enumerate(loops) if any(path[-1] is m.first for m in merge_of.values()))
    return module, loops, merged, merge_of, absorbed


def load_ttgir(path, loop: int | None = None, strict: bool = False,
               split_rows: int | str = 1, grow_rows: int | str = 1) -> tuple[Graph, list[Diagnostic]]:
    """Read a `.ttgir` file and import it; spans and `Graph.file` name `path` as given."""
    file = os.fspath(path)
    return import_ttgir(read_text(file, "TTGIR file"), file, loop=loop, strict=strict, split_rows=split_rows,
                        grow_rows=grow_rows)


def row_warpgroups(text: str, file: str = "<string>") -> int:
    """The warpgroups Triton spreads the rows of the module's mma tiles over (an nvidia_mma layout's
    warpsPerCTA = [4 G, 1]: G), 1 where none does (`twill import --split-rows auto` reads it)."""
    return _row_warpgroups(parse_module(before_pipeliner(text, file), file))


def target_capability(text: str) -> int | None:
    """The compute capability the module was compiled for (`ttg.target = "cuda:90"`), or None."""
    found = re.search(r'(?:ttg|triton_gpu)\.target"?\s*=\s*"cuda:(\d+)"', text)
    return int(found.group(1)) if found else None


def _row_warpgroups(module: Module) -> int:
    from .types import _int_list
    groups = 1
    for tokens in module.aliases.values():
        if tokens and tokens[0].text in ("#ttg.nvidia_mma", "#triton_gpu.nvidia_mma"):
            warps = _int_list(tokens, "warpsPerCTA")
            if warps and len(warps) == 2 and warps[1] == 1 and warps[0] % 4 == 0:
                groups = max(groups, warps[0] // 4)
    return groups


def _warpgroups_hint(groups: int, graph: Graph, file: str) -> Note | None:
    """A note where Triton runs the rows of an mma tile on several warpgroups (`groups`, from an
    nvidia_mma layout with warpsPerCTA = [8, 1], say: num_warps = 8) and twill's graph gives each op one."""
    rows = [op.type.shape[0] for op in graph.ops if op.opcode == "mma" and op.type and len(op.type.shape) == 2]
    if groups < 2 or not rows or max(rows) % (64 * groups):
        return None
    return Note(Diagnostic(f"{file}: Triton runs the rows of this loop's {max(rows)}-row mma tiles on {groups} "
                           "warpgroups (its mma layout's warpsPerCTA); the graph gives each op to one",
                           hint=f"--split-rows {groups} imports them as {groups} independent parts of "
                                f"{max(rows) // groups} rows, as Triton runs them (FA3's sub-tiling)",
                           severity="warning"))


def _loops(ops, enclosing: tuple[MOp, ...] = ()) -> list[tuple[MOp, ...]]:
    """Every `scf.for` among `ops`, at any depth of loops and branches, in file order (an outer loop
    before the loops in its body), each as the path of ops that encloses it, ending with itself."""
    out = []
    for op in ops:
        if op.name == "scf.for":
            out.append(enclosing + (op,))
        if op.name in ("scf.for", "scf.if", "scf.while"):
            for region in op.regions:
                for block in region:
                    out += _loops(block.ops, enclosing + (op,))
    return out


def _same_graph(module: Module, loops, func: MOp, merge: Merge) -> bool:
    """Do the two loops of `merge` import to one tile graph once the last one's masks are set
    aside (each lowered from its own inits)? Triton's pipeliner writes each loop its own way."""
    path_of = {id(path[-1]): path for f, path in loops if f is func}
    if id(merge.first) not in path_of or id(merge.last) not in path_of:
        return False
    try:
        first = _lower(module, func, path_of[id(merge.first)])
        last = _lower(module, func, path_of[id(merge.last)], merge.on_its_own())
    except InputError:
        return False
    return loop_shape(first) == loop_shape(last, unmask=True)


def _flat_size_unread(graph: Graph, size: str) -> None:
    """A flat map's element count is the binding's to derive from the tensors (`grid flat = N` feeds nothing
    else): a prologue op reading it as a number (`float(n_elements)`, ttgir/scalarexpr.py) is an error there."""
    op = next((op for op in graph.prologue.ops + graph.ops if any(o.name == size for o in op.operands)), None)
    if op is not None:
        raise InputError(Diagnostic(
            f"the flat map's element count '{size}' is read as a number (by '{op.name}'): the binding derives it "
            "from the tensors, so no launch scalar holds it", op.span,
            "pass the number as a separate float argument (docs/ttgir-import.md, section 3)"))


def _import_loop(module: Module, func: MOp, path: tuple[MOp, ...],
                 merge: Merge | None = None, detail: dict | None = None) -> tuple[Graph, list[Note]]:
    """Lower, fuse and build one loop; `detail`, where given, gets the lowered loop ("lowered") and
    its inputs that earlier loops hand over ("handed": ttgir/handover.py)."""
    lowered = _lower(module, func, path, merge)
    body, groups, fuse_notes = fuse(lowered)
    handed = {} if detail is not None else None
    carry_names: dict = {}
    graph, build_notes = build_graph(lowered, body, groups, module.source.file, handed, carry_names)
    graph = kmajor_loads(graph)  # a TF32 / fp8 / int8 operand loaded MN-major: typed K-major, staged by the binding
    split = check_grid(module, func, path[-1], banded=any(op.opcode == "causal_mask" for op in graph.ops))
    if not any(op.opcode == "mma" for op in graph.ops):  # a loop without an mma runs along its tiles' columns
        from .steps import row_errors
        rows = row_errors(module, func, path[-1])
        if rows:
            raise UnexpressedGrid(*rows)  # a tile loop all the same: never left out silently
    if split is not None:  # split-KV's key loop over a grid axis of splits (splits.py): `grid split = ARG`
        graph = replace(graph, split=split.arg)
    if module.flat is not None:  # a flat map over elements read as rows (flatmap.py): `grid flat = n_elements`
        _flat_size_unread(graph, module.flat)
        graph = replace(graph, flat=module.flat)
    if graph.arguments:  # the arguments that are the tensors' extents (extents.py), which the binding checks
        from .extents import extents
        from .grid import Dependence
        found = extents(module, func, path, graph, lowered.signature, Dependence(func).of)
        graph = replace(graph, extents=found.args, loop_extent=found.loop)
    if detail is not None:
        detail.update(lowered=lowered, handed=handed, carry_names=carry_names)
    notes = list(lowered.notes) + fuse_notes + build_notes
    notes.sort(key=lambda n: (n.diagnostic.span.line, n.diagnostic.span.col) if n.diagnostic.span else (0, 0))
    return graph, notes


def _lower(module: Module, func: MOp, path: tuple[MOp, ...], merge: Merge | None = None):
    """One loop lowered, its pipelining undone and its column reads shown. An iter_arg whose yielded
    value turns out to be no tile (index arithmetic on an integer tensor) is lowered again as a scalar."""
    scalar_args: frozenset = frozenset()
    while True:
        lowered = lower_loop(module, func, path, scalar_args, merge)
        scalars = {c.arg for c, y in zip(lowered.carries, lowered.yields)
                   if c.arg is not None and not isinstance(y, Tile)}
        if not scalars:
            break
        scalar_args |= scalars
    return show_columns(depipeline(lowered))
