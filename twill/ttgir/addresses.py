"""How a load walks the argument it reads: its pointers followed back as polynomials of the element's
position, the program ids, the loops' induction variables and the scalar arguments, read for the two
things a graph's `load` says beyond its tile (docs/ttgir-import.md, section 3):

- ``{col_stride = S, col_offset = O}``: element j of the tile's last axis is element ``S * j + O``
  of the argument's row (a constant coefficient S >= 2 of the last axis' index; O the constant
  term). W4A16's ``SCALES + 2 * rj`` and ``... + 1`` are two views of one argument, the even and the
  odd columns;
- ``{iter_div = D}``: the tile's row is the loop's iteration divided by D, ``(iv + c) // K`` with
  ``K = D * step`` and c a multiple of the step (a pipelined copy reads ahead by c), the loop
  starting at 0: a scale per group of K along the loop, as W4A16's ``(k0 // GROUP_K) * stride_sg``.

Anything else in an address (row strides, program-id offsets, pointers advanced by the loop) stays
what it was: dropped, the emitted kernel placing tiles by the graph's structure.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from .opnames import int_attr
from .parser import MOp

Poly = tuple  # ((monomial: tuple of atom names, coefficient), ...), sorted, no zero coefficient


def poly_of(terms: dict) -> Poly:
    return tuple(sorted((m, c) for m, c in terms.items() if c))


def poly_add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for m, c in b:
        out[m] = out.get(m, 0) + sign * c
    return poly_of(out)


def poly_mul(a: Poly, b: Poly) -> Poly:
    out: dict = {}
    for ma, ca in a:
        for mb, cb in b:
            m = tuple(sorted(ma + mb))
            out[m] = out.get(m, 0) + ca * cb
    return poly_of(out)


def poly_int(p: Poly) -> int | None:
    """The value of a constant polynomial (None if it has a variable term)."""
    if not p:
        return 0
    return p[0][1] if len(p) == 1 and p[0][0] == () else None


@dataclass(frozen=True)
class Addr:
    """sum(coefs[d] * position[d]) + const, from pointer argument `base` (None: an integer). No
    coefficients: the same at every element (a scalar, a splat)."""

    base: str | None = None
    coefs: tuple[Poly, ...] = ()
    const: Poly = ()

    @property
    def atom(self) -> str | None:
        """The one symbol this uniform address is (a scalar argument, the program id, an opaque value: `x`, once),
        else None."""
        if self.coefs or len(self.const) != 1 or self.const[0][1] != 1 or len(self.const[0][0]) != 1:
            return None
        return self.const[0][0][0]

    def plus(self, other: "Addr", sign: int = 1) -> "Addr | None":
        n = max(len(self.coefs), len(other.coefs))
        if min(len(self.coefs), len(other.coefs)) not in (0, n):
            return None
        a = self.coefs or ((),) * n
        b = other.coefs or ((),) * n
        coefs = tuple(poly_add(x, y, sign) for x, y in zip(a, b)) if n else ()
        return Addr(self.base or other.base, coefs, poly_add(self.const, other.const, sign))

    def times(self, other: "Addr") -> "Addr | None":
        if self.coefs and other.coefs:
            return None  # a product of two indices: not linear in the position
        x, y = (self, other) if not self.coefs else (other, self)  # x is uniform
        return Addr(None, tuple(poly_mul(c, x.const) for c in y.coefs), poly_mul(x.const, y.const))


@dataclass(frozen=True)
class _Loop:
    lower: str
    step: str
    upper: str = ""


# ops whose result is data read from memory (an async copy's result is a token, its data a local_load's)
DATA_LOADS = {"tt.load", "tt.descriptor_load", "ttg.local_load"}
INT_DIVISIONS = {"arith.divsi", "arith.divui", "arith.floordivsi", "arith.ceildivsi"}
REMAINDERS = {"arith.remsi", "arith.remui"}
PASS_THROUGH = {"tt.splat", "tt.broadcast", "ttg.convert_layout", "arith.extsi", "arith.extui", "arith.trunci",
                "arith.index_cast", "arith.index_castui"}


class Addresses:
    """The addresses of one function's values, evaluated on demand (memoized)."""

    def __init__(self, func: MOp, types):
        from .provenance import func_args
        self.types = types
        self.defs: dict[str, MOp] = {}
        self.inits: dict[str, str] = {}  # a loop's iter_arg -> its init
        self.loops: dict[str, _Loop] = {}  # induction variable -> its loop's bounds
        self.args = {name: mtype for name, mtype, _ in func_args(func, types)}
        self.memo: dict[str, Addr | None] = {}
        self.all_defs: dict[str, list[MOp]] = {}  # every op defining a name (sibling loops reuse names)
        self._scan(func.body())

    def _scan(self, ops) -> None:
        for op in ops:
            for r in op.results:
                self.defs[r] = op
                self.defs.setdefault(r.split("#")[0], op)
                for key in {r, r.split("#")[0]}:
                    if all(o is not op for o in self.all_defs.setdefault(key, [])):
                        self.all_defs[key].append(op)
            if op.name == "scf.for":
                t = op.tokens
                if len(t) >= 7 and t[1].is_("=") and t[3].is_("to") and t[5].is_("step"):
                    self.loops[t[0].text[1:]] = _Loop(t[2].text[1:], t[6].text[1:], t[4].text[1:])
                for i in range(1, len(t) - 2):
                    if t[i].kind == "ssa" and t[i + 1].is_("=") and t[i + 2].kind == "ssa":
                        self.inits[t[i].text[1:]] = t[i + 2].text[1:]
            for region in op.regions:
                for block in region:
                    self._scan(block.ops)

    def scope(self, loop: MOp) -> None:
        """Read the names `loop`'s body defines from it: sibling loops may reuse a name (Triton's
        printer names each region's values from the source, `%cols_18` in each of three loops)."""
        self.memo.clear()
        self._scan((loop,))

    # -- evaluation ---------------------------------------------------------------------------------

    def of(self, name: str, depth: int = 0) -> Addr | None:
        name = name.split("#")[0] if name not in self.defs else name
        if name not in self.memo:
            self.memo[name] = None  # a cycle (a pointer the loop advances) ends here
            self.memo[name] = self._eval(name, depth)
        return self.memo[name]

    def _eval(self, name: str, depth: int) -> Addr | None:
        if depth > 64:
            return None
        if name in self.args:
            mtype = self.args[name]
            pointer = mtype.kind == "ptr" or (mtype.kind == "tensor" and mtype.elem == "ptr")
            return Addr(name) if pointer else Addr(None, (), (((name,), 1),))
        if name in self.loops:
            return Addr(None, (), (((f"iv:{name}",), 1),))
        if name in self.inits:  # an iter_arg: its start (what the loop adds to it is not followed)
            return self.of(self.inits[name], depth + 1)
        op = self.defs.get(name)
        return None if op is None else self._op(op, name, depth)

    def _op(self, op: MOp, name: str, depth: int) -> Addr | None:
        args = [n for n, _ in op.operands()]
        vals = [self.of(a, depth + 1) for a in args]
        if op.name == "arith.constant":
            value = int_constant(op)
            return None if value is None else Addr(None, (), poly_of({(): value}))
        if op.name == "tt.get_program_id":
            return Addr(None, (), (((f"pid_{op.tokens[0].text if op.tokens else 'x'}",), 1),))
        if op.name == "tt.make_range":
            start = int_attr(op, "start")
            return None if start is None else Addr(None, (((((), 1),)),), poly_of({(): start}))
        if any(v is None for v in vals):
            return self._opaque(op, name)
        if op.name in PASS_THROUGH and vals:
            return vals[0]
        if op.name == "tt.expand_dims" and vals:
            a, axis = vals[0], int_attr(op, "axis")
            if not a.coefs:
                return a
            return None if axis is None else Addr(a.base, a.coefs[:axis] + ((),) + a.coefs[axis:], a.const)
        if op.name == "tt.trans" and vals:
            return Addr(vals[0].base, vals[0].coefs[::-1], vals[0].const)
        if op.name in ("tt.addptr", "arith.addi") and len(vals) == 2:
            return vals[0].plus(vals[1])
        if op.name == "arith.subi" and len(vals) == 2:
            return vals[0].plus(vals[1], -1)
        if op.name == "arith.muli" and len(vals) == 2:
            return vals[0].times(vals[1])
        if op.name in ("arith.remsi", "arith.remui") and len(vals) == 2 and vals[0].coefs and not vals[1].coefs:
            # (i + c) % N of an index (the tutorial's `offs % M`): the same steps along the tile but
            # where it wraps; its start is a variable of its own
            return Addr(vals[0].base, vals[0].coefs, (((f"%{name}",), 1),))
        if op.name in ("arith.divsi", "arith.divui") and len(vals) == 2:
            return self._quotient(op, name, *vals)
        return self._opaque(op, name)

    def _quotient(self, op: MOp, name: str, x: Addr, k: Addr) -> Addr | None:
        """``x // K`` of a scalar: ``(iv + c) // K`` is the atom ``iv:IV//K+c``, the rest opaque."""
        divisor = poly_int(k.const)
        if x.coefs or k.coefs or not divisor or divisor < 1:
            return self._opaque(op, name)
        ivs = [(m, c) for m, c in x.const if m != ()]
        shift = dict(x.const).get((), 0)
        if len(ivs) == 1 and ivs[0][1] == 1 and len(ivs[0][0]) == 1 and ivs[0][0][0].startswith("iv:"):
            return Addr(None, (), (((f"{ivs[0][0][0]}//{divisor}+{shift}",), 1),))
        return self._opaque(op, name)

    def _opaque(self, op: MOp, name: str) -> Addr | None:
        """A scalar no rule follows is a variable of its own; a tensor, unknown."""
        try:
            ins, outs = self.types.signature(op.tokens)
        except InputError:  # a type only its own handler reads (an async copy's result): not an address
            return None
        outs = outs or (ins[-1:] if op.name.startswith("arith.") and len(op.results) == 1 else [])  # `arith.remsi %a, %b : i32`
        if outs and outs[0].kind == "scalar":
            return Addr(None, (), (((f"%{name}",), 1),))
        return None

    def loaded_from(self, name: str, line: int | None = None) -> MOp | None:
        """The `tt.load` (or async copy) whose value `name` is computed from, through any ops and the
        iter_args' starts; None where it reads none (only arguments, program ids, ranges, constants
        and induction variables): an address or mask that reads memory is a gather (a block table's
        page, a cu_seqlens start)."""
        return self._first_def(name, lambda op: op.name in DATA_LOADS, line)

    def divided_index(self, name: str, line: int | None = None) -> MOp | None:
        """The integer division of a tensor (an index along the tile: `offs_m // W`) that `name` is
        computed from, or None: such an address is no affine function of the element's position
        (a conv's pixel rows, an upsampling's repeated rows), which a tile the graph places by its
        position cannot read. (A division of a scalar, `k // C_IN`, is index arithmetic.)"""
        def tensor_division(op: MOp) -> bool:
            if op.name not in INT_DIVISIONS:
                return False
            try:
                ins, outs = self.types.signature(op.tokens)
            except InputError:
                return False
            t = (outs or ins[-1:] or [None])[0]
            return t is not None and t.kind == "tensor" and bool(t.shape)
        return self._first_def(name, tensor_division, line)

    def unpaired_division(self, name: str, line: int | None = None) -> MOp | None:
        """The first integer division `x // G` of a tensor that `name` is computed from with no
        remainder `x % G` of the same x and G beside it, or None. A division with its remainder splits
        the tile's index into two digits (GQA's packed query heads: head `r // G`, token `r % G`), each
        row of the tile one row of memory and no two the same; a division alone maps several rows of
        the tile to one (an upsampling's `offs // 2`), which a tile the graph places row by row is not."""
        divisions, remainders = [], set()

        def tensor_op(op: MOp, names: set) -> bool:
            if op.name not in names:
                return False
            try:
                ins, outs = self.types.signature(op.tokens)
            except InputError:
                return False
            t = (outs or ins[-1:] or [None])[0]
            return t is not None and t.kind == "tensor" and bool(t.shape)

        def collect(op: MOp) -> bool:
            key = tuple(a for a, _ in op.operands()[:2])
            if tensor_op(op, INT_DIVISIONS):
                divisions.append((op, key))
            elif tensor_op(op, REMAINDERS):
                remainders.add(key)
            return False  # walk every op

        self._first_def(name, collect, line)
        return next((op for op, key in divisions if key not in remainders), None)

    def _first_def(self, name: str, pred, line: int | None = None) -> MOp | None:
        """The first op (depth first through operands, iter_args' starts) computing `name` with pred.
        Each name is read as defined by the nearest op above its reader (`line`): the printer reuses
        names in sibling loops, so `defs` alone may hold another loop's op of the same name."""
        seen: set[tuple[str, int | None]] = set()
        todo = [(name.split("#")[0] if name not in self.all_defs else name, line)]
        while todo:
            n, at = todo.pop()
            if (n, at) in seen or len(seen) > 4096:
                continue
            seen.add((n, at))
            if n in self.args or n in self.loops:  # an induction variable: its bounds are steps.py's
                continue
            if n in self.inits:
                todo.append((self.inits[n], at))
                continue
            op = self._def_above(n, at)
            if op is None:
                continue
            if pred(op):
                return op
            if op.name not in DATA_LOADS and not op.name.startswith("scf."):  # a loop's result: not followed
                todo += [(a, op.head.line) for a, _ in op.operands()]
        return None

    def _def_above(self, name: str, line: int | None) -> MOp | None:
        ops = self.all_defs.get(name) or self.all_defs.get(name.split("#")[0]) or []
        if line is not None:
            above = [o for o in ops if o.head.line < line]
            if above:
                return max(above, key=lambda o: o.head.line)
        return self.defs.get(name) or self.defs.get(name.split("#")[0])

    # -- what a load's addresses say ----------------------------------------------------------------

    def view(self, op: MOp) -> tuple[tuple[str, int], ...]:
        """The `load` attributes of the loads' addresses (module doc): col_stride and col_offset,
        iter_div; () where the load reads its argument as the graph's tile says already. A row that
        is a quotient of the induction variable other than by a multiple of the step (from a start
        of 0) is `Unexpressed` (the caller's located error): read per iteration it would be wrong."""
        operands = op.operands()
        a = self.of(operands[0][0]) if operands else None
        if a is None or a.base is None or not a.coefs:
            return ()
        attrs = []
        stride = poly_int(a.coefs[-1])
        if stride is not None and stride >= 2:
            attrs += [("col_stride", stride), ("col_offset", dict(a.const).get((), 0))]
        div = self._iter_div(a.const)
        if div is not None:
            attrs.append(("iter_div", div))
        return tuple(attrs)

    def _iter_div(self, const: Poly) -> int | None:
        """D where the address reads ``(iv + c) // (D * step)`` (times a row stride) of a loop from 0."""
        found = set()
        for monomial, _ in const:
            for atom in monomial:
                if not atom.startswith("iv:") or "//" not in atom:
                    continue
                iv, rest = atom[3:].split("//")
                divisor, shift = (int(x) for x in rest.split("+"))
                loop = self.loops.get(iv)
                lower = self.of(loop.lower) if loop else None
                step = poly_int(self.of(loop.step).const) if loop and self.of(loop.step) else None
                if lower is None or poly_int(lower.const) != 0 or not step or divisor % step or shift % step:
                    raise Unexpressed(f"its address reads the loop's induction variable divided by {divisor}, "
                                      f"which is no whole number of iterations of step {step} from 0")
                found.add(divisor // step)
        if len(found) > 1:
            raise Unexpressed(f"its address reads the loop's iteration divided by {sorted(found)} at once")
        return found.pop() if found and found != {1} else None


class Unexpressed(Exception):
    """A load's address the graph's load cannot say (the message, without where: the caller locates it)."""


def int_constant(op: MOp) -> int | None:
    """An integer ``arith.constant`` (a scalar or a splat ``dense<N>``, after an attribute dictionary
    such as a warp-specialized partition's ``{async_task_id = ...}``); None for anything else."""
    t = op.tokens
    if t and t[0].is_("{"):  # the attributes before the value
        depth, k = 0, 0
        for k, tok in enumerate(t):
            depth += tok.is_("{") - tok.is_("}")
            if depth == 0:
                break
        t = t[k + 1:]
    i = 2 if len(t) > 2 and t[0].is_("dense") else 0
    try:
        return int(t[i].text)
    except (ValueError, IndexError):
        return None
