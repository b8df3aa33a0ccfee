"""A persistent loop over rows, each row whole in one tile, as column loops of one row a program
(docs/ttgir-import.md, section 8, "A row whole in one tile").

The Triton tutorial's fused softmax runs `for row in tl.range(pid, n_rows, num_programs)` and holds each
row in one [BLOCK] tile, BLOCK = next_power_of_2(n_cols), masked `cols < n_cols`: a few reductions of the
row (its max, its sum of exponentials) and elementwise ops between them, then a store. twill's kernels are
loops over column tiles of 64 rows, so the kernel is rewritten, as text, into the kernel of one row a
program that computes the same, and rowprog.py goes on with that (64 rows a CTA, 128-column tiles):

- the persistent loop is the grid's: its induction variable becomes the program id (one row a program;
  the grid launches a program per row, 64 rows a CTA after rowprog.py) and the number of programs is dropped;
- every tensor op of the row (a value of the row's columns, a splat, a load, a store) runs in a loop over
  the row's columns `for off in range(0, n_cols, BLOCK)`, its column indices `off + arange(BLOCK)` and its
  mask `cols < n_cols` unchanged: the loop's partial last tile, the bound of the mask the loop's extent;
- a reduction of the row to a scalar (axis 0, a sum, max or min) is a scalar carry of such a loop, `acc =
  OP(acc, reduce(t))` from OP's identity: the reduction of the whole row is the fold of the reductions of
  its column tiles, OP being associative and commutative (the same multiset of elements in another order;
  -inf, the masked elements' fill, is the max's identity and exp(-inf) = 0 the sum's);
- the ops are placed in passes by the reductions they wait for: pass k computes the reductions whose row
  values need the results of k earlier reductions (the softmax: its max in pass 0, its sum of exp(x - max)
  in pass 1, the store of exp(x - max) / sum in pass 2), recomputing in each pass the row values it reads
  from the loads (the row is read again from memory, once a pass); scalar ops run between the passes.

A kernel with no loop at all (Liger's RMSNorm, LayerNorm, SwiGLU; the older tutorial softmax: `row =
tl.program_id(0)`, the row whole in one masked tile) takes the same path (`row_whole`): its function's ops in place of
the row loop's body, the program id already the row. A mask `cols < n` of a constant n (`n_cols: tl.constexpr`) is
true at every step of a column loop that runs to n in whole tiles, and is dropped from the loads and stores.

The rewrite equals the kernel where the row fits its tile (n_cols <= BLOCK, as every launch of the
tutorial's has it: BLOCK = next_power_of_2(n_cols)); with n_cols > BLOCK Triton's kernel reads the first
BLOCK columns alone, the rewritten one the whole row.

Refused (an error at the op): a loop over the rows with carries, ops after it, a reduction that is not a
sum, max or min of f32 to a scalar, column tiles of several widths or masks of several bounds.
"""
from __future__ import annotations

import re

from . import argreduce
from .lexer import Source
from .parser import Module, MOp, parse_module
from .rand import is_draw
from .rowprog import (COMBINERS, Refuse, after_last_colon, attr_int, elt_of, end_line, func_args, search,
                      tile_of, walk_ops)

SSA = re.compile(r"%([\w.$-]+(?:#\d+)?)")
# the combiners of a scan of the row that import: tl.cumsum, tl.cumprod, a running max or min (tl.associative_scan
# of tl.maximum / tl.minimum as written by default; maximumf / minimumf propagate NaN, which no scan op does)
SCANS = ("arith.addf", "arith.mulf", "arith.maxnumf", "arith.minnumf")


def _what_bounds(n, defs) -> str:
    """What a column mask's bound other than an argument or a constant reads, for its error: the program's row (a
    causal mask of scores laid out one query a row, `cols <= row % seq_len`) or a value loaded from memory."""
    seen, todo = set(), [n]
    reads = set()
    while todo:
        name = todo.pop()
        d = defs.get(name) if isinstance(name, str) else None
        if d is None or name in seen:
            continue
        seen.add(name)
        if d.name in ("tt.get_program_id", "tt.load"):
            reads.add(d.name)
        todo.extend(m for m, _ in d.operands())
    if "tt.get_program_id" in reads:
        return (": its bound is computed from the program's row (a causal mask of scores laid out one query a row, "
                "`cols <= row % seq_len`), where the column loop runs to one extent for every row")
    if "tt.load" in reads:
        return ": its bound is loaded from memory (a length a row), where the column loop runs to one extent for every row"
    return ""


def _of_the_row(n, defs) -> bool:
    """Whether the scalar `n` is computed from the program's row and the kernel's scalar arguments alone (no value
    loaded from memory): one value a row, which the rewrite to 64 rows a program (rowprog.py) makes the row tile's
    vector, a bound of the row's columns that each row has its own of."""
    seen, todo, row = set(), [n], False
    while todo:
        name = todo.pop()
        d = defs.get(name) if isinstance(name, str) else None
        if d is None or name in seen:
            continue
        seen.add(name)
        if d.name == "tt.load" or d.name == "tt.make_range":
            return False
        row |= d.name == "tt.get_program_id"
        todo.extend(m for m, _ in d.operands())
    return row


