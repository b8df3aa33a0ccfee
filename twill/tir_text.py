"""The lexical layer of `.tir`, shared by the loop's parser (twill.tir) and the epilogue's
(twill.tir_epilogue): tokens, the cursor over one source line, numbers and attribute values with
their rules, and the printing of ops and values.
"""
from __future__ import annotations

import math
import re
from typing import NamedTuple

from . import MAX_COUNT
from .errors import Diagnostic, InputError, Span
from .ir import NAME_PATTERN, NOT_WRITTEN, OUTPUT_DTYPES, Op

NAME = NAME_PATTERN
TOKEN = re.compile(r"""
    (?P<space>\s+) | (?P<comment>\#.*)
  | (?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![A-Za-z0-9_.])|[-+]inf\b)
  | (?P<badnumber>[-+]?[\d.][A-Za-z0-9_.]*)
  | (?P<name>[A-Za-z_][A-Za-z0-9_.]*) | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<punct>[=:,\[\]{}@*/]) | (?P<bad>.)
""", re.VERBOSE)
INT = re.compile(r"[-+]?\d+")
KEYWORDS = ("kernel", "input", "carry", "loop", "yield", "}")
KINDS = {"input": "an input", "carry": "a carry", "result": "a body result", "scalar": "a scalar",
         "epilogue": "an epilogue result", "prologue": "a prologue result"}  # for messages


def isnumber(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# The largest integer attribute (a depth, an axis, a coefficient): twill.MAX_COUNT. A depth of 2^63 passed every
# rule and ended in an OverflowError traceback in the solver (fuzz42).

ATTR_RULES = {  # attribute -> (test of its value, what the value must be)
    "cycles": (lambda v: isnumber(v) and v >= 0, "a number >= 0"),
    "occupancy": (lambda v: isnumber(v) and v >= 0, "a number >= 0"),
    "depth": (lambda v: type(v) is int and v >= 1, "an integer >= 1"),
    "issue": (lambda v: v in ("warp", "warp_group"), "'warp' or 'warp_group'"),
    "async": (lambda v: isinstance(v, bool), "true or false"),
    "variable_latency": (lambda v: isinstance(v, bool), "true or false"),
    "unit": (lambda v: isinstance(v, str) and NAME.fullmatch(v) is not None, "a unit name"),
    "output": (lambda v: v in OUTPUT_DTYPES or v == NOT_WRITTEN,
               "one of " + ", ".join(OUTPUT_DTYPES) + f" or {NOT_WRITTEN} (not written)"),
    "transpose_a": (lambda v: isinstance(v, bool), "true or false"),
    "transpose_b": (lambda v: isinstance(v, bool), "true or false"),
    "axis": (lambda v: type(v) is int, "an integer (an axis; negative counts from the last)"),
    "bits": (lambda v: type(v) is int and 1 <= v <= 8, "an integer from 1 to 8"),
    "shift": (lambda v: type(v) is int and v >= 0, "an integer >= 0"),
    "scalar": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v),
               "a number, inf or -inf"),
    "divided_by": (lambda v: v == "exp2_scale", "exp2_scale (the knob the select's scalar is divided by)"),
    "pred": (lambda v: v in ("eq", "ne", "lt", "le", "gt", "ge"), "one of eq, ne, lt, le, gt, ge"),
    "rows": (lambda v: type(v) is int, "an integer (the row index's coefficient)"),
    "cols": (lambda v: type(v) is int, "an integer (the column index's coefficient)"),
    "offset": (lambda v: type(v) is int, "an integer"),
    "grid": (lambda v: type(v) is int, "an integer (the coefficient of the tile's first row along the grid)"),
    "loop": (lambda v: type(v) is int, "an integer (the coefficient of the tile's first element along the loop)"),
    "fill": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number, inf or -inf"),
    "col_stride": (lambda v: type(v) is int and v >= 1, "an integer >= 1 (elements between columns)"),
    "col_offset": (lambda v: type(v) is int and v >= 0, "an integer >= 0 (the first column's element)"),
    "iter_div": (lambda v: type(v) is int and v >= 1, "an integer >= 1 (iterations per row)"),
    "column_major": (lambda v: isinstance(v, bool), "true or false"),
    "transposed": (lambda v: isinstance(v, bool), "true or false"),
}


