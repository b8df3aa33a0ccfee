"""One row a program, imported as ROWS rows a CTA (docs/ttgir-import.md, section 8, "One row a program").

The normalization kernels users write most often run one row a program: `row = tl.program_id(0)`,
1-D [BLOCK] tiles `X + row * stride + cols` along the row's columns, a [BLOCK] vector (or 0-d scalar)
carry reduced to the row's value after the loop (`tl.sum(_mean, axis=0) / N`), scalar loads and stores
of the row (`tl.store(Mean + row, mean)`). twill's emitter works in 64-row tiles, so the module is
rewritten, before the import reads it, into the kernel of ROWS rows a program that computes the same:

- the program id that indexes the row becomes the row tile's rows, `pid * ROWS + arange(ROWS)` ([ROWS]);
- a value computed from the row (the row's pointer, a value reduced over the row's columns, a scalar
  carry) becomes a [ROWS] vector, one value a row; a [BLOCK] tile of the row's columns a [ROWS, COLS]
  tile (COLS = min(BLOCK, COLUMNS): 64 rows of a 2048-wide row block would not fit shared memory; the
  loop steps by COLS, its tail mask `cols < N` unchanged); a [BLOCK] value of the columns alone (the
  weight's pointer, `cols`) a [COLS] vector broadcast over the rows where it meets the rows;
- a reduction along axis 0 of a [BLOCK] tile reduces its [ROWS, COLS] tile along axis 1 (each row's own);
- a [BLOCK] vector carry `c` whose loop updates it as `c = c OP t` and whose final value is reduced by the
  same OP after the loop (`tl.sum(_mean, 0)` of `_mean += a`), OP a sum, max or min, becomes a [ROWS]
  carry that the loop updates as `c = c OP reduce_OP(t, axis=1)`, the reduction after the loop being the
  carry itself. The two are equal because OP is associative and commutative: both reduce the same
  multiset of values, the elements of every `t` of the row plus the initial elements, in another order.
  The carry must start at OP's identity (0, -inf, +inf) and be read in the loop by its update alone
  (a carry an online softmax rescales by another carry is not reduced this way: refused at the reduce);
- scalar loads and stores of `P + row` become loads and stores of a [ROWS] vector.

The rewritten text is parsed in place of the original; each of its tokens keeps the line and column of
the op it comes from, so errors point at the kernel's own lines. Refused (an error at the op): the row
used other than as a row index (compared, converted to a float, a loop bound, stored); a carry reduced
after the loop by an op that is not associative and commutative, or updated otherwise.
"""
from __future__ import annotations

import re
from dataclasses import replace

from ..errors import InputError
from .lexer import Source, tokenize
from .parser import Module, MOp, _Parser

ROWS = 64  # the row tile twill's emitter works in (split.MMA_MIN_ROWS)
COLUMNS = 128  # the widest column tile of a rewritten kernel: 64 x 128 f16 is 16 KB a stage
LAYOUT = "#rowprog"
TILE_L = LAYOUT
ROW_L = f"#ttg.slice<{{dim = 1, parent = {LAYOUT}}}>"
COL_L = f"#ttg.slice<{{dim = 0, parent = {LAYOUT}}}>"
ALIAS = (f"{LAYOUT} = #ttg.blocked<{{sizePerThread = [1, 8], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], "
         "order = [1, 0]}>")

# scalar; [ROWS] one value a row; [COLS] the columns alone (indices, pointers); [1, COLS] the columns alone,
# loaded (a weight row: the .tir's rank-1 [M] is one value a row, so a loaded column vector is [1, COLS]);
# [ROWS, COLS]
S, V, C, P, T = 0, 1, 2, 3, 4
# the combiner of a reduction -> (the op, its identity as MLIR prints an f32 constant)
COMBINERS = {"arith.addf": ("sum", "0.000000e+00"), "arith.maxnumf": ("max", "0xFF800000"),
             "arith.maximumf": ("max", "0xFF800000"), "arith.minnumf": ("min", "0x7F800000"),
             "arith.minimumf": ("min", "0x7F800000")}
