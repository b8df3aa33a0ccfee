"""Program ids the graph does not represent (docs/ttgir-import.md, section 2, "Program ids").

A graph places its tiles by its own structure: emit-cuda's grid has a row tile, a column tile and a
batch index, and its loop runs from 0 over the whole extent of what it reads (or, under a causal or
sliding-window `causal_mask`, over the key blocks the band of the query tile keeps). Two uses of a
program id fall outside that, and each is an error at its TTGIR line rather than a kernel that
computes something else:

- **the loop's bounds**: a lower or upper bound (or step) that depends on a program id. Only the
  query tile's program id x (``tt.get_program_id x``, the grid row the import reads masks against)
  is represented, and only where the graph has a `causal_mask` whose band the bounds were checked
  to cover (band.py, merge.py); and a split of the loop over a grid axis, split-KV attention's
  ``range(split * SPLIT_LEN, split * SPLIT_LEN + SPLIT_LEN, BLOCK_N)`` with its outputs at
  ``(split * num_bh + bh) * N_Q ...``, the graph's `grid split = SPLIT_LEN` (splits.py: `check`
  returns it, and each near miss of it is an error at its op);
- **a store's address**: a program id that no load's address reads (other than a split's): the
  emitted kernel would write every such program's result to the same place.

Dependence is structural: a value depends on a program id where the ops that compute it reach a
``tt.get_program_id``. A loop's induction variable is a leaf (its bounds are the first rule's), an
iter_arg stands for its init.
"""
from __future__ import annotations

from ..errors import Diagnostic, InputError
from .parser import MOp, walk
from .splits import Split, loop_split, stores_read_split
from .start import errors as start_errors
from .steps import errors as step_errors

LOADS = {  # op -> which operands are its address: "first" or "all" (an async copy's buffer and barrier hold no program id)
    "tt.load": "first", "ttg.async_copy_global_to_local": "first", "tt.descriptor_load": "all",
    "tt.descriptor_gather": "all", "tt.experimental_descriptor_load": "all",
    "ttng.async_tma_copy_global_to_local": "all", "ttng.async_tma_gather": "all",
}
STORES = {  # op -> its address operands: "first" (tt.store %ptr, %value[, %mask]) or "but_last" (%desc[%i, %j], %value)
    "tt.store": "first", "tt.descriptor_store": "but_last", "tt.experimental_descriptor_store": "but_last",
    "tt.descriptor_scatter": "but_last", "ttng.async_tma_copy_local_to_global": "but_last",
    "tt.descriptor_reduce": "but_last",
}
PICK = {"first": lambda names: names[:1], "all": lambda names: names, "but_last": lambda names: names[:-1]}
AXES = {"x": 0, "y": 1, "z": 2}


class UnexpressedGrid(InputError):
    """A program id the graph does not represent (module doc): the loop is a tile loop all the same
    (loops.py never leaves it out silently), and this is its error."""


class Dependence:
    """Which program ids (axes "x", "y", "z") each value of a function depends on, memoized;
    `leaves` (a split loop's bounds, splits.py) depend on none."""

    def __init__(self, func: MOp, leaves: frozenset = frozenset()):
        self.defs: dict[str, MOp] = {}
        self.inits: dict[str, str] = {}
        self.ivs: set[str] = set()
        self.memo: dict[str, frozenset] = {name: frozenset() for name in leaves}
        self._scan(func.body())

    def _scan(self, ops) -> None:
        for op in ops:
            for r in op.results:
                self.defs[r] = op
                self.defs.setdefault(r.split("#")[0], op)
            if op.name == "scf.for":
                t = op.tokens
                if t and t[0].kind == "ssa":
                    self.ivs.add(t[0].text[1:])
                for i in range(1, len(t) - 2):
                    if t[i].kind == "ssa" and t[i + 1].is_("=") and t[i + 2].kind == "ssa":
                        self.inits[t[i].text[1:]] = t[i + 2].text[1:]
            for region in op.regions:
                for block in region:
                    for name, _ in getattr(block, "args", ()):
                        self.memo.setdefault(name.lstrip("%"), frozenset())  # a block's arguments: leaves
                    self._scan(block.ops)

    def of(self, name: str) -> frozenset:
        if name in self.memo:
            return self.memo[name]
        self.memo[name] = frozenset()  # a cycle ends here
        if name in self.ivs:
            found = frozenset()
        elif name in self.inits:
            found = self.of(self.inits[name])
        else:
            op = self.defs.get(name) or self.defs.get(name.split("#")[0])
            if op is None:
                found = frozenset()  # a function argument
            elif op.name == "tt.get_program_id":
                found = frozenset({op.tokens[0].text if op.tokens else "x"})
            else:
                found = frozenset().union(*(self.of(n) for n, _ in op.operands()))
        self.memo[name] = found
        return found

    def address(self, op: MOp, table: dict) -> frozenset:
        names = PICK[table[op.name]]([n for n, _ in op.operands()])
        return frozenset().union(*(self.of(n) for n in names))