def persistent_rows(module: Module) -> tuple[MOp, int] | None:
    """(the loop, the row's tile) of a kernel of 1-D tiles whose one top-level loop runs over rows from the
    program id by the number of programs (the Triton tutorial's fused softmax)."""
    funcs = module.functions()
    text = module.source.text
    if len(funcs) != 1 or re.search(r"tensor<\d+x\d+x", text):
        return None
    ops = list(walk_ops(funcs[0].body()))
    loops = [o for o in ops if o.name == "scf.for"]
    if len(loops) != 1:
        return None
    defs = {r: o.name for o in ops for r in o.results}
    m = re.search(r"scf\.for %[\w.$-]+ = %([\w.$-]+) to %[\w.$-]+ step %([\w.$-]+)",
                  module.source.lines[loops[0].head.line - 1])
    if m is None or defs.get(m.group(1)) != "tt.get_program_id" or defs.get(m.group(2)) != "tt.get_num_programs":
        return None
    block = re.search(r"tensor<(\d+)x", text)
    return loops[0], int(block.group(1)) if block else 0


# ops a loop-free kernel of one row a program may not hold: what each is, for the refusal
UNHANDLED = {"tt.atomic_rmw": "an atomic read-modify-write", "tt.atomic_cas": "an atomic compare-and-swap",
             "tt.gather": "a gather", "tt.histogram": "a histogram", "tt.dot": "a dot",
             "tt.descriptor_load": "a descriptor (TMA) load", "tt.descriptor_store": "a descriptor (TMA) store",
             "tt.trans": "a transpose", "tt.reshape": "a reshape", "tt.join": "a join", "tt.split": "a split",
             "tt.cat": "a concatenation", "scf.if": "a branch (scf.if)", "scf.while": "a while loop"}


def loop_free_row(module: Module) -> int | None:
    """The row's tile of a kernel of one row a program with no loop (Liger's RMSNorm, the older tutorial softmax,
    a SwiGLU): one function, 1-D tiles, `tt.get_program_id x` reaching addresses as the row's. None where the
    module has a loop or no tile (the import goes on as before: a loop, or "no scf.for loop"); Refuse, at the op,
    where it is a loop-free kernel of tiles this rewrite does not take (a 2-D tile, an atomic, a program id that
    indexes elements)."""
    funcs = module.functions()
    src = module.source
    if len(funcs) != 1:
        return None
    blocks = funcs[0].regions[0] if funcs[0].regions else ()
    if "scf.for" in src.text or len(blocks) > 1:  # a loop (in any block: an early return's are checked later)
        return None
    ops = list(walk_ops(funcs[0].body()))
    tiles = [o for o in ops if "tensor<" in src.lines[o.head.line - 1]]
    if not tiles:
        return None
    for o in ops:
        if o.name in UNHANDLED:
            raise Refuse(o, f"'{o.name}' ({UNHANDLED[o.name]}) in a kernel with no loop: a kernel of no loop is "
                            "imported where it is one row a program, the row whole in one 1-D tile, its ops "
                            "elementwise, reductions of the row, loads and stores")
    flat2d = [o for o in ops if re.search(r"tensor<\d+x\d+x", src.lines[o.head.line - 1])]
    if flat2d:  # named at the first 2-D tile read from memory (a block of a 2-D grid, RoPE's heads x half dims)
        o = next((x for x in flat2d if x.name == "tt.load"), flat2d[0])
        shape = re.search(r"tensor<(\d+)x(\d+)x", src.lines[o.head.line - 1]).groups()
        grid = sorted({t.text for p in ops if p.name == "tt.get_program_id" for t in p.tokens if t.text in "xyz"})
        raise Refuse(o, f"'{o.name}' of a 2-D [{shape[0]}, {shape[1]}] tile in a kernel with no loop"
                        + (f" and a 2-D grid (program ids {', '.join(grid)})" if len(grid) > 1 else "")
                        + ": a kernel of no loop is imported where it is one row a program, the row whole in one "
                          "1-D tile (or a flat map over elements); a block of 2-D tiles a program is not rewritten "
                          "into a loop over column tiles")
    pids = [o for o in ops if o.name == "tt.get_program_id"]
    if len(pids) != 1 or not any(t.is_("x") for t in pids[0].tokens):
        raise Refuse(pids[1] if len(pids) > 1 else tiles[0],
                     "a kernel with no loop is imported where it is one row a program: one `tt.get_program_id x`, "
                     "the row" + ("" if pids else " (this one reads no program id)"))
    _rows_not_elements(src, ops, pids[0])
    return int(search(r"tensor<(\d+)x", src.lines[tiles[0].head.line - 1], tiles[0], "a tensor<Nx...> type").group(1))


def _rows_not_elements(src: Source, ops: list[MOp], pid: MOp) -> None:
    """The program id is the row where it reaches only scalar address arithmetic (`X + row * stride`); a tile of
    integers computed from it (`pid * BLOCK + arange(BLOCK)`: the tutorial's vector add) indexes elements."""
    row = set(pid.results)
    counters = draw_counters(ops)
    for o in ops:
        if not any(n in row for n, _ in o.operands()):
            continue
        line = src.lines[o.head.line - 1]
        if id(o) in counters:  # a draw's counter, the element's index (`row * C + cols`: the flat map's, rand.py)
            continue
        if "tensor<" in line and "!tt.ptr" not in line.rsplit(":", 1)[-1].split("->")[-1]:
            raise Refuse(o, f"'{o.name}' makes a tile of indices from the program id (`pid * BLOCK + arange(BLOCK)`): "
                            "the program id indexes elements, not a row. A kernel with no loop is imported where it "
                            "is one row a program (`X + row * stride + arange(BLOCK)`, a row reduction or an "
                            "elementwise map of the row); a 1-D map over elements (a vector add) is not a row's "
                            "tile loop: not imported")
        if o.name in ("arith.extsi", "arith.extui", "arith.muli", "arith.addi", "arith.trunci", "arith.index_cast"):
            row.update(o.results)