INDEX_OPS = ("arith.extsi", "arith.muli", "arith.addi", "tt.addptr", "tt.splat")  # what a row index may flow into
_TENSOR = re.compile(r"tensor<(\d+)x([^,>]+(?:<[^>]*>)?), #[A-Za-z0-9_]+>")


def _join(a: int, b: int) -> int:
    return T if V in (a, b) and {a, b} & {C, P} else max(a, b)


class _Refuse(Exception):
    def __init__(self, op: MOp, message: str):
        super().__init__(message)
        self.op, self.message = op, message


def applies(module: Module) -> MOp | None:
    """The function of one row a program: 1-D tensors only, a loop, and `tt.get_program_id x` used as an
    address (its value reaches a `tt.addptr`); None where the module is not such a kernel."""
    funcs = module.functions()
    if len(funcs) != 1:
        return None
    func = funcs[0]
    text = module.source.text
    if re.search(r"tensor<\d+x\d+", text) or "scf.for" not in text or "ttg.local_alloc" in text:
        return None
    if not re.search(r"tensor<\d+x", text):
        return None
    pids = [o for o in func.body() if o.name == "tt.get_program_id" and any(t.is_("x") for t in o.tokens)]
    return func if len(pids) == 1 else None


def rows_per_program(module: Module) -> Module:
    """`module` rewritten to ROWS rows a program where it is a kernel of one row a program; else itself."""
    func = applies(module)
    if func is None:
        return module
    src = module.source
    try:
        lines, where = _Rewrite(src, func).run()
    except _Refuse as exc:
        raise src.error(exc.message, exc.op.head,
                        "docs/ttgir-import.md, section 8 (\"One row a program\") says what is imported") from None
    return _parse(src, lines, where)


def _parse(src: Source, lines: list[str], where: list[tuple[int, int | None]]) -> Module:
    text = "\n".join(lines)
    new = Source(text, src.file)
    toks = []
    for tok in tokenize(new):
        line, col = where[tok.line - 1] if 0 < tok.line <= len(where) else (len(src.lines), None)
        toks.append(replace(tok, line=line, col=tok.col if col is None else col))
    parser = _Parser(src)
    parser.toks = toks
    return parser.parse()


