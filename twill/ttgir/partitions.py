"""Put a warp-specialized loop back together: ``ttg.warp_specialize`` to one loop.

On sm_100 Triton's warp specialization splits a loop over partitions that run on their own warps::

    ttg.warp_specialize(%bars, %a, %b, %acc, ...) attributes {...}
    default { ...; ttg.warp_yield %r }
    partition0(%bars_1: T0, %a_1: T1, ...) num_warps(1) { scf.for ... { mma } ; ttg.warp_return }
    partition1(%bars_1: T0, %a_1: T1, ...) num_warps(1) { scf.for ... { async copies } ; ttg.warp_return }
    : (T0, T1, ...) -> ()

Each partition holds a copy of the loop with some of its ops. `merge_partitions` rewrites the op
into the ops of its regions, in the function: a partition's arguments are the op's operands, the
op's results are what the default region yields, every partition's SSA names are made unique, and
the copies of one loop (the `scf.for`s at the top of the regions whose `loc` is the same source
position) become one `scf.for`: the iter_args of all, the body the union of their ops ordered by
source position (each op after the values it uses), one `scf.yield` of all the yields. The ops
around the loops keep their place, before or after it.
"""
from __future__ import annotations

import re
from itertools import count

from .lexer import Token
from .locs import position, source_order
from .parser import Block, Module, MOp
from .types import last_top_level

WS = "ttg.warp_specialize"
ENDS = {"ttg.warp_yield", "ttg.warp_return"}


def merge_partitions(module: Module) -> Module:
    """`module` with every `ttg.warp_specialize` in a function body replaced by its merged ops."""
    if not _has_ws(module.ops):
        return module
    fresh = count(1)
    return Module(tuple(_rewrite_op(op, module, fresh) for op in module.ops), module.aliases, module.source,
                  module.locs)


def _has_ws(ops) -> bool:
    return any(op.name == WS or any(_has_ws(b.ops) for r in op.regions for b in r) for op in ops)


def _rewrite_op(op: MOp, module: Module, fresh) -> MOp:
    if not op.regions:
        return op
    regions = tuple(tuple(Block(b.args, _rewrite_ops(b.ops, module, fresh)) for b in r) for r in op.regions)
    return MOp(op.name, op.results, op.tokens, regions, op.head, op.loc)


def _rewrite_ops(ops, module: Module, fresh) -> tuple[MOp, ...]:
    out = []
    for op in ops:
        out += _merged(op, module, fresh) if op.name == WS else [_rewrite_op(op, module, fresh)]
    return tuple(out)


def _alias(name: str, source: str, tok: Token) -> MOp:
    """`%name` = `%source`: a layout conversion is what the lowering reads as "the same value"."""
    return MOp("ttg.convert_layout", (name,), (Token("ssa", "%" + source, tok.line, tok.col),), (), tok, ())


def _captures(op: MOp) -> list[Token]:
    """The op's operands: the SSA names in the parentheses right after its name."""
    toks, out = op.tokens, []
    if toks and toks[0].is_("("):
        for t in toks[1:]:
            if t.is_(")"):
                break
            if t.kind == "ssa":
                out.append(t)
    return out


def _partition_args(op: MOp) -> list[list[str]]:
    """For each `partitionN(...)` the names of its arguments, in order."""
    toks, out = op.tokens, []
    for i, t in enumerate(toks):
        if t.kind == "word" and re.fullmatch(r"partition\d+", t.text) and i + 1 < len(toks) and toks[i + 1].is_("("):
            names, depth = [], 0
            for j in range(i + 1, len(toks)):
                depth += toks[j].is_("(") - toks[j].is_(")")
                if depth == 0:
                    break
                if depth == 1 and toks[j].kind == "ssa" and j + 1 < len(toks) and toks[j + 1].is_(":"):
                    names.append(toks[j].text[1:])
            out.append(names)
    return out


