"""How the chosen loop steps and where it ends (docs/ttgir-import.md, section 2, "How the loop steps
and where it ends").

A graph's loop is read by emit-cuda as: iteration i reads each tile that runs along the loop at
``i * tile`` along that dimension, and the loop takes ``ceil(E / tile)`` iterations, E the extent of
the tensors along it that the binding reads from their shapes. A Triton loop computes the same only
where

- **its step moves every load by its tile**: the *loop axis* of a load is how far along which of its
  dimensions its address moves per iteration: the induction variable's coefficient in the address
  (times the step) against that dimension's stride, or, for a pointer (or a TMA coordinate) the loop
  carries, what the loop adds to it per iteration. A move other than the tile (a step of 32 over
  64-wide tiles reads each element twice, one of 128 skips half of them) is an error;
- **its upper bound is that extent**: with a step of the tile, the bound is E itself; with a step of
  1 and addresses that move by the tile (`for k in range(0, tl.cdiv(K, BK))`), ``cdiv(E, tile)``.
  E must be a kernel argument, and no stride nor another dimension's extent (a bound of a mask along
  another dimension, the modulus that wraps another dimension's index): `K // 2`, a stride, `M` for a
  loop along K where the kernel bounds another dimension by M are errors. A compile-time constant is
  taken as the extent (a `tl.constexpr` N); extents.py records it (`extent loop = N`) and the binding
  checks the call's tensors have it.

Each error is at the `scf.for`. Bounds or a step that read a program id are grid.py's (a band, a
split); a loop no load moves along (the loop's iterations are the binding's `iters`) is not read here.
A constant offset along the loop (``k + 64``) is read in the same walk: the pipelined copies read
ahead by whole steps, and any other offset is the load's error (`offset_errors`).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import Diagnostic, InputError
from .addresses import Addr, Addresses, Poly, poly_add, poly_int, poly_mul
from .merge import loop_bounds
from .parser import MOp, walk
from .types import TypeReader, last_top_level

LOADS = {  # op -> where its address is: "pointer" (operand 0, a tensor of pointers) or "coords" (a descriptor's)
    "tt.load": "pointer", "ttg.async_copy_global_to_local": "pointer", "tt.descriptor_load": "coords",
    "tt.experimental_descriptor_load": "coords", "ttng.async_tma_copy_global_to_local": "coords",
}
HINT = ("the graph's loop reads each tile along the loop once, in order, over the tensors' whole extent: step "
        "the loop by the tile its loads advance by (range(0, K, BLOCK_K) with k in the address, or "
        "range(0, tl.cdiv(K, BLOCK_K)) with k * BLOCK_K) and bound it by the tensors' extent along it, a "
        "kernel argument (docs/ttgir-import.md, section 2, \"How the loop steps and where it ends\")")


@dataclass(frozen=True)
class LoopAxis:
    """A load that moves along the loop: `move` elements along its dimension `dim` per iteration,
    its tile `tile` elements along it; `offset` the constant start along it beyond the loop's (None
    where the address has no constant term along it to read)."""

    op: MOp
    dim: int
    move: int
    tile: int
    offset: int | None = None



def _ratio(poly: Poly, unit: Poly) -> int | None:
    """n where ``poly = n * unit`` (both polynomials, n an integer), else None."""
    if not unit or not poly:
        return None
    (m, c), (mu, cu) = poly[0], unit[0]
    if m != mu or c % cu:
        return None
    n = c // cu
    return n if poly_mul(unit, ((((), n),))) == poly else None


def _part(poly: Poly, atom: str) -> Poly:
    """The coefficient of `atom` in `poly` (each monomial that holds it once, the atom taken out)."""
    out = {}
    for m, c in poly:
        if m.count(atom) == 1:
            rest = tuple(a for a in m if a != atom)
            out[rest] = out.get(rest, 0) + c
    return tuple(sorted((m, c) for m, c in out.items() if c))


class Walk:
    """The loop axes of one loop's loads (module doc)."""

    def __init__(self, module, func: MOp, loop: MOp):
        self.module = module
        self.loop = loop
        self.types = TypeReader(module.source, module.aliases)
        self.addr = Addresses(func, self.types)
        self.addr.scope(loop)
        self.iv, self.lower, self.upper, self.step = loop_bounds(loop)
        self.carried = self._carried()

    def _carried(self) -> dict[str, Poly]:
        """Each iter_arg of the loop that the loop advances by a uniform amount: iter_arg -> what
        one iteration adds (the yielded value less the iter_arg). An iter_arg reads as its init plus
        the atom ``carry:NAME``, what the loop has added to it so far."""
        t = self.loop.tokens
        args = [t[i].text[1:] for i in range(3, len(t) - 2)
                if t[i].kind == "ssa" and t[i + 1].is_("=") and t[i + 2].kind == "ssa"]
        body = self.loop.body()
        yields = [n for n, _ in body[-1].operands()] if body and body[-1].name == "scf.yield" else []
        for arg in args:
            start = self.addr.of(self.addr.inits[arg]) if arg in self.addr.inits else None
            if start is not None:
                self.addr.memo[arg] = start.plus(Addr(None, (), (((f"carry:{arg}",), 1),)))
        out = {}
        for arg, value in zip(args, yields):
            start, end = self.addr.of(arg), self.addr.of(value)
            if start is None or end is None or start.base != end.base:
                continue
            delta = end.plus(start, -1)
            if delta is not None and not any(delta.coefs) and delta.const \
                    and not any(a.startswith("carry:") for m, _ in delta.const for a in m):
                out[arg] = delta.const
        return out

    def _moves(self, const: Poly, step: int) -> Poly:
        """What one iteration adds to an address of constant part `const`: the induction variable's
        coefficient times the step, plus each carried value's coefficient times its advance."""
        move = poly_mul(_part(const, f"iv:{self.iv}"), ((((), step),)))
        for arg, advance in sorted(self.carried.items()):
            move = poly_add(move, poly_mul(_part(const, f"carry:{arg}"), advance))
        return move

    def axes(self, step: int) -> list[LoopAxis]:
        out = []
        for op in walk(self.loop.body()):
            form = LOADS.get(op.name)
            if form is None:
                continue
            axis = self._axis(op, form, step)
            if axis is not None:
                out.append(axis)
        return out

    def _axis(self, op: MOp, form: str, step: int) -> LoopAxis | None:
        colon = last_top_level(op.tokens, ":")
        try:  # the operands' types only (an async copy's result is printed without its type's name)
            ins = self.types.read_list(op.tokens, colon + 1)[0] if colon is not None else []
        except InputError:
            return None
        shape = ins[0].shape if ins else ()
        if form == "coords":  # a descriptor's type holds no shape here: the tile it loads into
            try:
                shape = (self.types.signature(op.tokens)[1] or [ins[0]])[0].shape
            except InputError:
                return None
        names = [n for n, _ in op.operands()]
        if not shape or not names:
            return None
        if form == "pointer":
            a = self.addr.of(names[0])
            if a is None or a.base is None or len(a.coefs) != len(shape):
                return None
            units = list(a.coefs)
            moves = [self._moves(a.const, step)]
            consts = [a.const]
            place = lambda move: next(((d, n) for d, u in enumerate(units) if (n := _ratio(move, u))), None)  # noqa: E731
        else:
            coords = names[1:1 + len(shape)]
            vals = [self.addr.of(n) for n in coords]
            if len(coords) != len(shape) or any(v is None or v.coefs for v in vals):
                return None
            moves = [self._moves(v.const, step) for v in vals]
            consts = [v.const for v in vals]
            moving = [d for d, m in enumerate(moves) if m]
            if len(moving) != 1:
                return None
            d = moving[0]
            n = poly_int(moves[d])
            return None if n is None else LoopAxis(op, d, n, shape[d], poly_int(_offset(consts[d], self.iv)))
        if not moves[0]:
            return None
        found = place(moves[0])
        if found is None:
            return None
        d, n = found
        rest = _offset(consts[0], self.iv)
        alone = all(poly_int(u) is None for k, u in enumerate(units) if k != d)  # no other axis' constant term
        return LoopAxis(op, d, n, shape[d], (_ratio(rest, units[d]) if rest else 0) if alone else None)