class _Rewrite:
    def __init__(self, src: Source, func: MOp):
        self.src, self.func = src, func
        self.kind: dict[str, int] = {}  # SSA name -> S, V, C, T
        self.elt: dict[str, str] = {}  # SSA name -> its element type (f32, i32, !tt.ptr<bf16>, i1)
        self.index: set[str] = set()  # integer values computed from the row
        self.consts: dict[str, str] = {}  # SSA name of a constant -> its value text
        self.rename: dict[str, str] = {}  # a reduction after the loop -> the carry it is
        self.out: list[str] = []
        self.where: list[tuple[int, int | None]] = []
        self.fresh = 0
        self.carried: dict[str, str] = {}  # a loop result whose reduction after the loop is the carry
        self.updates: dict[int, tuple] = {}  # id of a carry's update op -> (combiner op name, identity)
        self.uses: dict[str, list] = {}
        self.loaded: set[str] = set()  # values computed from a loaded value
        self.reduced: dict[str, tuple] = {}  # a carry that becomes a row's -> (combiner, identity)
        self.loops = 0  # the loops around the op being rewritten
        self.block = None  # the column tile of the kernel as written
        self.cols = None

    # -- text ---------------------------------------------------------------------------------------

    def line_of(self, op: MOp) -> str:
        return self.src.lines[op.head.line - 1]

    def emit(self, text: str, op: MOp | None, same: bool = False) -> None:
        """One output line; its tokens are placed at `op`'s head (or keep their columns: `same`)."""
        self.out.append(text)
        if op is None:
            self.where.append((len(self.out), None))
        else:
            self.where.append((op.head.line, None if same else op.head.col))

    def name(self, base: str) -> str:
        self.fresh += 1
        return f"{base}_rp{self.fresh}"

    def type_of(self, kind: int, elt: str) -> str:
        return {S: elt, V: f"tensor<{ROWS}x{elt}, {ROW_L}>", C: f"tensor<{self.cols}x{elt}, {COL_L}>",
                P: f"tensor<1x{self.cols}x{elt}, {TILE_L}>",
                T: f"tensor<{ROWS}x{self.cols}x{elt}, {TILE_L}>"}[kind]

    def ty(self, name: str) -> str:
        return self.type_of(self.kind[name], self.elt[name])

    def ref(self, name: str) -> str:
        return "%" + self.rename.get(name, name)

    def lift(self, name: str, kind: int, op: MOp, indent: str) -> str:
        """`%name` as a value of `kind` (a broadcast of it), emitting what computes it."""
        name = self.rename.get(name, name)
        have = self.kind[name]
        if have == kind:
            return "%" + name
        elt, loc = self.elt[name], self.loc(op)
        if name in self.consts:
            out = self.name(name)
            self.emit(f"{indent}%{out} = arith.constant dense<{self.consts[name]}> : {self.type_of(kind, elt)}{loc}", op)
            return "%" + out
        if have == S:
            out = self.name(name)
            self.emit(f"{indent}%{out} = tt.splat %{name} : {elt} -> {self.type_of(kind, elt)}{loc}", op)
            return "%" + out
        if (have, kind) not in ((V, T), (C, T), (C, P), (P, T)):
            raise _Refuse(op, f"'{op.name}' combines a value of the row's columns with one of another shape")
        e = name
        if have in (V, C):
            axis, two = (1, f"tensor<{ROWS}x1x{elt}, {TILE_L}>") if have == V else (0, self.type_of(P, elt))
            e = self.name(name)
            self.emit(f"{indent}%{e} = tt.expand_dims %{name} {{axis = {axis} : i32}} : {self.ty(name)} -> {two}{loc}", op)
            if kind == P:
                return "%" + e
        else:
            two = self.type_of(P, elt)
        b = self.name(name)
        self.emit(f"{indent}%{b} = tt.broadcast %{e} : {two} -> {self.type_of(T, elt)}{loc}", op)
        return "%" + b

    def loc(self, op: MOp) -> str:
        line = self.line_of(op)
        m = re.search(r"\sloc\([^()]*(?:\([^()]*\)[^()]*)*\)\s*$", line)
        return m.group(0) if m else ""

    @staticmethod
    def indent(line: str) -> str:
        return line[:len(line) - len(line.lstrip())]

    # -- the walk -----------------------------------------------------------------------------------

    def run(self) -> tuple[list[str], list[tuple[int, int | None]]]:
        blocks = {int(m.group(1)) for m in re.finditer(r"tensor<(\d+)x", self.src.text)}
        rng = [o for o in _walk(self.func.body()) if o.name == "tt.make_range"]
        ends = {_attr_int(o, "end") for o in rng}
        if len(ends) != 1 or None in ends:
            raise _Refuse(rng[0] if rng else self.func, "one row a program with column tiles of several widths")
        self.block = ends.pop()
        self.cols = min(self.block, COLUMNS)
        del blocks
        first, last = self.func.head.line, self._last_line(self.func)
        for i, text in enumerate(self.src.lines[:first], 1):  # aliases and the module's head
            self.emit(text, None)
            self.where[-1] = (i, None)
            if i == 1:  # the row layout, placed with the module's first line
                self.emit(ALIAS, None)
                self.where[-1] = (1, None)
        for o in _walk(self.func.body()):
            for n, _ in o.operands():
                self.uses.setdefault(n, []).append(o)
        for arg, elt in _func_args(self.line_of(self.func)):
            self.kind[arg], self.elt[arg] = S, elt
        self.body(self.func.body())
        for i in range(last, len(self.src.lines) + 1):
            self.emit(self.src.lines[i - 1], None)
            self.where[-1] = (i, None)
        return self.out, self.where

    def _last_line(self, op: MOp) -> int:
        """The line after the function's body (its closing brace's line)."""
        ops = list(_walk(op.body()))
        return max(o.head.line for o in ops) + 1 if ops else op.head.line + 1

    def body(self, ops) -> None:
        for op in ops:
            if op is None:
                continue
            if op.name == "tt.load" or any(self.rename.get(n, n) in self.loaded for n, _ in op.operands()):
                self.loaded.update(op.results)
            if id(op) in self.updates:
                _update(self, op)
                continue
            handler = HANDLERS.get(op.name)
            if handler is None:
                handler = _elementwise if op.name.startswith(("arith.", "math.")) else None
            if handler is None:
                kinds = [self.kind.get(n, S) for n, _ in op.operands()]
                if any(k != S for k in kinds) or op.regions:
                    raise _Refuse(op, f"'{op.name}' in a kernel of one row a program: not imported")
                self.plain(op)
                continue
            handler(self, op)

    def plain(self, op: MOp) -> None:
        """The op as written (scalars only); its results scalars."""
        self.emit(self.line_of(op), op, same=True)
        for r in op.results:
            self.kind[r], self.elt[r] = S, _result_elt(self.line_of(op))

    def define(self, op: MOp, kind: int, elt: str) -> str:
        r = op.results[0]
        self.kind[r], self.elt[r] = kind, elt
        return r

    def check_index(self, op: MOp) -> None:
        """The row (an integer computed from the program id) reaching an op other than address arithmetic."""
        if op.name in INDEX_OPS:
            return
        for n, _ in op.operands():
            if n in self.index:
                raise _Refuse(op, f"'{op.name}' reads the row (the program id, one row a program) as a value, "
                                  "not as the row's address: only address arithmetic of the row is imported")


