"""A flat 1-D map over elements, as one row a program of a [n / C, C] view (docs/ttgir-import.md, section 8, "A
flat map over elements").

The Triton tutorials' first kernels (01's vector add, 04's dropout, 07's libdevice asin) have no loop and index
elements with the program id: `offs = pid * BLOCK + tl.arange(0, BLOCK); mask = offs < n`, every tile's address
`P + offs` for a pointer argument P, elementwise ops only, masked loads and stores. Such a kernel computes, for
every element i < n, the same function of the elements i of its inputs: which program computes which element
does not change what is stored. So it is the same map over a 2-D view [n / C, C] of every tensor, read one row a
program: the module is rewritten, as text, into the loop-free kernel of one row a program (rowwhole.py's
"no loop" form), `row = pid`, every tile's address `P + row * C + arange(0, C)` with C = min(BLOCK, the widest
column tile of its target, rowprog.tile_of), its mask `cols < C` (a constant: true in every column tile, dropped); the row's stride is written as the
argument n (an argument the import reads as a row stride and leaves to the binding, which takes the view's). rowwhole.py and rowprog.py then make it
the one-loop map of 64 rows a CTA (128 on sm_100) over the row's C columns (one iteration), and the import records `grid flat
= n` (the argument of the elements): the binding views each 1-D (or any contiguous) tensor as [n / C, C] and
refuses an n that is not a multiple of C at the call.

Recognized by its dataflow, not names: one `tt.get_program_id x`; a scalar `pid * BLOCK` (a constant BLOCK, the
tile's length) splat and added to `tt.make_range {0, BLOCK}`; the mask `offs < splat(n)` of an integer argument n;
every other use of the program id, its product or the offsets refused by the import as before (rowwhole.py).
Anything else (a `tt.reduce`, an offset other than these, a 2-D tile) is not this form: the module is left as
it is and the import says why at its line.
"""
from __future__ import annotations

import re

from .parser import Module, MOp, parse_module
from .rand import is_draw
from .rowprog import Refuse, attr_int, end_line, func_args, search, tile_of, walk_ops
from .rowwhole import SSA, subst


def flat_map(module: Module) -> tuple[list[MOp], dict] | None:
    """(the function's ops, what the rewrite needs) where `module` is a flat 1-D map over elements; else None."""
    funcs = module.functions()
    src = module.source
    if len(funcs) != 1 or "scf." in src.text or re.search(r"tensor<\d+x\d+x", src.text):
        return None
    ops = list(walk_ops(funcs[0].body()))
    defs = {r: o for o in ops for r in o.results}
    names = lambda o: [n for n, _ in o.operands()]  # noqa: E731
    pids = [o for o in ops if o.name == "tt.get_program_id"]
    if len(pids) != 1 or any(o.name == "tt.reduce" for o in ops):
        return None
    pid = pids[0].results[0]
    args = dict(func_args(src.lines[funcs[0].head.line - 1]))
    start = next((o for o in ops if o.name == "arith.muli" and pid in names(o)), None)
    if start is None:
        return None
    other = [n for n in names(start) if n != pid]
    block_def = defs.get(other[0]) if other else None
    if block_def is None or block_def.name != "arith.constant":
        return None
    m = re.search(r"arith\.constant (\d+) : i32", src.lines[block_def.head.line - 1])
    block = int(m.group(1)) if m else None
    splat = next((o for o in ops if o.name == "tt.splat" and names(o) == [start.results[0]]), None)
    if block is None or splat is None:
        return None
    offs = None
    for o in ops:
        if o.name == "arith.addi" and splat.results[0] in names(o):
            rng = defs.get(next(n for n in names(o) if n != splat.results[0]) if len(set(names(o))) == 2 else None)
            if rng is not None and rng.name == "tt.make_range" and attr_int(rng, "start") == 0 \
                    and attr_int(rng, "end") == block:
                offs = (o, rng)
    if offs is None:
        return None
    add, rng = offs
    masks, size = [], None
    for o in ops:
        if o.name == "arith.cmpi" and names(o)[:1] == [add.results[0]]:
            bound = defs.get(names(o)[1])
            n = names(bound)[0] if bound is not None and bound.name == "tt.splat" else None
            if n not in args or " slt," not in src.lines[o.head.line - 1] or size not in (None, n):
                return None
            masks.append(bound)
            size = n
    bases = []
    for o in ops:
        if o.name == "tt.addptr" and add.results[0] in names(o):
            base = defs.get(names(o)[0])
            if base is None or base.name != "tt.splat" or names(base)[0] not in args or names(o)[1] != add.results[0]:
                return None
            bases.append(base)
    if size is None or not bases:
        return None
    # the program id, its product and the offsets read by nothing else (an offset `offs * 2`, the row read as a
    # value: not a map of element i to element i; rowwhole.py then refuses it at its line) but a draw of random
    # numbers (rand.py: `tl.rand(seed, offsets)`), whose counter is then the element's index, the same in any view
    draws = [o for o in ops if is_draw(o) and names(o)[1:] == [add.results[0]]]
    allowed = {pid: {id(start)}, start.results[0]: {id(splat)}, splat.results[0]: {id(add)},
               add.results[0]: {id(o) for o in ops if o.name == "tt.addptr" and add.results[0] in names(o)}
               | {id(o) for o in ops if o.name == "arith.cmpi" and names(o)[:1] == [add.results[0]]}
               | {id(o) for o in draws}}
    if any(id(o) not in allowed[n] for o in ops for n in names(o) if n in allowed):
        _other_counter(ops, defs, add, names)
        return None
    return ops, {"start": start, "splat": splat, "add": add, "range": rng, "masks": masks, "bases": bases,
                 "block": block, "size": size, "func": funcs[0], "draws": draws}