def _merged(op: MOp, module: Module, fresh) -> list[MOp]:
    """The ops a `ttg.warp_specialize` stands for (see the module docstring)."""
    captures, args = _captures(op), _partition_args(op)
    regions = [r[0] for r in op.regions if r]
    if len(regions) != len(args) + 1:
        return [op]  # not the form we know: left to the lowering, which reports it
    pre, copies, post, yielded = [], [], [], []
    for k, block in enumerate(regions):
        rename = {}
        for name, tok in zip(args[k - 1] if k else [], captures):
            rename[name] = _fresh(name, fresh)
            pre.append(_alias(rename[name], tok.text[1:], tok))
        ops = [_renamed(o, rename, fresh) for o in _rewrite_ops(block.ops, module, fresh)]
        at = next((i for i, o in enumerate(ops) if o.name == "scf.for"), len(ops))
        for i, o in enumerate(ops):
            if o.name == "ttg.warp_yield":
                yielded = o.operands()
            elif o.name in ENDS:
                continue
            elif i == at:
                copies.append(o)
            else:
                (pre if i < at else post).append(o)
    for name, (src, tok) in zip(op.results, yielded):
        post.append(_alias(name, src, tok))
    if not copies:
        return pre + post
    where = {position(lp.loc, module.locs) for lp in copies}
    if len(where) != 1:  # different loops in different partitions: keep them one after the other
        return pre + copies + post
    roots = {o.results[0]: o.tokens[0].text[1:] for o in pre if o.name == "ttg.convert_layout" and o.results
             and o.tokens and o.tokens[0].kind == "ssa"}
    return pre + [_one_loop(copies, module, roots)] + post


def _fresh(name: str, fresh) -> str:
    """A new SSA name that keeps the Python variable of `name` (``acc_42`` -> ``acc_9000017``)."""
    base = name.split("#")[0]
    if re.fullmatch(r"(arg)?\d+", base):
        return f"{base}0{next(fresh)}"
    return f"{re.sub(r'_[0-9]+$', '', base)}_{9000000 + next(fresh)}"


def _renamed(op: MOp, rename: dict[str, str], fresh) -> MOp:
    """`op` with the names it defines made fresh (recorded in `rename`) and its uses renamed."""
    results = []
    for r in op.results:
        base, _, k = r.partition("#")
        if base not in rename:
            rename[base] = _fresh(base, fresh)
        results.append(rename[base] + (f"#{k}" if k else ""))
    tokens = []
    for i, t in enumerate(op.tokens):
        if t.kind == "ssa":
            base, hash_, k = t.text[1:].partition("#")
            if base not in rename and i + 1 < len(op.tokens) and op.tokens[i + 1].is_("="):
                rename[base] = _fresh(base, fresh)  # defined here: an iter_arg, an induction variable
            if i == 0 and op.name == "scf.for" and base not in rename:
                rename[base] = _fresh(base, fresh)
            t = Token("ssa", "%" + rename.get(base, base) + hash_ + k, t.line, t.col)
        tokens.append(t)
    regions = []
    for region in op.regions:
        blocks = []
        for b in region:
            bargs = []
            for name, types in b.args:
                rename[name] = _fresh(name, fresh)
                bargs.append((rename[name], types))
            blocks.append(Block(tuple(bargs), tuple(_renamed(o, rename, fresh) for o in b.ops)))
        regions.append(tuple(blocks))
    return MOp(op.name, tuple(results), tuple(tokens), tuple(regions), op.head, op.loc)


