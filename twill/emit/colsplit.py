"""A row loop's columns split over the grid (docs/emit-cuda.md, "A row loop split over the grid").

A row kernel (softmax, LayerNorm, RMSNorm, ...) imports as column loops over tiles of 64 rows: 1000 rows are
16 CTAs on 132 SMs. Each such loop can run as S splits of its columns, split s taking iterations s * n/S ..
(s + 1) * n/S - 1 (the grid axis of splits.py), where what one split computes can be combined with the
others' afterwards:

- a loop with no carry (a normalize-and-store pass) splits as it is: each split stores its own columns;
- a carry whose update is a fold of a value that reads no carry, `c' = OP(c, rowOP(x))` for OP max, min or
  sum, starting from OP's identity (-inf, inf, 0): split s's partial c_s folds its columns alone, and the
  row's carry is OP over the partials (associative and commutative: the same elements in another grouping);
- the online softmax's pair, `m' = rowmax(x, m)`, `l' = rowsum(exp2(y, m'), l, exp2(m, m'))` (l rescaled by
  exp2((m - m') * scale) each iteration, y reading no carry), from (-inf, 0): each split's (m_s, l_s) is the
  pair of its columns, and the row's is m = max_s m_s, l = sum_s l_s * exp2((m_s - m) * scale), the scale
  being the loop's knob exp2_scale (a split whose every element is -inf has l_s = 0 and adds nothing).

Anything else is no fold (a carry read by another op of the loop, an accumulating mma, a sum starting from 1,
a recurrence through NAME@D): the loop is not split, and `plan` says why. So is a loop whose graph has an mma
or another grid line (split-KV's own split, padded rows, a flat map).

Where the combine runs:

- after the kernel, where the carries are handed over or written out: in the sequence's binding
  (emit/sequence.py) or the kernel's own (binding_runtime.call), `COMBINE` being the per-kind torch text it
  runs on the [S, M] partials;
- in the kernel, where the epilogue reads the carries (a cross-entropy's loss from its row's (m, l)): the
  *fixup* (`ColumnSplit.fixup`, emitted by fixup.py). Every split writes its partial carries to a scratch
  buffer and arrives on its rows' counter; the last split to arrive combines the S partials, in split order
  (the same result whichever arrives last), and runs the epilogue and the outputs' stores alone, at the
  batch entry rather than the split's.
"""
from __future__ import annotations

from dataclasses import dataclass

# defined once in the bindings' runtime (copied into each binding), used here and by the sequence's K.py
from .binding_runtime import COLUMN_ARG, COMBINE, MIN_SPLIT_ITERS, choose_splits  # noqa: F401

# a fold's carry update -> (the fold, the identity the carry must start from)
FOLDS = {"rowmax": ("max", "-inf"), "rowmin": ("min", "inf"), "rowsum": ("sum", "0")}

@dataclass(frozen=True)
class Fold:
    """Carries whose split partials combine by `kind` (COMBINE): one carry, or the online pair (m, l)."""
    kind: str  # "max" | "min" | "sum" | "online"
    carries: tuple[str, ...]


@dataclass(frozen=True)
class ColumnSplit:
    """Whether a loop's columns may be split over the grid: its folds, or why not."""
    folds: tuple[Fold, ...] = ()
    why_not: str = ""
    fixup: bool = False  # the epilogue reads the carries: combined in the kernel by the last split (fixup.py)

    def __bool__(self) -> bool:
        return not self.why_not


def _no(why: str) -> ColumnSplit:
    return ColumnSplit((), why)


def _cone(graph, name: str, ops: dict) -> set[str]:
    """The names `name` reads in one iteration (distance 0), itself included."""
    seen, todo = set(), [name]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        op = ops.get(n)
        if op is not None:
            todo += [o.name for o in op.operands if o.distance is None]
    return seen


