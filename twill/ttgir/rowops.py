"""One row a program as 64 rows a CTA (rowprog.py): the rewrite of each op family but the loop (rowloops.py).

Each handler writes the op's lines for the kinds of its operands (S, V, C, P, T: rowprog.py), lifting an
operand to the op's kind (a splat, an expand_dims and a broadcast) as Triton prints a kernel of 64 rows.
"""
from __future__ import annotations

import re

from .parser import MOp
from .rowloops import loop
from .rowprog import (C, COL_L, P, ROW_L, S, T, TILE_L, V, Refuse, Rewrite, elt_of, end_line, join,
                      prefix, result_elt, search)


def _operand_text(rw: Rewrite, op: MOp, kind: int, indent: str) -> list[str]:
    return [rw.lift(n, kind, op, indent) for n, _ in op.operands()]


def elementwise(rw: Rewrite, op: MOp) -> None:
    line = rw.line_of(op)
    if op.name == "arith.constant":
        elt = result_elt(line)
        r = rw.define(op, C if "tensor<" in line else S, elt)
        m = re.search(r"dense<([^>]*)>", line)
        rw.consts[r] = m.group(1) if m else search(r"arith\.constant\s+(\S+)", line, op, "a constant's value").group(1)
        if rw.kind[r] == S:
            rw.emit(line, op, same=True)
        else:  # a splat constant of the columns: emitted where it is read, in the shape it is read in
            rw.emit(f"{prefix(line)} dense<{rw.consts[r]}> : {rw.type_of(C, elt)}{rw.loc(op)}", op, same=True)
        return
    rw.check_index(op)
    names = [n for n, _ in op.operands()]
    kind = S
    for n in names:
        kind = join(kind, rw.kind[rw.rename.get(n, n)])
    indent = rw.indent(line)
    args = _operand_text(rw, op, kind, indent)
    elt = result_elt(line)
    conv = re.search(r":\s*(\S+(?:<[^>]*>)?|tensor<[^>]*>)\s+to\s+", line)
    pred = re.match(r"\s*(?:%\S+ = )?\S+\s+([a-z]+),", line) if op.name in ("arith.cmpi", "arith.cmpf") else None
    head = prefix(line) + (f" {pred.group(1)}," if pred else "")
    head = head.replace("tt.extern_elementwise", op.name)  # libdevice's tanh read as math.tanh (parser.LIBDEVICE)
    if conv:  # extf, truncf, sitofp, extsi: `: A to B`
        src_elt = elt_of(conv.group(1))
        r = rw.define(op, kind, elt)
        rw.emit(f"{head} {', '.join(args)} : {rw.type_of(kind, src_elt)} to {rw.type_of(kind, elt)}{rw.loc(op)}", op,
                same=True)
    elif pred:  # the operands' type
        opnd_elt = result_elt(line)
        rw.define(op, kind, "i1")
        rw.emit(f"{head} {', '.join(args)} : {rw.type_of(kind, opnd_elt)}{rw.loc(op)}", op, same=True)
    elif op.name == "arith.select":  # `: COND_TYPE, TYPE` (or `: TYPE` of a scalar condition)
        c, a, b = args
        elt = elt_of(re.sub(r"\s*loc\(.*\)\s*$", "", line).rsplit(", tensor<", 1)[-1].join(["tensor<", ""])
                   if ", tensor<" in line else elt)
        rw.define(op, kind, elt)
        ctype = rw.type_of(kind, "i1")
        rw.emit(f"{head} {c}, {a}, {b} : {ctype}, {rw.type_of(kind, elt)}{rw.loc(op)}", op, same=True)
    else:
        rw.define(op, kind, elt)
        nan = re.search(r",\s*propagateNan\s*=\s*\w+", line) if op.name == "tt.clampf" else None  # tl.clamp's
        rw.emit(f"{head} {', '.join(args)}{nan.group(0) if nan else ''} : {rw.type_of(kind, elt)}{rw.loc(op)}", op,
                same=True)
    if any(n in rw.index for n in names) and op.name in ("arith.extsi", "arith.muli", "arith.addi", "arith.remsi"):
        rw.index.add(op.results[0])


