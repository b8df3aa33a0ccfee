"""One row a program, imported as ROWS rows a CTA (docs/ttgir-import.md, section 8, "One row a program").

The normalization kernels users write most often run one row a program: `row = tl.program_id(0)`,
1-D [BLOCK] tiles `X + row * stride + cols` along the row's columns, a [BLOCK] vector (or 0-d scalar)
carry reduced to the row's value after the loop (`tl.sum(_mean, axis=0) / N`), scalar loads and stores
of the row (`tl.store(Mean + row, mean)`). twill's emitter works in 64-row tiles, so the module is
rewritten, before the import reads it, into the kernel of ROWS rows a program that computes the same (ROWS and
the widest column tile COLUMNS by the dump's target, TILES: 64 x 128 on sm_90, 128 x 64 on sm_100):

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
  The carry must start at OP's identity (0, -inf, +inf) and be read in the loop by its update alone;
- an online softmax's pair of [BLOCK] carries, a running max and the sum it rescales, combined after the
  loop, becomes the row's pair of [ROWS] carries (rowpair.py, which says why it is equal);
- scalar loads and stores of `P + row` become loads and stores of a [ROWS] vector.

The op families are rewritten in rowops.py, the loops and their carries in rowloops.py. The rewritten
text is parsed in place of the original; each of its tokens keeps the line and column of
the op it comes from, so errors point at the kernel's own lines. Refused (an error at the op): the row
used other than as a row index (compared, converted to a float, a loop bound, stored); a carry reduced
after the loop by an op that is not associative and commutative, or updated otherwise.
"""
from __future__ import annotations

import re
from dataclasses import replace

from .lexer import Source, tokenize
from .parser import Module, MOp, _Parser
from .rand import is_draw

ROWS = 64  # the row tile twill's emitter works in (split.MMA_MIN_ROWS)
COLUMNS = 128  # the widest column tile of a rewritten kernel: 64 x 128 f16 is 16 KB a stage
# (rows, widest columns) of the rewritten kernel's tile by the compute capability the dump was compiled for, where not
# (ROWS, COLUMNS). sm_100a holds a register tile a row per thread of a warpgroup (tcgen05.ld's layout,
# emit/fragments.py): a 128-row tile uses every thread, a 64-row one only lanes 0-15 of each warp, all its columns on
# each (twice the registers of its bytes: registers.TILE_ROWS). 64 x 128 f32 tiles are then 128 registers a thread and
# a chain of them spills (the held-out swiglu_bwd: 8472 bytes); 128 x 64 tiles are the same bytes in 64 registers, on
# every lane (swiglu_bwd: none; 64 x 64 tiles still spilled 60 bytes and computed on half the lanes).
TILES = {100: (128, 64)}


def tile_of(text: str) -> tuple[int, int]:
    """(rows, widest columns) of the tile a kernel of one row a program is rewritten to, for its dump's target."""
    from . import target_capability
    return TILES.get(target_capability(text) or 0, (ROWS, COLUMNS))
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
             "arith.minimumf": ("min", "0x7F800000"), "arith.mulf": ("prod", "1.000000e+00")}
ROW_BOUND_OPS = ("arith.remsi", "arith.cmpi")
INDEX_OPS = ("arith.extsi", "arith.muli", "arith.addi", "tt.addptr", "tt.splat")  # what a row index may flow into


def join(a: int, b: int) -> int:
    return T if V in (a, b) and {a, b} & {C, P} else max(a, b)


class Refuse(Exception):
    def __init__(self, op: MOp, message: str):
        super().__init__(message)
        self.op, self.message = op, message


def search(pattern: str, line: str, op: MOp, what: str) -> re.Match:
    """re.search of `pattern` in an op's line, which the rewrites read as text; a line without it (a
    dump edited by hand: `tt.splat %p : 0 -> ...`) is refused at the op, naming what was expected."""
    m = re.search(pattern, line)
    if m is None:
        raise Refuse(op, f"'{op.name}': expected {what} here")
    return m


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
    """`module` rewritten to ROWS rows a program where it is a kernel of one row a program (or a flat map over
    elements, flatmap.py, or a loop-free kernel of 2-D blocks, block2d.py, read as rows first); else itself."""
    from .block2d import rewrite as block_rows
    from .colsum import rewrite as column_sums
    from .flatmap import rewrite as flat_rows
    sums = column_sums(module)
    if sums is not None:  # one column a program of a loop over row blocks summed down the columns (colsum.py)
        return replace(_rows_per_program(sums[0], module.source, sums[1]), transposed=sums[2], grid_bound=sums[3])
    try:
        flat = flat_rows(module)
    except Refuse as exc:
        raise module.source.error(exc.message, exc.op.head,
                                  "docs/ttgir-import.md, section 8 (\"A flat map over elements\") says what is imported") from None
    if flat is None:
        blocks = block_rows(module)
        if blocks is not None:
            return _rows_per_program(blocks[0], module.source, blocks[1])
        return _rows_per_program(module)
    viewed, outer, size = flat
    return replace(_rows_per_program(viewed, module.source, outer), flat=size)


