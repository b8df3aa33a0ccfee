"""A safe evaluator for the machine description's cycle expressions.

Grammar (no `eval`, no attribute access, no calls)::

    expr   := term (('+' | '-') term)*
    term   := factor (('*' | '/') factor)*
    factor := NUMBER | NAME | '(' expr ')' | '-' factor

`parse_expr` returns an immutable tree of tuples; `evaluate` walks it with a dict of names.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

NAMES = ("elements", "bytes", "M", "N", "K")
_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+)|([A-Za-z_][A-Za-z0-9_]*)|(.))")


class ExprError(ValueError):
    """A malformed expression; `col` is the 1-based column of the problem."""

    def __init__(self, message: str, col: int):
        super().__init__(message)
        self.col = col


@dataclass(frozen=True)
class Expr:
    source: str
    tree: tuple

    def __call__(self, env: dict[str, float]) -> float:
        """The value in `env`; ZeroDivisionError, or ExprError when it is not a finite number."""
        value = _eval(self.tree, env)
        if not math.isfinite(value):
            raise ExprError(f"'{self.source}' evaluates to {value}, not a finite number", 1)
        return value

    @property
    def names(self) -> frozenset[str]:
        return frozenset(_names(self.tree))

    def __str__(self) -> str:
        return self.source


MAX_DEPTH = 64  # parentheses and signs nested deeper than any cost formula needs


def parse_expr(source: str | int | float, allowed: tuple[str, ...] = NAMES) -> Expr:
    if isinstance(source, (int, float)) and not isinstance(source, bool):
        if not math.isfinite(source):
            raise ExprError(f"{source} is not a finite number", 1)
        return Expr(str(source), ("num", float(source)))
    tokens = [(m.group(1), m.group(2), m.group(3), m.start() + len(m.group(0)) - len(m.group(0).lstrip()) + 1)
              for m in _TOKEN.finditer(source) if m.group(0).strip()]
    pos = 0

    def peek():
        return tokens[pos] if pos < len(tokens) else (None, None, None, len(source) + 1)

    def take():
        nonlocal pos
        tok = peek()
        pos += 1
        return tok

    def expr():
        node = term()
        while peek()[2] in ("+", "-"):
            node = (take()[2], node, term())
        return node

    def term():
        node = factor()
        while peek()[2] in ("*", "/"):
            node = (take()[2], node, factor())
        return node

    depth = 0

    def factor():
        nonlocal depth
        num, name, sym, col = take()
        if num is not None:
            if not math.isfinite(float(num)):
                raise ExprError(f"the number {num} is too large", col)
            return ("num", float(num))
        if name is not None:
            if name not in allowed:
                raise ExprError(f"unknown name '{name}' in expression (allowed: {', '.join(allowed)})", col)
            return ("name", name)
        if sym in ("(", "-"):
            depth += 1
            if depth > MAX_DEPTH:
                raise ExprError(f"nested more than {MAX_DEPTH} deep", col)
        if sym == "(":
            node = expr()
            if take()[2] != ")":
                raise ExprError("expected ')'", peek()[3])
            depth -= 1
            return node
        if sym == "-":
            node = ("neg", factor())
            depth -= 1
            return node
        raise ExprError("expected a number, a name or '('" if sym is None else f"unexpected '{sym}'", col)

    if not tokens:
        raise ExprError("empty expression", 1)
    tree = expr()
    if pos < len(tokens):
        raise ExprError(f"unexpected '{''.join(t for t in tokens[pos][:3] if t)}'", tokens[pos][3])
    return Expr(source, tree)


def _eval(node: tuple, env: dict[str, float]) -> float:
    kind = node[0]
    if kind == "num":
        return node[1]
    if kind == "name":
        return float(env[node[1]])
    if kind == "neg":
        return -_eval(node[1], env)
    a, b = _eval(node[1], env), _eval(node[2], env)
    if kind == "+":
        return a + b
    if kind == "-":
        return a - b
    if kind == "*":
        return a * b
    if b == 0:
        raise ZeroDivisionError("division by zero in a cycle expression")
    return a / b


def _names(node: tuple):
    if node[0] == "name":
        yield node[1]
    elif node[0] != "num":
        for child in node[1:]:
            yield from _names(child)
