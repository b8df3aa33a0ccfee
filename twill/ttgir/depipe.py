"""Undo Triton's software pipelining on a lowered loop: give back the loop as it was written.

After Triton's pipeliner a loop computes some of its ops ahead, for a later iteration (the loads, on
sm_100 also the S = Q Kᵀ mma and the softmax), and hands the result to the iteration that uses it
through a carry: an iter_arg, or a buffer written late in the body and read early in the next one
(after `lower.py`, which drops the slot index of a multi-buffered allocation). The first iterations'
copies of those ops are peeled before the loop (the prologue). Three rewrites put it back:

1. **Delays go.** A carry that lies on no dependence cycle (nothing that reads it leads back to the
   value the loop yields for it) and starts from a peeled copy of that value (the same op, the same
   type, computed before the loop) only delays a value by an iteration: its readers read the value
   itself. (A carry on a cycle is a recurrence of the kernel: acc, m_i, l_i.)
2. **Recurrences start where the kernel starts them.** A recurrence whose initial value is a peeled
   copy of what the loop yields for it (m after iteration 0, computed in the prologue) starts from the
   value that copy reads where the loop reads the carry, back through every peeled copy (the -inf
   Triton's `max(m, rowmax)` starts from); commutative ops are matched either way round, and a peeled
   copy guarded by ``select %loop_runs, COPY, START`` starts from START. The pipeliner names such an
   iter_arg after the peeled value; the carry is named as one with a numeric name (build.py).
3. **Order.** The loop's ops are listed in a topological order that follows the kernel's source: of
   the ops whose operands are ready, the one whose `loc` comes first (program order on a tie, and for
   an op without a location the position of the op before it).

4. **Once.** A pure op of the loop computed twice from the same operands is computed once, and a pure
   op whose result nothing reads is dropped (a warp partition recomputes the correction factor from
   the row maxes another one handed it through shared memory).

A loop that was never pipelined passes through unchanged except for rules 3 and 4, so both forms of a kernel
give the same graph.
"""
from __future__ import annotations

from dataclasses import replace

from .locs import source_order
from .lower import layout_attrs
from .values import Lowered, Node, Ref, Tile

COMMUTATIVE = {
    "arith.addf", "arith.mulf", "arith.maxnumf", "arith.minnumf", "arith.maximumf", "arith.minimumf",
    "arith.addi", "arith.muli", "arith.andi", "arith.ori", "arith.xori", "arith.maxsi", "arith.minsi",
    "arith.maxui", "arith.minui",
}


def depipeline(lowered: Lowered) -> Lowered:
    """The loop with delays removed, recurrences' initial values recovered and ops in source order."""
    nodes, yields = list(lowered.nodes), list(lowered.yields)
    delays = _delays(lowered)
    nodes = _positions_from_peel(nodes, yields, lowered.carries, delays)
    alias = {k: yields[k] for k in delays}
    nodes = [_resolve_node(n, alias, nodes) for n in nodes]
    carries = list(lowered.carries)
    for k, carry in enumerate(carries):
        if k not in delays:
            start = _initial(nodes, k, yields[k], carry.init, alias)
            if start != carry.init and carry.arg is not None:  # its iter_arg is named after a peeled value
                carry = replace(carry, ssa="", key=carry.key or carry.ssa)  # (the epilogue reads it by it)
            carries[k] = replace(carry, init=start)
    for k, carry in enumerate(carries):  # a carry that takes another's value, starting where it starts
        later = yields[k]
        if (k not in delays and isinstance(later, Tile) and later.ref.kind == "carry" and later.ref.index != k
                and later.ref.index not in delays and carry.init is not None
                and carries[later.ref.index].init == carry.init):
            delays.add(k)
            alias[k] = later
            nodes = [_resolve_node(n, {k: later}, nodes) for n in nodes]
    keep = [k for k in range(len(carries)) if k not in delays]
    renumber = {k: i for i, k in enumerate(keep)}
    nodes = [replace(n, operands=tuple(_recarry(r, renumber) for r in n.operands)) for n in nodes]
    lowered = replace(lowered, nodes=tuple(nodes), carries=tuple(carries[k] for k in keep),
                      yields=tuple(_recarry_value(_resolve_arg(yields[k], alias), renumber) for k in keep))
    return _reorder(_drop_dead(_common(lowered)))


PURE = {"ew", "conv", "exp2", "rowmax", "rowsum", "reduce", "scan", "move", "mask", "tail_mask", "position", "rand"}


