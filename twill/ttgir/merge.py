"""Loops in sequence that are one loop: the causal split of attention's key loop (the importer
looks for them before it chooses its loop, loops.py).

Triton's causal attention runs two loops over the keys of one query tile: the first over the key
blocks left of the diagonal, unmasked, the second over the diagonal block with the causal mask
`where(rows >= cols, s, -inf)`, its carries starting from the first loop's results. Together they
are one loop over the keys 0 .. the tile's last query row whose last iterations mask. A pair of
sibling `scf.for` loops A, B is merged when they are the same loop over the same body, differing
by a mask predicate on the iteration:

- bounds: B's lower bound is A's upper bound (the same SSA value), the steps are the same value, A
  starts at 0; A's upper bound is `program_id(0) * BM` (the query tile's first row) and B's is that
  plus BM (the tile's end): the merged loop is bounded by the query tile's diagonal;
- the mask: each is an `arith.select %c, %x, -inf` whose condition compares the query row
  `program_id(0) * BM + arange(BM)` along dim 0 with the key `iv + arange(BN)` along dim 1, BN the
  loop's step: `rows >= keys` (`arith.cmpi sge`, or `sle` with the sides swapped) keeps a key at or
  before the query;
- the body: once B's masks and the index arithmetic only they read are set aside, B's body is A's
  op for op as written (same op names, attributes and types; operands that correspond, or values
  from before the loops computed the same way), or else, where Triton's pipeliner wrote each loop
  its own way, the two loops lowered with their pipelining undone are the same tile loop
  (`loop_shape`, compared by the importer's `same_graph`);
- the hand-over (`_handover`): B's tensor iter_args start from A's results of the same place
  (directly, or through a wait or a view); its tokens and slot counters carry no tile. A buffer of
  B's own matched to one of A's (sm_100 allocates the tensor-memory accumulator again) is fresh or
  holds a load of A's, and starts, merged, as A's did.

The importer then lowers B, its carries starting from A's inits and each mask as a `causal_mask`
node (`Merge`). Anything else is not merged: the loops stay separate candidates.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .lower import int_attr
from .parser import MOp
from .types import CLOSE, OPEN, last_top_level

KEEP_PREDICATES = {"sge": False, "sle": True}  # predicate -> whether the sides are (keys, rows)


@dataclass(frozen=True)
class Merge:
    """Loops `first` (unmasked) and `last` (masked) as one; the importer lowers `last`."""

    first: MOp
    last: MOp
    inits: tuple[str, ...]  # the SSA value each of last's iter_args starts from: first's inits
    names: tuple[str, ...]  # first's iter_args, which name the carries (Triton names them there)
    masks: tuple[MOp, ...]  # last's selects that are the causal mask
    buffers: tuple[tuple[str, str], ...] = ()  # (last's buffer, first's): a buffer of its own per loop

    def is_mask(self, op: MOp) -> bool:
        return any(op is m for m in self.masks)

    def on_its_own(self) -> "Merge":
        """The last loop lowered from its own inits, names and buffers, its masks still causal_mask
        nodes: what is compared with the first loop (`loop_shape`)."""
        return replace(self, inits=tuple(i for _, i in _iter_args(self.last)),
                       names=tuple(a for a, _ in _iter_args(self.last)), buffers=())


@dataclass(frozen=True)
class Affine:
    """An integer index tensor as sum(coef * symbol) + const + (an arange along `dim` of `length`)."""

    terms: tuple[tuple[str, int], ...] = ()
    const: int = 0
    range: tuple[int, int] | None = None  # (dim, length)

    def __add__(self, other: "Affine") -> "Affine | None":
        if self.range and other.range:
            return None
        terms = dict(self.terms)
        for s, c in other.terms:
            terms[s] = terms.get(s, 0) + c
        return Affine(tuple(sorted((s, c) for s, c in terms.items() if c)), self.const + other.const,
                      self.range or other.range)

    def scaled(self, k: int) -> "Affine | None":
        if self.range and k != 1:
            return None
        return Affine(tuple((s, c * k) for s, c in self.terms if c * k), self.const * k, self.range)


def loop_bounds(loop: MOp) -> tuple[str, str, str, str] | None:
    """(induction variable, lower, upper, step) SSA names of ``%iv = %lb to %ub step %st``."""
    t = loop.tokens
    if len(t) < 7 or not (t[1].is_("=") and t[3].is_("to") and t[5].is_("step")):
        return None
    names = [t[i].text[1:] for i in (0, 2, 4, 6) if t[i].kind == "ssa"]
    return tuple(names) if len(names) == 4 else None


def _iter_args(loop: MOp) -> list[tuple[str, str]]:
    """(iter_arg, init) SSA names of ``iter_args(%a = %init, ...)``."""
    t, out = loop.tokens, []
    for i in range(1, len(t) - 2):
        if t[i].kind == "ssa" and t[i + 1].is_("=") and t[i + 2].kind == "ssa":
            out.append((t[i].text[1:], t[i + 2].text[1:]))
    return out


def _inits(loop: MOp) -> list[str]:
    return [init for _, init in _iter_args(loop)]


def _definitions(ops, out: dict[str, MOp]) -> dict[str, MOp]:
    for op in ops:
        for r in op.results:
            out[r] = op
            out.setdefault(r.split("#")[0], op)
        for region in op.regions:
            for block in region:
                _definitions(block.ops, out)
    return out


class _Index:
    """The affine form of integer values of one function (None: not affine)."""

    def __init__(self, defs: dict[str, MOp], iv: str):
        self.defs, self.iv = defs, iv

    def of(self, name: str, depth: int = 0) -> Affine | None:
        if name == self.iv:
            return Affine((("iv", 1),))
        op = self.defs.get(name)
        if op is None or depth > 32:
            return None
        args = [n for n, _ in op.operands()]
        if op.name == "arith.constant":
            t = op.tokens
            i = 2 if len(t) > 2 and t[0].is_("dense") else 0
            try:
                return Affine(const=int(t[i].text))
            except (ValueError, IndexError):
                return None
        if op.name == "tt.get_program_id":
            axis = op.tokens[0].text if op.tokens else ""
            return Affine(((f"pid_{axis}", 1),))
        if op.name == "tt.make_range":
            lo, hi = int_attr(op, "start"), int_attr(op, "end")
            return None if lo is None or hi is None else Affine(const=lo, range=(0, hi - lo))
        if op.name in ("tt.splat", "tt.broadcast", "ttg.convert_layout", "arith.extsi", "arith.index_cast"):
            return self.of(args[0], depth + 1) if args else None
        if op.name == "tt.expand_dims":
            a, axis = self.of(args[0], depth + 1) if args else None, int_attr(op, "axis")
            if a is None or axis is None:
                return None
            if a.range is None:
                return a
            dim, length = a.range
            return Affine(a.terms, a.const, (dim + 1 if dim >= axis else dim, length))
        if op.name in ("arith.addi", "arith.muli") and len(args) == 2:
            x, y = self.of(args[0], depth + 1), self.of(args[1], depth + 1)
            if x is None or y is None:
                return None
            if op.name == "arith.addi":
                return x + y
            if not x.terms and x.range is None:
                return y.scaled(x.const)
            if not y.terms and y.range is None:
                return x.scaled(y.const)
        return None


def _is_neg_inf(defs: dict[str, MOp], name: str) -> bool:
    op = defs.get(name)
    if op is None or op.name != "arith.constant" or len(op.tokens) < 3:
        return False
    text = op.tokens[2].text if op.tokens[0].is_("dense") else op.tokens[0].text
    return text.lower() in ("0xff800000", "0xfc00", "0xff80", "-inf", "0xfff0000000000000")


def _masks(loop: MOp, index: _Index, defs: dict[str, MOp], rows: int, step: int) -> list[MOp]:
    """The selects of `loop`'s body that are the causal mask (see the module docstring)."""
    out = []
    for op in loop.body():
        args = [n for n, _ in op.operands()]
        if op.name != "arith.select" or len(args) != 3 or not _is_neg_inf(defs, args[2]):
            continue
        cmp = defs.get(args[0])
        if cmp is None or cmp.name != "arith.cmpi" or not cmp.tokens:
            continue
        swapped = KEEP_PREDICATES.get(cmp.tokens[0].text.rstrip(","))
        sides = [n for n, _ in cmp.operands()]
        if swapped is None or len(sides) != 2:
            continue
        q, k = (index.of(s) for s in (sides[::-1] if swapped else sides))
        if q == Affine((("pid_x", rows),), 0, (0, rows)) and k == Affine((("iv", 1),), 0, (1, step)):
            out.append(op)
    return out