def _offset(const: Poly, iv: str) -> Poly:
    """The constant part of an address along the loop: its integer term (the start of each tile)."""
    return tuple((m, c) for m, c in const if m == ())


def errors(module, func: MOp, loop: MOp, reads_pid) -> list[Diagnostic]:
    """Errors at the loop where its step moves a load by other than its tile, or its upper bound is
    no extent of the tensors along it (module doc); [] otherwise and where the bounds read a program id."""
    bounds = loop_bounds(loop)
    if bounds is None:
        return []
    _, _, upper, step_name = bounds
    if reads_pid(step_name):
        return []
    walk = Walk(module, func, loop)
    span = module.source.span(loop.head)
    st = walk.addr.of(step_name)
    step = poly_int(st.const) if st is not None and not st.coefs and st.base is None else None
    if step is None or step < 1:
        if not walk.axes(1):
            return []
        return [Diagnostic(f"'scf.for' steps by %{step_name}, which is no positive compile-time constant: the graph's "
                           "loop steps by the tile its loads advance by", span, hint=HINT)]
    axes = walk.axes(step)
    if not axes:
        return []
    wrong = [a for a in axes if a.move != a.tile]
    if wrong:
        a = wrong[0]
        line = module.source.span(a.op.head).line
        how = "reads elements twice (overlapping tiles)" if 0 < a.move < a.tile else "skips elements between tiles"
        return [Diagnostic(f"'scf.for' steps by {step}, which moves the '{a.op.name}' at line {line} by {a.move} "
                           f"elements along its dimension {a.dim} per iteration, but its tile is {a.tile} elements "
                           f"along it: the loop {how}, and the graph's loop reads each tile once", span, hint=HINT)]
    offsets = _offset_errors(module, walk, axes)
    if offsets or reads_pid(upper):
        return offsets
    return _upper_errors(module, walk, loop, axes, step, upper, span)