def plan(graph) -> ColumnSplit:
    """The loop's column split (see the module docstring): its folds, or the reason it has none."""
    if (graph.split and not is_column(graph)) or graph.tile_rows or graph.flat:
        return _no("the graph has a grid line of its own (grid split, rows or flat)")
    ops = {op.name: op for op in graph.ops}
    for op in graph.ops:
        if op.opcode == "mma":
            return _no(f"op {op.name} is an mma: only a loop of row reductions and elementwise ops splits its columns")
        late = [o for o in op.operands if o.distance is not None]
        if late:
            return _no(f"op {op.name} reads {late[0]}: a recurrence of the loop other than a carry's fold")
    carries = {c.name: c for c in graph.carries}
    update = dict(graph.yields)  # carry -> its update
    updated = {u: c for c, u in update.items()}
    readers: dict[str, list] = {}
    for op in graph.ops:
        for o in op.operands:
            readers.setdefault(o.name, []).append(op)
    folds, taken = [], set()
    for c in graph.carries:
        if c.name in taken:
            continue
        u = ops.get(update.get(c.name, ""))
        if u is None or u.opcode not in FOLDS or len(u.operands) < 2 or u.operands[1].name != c.name:
            what = f"{u.name} = {u.opcode}" if u is not None else "its update"
            return _no(f"carry {c.name}'s update {what} is not a fold c' = OP(c, rowOP(x)) of max, min or sum")
        if len(u.operands) == 3:  # l' = rowsum(p, l, alpha): the online pair's rescaled sum
            pair = _online_pair(graph, c, u, ops, update, readers)
            if isinstance(pair, str):
                return _no(pair)
            folds.append(pair)
            taken.update(pair.carries)
            continue
        kind, identity = FOLDS[u.opcode]
        if c.init != identity:
            return _no(f"carry {c.name} starts at {c.init}, not the identity {identity} of its {kind}: each split's "
                       "partial would count it once")
        if (carries.keys() | updated.keys()) & _cone(graph, u.operands[0].name, ops):
            return _no(f"carry {c.name}'s fold {u.name} reduces a value that reads a carry")
        others = [r.name for r in readers.get(c.name, []) + readers.get(u.name, []) if r is not u]
        if others:
            # the running max of an online pair is read by its rescale: the pair is found from its sum
            if kind == "max" and any(_is_pair_sum(ops, update, cc, c.name, u.name) for cc in carries):
                continue
            return _no(f"carry {c.name} ({u.name}) is read by {others[0]} in the loop: not a fold alone")
        folds.append(Fold(kind, (c.name,)))
        taken.add(c.name)
    return ColumnSplit(tuple(folds), fixup=_epilogue_reads_carries(graph))


def _is_pair_sum(ops, update, l_name, m_name, m_new) -> bool:
    u = ops.get(update.get(l_name, ""))
    return (u is not None and u.opcode == "rowsum" and len(u.operands) == 3
            and _alpha_of(ops.get(u.operands[2].name), m_name, m_new))


def _alpha_of(op, m_name, m_new) -> bool:
    """Whether op is exp2(m, m'): the rescale of the pair's sum by the max it had over the new one."""
    return (op is not None and op.opcode == "exp2" and len(op.operands) == 2
            and (op.operands[0].name, op.operands[1].name) == (m_name, m_new))


def _online_pair(graph, l, u, ops, update, readers) -> Fold | str:
    """The online pair (m, l) whose sum's update is `u` = rowsum(p, l, alpha), or why it is not one."""
    alpha = ops.get(u.operands[2].name)
    if alpha is None or alpha.opcode != "exp2" or len(alpha.operands) != 2:
        return f"carry {l.name}'s update {u.name} rescales by {u.operands[2].name}, not exp2(m, m') of a running max"
    m_name, m_new = alpha.operands[0].name, alpha.operands[1].name
    mu = ops.get(update.get(m_name, ""))
    if mu is None or mu.name != m_new or mu.opcode != "rowmax" or len(mu.operands) != 2 \
            or mu.operands[1].name != m_name:
        return f"carry {l.name}'s rescale {alpha.name} is not exp2(m, m') of a running max m' = rowmax(x, m)"
    m = next(c for c in graph.carries if c.name == m_name)
    if (m.init, l.init) != ("-inf", "0"):
        return f"the online pair ({m.name}, {l.name}) starts at ({m.init}, {l.init}), not (-inf, 0)"
    p = ops.get(u.operands[0].name)
    if p is None or p.opcode != "exp2" or len(p.operands) != 2 or p.operands[1].name != m_new:
        return f"carry {l.name}'s sum adds {u.operands[0].name}, not exp2(y, m') of the new running max"
    carries = {c.name for c in graph.carries} | set(update.values())
    for v in (mu.operands[0].name, p.operands[0].name):
        if carries & _cone(graph, v, ops):
            return f"the online pair's {v} reads a carry"
    allowed = {mu.name, alpha.name, p.name, u.name}
    for name in (m.name, m_new, l.name, u.name, p.name, alpha.name):
        others = [r.name for r in readers.get(name, []) if r.name not in allowed]
        if others:
            return f"the online pair's {name} is read by {others[0]} in the loop: not the pair's fold alone"
    return Fold("online", (m.name, l.name))


def is_column(graph) -> bool:
    """Whether the graph's grid split is a column split of a row loop (not split-KV's, imported)."""
    return graph.split == COLUMN_ARG


def fixed_up(graph) -> bool:
    """Whether the graph is a column split whose carries the kernel combines itself (ColumnSplit.fixup)."""
    return is_column(graph) and _epilogue_reads_carries(graph)


def _epilogue_reads_carries(graph) -> bool:
    """A loop with carries and an epilogue of ops: the epilogue needs the row's carries, not a split's."""
    return bool(graph.carries) and bool(graph.epilogue.ops)


def column_graph(graph):
    """The graph of the loop split over the grid by columns, or None where it does not split (`plan`)."""
    from dataclasses import replace
    if is_column(graph) or not plan(graph):
        return None
    return replace(graph, split=COLUMN_ARG, arguments=graph.arguments + ((COLUMN_ARG, None),))