COUNTER_OPS = ("tt.splat", "tt.broadcast", "tt.expand_dims", "ttg.convert_layout", "arith.addi", "arith.muli",
               "arith.extsi", "arith.extui")


def draw_counters(ops: list[MOp]) -> set[int]:
    """The ops (by id) that compute a draw's offsets (rand.py: the element's index, `row * C + cols`) and whose
    results nothing else reads: integer index arithmetic of the row that the rewrites carry to the draw."""
    defs = {r: o for o in ops for r in o.results}
    users: dict[str, list[MOp]] = {}
    for o in ops:
        for n, _ in o.operands():
            users.setdefault(n, []).append(o)
    chain: set[int] = set()
    todo = [names[1] for o in ops if is_draw(o) and len(names := [n for n, _ in o.operands()]) == 2]
    while todo:
        d = defs.get(todo.pop())
        if d is None or id(d) in chain or d.name not in COUNTER_OPS:
            continue
        chain.add(id(d))
        todo += [n for n, _ in d.operands()]
    ok = {id(o) for o in ops if id(o) in chain and all(
        is_draw(u) or id(u) in chain for r in o.results for u in users.get(r, []))}
    return ok


def row_whole(module: Module) -> tuple[MOp | None, int] | None:
    """(the persistent loop over the rows or None where the kernel has no loop, the row's tile) of a kernel of one
    row a program whose row is whole in one tile; None where it is not one."""
    found = persistent_rows(module)
    if found is not None:
        return found
    block = loop_free_row(module)
    return None if block is None else (None, block)


def subst(line: str, names: dict) -> str:
    return SSA.sub(lambda m: "%" + names.get(m.group(1), m.group(1)), line) if names else line


def _result_type(src: Source, op: MOp) -> str:
    """The text of an op's result type (after its last top-level ':' or '->'), '' for none."""
    line = re.sub(r"\s*loc\(.*\)\s*$", "", src.lines[end_line(op) - 1])
    if "->" in line:
        return line.rsplit("->", 1)[1].strip()
    after = after_last_colon(line)
    return after.strip() if after is not None and op.results else ""


