"""Triton's random numbers in a TTGIR dump (`tl.rand(seed, offsets)`, `tl.randint`), collapsed into one op before
the rest of the import reads the module (docs/ttgir-import.md, section 8, "Random numbers").

Triton inlines `tl.rand` as its Philox-4x32 rounds (about 90 integer ops: `tt.mulhiui`, `arith.muli`, `xori`,
`addi` of the seed's words and the keys) and the conversion of the last word to a float (`arith.sitofp`,
`arith.mulf`), every op located in `triton/language/random.py` (through its call sites: `locs.files`), and
Triton's canonicalizer folds the rounds' constant words, hoists the seed's and the keys' scalars before a loop
and shares them between draws of one seed, each version its own way. So a draw is found by location and then
checked by value, not by the shape of one dump's SSA:

- the ops located in random.py are the draws' ops; each of their results read by an op located elsewhere is one
  draw's number, the ops it is computed from (back through random.py's ops) its slice;
- a slice reads, besides constants, two values: an integer scalar (the seed) and an integer tensor (the
  offsets); anything else (a seed folded to a constant, a third input) is not a draw the import knows;
- the slice is evaluated on a few hundred offsets (both signs, 0, the extremes) for several seeds (both signs, and
  beyond 32 bits for a 64-bit seed) and compared, bit for bit, with Triton's stream (twill/philox.py): tl.rand for
  a float result, tl.randint for an i32 one, at the default 10 rounds and then any count to 32.

A draw that passes is rewritten, as text, into one op at its number's place, `%r = twill.philoxN %seed, %offsets
: TYPE` (N its rounds; the seed and offsets as the kernel computed them), and its slice's ops are removed; the
lowering reads the op as the vocabulary's `rand` (ttgir/scalars.py's `rand`, which says what the offsets may
be). One that does not pass is an error at its number's op, naming tl.rand: nothing of it is imported silently.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np

from .. import philox
from ..errors import InputError
from .lexer import Source
from .locs import files
from .parser import Module, MOp, parse_module
from .types import TypeReader

RANDOM = "triton/language/random.py"  # where tl.rand, tl.randint and tl.randn come from
OP = "twill.philox"  # the collapsed draw, its rounds after it: twill.philox10
MAX_ROUNDS = 32
HINT = ("twill imports tl.rand(seed, offsets) and tl.randint(seed, offsets) (any n_rounds) with the seed a scalar "
        "argument of the kernel and the offsets an integer tensor; tl.randn and the 4x forms are not imported "
        "(docs/ttgir-import.md, section 8, \"Random numbers\")")


@dataclass(frozen=True)
class Draw:
    """One draw: the op whose result is its number, its slice (program order), what it reads."""

    exit: MOp
    ops: tuple[MOp, ...]
    seed: str  # the SSA name of the seed the slice reads
    offsets: str  # ... of the offsets
    rounds: int
    kind: str  # "rand" (f32) or "randint" (i32)


def is_draw(op: MOp) -> bool:
    """The collapsed op of a draw (`twill.philoxN`)."""
    return op.name.startswith(OP) and op.name[len(OP):].isdigit()


def rounds_of(op: MOp) -> int:
    return int(op.name[len(OP):])


def in_random(op: MOp, locs: dict) -> bool:
    return any(f.endswith(RANDOM) for f in files(op.loc, locs or {}))


def collapse(module: Module) -> Module:
    """`module` with each of its draws one `twill.philoxN` op (module doc); itself where it has none. An error,
    at the draw's number, where ops located in random.py are no draw the import knows."""
    locs = module.locs or {}
    if RANDOM not in module.source.text:
        return module
    draws: list[Draw] = []
    for func in module.functions():
        draws += _draws(module, func, locs)
    if not draws:
        return module
    return _rewrite(module, draws)


# -- finding the draws ------------------------------------------------------------------------------

