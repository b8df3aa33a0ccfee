"""One row a program as 64 rows a CTA (rowprog.py): a loop over the row's columns and its carries.

A carry takes the widest kind its loop gives it; a [BLOCK] vector carry whose final value the loop's
result is reduced by the op that updates it (sum, max, min) becomes a [64] row carry reduced into each
iteration (`update`), the reduction after the loop the carry itself (rowprog.py says why it is equal).
"""
from __future__ import annotations

import re

from .parser import MOp
from .rowprog import C, COMBINERS, P, S, T, V, Refuse, Rewrite, end_line, join, prefix, search, walk_ops


def _kinds(rw: Rewrite, ops, kinds: dict) -> dict:
    """The kind of each value the ops define, given `kinds` of what they read (as the handlers decide)."""
    out = dict(kinds)
    for op in ops:
        names = [n for n, _ in op.operands()]
        have = [out.get(rw.rename.get(n, n), S) for n in names]
        if op.name == "tt.get_program_id":
            kind = V
        elif op.name == "tt.make_range" or (op.name == "arith.constant" and "tensor<" in rw.line_of(op)):
            kind = C
        elif op.name == "tt.splat":
            kind = T if have and have[0] == V else C
        elif op.name == "tt.reduce":
            kind = {T: V, C: S}.get(have[0], S) if id(op) not in rw.updates else V
        elif op.name == "tt.load":
            kind = S
            for k in have:
                kind = join(kind, k)
            kind = P if kind == C else kind
        elif op.name == "scf.for":
            kind = None
            for r in op.results:
                out[r] = rw.kind.get(r, S)
        else:
            kind = S
            for k in have:
                kind = join(kind, k)
        if kind is not None:
            for r in op.results:
                out[r] = kind
        if id(op) in rw.updates:
            out[op.results[0]] = V
    return out


def _header(line: str, op: MOp):
    """(the `iter_args` pairs (arg, init), the step's SSA name) of an `scf.for` line."""
    m = re.search(r"iter_args\((.*?)\)\s*->", line)
    pairs = re.findall(r"%([\w.$#-]+) = %([\w.$#-]+)", m.group(1)) if m else []
    step = search(r"\bstep %([\w.$#-]+)", line, op, "`step %VALUE`").group(1)
    return pairs, step


def loop(rw: Rewrite, op: MOp) -> None:
    line, ind, loc = rw.line_of(op), rw.indent(rw.line_of(op)), rw.loc(op)
    body = list(op.body())
    yld = body[-1] if body and body[-1].name == "scf.yield" else None
    if yld is None:
        body.append(None)
    pairs, step = _header(line, op)
    iv = search(r"scf\.for %([\w.$-]+) =", line, op, "`scf.for %IV = ...`").group(1)
    yields = [n for n, _ in yld.operands()] if yld is not None else []
    args = [a for a, _ in pairs]
    for a, init in pairs:
        rw.elt[a] = rw.elt[rw.rename.get(init, init)]
    carry = {a: rw.kind[rw.rename.get(init, init)] for a, init in pairs}
    _row_carries(rw, op, pairs, yields, body)
    for a in args:
        if a in rw.reduced:
            carry[a] = V
    for _ in range(4):  # a carry takes the widest kind its loop gives it
        kinds = _kinds(rw, body[:-1], {**rw.kind, **carry, iv: S})
        new = {a: join(carry[a], kinds.get(y, S)) for a, y in zip(args, yields)}
        if new == carry:
            break
        carry = new
    # the column step
    if rw.consts.get(step) != str(rw.block):
        raise Refuse(op, f"a loop of one row a program stepping by other than its column tile ({rw.block})")
    new_step = step
    if rw.cols != rw.block:
        new_step = rw.name(step)
        rw.emit(f"{ind}%{new_step} = arith.constant {rw.cols} : i32{loc}", op)
    inits = []
    for a, init in pairs:
        if a in rw.reduced:
            fresh = rw.name(a)
            rw.emit(f"{ind}%{fresh} = arith.constant dense<{rw.reduced[a][1]}> : {rw.type_of(V, rw.elt[a])}{loc}", op)
            inits.append(f"%{a} = %{fresh}")
        else:
            inits.append(f"%{a} = {rw.lift(init, carry[a], op, ind)}")
        rw.kind[a] = carry[a]
    rw.kind[iv], rw.elt[iv] = S, "i32"
    types = [rw.ty(a) for a in args]
    head = line[:line.index("iter_args(")] if pairs else line[:line.index(" : i32")]
    head = head.replace(f"step %{step}", f"step %{new_step}")
    results = _result_names(rw, op, args)
    if results != list(op.results):  # `%d:2 = scf.for` as `%row_max, %denom = scf.for`
        head = re.sub(r"^(\s*)%[\w.$-]+:\d+ =", lambda m: m.group(1) + ", ".join("%" + r for r in results) + " =", head)
        for r, new in zip(op.results, results):
            rw.rename[r] = new
    if pairs:
        head += f"iter_args({', '.join(inits)}) -> ({', '.join(types)}) "
    rw.emit(f"{head} : i32 {{", op, same=True)
    rw.loops += 1
    rw.body(body[:-1])
    rw.loops -= 1
    if yld is None:
        pass
    elif yields:
        yind = rw.indent(rw.line_of(yld))
        vals = [rw.lift(y, carry[a], yld, yind) for a, y in zip(args, yields)]
        rw.emit(f"{yind}scf.yield {', '.join(vals)} : {', '.join(types)}{rw.loc(yld)}", yld, same=True)
    else:
        rw.emit(rw.line_of(yld), yld, same=True)
    end = end_line(op)
    rw.out.append(rw.src.lines[end - 1])
    rw.where.append((end, None))
    for r, a in zip(results, args):
        rw.kind[r], rw.elt[r] = carry[a], rw.elt[a]
        if a in rw.reduced:
            rw.carried[r] = r