class Whole:
    """The text of one row a program with column loops (module doc); `where` maps each line to the original's
    (line, column or None: the line keeps the original's columns)."""

    def __init__(self, module: Module, loop: MOp, block: int):
        self.src, self.loop, self.block = module.source, loop, block
        self.func = module.functions()[0]
        self.at = loop if loop is not None else self.func  # where the lines the rewrite adds are placed
        self.out: list[str] = []
        self.where: list[tuple[int, int | None]] = []
        self.names: dict[str, str] = {}
        self.fresh = 0
        self.taken = set(SSA.findall(self.src.text))
        self.true_masks: set[str] = set()  # masks `cols < n` of a constant n the column loop runs to in whole tiles

    def emit(self, text: str, op: MOp | None, same: bool = False) -> None:
        self.out.append(subst(text, self.names))
        self.where.append((op.head.line, None if same else op.head.col) if op is not None else (len(self.out), None))

    def copy(self, op: MOp) -> None:
        for k in range(op.head.line, end_line(op) + 1):
            self.out.append(subst(self.src.lines[k - 1], self.names))
            self.where.append((k, None))

    def name(self, base: str) -> str:
        """A fresh SSA name: `base` where the kernel does not use it, else `base_rwN`."""
        if base in self.taken:
            self.fresh += 1
            base = f"{base}_rw{self.fresh}"
        self.taken.add(base)
        return base

    def run(self) -> tuple[list[str], list[tuple[int, int | None]]]:
        src, loop = self.src, self.loop
        top = list(self.func.body())
        if loop is None:  # no loop: the program's row is the row (the older tutorial softmax, Liger's kernels)
            pre, body = [], [o for o in top if o.name != "tt.return"]
        else:
            pre, body = self._persistent(top)
        tensor = {id(o): "tensor<" in _result_type(src, o) or o.name == "tt.store" and self._tensor_store(o)
                  for o in pre + body}
        defs = {r: o for o in pre + body for r in o.results}
        # the column loop's bound: the one scalar n of the masks `arange < splat(n)`
        ranges = [o for o in pre + body if o.name == "tt.make_range"]
        if not ranges or any(attr_int(o, "start") != 0 or attr_int(o, "end") != self.block for o in ranges):
            raise Refuse(ranges[0] if ranges else self.at, f"a row held in one tile of column indices other than "
                                                        f"arange(0, {self.block})")
        bound = self._bound(pre + body, ranges, defs)
        # levels: how many reductions a value waits for; each reduction's pass, each store's
        level: dict[str, int] = {}
        passes: list[tuple[MOp, int]] = []
        reductions: dict[int, tuple] = {}
        scans: dict[int, tuple] = {}  # a scan of the row -> (its combiner op, identity, element type)
        self.scans = scans
        for o in pre + body:
            if o.name == "tt.scan":
                scans[id(o)] = self._scan(o)
            base = max((level.get(n, 0) for n, _ in o.operands()), default=0)
            if o.name == "tt.reduce" and any(tensor.get(id(defs.get(n)), False) for n, _ in o.operands()):
                reductions[id(o)] = self._reduction(o)
                passes.append((o, base))
                for r in o.results:
                    level[r] = base + 1
                continue
            if o.name == "tt.store" and tensor[id(o)]:
                passes.append((o, base))
            for r in o.results:
                level[r] = base
        if not passes:
            raise Refuse(self.at, f"'{self.at.name}' of one row a program with no reduction or store of the row's tile")
        count = 1 + max(p for _, p in passes)
        passes = self._in_place_last(passes, pre + body, tensor, defs, count)
        scalars = [o for o in pre + body if not tensor[id(o)] and o.name != "tt.get_num_programs"]
        constants = [o for o in pre + body if o.name == "arith.constant" and tensor[id(o)]]
        for o in pre + body:
            if o.name == "tt.get_num_programs" and any(n == o.results[0] for u in pre + body for n, _ in u.operands()):
                raise Refuse(o, "the number of programs read other than as the persistent loop's step")
        # the text: the module's head, the function's line, then scalars by level and a loop a pass
        first = self.func.head.line
        for i in range(1, first + 1):
            self.out.append(src.lines[i - 1])
            self.where.append((i, None))
        lo, st = self.name("c0"), self.name("cols_step")
        for o in constants:
            self.copy(o)
        emitted: set[int] = set()
        for p in range(count + 1):
            for o in scalars:
                if id(o) in emitted or (level.get(o.results[0], 0) if o.results else
                                        max((level.get(n, 0) for n, _ in o.operands()), default=0)) != p:
                    continue
                if o.name == "tt.reduce":
                    continue
                emitted.add(id(o))
                self.copy(o)
            if p == 0:
                self.emit(f"    %{lo} = arith.constant 0 : i32", self.at)
                self.emit(f"    %{st} = arith.constant {self.block} : i32", self.at)
            if p < count:
                self._pass(p, [o for o, q in passes if q == p], pre + body, tensor, defs, reductions, lo, st, bound)
        self.emit("    tt.return", self.at)
        last = max(o.head.line for o in walk_ops(self.func.body())) + 1
        for i in range(last, len(src.lines) + 1):
            self.out.append(src.lines[i - 1])
            self.where.append((i, None))
        return self.out, self.where

    def _persistent(self, top: list[MOp]) -> tuple[list[MOp], list[MOp]]:
        """(the ops before the persistent loop, its body): its induction variable read as the program's row."""
        loop = self.loop
        line = self.src.lines[loop.head.line - 1]
        m = re.search(r"scf\.for %([\w.$-]+) = %([\w.$-]+) to %([\w.$-]+) step %([\w.$-]+)", line)
        iv, pid = m.group(1), m.group(2)
        if "iter_args" in line or loop.results:
            raise Refuse(loop, "'scf.for' over the rows (a persistent loop: the grid's loop) carries values from row to "
                               "row: its rows are not independent programs")
        k = top.index(loop)
        pre, post = top[:k], [o for o in top[k + 1:] if o.name != "tt.return"]
        if post:
            raise Refuse(post[0], f"'{post[0].name}' after the persistent loop over the rows: not imported")
        self.names[iv] = pid  # the row: the program's own (one row a program)
        return pre, [o for o in loop.body() if o.name != "scf.yield"]

    def _in_place_last(self, passes, ops, tensor, defs, count) -> list[tuple[MOp, int]]:
        """Each pass reads the row from memory again, so a store into a tensor the kernel also loads (vLLM's fused
        residual add: `h = x + residual` stored over the residual) must come after every pass that loads it: it is
        placed in the last pass (which recomputes what it stores from the loads, as every pass does), where the
        one-pass kernel's loads, all before the store, still read the old values. A load of that tensor after the
        store (the kernel reading back what it wrote) is refused: the passes would read it before the store."""
        loads = [o for o in ops if o.name == "tt.load" and tensor[id(o)]]
        out = []
        for op, p in passes:
            if op.name == "tt.store":
                root = self._root(op, defs)
                same = [ld for ld in loads if self._root(ld, defs) == root]
                later = [ld for ld in same if ld.head.line > op.head.line]
                if later:
                    raise Refuse(later[0], f"'tt.load' of %{root} after a 'tt.store' into it (line {op.head.line}): "
                                           "a row whole in one tile is imported as column loops that each read the "
                                           "row from memory again, and a row that reads back what it stored is "
                                           "not rewritten so")
                if same:
                    p = count - 1
            out.append((op, p))
        return out

    @staticmethod
    def _root(op: MOp, defs) -> str:
        """The kernel argument a load's or store's address tile is computed from (`%X + row * stride + cols`)."""
        name = next(iter(op.operands()))[0]
        while (d := defs.get(name)) is not None and d.name in ("tt.addptr", "tt.splat", "tt.broadcast",
                                                              "tt.expand_dims", "ttg.convert_layout"):
            name = next(iter(d.operands()))[0]
        return name

    def _tensor_store(self, op: MOp) -> bool:
        return "tensor<" in self.src.lines[op.head.line - 1].rsplit(":", 1)[-1]

    def _bound(self, ops, ranges, defs) -> str | int:
        """The scalar argument n of the masks `arange < splat(n)` (one for all), or n where the masks compare with a
        constant (`n_cols: tl.constexpr`, Liger's SwiGLU: `dense<n>`), or the block where there is no mask."""
        rng = {r for o in ranges for r in o.results}
        found = set()
        args = {a for a, _ in func_args(self.src.lines[self.func.head.line - 1])}
        for o in ops:
            names = [n for n, _ in o.operands()]
            if o.name == "arith.cmpi" and names and names[0] in rng:
                sp = defs.get(names[1])
                n = next(iter(sp.operands()))[0] if sp is not None and sp.name == "tt.splat" else None
                if sp is not None and sp.name == "arith.constant":
                    dense = re.search(r"dense<(\d+)>", self.src.lines[sp.head.line - 1])
                    n = int(dense.group(1)) if dense else None
                if n not in args and not isinstance(n, int) and _of_the_row(n, defs):
                    continue  # a per-row bound (`cols <= row % seq_len`): a mask of its own, not the loop's extent
                if (n not in args and not isinstance(n, int)) or " slt," not in self.src.lines[o.head.line - 1]:
                    raise Refuse(o, "a mask of the row's columns other than `cols < n_cols` (n_cols an argument "
                                    "or a constant)" + _what_bounds(n, defs))
                found.add(n)
                if isinstance(n, int):
                    self.true_masks.add(o.results[0])
        if len(found) > 1:
            raise Refuse(ranges[0], f"masks of the row's columns by several bounds ({', '.join(map(str, found))})")
        bound = found.pop() if found else self.block
        tile = min(self.block, tile_of(self.src.text)[1])
        if isinstance(bound, int) and bound % tile:
            raise Refuse(next(o for o in ops if o.results and o.results[0] in self.true_masks),
                         f"a mask of the row's columns by the constant {bound}, not a multiple of the column tile "
                         f"({tile}): pass n_cols at launch (not constexpr), or a multiple of it")
        return bound

    def _unmasked(self, op: MOp) -> list[str] | None:
        """A load's or store's line without its mask where the mask is `cols < n` of a constant n that the column loop
        runs to in whole tiles (true everywhere in the loop: Liger's `n_cols: tl.constexpr`); None where it reads none.
        Any other reader of such a mask is refused."""
        if not self.true_masks or not any(n in self.true_masks for n, _ in op.operands()):
            return None
        keep = {"tt.load": 1, "tt.store": 2}.get(op.name)
        if keep is None or end_line(op) != op.head.line:
            raise Refuse(op, f"'{op.name}' reads the mask of the row's columns by a constant (`cols < n_cols`, n_cols a "
                             "constexpr): a load's or store's mask alone is imported")
        line = self.src.lines[op.head.line - 1]
        names = [n for n, _ in op.operands()]
        if any(n in self.true_masks for n in names[:keep]):
            raise Refuse(op, f"'{op.name}' reads the mask of the row's columns as a value")
        head, _, rest = line.partition(" : ")
        cut = head.index("%" + names[keep - 1] + ",", head.index(op.name)) + len(names[keep - 1]) + 1
        return [head[:cut] + " : " + rest]

    def _reduction(self, op: MOp) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        """(the combiner, the identity and element type of each value it carries) of a reduction of the row to
        scalars: a sum, product (session 42), max or min of f32 (the combiner its arith op), or tl.argmax / tl.argmin, a value and its
        index (the combiner "argmax" / "argmin": argreduce.py), folded across the column tiles by the kernel's own
        combiner from a pair it always gives up."""
        comb = next(iter(walk_ops(op.body())), None)
        elt = _result_type(self.src, op)
        if len(op.results) == 2 and (kind := argreduce.kind(op)) is not None:
            elts = tuple(e.strip() for e in elt.strip("()").split(","))
            if attr_int(op, "axis") != 0 or elts[0] != "f32" or elts[1] != "i32":
                raise Refuse(op, f"'tt.reduce' of the row held in one tile: tl.arg{kind} of f32 values and i32 "
                                 f"indices along the row is imported, not of ({', '.join(elts)})")
            return f"arg{kind}", (argreduce.IDENTITY[kind], str(argreduce.INDEX_IDENTITY)), elts
        if len(op.results) != 1:
            raise Refuse(op, f"'tt.reduce' of {len(op.results)} values at once of the row held in one tile: a sum, "
                             "product, max or min of f32 to one value, or tl.argmax / tl.argmin (a value and its index, ties to the "
                             "smaller index) is imported")
        if attr_int(op, "axis") != 0 or comb is None or comb.name not in COMBINERS or elt != "f32":
            raise Refuse(op, "'tt.reduce' of the row held in one tile: a sum, product, max or min of f32 to one value "
                             "is imported (split into a loop over the row's column tiles)")
        return comb.name, (COMBINERS[comb.name][1],), (elt,)

    def _fold_pair(self, o: MOp, accs: list[str]) -> list[str]:
        """tl.argmax / tl.argmin of the row in a column loop: the tile's own reduction (`o` as written, its results
        renamed), then the kernel's combiner of the carried pair (left: the earlier columns, smaller indices) and
        the tile's, written out on scalars; returns the carries' updates."""
        base = re.sub(r"_\d+$", "", o.results[0].split("#")[0])
        part = self.name(f"{base}_tile")
        whole = o.results[0].split("#")[0]
        renamed = {whole: part, **{r: f"{part}#{k}" for k, r in enumerate(o.results)}}
        self.names.update(renamed)
        self.copy(o)
        for r in renamed:
            self.names.pop(r)
        block = o.regions[0][0]
        local = dict(zip([n for n, _ in block.args], accs + [f"{part}#0", f"{part}#1"]))
        for b in block.ops[:-1]:
            local.update({r: self.name(f"{base}_{re.sub(r'_[0-9]+$', '', r)}") for r in b.results})
            self.out.append(subst(self.src.lines[b.head.line - 1], local))
            self.where.append((b.head.line, None))
        return [local[n] for n, _ in block.ops[-1].operands()]

    def _scan(self, op: MOp) -> tuple[str, str, str]:
        """(the combiner op, its identity, the element type) of a forward scan of the row along its columns by one of
        SCANS over f32 (tl.cumsum, tl.cumprod, a running max or min): each column tile's scan combined with the carry
        of the tiles before it (`_pass`)."""
        comb = [o for o in walk_ops(op.body()) if o.name != "tt.scan.return"]
        elt = elt_of(_result_type(self.src, op))
        head = self.src.lines[op.head.line - 1]
        what = ("a reverse scan (tl.cumsum(..., reverse=True)), whose carry would come from the tiles after it (a "
                "column loop that walks the row's tiles from its end is not built: docs/ttgir-import.md, section 9)"
                if re.search(r"reverse\s*=\s*true", head) else
                f"a scan of {len(op.results)} values at once" if len(op.results) != 1 else
                f"a scan by '{comb[0].name}'" if len(comb) == 1 and comb[0].name not in SCANS else
                "a scan whose combiner is more than one op" if len(comb) != 1 else
                f"a scan of {elt}" if elt != "f32" else
                "a scan along other than the row" if attr_int(op, "axis") != 0 else "")
        if what:
            raise Refuse(op, f"'tt.scan' of the row held in one tile: {what}. A forward sum, product, max or min of "
                             "f32 (tl.cumsum, tl.cumprod, tl.associative_scan of tl.maximum / tl.minimum) is "
                             "imported, split into a loop over the row's column tiles, each tile's scan combined with "
                             "the running total (product, max, min) of the tiles before it")
        return comb[0].name, COMBINERS[comb[0].name][1], elt

    def _scan_tile(self, o: MOp, carry: str) -> str:
        """A scan of the row in a column loop: the tile's own scan (`o` as written, its result renamed), plus the
        carry splat over the tile; returns the carry's update, the carry combined with the tile's total."""
        comb, _, elt = self.scans[id(o)]
        base = re.sub(r"_\d+$", "", o.results[0])  # Triton's SSA number dropped: one name in every dump
        part = self.name(f"{base}_tile")
        self.names[o.results[0]] = part
        self.copy(o)
        self.names.pop(o.results[0])
        ty = re.sub(r"\s*loc\(.*$", "", _result_type(self.src, o))
        (x, _), = o.operands()
        tot, spl, new = self.name(f"{base}_tot"), self.name(f"{base}_run"), self.name(f"{carry}_new")
        self.emit(f'      %{tot} = "tt.reduce"(%{x}) <{{axis = 0 : i32}}> ({{', o)
        self.emit(f"      ^bb0(%{tot}_a: {elt}, %{tot}_b: {elt}):", o)
        self.emit(f"        %{tot}_c = {comb} %{tot}_a, %{tot}_b : {elt}", o)
        self.emit(f"        tt.reduce.return %{tot}_c : {elt}", o)
        self.emit(f"      }}) : ({ty}) -> {elt}", o)
        self.emit(f"      %{spl} = tt.splat %{carry} : {elt} -> {ty}", o)
        self.emit(f"      %{o.results[0]} = {comb} %{part}, %{spl} : {ty}", o)
        self.emit(f"      %{new} = {comb} %{carry}, %{tot} : {elt}", o)
        return new

    def _pass(self, p, roots, ops, tensor, defs, reductions, lo, st, bound) -> None:
        """The loop of pass p over the row's columns: the tensor ops its reductions and stores need."""
        need: set[int] = set()
        todo = [n for o in roots for n, _ in o.operands()] + [None]
        for o in roots:
            if o.name == "tt.store":
                need.add(id(o))
        while todo:
            n = todo.pop()
            d = defs.get(n)
            if d is None or id(d) in need or not tensor[id(d)] or d.name == "arith.constant" or d.name == "tt.reduce":
                continue
            need.add(id(d))
            todo += [m for m, _ in d.operands()]
        reds = [o for o in roots if o.name == "tt.reduce"]
        off = self.name("off")
        ub = bound if isinstance(bound, str) else self.name("ncols")
        if isinstance(bound, int):
            self.emit(f"    %{ub} = arith.constant {bound} : i32", self.at)
        inits, accs = [], {}
        for r in reds:
            _, idents, elts = reductions[id(r)]
            accs[id(r)] = []
            for k, (ident, elt) in enumerate(zip(idents, elts)):
                init = self.name("init")
                self.emit(f"    %{init} = arith.constant {ident} : {elt}", r)
                # the carry is the row's value the reduction computes, by its name (a pair's: NAME_val, NAME_idx)
                acc = r.results[0] if len(idents) == 1 else \
                    self.name(re.sub(r"_\d+$", "", r.results[0].split("#")[0]) + ("_val", "_idx")[k])
                inits.append(f"%{acc} = %{init}")
                accs[id(r)].append(acc)
        # a scan of the row (tl.cumsum) in this pass: a carry of the tiles' total before each tile (_scan_tile)
        scans = [o for o in ops if o.name == "tt.scan" and id(o) in need]
        runs = []
        for o in scans:
            _, ident, elt = self.scans[id(o)]
            init, run = self.name("init"), self.name(re.sub(r"_\d+$", "", o.results[0]) + "_carry")
            self.emit(f"    %{init} = arith.constant {ident} : {elt}", o)
            inits.append(f"%{run} = %{init}")
            runs.append(run)
        types = [e for r in reds for e in reductions[id(r)][2]] + [self.scans[id(o)][2] for o in scans]
        if len(types) == 1:
            result = self.name((reds or scans)[0].results[0])
            head = f"    %{result} = "
        elif types:
            result = self.name("pass")
            head = f"    %{result}:{len(types)} = "
        else:
            head = "    "
        carries = f" iter_args({', '.join(inits)}) -> ({', '.join(types)})" if types else ""
        at = roots[0]  # each loop placed at its first reduction or store: loops are told apart by their lines
        self.emit(f"{head}scf.for %{off} = %{lo} to %{ub} step %{st}{carries} : i32 {{", at)
        outs = [res for r in reds for res in r.results]
        for i, res in enumerate(outs):  # after the loop, a reduction is the loop's result
            self.names[res] = result if len(types) == 1 else f"{result}#{i}"
        inner = dict(self.names)
        for res in outs:
            inner.pop(res, None)
        saved, self.names = self.names, inner  # in the loop, a reduction's name is its carry
        parts, scanned = [], []
        for o in ops:
            if o.name == "tt.make_range" and id(o) in need:
                base, shift = self.name(o.results[0]), self.name("off")
                line = self.src.lines[o.head.line - 1]
                ty = _result_type(self.src, o)
                ty = re.sub(r"\s*loc\(.*$", "", ty)
                self.emit(line.replace(f"%{o.results[0]} =", f"%{base} =", 1), o, same=True)
                self.emit(f"      %{shift} = tt.splat %{off} : i32 -> {ty}", o)
                self.emit(f"      %{o.results[0]} = arith.addi %{shift}, %{base} : {ty}", o)
            elif id(o) in need and o.results and o.results[0] in self.true_masks:
                continue  # true in every step of the loop: its loads and stores unmasked
            elif id(o) in need and (text := self._unmasked(o)) is not None:
                self.emit(text[0], o, same=True)
            elif id(o) in need and o.name == "tt.scan":
                scanned.append(self._scan_tile(o, runs[scans.index(o)]))
            elif id(o) in need:
                self.copy(o)
            elif o in reds and len(o.results) == 2:
                parts += self._fold_pair(o, accs[id(o)])
            elif o in reds:
                comb, _, (elt,) = reductions[id(o)]
                part = self.name(o.results[0])
                self.names[o.results[0]] = part
                self.copy(o)
                self.names.pop(o.results[0])
                new = self.name(f"{o.results[0]}_new")
                self.emit(f"      %{new} = {comb} %{accs[id(o)][0]}, %{part} : {elt}", o)
                parts.append(new)
        if types:
            self.emit(f"      scf.yield {', '.join('%' + n for n in parts + scanned)} : {', '.join(types)}", at)
        self.emit("    }", at)
        self.names = saved


