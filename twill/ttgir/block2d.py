"""A loop-free kernel of 2-D blocks, as one row a program (docs/ttgir-import.md, section 8, "A block of a 2-D grid").

The most common elementwise Triton kernels over a matrix run a [BR, BC] block a program, on a 2-D grid (or a 1-D
grid of row blocks whose block holds the whole row): `rm = pid_m * BR + arange(BR)`, `rn = pid_n * BC +
arange(BC)`, addresses `P + rm[:, None] * stride + rn[None, :]`, the mask `(rm[:, None] < M) & (rn[None, :] < N)`,
elementwise ops, a bias row (`B + rn`, broadcast over the rows) or a per-row scale (`S + rm`, broadcast over the
columns). Every element (r, c) of the output is the same function of the elements (r, c) of the 2-D inputs, the
element c of the column vectors and the element r of the row vectors: which program computes which block does not
change what is stored. So the module is rewritten, as text, into the loop-free kernel of one row a program that
computes the same (rowwhole.py's "no loop" form), and rowwhole.py and rowprog.py go on with that (a column loop of
64 rows a CTA):

- the row block's index `pid_r * BR + arange(BR)` becomes the program id (the row; `tt.get_program_id x`); the
  column block's `pid_c * BC + arange(BC)` becomes `arange(BC)` (the column loop rowwhole.py makes runs over the
  whole row, `cols < N` its tail: every column block's columns) and the column program id is dropped;
- a value of the rows alone ([BR], [BR, 1]: the row's pointer offset `rm * stride`, a per-row scale) becomes a
  scalar, the row's; a [BR, BC] tile or a value of the columns alone ([BC], [1, BC]) a [BC] tile of the row's
  columns, read WIDTH (64) columns a tile (the column loop's step: registers for long f32 chains on sm_100a);
  `expand_dims`, `convert_layout` and the broadcast of a column value are the value itself, the broadcast of a row
  value a splat;
- the mask of the rows `rm < M` (M an argument or a constant) is true in every row a program computes (the grid
  has one program a row, 64 rows a CTA with the last row tile's rows past M clipped by TMA): it is dropped, and
  `row_mask & col_mask` is the column mask.

- the offsets `rm[:, None] * stride + rn[None, :]` added as integers before the pointer are the row's pointer
  `P + row * stride` and then its columns (the address is the same);
- where the block holds whole rows (no program id indexes column blocks: `cols = arange(BLOCK_N)`), a reduction
  along axis 1 (`tl.sum(x, axis=1)`, one value a row) is the row's reduction of its [BC] tile to a scalar.

Recognized by its dataflow, not names; refused (an error at the op, naming it): 2-D tiles of several shapes (RoPE's
[heads, hd / 2] tiles of q and of k: two tensors of different row counts a program), a program id read other than
as a block's first row or column (`pid // num_pid_n`), a reduction along axis 0 or of a block of a 2-D grid (a
partial row), any other op with a region, a row offset read other than as an address, a value of the rows meeting
one of the columns other than through a broadcast.
"""
from __future__ import annotations

import re

from .parser import Module, MOp, parse_module
from .rand import is_draw
from .rowprog import attr_int, end_line, func_args, walk_ops
from .rowwhole import SSA, subst

LAYOUT = "#block2d"
ALIAS = f"{LAYOUT} = #ttg.blocked<{{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}}>"
S, R, C, T = 0, 1, 2, 3  # scalar; the rows alone; the columns alone; the block
# The column tile of the rewritten row (the block's columns where fewer). A block kernel is elementwise math on f32
# tiles, often a long chain (bias + GELU: x + b live through a dozen ops): on sm_100a its 64 x 128 f32 tiles spill
# 1616 bytes after the ptxas loop (b200 I = 256), its 64 x 64 tiles none (I = 128, the same columns a cycle); sm_90a
# takes either without spill.
WIDTH = 64
HINT = "docs/ttgir-import.md, section 8 (\"A block of a 2-D grid\") says what is imported"


class Refuse2D(Exception):
    def __init__(self, op: MOp, message: str):
        super().__init__(message)
        self.op, self.message = op, message