# -- handlers, one an op family --------------------------------------------------------------------

def _prefix(line: str) -> str:
    """`    %r = op.name` of a line."""
    m = re.match(r"(\s*(?:%[\w.$#:-]+(?:, %[\w.$#:-]+)* = )?\"?[\w.]+\"?)", line)
    return m.group(1)


def _operand_text(rw: _Rewrite, op: MOp, kind: int, indent: str) -> list[str]:
    return [rw.lift(n, kind, op, indent) for n, _ in op.operands()]


def _elementwise(rw: _Rewrite, op: MOp) -> None:
    line = rw.line_of(op)
    if op.name == "arith.constant":
        elt = _result_elt(line)
        r = rw.define(op, C if "tensor<" in line else S, elt)
        m = re.search(r"dense<([^>]*)>", line)
        rw.consts[r] = m.group(1) if m else re.search(r"arith\.constant\s+(\S+)", line).group(1)
        if rw.kind[r] == S:
            rw.emit(line, op, same=True)
        else:  # a splat constant of the columns: emitted where it is read, in the shape it is read in
            rw.emit(f"{_prefix(line)} dense<{rw.consts[r]}> : {rw.type_of(C, elt)}{rw.loc(op)}", op, same=True)
        return
    rw.check_index(op)
    names = [n for n, _ in op.operands()]
    kind = S
    for n in names:
        kind = _join(kind, rw.kind[rw.rename.get(n, n)])
    indent = rw.indent(line)
    args = _operand_text(rw, op, kind, indent)
    elt = _result_elt(line)
    conv = re.search(r":\s*(\S+(?:<[^>]*>)?|tensor<[^>]*>)\s+to\s+", line)
    pred = re.match(r"\s*(?:%\S+ = )?\S+\s+([a-z]+),", line) if op.name in ("arith.cmpi", "arith.cmpf") else None
    head = _prefix(line) + (f" {pred.group(1)}," if pred else "")
    if conv:  # extf, truncf, sitofp, extsi: `: A to B`
        src_elt = _elt(conv.group(1))
        r = rw.define(op, kind, elt)
        rw.emit(f"{head} {', '.join(args)} : {rw.type_of(kind, src_elt)} to {rw.type_of(kind, elt)}{rw.loc(op)}", op,
                same=True)
    elif pred:  # the operands' type
        opnd_elt = _result_elt(line)
        rw.define(op, kind, "i1")
        rw.emit(f"{head} {', '.join(args)} : {rw.type_of(kind, opnd_elt)}{rw.loc(op)}", op, same=True)
    elif op.name == "arith.select":  # `: COND_TYPE, TYPE` (or `: TYPE` of a scalar condition)
        c, a, b = args
        elt = _elt(re.sub(r"\s*loc\(.*\)\s*$", "", line).rsplit(", tensor<", 1)[-1].join(["tensor<", ""])
                   if ", tensor<" in line else elt)
        rw.define(op, kind, elt)
        ctype = rw.type_of(kind, "i1")
        rw.emit(f"{head} {c}, {a}, {b} : {ctype}, {rw.type_of(kind, elt)}{rw.loc(op)}", op, same=True)
    else:
        rw.define(op, kind, elt)
        rw.emit(f"{head} {', '.join(args)} : {rw.type_of(kind, elt)}{rw.loc(op)}", op, same=True)
    if any(n in rw.index for n in names) and op.name in ("arith.extsi", "arith.muli", "arith.addi"):
        rw.index.add(op.results[0])