def _common(lowered: Lowered) -> Lowered:
    """Rule 4: an op of the loop computed twice from the same operands (a warp partition recomputing the
    correction factor its neighbour computed) is computed once."""
    nodes, seen, alias = list(lowered.nodes), {}, {}
    for n in nodes:
        if not n.in_loop:
            continue
        args = tuple(Tile(alias.get(a.ref, a.ref), a.flip, a.column) if isinstance(a, Tile) else a for a in n.args)
        n = nodes[n.index] = replace(n, args=args, operands=tuple(alias.get(r, r) for r in n.operands))
        if n.kind not in PURE:
            continue
        key = (n.kind, n.mlir, n.type, n.attrs, n.opcode, args)
        if key in seen:
            alias[Ref("node", n.index)] = Ref("node", seen[key])
        else:
            seen[key] = n.index
    if not alias:
        return lowered
    yields = tuple(replace(y, ref=alias.get(y.ref, y.ref)) if isinstance(y, Tile) else y for y in lowered.yields)
    return replace(lowered, nodes=tuple(nodes), yields=yields)


def _drop_dead(lowered: Lowered) -> Lowered:
    """Pure ops of the loop whose result nothing reads (a copy to shared memory that only another
    partition read, now that it reads the value itself) are dropped: no op reads them any more."""
    nodes = list(lowered.nodes)
    while True:
        used = {r.index for n in nodes if n is not None and n.in_loop for r in n.operands if r.kind == "node"}
        used |= {y.ref.index for y in lowered.yields if isinstance(y, Tile) and y.ref.kind == "node"}
        dead = [n.index for n in nodes if n is not None and n.in_loop and n.kind in PURE and n.index not in used]
        if not dead:
            break
        for i in dead:
            nodes[i] = None
    if None not in nodes:
        return lowered
    keep = [n for n in nodes if n is not None]
    new = {n.index: k for k, n in enumerate(keep)}

    def move(v):
        if isinstance(v, Tile) and v.ref.kind == "node":
            return replace(v, ref=Ref("node", new[v.ref.index])) if v.ref.index in new else None
        return v

    out = [replace(n, index=new[n.index], operands=tuple(Ref("node", new[r.index]) if r.kind == "node" else r
                                                            for r in n.operands),
                   args=tuple(move(a) for a in n.args)) for n in keep]
    carries = tuple(replace(c, init=move(c.init)) for c in lowered.carries)
    return replace(lowered, nodes=tuple(out), carries=carries, yields=tuple(move(y) for y in lowered.yields))


def _resolve(ref: Ref, alias: dict[int, Tile]) -> Ref:
    return alias[ref.index].ref if ref.kind == "carry" and ref.index in alias else ref


def _resolve_node(n: Node, alias: dict[int, Tile], nodes: list[Node]) -> Node:
    """`n` reading what the delays in `alias` delayed (seen through the transposes both ways); an mma's
    `transpose_a/b` follow."""
    if not n.in_loop:
        return n
    args = tuple(_resolve_arg(a, alias) for a in n.args)
    delayed = any(isinstance(a, Tile) and a.ref.kind == "carry" and a.ref.index in alias for a in n.args[:2])
    n = replace(n, operands=tuple(_resolve(r, alias) for r in n.operands), args=args)
    if n.kind == "mma" and len(args) >= 2 and delayed:
        shapes = [(nodes[a.ref.index].type.shape, a.flip) if isinstance(a, Tile) and a.ref.kind == "node" else None
                  for a in args[:2]]
        if None not in shapes:
            n = replace(n, attrs=tuple(kv for kv in n.attrs if kv[0] not in ("transpose_a", "transpose_b"))
                        + layout_attrs(*shapes))
    return n


def _resolve_arg(a: object, alias: dict[int, Tile]) -> object:
    if isinstance(a, Tile) and a.ref.kind == "carry" and a.ref.index in alias:
        y = alias[a.ref.index]
        return Tile(y.ref, y.flip != a.flip, a.column)
    return a


def _recarry_value(v: object, renumber: dict[int, int]) -> object:
    """A yielded value with the carry it names renumbered (a buffer that the loop leaves as it is)."""
    return replace(v, ref=_recarry(v.ref, renumber)) if isinstance(v, Tile) and v.ref.index in renumber \
        or not (isinstance(v, Tile) and v.ref.kind == "carry") else v


def _recarry(ref: Ref, renumber: dict[int, int]) -> Ref:
    return Ref("carry", renumber[ref.index]) if ref.kind == "carry" else ref


def _yield_node(lowered: Lowered, k: int) -> Node | None:
    y = lowered.yields[k]
    if isinstance(y, Tile) and y.ref.kind == "node" and lowered.nodes[y.ref.index].in_loop:
        return lowered.nodes[y.ref.index]
    return None