def _result_names(rw: Rewrite, op: MOp, args: list[str]) -> list[str]:
    """The loop's result names: where a loop of several results has row carries, each its own name, a row
    carry's the name of its reduction after the loop (what the kernel calls the row's value: `row_max`, not
    `d_4#0`), the others `d_4_1`."""
    if len(op.results) < 2 or not any(a in rw.reduced for a in args):
        return list(op.results)
    return [rw.result_name.get(a) or r.replace("#", "_") for r, a in zip(op.results, args)]


def _row_carries(rw: Rewrite, loop: MOp, pairs, yields, body) -> None:
    """Mark the [BLOCK] vector carries reduced after the loop by the op that updates them: each becomes a
    [ROWS] carry reduced into each iteration (`rw.reduced`, `rw.updates`); refuse the near misses."""
    inner: dict[str, list] = {}  # uses inside this loop (Triton's printer reuses names in sibling loops)
    for o in walk_ops(loop.body()):
        for n, _ in o.operands():
            inner.setdefault(n, []).append(o)
    from .rowpair import pair_carries
    taken = pair_carries(rw, loop, pairs, yields, inner)
    for k, ((a, init), y) in enumerate(zip(pairs, yields)):
        if a in taken:
            continue
        res = loop.results[k] if k < len(loop.results) else None
        after = [u for u in rw.uses.get(res, []) if u.name == "tt.reduce"]
        if not after or rw.kind.get(rw.rename.get(init, init)) != C:
            continue
        red = after[0]
        combiner = next((o for o in walk_ops(red.body())), None)
        if combiner is None or combiner.name not in COMBINERS:
            raise Refuse(red, f"'tt.reduce' after the loop of the carry '%{res}' by '{getattr(combiner, 'name', '?')}': a "
                               "[BLOCK] carry is reduced into a row's carry each iteration only by an associative "
                               "and commutative op (sum, max, min)")
        if len(rw.uses.get(res, [])) != 1:
            raise Refuse(red, f"'tt.reduce' after the loop of the [BLOCK] carry '%{res}', which is read after the loop "
                               "other than by this reduction (an online softmax's running max, which also rescales its "
                               "sum): a carry is reduced into a row's carry each iteration only where the loop's result "
                               "is read by its reduction alone")
        readers = inner.get(a, [])
        upd = readers[0] if len(readers) == 1 else None
        if upd is None or upd.name != combiner.name or upd.results != (y,) or [u.name for u in inner.get(y, [])] != ["scf.yield"]:
            raise Refuse(red, f"'tt.reduce' after the loop of the carry '%{res}': the loop reads the carry other than "
                               f"by its update `c = {combiner.name} c, t` (a carry rescaled by another, as an online "
                               "softmax's sum is, is not reduced into a row's carry)")
        ident = COMBINERS[combiner.name][1]
        if rw.consts.get(rw.rename.get(init, init)) != ident:
            raise Refuse(red, f"'tt.reduce' after the loop of the carry '%{res}', which starts at other than the "
                               f"identity of its reduction ({ident})")
        rw.reduced[a] = (combiner.name, ident)
        rw.result_name[a] = red.results[0]
        rw.updates[id(upd)] = (combiner.name, ident, a)


def update(rw: Rewrite, op: MOp) -> None:
    """`c' = c OP t` of a row carry: `c' = c OP reduce_OP(t, axis 1)`."""
    combiner, _, a = rw.updates[id(op)]
    line, ind, loc = rw.line_of(op), rw.indent(rw.line_of(op)), rw.loc(op)
    t = next(n for n, _ in op.operands() if n != a)
    tk = rw.kind[rw.rename.get(t, t)]
    val = rw.lift(t, T if tk in (V, C, T) else T, op, ind)
    elt = rw.elt[a]
    red = rw.name(a)
    rw.emit(f'{ind}%{red} = "tt.reduce"({val}) <{{axis = 1 : i32}}> ({{', op)
    rw.emit(f"{ind}^bb0(%{red}_a: {elt}, %{red}_b: {elt}):", op)
    rw.emit(f"{ind}  %{red}_c = {combiner} %{red}_a, %{red}_b : {elt}", op)
    rw.emit(f"{ind}  tt.reduce.return %{red}_c : {elt}", op)
    rw.emit(f"{ind}}}) : ({rw.type_of(T, elt)}) -> {rw.type_of(V, elt)}{loc}", op)
    rw.define(op, V, elt)
    rw.emit(f"{prefix(line)} %{a}, %{red} : {rw.type_of(V, elt)}{loc}", op, same=True)
