"""Column sums: a loop over row blocks summed down the columns after it, as one column a program
(docs/ttgir-import.md, section 8, "Column sums").

The reductions users write over the rows of a matrix (a linear layer's bias gradient `db = dy.sum(0)`, LayerNorm's
dw and db, a BatchNorm's column statistics) run one program a column block: `cols = pid * BN + arange(BN)`, a loop
`for i in range(0, M, BM)` over row blocks `rows = i + arange(BM)`, [BM, BN] tiles `P + rows[:, None] * stride +
cols[None, :]` masked `(rows < M) & (cols < N)`, per-row vectors `V + rows` (a row's mean and rstd) broadcast over
the columns, [BM, BN] carries `acc += t`, and after the loop `tl.sum(acc, axis=0)` (or max, min) stored to
`OUT + cols` under `cols < N`. Column c of every result is a function of column c of the tiles and of the per-row
vectors alone, so the kernel equals the kernel of one column a program, and this module rewrites it, as text and
before rowprog.py reads it, into that kernel (which rowprog.py then runs 64 columns a CTA):

- the program id indexes columns: the column block's index `pid * BN + arange(BN)` becomes the program id (one
  column); a value of the columns alone ([BN], [1, BN]: the column's index, a per-column scale `S + cols`, a column
  sum after the loop) a scalar, the column's; its mask `cols < N` is true in every column a program computes
  (64 a CTA, the last column tile's columns past N clipped by TMA) and is dropped;
- a [BM, BN] tile or a value of the rows alone ([BM], [BM, 1]) a [W] tile of the column's rows along the loop, W =
  max(BM, 128) (rowprog.py narrows a wider one to 128): the loop steps by W, `rows = i + arange(W)`, its tail
  `rows < M` unchanged; `expand_dims`, `convert_layout` and a row value's broadcast are the value, a column value's
  broadcast a splat;
- a [BM, BN] carry reduced after the loop along axis 0 by the op that updates it (`acc += t`, `tl.sum(acc, 0)`) a
  [W] carry reduced after the loop along its one axis: rowprog.py's carry rule then makes it the column's running
  sum, the reduction after the loop the carry itself (both reduce the same multiset of values in another order);
  a [BN] carry (`acc += tl.sum(t, axis=0)`) a scalar carry, the column's;
- a [BM, BN] tile loaded at `P + rows * stride + cols` is row `c` of P's transpose: the rewritten kernel reads it
  at `P + c * stride + rows`, a row of a row-major [N, M] view, and the module records P as read transposed
  (`Module.transposed`): memory.py types its load `{transposed = true}` (docs/formats.md: the tile as the kernel
  reads it, its argument as the Triton kernel takes it the transpose of that layout), which the binding hands the
  kernel transposed. The address is the rewrite's, not the kernel's own: strides are the binding's.

Recognized by dataflow: one function, one loop at its top level, a `tt.reduce` along axis 0 of one of the loop's
2-D results. Refused (an error at the op, naming it), once recognized: a program id other than the column block's
(`pid * BN + arange(BN)`), a second one; a loop other than `range(0, M, BM)` over the row blocks; a tile's address
other than `P + rows * stride + cols` (a column stride, a transposed read); a tile or row vector stored; a
reduction along axis 1 (across a block's columns) or of a row vector; a carry of the rows alone; a dot, an
`scf.if`, a nested loop, any other op with a region; a pipelined dump (`ttg.local_alloc`: import the dump before
the pipeliner).
"""
from __future__ import annotations

import re

from .addresses import Addresses, int_constant, poly_int
from .block2d import BlockText, _split, _tensor_types
from .parser import Module, MOp, parse_module
from .rowprog import COLUMNS, COMBINERS, attr_int, end_line, func_args, walk_ops
from .rowwhole import subst
from .types import TypeReader

LAYOUT = "#colsum"
ALIAS = f"{LAYOUT} = #ttg.blocked<{{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}}>"
S, R, C, T = 0, 1, 2, 3  # scalar; the rows alone; the columns alone; the block
HINT = "docs/ttgir-import.md, section 8 (\"Column sums\") says what is imported"
REGION_OK = ("scf.for", "tt.reduce")