def _one_loop(copies: list[MOp], module: Module, roots: dict[str, str]) -> MOp:
    """The copies of one `scf.for` as one: iter_args and result types of all, one body."""
    first = copies[0]
    iv = first.tokens[0].text[1:] if first.tokens and first.tokens[0].kind == "ssa" else None
    head, pairs, types, tail = _split_header(first)
    results = list(first.results)
    body = [o for o in first.body() if o.name != "scf.yield"]
    part = [0] * len(body)
    yields, ivs = _yield_operands(first), []  # every copy's induction variable is the first one's
    for lp in copies[1:]:
        _, p, t, _ = _split_header(lp)
        pairs += ([Token("punct", ",", 0, 0)] if pairs and p else []) + p
        types += ([Token("punct", ",", 0, 0)] if types and t else []) + t
        other_iv = lp.tokens[0].text[1:] if lp.tokens and lp.tokens[0].kind == "ssa" else None
        if other_iv and iv:
            ivs.append(_alias(other_iv, iv, lp.head))
        ops = [o for o in lp.body() if o.name != "scf.yield"]
        body += ops
        part += [part[-1] + 1 if part else 1] * len(ops) if ops else []
        yields += _yield_operands(lp)
        results += list(lp.results)
    tokens = head + (
        [Token("word", "iter_args", 0, 0), Token("punct", "(", 0, 0)] + pairs + [Token("punct", ")", 0, 0)]
        if pairs else []) + ([Token("arrow", "->", 0, 0), Token("punct", "(", 0, 0)] + types
                             + [Token("punct", ")", 0, 0)] if types else []) + tail
    body, part = _merge_inner(body, part, module, roots)
    yield_op = MOp("scf.yield", (), tuple(yields), (), first.head, ())
    block = Block(first.regions[0][0].args if first.regions and first.regions[0] else (),
                  tuple(ivs) + tuple(_in_source_order(body, module, _handoffs(body, part, roots))) + (yield_op,))
    return MOp("scf.for", tuple(results), tuple(tokens), ((block,),), first.head, first.loc)


def _split_header(lp: MOp):
    """(tokens before ``iter_args``, the pairs inside it, the result types, tokens from ``:`` on)."""
    toks = list(lp.tokens)
    i = next((k for k, t in enumerate(toks) if t.is_("iter_args")), None)
    colon = max((k for k, t in enumerate(toks) if t.is_(":")), default=len(toks))
    if i is None:
        return toks[:colon], [], [], toks[colon:]
    j = _closing(toks, i + 1)
    pairs = toks[i + 2:j]
    arrow = next((k for k in range(j, len(toks)) if toks[k].kind == "arrow"), None)
    types = []
    if arrow is not None:
        e = _closing(toks, arrow + 1)
        types = toks[arrow + 2:e]
        colon = e + 1
    return toks[:i], pairs, types, toks[colon:]


def _closing(toks: list[Token], start: int) -> int:
    """The index of the ')' that closes the '(' at `start` (the last token if none does)."""
    depth, k = 0, start
    for k in range(start, len(toks)):
        depth += toks[k].is_("(") - toks[k].is_(")")
        if depth == 0:
            break
    return k


def _yield_operands(lp: MOp) -> list[Token]:
    """The tokens of the loop's scf.yield before its ':' (operands and commas)."""
    y = next((o for o in lp.body() if o.name == "scf.yield"), None)
    if y is None:
        return []
    colon = last_top_level(y.tokens, ":")
    out = []
    for t in (t for t in y.tokens[:colon] if t.kind == "ssa"):  # past an attribute dict {async_task_id = ...}
        out += ([Token("punct", ",", t.line, t.col)] if out else []) + [t]
    return out


def _merge_inner(body: list[MOp], part: list[int], module: Module, roots: dict[str, str]):
    """The loops inside merged copies (a persistent kernel's K loop inside its loop over tiles): the
    copies of one inner loop, from different partitions, are merged too."""
    loops: dict[object, list[int]] = {}
    for k, o in enumerate(body):
        if o.name == "scf.for":
            loops.setdefault(position(o.loc, module.locs), []).append(k)
    groups = [ks for where, ks in loops.items() if where is not None and len({part[k] for k in ks}) > 1]
    if not groups:
        return body, part
    roots = dict(roots)
    for o in body:  # the views the inner loops read their buffers through
        names = [n for n, _ in o.operands()]
        if o.name in VIEWS and o.results and names:
            roots[o.results[0]] = names[0]
    merged, dropped = {}, set()
    for ks in groups:
        merged[ks[0]] = _one_loop([body[k] for k in ks], module, roots)
        dropped.update(ks[1:])
    keep = [k for k in range(len(body)) if k not in dropped]
    return [merged.get(k, body[k]) for k in keep], [part[k] for k in keep]


# Ops that write a buffer: the index of the buffer among their operands (None: the first after `]`).
WRITES = {"ttng.tmem_store": 1, "ttg.local_store": 1, "ttg.async_copy_global_to_local": 1, "ttng.tc_gen5_mma": 2,
          "ttng.async_tma_copy_global_to_local": None}