def _offset_errors(module, walk: Walk, axes: list[LoopAxis]) -> list[Diagnostic]:
    """An error at each load whose address starts a constant offset along the loop in: none where the
    loop is as Triton writes it, whole tiles where its pipeliner reads ahead (depipe.py undoes it)."""
    ahead = _pipelined(walk.loop)
    out = []
    for a in axes:
        if a.offset is None or a.offset == 0 or (ahead and a.offset % a.tile == 0):
            continue
        out.append(Diagnostic(
            f"'{a.op.name}' reads {a.offset} elements along the loop past the loop's position (its dimension "
            f"{a.dim}, {a.tile}-element tiles): the graph's loop reads iteration i's tile at i x {a.tile}",
            module.source.span(a.op.head),
            hint="offset the tensor at the call instead (pass it from its first element the loop reads, the extent "
                 "less the offset) (docs/ttgir-import.md, section 2, \"How the loop steps and where it ends\")"))
    return out


def _upper_errors(module, walk: Walk, loop: MOp, axes: list[LoopAxis], step: int, upper: str, span) -> list[Diagnostic]:
    tile = axes[0].tile
    extent, why = _extent(walk, upper, step, tile)
    if extent is None:
        return [Diagnostic(f"'scf.for' runs to %{upper}, {why}", span, hint=HINT)]
    if not {a for m, _ in extent for a in m}:
        # a tl.constexpr extent (tests/data/seq's row_var: range(0, N, BLOCK) with N = 4096) is the tensors'
        # extent where the call passes tensors of it: extents.py records it, the binding checks it
        return []
    if len(extent) != 1 or extent[0][1] != 1 or len(extent[0][0]) != 1 or extent[0][0][0] not in walk.addr.args:
        return [Diagnostic(f"'scf.for' runs to %{upper}, which is {_show(walk, extent)}, no kernel argument: the graph's loop "
                           "runs over the tensors' whole extent along it (a kernel argument the binding reads from "
                           "their shapes)", span, hint=HINT)]
    (name,) = extent[0][0]
    other = _other_uses(walk, axes)
    if name in other:
        return [Diagnostic(f"'scf.for' runs to %{upper}, which is {name}, but the kernel uses {name} as {other[name]}: "
                           "the loop runs along another dimension, and the graph's loop runs over the tensors' extent "
                           "along it", span, hint=HINT)]
    return []