class RefuseCol(Exception):
    def __init__(self, op: MOp, message: str):
        super().__init__(message)
        self.op, self.message = op, message


def applies(module: Module) -> tuple[MOp, MOp] | None:
    """(the function, its loop) where the module is a column-sum kernel: one function whose body holds one
    `scf.for` at its top level, and a `tt.reduce` along axis 0 after it of one of the loop's 2-D results; else None."""
    funcs = module.functions()
    if len(funcs) != 1:
        return None
    func = funcs[0]
    lines = module.source.lines
    loops = [o for o in func.body() if o.name == "scf.for"]
    if len(loops) != 1:
        return None
    loop = loops[0]
    results = set(loop.results) | {r.split("#")[0] for r in loop.results}
    for o in func.body():
        if o.name == "tt.reduce" and attr_int(o, "axis") == 0 and o.operands() \
                and o.operands()[0][0] in results and re.search(r"\(tensor<\d+x\d+x", lines[end_line(o) - 1]):
            return func, loop
    return None


class ColSum(BlockText):
    layout = LAYOUT
    one_value = (S, C)  # a column's values: one a program

    def __init__(self, module: Module, func: MOp, loop: MOp):
        self.module, self.src, self.func, self.loop = module, module.source, func, loop
        self.ops = list(walk_ops(func.body()))
        self.defs = {r: o for o in self.ops for r in o.results}
        self.uses: dict[str, list[MOp]] = {}
        for o in self.ops:
            for n, _ in o.operands():
                self.uses.setdefault(n, []).append(o)
        self.kind: dict[str, int] = {a: S for a, _ in func_args(self.line(func))}
        self.elt: dict[str, str] = dict(func_args(self.line(func)))
        self.alias: dict[str, str] = {}
        self.true: set[str] = set()  # `cols < N`: true in every column a program computes
        self.skip: set[str] = set()  # values read by the column's index alone (`pid * BN`, its splat, arange(BN))
        self.col: set[str] = set()  # the column's index (`pid * BN + arange(BN)`, as rewritten the program id)
        self.transposed: list[str] = []  # pointer arguments whose tiles are read transposed
        self.bounds: list[str] = []  # the arguments of the dropped `cols < N`: the grid rows' extent
        self.addr = Addresses(func, TypeReader(module.source, module.aliases))
        self.current: MOp | None = None
        self.out: list[tuple[str, tuple[int, int | None], bool]] = []  # (text, place, removable)
        self.fresh = 0

    def name(self, base: str) -> str:
        self.fresh += 1
        return f"{base.replace('#', '_')}_cs{self.fresh}"

    def emit(self, text: str, op: MOp | None, same: bool = True, removable: bool = True) -> None:
        place = (op.head.line, None if same else op.head.col) if op is not None else (1, None)
        self.out.append((subst(text, self.alias), place, removable))

    # -- shapes and the program id ---------------------------------------------------------------------

    def shapes(self) -> None:
        """BM and BN from the reduced carries' [BM, BN] type; the loop's bounds; the column block's index."""
        found = None
        for o in self.func.body():
            if o.name == "tt.reduce" and attr_int(o, "axis") == 0:
                types = _tensor_types(self.src.lines[end_line(o) - 1])
                dims = _split(types[0][2])[0] if types else ()
                if len(dims) == 2:
                    found = dims
                    break
        self.bm, self.bn = found
        self.width = max(self.bm, COLUMNS)
        head = self.line(self.loop)
        m = re.search(r"scf\.for %([\w.$-]+) = %([\w.$-]+) to %([\w.$-]+) step %([\w.$-]+)", head)
        if m is None:
            raise RefuseCol(self.loop, "'scf.for' whose bounds are not as Triton prints them: not imported")
        self.iv, lower, _, self.step = m.groups()
        if self._constant(lower) != 0 or self._constant(self.step) != self.bm:
            raise RefuseCol(self.loop, f"'scf.for' of a column-sum kernel that is not `range(0, M, {self.bm})` over "
                                       f"the [{self.bm}, {self.bn}] tiles' row blocks: a loop over the rows from 0 in "
                                       "steps of the tile's rows is imported")
        for u in self.uses.get(self.iv, []):
            if u.name != "tt.splat" or not all(self._rows_index(a) for a in self.uses.get(u.results[0], [])):
                raise RefuseCol(u, f"'{u.name}' reads the loop's row offset other than as the row block's index "
                                   f"(`i + arange({self.bm})`): not imported")
        pids = [o for o in self.ops if o.name == "tt.get_program_id"]
        for o in pids:
            if not any(t.is_("x") for t in o.tokens):
                raise RefuseCol(o, f"'{o.name}' of a second grid axis in a column-sum kernel: one program a column "
                                   "block (`tl.program_id(0)`) is imported (a batch of matrices, or rows split over "
                                   "programs with an atomic add of their partials, is not)")
            for u in self.uses.get(o.results[0], []):
                if not self._start(u, o.results[0]):
                    raise RefuseCol(u, f"'{u.name}' reads the program id other than as the column block's first "
                                       f"column (`pid * {self.bn} + arange({self.bn})`): a column-sum kernel is "
                                       "imported where the program id indexes column blocks")
        if not pids:
            raise RefuseCol(self.func, "a column-sum kernel with no program id: the grid's column blocks are not "
                                       "indexed")

    def _constant(self, name: str) -> int | None:
        d = self.defs.get(name)
        return int_constant(d) if d is not None and d.name == "arith.constant" else None

    def _rows_index(self, add: MOp) -> bool:
        if add.name != "arith.addi":
            return False
        rng = [self.defs.get(n) for n, _ in add.operands()]
        return any(r is not None and r.name == "tt.make_range" and attr_int(r, "start") == 0
                   and attr_int(r, "end") == self.bm for r in rng)

    def _start(self, mul: MOp, pid: str) -> bool:
        """`pid * BN`, each use a splat added to `arange(BN)`: the column block's index (recorded)."""
        if mul.name != "arith.muli":
            return False
        other = [n for n, _ in mul.operands() if n != pid]
        if len(other) != 1 or self._constant(other[0]) != self.bn:
            return False
        for sp in self.uses.get(mul.results[0], []):
            if sp.name != "tt.splat":
                return False
            for add in self.uses.get(sp.results[0], []):
                rng = [self.defs.get(n) for n, _ in add.operands() if n != sp.results[0]]
                if add.name != "arith.addi" or len(rng) != 1 or rng[0] is None or rng[0].name != "tt.make_range" \
                        or attr_int(rng[0], "start") != 0 or attr_int(rng[0], "end") != self.bn:
                    return False
                self.col.add(add.results[0])
                self.alias[add.results[0]] = pid
                self.skip.update((sp.results[0], rng[0].results[0]))
        self.skip.add(mul.results[0])
        return True

    # -- kinds -----------------------------------------------------------------------------------------

    def kind_of(self, op: MOp) -> int:
        ty = _tensor_types(self.line(op))
        if op.name == "tt.reduce":
            ty = _tensor_types(self.src.lines[end_line(op) - 1])
        if not ty:
            return S
        dims, _, layout = _split(ty[-1][2])
        if len(dims) == 2:
            kind = {(self.bm, 1): R, (1, self.bn): C, (self.bm, self.bn): T}.get(dims, -1)
            if kind < 0:
                raise RefuseCol(op, f"'{op.name}' of a [{dims[0]}, {dims[1]}] tile beside the [{self.bm}, {self.bn}] "
                                    "blocks of a column-sum kernel: not imported")
            return kind
        if len(dims) != 1:
            raise RefuseCol(op, f"'{op.name}' of a {len(dims)}-D tile in a column-sum kernel: not imported")
        if "dim = 1" in layout:
            return R
        if "dim = 0" in layout:
            return C
        known = [self.kind[n] for n in self.names(op) if self.kind.get(n, S) != S]
        if known:
            return max(known)
        if op.name == "tt.make_range":
            return R if attr_int(op, "end") == self.bm and self.bm != self.bn else C
        return C if dims[0] == self.bn else R

    # -- the walk --------------------------------------------------------------------------------------

    def run(self) -> tuple[list[str], list[tuple[int, int | None]]]:
        self.shapes()
        for o in self.ops:
            if o.name in ("tt.dot", "ttng.warp_group_dot", "ttng.tc_gen5_mma") or o.name.startswith("tt.atomic") \
                    or o.name in ("ttg.local_alloc", "ttg.async_copy_global_to_local", "tt.descriptor_load"):
                raise RefuseCol(o, f"'{o.name}' in a column-sum kernel (a loop over row blocks summed down the "
                                   "columns after it): not imported" + (
                                       " (a pipelined dump: import the one before Triton's pipeliner)"
                                       if o.name.startswith("ttg.") else ""))
        first = self.func.head.line
        self.out.append((ALIAS, (1, None), False))
        for i in range(1, first + 1):
            self.out.append((self.src.lines[i - 1], (i, None), False))
        self.body(self.func.body())
        last = max(o.head.line for o in self.ops) + 1
        for i in range(last, len(self.src.lines) + 1):
            self.out.append((self.src.lines[i - 1], (i, None), False))
        return self._live()

    def body(self, ops) -> None:
        for o in ops:
            self.current = o
            if o.name == "scf.for":
                self.for_(o)
            elif o.name == "tt.reduce":
                self.reduce(o)
            elif o.regions:
                raise RefuseCol(o, f"'{o.name}' (an op with a region: a branch, a nested loop) in a column-sum "
                                   "kernel: not imported")
            else:
                self.op(o)

    def _live(self) -> tuple[list[str], list[tuple[int, int | None]]]:
        """The lines without the removable ones whose results nothing reads (the kernel's address arithmetic the
        rewrite replaced, the columns' masks it dropped)."""
        keep = [True] * len(self.out)
        defined = [re.match(r"\s*%([\w.$-]+)(?::\d+)? = ", t) for t, _, _ in self.out]
        while True:
            read: set[str] = set()
            for k, (text, _, _) in enumerate(self.out):
                if keep[k]:
                    body = text.split("=", 1)[1] if defined[k] else text
                    read.update(m.group(1).split("#")[0] for m in re.finditer(r"%([\w.$-]+(?:#\d+)?)", body))
            dead = [k for k, (_, _, rem) in enumerate(self.out)
                    if keep[k] and rem and defined[k] and defined[k].group(1) not in read]
            if not dead:
                break
            for k in dead:
                keep[k] = False
        lines = [t for k, (t, _, _) in enumerate(self.out) if keep[k]]
        where = [p for k, (_, p, _) in enumerate(self.out) if keep[k]]
        return lines, where

    def op(self, o: MOp) -> None:
        line, names = self.line(o), self.names(o)
        r = o.results[0] if o.results else None
        if o.name == "tt.get_program_id":
            self.kind[r], self.elt[r] = S, "i32"
            self.emit(line, o)
            return
        if r in self.skip or r in self.col:
            self.kind[r] = S
            return
        kind = self.kind_of(o) if r is not None else max([self.kind.get(n, S) for n in names] or [S])
        if o.name == "tt.make_range":
            self.kind[r] = kind
            if kind == C:
                raise RefuseCol(o, f"'{o.name}' of the columns read other than as the column block's index "
                                   f"(`pid * {self.bn} + arange({self.bn})`): not imported")
            self.emit(self.retype(line, R).replace(f"end = {self.bm} : i32", f"end = {self.width} : i32"), o)
            return
        if o.name in ("tt.expand_dims", "ttg.convert_layout"):
            self.alias_to(o, names[0])
            return
        if o.name == "tt.broadcast":
            have = self.kind.get(names[0], S)
            if have in (R, T) or names[0] in self.true:
                self.alias_to(o, names[0])
                return
            elt = _split(_tensor_types(line)[-1][2])[1]
            self.kind[r] = T
            self.emit(f"    %{r} = tt.splat %{names[0]} : {elt} -> {self.type_for(T, elt)}{self._loc(line)}", o)
            return
        if o.name == "tt.splat":
            if kind in (S, C):
                self.alias_to(o, names[0])
                return
            self.kind[r] = kind
            self.emit(self.retype(line, kind), o)
            return
        if o.name == "arith.constant" and kind == C:
            value = re.search(r"dense<([^>]*)>", line)
            elt = _split(_tensor_types(line)[-1][2])[1]
            self.kind[r] = S
            self.emit(f"    %{r} = arith.constant {value.group(1)} : {elt}{self._loc(line)}", o)
            return
        if o.name == "arith.cmpi" and self._column_bound(o, names):
            self.true.add(r)  # cols < N: true in every column a program computes
            self.kind[r] = S
            return
        if o.name == "arith.andi" and any(n in self.true for n in names):
            rest = [n for n in names if n not in self.true]
            if not rest:
                self.true.add(r)
                self.kind[r] = S
            else:
                self.alias_to(o, rest[0])
            return
        if o.name == "tt.load" and kind == T:
            self.tile_load(o, names)
            return
        if o.name in ("tt.load", "tt.store"):
            if o.name == "tt.store" and kind in (R, T):
                raise RefuseCol(o, f"'tt.store' of a {'tile' if kind == T else 'vector of the rows'} in a column-sum "
                                   "kernel: one column a program is imported where it stores values of its columns "
                                   "alone (the column sums after the loop)")
            mask = names[1] if o.name == "tt.load" and len(names) > 1 else names[2] if len(names) > 2 else None
            if mask in self.true:
                raw = [n for n, _ in o.operands()]
                k = 1 if o.name == "tt.load" else 2
                line = re.sub(r",\s*%" + re.escape(raw[k]) + r"\b" + (r"(,\s*%[\w.$-]+)?" if o.name == "tt.load"
                                                                       else ""), "", line, count=1)
        if any(n in self.col for n in [n for n, _ in o.operands()]) and o.name not in ("tt.addptr", "arith.addi",
                                                                                       "arith.muli", "arith.extsi"):
            raise RefuseCol(o, f"'{o.name}' reads the column's index (`pid * BN + arange(BN)`) as a value, not as an "
                               "address or its bound `cols < N`: not imported")
        if r is not None:
            for x in o.results:
                self.kind[x] = kind
        self.emit(self.retype(line, kind) if kind not in (S,) else line, o,
                  removable=o.name not in ("tt.store", "scf.yield", "tt.return"))

    def _column_bound(self, o: MOp, names: list[str]) -> bool:
        """`cols < N`: the column's index against an argument or a constant, splat."""
        pids = {r for r, d in self.defs.items() if d.name == "tt.get_program_id"}
        if " slt," not in self.line(o) or names[0] not in pids:
            return False
        bound = self.defs.get([n for n, _ in o.operands()][1])
        while bound is not None and bound.name in ("tt.splat", "tt.expand_dims", "tt.broadcast", "ttg.convert_layout"):
            src = next(iter(bound.operands()))[0]
            if bound.name == "tt.splat":
                if src in self.elt and src not in self.defs:
                    if src not in self.bounds:
                        self.bounds.append(src)
                    return True
                return self._constant(src) is not None
            bound = self.defs.get(src)
        return False

    def tile_load(self, o: MOp, names: list[str]) -> None:
        """A [BM, BN] tile at `P + rows * stride + cols`: the column's [W] rows of P's transpose, read at
        `P + c * stride + rows` (the module docstring says why)."""
        line = self.line(o)
        raw = [n for n, _ in o.operands()]
        a = self.addr.of(raw[0])
        why = None
        if a is None or a.base is None or len(a.coefs) != 2:
            why = "not a pointer argument plus offsets linear in the tile's rows and columns"
        elif poly_int(a.coefs[1]) != 1:
            why = "its columns are not adjacent in memory (a column stride, or a tile read transposed)"
        else:
            stride = a.coefs[0]
            iv = tuple((tuple(sorted(m + (f"iv:{self.iv}",))), c) for m, c in stride)
            expect = dict(iv)
            expect[("pid_x",)] = expect.get(("pid_x",), 0) + self.bn
            if dict(a.const) != expect:
                why = "its first row and column are not the loop's row block and the program's column block"
            elif len(stride) != 1 or (stride[0][0] and (len(stride[0][0]) != 1 or stride[0][1] != 1)):
                why = "its row stride is not one argument or constant"
        if why is not None:
            raise RefuseCol(o, f"'tt.load' of a [{self.bm}, {self.bn}] tile in a column-sum kernel whose address is not "
                               f"`P + rows[:, None] * stride + cols[None, :]`: {why}")
        base = a.base
        if base not in self.transposed:
            self.transposed.append(base)
        ind, loc = re.match(r"\s*", line).group(0), self._loc(line)
        ptr = self.elt[base]
        (mono, coef), = stride
        if mono:
            st = mono[0]
        else:
            st = self.name("stride")
            self.emit(f"{ind}%{st} = arith.constant {coef} : i32{loc}", o)
        pid = next(p for p, d in self.defs.items() if d.name == "tt.get_program_id")
        off, row, rows, ptrs, rng, first = (self.name(o.results[0]) for _ in range(6))
        tile_ptr = self.type_for(T, ptr)
        self.emit(f"{ind}%{off} = arith.muli %{pid}, %{st} : i32{loc}", o, same=False)
        self.emit(f"{ind}%{row} = tt.addptr %{base}, %{off} : {ptr}, i32{loc}", o, same=False)
        self.emit(f"{ind}%{rows} = tt.splat %{row} : {ptr} -> {tile_ptr}{loc}", o, same=False)
        self.emit(f"{ind}%{rng} = tt.make_range {{end = {self.width} : i32, start = 0 : i32}} : "
                  f"{self.type_for(T, 'i32')}{loc}", o, same=False)
        self.emit(f"{ind}%{first} = tt.splat %{self.iv} : i32 -> {self.type_for(T, 'i32')}{loc}", o, same=False)
        idx = self.name(o.results[0])
        self.emit(f"{ind}%{idx} = arith.addi %{first}, %{rng} : {self.type_for(T, 'i32')}{loc}", o, same=False)
        self.emit(f"{ind}%{ptrs} = tt.addptr %{rows}, %{idx} : {tile_ptr}, {self.type_for(T, 'i32')}{loc}", o,
                  same=False)
        rest = names[1:]
        if rest and rest[0] in self.true:
            rest = []
        for n in rest:
            if self.kind.get(n, S) not in (R, T):
                raise RefuseCol(o, f"'tt.load' of a tile whose mask or fill is not one of the tile's rows: not imported")
        attrs = re.search(r"(\{[^}]*\})\s*:", line)
        self.kind[o.results[0]] = T
        self.emit(f"{ind}%{o.results[0]} = tt.load {', '.join('%' + n for n in [ptrs] + rest)}"
                  f"{' ' + attrs.group(1) if attrs else ''} : {tile_ptr}{loc}", o)

    def for_(self, o: MOp) -> None:
        line = self.line(o)
        m = re.search(r"iter_args\((.*?)\)\s*->\s*\((.*?)\)\s*:", line)
        pairs = re.findall(r"%([\w.$#-]+) = %([\w.$#-]+)", m.group(1)) if m else []
        ind, loc = re.match(r"\s*", line).group(0), self._loc(line)
        step = self.name("step")
        self.emit(f"{ind}%{step} = arith.constant {self.width} : i32{loc}", o)
        kinds = []
        for k, (a, init) in enumerate(pairs):
            init = self.alias.get(init, init)
            kind = self.kind.get(init, S)
            res = o.results[k] if len(o.results) > 1 else o.results[0]
            if kind == R:
                raise RefuseCol(o, f"'scf.for' carries '%{a}', a vector of the rows ([{self.bm}]), from one row block "
                                   "to the next: not imported")
            if kind == T:
                readers = list({id(u): u for u in self.uses.get(res, []) + self.uses.get(res.split("#")[0], [])
                                if res in [n for n, _ in u.operands()]}.values())
                if len(readers) != 1 or readers[0].name != "tt.reduce" or attr_int(readers[0], "axis") != 0:
                    raise RefuseCol(readers[0] if readers else o,
                                    f"the loop's [{self.bm}, {self.bn}] carry '%{a}' is read after the loop other than "
                                    "by one reduction along axis 0 (its column sum, max or min): not imported")
                combiner = next((x for x in walk_ops(readers[0].body())), None)
                if combiner is None or combiner.name not in COMBINERS:
                    raise RefuseCol(readers[0], f"'tt.reduce' of the carry '%{a}' by "
                                                f"'{getattr(combiner, 'name', '?')}': a column's carry is reduced by "
                                                "an associative and commutative op (sum, max, min) only")
            kinds.append(kind)
            self.kind[a] = kind
            self.elt[a] = self.elt.get(init, "f32")
        self.kind[self.iv] = S
        for r, kind in zip(o.results if len(o.results) > 1 else o.results[:1] * len(pairs), kinds):
            self.kind[r] = kind
            self.kind[r.split("#")[0]] = kind
        head = line[:line.index("iter_args(")] if pairs else line[:line.index(" : i32")]
        head = head.replace(f"step %{self.step}", f"step %{step}")
        if pairs:
            types = [self.type_for(k, _split(t)[1]) if t.startswith("tensor<") else t
                     for k, (_, _, t) in zip(kinds, _tensor_types(m.group(2)) or [(0, 0, x) for x in
                                                                                  m.group(2).split(", ")])]
            inits = ", ".join(f"%{a} = %{self.alias.get(i, i)}" for a, i in pairs)
            head += f"iter_args({inits}) -> ({', '.join(types)}) "
        self.emit(f"{head} : i32 {{", o, removable=False)
        body = list(o.body())
        self.body(body)
        end = end_line(o)
        self.out.append((self.src.lines[end - 1], (end, None), False))

    def reduce(self, o: MOp) -> None:
        names = self.names(o)
        axis = attr_int(o, "axis")
        have = self.kind.get(names[0], S) if len(names) == 1 else -1
        if have != T or len(o.results) != 1:
            raise RefuseCol(o, f"'{o.name}' of {'several values at once' if len(names) != 1 else 'a vector'} in a "
                               "column-sum kernel: a reduction of a block along axis 0 (down its columns) is imported")
        if axis != 0:
            raise RefuseCol(o, f"'{o.name}' along axis {axis} of a [{self.bm}, {self.bn}] block (across its columns) "
                               "in a column-sum kernel: one column a program is imported, whose reductions are down "
                               "the column (axis 0)")
        last = end_line(o)
        for k in range(o.head.line, last + 1):
            text = self.src.lines[k - 1]
            if k == last:
                types = _tensor_types(text)
                if len(types) != 2:
                    raise RefuseCol(o, f"'{o.name}' whose types are not one tile to one vector: not imported")
                (a0, b0, t0), (a1, b1, t1) = types
                text = text[:a0] + self.type_for(T, _split(t0)[1]) + text[b0:a1] + _split(t1)[1] + text[b1:]
            self.emit(text, o, removable=False)
            self.out[-1] = (self.out[-1][0], (k, None), self.out[-1][2])
        self.kind[o.results[0]] = S


def rewrite(module: Module) -> tuple[Module, list[tuple[int, int | None]], tuple[str, ...], tuple[str, ...]] | None:
    """(the module as one column a program, each line's place in the original, the pointer arguments read
    transposed, the arguments that bound the columns) where it is a column-sum kernel; None where it is not. A
    construct not taken: an error at its line."""
    found = applies(module)
    if found is None:
        return None
    cs = ColSum(module, *found)
    try:
        out, where = cs.run()
    except RefuseCol as exc:
        raise module.source.error(exc.message, exc.op.head, HINT) from None
    except (AttributeError, IndexError, KeyError, StopIteration, ValueError, TypeError):
        op = cs.current or cs.func
        raise module.source.error(f"'{op.name}': a column-sum kernel whose op's types or operands are not as "
                                  "Triton prints them: not imported", op.head, HINT) from None
    return parse_module("\n".join(out), module.source.file), where, tuple(cs.transposed), tuple(cs.bounds)


__all__ = ["applies", "rewrite"]