def _program_id(rw: _Rewrite, op: MOp) -> None:
    line, loc, ind = rw.line_of(op), rw.loc(op), rw.indent(rw.line_of(op))
    if not any(t.is_("x") for t in op.tokens):
        raise _Refuse(op, "a second program id in a kernel of one row a program")
    r = op.results[0]
    pid, step, first, rng, base = (rw.name(r) for _ in range(5))
    rw.emit(f"{ind}%{pid} = tt.get_program_id x : i32{loc}", op)
    rw.emit(f"{ind}%{step} = arith.constant {ROWS} : i32{loc}", op)
    rw.emit(f"{ind}%{first} = arith.muli %{pid}, %{step} : i32{loc}", op)
    rw.emit(f"{ind}%{rng} = tt.make_range {{end = {ROWS} : i32, start = 0 : i32}} : tensor<{ROWS}xi32, {ROW_L}>{loc}", op)
    rw.emit(f"{ind}%{base} = tt.splat %{first} : i32 -> tensor<{ROWS}xi32, {ROW_L}>{loc}", op)
    rw.emit(f"{_prefix(line).replace('tt.get_program_id', 'arith.addi')} %{base}, %{rng} : tensor<{ROWS}xi32, {ROW_L}>{loc}",
            op, same=True)
    rw.define(op, V, "i32")
    rw.index.add(r)


def _make_range(rw: _Rewrite, op: MOp) -> None:
    line = rw.line_of(op)
    rw.define(op, C, "i32")
    rw.emit(f"{_prefix(line)} {{end = {rw.cols} : i32, start = 0 : i32}} : tensor<{rw.cols}xi32, {COL_L}>{rw.loc(op)}",
            op, same=True)


def _splat(rw: _Rewrite, op: MOp) -> None:
    line = rw.line_of(op)
    (n, _), = op.operands()
    n = rw.rename.get(n, n)
    elt = _result_elt(line)
    have = rw.kind[n]
    r = op.results[0]
    kind = T if have == V else C
    if have == S:  # a scalar across the columns: the columns' shape (broadcast to the rows where it meets them)
        rw.define(op, C, elt)
        rw.emit(f"{_prefix(line)} %{n} : {rw.elt[n]} -> {rw.type_of(C, elt)}{rw.loc(op)}", op, same=True)
        return
    if have != V:
        raise _Refuse(op, "'tt.splat' of a tile")
    ind = rw.indent(line)
    e = rw.name(n)
    two = f"tensor<{ROWS}x1x{elt}, {TILE_L}>"
    rw.emit(f"{ind}%{e} = tt.expand_dims %{n} {{axis = 1 : i32}} : {rw.ty(n)} -> {two}{rw.loc(op)}", op)
    rw.define(op, kind, elt)
    rw.emit(f"{_prefix(line).replace('tt.splat', 'tt.broadcast')} %{e} : {two} -> {rw.type_of(T, elt)}{rw.loc(op)}",
            op, same=True)
    if n in rw.index:
        rw.index.add(r)