def _pids(axes) -> str:
    return ", ".join(f"program_id({AXES.get(a, a)})" for a in sorted(axes, key=lambda a: AXES.get(a, 9)))


def check(module, func: MOp, loop: MOp, banded: bool) -> Split | None:
    """The chosen loop's bounds and the function's stores (module doc): the loop's split where its
    bounds are split-KV's form (splits.py), else None; an UnexpressedGrid with an error at the loop
    and at each store where they use a program id the graph does not represent."""
    dep = Dependence(func)
    split, why = _split(module, dep, func, loop, banded)
    if split is not None:
        errors = _split_uses(module, func, loop, split)
        if errors:
            raise UnexpressedGrid(*errors)
        return split
    errors = (_bounds(module, dep, loop, banded, why) + start_errors(module, func, loop, dep.of)
              + step_errors(module, func, loop, dep.of)
              + _stores(module, dep, func))
    if errors:
        raise UnexpressedGrid(*errors)
    return None


def _split(module, dep: Dependence, func: MOp, loop: MOp, banded: bool) -> tuple[Split | None, str]:
    """The loop's split (splits.py) where its lower and upper bound read one program id and no
    band is checked against them; else (None, why the bounds are not one, "" where they read none)."""
    t = loop.tokens
    if banded or not (len(t) >= 7 and t[1].is_("=") and t[3].is_("to") and t[5].is_("step")):
        return None, ""
    axes = dep.of(t[2].text[1:]) | dep.of(t[4].text[1:]) | dep.of(t[6].text[1:])
    if not axes:
        return None, ""
    return loop_split(module, func, loop, axes)


def _split_uses(module, func: MOp, loop: MOp, split: Split) -> list[Diagnostic]:
    """Each op that reads the split's program id other than through the loop's bounds (leaves) or in
    a store's address of the form (pid * num_programs(B) + b) * R (splits.py): an error at it."""
    t = loop.tokens
    bounds = frozenset({t[2].text[1:], t[4].text[1:]})
    dep = Dependence(func, bounds)
    ops = list(walk(func.body()))
    stores = [op for op in ops if op.name in STORES]
    addresses = [n for op in stores for n in PICK[STORES[op.name]]([n for n, _ in op.operands()])]
    loaded = [n for op in ops if op.name in LOADS for n in PICK[LOADS[op.name]]([n for n, _ in op.operands()])]
    # (what a load's address reads is the load's error, below, not each op's on the way)
    allowed = _slice(dep, addresses + loaded) | _slice(Dependence(func), sorted(bounds))
    sinks = [n for op in ops if not op.results or op is loop for n, _ in op.operands()]
    live = _slice(Dependence(func), sinks)  # what a store, the loop or a yield reads (a value no one reads is no use)
    hint = ("a split of the key loop imports where program_id(A) is read by the loop's bounds "
            "(range(pid * ARG, pid * ARG + ARG, STEP)) and by the stores' addresses as (pid * num_programs(B) + "
            "program_id(B)) * ROW only (docs/ttgir-import.md, section 2, \"Program ids\")")
    errors = []
    read = frozenset().union(*(dep.address(op, LOADS) for op in ops if op.name in LOADS))
    if split.axis in read:
        errors += [Diagnostic(f"'{op.name}' reads at an address offset by {_pids({split.axis})}, which splits the loop "
                              "(its lower bound): a load may read the split through the loop's bounds only",
                              module.source.span(op.head), hint=hint)
                   for op in ops if op.name in LOADS and split.axis in dep.address(op, LOADS)]
    # a loaded value is the load's: what its address reads is said at the load, not at each reader
    dep = Dependence(func, bounds | {r for op in ops if op.name in LOADS for r in op.results})
    for op in ops:
        if op.name in LOADS or op.name == "tt.get_program_id":
            continue
        if op.name in STORES:
            names = PICK[STORES[op.name]]([n for n, _ in op.operands()])
            extra = [n for n, _ in op.operands() if n not in names and split.axis in dep.of(n)]
            why = (stores_read_split(module, func, split, names) if split.axis in dep.address(op, STORES) else
                   f"its address does not read {_pids({split.axis})}: every split would write its partial result to "
                   "one place")
            if extra:
                why = f"it stores a value that depends on {_pids({split.axis})}"
            if why:
                errors.append(Diagnostic(f"'{op.name}' writes a split of the loop (over {_pids({split.axis})}), but {why}",
                                         module.source.span(op.head), hint=hint))
            continue
        if (any(r in allowed or r.split("#")[0] in allowed for r in op.results) or op is loop
                or not any(r in live or r.split("#")[0] in live for r in op.results)):
            continue
        if any(split.axis in dep.of(n) for n, _ in op.operands()):
            errors.append(Diagnostic(f"'{op.name}' reads {_pids({split.axis})}, which splits the loop, other than through "
                                     "the loop's bounds or a store's address: the graph has no such use of the split",
                                     module.source.span(op.head), hint=hint))
    return errors


