"""Parse the MLIR textual form into a tree of operations, without knowing any dialect.

The subset is what Triton prints for TTGIR: attribute aliases (``#blocked = ...``), a ``module``
holding ``tt.func``s, and operations in both syntaxes::

    %r = arith.mulf %a, %b : tensor<128x128xf32, #mma> loc(#loc63)           (custom)
    %r = "tt.reduce"(%x) <{axis = 1 : i32}> ({ ^bb0(...): ... }) : (...) -> ... (generic)

A custom-syntax operation has no grammar we can know in general, so an `MOp` keeps its tokens (the
text after the name, ``loc(...)`` removed, each region replaced by one ``region`` token) and the
lowering reads what each op needs. An operation ends at the end of its line, unless a bracket is
still open; a ``{`` that ends a line (or is followed by a block label) opens a region.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..vocab import LIBM
from .lexer import CLOSE, OPEN, Source, Token, tokenize

PARTITION = re.compile(r"partition\d+")
MAX_DEPTH = 100  # regions inside regions: loops in loops; a real kernel has a handful

# Triton <= 3.1 spelled the GPU dialects out; op names are read in today's spelling.
DIALECT_RENAMES = {"triton_gpu.": "ttg.", "triton_nvidia_gpu.": "ttng."}


def canonical(name: str) -> str:
    """``triton_gpu.convert_layout`` -> ``ttg.convert_layout`` (and ``!tt.memdesc`` -> ``!ttg.memdesc``)."""
    for old, new in DIALECT_RENAMES.items():
        if name.startswith(old) or name.startswith("!" + old) or name.startswith("#" + old):
            return name.replace(old, new, 1)
    return "!ttg.memdesc" if name == "!tt.memdesc" else name


# `tt.extern_elementwise` of a libdevice function of one float (`libdevice.tanh(x)`: {symbol =
# "__nv_tanhf"}): the math dialect op that computes the same, which the import knows; any other symbol
# stays the generic op `tt_extern_elementwise` (docs/ttgir-import.md, section 7).
LIBDEVICE = {
    "__nv_tanhf": "math.tanh", "__nv_expf": "math.exp", "__nv_fast_expf": "math.exp", "__nv_exp2f": "math.exp2",
    "__nv_logf": "math.log", "__nv_fast_logf": "math.log", "__nv_log2f": "math.log2",
    "__nv_fast_log2f": "math.log2", "__nv_sqrtf": "math.sqrt", "__nv_rsqrtf": "math.rsqrt",
    "__nv_fabsf": "math.absf", "__nv_fmaf": "math.fma",
    **{f"__nv_{fn}": f"math.{op}" for op, fn in LIBM.items()},  # erf, sin, asin, ... (twill/vocab.py)
}


def libdevice_op(name: str, tokens) -> str:
    """The op name an `tt.extern_elementwise` of a known libdevice symbol is read as (LIBDEVICE), else `name`."""
    if name != "tt.extern_elementwise":
        return name
    for i in range(len(tokens) - 2):
        if tokens[i].text == "symbol" and tokens[i + 1].text == "=":
            return LIBDEVICE.get(tokens[i + 2].text.strip('"'), name)
    return name


@dataclass(frozen=True)
class Block:
    args: tuple[tuple[str, tuple[Token, ...]], ...]  # (SSA name, type tokens)
    ops: tuple["MOp", ...]


@dataclass(frozen=True)
class MOp:
    """One operation. SSA names are stored without ``%``; ``%r:3`` defines ``r#0``, ``r#1``, ``r#2``."""

    name: str
    results: tuple[str, ...]
    tokens: tuple[Token, ...]
    regions: tuple[tuple[Block, ...], ...]
    head: Token  # the name token, for spans
    loc: tuple[Token, ...] = ()  # the tokens inside its trailing ``loc(...)``: where Triton says it came from

    def operands(self) -> list[tuple[str, Token]]:
        """The SSA values it uses, in order; a ``%x`` followed by ``=`` (``iter_args(%x = %init)``) is
        defined here, not used. (Function arguments, ``%x: type``, are read by `func_args`.)"""
        out = []
        for i, tok in enumerate(self.tokens):
            nxt = self.tokens[i + 1] if i + 1 < len(self.tokens) else None
            if tok.kind == "ssa" and not (nxt is not None and nxt.is_("=")):
                out.append((tok.text[1:], tok))
        return out

    def body(self) -> tuple["MOp", ...]:
        """The operations of its first region's first block (a loop body, a function body)."""
        return self.regions[0][0].ops if self.regions and self.regions[0] else ()