def _addptr(rw: _Rewrite, op: MOp) -> None:
    line = rw.line_of(op)
    (p, _), (o, _) = op.operands()
    if rw.kind[rw.rename.get(p, p)] != S and rw.rename.get(o, o) in rw.loaded:
        raise _Refuse(op, "'tt.addptr' offsets the row's pointer by a loaded value (a gather through a loaded "
                          "index, as a target's logit): one row a program is imported where its addresses are "
                          "the row's and the columns' alone")
    kind = _join(rw.kind[rw.rename.get(p, p)], rw.kind[rw.rename.get(o, o)])
    ind = rw.indent(line)
    a, b = rw.lift(p, kind, op, ind), rw.lift(o, kind, op, ind)
    pelt, oelt = rw.elt[rw.rename.get(p, p)], rw.elt[rw.rename.get(o, o)]
    rw.define(op, kind, pelt)
    rw.emit(f"{_prefix(line)} {a}, {b} : {rw.type_of(kind, pelt)}, {rw.type_of(kind, oelt)}{rw.loc(op)}", op, same=True)


def _columns_in_a_loop(rw: _Rewrite, op: MOp, kind: int) -> None:
    """A tile of the row's columns is narrowed to COLS columns a step of the loop over them: one outside
    such a loop (a whole [BLOCK] row read once) would lose its other columns."""
    if kind in (C, P, T) and rw.cols != rw.block and not rw.loops:
        raise _Refuse(op, f"'{op.name}' of a [{rw.block}] tile outside the loop over the row's columns: one row "
                          f"a program is imported where its column tiles are the steps of that loop")


def _load(rw: _Rewrite, op: MOp) -> None:
    line = rw.line_of(op)
    rw.check_index(op)
    names = [n for n, _ in op.operands()]
    kind = S
    for n in names:
        kind = _join(kind, rw.kind[rw.rename.get(n, n)])
    kind = P if kind == C else kind  # a row of the columns alone (a weight): [1, COLS]
    _columns_in_a_loop(rw, op, kind)
    ind = rw.indent(line)
    args = [rw.lift(n, kind, op, ind) for n in names]
    ptr = rw.elt[rw.rename.get(names[0], names[0])]
    rw.define(op, kind, ptr[len("!tt.ptr<"):-1])
    attrs = re.search(r"(\{[^}]*\})\s*:", line)
    rw.emit(f"{_prefix(line)} {', '.join(args)}{' ' + attrs.group(1) if attrs else ''} : {rw.type_of(kind, ptr)}"
            f"{rw.loc(op)}", op, same=True)


def _store(rw: _Rewrite, op: MOp) -> None:
    line = rw.line_of(op)
    names = [n for n, _ in op.operands()]
    if names[1] in rw.index:
        raise _Refuse(op, "'tt.store' stores the row (the program id, one row a program): only address "
                          "arithmetic of the row is imported")
    kind = S
    for n in names:
        kind = _join(kind, rw.kind[rw.rename.get(n, n)])
    if kind not in (V, T):
        raise _Refuse(op, "'tt.store' of an address that is not the row's (every program would store the same "
                          "place): not imported in a kernel of one row a program")
    _columns_in_a_loop(rw, op, kind)
    ind = rw.indent(line)
    args = [rw.lift(n, kind, op, ind) for n in names]
    ptr = rw.elt[rw.rename.get(names[0], names[0])]
    rw.emit(f"{ind}tt.store {', '.join(args)} : {rw.type_of(kind, ptr)}{rw.loc(op)}", op, same=True)