def _extent(walk: Walk, upper: str, step: int, tile: int) -> tuple[Poly | None, str]:
    """The extent E along the loop that an upper bound `upper` says (module doc), or (None, why)."""
    ub = walk.addr.of(upper)
    if ub is None or ub.coefs or ub.base is not None:
        return None, "which the import cannot read as a scalar"
    op = walk.addr.defs.get(upper)
    if op is not None and op.name == "arith.subi" and _pipelined(walk.loop):
        # Triton's pipeliner stops the loop whole steps short where it peeled the last iterations
        less, by = (walk.addr.of(n) for n, _ in op.operands()[:2])
        short = poly_int(by.const) if by is not None and not by.coefs else None
        if less is not None and short and short > 0 and short % step == 0:
            return _extent(walk, op.operands()[0][0], step, tile)
    if step == tile:
        return ub.const, ""
    per = tile // step
    if tile % step == 0 and op is not None and op.name in ("arith.divsi", "arith.divui", "arith.ceildivsi",
                                                           "arith.ceildivui"):
        num, den = (walk.addr.of(n) for n, _ in op.operands()[:2])
        if num is not None and den is not None and not num.coefs and poly_int(den.const) == per:
            if op.name.startswith("arith.ceildiv"):
                return num.const, ""
            less = poly_add(num.const, ((((), per - 1),)), -1)
            if any(m == () for m, _ in num.const) and {a for m, _ in less for a in m}:
                return less, ""
            return None, (f"which divides by {per} without rounding up: a partial last tile along the loop would "
                          f"be skipped, which the graph's loop computes (write tl.cdiv)")
    return None, (f"which is no cdiv(extent, {per}) for a step of {step} over {tile}-element tiles: the graph's loop "
                  "runs over the tensors' whole extent along it")


PIPELINED = frozenset({"ttg.async_wait", "ttng.wait_barrier", "ttg.async_copy_global_to_local",
                       "ttng.async_tma_copy_global_to_local", "ttng.warp_group_dot_wait"})


def _pipelined(loop: MOp) -> bool:
    """Whether the loop is in the form Triton's pipeliner leaves (asynchronous copies and waits)."""
    return any(op.name in PIPELINED for op in walk(loop.body()))


def _show(walk: Walk, poly: Poly) -> str:
    """A scalar polynomial as the user wrote it; a value the walk does not follow, with its op."""
    if len(poly) == 1 and poly[0][1] == 1 and len(poly[0][0]) == 1 and poly[0][0][0].startswith("%"):
        op = walk.addr.defs.get(poly[0][0][0][1:])
        if op is not None:
            return f"%{poly[0][0][0][1:]} = '{op.name}' of {', '.join(n for n, _ in op.operands())}"
    terms = [("*".join(a.lstrip("%") for a in m) or "1") + ("" if c == 1 or not m else f" * {c}") if m else str(c)
             for m, c in poly]
    return " + ".join(terms) or "0"


def _addresses(walk: Walk, op) -> bool:
    """Whether `op`'s result reaches an address (`offs % M` of the tutorial's GEMM), not only a value or a mask (a
    causal softmax's query `row % seq_len`, compared with the columns: scalars._row_bound)."""
    uses: dict[str, list] = {}
    for o in {id(o): o for o in walk.addr.defs.values()}.values():
        for n, _ in o.operands():
            uses.setdefault(n, []).append(o)
    todo, seen = list(op.results), set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        for o in uses.get(n, ()):
            if o.name == "tt.addptr" or o.name in LOADS or o.name == "tt.store" and [m for m, _ in o.operands()][0] == n:
                return True
            if o.name != "arith.select" or [m for m, _ in o.operands()][0] != n:
                todo.extend(o.results)
    return False