def _cone(loop: MOp, masks: list[MOp], defs: dict[str, MOp]) -> set[int]:
    """ids of the body ops that only the masks' conditions need (index arithmetic), and the masks."""
    body = {id(op): op for op in loop.body()}
    need, todo = {id(m) for m in masks}, [m.operands()[0][0] for m in masks]
    while todo:
        op = defs.get(todo.pop())
        if op is None or id(op) not in body or id(op) in need:
            continue
        need.add(id(op))
        todo.extend(n for n, _ in op.operands())
    users = {}
    for op in loop.body():
        for n, _ in op.operands():
            users.setdefault(n, set()).add(id(op))
    # an op outside the set reading a value of the cone keeps it out: the mask must not feed anything else
    for op in loop.body():
        if id(op) in need and id(op) not in {id(m) for m in masks}:
            if any(u not in need for r in op.results for u in users.get(r, ())):
                return set()
    return need


class _Same:
    """Structural equality of two loop bodies under a renaming of SSA values."""

    def __init__(self, defs: dict[str, MOp]):
        self.defs, self.names = defs, {}
        self.outside: dict[str, str] = {}  # values from before the loops made the same way: a -> b

    def value(self, a: str, b: str, depth: int = 0) -> bool:
        if a in self.names or b in self.names.values():
            return self.names.get(a) == b
        if a == b:
            return True
        da, db = self.defs.get(a), self.defs.get(b)  # values from before both loops, made the same way
        if depth >= 8 or da is None or db is None or a not in da.results or b not in db.results:
            return False
        if da.results.index(a) == db.results.index(b) and self.op(da, db, depth + 1, bind=False):
            self.outside.setdefault(a, b)
            return True
        return False

    def op(self, a: MOp, b: MOp, depth: int = 0, bind: bool = True) -> bool:
        if a.name != b.name or len(a.tokens) != len(b.tokens) or len(a.regions) != len(b.regions):
            return False
        for ta, tb in zip(a.tokens, b.tokens):
            if ta.kind != tb.kind:
                return False
            if ta.kind == "ssa":
                if not self.value(ta.text[1:], tb.text[1:], depth):
                    return False
            elif ta.text != tb.text:
                return False
        if bind:
            self.names.update(zip(a.results, b.results))
        for ra, rb in zip(a.regions, b.regions):
            if len(ra) != len(rb):
                return False
            for ba, bb in zip(ra, rb):
                if len(ba.args) != len(bb.args) or len(ba.ops) != len(bb.ops):
                    return False
                self.names.update((x, y) for (x, _), (y, _) in zip(ba.args, bb.args))
                if not all(self.op(x, y) for x, y in zip(ba.ops, bb.ops)):
                    return False
        return True