def _positions_from_peel(nodes: list[Node], yields: list, carries, delays: set[int]) -> list[Node]:
    """A `position` (or a `rand`, whose counter is one: ttgir/draw.py) the loop computes ahead (sm_100's S and
    softmax, an iteration early) reads the induction variable of the iteration before the one it serves: its
    constant is that of its peeled copy, the instance of the loop's first iteration (indices.position_attrs), so
    that the loop as written computes each iteration's own positions."""
    pairs: dict[int, Node] = {}

    def walk(y: Node, copy: Node, depth: int) -> None:
        if depth > 64 or not _is_copy(copy, y) or len(y.args) != len(copy.args):
            return
        if y.kind in ("position", "causal_mask", "rand"):
            pairs.setdefault(y.index, copy)
        for a, b in zip(y.args, copy.args):
            if isinstance(a, Tile) and isinstance(b, Tile) and a.ref.kind == b.ref.kind == "node" \
                    and nodes[a.ref.index].in_loop:
                walk(nodes[a.ref.index], nodes[b.ref.index], depth + 1)
    for k in sorted(delays):
        y, init = yields[k], carries[k].init
        if isinstance(y, Tile) and isinstance(init, Tile) and y.ref.kind == init.ref.kind == "node":
            walk(nodes[y.ref.index], nodes[init.ref.index], 0)
    out = list(nodes)
    for index, copy in pairs.items():
        if out[index].kind not in ("position", "rand"):
            continue
        key = "offset" if out[index].kind == "position" else "rand_base"  # (a draw's constant term: ttgir/draw.py)
        offset = dict(copy.attrs).get(key, 0)
        out[index] = replace(out[index], attrs=tuple(kv for kv in out[index].attrs if kv[0] != key)
                             + (((key, offset),) if offset else ()))
    return _bands_from_peel(out, pairs)


def _bands_from_peel(nodes: list[Node], pairs: dict[int, Node]) -> list[Node]:
    """A band mask the loop computes ahead (a peeled copy of it before the loop, `pairs`) keeps, of
    the iteration it serves, the band of its peeled copy, which must be its own band shifted by one
    of the shifts under which the loop covers it (`ahead`, scalars._band); a mask not computed ahead
    keeps its own band, which the loop must cover as read. Anything else is the error the lowering
    put off, at the mask. (A mask computed a block ahead reads `iv + step + c`: as read, of the key
    `iv + c`, its band is the served one shifted down a block, which the loop may cover too: the
    one-loop causal kernel's `d <= -64` on sm_100; kept, it would drop each row's last 64 keys.)"""
    from . import band
    from .scalars import band_error
    out = list(nodes)
    for n in nodes:
        attrs = dict(n.attrs)
        if n.kind != "causal_mask":
            continue
        shifts, why = attrs.get("ahead", ((), None))
        copy = pairs.get(n.index)
        rest = tuple(kv for kv in n.attrs if kv[0] not in ("ahead",) + band.BAND_ATTRS)
        try:
            mine = band.from_attrs(n.attrs)
            theirs = band.from_attrs(copy.attrs) if copy is not None else None
        except ValueError:
            mine, theirs = None, None
        if mine is None:
            continue
        if theirs is not None and theirs != mine:  # computed ahead: its copy's band is the one it serves
            if not any(band.shifted(mine, by) == theirs for by in shifts):
                raise band_error(n.span, None, why or (
                    "the mask is computed ahead of the iteration it serves, and no whole-block shift of its band "
                    "that the loop covers is the band of its copy peeled before the loop"))
            out[n.index] = replace(n, attrs=theirs.attrs() + rest)
        elif why is not None:
            raise band_error(n.span, None, why)
        elif "ahead" in attrs:
            out[n.index] = replace(n, attrs=mine.attrs() + rest)
    return out


def _is_copy(copy: Node, of: Node) -> bool:
    """`copy`, computed before the loop, is a peeled copy of the loop's `of`: the same op and type."""
    return not copy.in_loop and copy.mlir == of.mlir and copy.kind == of.kind and copy.type == of.type


def _delays(lowered: Lowered) -> set[int]:
    """The carries of rule 1: on no cycle, starting from a peeled copy of what the loop yields."""
    readers: dict[Ref, list[int]] = {}
    for n in lowered.nodes:
        if n.in_loop:
            for r in set(n.operands):
                readers.setdefault(r, []).append(n.index)
    carried_by = {}  # yielded node -> the carries it is yielded to
    for k in range(len(lowered.carries)):
        y = _yield_node(lowered, k)
        if y is not None:
            carried_by.setdefault(y.index, []).append(k)
    out = set()
    for k, carry in enumerate(lowered.carries):
        y, init = _yield_node(lowered, k), carry.init
        if y is None or not (isinstance(init, Tile) and init.ref.kind == "node"):
            continue
        if not _is_copy(lowered.nodes[init.ref.index], y):
            continue
        if not _reaches(readers, carried_by, Ref("carry", k), y.index):
            out.add(k)
    return out