def _slice(dep: Dependence, names) -> frozenset:
    """The values `names` are computed from (through iter_args' inits), themselves included."""
    seen, todo = set(), list(names)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in dep.inits:
            todo.append(dep.inits[n])
            continue
        op = dep.defs.get(n) or dep.defs.get(n.split("#")[0])
        if op is not None and op.name != "scf.for":
            todo += [m for m, _ in op.operands()]
    return frozenset(seen)


def _stores(module, dep: Dependence, func: MOp) -> list[Diagnostic]:
    """Each store whose address reads a program id no load's address reads."""
    errors = []
    ops = list(walk(func.body()))
    read = frozenset().union(*(dep.address(op, LOADS) for op in ops if op.name in LOADS))
    for op in ops:
        if op.name not in STORES:
            continue
        extra = dep.address(op, STORES) - read
        if extra:
            errors.append(Diagnostic(
                f"'{op.name}' writes at an address offset by {_pids(extra)}, which no load of the kernel reads: "
                "the graph has no grid axis for it, and the emitted kernel would write every such program's "
                "result to one place", module.source.span(op.head),
                hint="twill's grid is the output's row and column tiles and a batch index that the loads read "
                     "too, and a split of the loop over the grid (split-KV's range(pid * ARG, pid * ARG + ARG, STEP), "
                     "its stores at (pid * num_programs(B) + program_id(B)) * ROW; docs/ttgir-import.md, section 2, "
                     "\"Program ids\")"))
    return errors


def _bounds(module, dep: Dependence, loop: MOp, banded: bool, why: str = "") -> list[Diagnostic]:
    """The loop's bounds where they depend on a program id other than the query tile's under a band
    the import checked (`banded`: the graph has a causal_mask)."""
    t = loop.tokens
    if not (len(t) >= 7 and t[1].is_("=") and t[3].is_("to") and t[5].is_("step")):
        return []
    allowed = frozenset({"x"}) if banded else frozenset()
    found = {}
    for what, tok in (("lower bound", t[2]), ("upper bound", t[4]), ("step", t[6])):
        extra = dep.of(tok.text[1:]) - allowed
        if extra:
            found[what] = (tok.text, extra)
    if not found:
        return []
    said = "; ".join(f"its {what} {name} depends on {_pids(axes)}" for what, (name, axes) in found.items())
    said += f"; it is no split of the loop over the grid: {why}" if why else ""
    return [Diagnostic(
        f"'scf.for' runs over a range that moves with the program id, which the graph does not represent: {said}; "
        "the graph's loop would run over the whole extent for every program", module.source.span(loop.head),
        hint="a loop imports with bounds that are the same for every program, or, under a causal or sliding-window "
             "mask of the query tile program_id(0), bounds the mask's band is checked against, or a split of the "
             "loop over the grid: range(pid * ARG, pid * ARG + ARG, STEP) with the stores at (pid * num_programs(B) + "
             "program_id(B)) * ROW (split-KV; docs/ttgir-import.md, section 2, \"Program ids\")")]
