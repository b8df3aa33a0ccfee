"""Which `scf.for` of a kernel becomes the graph, and what the import says about the others.

A graph has one loop; a kernel may have several. The rule (`choose_loop`):

- A *tile loop* is a loop whose import has an op the importer can express (not only generic ops).
- A tile loop around another tile loop (the loop over output tiles of a persistent kernel, around
  its K loop) is not the graph: the inner loop is, run once per trip of the outer one (twill's
  persistent-grid model). A note says so, at the outer loop.
- Tile loops one after the other (causal attention: the blocks left of the diagonal, then the masked
  diagonal block) cannot all be the graph, and taking one would leave the kernel's result half
  computed: that is an error at each loop that would be left out, naming it, with the hint to pick
  one with ``--loop N``. With ``--loop N`` the import goes on, with a warning at each other tile loop.
- A dot outside the chosen loop and outside any other loop (a diagonal block whose one-trip loop
  Triton unrolled), or in the body of a loop around it, is reported the same way: a warning at the
  first, unless it is a peeled copy of the loop's own dot (the same source position).
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import Diagnostic, InputError
from .fuse import UnexpressedScale
from .grid import UnexpressedGrid
from .indices import UnexpressedMask
from .locs import position
from .parser import walk
from .values import Note

DOTS = {"tt.dot", "tt.dot_scaled", "ttng.warp_group_dot", "ttng.tc_gen5_mma", "ttng.tc_gen5_mma_scaled"}


class SiblingLoops(InputError):
    """Tile loops one after the other, none of them left out by the one-loop import: the error a
    one-graph import raises, and what `import_sequence` imports as a sequence (`loops`: their indices,
    in the order they run; `blocked`: True where one of them has a mask the import cannot express)."""

    def __init__(self, *diagnostics, loops: tuple[int, ...] = (), blocked: bool = False):
        super().__init__(*diagnostics)
        self.loops, self.blocked = loops, blocked


def _score(result) -> int:
    graph, notes = result
    return len(graph.ops) - 2 * sum(n.unknown for n in notes)


def _is_tile_loop(result) -> bool:
    graph, _ = result
    return any(op.opcode in ("load", "mma", "store") or not op.opcode.startswith(("scf_", "tt_", "ttg_", "ttng_"))
               for op in graph.ops)


def choose_loop(module, loops: list, loop: int | None, import_loop, absorbed: frozenset = frozenset()):
    """(graph, notes) of the loop to import; `loops` are (function, path) pairs, `import_loop` imports one;
    the loops in `absorbed` are part of another (a causal pair, merge.py) and no candidates of their own."""
    src = module.source
    if loop is not None:
        graph, notes = import_loop(*loops[loop])
        others = [k for k in _tile_loops(loops, import_loop, skip=loop) if k not in absorbed]
        left = [k for k in others if not _nested(loops[k][1], loops[loop][1])]
        notes = list(notes) + [Note(Diagnostic(
            f"loop {k} is not imported: the graph does not compute the kernel's whole result",
            src.span(loops[k][1][-1].head), severity="warning")) for k in left]
        return graph, notes + _after(module, loops[loop])
    results, first_error, blocked = {}, None, {}
    for k, (func, path) in enumerate(loops):
        if k in absorbed:
            continue
        try:
            results[k] = import_loop(func, path)
        except (UnexpressedMask, UnexpressedScale, UnexpressedGrid) as exc:  # a tile loop all the same: never left out silently
            exc = _with_after(module, loops[k], exc)
            if len(loops) == 1:
                raise exc from None
            blocked[k] = exc
        except InputError as exc:  # with several candidates, a loop we cannot read is skipped, unless it
            if len(loops) == 1:   # has a dot: then it is tile work the graph would leave out silently
                raise
            if any(o.name in DOTS for o in walk(path[-1].body())):
                blocked[k] = _with_after(module, loops[k], exc)
                continue
            first_error = first_error or exc
    if not results:  # every loop refused: each tile loop's errors (none is left out silently)
        if first_error or len(blocked) == 1:
            raise first_error or next(iter(blocked.values()))
        raise _all_of(blocked)
    tile = [k for k, r in results.items() if _is_tile_loop(r)]
    outer = {k for k in tile for j in tile if j != k and _encloses(loops[k][1], loops[j][1])}
    candidates = [k for k in tile if k not in outer] or list(results)
    best = max(candidates, key=lambda k: _score(results[k]))  # the first of equals
    if best not in tile and blocked:  # no loop read computes a tile: the refused tile loops are the kernel's
        raise _all_of(blocked)        # (grouped GEMM's K loop inside its loops over groups and tiles)
    siblings = [k for k in candidates if k != best and k in tile]
    siblings += [k for k in blocked if not _nested(loops[k][1], loops[best][1])]
    if siblings:
        raise SiblingLoops(*[d for k in sorted(blocked) if k in siblings for d in blocked[k].diagnostics], *(Diagnostic(
            f"loop {k} would be left out: this kernel has {len(siblings) + 1} tile loops one after the other "
            f"(loops {', '.join(str(j) for j in sorted(siblings + [best]))}) and a graph has one loop",
            src.span(loops[k][1][-1].head),
            hint=("" if any(j in blocked for j in siblings) else "twill import writes them as a sequence of "
                  "loops (a .tir of several 'loop NAME {'); ") + f"--loop {k} (or --loop {best}) imports one of "
                 "them, and that graph does not compute the kernel's whole result") for k in siblings),
            loops=tuple(sorted(siblings + [best])), blocked=any(k in blocked for k in siblings))
    graph, notes = results[best]
    notes = list(notes)
    for k in (k for k, (_, path) in enumerate(loops) if _encloses(path, loops[best][1])):
        notes.append(Note(Diagnostic(
            f"loop {k} runs loop {best} once per trip (a persistent kernel's loop over tiles): the graph is "
            f"loop {best}, the tile loop inside it", src.span(loops[k][1][-1].head), severity="note")))
    refuse_incomplete(notes + _after(module, loops[best]))
    return graph, notes


def _all_of(blocked: dict) -> InputError:
    """One error of every refused tile loop's diagnostics, in line order."""
    excs = list(blocked.values())
    if len(excs) == 1:
        return excs[0]
    diagnostics = sorted((d for e in excs for d in e.diagnostics),
                         key=lambda d: (d.span.line, d.span.col) if d.span else (0, 0))
    return type(excs[0])(*diagnostics)