def _other_uses(walk: Walk, axes: list[LoopAxis]) -> dict[str, str]:
    """The scalar arguments the kernel uses as a stride (a coefficient of a load's or store's
    position) or as another dimension's extent (a mask's bound along a dimension no load moves along
    the loop, the modulus of an index): name -> what."""
    from .bounds import Masks
    out: dict[str, str] = {}
    masks = Masks(walk.addr)
    loop_dims = {id(a.op): a.dim for a in axes}
    for name, op in list(walk.addr.defs.items()):
        if op.name in ("arith.remsi", "arith.remui"):
            args = [n for n, _ in op.operands()]
            x = walk.addr.of(args[0]) if args else None
            if x is not None and x.coefs and len(args) == 2 and _addresses(walk, op):
                for m, _ in (walk.addr.of(args[1]) or Addr()).const:
                    for atom in m:
                        out.setdefault(atom, "the modulus of another dimension's index")
    for op in {id(o): o for o in walk.addr.defs.values()}.values():
        if op.name not in LOADS and op.name != "tt.store":
            continue
        names = [n for n, _ in op.operands()]
        a = walk.addr.of(names[0]) if names else None
        if a is not None and a.base is not None:
            for c in a.coefs:
                for m, _ in c:
                    for atom in m:
                        out.setdefault(atom, "a stride")
        mask = _mask_operand(op)
        cs = masks.compares(mask) if mask else None
        for c in cs or ():
            if c.kind != "bound" or c.dim == loop_dims.get(id(op), -1):
                continue
            if id(op) not in loop_dims and op.name != "tt.store":
                continue
            for m, k in c.diff.const:
                if k < 0 and len(m) == 1 and not m[0].startswith(("iv:", "pid_")):
                    out.setdefault(m[0], f"the extent of dimension {c.dim} in the mask at line "
                                         f"{walk.module.source.span(op.head).line}")
    return out


def _mask_operand(op: MOp) -> str | None:
    t = op.tokens
    for i, tok in enumerate(t[:-1]):
        if tok.is_("mask"):
            return t[i + 1].text[1:] if t[i + 1].kind == "ssa" else None
    if op.name in ("tt.load", "tt.store"):
        names = [n for n, _ in op.operands()]
        k = 1 if op.name == "tt.load" else 2
        return names[k] if len(names) > k else None
    return None


def row_errors(module, func: MOp, loop: MOp) -> list[Diagnostic]:
    """An error at each load of a loop with no mma whose step moves it along its rows (dimension 0 of a
    tile of several rows and columns: `DW + (i + rows)[:, None] * N + cols[None, :]`, the layer-norm
    backward's dw/db loop over rows): emit-cuda runs a loop without an accumulating mma along its tiles'
    columns (docs/emit-cuda.md, "Conventions"), so the graph, whose tiles say nothing of the direction,
    would be a loop over DW's columns: another kernel, silently. A loop with an mma runs along the mma's
    K, which a load may step along its rows (a GEMM's B); it is not read here."""
    bounds = loop_bounds(loop)
    if bounds is None:
        return []
    walk = Walk(module, func, loop)
    st = walk.addr.of(bounds[3])
    step = poly_int(st.const) if st is not None and not st.coefs and st.base is None else None
    out = []
    for a in walk.axes(step) if step is not None and step >= 1 else ():
        shape = _tile_shape(walk, a.op)
        if a.dim != 0 or len(shape) != 2 or min(shape) < 2:
            continue
        out.append(Diagnostic(
            f"'{a.op.name}' is stepped by the loop along its rows ({a.move} of its {list(shape)} tile's rows an "
            "iteration) in a loop with no mma: the graph's loop runs along a tile's columns there, so the graph "
            "would read this tensor's columns one tile an iteration, not its rows",
            module.source.span(a.op.head),
            hint="a loop over rows summing tiles that are reduced along axis 0 after it (column sums) is not "
                 "imported: it would be the row sum of the transposed tile, whose load emit-cuda does not read "
                 "transposed (docs/ttgir-import.md, section 21)"))
    return out


def _tile_shape(walk: Walk, op: MOp) -> tuple[int, ...]:
    colon = last_top_level(op.tokens, ":")
    try:
        ins = walk.types.read_list(op.tokens, colon + 1)[0] if colon is not None else []
    except InputError:
        return ()
    return tuple(ins[0].shape) if ins else ()
