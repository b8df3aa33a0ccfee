"""A kernel's tile loops one after the other, imported as a `twill.sequence.Sequence`
(docs/ttgir-import.md, section 2, "Loops in sequence").

    result, warnings = import_sequence(text, "chain.ttgir")   # a Graph (one loop) or a Sequence

Where the one-loop import (loops.choose_loop) finds tile loops in sequence (`SiblingLoops`), each is
imported as it would be with `--loop N` (a causal pair stays one merged loop), named `L<N>`. What a
later loop reads of an earlier loop's results are stand-ins (ttgir/handover.py); each becomes a
`Handover` from the earlier loop's carry. The earlier loop writes that carry out in the dtype the
later one reads it in. Refused, each at its line: a result of a loop that is not in the sequence,
a result that is no carry of the earlier loop's graph, a carry read in two dtypes, a later loop's
carry that starts from an earlier loop's result (emit-cuda hands values over as inputs only).
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import Diagnostic, ErrorCollector, InputError
from ..ir import OUTPUT_DTYPES, Graph
from ..sequence import Handover, Sequence, check, loop_kernel
from .handover import KEY, loop_key
from .loops import SiblingLoops, _after, refuse_incomplete


def _refuse_between(module, loops, order) -> None:
    """Tile work outside the loops (what a later loop reads would not be a loop's carry): an error."""
    between = []
    for k in order:
        between += [d for d in (n.diagnostic for n in _after(module, loops[k])) if d not in between]
    if between:
        raise InputError(*(replace(d, severity="error", message=d.message.replace(
            "the graph does not compute", "in a kernel of loops in sequence, the loops do not compute"), hint=(
            "iterations Triton's pipeliner peels out of a loop (before or after it, as on sm_100) are not merged "
            "back into a sequence: import the dump from before the pipeliner (docs/ttgir-import.md, section 1)"))
            for d in sorted(between, key=lambda d: (d.span.line, d.span.col) if d.span else (0, 0))))


def import_sequence(text: str, file: str = "<string>", strict: bool = False) -> tuple[Graph | Sequence, list[Diagnostic]]:
    """The kernel's one-loop graph (as `import_ttgir` gives it), or its tile loops in sequence."""
    from . import _import_loop, _module_loops, import_ttgir
    try:
        return import_ttgir(text, file, strict=strict)
    except SiblingLoops as exc:
        order, blocked = exc.loops, exc
    else:
        blocked = None
    module, loops, _, merge_of, _ = _module_loops(text, file)
    if blocked is not None and blocked.blocked:  # a loop refused: the tile work outside the loops first, the cause
        _refuse_between(module, loops, order)
        raise blocked
    names = [f"L{k}" for k in order]
    graphs, details, notes = [], [], []
    for k in order:
        func, path = loops[k]
        detail: dict = {}
        graph, own = _import_loop(module, func, path, merge_of.get(id(path[-1])), detail)
        graphs.append(graph)
        details.append(detail)
        notes += list(own)
    _refuse_between(module, loops, order)
    refuse_incomplete(notes)  # (no --loop here: every loop is the import's choice)
    unknown = [n.diagnostic for n in notes if n.unknown]
    if strict and unknown:
        raise InputError(*(replace(d, severity="error") for d in unknown))
    errors = ErrorCollector()
    at = {loop_key(loops[k][1][-1]): i for i, k in enumerate(order)}
    handovers, dtypes = [], {}
    for i, (graph, detail) in enumerate(zip(graphs, details)):
        _check_inits(names[i], detail["lowered"], at, names, errors)
        for input_name, key in detail["handed"].items():
            value = graph.values[input_name]
            where, what = key.lstrip("~").split("/", 1)
            if key.startswith("~"):
                j = at.get(where)
                errors.error(f"loop {names[i]} reads '{input_name}', computed between the loops from "
                             f"{'loop ' + names[j] + chr(39) + 's' if j is not None else 'an earlier loop' + chr(39) + 's'} "
                             "result: a loop reads an earlier loop's final carries (or their conversion) only",
                             value.span, "compute it inside the later loop, or as the later loop's prologue "
                             "(docs/ttgir-import.md, section 12)")
                continue
            j = at.get(where)
            if j is None or j >= i:
                errors.error(f"loop {names[i]} reads '{input_name}', a result of the loop at line {where.split(':')[0]}, "
                             "which is not a tile loop run before it", value.span,
                             "a loop reads only the final carries of the tile loops before it")
                continue
            carry = _carry(details[j]["lowered"], details[j]["carry_names"], what)
            if carry is None:
                errors.error(f"loop {names[i]} reads '{input_name}', a result of loop {names[j]} that its graph does "
                             "not carry", value.span)
                continue
            dtype = value.type.dtype
            if dtypes.setdefault((j, carry), dtype) != dtype:
                errors.error(f"carry '{carry}' of loop {names[j]} is read as {dtypes[(j, carry)]} and as {dtype}: "
                             "a hand-over has one dtype", value.span)
                continue
            graphs[j] = _written_as(_raw_carry(graphs[j], carry), carry, dtype, value, names[j], errors)
            handovers.append(Handover(names[i], input_name, names[j], carry, value.span))
    errors.raise_if_any()
    kernel = graphs[0].kernel
    seq = Sequence(kernel, tuple(names), tuple(replace(g, kernel=loop_kernel(kernel, n)) for n, g in zip(names, graphs)),
                   tuple(handovers), file)
    check(seq, errors)
    errors.raise_if_any()
    return seq, [n.diagnostic for n in notes]


def _carry(lowered, carry_names: dict, what: str) -> str | None:
    """The graph's name of the lowered carry a stand-in's `what` names (rI: iter_arg I, bNAME: buffer), by its
    index among the lowered carries (build_graph's `carry_names`). Not by its place in the text: the carries of
    one rewritten loop (rowwhole.py's pass of two sums, KL's log-sums of p and q) share the loop's line, and
    the one found first was handed over for both."""
    if what.startswith("r"):
        k = next((k for k, c in enumerate(lowered.carries) if c.arg == int(what[1:])), None)
    else:
        k = next((k for k, c in enumerate(lowered.carries) if c.buf is not None and c.ssa == what[1:]), None)
    return None if k is None else carry_names.get(k)


def _raw_carry(graph: Graph, carry: str) -> Graph:
    """`graph` with `carry` handed over as the loop leaves it: where its epilogue writes another value in the
    carry's place (LayerNorm's mean loop stores `Mean = _mean / N`, the epilogue's `output _mean = mean`),
    that value becomes an output of its own, named after the argument it is stored to, and the carry is
    written as it is for the later loop (which computes `_mean / N` again in its prologue)."""
    ep = graph.epilogue
    if carry not in {n for n, _ in ep.outputs}:
        return graph
    args = [a for a, target in graph.arguments if target == carry]
    taken = set(graph.values) | {n for n, _ in ep.outputs} | {o.name for o in ep.ops}
    new = next((a for a in args if a not in taken), None) or next(
        f"{carry}_out{k}" for k in range(1, 1000) if f"{carry}_out{k}" not in taken)
    outputs = tuple((new if n == carry else n, v) for n, v in ep.outputs)
    arguments = tuple((a, new if target == carry else target) for a, target in graph.arguments)
    return replace(graph, epilogue=replace(ep, outputs=outputs), arguments=arguments)


def _written_as(graph: Graph, carry: str, dtype: str, value, loop: str, errors: ErrorCollector) -> Graph:
    """`graph` with `carry` written in `dtype` (its output dtype: what the later loop reads)."""
    c = graph.values[carry]  # a carry the kernel never stores is {output = none} (attach.py): a hand-over writes it
    if c.output_dtype == dtype and c.written:
        return graph
    if ("output" in dict(c.attrs) and c.written) or dtype not in OUTPUT_DTYPES:
        errors.error(f"'{value.name}' reads carry '{carry}' of loop {loop} as {dtype}, but the loop writes it as "
                     f"{c.output_dtype}", value.span, f"a hand-over is written in {', '.join(OUTPUT_DTYPES)}")
        return graph
    attrs = tuple(a for a in c.attrs if a[0] != "output") + ((("output", dtype),) if dtype != c.type.dtype else ())
    return replace(graph, carries=tuple(replace(v, attrs=attrs) if v.name == carry else v for v in graph.carries))


def _check_inits(loop: str, lowered, at: dict, names: list, errors: ErrorCollector) -> None:
    """A carry that starts from an earlier loop's result is refused: emit-cuda hands values over as
    loop-invariant inputs, and a carry's start is a constant."""
    from .values import Tile
    for c in lowered.carries:
        init = c.init
        if isinstance(init, Tile) and init.ref.kind == "node":
            key = dict(lowered.nodes[init.ref.index].attrs).get(KEY)
            if key is not None:
                j = at.get(key.split("/", 1)[0])
                src = f"loop {names[j]}'s" if j is not None else "an earlier loop's"
                errors.error(f"loop {loop}'s carry '{c.ssa}' starts from {src} result: a loop of a sequence reads an "
                             "earlier loop's results as inputs only, its carries start from constants", c.span,
                             "read the earlier result as an input and add it in the loop or its epilogue")