READS = {"ttg.local_load": (0,), "ttng.tmem_load": (0,), "ttng.tc_gen5_mma": (0, 1),
         "ttng.warp_group_dot": (0, 1)}
VIEWS = {"ttg.memdesc_index", "ttg.memdesc_subview", "ttg.memdesc_trans", "ttg.memdesc_subslice",
         "ttg.memdesc_reinterpret", "ttg.memdesc_reshape", "ttng.tmem_subslice", "ttg.convert_layout"}


def _handoffs(body: list[MOp], part: list[int], roots: dict[str, str]) -> dict[int, set[int]]:
    """Extra order for the merged body: a buffer that one partition writes and another reads (P in
    tensor memory, S, K and V, a row max in shared memory) was a value handed from op to op within an
    iteration, so each of its readers in another partition comes after every one of its writers. A
    buffer written by several partitions (the accumulator, rescaled by one and accumulated by another)
    gets no such order: source order decides."""
    roots = dict(roots)

    def root(name: str) -> str:
        seen = set()
        while name in roots and name not in seen:
            seen.add(name)
            name = roots[name]
        return name

    writers: dict[str, list[int]] = {}
    readers: dict[str, list[int]] = {}
    for k, o in enumerate(body):
        names = [n for n, _ in o.operands()]
        if o.name in VIEWS and o.results and names:
            roots[o.results[0]] = names[0]
        if o.name in WRITES:
            at = WRITES[o.name]
            if at is None:
                close = next((i for i, t in enumerate(o.tokens) if t.is_("]")), None)
                after = [t.text[1:] for t in o.tokens[close + 1:] if t.kind == "ssa"] if close is not None else []
                target = after[0] if after else None
            else:
                target = names[at] if at < len(names) else None
            if target is not None:
                writers.setdefault(root(target), []).append(k)
        for i in READS.get(o.name, ()):
            if i < len(names):
                readers.setdefault(root(names[i]), []).append(k)
    extra: dict[int, set[int]] = {}
    for buf, ws in writers.items():
        if len({part[w] for w in ws}) != 1:
            continue
        for r in readers.get(buf, []):
            if part[r] != part[ws[0]]:
                extra.setdefault(r, set()).update(ws)
    return extra


def _in_source_order(ops: list[MOp], module: Module, extra: dict[int, set[int]] | None = None) -> list[MOp]:
    """`ops` in order of source position, each after the ops whose values it uses and those `extra`
    names (program order on a tie; an op without a position keeps that of the op before it)."""
    defined = {}
    for k, o in enumerate(ops):
        for r in o.results:
            defined[r] = k
            defined[r.split("#")[0]] = k
    deps = []
    for k, o in enumerate(ops):
        uses = {defined[n] for n, _ in _all_operands(o) if n in defined}
        deps.append({d for d in uses if d != k})
    own, last = [], (0,)
    for o in ops:
        last = position(o.loc, module.locs) or last
        own.append(last)
    # An op is due where the first op that uses it is (Triton gives a tensor-memory load the position of
    # the dot whose accumulator it reads), and a store where the value it stores is.
    ssa_users: dict[int, list[int]] = {}
    for k, ds in enumerate(deps):
        for d in ds:
            ssa_users.setdefault(d, []).append(k)
    for k in reversed(range(len(ops))):
        own[k] = min([own[k]] + [own[u] for u in ssa_users.get(k, []) if u > k])
    for k, o in enumerate(ops):
        if o.name in ("ttng.tmem_store", "ttg.local_store"):
            names = [n for n, _ in o.operands()]
            if names and names[0] in defined:
                own[k] = min(own[k], own[defined[names[0]]])
    key = [(own[k], k) for k in range(len(ops))]
    deps = [ds | (extra or {}).get(k, set()) - {k} for k, ds in enumerate(deps)]
    order = source_order(range(len(ops)), deps, key)
    if order is None:
        return ops
    return [ops[k] for k in order]


def _all_operands(op: MOp):
    """The values `op` and the ops in its regions use."""
    out = list(op.operands())
    for r in op.regions:
        for b in r:
            for o in b.ops:
                out += _all_operands(o)
    return out