class _Scope:
    """Each op's operands resolved to the ops that define them (None: an argument of the function or a block),
    names scoped by block (Triton's printer reuses names in sibling loops), and each op's users."""

    def __init__(self, func: MOp):
        self.order: dict[int, int] = {}
        self.defs: dict[int, list[MOp | None]] = {}
        self.users: dict[int, list[MOp]] = {}
        self.ops: list[MOp] = []
        self._walk(func.body(), {})

    def _walk(self, ops, scope: dict) -> None:
        scope = dict(scope)
        for op in ops:
            self.order[id(op)] = len(self.ops)
            self.ops.append(op)
            found = [scope.get(n, scope.get(n + "#0")) for n, _ in op.operands()]
            self.defs[id(op)] = found
            for d in found:
                if d is not None:
                    self.users.setdefault(id(d), []).append(op)
            for region in op.regions:
                for block in region:
                    inner = dict(scope)
                    for name, _ in block.args:
                        inner.pop(name, None)
                    self._walk(block.ops, inner)
            for r in op.results:
                scope[r] = op
                scope[r.split("#")[0]] = op


def _draws(module: Module, func: MOp, locs: dict) -> list[Draw]:
    scope = _Scope(func)
    mine = {id(op) for op in scope.ops if in_random(op, locs) and op.results}
    if not mine:
        return []
    types = TypeReader(module.source, module.aliases)
    out = []
    for op in scope.ops:
        if id(op) not in mine or op.name == "arith.constant" \
                or not any(id(u) not in mine for u in scope.users.get(id(op), [])):
            continue  # (a constant is no number: Triton's CSE may share one with the kernel's own ops)
        out.append(_certify(module, types, scope, mine, op))
    return out


def _slice(scope: _Scope, mine: set, exit_op: MOp) -> tuple[list[MOp], list[str]]:
    """The random.py ops `exit_op` is computed from (program order), and the SSA names of what they read that is
    neither one of them nor a constant."""
    seen, todo, inputs = {id(exit_op): exit_op}, [exit_op], []
    while todo:
        op = todo.pop()
        for (name, _), d in zip(op.operands(), scope.defs[id(op)]):
            if d is not None and (id(d) in mine or d.name == "arith.constant"):
                if id(d) not in seen:
                    seen[id(d)] = d
                    todo.append(d)
            elif name not in inputs:
                inputs.append(name)
    return sorted(seen.values(), key=lambda o: scope.order[id(o)]), inputs


def _certify(module: Module, types: TypeReader, scope: _Scope, mine: set, exit_op: MOp) -> Draw:
    src = module.source
    ops, inputs = _slice(scope, mine, exit_op)

    def refuse(why: str) -> InputError:
        return src.error(f"'{exit_op.name}' ends a random number of Triton's (tl.rand, tl.randint or tl.randn: "
                         f"Philox rounds inlined from {RANDOM}) that the import does not recognize: {why}",
                         exit_op.head, HINT)
    kinds = {}
    for name in inputs:
        t = _input_type(src, types, scope, ops, name)
        if t is None or t[0] not in ("i32", "i64"):
            raise refuse(f"it reads '%{name}', which is not an integer (a draw reads a seed and integer offsets)")
        kinds[name] = t
    seeds = [n for n in inputs if not kinds[n][1]]
    offsets = [n for n in inputs if kinds[n][1]]
    if len(seeds) != 1 or len(offsets) != 1:
        what = ("no seed (a constant seed is folded into the rounds: pass it as an argument)" if not seeds else
                "no offsets tensor" if not offsets else
                f"{len(inputs)} values ({', '.join('%' + n for n in inputs)}), not a seed and offsets")
        raise refuse(f"it reads {what}")
    seed, offs = seeds[0], offsets[0]
    if kinds[offs][0] == "i64":  # Triton draws 64-bit offsets with Philox-4x64 (random.py), which twill has not
        raise refuse(f"its offsets '%{offs}' are i64, which Triton draws with Philox-4x64; twill draws Philox-4x32 "
                     "(i32 offsets) only")
    if not _argument(scope, ops, seed):
        raise refuse(f"its seed '%{seed}' is computed in the kernel, not an integer argument of it (the binding passes "
                     "the seed as the Triton launch does: `tl.rand(seed + pid, ...)` is not imported)")
    out = _result_type(types, exit_op)
    kind = {"f32": "rand", "i32": "randint"}.get(out[0] if out else "")
    if kind is None or not out[1]:
        raise refuse(f"its number is {'a ' + out[0] if out else 'of no type the import reads'}, not an f32 (tl.rand) "
                     "or i32 (tl.randint) tensor")
    rounds = _rounds(module, types, ops, exit_op, seed, kinds[seed][0], offs, kinds[offs][0], kind)
    if rounds is None:
        raise refuse(f"evaluated on sample seeds and offsets, it is neither {kind} of Triton's Philox stream at 1 to "
                     f"{MAX_ROUNDS} rounds (tl.randn, a 4x form's other words, or arithmetic of the kernel's own)")
    return Draw(exit_op, tuple(o for o in ops if o.name != "arith.constant"), seed, offs, rounds, kind)