def _reduce(rw: _Rewrite, op: MOp) -> None:
    """`tt.reduce` along axis 0 of a [BLOCK] tile: along axis 1 of the [ROWS, COLS] tile; after a loop, of
    a carry that becomes a row carry (_loop), the carry itself."""
    (n, _), = op.operands()
    r = op.results[0]
    if n in rw.carried:  # reduced into the carry each iteration
        rw.rename[r] = rw.carried[n]
        return
    have = rw.kind[rw.rename.get(n, n)]
    lines = rw.src.lines[op.head.line - 1:_end_line(op)]
    if have != T:
        raise _Refuse(op, "'tt.reduce' of the columns alone (no row) in a kernel of one row a program")
    kind = V if have == T else S
    elt = _elt(lines[-1].split("->")[-1])
    rw.define(op, kind, elt)
    first = lines[0].replace("axis = 0", "axis = 1").replace(f"%{n})", f"{rw.ref(n)})")
    rw.emit(first, op, same=True)
    for k, text in enumerate(lines[1:-1], op.head.line + 1):
        rw.out.append(text)
        rw.where.append((k, None))
    last = re.sub(r"\(tensor<[^)]*\) -> \S+(?:<[^>]*>)?", f"({rw.ty(rw.rename.get(n, n))}) -> {rw.type_of(kind, elt)}",
                  lines[-1], count=1)
    rw.out.append(last)
    rw.where.append((_end_line(op), None))


def _end_line(op: MOp) -> int:
    """The last line of a multi-line op (its regions' closing)."""
    inner = [o.head.line for o in _walk([op]) if o is not op]
    return (max(inner) + 1) if inner else op.head.line


def _kinds(rw: _Rewrite, ops, kinds: dict) -> dict:
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
                kind = _join(kind, k)
            kind = P if kind == C else kind
        elif op.name == "scf.for":
            kind = None
            for r in op.results:
                out[r] = rw.kind.get(r, S)
        else:
            kind = S
            for k in have:
                kind = _join(kind, k)
        if kind is not None:
            for r in op.results:
                out[r] = kind
        if id(op) in rw.updates:
            out[op.results[0]] = V
    return out


def _header(line: str):
    """(the `iter_args` pairs (arg, init), the step's SSA name) of an `scf.for` line."""
    m = re.search(r"iter_args\((.*?)\)\s*->", line)
    pairs = re.findall(r"%([\w.$#-]+) = %([\w.$#-]+)", m.group(1)) if m else []
    step = re.search(r"\bstep %([\w.$#-]+)", line).group(1)
    return pairs, step


def _loop(rw: _Rewrite, op: MOp) -> None:
    line, ind, loc = rw.line_of(op), rw.indent(rw.line_of(op)), rw.loc(op)
    body = list(op.body())
    yld = body[-1] if body and body[-1].name == "scf.yield" else None
    if yld is None:
        body.append(None)
    pairs, step = _header(line)
    iv = re.search(r"scf\.for %([\w.$-]+) =", line).group(1)
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
        new = {a: _join(carry[a], kinds.get(y, S)) for a, y in zip(args, yields)}
        if new == carry:
            break
        carry = new
    # the column step
    if rw.consts.get(step) != str(rw.block):
        raise _Refuse(op, f"a loop of one row a program stepping by other than its column tile ({rw.block})")
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
    end = _end_line(op)
    rw.out.append(rw.src.lines[end - 1])
    rw.where.append((end, None))
    for r, a in zip(op.results, args):
        rw.kind[r], rw.elt[r] = carry[a], rw.elt[a]
        if a in rw.reduced:
            rw.carried[r] = r