def _program_id(rw: Rewrite, op: MOp) -> None:
    line, loc, ind = rw.line_of(op), rw.loc(op), rw.indent(rw.line_of(op))
    if not any(t.is_("x") for t in op.tokens):
        raise Refuse(op, "a second program id in a kernel of one row a program: the rewrite reads program_id(0) "
                         "as the row, and a grid of two axes (GroupNorm's (sample, group), a row and a column block) "
                         "has no row of its own; a kernel of one program a row of a 2-D view (the axes folded into "
                         "program_id(0)) is the form section 8 imports")
    r = op.results[0]
    pid, step, first, rng, base = (rw.name(r) for _ in range(5))
    rw.emit(f"{ind}%{pid} = tt.get_program_id x : i32{loc}", op)
    rw.emit(f"{ind}%{step} = arith.constant {rw.rows} : i32{loc}", op)
    rw.emit(f"{ind}%{first} = arith.muli %{pid}, %{step} : i32{loc}", op)
    rw.emit(f"{ind}%{rng} = tt.make_range {{end = {rw.rows} : i32, start = 0 : i32}} : tensor<{rw.rows}xi32, {ROW_L}>{loc}", op)
    rw.emit(f"{ind}%{base} = tt.splat %{first} : i32 -> tensor<{rw.rows}xi32, {ROW_L}>{loc}", op)
    rw.emit(f"{prefix(line).replace('tt.get_program_id', 'arith.addi')} %{base}, %{rng} : tensor<{rw.rows}xi32, {ROW_L}>{loc}",
            op, same=True)
    rw.define(op, V, "i32")
    rw.index.add(r)


def _make_range(rw: Rewrite, op: MOp) -> None:
    line = rw.line_of(op)
    rw.define(op, C, "i32")
    rw.emit(f"{prefix(line)} {{end = {rw.cols} : i32, start = 0 : i32}} : tensor<{rw.cols}xi32, {COL_L}>{rw.loc(op)}",
            op, same=True)


def _splat(rw: Rewrite, op: MOp) -> None:
    line = rw.line_of(op)
    (n, _), = op.operands()
    n = rw.rename.get(n, n)
    elt = result_elt(line)
    have = rw.kind[n]
    r = op.results[0]
    kind = T if have == V else C
    if have == S:  # a scalar across the columns: the columns' shape (broadcast to the rows where it meets them)
        rw.define(op, C, elt)
        rw.emit(f"{prefix(line)} %{n} : {rw.elt[n]} -> {rw.type_of(C, elt)}{rw.loc(op)}", op, same=True)
        return
    if have != V:
        raise Refuse(op, "'tt.splat' of a tile")
    ind = rw.indent(line)
    e = rw.name(n)
    two = f"tensor<{rw.rows}x1x{elt}, {TILE_L}>"
    rw.emit(f"{ind}%{e} = tt.expand_dims %{n} {{axis = 1 : i32}} : {rw.ty(n)} -> {two}{rw.loc(op)}", op)
    rw.define(op, kind, elt)
    rw.emit(f"{prefix(line).replace('tt.splat', 'tt.broadcast')} %{e} : {two} -> {rw.type_of(T, elt)}{rw.loc(op)}",
            op, same=True)
    if n in rw.index:
        rw.index.add(r)


def _addptr(rw: Rewrite, op: MOp) -> None:
    line = rw.line_of(op)
    (p, _), (o, _) = op.operands()
    if rw.kind[rw.rename.get(p, p)] != S and rw.rename.get(o, o) in rw.loaded and (
            rw.loops or rw.kind[rw.rename.get(p, p)] != V or rw.kind[rw.rename.get(o, o)] != V):
        raise Refuse(op, "'tt.addptr' offsets the row's pointer by a loaded value (a gather through a loaded "
                          "index, as a target's logit): one row a program is imported where its addresses are "
                          "the row's and the columns' alone (a row's gather is imported after the column loop only: "
                          "one element a row, `tl.load(X + row * stride + tl.load(IDX + row))`)")
    kind = join(rw.kind[rw.rename.get(p, p)], rw.kind[rw.rename.get(o, o)])
    ind = rw.indent(line)
    a, b = rw.lift(p, kind, op, ind), rw.lift(o, kind, op, ind)
    pelt, oelt = rw.elt[rw.rename.get(p, p)], rw.elt[rw.rename.get(o, o)]
    rw.define(op, kind, pelt)
    rw.emit(f"{prefix(line)} {a}, {b} : {rw.type_of(kind, pelt)}, {rw.type_of(kind, oelt)}{rw.loc(op)}", op, same=True)


