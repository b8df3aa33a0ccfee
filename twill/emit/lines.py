"""The text of the emitted file: an indenting line writer, and the ring-slot expression."""
from __future__ import annotations

from .windows import Inst

INDENT = "  "


class Lines:
    def __init__(self):
        self.out: list[str] = []
        self.depth = 0

    def __call__(self, *lines: str) -> None:
        for line in lines:
            self.out.append((INDENT * self.depth + line) if line else "")

    def block(self, head: str):
        return _Block(self, head)

    def text(self) -> str:
        return "\n".join(self.out) + "\n"


class _Block:
    def __init__(self, lines: Lines, head: str):
        self.lines, self.head = lines, head

    def __enter__(self):
        self.lines(self.head + " {" if self.head else "{")
        self.lines.depth += 1

    def __exit__(self, *exc):
        self.lines.depth -= 1
        self.lines("}")


def ring_slot(i: Inst, depth: int) -> str:
    """The ring slot of instance i: a constant, or an expression of the loop counter."""
    if not i.base:
        return str(i.off % depth)
    return f"({i}) % {depth}" if depth > 1 else "0"