def _row_carries(rw: _Rewrite, loop: MOp, pairs, yields, body) -> None:
    """Mark the [BLOCK] vector carries reduced after the loop by the op that updates them: each becomes a
    [ROWS] carry reduced into each iteration (`rw.reduced`, `rw.updates`); refuse the near misses."""
    inner: dict[str, list] = {}  # uses inside this loop (Triton's printer reuses names in sibling loops)
    for o in _walk(loop.body()):
        for n, _ in o.operands():
            inner.setdefault(n, []).append(o)
    for k, ((a, init), y) in enumerate(zip(pairs, yields)):
        res = loop.results[k] if k < len(loop.results) else None
        after = [u for u in rw.uses.get(res, []) if u.name == "tt.reduce"]
        if not after or rw.kind.get(rw.rename.get(init, init)) != C:
            continue
        red = after[0]
        combiner = next((o for o in _walk(red.body())), None)
        if combiner is None or combiner.name not in COMBINERS:
            raise _Refuse(red, f"'tt.reduce' after the loop of the carry '%{res}' by '{getattr(combiner, 'name', '?')}': a "
                               "[BLOCK] carry is reduced into a row's carry each iteration only by an associative "
                               "and commutative op (sum, max, min)")
        if len(rw.uses.get(res, [])) != 1:
            raise _Refuse(red, f"'tt.reduce' after the loop of the [BLOCK] carry '%{res}', which is read after the loop "
                               "other than by this reduction (an online softmax's running max, which also rescales its "
                               "sum): a carry is reduced into a row's carry each iteration only where the loop's result "
                               "is read by its reduction alone")
        readers = inner.get(a, [])
        upd = readers[0] if len(readers) == 1 else None
        if upd is None or upd.name != combiner.name or upd.results != (y,) or [u.name for u in inner.get(y, [])] != ["scf.yield"]:
            raise _Refuse(red, f"'tt.reduce' after the loop of the carry '%{res}': the loop reads the carry other than "
                               f"by its update `c = {combiner.name} c, t` (a carry rescaled by another, as an online "
                               "softmax's sum is, is not reduced into a row's carry)")
        ident = COMBINERS[combiner.name][1]
        if rw.consts.get(rw.rename.get(init, init)) != ident:
            raise _Refuse(red, f"'tt.reduce' after the loop of the carry '%{res}', which starts at other than the "
                               f"identity of its reduction ({ident})")
        rw.reduced[a] = (combiner.name, ident)
        rw.updates[id(upd)] = (combiner.name, ident, a)


def _update(rw: _Rewrite, op: MOp) -> None:
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
    rw.emit(f"{_prefix(line)} %{a}, %{red} : {rw.type_of(V, elt)}{loc}", op, same=True)


HANDLERS = {"scf.for": _loop, "tt.get_program_id": _program_id, "tt.make_range": _make_range, "tt.splat": _splat,
            "tt.addptr": _addptr, "tt.load": _load, "tt.store": _store, "tt.reduce": _reduce}


# -- small readers ---------------------------------------------------------------------------------

def _walk(ops):
    for op in ops:
        yield op
        for region in op.regions:
            for block in region:
                yield from _walk(block.ops)


def _attr_int(op: MOp, key: str) -> int | None:
    toks = op.tokens
    for i in range(len(toks) - 2):
        if toks[i].text == key and toks[i + 1].is_("="):
            return int(toks[i + 2].text) if toks[i + 2].text.lstrip("-").isdigit() else None
    return None


def _elt(type_text: str) -> str:
    """The element type of a type's text: `tensor<2048xf32, #blocked>` -> f32; `f32` -> f32."""
    t = type_text.strip()
    m = re.match(r"tensor<(?:\d+x)+(.+?)(?:, #.*)?>$", t)
    return m.group(1) if m else t


def _result_elt(line: str) -> str:
    """The element type of the type after an op's last top-level ':' (its result or operands' type)."""
    body = re.sub(r"\s*loc\(.*\)\s*$", "", line)
    depth, cut = 0, None
    for i, ch in enumerate(body):
        depth += ch in "<({[" and 1 or 0
        depth -= ch in ">)}]" and 1 or 0
        if ch == ":" and depth == 0:
            cut = i
    t = body[cut + 1:] if cut is not None else body
    t = t.split(" to ")[-1].split("->")[-1]
    return _elt(t.split(", #")[0] + (">" if t.strip().startswith("tensor<") else "")) if t.strip().startswith("tensor<") \
        else _elt(t.split(",")[0])


def _func_args(line: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in re.finditer(r"%([\w.$-]+): (!tt\.ptr<\w+>|[a-z]\w*)", line)]