@dataclass(frozen=True)
class Module:
    ops: tuple[MOp, ...]
    aliases: dict  # "#name" / "!name" -> tokens of its definition
    source: Source
    locs: dict = None  # "#locN" -> the tokens inside its ``loc(...)`` definition
    flat: str | None = None  # a flat map over elements read as rows (flatmap.py): the argument of the elements
    transposed: tuple = ()  # pointer arguments a column-sum kernel's tiles read transposed (colsum.py)
    grid_bound: tuple = ()  # arguments bounding a column-sum kernel's columns (`cols < N`, colsum.py): the grid rows'

    def functions(self) -> list[MOp]:
        """Every `tt.func` (or `func.func`), in file order, at any depth of `module`s."""
        out, todo = [], list(self.ops)
        while todo:
            op = todo.pop(0)
            if op.name in ("tt.func", "func.func"):
                out.append(op)
            elif op.name in ("module", "builtin.module"):
                todo[:0] = list(op.body())
        return out


# Ops of a fixed number of SSA operands (MLIR's own arity), checked as each op is read: an op with one
# missing or one too many is a located error here, not an IndexError in whichever stage reads it.
_BINARY = ("addf subf mulf divf remf maxnumf minnumf maximumf minimumf cmpf cmpi addi subi muli divsi divui "
           "remsi remui andi ori xori shli shrsi shrui maxsi minsi maxui minui ceildivsi floordivsi").split()
_UNARY = "negf truncf extf trunci extsi extui sitofp uitofp fptosi fptoui index_cast index_castui".split()
ARITY = {**{f"arith.{n}": 2 for n in _BINARY}, **{f"arith.{n}": 1 for n in _UNARY}, "arith.select": 3,
         **{f"math.{n}": 1 for n in "exp exp2 log log2 sqrt rsqrt absf tanh".split()}, "math.fma": 3,
         **{f"math.{n}": 1 for n in LIBM},
         "tt.addptr": 2, "tt.splat": 1, "tt.broadcast": 1, "tt.expand_dims": 1, "tt.trans": 1,
         "tt.fp_to_fp": 1, "tt.precise_divf": 2, "tt.join": 2, "tt.split": 1, "ttg.convert_layout": 1,
         "tt.dot": 3, "tt.get_program_id": 0, "tt.make_range": 0}


