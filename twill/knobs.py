"""Launch-time knobs computed from a kernel's scalar arguments: `knob NAME = EXPR` lines of `.tir`.

    knob := "knob" NAME "=" EXPR          EXPR := term (("*" | "/") term)*     term := NUMBER | NAME

An imported kernel's softmax is graphed in unscaled scores, and the scale the kernel multiplies them
by before its exp2 (Triton's ``qk_scale = sm_scale * 1.44269504``; for ``tl.exp``, times log2 e) is
the emitted kernel's runtime knob `exp2_scale` (`exp2 s, b` is exp2((s - b) * exp2_scale)). The knob
line records where that value comes from, as a product of the kernel's scalar arguments (`argument`
lines) and numbers: `knob exp2_scale = sm_scale * 1.4426950408889634`. The generated binding computes
it from the caller's arguments at each call (an explicit ``exp2_scale=`` still overrides); a graph
without the line takes the knob as a keyword, 1.0 by default (docs/formats.md, "knob lines").

An expression is kept as a `Product`: a coefficient times each name to an integer power, which is what
multiplying and dividing scales gives and what compares exactly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

KNOBS = ("exp2_scale",)  # the knobs a line may compute (the emitted kernel's Args fields)


@dataclass(frozen=True)
class Product:
    """coef * prod(name ** power): a scale made of scalar arguments and constants."""

    coef: float = 1.0
    powers: tuple[tuple[str, int], ...] = ()  # sorted by name, no zero power

    @staticmethod
    def of(name: str) -> "Product":
        return Product(1.0, ((name, 1),))

    @staticmethod
    def number(value: float) -> "Product":
        return Product(float(value))

    def __mul__(self, other: "Product") -> "Product":
        powers = dict(self.powers)
        for n, p in other.powers:
            powers[n] = powers.get(n, 0) + p
        return Product(self.coef * other.coef, tuple(sorted((n, p) for n, p in powers.items() if p)))

    def inverse(self) -> "Product | None":
        if self.coef == 0:
            return None
        return Product(1.0 / self.coef, tuple((n, -p) for n, p in self.powers))

    def __truediv__(self, other: "Product") -> "Product | None":
        inv = other.inverse()
        return None if inv is None else self * inv

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.powers)

    def is_one(self) -> bool:
        return not self.powers and self.coef == 1.0

    def same(self, other: "Product") -> bool:
        """Equal up to rounding of the coefficient (f32 constants folded in different orders)."""
        return self.powers == other.powers and math.isclose(self.coef, other.coef, rel_tol=1e-6)

    def text(self) -> str:
        """Canonical `.tir` text: numerator names, the coefficient (left out where it is 1 and a name
        precedes), then `/ NAME` per negative power: `sm_scale * 1.4426950408889634`."""
        up = [n for n, p in self.powers for _ in range(max(p, 0))]
        down = [n for n, p in self.powers for _ in range(max(-p, 0))]
        parts = up + ([] if up and self.coef == 1.0 else [repr(self.coef)])
        return " * ".join(parts) + "".join(f" / {n}" for n in down)

    def python(self, names: dict[str, str]) -> str:
        """A Python expression of it over the binding's parameters (`names`: argument -> parameter)."""
        up = [f"float({names[n]})" for n, p in self.powers for _ in range(max(p, 0))]
        down = [f"float({names[n]})" for n, p in self.powers for _ in range(max(-p, 0))]
        return " * ".join(up + [repr(self.coef)]) + "".join(f" / {d}" for d in down)

    def value(self, args: dict[str, float]) -> float:
        out = self.coef
        for n, p in self.powers:
            out *= float(args[n]) ** p
        return out


def parse_product(line, what: str = "the knob's value") -> list[tuple[object, str, int]]:
    """Read EXPR from a `tir_text.Line`: [(token, op, sign)], op '*' first; the caller checks names.
    Returns the terms with the sign of their power (+1 multiplies, -1 divides)."""
    terms = []
    sign = 1
    while True:
        tok = line.next(what if not terms else "a number or an argument's name", kinds=("number", "name"))
        terms.append((tok, sign))
        if line.take("*"):
            sign = 1
        elif line.take("/"):
            sign = -1
        else:
            return terms


class KnobLines:
    """The `knob` lines of a `.tir` header (twill.tir): parsed, then checked against the `argument`
    lines once the file is read (a name must be an argument that feeds no tensor)."""

    def __init__(self, owner):
        self.owner = owner
        self.items: list[tuple[object, list]] = []  # (the knob's name token, its terms), with spans

    def line(self, line) -> None:
        line.expect("knob")
        tok = line.next("the knob's name")
        if tok.text not in KNOBS:
            self.owner.errors.error(f"unknown knob '{tok.text}': a knob line computes one of "
                                    + ", ".join(KNOBS), line.span(tok))
        line.expect("=", "'=' after the knob's name")
        terms = [(t, s, line.span(t)) for t, s in parse_product(line)]
        line.end()
        if any(t.text == tok.text for t, _ in self.items):
            self.owner.errors.error(f"knob '{tok.text}' is computed twice", line.span(tok))
        self.items.append((tok, terms))

    def check(self) -> None:
        o = self.owner
        args = {n.name: t for n, t in o.arguments.items}
        tensors = {name for name, kind in ((n, o.defined.get(t.name, (None,))[0]) for n, t in args.items() if t)
                   if kind in ("input", "carry")} | {n for n, t in args.items()
                                                      if t and t.name in {op.name for op in o.ops}}
        for _, terms in self.items:
            for tok, _, span in terms:
                if tok.kind != "name":
                    continue
                if tok.text not in args:
                    from .errors import did_you_mean
                    o.errors.error(f"'{tok.text}' is no argument of the kernel", span,
                                   did_you_mean(tok.text, args) if args else "the file has no `argument` lines: "
                                   "a knob of a hand-written graph is a number")
                elif tok.text in tensors:
                    o.errors.error(f"argument '{tok.text}' is a tensor (it feeds '{args[tok.text].name}'): a knob "
                                   "multiplies scalar arguments", span)
            for tok, _, span in terms:
                if tok.kind == "number" and not (math.isfinite(float(tok.text)) and float(tok.text) != 0):
                    o.errors.error(f"'{tok.text}' in a knob: a factor is a finite number other than 0", span)

    def build(self) -> tuple[tuple[str, Product], ...]:
        out = []
        for tok, terms in self.items:
            value = Product()
            for t, sign, _ in terms:
                f = Product.number(float(t.text)) if t.kind == "number" else Product.of(t.text)
                value = value * f if sign > 0 else value / f
            out.append((tok.text, value))
        return tuple(out)


def print_knobs(knobs) -> list[str]:
    return [f"knob {name} = {value.text()}" for name, value in knobs]