def _tensor_types(line: str) -> list[tuple[int, int, str]]:
    """(start, end, text) of every `tensor<...>` in a line (balanced brackets: layouts nest them)."""
    out, i = [], 0
    while (i := line.find("tensor<", i)) >= 0:
        depth, j = 0, i + 6
        while j < len(line):
            depth += line[j] == "<"
            depth -= line[j] == ">"
            if depth == 0:
                break
            j += 1
        out.append((i, j + 1, line[i:j + 1]))
        i = j + 1
    return out


def _split(ty: str) -> tuple[tuple[int, ...], str, str]:
    """(shape, element type, layout text) of a `tensor<...>` type's text."""
    inner = ty[len("tensor<"):-1]
    m = re.match(r"((?:\d+x)+)(.*)$", inner)
    dims = tuple(int(d) for d in m.group(1).rstrip("x").split("x"))
    rest, depth = m.group(2), 0
    for k, ch in enumerate(rest):
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            return dims, rest[:k], rest[k + 1:].strip()
    return dims, rest, ""


def applies(module: Module) -> bool:
    """A loop-free kernel of one function that loads or stores a 2-D tile (a 2-D tile made and read in registers
    alone is not a block of a grid: rowwhole.py refuses it, naming it)."""
    funcs = module.functions()
    text = module.source.text
    if len(funcs) != 1 or "scf." in text or re.search(r"tensor<\d+x\d+x", text) is None:
        return False
    lines = module.source.lines
    return any(o.name in ("tt.load", "tt.store") and re.search(r"tensor<\d+x\d+x", lines[o.head.line - 1])
               for o in walk_ops(funcs[0].body()))


class BlockText:
    """What both rewrites of a kernel of 2-D blocks into 1-D tiles (Block2D here, colsum.ColSum) do to the text: each
    op's line, its operands through the aliases, a line retyped as the kind of value it becomes, a view aliased to its
    operand. A subclass sets `layout` (its 1-D tiles' encoding) and `one_value` (the kinds that stay one value a
    program: the rows here, the columns in ColSum), and keeps `src`, `alias`, `kind`, `true` and `width`."""

    layout = LAYOUT
    one_value = (S, R)

    def line(self, op: MOp) -> str:
        return self.src.lines[op.head.line - 1]

    def names(self, op: MOp) -> list[str]:
        return [self.alias.get(n, n) for n, _ in op.operands()]

    def type_for(self, kind: int, elt: str) -> str:
        return elt if kind in self.one_value else f"tensor<{self.width}x{elt}, {self.layout}>"

    def retype(self, line: str, kind: int) -> str:
        for a, b, ty in reversed(_tensor_types(line)):
            line = line[:a] + self.type_for(kind, _split(ty)[1]) + line[b:]
        return line

    def alias_to(self, op: MOp, name: str) -> None:
        r = op.results[0]
        self.alias[r] = self.alias.get(name, name)
        self.kind[r] = self.kind.get(self.alias[r], S)
        if self.alias[r] in self.true:
            self.true.add(r)

    @staticmethod
    def _loc(line: str) -> str:
        m = re.search(r"\sloc\([^()]*(?:\([^()]*\)[^()]*)*\)\s*$", line)
        return m.group(0) if m else ""