class _Parser:
    def __init__(self, src: Source):
        self.src, self.toks, self.i, self.depth = src, tokenize(src), 0, 0

    def peek(self, ahead: int = 0) -> Token:
        return self.toks[min(self.i + ahead, len(self.toks) - 1)]

    def take(self) -> Token:
        tok = self.peek()
        self.i += 1
        return tok

    def skip_newlines(self) -> None:
        while self.peek().kind == "nl":
            self.i += 1

    def fail(self, message: str, tok: Token | None = None, hint: str | None = None):
        raise self.src.error(message, tok or self.peek(), hint)

    # -- file level -------------------------------------------------------------------------------

    def parse(self) -> Module:
        ops, aliases, locs = [], {}, {}
        while True:
            self.skip_newlines()
            tok = self.peek()
            if tok.kind == "eof":
                break
            if tok.kind in ("attr", "type") and self.peek(1).is_("="):
                self.i += 2
                tokens, regions, loc = self.rest_of_op()
                if regions:
                    self.fail("an alias definition cannot hold a region", tok)
                aliases[tok.text] = tuple(tokens)
                if loc and not tokens:
                    locs[tok.text] = loc
            else:
                ops.append(self.op())
        return Module(tuple(ops), aliases, self.src, locs)

    # -- operations -------------------------------------------------------------------------------

    def op(self) -> MOp:
        results = self.results() if self.peek().kind == "ssa" else []
        head = self.take()
        if head.kind == "string":
            name = head.text[1:-1]
        elif head.kind == "word" and not head.text[0].isdigit():
            name = head.text
        else:
            self.fail("expected an operation name" + (" after '='" if results else ""), head)
        tokens, regions, loc = self.rest_of_op()
        op = MOp(libdevice_op(canonical(name), tokens), tuple(results), tuple(tokens), tuple(regions), head, loc)
        want = ARITY.get(op.name)
        if want is not None and len(op.operands()) != want:
            got = len(op.operands())
            self.fail(f"'{op.name}' takes {want} operand{'s' if want != 1 else ''}, got {got}", head,
                      "the dump is damaged or hand-edited: dump the kernel again (kernel.asm['ttgir'])")
        return op

    def results(self) -> list[str]:
        names = []
        while True:
            tok = self.take()
            if tok.kind != "ssa" or "#" in tok.text:
                self.fail("expected a result name such as '%x'", tok)
            if self.peek().is_(":"):  # %r:3 = ...
                self.i += 1
                count = self.take()
                if not count.text.isdigit():
                    self.fail("expected the number of results after ':'", count)
                names += [f"{tok.text[1:]}#{k}" for k in range(int(count.text))]
            else:
                names.append(tok.text[1:])
            if not self.peek().is_(","):
                break
            self.i += 1
        if not self.peek().is_("="):
            self.fail("expected '=' after the result names")
        self.i += 1
        return names

    def rest_of_op(self) -> tuple[list[Token], list, tuple[Token, ...]]:
        """Tokens up to the end of the operation, its regions (parsed on the way) and the tokens
        of its own ``loc(...)`` (the last one outside brackets)."""
        tokens, regions, stack, loc = [], [], [], ()
        while True:
            tok = self.peek()
            if tok.kind == "eof":
                if stack:
                    self.fail(f"'{stack[-1].text}' is never closed", stack[-1])
                return tokens, regions, loc
            if not stack and tok.kind == "nl" and self._continues():
                self.skip_newlines()  # ttg.warp_specialize goes on with its regions, one a line
                continue
            if not stack and (tok.kind == "nl" or tok.is_("}")):
                return tokens, regions, loc
            if tok.is_("loc") and self.peek(1).is_("("):
                start = self.i + 2
                self.skip_balanced()
                if not stack:
                    loc = tuple(self.toks[start:self.i - 1])
            elif tok.is_("{") and self.peek(1).kind in ("nl", "block"):
                regions.append(self.region())
                tokens.append(Token("region", "{...}", tok.line, tok.col))
            elif tok.kind == "nl":  # inside brackets: the operation goes on
                self.i += 1
            else:
                if tok.kind == "punct" and tok.text in OPEN:
                    stack.append(tok)
                elif tok.kind == "punct" and tok.text in CLOSE:
                    if not stack:
                        self.fail(f"unbalanced '{tok.text}'", tok)
                    if OPEN[stack[-1].text] != tok.text:
                        self.fail(f"'{stack[-1].text}' is never closed (line {tok.line} has '{tok.text}' "
                                  "where it should be closed)", stack[-1])
                    stack.pop()
                tokens.append(self.take())

    def _continues(self) -> bool:
        """Whether the next line goes on with the current operation: ``default {`` and
        ``partitionN(...) num_warps(N) {`` of a ``ttg.warp_specialize``."""
        k = self.i
        while self.toks[k].kind == "nl":
            k += 1
        t = self.toks[k]
        return t.kind == "word" and (t.text == "default" or PARTITION.fullmatch(t.text) is not None)

    def skip_balanced(self) -> None:
        """Skip ``loc`` and its parenthesised argument."""
        self.i += 1
        opened, depth = self.peek(), 0
        while True:
            tok = self.take()
            if tok.kind == "eof":
                self.fail("'(' is never closed", opened)
            depth += tok.is_("(") - tok.is_(")")
            if depth == 0:
                return

    # -- regions and blocks -----------------------------------------------------------------------

    def region(self) -> tuple[Block, ...]:
        opened = self.take()
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.fail(f"regions nested more than {MAX_DEPTH} deep: twill reads kernels, not this", opened)
        blocks, args, ops, labelled = [], (), [], False
        while True:
            self.skip_newlines()
            tok = self.peek()
            if tok.kind == "eof":
                self.fail("'{' is never closed", opened)
            if tok.is_("}"):
                self.i += 1
                break
            if tok.kind == "block":
                if ops or labelled:
                    blocks.append(Block(args, tuple(ops)))
                args, ops, labelled = self.block_header(), [], True
                continue
            ops.append(self.op())
        blocks.append(Block(args, tuple(ops)))
        self.depth -= 1
        return tuple(blocks)

    def block_header(self) -> tuple[tuple[str, tuple[Token, ...]], ...]:
        self.i += 1  # ^bb0
        args = []
        if self.peek().is_("("):
            self.i += 1
            while not self.peek().is_(")"):
                name = self.take()
                if name.kind != "ssa" or not self.peek().is_(":"):
                    self.fail("expected a block argument such as '%x: f32'", name)
                self.i += 1
                args.append((name.text[1:], tuple(self.type_tokens())))
                if self.peek().is_(","):
                    self.i += 1
            self.i += 1
        if not self.peek().is_(":"):
            self.fail("expected ':' after the block label")
        self.i += 1
        return tuple(args)

    def type_tokens(self) -> list[Token]:
        """The tokens of one type, up to a ',' or ')' outside brackets (skipping ``loc(...)``)."""
        out, depth = [], 0
        while True:
            tok = self.peek()
            if tok.kind in ("eof", "nl") or (depth == 0 and (tok.is_(",") or tok.is_(")"))):
                return out
            if tok.is_("loc") and self.peek(1).is_("("):
                self.skip_balanced()
                continue
            depth += (tok.kind == "punct" and tok.text in OPEN) - (tok.kind == "punct" and tok.text in CLOSE)
            out.append(self.take())


