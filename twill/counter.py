"""The counter of a `rand` op (twill/vocab.py): which Philox counter each element of its tile draws.

    r = rand : f32[64,128] {seed = seed, row = extent, col = 1[, batch = B][, base = K][, rounds = N]}

Element (i, j) of the tile draws Triton's Philox stream (twill/philox.py) at the counter

    row * (g0 + i) + col * (l0 + j) + batch * b + base        (mod 2^32)

with g0 the tile's first row along the grid's rows, l0 its first element along the loop (iteration x step), b
the batch entry, and `seed` a prologue scalar (`scalar seed : i64`, given at launch). Each coefficient (row, col,
batch, base) is an integer, or a sum of products of integers and names (`N_CTX*N_CTX`, `2*M + 1`), each name an
i32 prologue scalar given at launch or `extent`: the loop's whole extent, the number of elements of a row along
the loop (a flat map's row length, docs/ttgir-import.md, section 8). This module reads, checks and prints those
expressions and writes them in C++; the import makes them (ttgir/draw.py), emit-cuda computes them
(emit/rand.py).
"""
from __future__ import annotations

import re

EXTENT = "extent"  # the loop's whole extent (emit/rand.py: the row's elements along the loop)
TERMS = ("row", "col", "batch", "base")  # the counter's coefficients, in the order a `rand` op writes them
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")

Poly = tuple  # ((names, integer coefficient), ...): names a sorted tuple, no zero coefficient, sorted


def poly(value) -> Poly | None:
    """A coefficient (an int, or its text) as a polynomial of names; None where it is neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return (((), value),) if value else ()
    if not isinstance(value, str) or not value.strip() or re.search(r"\w\s+\w", value):
        return None
    terms: dict = {}
    text = value.replace(" ", "")
    if text[0] not in "+-":
        text = "+" + text
    for sign, body in re.findall(r"([+-])([^+-]+)", text):
        coef, names = 1 if sign == "+" else -1, []
        for factor in body.split("*"):
            if re.fullmatch(r"\d+", factor):
                coef *= int(factor)
            elif _NAME.match(factor):
                names.append(factor)
            else:
                return None
        key = tuple(sorted(names))
        terms[key] = terms.get(key, 0) + coef
    if "".join(s + b for s, b in re.findall(r"([+-])([^+-]+)", text)) != text:
        return None
    return tuple(sorted((k, c) for k, c in terms.items() if c))


def text(p: Poly) -> int | str:
    """A polynomial as a `.tir` value: an int where it is a constant, else `N_CTX*N_CTX + 2*M - 1`."""
    if not p:
        return 0
    if len(p) == 1 and p[0][0] == ():
        return p[0][1]
    out = ""
    for names, c in sorted(p, key=lambda t: (t[0] == (), t[0])):  # the constant last
        factors = ([str(abs(c))] if abs(c) != 1 or not names else []) + list(names)
        term = "*".join(factors)
        out += (" - " if c < 0 else " + ") + term if out else ("-" if c < 0 else "") + term
    return out


def names(value) -> list[str]:
    """The names a coefficient reads (EXTENT included), in order."""
    p = poly(value) or ()
    out: list[str] = []
    for ns, _ in p:
        out += [n for n in ns if n not in out]
    return out


def cxx(value, name_expr) -> str:
    """A coefficient as a C++ expression of uint32_t (wrapping as Triton's i32 offsets do): `name_expr(NAME)` is
    each name's."""
    p = poly(value) or ()
    if not p:
        return "0u"
    terms = []
    for ns, c in p:
        factors = [f"{c % (1 << 32)}u"] if c != 1 or not ns else []
        factors += [f"static_cast<uint32_t>({name_expr(n)})" for n in ns]
        terms.append(" * ".join(factors))
    return "(" + " + ".join(terms) + ")"


def check(attrs: dict) -> str | None:
    """Why a rand op's counter attributes are malformed (None where they are not)."""
    seed = attrs.get("seed")
    if not isinstance(seed, str) or not _NAME.match(seed) or seed == EXTENT:
        return f"seed = {seed}: the seed is a prologue scalar (`scalar NAME : i64`), named here"
    if "row" not in attrs or "col" not in attrs:
        return "a rand's counter needs its row and col coefficients"
    for key in TERMS:
        if key in attrs and poly(attrs[key]) is None:
            return (f"{key} = {attrs[key]!r}: a coefficient is an integer, or a sum of products of integers and "
                    f"names (i32 prologue scalars, or {EXTENT}: the loop's whole extent), as \"N*N + 1\"")
    rounds = attrs.get("rounds", 10)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= 64:
        return f"rounds = {rounds}: Philox's rounds are an integer from 1 to 64 (Triton's default 10)"
    return None


__all__ = ["EXTENT", "TERMS", "check", "cxx", "names", "poly", "text"]