def _through(outer, line: int, col: int | None) -> tuple[int, int | None]:
    """A place in a rewritten text as the place in the text it was rewritten from (`outer`: each line's place)."""
    if outer is None or not 0 < line <= len(outer):
        return line, col
    ol, oc = outer[line - 1]
    return ol, oc if oc is not None else col


def _rows_per_program(module: Module, original: Source | None = None, outer=None) -> Module:
    """rows_per_program of `module`, itself the rewrite of `original`'s text whose lines `outer` places there."""
    src = original or module.source
    from .rowwhole import whole_rows
    try:
        whole = whole_rows(module)
    except Refuse as exc:
        line, col = _through(outer, exc.op.head.line, exc.op.head.col)
        raise src.error(exc.message, replace(exc.op.head, line=line, col=col),
                        "docs/ttgir-import.md, section 8 (\"A row whole in one tile\") says what is imported") from None
    inner = None
    if whole is not None:  # a persistent loop over rows each whole in one tile: column loops (rowwhole.py)
        module, inner = whole
        if outer is not None:
            inner = [_through(outer, line, col) for line, col in inner]
    elif outer is not None:
        inner = outer
    func = applies(module)
    if func is None:
        return module if inner is None else _parse(src, module.source.lines, inner)
    try:
        lines, where = Rewrite(module.source, func).run()
    except Refuse as exc:
        head = exc.op.head
        if inner is not None:
            line, col = inner[head.line - 1]
            head = replace(head, line=line, col=head.col if col is None else col)
        raise src.error(exc.message, head,
                        "docs/ttgir-import.md, section 8 (\"One row a program\") says what is imported") from None
    if inner is not None:
        where = [(inner[line - 1][0], inner[line - 1][1] if inner[line - 1][1] is not None else col)
                 if 0 < line <= len(inner) else (line, col) for line, col in where]
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


class Rewrite:
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
        self.skip: set[int] = set()  # ids of ops after a loop that an online pair's carries make (rowpair.py)
        self.folded: dict[int, str] = {}  # id of a reduction after a loop -> the carry it is (rowpair.py)
        self.result_name: dict[str, str] = {}  # a row carry's arg -> the name of its reduction after the loop
        self.loops = 0  # the loops around the op being rewritten
        self.block = None  # the column tile of the kernel as written
        self.rows, self.widest = tile_of(src.text)  # the rewritten tile's rows and widest columns (TILES)
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
        return f"{base.replace('#', '_')}_rp{self.fresh}"  # `%d#0` of a loop of two results

    def type_of(self, kind: int, elt: str) -> str:
        return {S: elt, V: f"tensor<{self.rows}x{elt}, {ROW_L}>", C: f"tensor<{self.cols}x{elt}, {COL_L}>",
                P: f"tensor<1x{self.cols}x{elt}, {TILE_L}>",
                T: f"tensor<{self.rows}x{self.cols}x{elt}, {TILE_L}>"}[kind]

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
            raise Refuse(op, f"'{op.name}' combines a value of the row's columns with one of another shape")
        e = name
        if have in (V, C):
            axis, two = (1, f"tensor<{self.rows}x1x{elt}, {TILE_L}>") if have == V else (0, self.type_of(P, elt))
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
        rng = [o for o in walk_ops(self.func.body()) if o.name == "tt.make_range"]
        ends = {attr_int(o, "end") for o in rng}
        if len(ends) != 1 or None in ends:
            raise Refuse(rng[0] if rng else self.func, "one row a program with column tiles of several widths")
        self.block = ends.pop()
        self.cols = min(self.block, self.widest)
        del blocks
        first, last = self.func.head.line, self._last_line(self.func)
        for i, text in enumerate(self.src.lines[:first], 1):  # aliases and the module's head
            self.emit(text, None)
            self.where[-1] = (i, None)
            if i == 1:  # the row layout, placed with the module's first line
                self.emit(ALIAS, None)
                self.where[-1] = (1, None)
        for o in walk_ops(self.func.body()):
            for n, _ in o.operands():
                self.uses.setdefault(n, []).append(o)
        for arg, elt in func_args(self.line_of(self.func)):
            self.kind[arg], self.elt[arg] = S, elt
        self.body(self.func.body())
        for i in range(last, len(self.src.lines) + 1):
            self.emit(self.src.lines[i - 1], None)
            self.where[-1] = (i, None)
        return self.out, self.where

    def _last_line(self, op: MOp) -> int:
        """The line after the function's body (its closing brace's line)."""
        ops = list(walk_ops(op.body()))
        return max(o.head.line for o in ops) + 1 if ops else op.head.line + 1

    def body(self, ops) -> None:
        from .rowops import HANDLERS, elementwise
        from .rowloops import update
        for op in ops:
            if op is None or id(op) in self.skip:
                continue
            if op.name == "tt.load" or any(self.rename.get(n, n) in self.loaded for n, _ in op.operands()):
                self.loaded.update(op.results)
            if id(op) in self.updates:
                update(self, op)
                continue
            handler = HANDLERS.get(op.name)
            if handler is None:
                handler = elementwise if op.name.startswith(("arith.", "math.")) or op.name == "tt.clampf" or is_draw(op) \
                    else None
            if handler is None:
                kinds = [self.kind.get(n, S) for n, _ in op.operands()]
                if any(k != S for k in kinds) or op.regions:
                    raise Refuse(op, f"'{op.name}' in a kernel of one row a program: not imported")
                self.plain(op)
                continue
            handler(self, op)

    def plain(self, op: MOp) -> None:
        """The op as written (scalars only); its results scalars."""
        self.emit(self.line_of(op), op, same=True)
        for r in op.results:
            self.kind[r], self.elt[r] = S, result_elt(self.line_of(op))

    def define(self, op: MOp, kind: int, elt: str) -> str:
        r = op.results[0]
        self.kind[r], self.elt[r] = kind, elt
        return r

    def check_index(self, op: MOp) -> None:
        """The row (an integer computed from the program id) reaching an op other than address arithmetic."""
        if op.name in INDEX_OPS or is_draw(op):  # (a draw's counter: the element's index, rand.py)
            return
        if op.name in ROW_BOUND_OPS:  # PROBE
            return
        for n, _ in op.operands():
            if n in self.index:
                raise Refuse(op, f"'{op.name}' reads the row (the program id, one row a program) as a value, "
                                  "not as the row's address: only address arithmetic of the row is imported")


