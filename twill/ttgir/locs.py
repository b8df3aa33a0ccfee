"""Where Triton says an operation came from: its ``loc(...)`` as a position in the kernel's source.

Triton gives every operation a location, which its passes keep when they clone or move it: the
pipeliner's copy of a load for a later iteration has the location of the ``tl.load`` it came from.
The importer orders the ops of a loop it has put back together by these positions. The forms read::

    loc("kernels.py":303:13)          a file, line and column             -> (303, 13)
    loc("a"(#loc14))                  a name around another location       -> that location's
    loc(callsite(#callee at #caller)) an inlined call                      -> caller's, then callee's
    loc(fused[#loc1, #loc2])          several                              -> the first one's
    loc(unknown), or none                                                  -> None

``#locN`` refers to a definition at the end of the file (`Module.locs`).
"""
from __future__ import annotations

import heapq

from .lexer import Token

Position = tuple[int, ...]


def position(loc: tuple[Token, ...], defs: dict, depth: int = 0) -> Position | None:
    """The (line, column, ...) a location resolves to, or None when it names no file position."""
    if not loc or depth > 64:  # a definition that refers to itself: no position
        return None
    first = loc[0]
    if first.kind == "attr":
        return position(defs.get(first.text, ()), defs, depth + 1)
    if first.kind == "string" and len(loc) >= 5 and loc[1].is_(":") and loc[3].is_(":"):
        try:
            return int(loc[2].text), int(loc[4].text)
        except ValueError:
            return None
    if first.kind == "string" and len(loc) >= 3 and loc[1].is_("("):  # a name around a location
        return position(_inside(loc, 1), defs, depth + 1)
    if first.is_("callsite") and len(loc) >= 3:
        inner = _inside(loc, 1)
        at = next((k for k, t in enumerate(inner) if t.is_("at")), None)
        if at is None:
            return None
        caller, callee = position(inner[at + 1:], defs, depth + 1), position(inner[:at], defs, depth + 1)
        return None if caller is None else caller + (callee or ())
    if first.is_("fused"):
        k = 1
        if k < len(loc) and loc[k].is_("<"):  # fused<"metadata">[...]
            while k < len(loc) and not loc[k].is_(">"):
                k += 1
            k += 1
        return position(_first_item(_inside(loc, k)) if k < len(loc) else (), defs, depth + 1)
    return None


def _inside(toks: tuple[Token, ...], k: int) -> tuple[Token, ...]:
    """The tokens inside the bracket that opens at toks[k] (to the end if it never closes)."""
    depth = 0
    for j in range(k, len(toks)):
        if toks[j].kind == "punct" and toks[j].text in "([{<":
            depth += 1
        elif toks[j].kind == "punct" and toks[j].text in ")]}>":
            depth -= 1
            if depth == 0:
                return toks[k + 1:j]
    return toks[k + 1:]


def _first_item(toks: tuple[Token, ...]) -> tuple[Token, ...]:
    """The tokens before the first ',' outside brackets."""
    depth = 0
    for j, t in enumerate(toks):
        if t.kind == "punct" and t.text in "([{<":
            depth += 1
        elif t.kind == "punct" and t.text in ")]}>":
            depth -= 1
        elif depth == 0 and t.is_(","):
            return toks[:j]
    return toks


def name(loc: tuple[Token, ...], defs: dict, depth: int = 0) -> str | None:
    """The Python variable a location names (``loc("acc"(#loc14))`` -> ``acc``), if any: Triton names
    an op's location after the variable it assigns, also for ops that have no result to name."""
    if not loc or depth > 64:
        return None
    first = loc[0]
    if first.kind == "attr":
        return name(defs.get(first.text, ()), defs, depth + 1)
    if first.kind == "string" and len(loc) >= 3 and loc[1].is_("("):
        return first.text[1:-1] or None
    return None


def names(loc: tuple[Token, ...], defs: dict) -> list[str]:
    """Every name of a chain of named locations, outermost first: Triton names an `scf.for` after each
    variable the loop carries, ``loc("acc"(#l))`` with ``#l = loc("l_i"(...))``..."""
    out = []
    for _ in range(256):
        if not loc:
            break
        first = loc[0]
        if first.kind == "attr":
            loc = defs.get(first.text, ())
        elif first.kind == "string" and len(loc) >= 3 and loc[1].is_("("):
            out.append(first.text[1:-1])
            loc = loc[2:-1]
        else:
            break
    return out


def source_order(items, deps, key) -> list | None:
    """`items` topologically sorted: each after the items in its `deps[item]`, and among the items
    ready at once the least `key[item]` first (a tuple ending with the item: its source position,
    then the item). None where the dependences have a cycle. `deps` is left as it is."""
    pending = {i: set(deps[i]) for i in items}
    users: dict = {}
    for i, ds in pending.items():
        for d in ds:
            users.setdefault(d, []).append(i)
    ready = [key[i] for i in items if not pending[i]]
    heapq.heapify(ready)
    order = []
    while ready:
        *_, i = heapq.heappop(ready)
        order.append(i)
        for u in users.get(i, []):
            pending[u].discard(i)
            if not pending[u]:
                heapq.heappush(ready, key[u])
    return order if len(order) == len(items) else None


def files(loc: tuple[Token, ...], defs: dict, depth: int = 0) -> set[str]:
    """Every source file a location names, through names, call sites (callee and caller) and fused
    lists: where an op inlined from Triton's own library (``triton/language/random.py``) came from."""
    if not loc or depth > 64:
        return set()
    out: set[str] = set()
    for k, t in enumerate(loc):
        if t.kind == "attr" and t.text in defs:
            out |= files(defs[t.text], defs, depth + 1)
        elif t.kind == "string" and k + 1 < len(loc) and loc[k + 1].is_(":"):
            out.add(t.text.strip('"'))
    return out