def parse_module(text: str, file: str = "<string>") -> Module:
    """Parse MLIR text; a malformed file raises a located `InputError`."""
    module = _Parser(Source(text, file)).parse()
    _check_uses(module.ops, module.source, frozenset())
    return module


def _check_uses(ops, src: Source, scope: frozenset) -> frozenset:
    """Every SSA value used is defined before it, in its block or an enclosing one (MLIR's dominance
    for these region kinds): a dump with a line missing is an error at the use, not a KeyError in
    whichever stage reads the value. Defined by an op: its results, and inside its regions the
    names it binds (`%iv = ...`, `iter_args(%a = ...)`, a function's or a warp_specialize
    partition's `%arg0: type`, taken as bound wherever an op with regions writes `%x:`) and the blocks'
    arguments. A name defined twice in a block is an error at its second definition. Returns the
    names defined once `ops` have run."""
    local = set()
    for op in ops:
        binds = set()
        for i, tok in enumerate(op.tokens[:-1]):
            nxt = op.tokens[i + 1]
            if tok.kind == "ssa" and (nxt.is_("=") or (nxt.is_(":") and op.regions)):
                binds.add(tok.text[1:])
        for name, tok in op.operands():
            if not (name in scope or name + "#0" in scope or (op.regions and name in binds)):
                raise src.error(f"use of undefined value '%{name}'", tok,
                                "the dump looks cut or edited: dump the kernel again")
        for region in op.regions:
            seen = scope | binds  # a later block of a region sees an earlier one's values (cf.cond_br's
            for block in region:  # blocks: dominance read loosely, enough to find a missing line)
                seen = _check_uses(block.ops, src, seen | {name for name, _ in block.args})
        for name in op.results:  # (in one block: warp_specialize's partitions, isolated from above,
            if name in local:    # reuse the names of the regions around them)
                raise src.error(f"'%{name.split('#')[0]}' is defined twice", op.head)
        local |= set(op.results)
        scope = scope | set(op.results)
    return scope


def walk(ops):
    """Every op of `ops` and, depth first in program order, of their regions' blocks."""
    for op in ops:
        yield op
        for region in op.regions:
            for block in region:
                yield from walk(block.ops)
