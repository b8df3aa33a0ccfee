"""Interchangeable ops of a joint problem: automorphisms found and checked, and the start orderings
they allow (symmetry breaking for the joint stage).

An automorphism of a `Problem` is a renaming of its ops that maps every op to one with the same
attributes (opcode, unit, costs, memory, issue: everything but the name), every dependence to a
dependence with the same distance and latency (and into a tensor-core op's accumulator if it was:
the only use the joint problem makes of an operand's position), and every register input's readers to an
input's readers with the same bytes; the units, limits and options are untouched (a problem with
`--group` pins has none here). Every constraint family of the joint stage is stated in these
terms alone, so an automorphism maps every schedule to a schedule with the same I, L, roles (up to
renumbering), cross-role edges, warps and sum of starts: every objective the search minimizes.
The parts of a sub-tiled graph (split_rows) are the typical case: part i and part j swap.

Ordering (`orderings`): if for ops x0, x1, ..., xk each adjacent pair is swapped by a checked
automorphism that moves no other x, then any schedule can be turned into one with
start[x0] <= start[x1] <= ... <= start[xk] (bubble sort, one swap at a time), with the same
objective values: asserting the chain keeps every optimum. A later chain is built only from
automorphisms that fix every op of the earlier chains, so sorting it leaves them sorted.

Candidates come from colour refinement (ops keep apart when their attributes or their neighbours'
colours differ), then one automorphism per candidate pair by individualising the two ops the
other way round in two copies and refining both until every colour class is one op, each
candidate mapping checked against the problem before it is used: a candidate that fails is
dropped, never trusted.
"""
from __future__ import annotations

from dataclasses import astuple, replace
from functools import lru_cache

from . import vocab
from .liveness import tensor_core
from .problem import Dep, Problem


def _feeds_accumulator(p: Problem, d: Dep) -> bool:
    """The one thing the joint problem reads of an edge's operand index: whether it is a tensor-core
    op's accumulator (liveness.in_place_operands). Which operand of an add or a max an edge feeds
    changes nothing, so an automorphism may swap them."""
    t = p.task[d.dst]
    return tensor_core(t) and d.operand == vocab.lookup(t.opcode).accumulator


def _label(p: Problem, d: Dep) -> tuple:
    return d.distance, d.latency, _feeds_accumulator(p, d)


def _signature(p: Problem, v: str) -> tuple:
    """Everything an automorphism must keep about one op (its name aside)."""
    return astuple(replace(p.task[v], name=""))


def _refine(p: Problem, colour: dict[str, int]) -> dict[str, int]:
    """Colour refinement to a fixpoint: an op's new colour is its colour and the multisets of its
    in- and out-edges' (label, colour of the other end) and of its register
    inputs' (bytes, colours of the readers). Colours are renumbered canonically (sorted keys), so
    two runs that differ only by a renaming give the corresponding colours."""
    ins = {t.name: [] for t in p.tasks}
    outs = {t.name: [] for t in p.tasks}
    for d in p.deps:
        outs[d.src].append(d)
        ins[d.dst].append(d)
    reads = {t.name: [] for t in p.tasks}
    for _, nbytes, readers in p.register_inputs:
        for c in readers:
            reads[c].append((nbytes, readers))
    classes = len(set(colour.values()))
    while True:
        key = {v: (colour[v],
                   tuple(sorted((_label(p, d), colour[d.src]) for d in ins[v])),
                   tuple(sorted((_label(p, d), colour[d.dst]) for d in outs[v])),
                   tuple(sorted((n, tuple(sorted(colour[c] for c in rs))) for n, rs in reads[v])))
               for v in colour}
        number = {k: i for i, k in enumerate(sorted(set(key.values())))}
        colour = {v: number[key[v]] for v in colour}
        if len(number) == classes:
            return colour
        classes = len(number)


def _initial(p: Problem) -> dict[str, int]:
    number = {k: i for i, k in enumerate(sorted({_signature(p, t.name) for t in p.tasks}))}
    return _refine(p, {t.name: number[_signature(p, t.name)] for t in p.tasks})