def _columns_in_a_loop(rw: Rewrite, op: MOp, kind: int) -> None:
    """A tile of the row's columns is narrowed to COLS columns a step of the loop over them: one outside
    such a loop (a whole [BLOCK] row read once) would lose its other columns."""
    if kind in (C, P, T) and rw.cols != rw.block and not rw.loops:
        raise Refuse(op, f"'{op.name}' of a [{rw.block}] tile outside the loop over the row's columns: one row "
                          f"a program is imported where its column tiles are the steps of that loop")


def _load(rw: Rewrite, op: MOp) -> None:
    line = rw.line_of(op)
    rw.check_index(op)
    names = [n for n, _ in op.operands()]
    kind = S
    for n in names:
        kind = join(kind, rw.kind[rw.rename.get(n, n)])
    kind = P if kind == C else kind  # a row of the columns alone (a weight): [1, COLS]
    _columns_in_a_loop(rw, op, kind)
    ind = rw.indent(line)
    args = [rw.lift(n, kind, op, ind) for n in names]
    ptr = rw.elt[rw.rename.get(names[0], names[0])]
    rw.define(op, kind, ptr[len("!tt.ptr<"):-1])
    attrs = re.search(r"(\{[^}]*\})\s*:", line)
    rw.emit(f"{prefix(line)} {', '.join(args)}{' ' + attrs.group(1) if attrs else ''} : {rw.type_of(kind, ptr)}"
            f"{rw.loc(op)}", op, same=True)


def _store(rw: Rewrite, op: MOp) -> None:
    line = rw.line_of(op)
    names = [n for n, _ in op.operands()]
    if names[1] in rw.index:
        raise Refuse(op, "'tt.store' stores the row (the program id, one row a program): only address "
                          "arithmetic of the row is imported")
    kind = S
    for n in names:
        kind = join(kind, rw.kind[rw.rename.get(n, n)])
    if kind not in (V, T):
        raise Refuse(op, "'tt.store' of an address that is not the row's (every program would store the same "
                          "place): not imported in a kernel of one row a program")
    _columns_in_a_loop(rw, op, kind)
    ind = rw.indent(line)
    args = [rw.lift(n, kind, op, ind) for n in names]
    ptr = rw.elt[rw.rename.get(names[0], names[0])]
    rw.emit(f"{ind}tt.store {', '.join(args)} : {rw.type_of(kind, ptr)}{rw.loc(op)}", op, same=True)


def _reduce(rw: Rewrite, op: MOp) -> None:
    """`tt.reduce` along axis 0 of a [BLOCK] tile: along axis 1 of the [ROWS, COLS] tile; after a loop, of
    a carry that becomes a row carry (rowloops.py), the carry itself."""
    if len(op.operands()) == 2:
        _reduce_pair(rw, op)
        return
    (n, _), = op.operands()
    r = op.results[0]
    if rw.rename.get(n, n) in rw.carried:  # reduced into the carry each iteration
        rw.rename[r] = rw.carried[rw.rename.get(n, n)]
        return
    if id(op) in rw.folded:  # an online pair's combine after the loop: the sum carry (rowpair.py)
        rw.rename[r] = rw.rename.get(rw.folded[id(op)], rw.folded[id(op)])
        return
    have = rw.kind[rw.rename.get(n, n)]
    lines = rw.src.lines[op.head.line - 1:end_line(op)]
    if have != T:
        raise Refuse(op, "'tt.reduce' of the columns alone (no row) in a kernel of one row a program")
    kind = V if have == T else S
    elt = elt_of(lines[-1].split("->")[-1])
    rw.define(op, kind, elt)
    first = lines[0].replace("axis = 0", "axis = 1").replace(f"%{n})", f"{rw.ref(n)})")
    rw.emit(first, op, same=True)
    for k, text in enumerate(lines[1:-1], op.head.line + 1):
        rw.out.append(text)
        rw.where.append((k, None))
    last = re.sub(r"\(tensor<[^)]*\) -> \S+(?:<[^>]*>)?", f"({rw.ty(rw.rename.get(n, n))}) -> {rw.type_of(kind, elt)}",
                  lines[-1], count=1)
    rw.out.append(last)
    rw.where.append((end_line(op), None))

