"""Tokens of the MLIR textual form, the subset Triton prints for TTGIR.

Newlines are tokens: MLIR prints one operation per line, and the parser uses them to find where a
custom-syntax operation ends. Comments (``// ...``) and the trailing resource blob
(``{-# ... #-}``) are dropped. Every token knows its line and column so that errors can point at it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import Diagnostic, InputError, Span

_TOKEN = re.compile(r"""
    (?P<nl>\n)
  | (?P<space>[ \t\r\f]+)
  | (?P<comment>//[^\n]*)
  | (?P<resources>\{-\#.*?\#-\})
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<ssa>%[A-Za-z0-9_.$-]+(?:\#\d+)?)
  | (?P<arrow>->)
  | (?P<float>[-+]?\d+\.\d*(?:[eE][-+]?\d+)?)
  | (?P<word>-?[A-Za-z0-9_][A-Za-z0-9_.$]*)
  | (?P<attr>\#[A-Za-z_][A-Za-z0-9_.$]*)
  | (?P<type>![A-Za-z_][A-Za-z0-9_.$]*)
  | (?P<symbol>@(?:[A-Za-z_][A-Za-z0-9_.$]*|"(?:[^"\\\n]|\\.)*"))
  | (?P<block>\^[A-Za-z0-9_.$-]+)
  | (?P<punct>[()\[\]{}<>,:=*?+|])
""", re.VERBOSE | re.DOTALL)

OPEN = {"(": ")", "[": "]", "{": "}", "<": ">"}
CLOSE = {v: k for k, v in OPEN.items()}


@dataclass(frozen=True)
class Token:
    kind: str  # nl, string, ssa, arrow, float, word, attr, type, symbol, block, punct, eof
    text: str
    line: int  # 1-based
    col: int  # 1-based

    def is_(self, text: str) -> bool:
        """True for a non-string token spelled `text` (a punctuation mark, a keyword)."""
        return self.kind != "string" and self.text == text


class Source:
    """The text of one file, split into lines so spans can quote them. `quoted`: the lines spans quote where the
    text is a rewrite of the file's, line for line (rand.py's draws, each one op on its number's line)."""

    def __init__(self, text: str, file: str, quoted: list[str] | None = None):
        self.text, self.file = text, file
        self.lines = text.split("\n")
        self.quoted = quoted if quoted is not None else self.lines

    def span(self, tok: Token, length: int | None = None) -> Span:
        line = self.quoted[tok.line - 1] if 0 < tok.line <= len(self.quoted) else ""
        return Span(self.file, tok.line, tok.col, line, max(1, length or len(tok.text)))

    def error(self, message: str, tok: Token, hint: str | None = None) -> InputError:
        return InputError(Diagnostic(message, self.span(tok), hint))


def tokenize(src: Source) -> list[Token]:
    """All tokens of `src`, ending with one `eof` token; an unknown character is a located error."""
    text, out, pos, line, line_start = src.text, [], 0, 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            bad = Token("bad", text[pos], line, pos - line_start + 1)
            what = "unterminated string" if text[pos] == '"' else f"unexpected character '{text[pos]}'"
            raise src.error(what, bad)
        kind = m.lastgroup
        if kind not in ("space", "comment", "resources"):
            out.append(Token(kind, m.group(), line, pos - line_start + 1))
        newlines = m.group().count("\n")
        if newlines:
            line += newlines
            line_start = m.start() + m.group().rfind("\n") + 1
        pos = m.end()
    out.append(Token("eof", "", line, pos - line_start + 1))
    return out