def _individualise(p: Problem, colour: dict[str, int], pins: list[str]) -> dict[str, int]:
    """`colour` with each op of `pins` given a colour of its own (in order), refined."""
    top = max(colour.values(), default=0)
    colour = dict(colour)
    for i, v in enumerate(pins):
        colour[v] = top + 1 + i
    return _refine(p, colour)


def _mapping(p: Problem, base: dict[str, int], a: str, b: str) -> dict[str, str] | None:
    """A candidate renaming that swaps a and b: individualise (a, b) in one copy and (b, a) in the
    other, and while a colour class has several ops, the same op of it in both (the renaming
    fixes it). None when the two copies' classes do not correspond."""
    left, right = [a, b], [b, a]
    while True:
        c1, c2 = _individualise(p, base, left), _individualise(p, base, right)
        cells1, cells2 = _cells(c1), _cells(c2)
        if sorted((k, len(v)) for k, v in cells1.items()) != sorted((k, len(v)) for k, v in cells2.items()):
            return None
        wide = next((k for k in sorted(cells1) if len(cells1[k]) > 1), None)
        if wide is None:
            return {cells1[k][0]: cells2[k][0] for k in cells1}
        fixed = next((v for v in cells1[wide] if v in cells2[wide]), None)
        if fixed is None:
            return None
        left, right = left + [fixed], right + [fixed]


def _cells(colour: dict[str, int]) -> dict[int, list[str]]:
    cells: dict[int, list[str]] = {}
    for v, c in colour.items():
        cells.setdefault(c, []).append(v)
    return cells


def is_automorphism(p: Problem, sigma: dict[str, str]) -> bool:
    """Does the renaming `sigma` (every op to an op, one to one) keep the problem (module doc)?"""
    names = [t.name for t in p.tasks]
    if sorted(sigma) != sorted(names) or sorted(sigma.values()) != sorted(names):
        return False
    if any(_signature(p, v) != _signature(p, sigma[v]) for v in names):
        return False
    edges = sorted((d.src, d.dst, _label(p, d)) for d in p.deps)
    mapped = sorted((sigma[d.src], sigma[d.dst], _label(p, d)) for d in p.deps)
    if edges != mapped:
        return False
    inputs = sorted((n, tuple(sorted(rs))) for _, n, rs in p.register_inputs)
    renamed = sorted((n, tuple(sorted(sigma[c] for c in rs))) for _, n, rs in p.register_inputs)
    return inputs == renamed


@lru_cache(maxsize=16)
def orderings(p: Problem) -> tuple[tuple[str, ...], ...]:
    """Chains of ops (x0, x1, ...) whose starts may be asserted ascending without losing any optimum
    (module doc), in the problem's op order. Empty when the problem has `--group` pins."""
    if any(p.option("groups", ())):
        return ()
    base = _initial(p)
    cells = _cells(base)
    order = {t.name: i for i, t in enumerate(p.tasks)}
    chains: list[tuple[str, ...]] = []
    frozen: set[str] = set()  # ops of earlier chains: later automorphisms must fix them
    for t in p.tasks:
        cell = sorted(cells[base[t.name]], key=order.get)
        if t.name in frozen or cell[0] != t.name or len(cell) < 2:
            continue
        chain, swaps = [t.name], []
        for b in cell[1:]:
            if b in frozen or any(s[b] != b for s in swaps):
                continue  # (each swap of the chain must fix every x it does not swap)
            sigma = _mapping(p, base, chain[-1], b)
            if sigma is None or not is_automorphism(p, sigma):
                continue
            if any(sigma[x] != x for x in frozen) or any(sigma[x] != x for x in chain[:-1]):
                continue
            chain.append(b)
            swaps.append(sigma)
        if len(chain) > 1:
            chains.append(tuple(chain))
            frozen |= set(chain)
    return tuple(chains)