def _reduce_pair(rw: Rewrite, op: MOp) -> None:
    """`tt.reduce` of two [BLOCK] tiles at once along axis 0 (tl.argmax: the row's values and their column indices,
    rowwhole.py): of their [ROWS, COLS] tiles along axis 1, two [ROWS] results."""
    names = [n for n, _ in op.operands()]
    kinds = [rw.kind[rw.rename.get(n, n)] for n in names]
    if T not in kinds:
        raise Refuse(op, "'tt.reduce' of the columns alone (no row) in a kernel of one row a program")
    lines = rw.src.lines[op.head.line - 1:end_line(op)]
    ind = rw.indent(lines[0])
    args = [rw.lift(n, T, op, ind) for n in names]
    tail = re.sub(r"\s*loc\(.*$", "", lines[-1]).split("->")[-1].strip().strip("()")
    elts = [elt_of(e) for e in tail.split(",")]
    for r, elt in zip(op.results, elts):
        rw.kind[r], rw.elt[r] = V, elt
    first = re.sub(r"\(%[^)]*\)", f"({', '.join(args)})", lines[0].replace("axis = 0", "axis = 1"), count=1)
    rw.emit(first, op, same=True)
    for k, text in enumerate(lines[1:-1], op.head.line + 1):
        rw.out.append(text)
        rw.where.append((k, None))
    ins = ", ".join(rw.type_of(T, rw.elt[rw.rename.get(n, n)]) for n in names)
    outs = ", ".join(rw.type_of(V, e) for e in elts)
    rw.out.append(re.sub(r"\(tensor<.*\) -> \([^)]*\)", f"({ins}) -> ({outs})", lines[-1], count=1))
    rw.where.append((end_line(op), None))


def _scan(rw: Rewrite, op: MOp) -> None:
    """`tt.scan` along axis 0 of a [BLOCK] tile (a row's cumsum in a column loop, rowwhole.py): along axis 1 of the
    [ROWS, COLS] tile, each row's own."""
    (n, _), = op.operands()
    if rw.kind[rw.rename.get(n, n)] != T:
        raise Refuse(op, "'tt.scan' of the columns alone (no row) in a kernel of one row a program")
    lines = rw.src.lines[op.head.line - 1:end_line(op)]
    elt = elt_of(re.sub(r"\s*loc\(.*$", "", lines[-1]).split("->")[-1])
    rw.define(op, T, elt)
    rw.emit(lines[0].replace("axis = 0", "axis = 1").replace(f"%{n})", f"{rw.ref(n)})"), op, same=True)
    for k, text in enumerate(lines[1:-1], op.head.line + 1):
        rw.out.append(text)
        rw.where.append((k, None))
    ty = rw.type_of(T, elt)
    rw.out.append(re.sub(r"\(tensor<[^)]*\) -> tensor<[^>]*>", f"({rw.ty(rw.rename.get(n, n))}) -> {ty}", lines[-1],
                         count=1))
    rw.where.append((end_line(op), None))


def _convert_layout(rw: Rewrite, op: MOp) -> None:
    """`ttg.convert_layout`: the same values in another distribution over the threads (Triton's before a scan);
    every tile of the rewritten kernel has the one layout #rowprog, so it is its operand."""
    (n, _), = op.operands()
    rw.rename[op.results[0]] = rw.rename.get(n, n)


HANDLERS = {"scf.for": loop, "tt.get_program_id": _program_id, "tt.make_range": _make_range, "tt.splat": _splat,
            "tt.addptr": _addptr, "tt.load": _load, "tt.store": _store, "tt.reduce": _reduce, "tt.scan": _scan,
            "ttg.convert_layout": _convert_layout}