def whole_rows(module: Module) -> tuple[Module, list[tuple[int, int | None]]] | None:
    """The kernel rewritten to one row a program with column loops (its module, each line's place in the
    original) where it is a persistent loop over rows each whole in one tile; None where it is not."""
    found = row_whole(module)
    if found is None:
        return None
    loop, block = found
    before = _prepipe(module, loop) if loop is not None else None
    if before is not None:  # after the pipeliner: the loop put back first, its lines placed in the original
        lines, first = before
        module = parse_module("\n".join(lines), module.source.file)
        loop = persistent_rows(module)[0]
    lines, where = Whole(module, loop, block).run()
    if before is not None:
        where = _compose(where, first)
    text = "\n".join(lines)
    return parse_module(text, module.source.file), where


# -- after the pipeliner -------------------------------------------------------------------------------
#
# Triton's pipeliner copies the row's tile ahead (`ttg.async_copy_global_to_local` into a ring of shared
# buffers, the copy of the first rows peeled before the loop, the loop's copy for the row `row + k * step`)
# and reads it back with `ttg.local_load`, then `arith.select mask, tile, other`. Put back: the local load is
# the loop copy's `tt.load` at this iteration's row (its address chain with `row + k * step` read as the
# row, its mask the one not computed in the loop: the loop's in-range predicate dropped), the select of the
# load's own mask and fill is the load; the rings, tokens, indices and peeled copies are dropped (what the
# stores no longer read).