def _argument(scope: _Scope, ops, name: str) -> bool:
    """Whether the slice's input `name` is a function argument, or one sign-extended (`arith.extsi`, as Triton's
    `seed.to(tl.int64)`: the binding's Python int is the same number)."""
    for op in ops:
        for k, (n, _) in enumerate(op.operands()):
            if n != name:
                continue
            d = scope.defs[id(op)][k]
            while d is not None and d.name == "arith.extsi":
                d = scope.defs[id(d)][0]
            return d is None
    return False


def _input_type(src, types, scope, ops, name):
    """(element type, is a tensor) of an input of the slice, from an op of the slice that reads it."""
    for op in ops:
        for k, (n, _) in enumerate(op.operands()):
            if n != name:
                continue
            d = scope.defs[id(op)][k]
            if d is not None:
                return _result_type(types, d)
            return _operand_type(types, op, k)
    return None


def _operand_type(types, op: MOp, k: int):
    """The type an op's k-th operand is read as (its signature's, or the result's for an elementwise op)."""
    ins, outs = types.signature(op.tokens)
    t = ins[k] if k < len(ins) else (ins[-1] if ins else None)
    if op.name == "tt.splat" and ins:
        t = ins[0]
    return (t.elem, t.kind == "tensor") if t is not None else None


def _result_type(types, op: MOp):
    ins, outs = types.signature(op.tokens)
    if op.name in ("arith.cmpi", "arith.cmpf"):
        t = ins[0] if ins else None
        return ("i1", t.kind == "tensor") if t is not None else None
    t = outs[-1] if outs else (ins[-1] if ins else None)
    return (t.elem, t.kind == "tensor") if t is not None else None


# -- evaluating a slice -----------------------------------------------------------------------------

SAMPLES = 256
BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}


