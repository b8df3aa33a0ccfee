"""Where the chosen loop starts (docs/ttgir-import.md, section 2, "Program ids", "Where the loop
starts").

A graph's loop runs from 0: emit-cuda's iteration i reads the tiles at i x its tile along the loop,
a `position`'s l0 is i x the step, and the trip count is the loop's whole extent over the step. A
loop whose lower bound reads a program id is grid.py's (a causal or sliding-window band, a split
of the loop over the grid, else an error there). Any other lower bound must be the constant 0:

- a constant other than 0 (Triton ``range(64, N, 64)``, ``tl.range(BLOCK, K, BLOCK)``) would skip
  the first iterations, which the graph's loop does not: the emitted kernel would compute over
  elements the kernel skips;
- a lower bound that is no compile-time constant (a kernel argument, a loaded value, an outer
  loop's induction variable) moves per call or per program, which the graph does not represent.

Each is an error at the `scf.for` (a tile loop all the same: `UnexpressedGrid`, never left out).
"""
from __future__ import annotations

from ..errors import Diagnostic
from .addresses import Addresses, poly_int
from .parser import MOp
from .types import TypeReader

HINT = ("the graph's loop runs from 0 over its tensors' whole extent along it: run the loop from 0 "
        "(range(0, N, STEP)) and pass the tensors from the first element it reads (offset at the call, the "
        "extent less the offset); a lower bound that reads program_id(0) is read under a causal or "
        "sliding-window mask, one of program_id(A) * ARG as a split of the loop (docs/ttgir-import.md, "
        "section 2, \"Where the loop starts\")")


def _bounds(loop: MOp):
    t = loop.tokens
    if len(t) >= 7 and t[1].is_("=") and t[3].is_("to") and t[5].is_("step"):
        return t[2], t[4], t[6]
    return None


def errors(module, func: MOp, loop: MOp, reads_pid) -> list[Diagnostic]:
    """An error at the loop where its lower bound reads no program id (`reads_pid(name)`: grid.py's
    dependence) and is not the constant 0 (module doc); [] otherwise."""
    bounds = _bounds(loop)
    if bounds is None:
        return []
    lower, _, step = bounds
    if reads_pid(lower.text[1:]):
        return []
    addr = Addresses(func, TypeReader(module.source, module.aliases))
    low, stp = addr.of(lower.text[1:]), addr.of(step.text[1:])
    first = poly_int(low.const) if low is not None and not low.coefs and low.base is None else None
    if first == 0:
        return []
    every = poly_int(stp.const) if stp is not None and not stp.coefs and stp.base is None else None
    if first is None:
        reads = _atoms(low)
        why = (f"its lower bound {lower.text} is no compile-time constant"
               + (f" (it reads {', '.join(reads)})" if reads else "")
               + ": the graph's loop runs from 0, and a first iteration that moves per call or per program is "
                 "not represented")
    else:
        of = (f"iteration {first // every} of step {every}" if every and first % every == 0 else
              f"no whole number of steps ({every})" if every else "with a step that is no compile-time constant")
        why = (f"its lower bound {lower.text} is the constant {first} ({of}), but the graph's loop runs from 0: "
               "the emitted kernel would compute over the elements before it, which the kernel skips")
    return [Diagnostic(f"'scf.for' starts at a lower bound the graph does not represent: {why}",
                       module.source.span(loop.head), hint=HINT)]


def _atoms(addr) -> list[str]:
    """The scalars a lower bound reads, as the user wrote them (a kernel argument, an outer loop's
    induction variable, a value the import does not follow)."""
    if addr is None:
        return []
    names = sorted({a for m, _ in addr.const for a in m})
    return [a[3:] if a.startswith("iv:") else a.lstrip("%") for a in names]