def _merge(first: MOp, last: MOp, defs: dict[str, MOp], block: list[MOp], same_graph=None) -> Merge | None:
    """`first` and `last` as one masked loop (the module docstring's rules), or None. Their bodies
    are compared as written; where that fails (Triton's pipeliner gave each loop its own prologue,
    slot counters and prefetch bounds) and `same_graph` is given, by the tile graphs they import to."""
    ba, bb = loop_bounds(first), loop_bounds(last)
    if ba is None or bb is None or bb[1] != ba[2] or bb[3] != ba[3]:
        return None
    if len(_inits(last)) != len(first.results) or len(_inits(first)) != len(first.results):
        return None
    defs = {**defs, **_definitions(last.body(), {})}  # names repeat between loop bodies: last's own
    masks = _diagonal_masks(first, last, defs, ba, bb)
    if not masks:
        return None
    same = _same_text(first, last, defs, masks, ba, bb)
    outside = same.outside if same is not None else {}
    handed = _handover(first, last, defs, outside, block)
    if handed is None:
        return None
    inits, buffers = handed
    merge = Merge(first, last, inits, tuple(a for a, _ in _iter_args(first)), tuple(masks), buffers)
    if same is None and (same_graph is None or not same_graph(merge)):
        return None
    return merge


def _diagonal_masks(first: MOp, last: MOp, defs: dict[str, MOp], ba, bb) -> list[MOp]:
    """`last`'s causal masks where the loops split the keys at the query tile's diagonal (A from 0
    to its first row, B from there one tile on), with the index arithmetic only they read set apart
    (none: an empty list)."""
    index = _Index(defs, bb[0])
    lo, start, end, step = (index.of(n) for n in (ba[1], ba[2], bb[2], bb[3]))
    if lo != Affine() or start is None or end is None or step is None or step.terms or step.range:
        return []
    rows = dict(start.terms).get("pid_x", 0)
    if start != Affine((("pid_x", rows),)) or end != Affine((("pid_x", rows),), rows) or rows <= 0:
        return []
    masks = _masks(last, index, defs, rows, step.const)
    return masks if masks and _cone(last, masks, defs) else []