def _reaches(readers, carried_by, start: Ref, target: int) -> bool:
    """Whether a value computed from `start` (through ops and carries) reaches node `target`."""
    seen, todo = set(), [start]
    while todo:
        ref = todo.pop()
        for n in readers.get(ref, []):
            if n == target:
                return True
            if n not in seen:
                seen.add(n)
                todo.append(Ref("node", n))
                todo += [Ref("carry", k) for k in carried_by.get(n, [])]
    return False


def _initial(nodes: list[Node], k: int, yielded: object, init: object, alias: dict[int, Tile]) -> object:
    """Rule 2: the value carry `k` had before the peeled copies of its update ran."""
    if not (isinstance(yielded, Tile) and yielded.ref.kind == "node"):
        return init
    y = nodes[yielded.ref.index]
    for _ in range(len(nodes)):  # each step goes back one peeled copy
        guarded = _guarded(nodes, init, y)
        if guarded is not None:
            init = guarded
            continue
        if not (isinstance(init, Tile) and init.ref.kind == "node" and _is_copy(nodes[init.ref.index], y)):
            return init
        earlier = _match(nodes, Ref("carry", k), y, nodes[init.ref.index], 0)
        if earlier is None:
            return init
        init = earlier
    return init


def _guarded(nodes: list[Node], init: object, y: Node) -> object | None:
    """``select %ran, COPY, START`` before the loop (Triton's guard on a peeled iteration for a loop
    that may not run): START, the carry's value when it does not."""
    if not (isinstance(init, Tile) and init.ref.kind == "node"):
        return None
    n = nodes[init.ref.index]
    if n.in_loop or n.mlir != "arith.select" or len(n.args) != 3 or isinstance(n.args[0], Tile):
        return None
    copy = n.args[1]
    if isinstance(copy, Tile) and copy.ref.kind == "node" and _is_copy(nodes[copy.ref.index], y):
        return n.args[2]
    return None


def _match(nodes: list[Node], target: Ref, y: Node, copy: Node, depth: int = 0) -> object | None:
    """What `copy` (a peeled copy of the loop's node `y`) reads where `y` reads `target`, directly or
    through its operands (None when `copy` is no copy of `y` or never reads it)."""
    ok, found = _pair(nodes, target, y, copy, depth)
    return found if ok else None


def _pair(nodes, target: Ref, y: Node, copy: Node, depth: int) -> tuple[bool, object | None]:
    """(whether `copy` has `y`'s structure, what it reads in `target`'s place), operands matched in
    order, or the other way round for a commutative op of two."""
    if depth > 64 or len(y.args) != len(copy.args):
        return False, None
    orders = [copy.args] + ([copy.args[::-1]] if y.mlir in COMMUTATIVE and len(copy.args) == 2 else [])
    for args in orders:
        ok, found = True, None
        for a, b in zip(y.args, args):
            if isinstance(a, Tile) and a.ref == target:
                found = b
            elif isinstance(a, Tile) and a.ref.kind == "node" and nodes[a.ref.index].in_loop:
                inner = nodes[a.ref.index]
                if not (isinstance(b, Tile) and b.ref.kind == "node" and _is_copy(nodes[b.ref.index], inner)):
                    ok = False
                    break
                sub_ok, sub = _pair(nodes, target, inner, nodes[b.ref.index], depth + 1)
                if not sub_ok:
                    ok = False
                    break
                found = sub if sub is not None else found
        if ok:
            return True, found
    return False, None


def _reorder(lowered: Lowered) -> Lowered:
    """Rule 3: the in-loop nodes renumbered in source order (topologically); nodes before the loop keep
    their numbers."""
    nodes = lowered.nodes
    inside = [n.index for n in nodes if n.in_loop]
    if not inside or inside != list(range(inside[0], len(nodes))):
        return lowered
    key, last = {}, (0,)
    for i in inside:
        last = nodes[i].pos or last
        key[i] = (last, i)
    deps = {i: {r.index for r in nodes[i].operands if r.kind == "node" and nodes[r.index].in_loop} - {i}
            for i in inside}
    order = source_order(inside, deps, key)
    if order is None:  # a cycle within one iteration: keep program order
        return lowered
    first = inside[0]
    new_index = {old: first + k for k, old in enumerate(order)}

    def move(r: Ref) -> Ref:
        return Ref("node", new_index[r.index]) if r.kind == "node" and r.index in new_index else r

    def move_val(v: object) -> object:
        return replace(v, ref=move(v.ref)) if isinstance(v, Tile) else v

    moved = list(nodes[:first]) + [nodes[old] for old in order] + list(nodes[first + len(order):])
    moved = [replace(n, index=k, operands=tuple(move(r) for r in n.operands),
                     args=tuple(move_val(a) for a in n.args)) for k, n in enumerate(moved)]
    carries = tuple(replace(c, init=move_val(c.init)) for c in lowered.carries)
    return replace(lowered, nodes=tuple(moved), carries=carries, yields=tuple(move_val(y) for y in lowered.yields))