def _other_counter(ops: list[MOp], defs: dict, add: MOp, names) -> None:
    """A draw (rand.py) whose offsets are computed from a flat map's element index other than as it is (`offs * 2`,
    `offs + n`): Refuse at the draw, naming tl.rand (the kernel is no flat map; the import would stop elsewhere)."""
    for o in ops:
        if not is_draw(o) or names(o)[1:] == [add.results[0]]:
            continue
        todo, seen = [names(o)[1]], set()
        while todo:
            n = todo.pop()
            if n == add.results[0]:
                raise Refuse(o, "tl.rand (Triton's Philox rounds, collapsed) draws at offsets computed from the flat "
                                "map's element index (`pid * BLOCK + arange(BLOCK)`) other than the index itself: a flat "
                                "map imports tl.rand(seed, offsets) of the element's own index")
            d = defs.get(n)
            if d is not None and n not in seen:
                seen.add(n)
                todo += names(d)


def rewrite(module: Module) -> tuple[Module, list[tuple[int, int | None]], str] | None:
    """(the module as one row a program of C columns, each line's place in the original, the argument of the
    elements) where it is a flat 1-D map; None where it is not."""
    found = flat_map(module)
    if found is None:
        return None
    ops, f = found
    src = module.source
    cols = min(f["block"], tile_of(src.text)[1])
    taken = set(SSA.findall(src.text))

    def fresh(base: str) -> str:
        k = 0
        while (name := base if k == 0 else f"{base}_{k}") in taken:
            k += 1
        taken.add(name)
        return name

    out: list[str] = []
    where: list[tuple[int, int | None]] = []
    names = {f["add"].results[0]: f["range"].results[0]}  # the offsets are the row's columns
    retype = lambda line: re.sub(rf"tensor<{f['block']}x", f"tensor<{cols}x", line)  # noqa: E731
    skip = {id(f["splat"]), id(f["add"])}
    mask_ids = {id(o) for o in f["masks"]}
    base_ids = {id(o) for o in f["bases"]}
    first = f["func"].head.line
    for i in range(1, first + 1):
        out.append(src.lines[i - 1])
        where.append((i, None))
    for o in ops:
        if id(o) in skip:
            continue
        line = src.lines[o.head.line - 1]
        ind = re.match(r"\s*", line).group(0)
        if o is f["start"]:  # row * C: the row's first element
            # The row's stride is written as the argument of the elements: the import reads `row * ARG` as a row
            # stride it leaves to the binding (which takes it from the tensors, here the [n / C, C] view: C); a
            # constant stride is read by grid.py as an offset along the rows (not handled there).
            out.append(f"{ind}%{o.results[0]} = arith.muli %{_pid(ops)}, %{f['size']} : i32")
            where.append((o.head.line, o.head.col))
            continue
        if id(o) in mask_ids:  # `cols < C`: a constant bound, true in every column tile
            ty = retype(search(r"->\s*(tensor<[^>]*>)", line, o, "a result type `-> tensor<...>`").group(1))
            out.append(f"{ind}%{o.results[0]} = arith.constant dense<{cols}> : {ty}")
            where.append((o.head.line, o.head.col))
            continue
        if id(o) in base_ids:  # the row's pointer P + row * C, splat
            arg = [n for n, _ in o.operands()][0]
            elt = search(r":\s*(!tt\.ptr<[^>]*>)\s*->", line, o, "a pointer type `: !tt.ptr<...> ->`").group(1)
            row = fresh(f"{arg}_row")
            out.append(f"{ind}%{row} = tt.addptr %{arg}, %{f['start'].results[0]} : {elt}, i32")
            where.append((o.head.line, o.head.col))
            out.append(retype(line.replace(f"tt.splat %{arg} ", f"tt.splat %{row} ", 1)))
            where.append((o.head.line, None))
            continue
        if o is f["range"]:
            out.append(line.replace(f"end = {f['block']} : i32", f"end = {cols} : i32").replace(
                f"tensor<{f['block']}x", f"tensor<{cols}x"))
            where.append((o.head.line, None))
            continue
        if any(o is d for d in f["draws"]):  # the element's index: the row's first element (row * C) and its column
            ty = retype(search(r":\s*(tensor<[^>]*>)", src.lines[f["add"].head.line - 1], f["add"],
                               "a tensor type `: tensor<...>`").group(1))
            first, index = fresh(f"{f['add'].results[0]}_row"), fresh(f"{f['add'].results[0]}_index")
            out.append(f"{ind}%{first} = tt.splat %{f['start'].results[0]} : i32 -> {ty}")
            where.append((o.head.line, o.head.col))
            out.append(f"{ind}%{index} = arith.addi %{first}, %{f['range'].results[0]} : {ty}")
            where.append((o.head.line, o.head.col))
            out.append(retype(line.replace(f"%{f['add'].results[0]} ", f"%{index} ", 1)))
            where.append((o.head.line, None))
            continue
        for k in range(o.head.line, end_line(o) + 1):
            out.append(retype(subst(src.lines[k - 1], names)))
            where.append((k, None))
    last = max(o.head.line for o in walk_ops(f["func"].body())) + 1
    for i in range(last, len(src.lines) + 1):
        out.append(src.lines[i - 1])
        where.append((i, None))
    return parse_module("\n".join(out), src.file), where, f["size"]


def _pid(ops: list[MOp]) -> str:
    return next(o for o in ops if o.name == "tt.get_program_id").results[0]


__all__ = ["flat_map", "rewrite", "Refuse"]