def _samples(bits: int) -> np.ndarray:
    """Offsets to evaluate on: the edges of a `bits`-bit integer, small ones and a fixed pseudo-random spread."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    edges = [0, 1, 2, 3, 4, 5, 127, 128, 1023, 1024, 98431, 98432, hi, hi - 1, lo, lo + 1, -1, -2, -1024]
    rng = np.random.default_rng(20261207)
    spread = [int(v) for v in rng.integers(lo, hi, SAMPLES - len(edges), dtype=np.int64, endpoint=True)]
    return np.array([v % (1 << bits) for v in edges + spread], dtype=object)


def _seeds(bits: int) -> list[int]:
    out = [0, 1, 123, 1234, -1, -2, (1 << 31) - 1, -(1 << 31), -0x5EED1234]
    return out + ([(1 << 40) + 77, -(1 << 62) + 5, (1 << 63) - 1] if bits > 32 else [])


def _rounds(module, types, ops, exit_op, seed, seed_t, offs, offs_t, kind) -> int | None:
    sample = _samples(BITS[offs_t])
    values = []
    for s in _seeds(BITS[seed_t]):
        got = _evaluate(module, types, ops, exit_op, {seed: (np.array(s % (1 << BITS[seed_t]), dtype=object), seed_t),
                                                      offs: (sample, offs_t)})
        if got is None:
            return None
        values.append((s, got))
    offsets = np.array([v - (1 << BITS[offs_t]) if v >> (BITS[offs_t] - 1) else v for v in sample], dtype=object)
    for n in [philox.ROUNDS] + [r for r in range(1, MAX_ROUNDS + 1) if r != philox.ROUNDS]:
        if all(_equal(kind, got, s, offsets, n, BITS[offs_t]) for s, got in values):
            return n
    return None


def _equal(kind: str, got, seed: int, offsets, rounds: int, bits: int) -> bool:
    words = philox.randint(seed, offsets, rounds, bits)
    if kind == "randint":
        return got.dtype == object and np.array_equal(np.array([int(v) for v in got], dtype=np.uint64),
                                                      words.astype(np.uint64))
    want = philox.uniform(words)
    return got.dtype == np.float32 and np.array_equal(got.view(np.uint32), want.view(np.uint32))


def _evaluate(module, types, ops, exit_op, given: dict):
    """The slice's number for the given inputs ({name: (values, element type)}): object arrays of unsigned
    integers below 2^bits, or float32 arrays; None where an op is one the evaluation does not know."""
    env = dict(given)
    for op in ops:
        got = _apply(module, types, op, env)
        if got is None:
            return None
        for r in op.results:
            env[r] = got
    val = env.get(exit_op.results[0])
    if val is None:
        return None
    v, t = val
    if t == "f32":
        return np.broadcast_to(np.asarray(v, dtype=np.float32), (SAMPLES,)).copy()
    return np.broadcast_to(np.asarray(v, dtype=object), (SAMPLES,)).copy()


_CONST = re.compile(r"arith\.constant\s+(?:dense<\s*([^>]*?)\s*>|(\S+))\s*:")
VIEWS = {"tt.splat", "tt.broadcast", "ttg.convert_layout", "tt.expand_dims", "tt.reshape"}
INT_BINARY = {"arith.addi": lambda a, b, m: (a + b) & m, "arith.subi": lambda a, b, m: (a - b) & m,
              "arith.muli": lambda a, b, m: (a * b) & m, "arith.xori": lambda a, b, m: a ^ b,
              "arith.andi": lambda a, b, m: a & b, "arith.ori": lambda a, b, m: a | b}
PREDS = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "slt": lambda a, b: a < b,
         "sle": lambda a, b: a <= b, "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b}
UPREDS = {"ult": "slt", "ule": "sle", "ugt": "sgt", "uge": "sge"}


def _signed(v, bits: int):
    return np.vectorize(lambda x: x - (1 << bits) if x >> (bits - 1) else x, otypes=[object])(v)


def _apply(module, types, op: MOp, env: dict):
    names = [n for n, _ in op.operands()]
    if any(n not in env and n + "#0" not in env for n in names):
        return None
    args = [env.get(n, env.get(n + "#0")) for n in names]
    res = _result_type(types, op)
    if res is None:
        return None
    elt = res[0]
    line = module.source.lines[op.head.line - 1]
    if op.name == "arith.constant":
        m = _CONST.search(line)
        text = (m.group(1) or m.group(2)) if m else None
        if text is None:
            return None
        if elt == "f32":
            value = (np.array(int(text, 16), dtype=np.uint32).view(np.float32) if text.lower().startswith("0x")
                     else np.float32(float(text)))
            return np.asarray(value, dtype=np.float32), elt
        if elt not in BITS:
            return None
        value = 1 if text == "true" else 0 if text == "false" else int(text, 0)
        return np.array(value % (1 << BITS[elt]), dtype=object), elt
    if op.name in VIEWS and len(args) == 1:
        return args[0][0], elt
    if op.name in ("tt.bitcast", "arith.bitcast") and len(args) == 1:
        return _bitcast(args[0], elt)
    if elt in BITS and elt != "i1" or op.name in ("arith.cmpi", "arith.select"):
        return _integer(op, line, args, elt)
    if elt == "f32":
        return _float(op, args)
    return None


def _integer(op: MOp, line: str, args: list, elt: str):
    if op.name == "arith.select" and len(args) == 3:
        (c, _), (a, ta), (b, _) = args
        if ta == "f32":
            return np.where(np.asarray(c, dtype=object) != 0, a, b).astype(np.float32), ta
        return np.where(np.asarray(c, dtype=object) != 0, a, b).astype(object), ta
    bits = BITS[elt] if elt in BITS else 0
    mask = (1 << bits) - 1
    if op.name in INT_BINARY and len(args) == 2:
        return INT_BINARY[op.name](args[0][0], args[1][0], mask), elt
    if op.name == "tt.mulhiui" and len(args) == 2:
        return (args[0][0] * args[1][0]) >> bits, elt
    if op.name in ("arith.shrui", "arith.shli", "arith.shrsi") and len(args) == 2:
        (a, _), (s, _) = args
        if op.name == "arith.shli":
            return (a << s) & mask, elt
        if op.name == "arith.shrui":
            return a >> s, elt
        return _signed(a, bits) >> s & mask, elt
    if op.name in ("arith.extsi", "arith.extui", "arith.trunci") and len(args) == 1:
        (a, ta), = args
        if op.name == "arith.extsi" and ta in BITS:
            return _signed(a, BITS[ta]) & mask, elt
        return a & mask, elt
    if op.name == "arith.cmpi" and len(args) == 2:
        m = re.search(r"arith\.cmpi\s+(\w+)", line)
        pred = m.group(1) if m else ""
        (a, ta), (b, _) = args
        if ta not in BITS:
            return None
        if pred in PREDS and pred not in ("eq", "ne"):
            a, b = _signed(a, BITS[ta]), _signed(b, BITS[ta])
        test = PREDS.get(UPREDS.get(pred, pred))
        if test is None:
            return None
        return np.vectorize(lambda x, y: int(bool(test(x, y))), otypes=[object])(a, b), "i1"
    return None


def _float(op: MOp, args: list):
    if op.name in ("arith.sitofp", "arith.uitofp") and len(args) == 1:
        (a, ta), = args
        if ta not in BITS:
            return None
        v = _signed(a, BITS[ta]) if op.name == "arith.sitofp" else a
        return np.vectorize(lambda x: np.float32(x), otypes=[np.float32])(v).astype(np.float32), "f32"
    binary = {"arith.mulf": np.multiply, "arith.addf": np.add, "arith.subf": np.subtract}
    if op.name in binary and len(args) == 2:
        a, b = (np.asarray(x, dtype=np.float32) for x, _ in args)
        return binary[op.name](a, b).astype(np.float32), "f32"
    return None


def _bitcast(arg, elt: str):
    a, ta = arg
    if ta == "i32" and elt == "f32":
        return np.asarray(np.asarray(a, dtype=object).astype(np.uint64).astype(np.uint32)).view(np.float32), elt
    if ta == "f32" and elt == "i32":
        return np.asarray(a, dtype=np.float32).view(np.uint32).astype(object), elt
    if ta == elt:
        return a, elt
    return None


# -- the rewrite ------------------------------------------------------------------------------------

def _rewrite(module: Module, draws: list[Draw]) -> Module:
    """The text with each draw's slice removed and its number's line the `twill.philoxN` op."""
    src = module.source
    drop = {o.head.line for d in draws for o in d.ops if o is not d.exit}
    keep_exit = {d.exit.head.line: d for d in draws}
    lines = []
    for k, line in enumerate(src.lines, 1):
        if k in keep_exit:
            d = keep_exit[k]
            m = re.match(r"(\s*%[\w.$#-]+ = )", line)
            ty = _result_text(line)
            loc = re.search(r"\s(loc\(.*\))\s*$", line)
            lines.append(f"{m.group(1)}{OP}{d.rounds} %{d.seed}, %{d.offsets} : {ty}" + (f" {loc.group(1)}" if loc else ""))
        elif k in drop:
            lines.append("")  # (a blank line keeps every other line's number: errors point at the kernel's lines)
        else:
            lines.append(line)
    out = parse_module("\n".join(lines), src.file)
    # (errors quote the kernel's own lines: each draw's op stands on its number's line, its slice's lines blank)
    return replace(out, source=Source(out.source.text, src.file, quoted=src.quoted))


def _result_text(line: str) -> str:
    """The text of a one-line op's result type (after its last '->', ' to ' or ':')."""
    body = re.sub(r"\s*loc\(.*\)\s*$", "", line)
    if "->" in body:
        return body.rsplit("->", 1)[1].strip()
    if " to " in body:
        return body.rsplit(" to ", 1)[1].strip()
    return body.rsplit(":", 1)[1].strip()


__all__ = ["Draw", "OP", "RANDOM", "collapse", "in_random", "is_draw", "rounds_of"]