PIPELINE = ("ttg.local_alloc", "ttg.local_dealloc", "ttg.async_wait", "ttg.async_commit_group")


def _prepipe(module: Module, loop: MOp) -> tuple[list[str], list[tuple[int, int | None]]] | None:
    src = module.source
    body = list(loop.body())
    loads = [o for o in body if o.name == "ttg.local_load"]
    if not loads:
        return None
    func = module.functions()[0]
    top = list(func.body())
    pre = top[:top.index(loop)]
    defs = {r: o for o in pre + body for r in o.results}
    inloop = {r for o in body for r in o.results}
    iv = search(r"scf\.for %([\w.$-]+) =", src.lines[loop.head.line - 1], loop, "`scf.for %IV = ...`").group(1)
    names: dict[str, str] = {}
    moved: dict[int, list] = {}  # id of a local load -> the ops computing its address at this row
    for ld in loads:
        buf = defs.get(next(iter(ld.operands()))[0])
        alloc = next(iter(buf.operands()))[0] if buf is not None and buf.name == "ttg.memdesc_index" else None
        copies = [o for o in body if o.name == "ttg.async_copy_global_to_local"
                  and (d := defs.get([n for n, _ in o.operands()][1])) is not None and d.name == "ttg.memdesc_index"
                  and next(iter(d.operands()))[0] == alloc]
        if len(copies) != 1:
            raise Refuse(ld, "'ttg.local_load' of the row's tile whose buffer is written by no one copy in the loop: "
                             "the pipelined persistent loop is not put back")
        copy = copies[0]
        ops = [n for n, _ in copy.operands()]
        ptr = ops[0]
        mask = ops[2] if len(ops) > 2 else None
        other = ops[3] if len(ops) > 3 else None
        m = defs.get(mask)
        if m is not None and m.name == "arith.andi" and mask in inloop:  # drop the loop's in-range predicate
            outer = [n for n, _ in m.operands() if n not in inloop]
            mask = outer[0] if len(outer) == 1 else mask
        # the address chain from `iv + k * step`: read at this row
        chain, todo = [], [ptr]
        while todo:
            n = todo.pop()
            d = defs.get(n)
            if d is None or n not in inloop or d in chain:
                continue
            ivs = [a for a, _ in d.operands()]
            if d.name == "arith.addi" and iv in ivs:
                names[d.results[0]] = iv
                continue
            chain.append(d)
            todo += ivs
        chain.sort(key=lambda o: o.head.line)
        moved[id(ld)] = (chain, ptr, mask, other)
    keep: set[int] = set()
    stores = [o for o in body if o.name == "tt.store"]
    todo = [n for o in stores for n, _ in o.operands()]
    keep |= {id(o) for o in stores}
    lines: list[str] = []
    where: list[tuple[int, int | None]] = []
    load_ids = {id(ld) for ld in loads}
    while todo:
        n = names.get(n := todo.pop(), n)
        d = defs.get(n)
        if d is None or id(d) in keep:
            continue
        if d.name == "arith.select" and (ld := defs.get([a for a, _ in d.operands()][1])) is not None \
                and id(ld) in load_ids and [a for a, _ in d.operands()][0] == moved[id(ld)][2] \
                and [a for a, _ in d.operands()][2] == moved[id(ld)][3]:
            names[d.results[0]] = ld.results[0]  # tl.where(mask, load, other) of the load's own mask and fill
            todo.append(ld.results[0])
            continue
        keep.add(id(d))
        if id(d) in load_ids:
            chain, ptr, mask, other = moved[id(d)]
            keep |= {id(o) for o in chain}
            todo += [a for o in chain for a, _ in o.operands()] + [x for x in (mask, other) if x]
            continue
        todo += [a for a, _ in d.operands()]
    first = func.head.line

    def put(k: int, text: str | None = None, col: int | None = None) -> None:
        lines.append(subst(src.lines[k - 1] if text is None else text, names))
        where.append((k, col))
    for i in range(1, first + 1):
        put(i)
    for o in pre:
        if id(o) in keep or o.name in ("tt.get_program_id", "tt.get_num_programs"):
            for k in range(o.head.line, end_line(o) + 1):
                put(k)
    head = src.lines[loop.head.line - 1]
    m = re.match(r"(\s*)(?:%[\w.$-]+(?::\d+)? = )?(scf\.for %[\w.$-]+ = %[\w.$-]+ to %[\w.$-]+ step %[\w.$-]+)", head)
    put(loop.head.line, f"{m.group(1)}{m.group(2)} : i32 {{", loop.head.col)
    for o in body:
        if id(o) not in keep or any(id(o) in {id(c) for c in moved[i][0]} for i in moved):
            continue
        if id(o) in load_ids:
            chain, ptr, mask, other = moved[id(o)]
            for c in chain:
                for k in range(c.head.line, end_line(c) + 1):
                    put(k)
            copy_line = src.lines[next(c for c in body if c.name == "ttg.async_copy_global_to_local").head.line - 1]
            ty = re.search(r":\s*(tensor<.*?>)\s*->", copy_line)
            args = ", ".join("%" + x for x in (ptr, mask, other) if x)
            ind = re.match(r"\s*", src.lines[o.head.line - 1]).group(0)
            put(o.head.line, f"{ind}%{o.results[0]} = tt.load {args} : {ty.group(1)}", o.head.col)
            continue
        for k in range(o.head.line, end_line(o) + 1):
            put(k)
    put(end_line(loop), src.lines[end_line(loop) - 1].split("}")[0] + "}")
    ret = next(o for o in top if o.name == "tt.return")
    put(ret.head.line)
    last = max(o.head.line for o in walk_ops(func.body())) + 1
    for i in range(last, len(src.lines) + 1):
        put(i)
    return lines, where


def _compose(outer: list, inner: list) -> list:
    """Line places through two rewrites: `outer` indexes `inner`'s text, `inner` the original."""
    out = []
    for line, col in outer:
        if 0 < line <= len(inner):
            ol, oc = inner[line - 1]
            out.append((ol, oc if oc is not None else col))
        else:
            out.append((line, col))
    return out
