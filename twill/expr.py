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

NAMES = ("elements", "bytes", "M", "N", "K", "bits")
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
    parser = _Parser(source, allowed)
    if not parser.tokens:
        raise ExprError("empty expression", 1)
    tree = parser.expr()
    if parser.pos < len(parser.tokens):
        tok = parser.tokens[parser.pos]
        raise ExprError(f"unexpected '{''.join(t for t in tok[:3] if t)}'", tok[3])
    return Expr(source, tree)


class _Parser:
    """Recursive descent over one expression's tokens (number, name, symbol, column):
    expr = term (('+' | '-') term)*, term = factor (('*' | '/') factor)*,
    factor = number | name | '(' expr ')' | '-' factor, nested at most MAX_DEPTH deep."""

    def __init__(self, source: str, allowed: tuple[str, ...]):
        self.source, self.allowed = source, allowed
        self.tokens = [(m.group(1), m.group(2), m.group(3),
                        m.start() + len(m.group(0)) - len(m.group(0).lstrip()) + 1)
                       for m in _TOKEN.finditer(source) if m.group(0).strip()]
        self.pos = 0
        self.depth = 0

    def peek(self):
        return self.tokens[self.pos] if self.pos < len(self.tokens) else (None, None, None, len(self.source) + 1)

    def take(self):
        tok = self.peek()
        self.pos += 1
        return tok

    def expr(self):
        node = self.term()
        while self.peek()[2] in ("+", "-"):
            node = (self.take()[2], node, self.term())
        return node

    def term(self):
        node = self.factor()
        while self.peek()[2] in ("*", "/"):
            node = (self.take()[2], node, self.factor())
        return node

    def factor(self):
        num, name, sym, col = self.take()
        if num is not None:
            if not math.isfinite(float(num)):
                raise ExprError(f"the number {num} is too large", col)
            return ("num", float(num))
        if name is not None:
            if name not in self.allowed:
                raise ExprError(f"unknown name '{name}' in expression (allowed: {', '.join(self.allowed)})", col)
            return ("name", name)
        if sym in ("(", "-"):
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise ExprError(f"nested more than {MAX_DEPTH} deep", col)
        if sym == "(":
            node = self.expr()
            if self.take()[2] != ")":
                raise ExprError("expected ')'", self.peek()[3])
            self.depth -= 1
            return node
        if sym == "-":
            node = ("neg", self.factor())
            self.depth -= 1
            return node
        raise ExprError("expected a number, a name or '('" if sym is None else f"unexpected '{sym}'", col)


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