def _same_text(first: MOp, last: MOp, defs: dict[str, MOp], masks: list[MOp], ba, bb) -> "_Same | None":
    """The matching of `last`'s body, its masks and their index arithmetic set aside, to `first`'s,
    op for op as written (None: they differ)."""
    cone = _cone(last, masks, defs)
    same = _Same(defs)
    same.names[ba[0]] = bb[0]
    for (arg_a, _), (arg_b, _) in zip(_iter_args(first), _iter_args(last)):
        same.names[arg_a] = arg_b
    body_a = list(first.body())
    body_b = [op for op in last.body() if id(op) not in cone]
    # the mask's result stands for its kept operand: A's op that made that operand made it too
    kept = {m.results[0]: m.operands()[1][0] for m in masks}
    if len(body_a) != len(body_b):
        return None
    for a, b in zip(body_a, body_b):
        b_tokens = tuple(t if t.kind != "ssa" or t.text[1:] not in kept else
                         type(t)(t.kind, "%" + kept[t.text[1:]], t.line, t.col) for t in b.tokens)
        if not same.op(a, MOp(b.name, b.results, b_tokens, b.regions, b.head)):
            return None
    return same


BUFFER_ALLOCS = {"ttng.tmem_alloc", "ttg.local_alloc"}
BUFFER_READS = {"ttng.tmem_load", "ttg.local_load"}
BUFFER_WRITES = {"ttng.tmem_store", "ttg.local_store"}


def _handover(first: MOp, last: MOp, defs: dict[str, MOp], outside: dict[str, str],
              block: list[MOp]) -> tuple | None:
    """What `last` starts from is what `first` ends with: each tensor iter_arg starts from `first`'s
    result of the same place (or a wait for it, or a view of it); other iter_args (async tokens,
    the pipeliner's slot counters) carry no tile. Each buffer of its own that the bodies match to one
    of `first`'s (Triton allocates the accumulator again for the second loop) is fresh or holds what
    `first`'s buffer holds after it (a load of it, stored there). The merged loop's inits (first's
    where handed over, else last's own) and the (last's buffer, first's) pairs; None where not."""
    inits = []
    for k, (init, result, kind) in enumerate(zip(_inits(last), first.results, _iter_arg_types(last))):
        handed = _same_value(init, result, defs)
        if kind == "tensor" and not handed:
            return None
        inits.append(_inits(first)[k] if handed else init)
    pairs = []
    for a, b in outside.items():
        da, db = defs.get(a), defs.get(b)
        if da is None or db is None or da.name not in BUFFER_ALLOCS or da.operands() or a == b:
            continue
        stored = [op for op in _between(first, last, block) if op.name in BUFFER_WRITES
                  and len(op.operands()) > 1 and op.operands()[1][0] == b]
        for op in stored:
            src = defs.get(op.operands()[0][0])
            if src is None or src.name not in BUFFER_READS or not src.operands() or src.operands()[0][0] != a:
                return None
        pairs.append((b, a))
    return tuple(inits), tuple(pairs)


HANDOVER_VIEWS = {"ttng.warp_group_dot_wait", "ttg.convert_layout"}


def _same_value(name: str, of: str, defs: dict[str, MOp]) -> bool:
    """Is `name` the value `of`, or a wait for it or a view of it (its first operand, followed)?"""
    for _ in range(8):
        if name == of:
            return True
        op = defs.get(name)
        if op is None or op.name not in HANDOVER_VIEWS or not op.operands():
            return False
        k = op.results.index(name) if name in op.results else 0  # a wait's result k is its operand k
        if k >= len(op.operands()):
            return False
        name = op.operands()[k][0]
    return False