# -- small readers ---------------------------------------------------------------------------------

def walk_ops(ops):
    for op in ops:
        yield op
        for region in op.regions:
            for block in region:
                yield from walk_ops(block.ops)


def attr_int(op: MOp, key: str) -> int | None:
    toks = op.tokens
    for i in range(len(toks) - 2):
        if toks[i].text == key and toks[i + 1].is_("="):
            return int(toks[i + 2].text) if toks[i + 2].text.lstrip("-").isdigit() else None
    return None


def elt_of(type_text: str) -> str:
    """The element type of a type's text: `tensor<2048xf32, #blocked>` -> f32; `f32` -> f32."""
    t = type_text.strip()
    m = re.match(r"tensor<(?:\d+x)+(.+?)(?:, #.*)?>$", t)
    return m.group(1) if m else t


def after_last_colon(line: str) -> str | None:
    """The text after a line's last ':' outside brackets, its trailing loc(...) dropped (the type an op
    prints there); None where it has none."""
    body = re.sub(r"\s*loc\(.*\)\s*$", "", line)
    depth, cut = 0, None
    for i, ch in enumerate(body):
        depth += ch in "<({[" and 1 or 0
        depth -= ch in ">)}]" and 1 or 0
        if ch == ":" and depth == 0:
            cut = i
    return body[cut + 1:] if cut is not None else None


def result_elt(line: str) -> str:
    """The element type of the type after an op's last top-level ':' (its result or operands' type)."""
    t = after_last_colon(line)
    t = re.sub(r"\s*loc\(.*\)\s*$", "", line) if t is None else t
    t = t.split(" to ")[-1].split("->")[-1]
    return elt_of(t.split(", #")[0] + (">" if t.strip().startswith("tensor<") else "")) if t.strip().startswith("tensor<") \
        else elt_of(t.split(",")[0])


def func_args(line: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in re.finditer(r"%([\w.$-]+): (!tt\.ptr<\w+>|[a-z]\w*)", line)]

def prefix(line: str) -> str:
    """`    %r = op.name` of a line."""
    m = re.match(r"(\s*(?:%[\w.$#:-]+(?:, %[\w.$#:-]+)* = )?\"?[\w.]+\"?)", line)
    return m.group(1)


def end_line(op: MOp) -> int:
    """The last line of a multi-line op (its regions' closing)."""
    inner = [o.head.line for o in walk_ops([op]) if o is not op]
    return (max(inner) + 1) if inner else op.head.line