class Block2D(BlockText):
    def __init__(self, module: Module):
        self.module, self.src = module, module.source
        self.func = module.functions()[0]
        self.ops = list(walk_ops(self.func.body()))
        self.defs = {r: o for o in self.ops for r in o.results}
        self.uses: dict[str, list[MOp]] = {}
        for o in self.ops:
            for n, _ in o.operands():
                self.uses.setdefault(n, []).append(o)
        self.kind: dict[str, int] = {a: S for a, _ in func_args(self.line(self.func))}
        self.alias: dict[str, str] = {}
        self.true: set[str] = set()  # masks true in every row a program computes (the rows' mask)
        self.splat_src: dict[str, str] = {}  # a splat (or a row value's broadcast) emitted -> the scalar it splats
        self.deferred: dict[str, str] = {}  # a row's integer broadcast over the columns -> the row's scalar
        self.split: dict[str, tuple[str, str]] = {}  # `rows * stride + cols` -> (the row's offset, the columns')
        self.fresh = 0
        self.current: MOp | None = None  # the op being read (where an unreadable line is refused)
        self.out: list[str] = []
        self.where: list[tuple[int, int | None]] = []

    # -- the block's shape and the program ids of its rows and columns ---------------------------------------

    def block(self) -> None:
        shapes = []
        for o in self.ops:
            self.current = o
            for _, _, ty in _tensor_types(self.line(o)):
                dims = _split(ty)[0]
                if len(dims) > 2:
                    raise Refuse2D(o, f"'{o.name}' of a {len(dims)}-D tile in a kernel with no loop: not imported")
                if len(dims) == 2 and min(dims) > 1:
                    shapes.append((o, dims))
        # the block: the shape of the first 2-D tile read from memory (or of the first 2-D tile); named at the first
        # load or store of another shape where there is one (the tensor of other row counts), else at the first tile
        memory = [(o, d) for o, d in shapes if o.name in ("tt.load", "tt.store")]
        first = (memory or shapes)[0][1]
        other = [(o, d) for o, d in memory if d != first] or [(o, d) for o, d in shapes if d != first]
        if other:
            o, dims = other[0]
            raise Refuse2D(o, f"'{o.name}' of a [{dims[0]}, {dims[1]}] tile beside [{first[0]}, {first[1]}] tiles "
                              "in a kernel with no loop: a program's 2-D blocks of several shapes (RoPE's heads x "
                              "half dims of q and of k: two tensors of different row counts a program) are not one "
                              "block of a 2-D grid; a kernel of 2-D tiles with no loop is imported where every "
                              "tile is one [rows, columns] block (or its rows' or columns' vector)")
        self.br, self.bc = first
        self.width = min(self.bc, WIDTH)
        # each program id's axis: the block's rows or its columns, by the index `pid * B + arange(B)` it starts
        self.pid_axis: dict[str, int] = {}
        self.start: dict[str, int] = {}  # `pid * B` -> the axis
        self.offsets: dict[str, tuple[int, str]] = {}  # `splat(pid * B) + arange(B)` -> (axis, the range)
        for o in self.ops:
            if o.name != "tt.get_program_id":
                continue
            pid = o.results[0]
            for u in self.uses.get(pid, []):
                axis = self._start_axis(u, pid)
                if axis is None:
                    raise Refuse2D(u, f"'{u.name}' reads the program id other than as a block's first row or column "
                                      f"(`pid * BLOCK + arange(BLOCK)`, BLOCK {self.br} or {self.bc}): a kernel of "
                                      "2-D blocks is imported where each program id indexes the blocks of one axis")
                if self.pid_axis.setdefault(pid, axis) != axis:
                    raise Refuse2D(u, f"'{u.name}': the program id indexes both the rows and the columns of the block")
        if R not in self.pid_axis.values():
            raise Refuse2D(self.func, "a kernel of 2-D blocks whose rows no program id indexes (`pid * BLOCK_M + "
                                      "arange(BLOCK_M)`): not imported")

    def _start_axis(self, mul: MOp, pid: str) -> int | None:
        """The axis whose blocks `mul` = `pid * B` starts (every use of it a splat added to `arange(B)`), or None."""
        if mul.name != "arith.muli":
            return None
        other = [n for n, _ in mul.operands() if n != pid]
        const = self.defs.get(other[0]) if len(other) == 1 else None
        m = const is not None and const.name == "arith.constant" and re.search(r"arith\.constant (\d+) : i32",
                                                                                 self.line(const))
        if not m:
            return None
        size, axes = int(m.group(1)), set()
        for sp in self.uses.get(mul.results[0], []):
            if sp.name != "tt.splat":
                return None
            for add in self.uses.get(sp.results[0], []):
                rng = [self.defs.get(n) for n, _ in add.operands() if n != sp.results[0]]
                if add.name != "arith.addi" or len(rng) != 1 or rng[0] is None or rng[0].name != "tt.make_range" \
                        or attr_int(rng[0], "start") != 0 or attr_int(rng[0], "end") != size:
                    return None
                axis = self._vector_axis(add, size)
                if axis is None:
                    return None
                axes.add(axis)
                self.offsets[add.results[0]] = (axis, rng[0].results[0])
        if len(axes) != 1:
            return None
        axis = axes.pop()
        self.start[mul.results[0]] = axis
        return axis

    def _vector_axis(self, op: MOp, size: int) -> int | None:
        """R or C for a 1-D index vector: its slice layout, else the expand_dims it meets, else its length."""
        ty = _tensor_types(self.line(op))
        layout = _split(ty[-1][2])[2] if ty else ""
        if "dim = 1" in layout:
            return R
        if "dim = 0" in layout:
            return C
        for u in self.uses.get(op.results[0], []):
            if u.name == "tt.expand_dims":
                return R if attr_int(u, "axis") == 1 else C
        return C if size == self.bc else R if size == self.br else None

    # -- kinds ----------------------------------------------------------------------------------------------

    def kind_of(self, op: MOp) -> int:
        ty = _tensor_types(self.line(op))
        if not ty:
            return S
        dims, _, layout = _split(ty[-1][2])
        if len(dims) == 2:
            return {(self.br, 1): R, (1, self.bc): C, (self.br, self.bc): T}.get(dims, -1)
        if "dim = 1" in layout:
            return R
        if "dim = 0" in layout:
            return C
        known = [self.kind[n] for n in self.names(op) if self.kind.get(n, S) != S]
        if known:
            return max(known)
        return C if dims[0] == self.bc else R if dims[0] == self.br else -1

    # -- the text -------------------------------------------------------------------------------------------

    def emit(self, text: str, op: MOp | None, same: bool = True) -> None:
        self.out.append(subst(text, self.alias))
        self.where.append((op.head.line, None if same else op.head.col) if op is not None else (1, None))

    def run(self) -> tuple[list[str], list[tuple[int, int | None]]]:
        self.block()
        first = self.func.head.line
        self.emit(ALIAS, None)
        for i in range(1, first + 1):
            self.out.append(self.src.lines[i - 1])
            self.where.append((i, None))
        for o in self.func.body():
            self.current = o
            if o.name == "tt.reduce":
                self.reduce(o)
            elif o.regions:
                raise Refuse2D(o, f"'{o.name}' (an op with a region: a branch, a loop) in a kernel of 2-D blocks "
                                  "with no loop: not imported")
            else:
                self.op(o)
        last = max(o.head.line for o in self.ops) + 1
        for i in range(last, len(self.src.lines) + 1):
            self.out.append(self.src.lines[i - 1])
            self.where.append((i, None))
        return self.out, self.where

    def op(self, o: MOp) -> None:
        line, names = self.line(o), self.names(o)
        r = o.results[0] if o.results else None
        if o.name == "tt.get_program_id":
            axis = self.pid_axis.get(r)
            if axis == R:
                self.emit(re.sub(r"tt\.get_program_id [xyz]", "tt.get_program_id x", line), o)
                self.kind[r] = S
            elif axis is None:  # a program id the kernel does not read
                self.kind[r] = S
            return  # the columns' program id: every column block is the row's column loop
        if r in self.start:  # pid * B: read by the block's index alone
            return
        if o.name == "tt.splat" and names[0] in self.start:
            return
        if r in self.offsets:  # the block's first row + arange(BR) -> the row; columns -> arange(BC)
            axis, rng = self.offsets[r]
            if axis == R:
                splat = next(n for n in names if n != rng)
                start = next(iter(self.defs[splat].operands()))[0]
                pid = next(n for n, _ in self.defs[start].operands() if n in self.pid_axis)
                self.alias[r], self.kind[r] = pid, S
            else:
                self.alias[r], self.kind[r] = rng, C
            return
        kind = self.kind_of(o) if r is not None else max([self.kind.get(n, S) for n in names] or [S])
        if kind < 0:
            raise Refuse2D(o, f"'{o.name}' of a tile that is neither the [{self.br}, {self.bc}] block nor its rows' or "
                              "columns' vector: not imported")
        if o.name == "tt.make_range":
            if kind == R:
                if any(u.results and u.results[0] not in self.offsets for u in self.uses.get(r, [])):
                    bad = next(u for u in self.uses[r] if u.results and u.results[0] not in self.offsets)
                    raise Refuse2D(bad, f"'{bad.name}' reads the block's row indices (`arange({self.br})`) other "
                                        "than as the block's rows (`pid * BLOCK + arange(BLOCK)`): not imported")
                return
            self.kind[r] = C
            self.emit(self.retype(line, C).replace(f"end = {self.bc} : i32", f"end = {self.width} : i32"), o)
            return
        if o.name in ("tt.expand_dims", "ttg.convert_layout"):
            self.alias_to(o, names[0])
            return
        if o.name == "tt.broadcast":
            have = self.kind.get(names[0], S)
            if have in (C, T) or names[0] in self.true:
                self.alias_to(o, names[0])
                return
            elt = _split(_tensor_types(line)[-1][2])[1]
            self.kind[r] = T
            if elt.startswith("i") and elt != "i1":  # an offset of the row: read by `+ cols` and an address alone
                self.deferred[r] = names[0]
                return
            self.splat_src[r] = names[0]
            self.emit(f"    %{r} = tt.splat %{names[0]} : {elt} -> {self.type_for(T, elt)}{self._loc(line)}", o)
            return
        if o.name == "tt.splat":
            if kind in (S, R):
                self.alias_to(o, names[0])
                return
            self.kind[r] = kind
            self.splat_src[r] = names[0]
            self.emit(self.retype(line, kind), o)
            return
        if o.name == "arith.addi" and any(n in self.deferred for n in names):
            row = next(n for n in names if n in self.deferred)
            cols = [n for n in names if n != row]
            if len(cols) != 1 or cols[0] in self.deferred or cols[0] in self.split:
                raise Refuse2D(o, f"'{o.name}' adds two offsets of the row: not imported")
            self.split[r], self.kind[r] = (self.deferred[row], cols[0]), T
            return
        if o.name == "tt.addptr" and len(names) == 2 and names[1] in self.split and names[0] in self.splat_src:
            # P + (row * stride + cols) as (P + row * stride) + cols: the row's pointer, then its columns
            off, cols = self.split[names[1]]
            ptr = _split(_tensor_types(line)[0][2])[1]
            ity = _split(_tensor_types(line)[-1][2])[1]
            self.fresh += 1
            row, rs, loc = f"{r}_b2d{self.fresh}", f"{r}_b2ds{self.fresh}", self._loc(line)
            self.emit(f"    %{row} = tt.addptr %{self.splat_src[names[0]]}, %{off} : {ptr}, {ity}{loc}", o)
            self.emit(f"    %{rs} = tt.splat %{row} : {ptr} -> {self.type_for(T, ptr)}{loc}", o)
            self.emit(f"    %{r} = tt.addptr %{rs}, %{cols} : {self.type_for(T, ptr)}, {self.type_for(T, ity)}{loc}", o)
            self.kind[r] = T
            return
        if is_draw(o) and len(names) == 2 and names[1] in self.split and names[0] not in self.split:
            # a draw of random numbers (rand.py) at the element's offsets `row * stride + cols`: the same index of
            # the row and its columns (rowwhole.py and rowprog.py carry it to the draw)
            off, cols = self.split[names[1]]
            self.fresh += 1
            first, index, loc = f"{r}_b2dr{self.fresh}", f"{r}_b2di{self.fresh}", self._loc(line)
            ity = self.type_for(T, "i32")
            self.emit(f"    %{first} = tt.splat %{off} : i32 -> {ity}{loc}", o)
            self.emit(f"    %{index} = arith.addi %{first}, %{cols} : {ity}{loc}", o)
            self.kind[r] = T
            self.emit(self.retype(re.sub(r"%" + re.escape(names[1]) + r"\b", "%" + index, line, count=1), T), o)
            return
        if any(n in self.deferred or n in self.split for n in names):
            raise Refuse2D(o, f"'{o.name}' reads the offsets of the block's rows (`rm[:, None] * stride`) other than "
                              "as an address (`P + rm[:, None] * stride + cols[None, :]`): not imported")
        if o.name == "arith.constant" and kind == R:
            value = re.search(r"dense<([^>]*)>", line)
            elt = _split(_tensor_types(line)[-1][2])[1]
            self.kind[r] = S
            self.emit(f"    %{r} = arith.constant {value.group(1)} : {elt}{self._loc(line)}", o)
            return
        if o.name == "arith.cmpi" and kind == R and self._row_bound(o, names):
            self.true.add(r)  # rm < M: true in every row a program computes
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
        if o.name in ("tt.load", "tt.store"):
            mask = names[1] if o.name == "tt.load" and len(names) > 1 else names[2] if len(names) > 2 else None
            if mask in self.true:
                raw = [n for n, _ in o.operands()]
                k = 1 if o.name == "tt.load" else 2
                line = re.sub(r",\s*%" + re.escape(raw[k]) + r"\b" + (r"(,\s*%[\w.$-]+)?" if o.name == "tt.load"
                                                                       else ""), "", line, count=1)
        if {self.kind.get(n, S) for n in names} >= {R, C} or kind == T and R in {self.kind.get(n, S) for n in names}:
            raise Refuse2D(o, f"'{o.name}' meets a value of the block's rows and one of its columns without a "
                              "broadcast: not imported")
        if r is not None:
            for x in o.results:
                self.kind[x] = kind
        self.emit(self.retype(line, kind) if kind != S else line, o)

    def reduce(self, o: MOp) -> None:
        """A reduction of the block along its rows' columns (axis 1) where the block holds whole rows (no program
        id indexes column blocks): the row's reduction, a reduction of its [BC] tile to a scalar (rowwhole.py then
        folds it over the row's column tiles). Along axis 0 (one value a column), or of a block of a 2-D grid (a
        partial row), it is refused."""
        names = self.names(o)
        axis = attr_int(o, "axis")
        if len(names) != 1 or len(o.results) != 1 or self.kind.get(names[0], S) != T:
            raise Refuse2D(o, f"'{o.name}' of several tiles or of a vector in a kernel of 2-D blocks: not imported")
        if axis != 1:
            raise Refuse2D(o, f"'{o.name}' along axis {axis} of a [{self.br}, {self.bc}] block (one value a column) "
                              "in a kernel with no loop: a kernel of 2-D blocks is imported as one row a program, "
                              "whose reductions are the row's")
        if C in self.pid_axis.values():
            pid = next(p for p, a in self.pid_axis.items() if a == C)
            raise Refuse2D(o, f"'{o.name}' of a block's columns where the program id %{pid} indexes column blocks: "
                              "the block holds part of the row, its reduction a partial one (a reduction of the row "
                              "is imported where one block holds the whole row)")
        last = end_line(o)
        for k in range(o.head.line, last + 1):
            text = self.src.lines[k - 1]
            if k == o.head.line:
                text = re.sub(r"axis = 1 : i32", "axis = 0 : i32", text, count=1)
            if k == last:
                types = _tensor_types(text)
                if len(types) != 2:
                    raise Refuse2D(o, f"'{o.name}' whose types are not one tile to one vector: not imported")
                (a0, b0, t0), (a1, b1, t1) = types
                text = (text[:a0] + self.type_for(T, _split(t0)[1]) + text[b0:a1] + self.type_for(R, _split(t1)[1])
                        + text[b1:])
            self.out.append(subst(text, self.alias))
            self.where.append((k, None))
        self.kind[o.results[0]] = R

    def _row_bound(self, o: MOp, names: list[str]) -> bool:
        """`row < M`: the row (the program id, as rewritten) against an argument or a constant, splat."""
        rows = {p for p, a in self.pid_axis.items() if a == R}
        if " slt," not in self.line(o) or names[0] not in rows:
            return False
        bound = self.defs.get([n for n, _ in o.operands()][1])
        while bound is not None and bound.name in ("tt.splat", "tt.expand_dims", "tt.broadcast",
                                                   "ttg.convert_layout"):
            src = next(iter(bound.operands()))[0]
            if bound.name == "tt.splat":
                return src in self.kind and src not in self.defs or (
                    self.defs.get(src) is not None and self.defs[src].name == "arith.constant")
            bound = self.defs.get(src)
        return False


def rewrite(module: Module) -> tuple[Module, list[tuple[int, int | None]]] | None:
    """(the module as one row a program of 1-D tiles, each line's place in the original) where it is a loop-free
    kernel of 2-D blocks; None where it has no 2-D tile or a loop. A 2-D construct not taken: an error at its line."""
    if not applies(module):
        return None
    rewrite_ = Block2D(module)
    try:
        out, where = rewrite_.run()
    except Refuse2D as exc:
        raise module.source.error(exc.message, exc.op.head, HINT) from None
    except (AttributeError, IndexError, KeyError, StopIteration, ValueError):
        # the rewrite reads types and attributes as text: a line without what it reads (a dump edited by hand) is
        # refused at the op, not a traceback
        op = rewrite_.current or rewrite_.func
        raise module.source.error(f"'{op.name}': a kernel of 2-D blocks whose op's types or operands are not as "
                                  "Triton prints them: not imported", op.head, HINT) from None
    return parse_module("\n".join(out), module.source.file), where


__all__ = ["applies", "rewrite", "end_line"]