def _with_after(module, chosen, exc):
    """A loop refused for the program ids of its range (grid.py) with, where tile work follows it
    outside any loop (sm_100's unrolled causal diagonal), that error too: both say what is missing."""
    if not isinstance(exc, UnexpressedGrid):
        return exc
    after = [replace(n.diagnostic, severity="error", message=n.incomplete,
                     hint="; ".join(h for h in (n.diagnostic.hint, INCOMPLETE_HINT) if h))
             for n in _after(module, chosen) if n.incomplete]
    return UnexpressedGrid(*exc.diagnostics, *after) if after else exc


def refuse_incomplete(notes) -> None:
    """Where the import chose the loop (no --loop), a graph that would store something other than
    what the kernel stores (tile work after the loop it leaves out; an epilogue it cannot follow) is
    an error at each such place: a kernel that compiles and computes something else is worse than none."""
    bad = [n for n in notes if n.incomplete]
    if bad:
        raise InputError(*(replace(n.diagnostic, severity="error", message=n.incomplete,
                                   hint="; ".join(h for h in (n.diagnostic.hint, INCOMPLETE_HINT) if h)) for n in bad))


def _tile_loops(loops, import_loop, skip: int) -> list[int]:
    out = []
    for k, (func, path) in enumerate(loops):
        if k == skip:
            continue
        try:
            if _is_tile_loop(import_loop(func, path)):
                out.append(k)
        except (UnexpressedMask, UnexpressedGrid):  # a tile loop whose mask or grid the import does not express
            out.append(k)
        except InputError:
            continue
    return out


def _encloses(outer: tuple, inner: tuple) -> bool:
    return len(outer) < len(inner) and inner[len(outer) - 1] is outer[-1]


def _nested(a: tuple, b: tuple) -> bool:
    return _encloses(a, b) or _encloses(b, a)


INCOMPLETE_HINT = ("import the dump from before Triton's pipeliner (docs/ttgir-import.md, section 1: its loops are "
                   "still loops and its stores plain code; after it, sm_100 unrolls the causal kernel's one-trip "
                   "diagonal loop and warp-specialized kernels store from their partitions), or pass --loop N to take "
                   "the loop alone (a warning then: the graph does not compute what the kernel stores)")


def _after(module, chosen) -> list[Note]:
    """A warning at the first dot outside the chosen loop that no other loop holds (after it, or in
    the body of a loop around it) and that is no peeled copy of one in the loop (the pipeliner's
    prologue and epilogue: the same source position)."""
    func, path = chosen
    inside = {position(o.loc, module.locs) for o in walk(path[-1].body()) if o.name in DOTS}
    found, where = None, ""
    for op, ancestors in _outside(func.body(), path):
        if op.name in DOTS and position(op.loc, module.locs) not in inside:
            found, where = op, ("in a loop around the graph's loop" if ancestors else "outside any loop")
            break
    if found is None:
        return []
    message = f"'{found.name}' {where} is not imported: the graph does not compute the kernel's whole result"
    return [Note(Diagnostic(message, module.source.span(found.head), severity="warning"), incomplete=message)]


def _outside(ops, path, ancestors: tuple = ()):
    """(op, the loops of `path` around it) for every op that is neither in the chosen loop (the last
    of `path`) nor in a loop off `path` (those are loops of their own, section 2's rule)."""
    for op in ops:
        if op is path[-1]:
            continue
        if op.name == "scf.for" and not any(op is p for p in path):
            continue
        yield op, ancestors
        inner = ancestors + ((op,) if any(op is p for p in path) else ())
        for r in op.regions:
            for b in r:
                yield from _outside(b.ops, path, inner)