def _iter_arg_types(loop: MOp) -> list[str]:
    """'tensor', 'token' or 'other' for each iter_arg of `loop`, from its result types
    ``-> (T, ...)`` (the types separated by top-level commas)."""
    t = loop.tokens
    arrow = last_top_level(t, "->")
    if arrow is None or arrow + 1 >= len(t) or not t[arrow + 1].is_("("):
        return ["other"] * len(_iter_args(loop))
    kinds, depth, current = [], 0, []
    for tok in t[arrow + 2:]:
        if depth == 0 and tok.kind == "punct" and tok.text in (",", ")"):
            kinds.append("tensor" if current and current[0].is_("tensor") else
                         "token" if [x.text for x in current] == ["!ttg.async.token"] else "other")
            current = []
            if tok.text == ")":
                break
            continue
        depth += tok.kind == "punct" and tok.text in OPEN
        depth -= tok.kind == "punct" and tok.text in CLOSE
        current.append(tok)
    return kinds


def _between(first: MOp, last: MOp, block: list[MOp]) -> list[MOp]:
    """The ops of `block` (which holds both loops) after `first` and before `last`."""
    i = next(k for k, o in enumerate(block) if o is first)
    j = next(k for k, o in enumerate(block) if o is last)
    return list(block[i + 1:j])


def find_merges(func: MOp, same_graph=None) -> list[Merge]:
    """Every pair of sibling loops of `func` (at any depth) that is one masked loop; `same_graph`
    (a Merge -> bool) compares the tile graphs of a pair whose bodies differ as written."""
    defs = _definitions(func.body(), {})
    out: list[Merge] = []

    def walk(ops) -> None:
        loops = [op for op in ops if op.name == "scf.for"]
        for a, b in zip(loops, loops[1:]):
            m = _merge(a, b, defs, list(ops), same_graph)
            if m is not None:
                out.append(m)
        for op in ops:
            for region in op.regions:
                for block in region:
                    walk(block.ops)
    walk(func.body())
    return out


def merge_candidates(loops: list[tuple[MOp, tuple[MOp, ...]]],
                     same_graph=None) -> list[tuple[MOp, tuple[MOp, ...], Merge | None]]:
    """The importer's candidate loops, `(func, path)` each, as `(func, path, merge)`: a loop merged
    with its neighbour stands for the masked loop of the pair, with its `Merge` (both loops' entries
    become that one candidate); any other loop is itself, with None."""
    merges: dict[int, tuple[Merge, tuple[MOp, ...]]] = {}
    for func in dict.fromkeys(f for f, _ in loops):
        for m in find_merges(func, same_graph and (lambda merge, f=func: same_graph(f, merge))):
            last_path = next(p for f, p in loops if f is func and p[-1] is m.last)
            merges[id(m.first)] = merges[id(m.last)] = (m, last_path)
    out = []
    for func, path in loops:
        if id(path[-1]) in merges:
            m, last_path = merges[id(path[-1])]
            out.append((func, last_path, m))
        else:
            out.append((func, path, None))
    return out


def loop_shape(lowered, unmask: bool = False) -> tuple:
    """A lowered loop (`Lowered`, pipelining undone) with its values replaced by places, the way two
    loops that compute the same are compared: each node of the loop by kind, TTGIR op, type,
    attributes and operands (a node of the loop by its place, a carry by its index, a value from
    before the loop by what made it, constants by value, scalars and tokens by kind); with
    `unmask`, each `causal_mask` node is left out and its readers read its operand."""
    from .values import Tile
    alias: dict[int, object] = {}
    nodes = [n for n in lowered.nodes if n.in_loop]
    if unmask:
        for n in nodes:
            if n.kind == "causal_mask" and n.args:
                alias[n.index] = alias.get(n.args[0].ref.index, n.args[0]) if n.args[0].ref.kind == "node" else n.args[0]
        if not alias:
            return ()
    kept = [n for n in nodes if n.index not in alias]
    place = {n.index: k for k, n in enumerate(kept)}

    def arg(a) -> tuple:
        if isinstance(a, Tile):
            if a.ref.kind == "node" and a.ref.index in alias:
                base = alias[a.ref.index]
                return arg(base) if isinstance(base, Tile) else ("?",)
            if a.ref.kind == "carry":
                return ("carry", a.ref.index, a.flip, a.column)
            n = lowered.nodes[a.ref.index]
            where = ("loop", place.get(a.ref.index)) if n.in_loop else ("before", n.kind, n.mlir, n.type)
            return where + (a.flip, a.column)
        return (type(a).__name__, getattr(a, "value", None))
    return (tuple(c.type for c in lowered.carries),
            tuple((n.kind, n.mlir, n.type, n.attrs, n.opcode, tuple(arg(a) for a in n.args)) for n in kept),
            tuple(arg(y) for y in lowered.yields))