class Token(NamedTuple):
    kind: str  # number, name, string, punct or bad
    text: str
    col: int  # 1-based


class Line:
    """A cursor over the tokens of one source line; `fail` abandons the line with an InputError."""

    def __init__(self, file: str, number: int, text: str):
        self.file, self.number, self.text, self.pos = file, number, text, 0
        self.tokens = [Token(m.lastgroup, m.group(), m.start() + 1) for m in TOKEN.finditer(text)
                       if m.lastgroup not in ("space", "comment")]

    def span(self, tok: Token | None = None, length: int | None = None) -> Span:
        if tok is None:  # just after the last token
            last = self.tokens[-1]
            return Span(self.file, self.number, last.col + len(last.text), self.text, 1)
        return Span(self.file, self.number, tok.col, self.text, length or len(tok.text))

    def peek(self, ahead: int = 0) -> Token | None:
        return self.tokens[self.pos + ahead] if self.pos + ahead < len(self.tokens) else None

    def at(self, text: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok is not None and tok.kind != "string" and tok.text == text

    def take(self, text: str) -> bool:
        found = self.at(text)
        self.pos += found
        return found

    def expect(self, text: str, what: str | None = None) -> None:
        if not self.take(text):
            self.fail(what or f"'{text}'")

    def next(self, what: str, kinds: tuple[str, ...] = ("name",)) -> Token:
        tok = self.peek()
        if tok is None or tok.kind not in kinds:
            self.fail(what)
        self.pos += 1
        return tok

    def end(self) -> None:
        if self.peek() is not None:
            self.fail("the end of the line")

    def fail(self, what: str):
        tok = self.peek()
        if tok is not None and tok.kind == "bad":
            message = "unterminated string" if tok.text == '"' else f"unexpected character '{tok.text}'"
        elif tok is not None and tok.kind == "badnumber":
            message = f"'{tok.text}' is not a number: write it in decimal (no 0x, suffixes or separators)"
        else:
            message = f"expected {what}, found " + ("the end of the line" if tok is None else f"'{tok.text}'")
        raise InputError(Diagnostic(message, self.span(tok)))


def number(text: str) -> int | float:
    return int(text) if INT.fullmatch(text) else float(text)


def normalise_init(text: str) -> str:
    """'zero' -> '0', '+inf' -> 'inf', '007' -> '7', '1.50' -> '1.5'."""
    if text in ("inf", "+inf", "-inf", "zero"):
        return {"zero": "0", "+inf": "inf"}.get(text, text)
    return repr(number(text))


def attribute_value(tok: Token) -> object:
    if tok.kind == "number":
        return number(tok.text)
    if tok.kind == "string":
        return re.sub(r"\\(.)", r"\1", tok.text[1:-1])
    return {"true": True, "false": False}.get(tok.text, tok.text)


def print_ops(ops: tuple[Op, ...]) -> list[str]:
    name_w = max((len(op.name) for op in ops if op.has_result), default=0)
    heads = [(f"{op.name.ljust(name_w)} = " if op.has_result else "") + op.opcode
             + (" " + ", ".join(map(str, op.operands)) if op.operands else "") for op in ops]
    head_w = max((len(h) for h, op in zip(heads, ops) if op.type is not None), default=0)
    lines = []
    for head, op in zip(heads, ops):
        line = head if op.type is None else f"{head.ljust(head_w)} : {op.type}"
        if op.attrs:
            line += " {" + ", ".join(f"{k} = {print_value(v)}" for k, v in op.attrs) + "}"
        lines.append("  " + line)
    return lines


def print_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value == math.inf:
        return "+inf"  # a bare inf would read back as a name
    if isinstance(value, (int, float)):
        return repr(value)
    if NAME.fullmatch(value) and value not in ("true", "false"):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
