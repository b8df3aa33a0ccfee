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


# A ring position: where instance i of a value is in its ring. A CTA's tiles continue one another's
# positions (a persistent CTA's tile starts at `tile.pos`, the iterations of its earlier tiles,
# kernel.py), so slot and mbarrier parity stay right for any trip count per tile.
POS = "tile.pos"


def ring_pos(i) -> str:
    """The ring position of instance i (an Inst or a C expression) of this tile."""
    s = str(i)
    return POS if s == "0" else f"{POS} + {s}"


def ring_slot(i, depth: int) -> str:
    """The ring slot of instance i: the slot of its position (`ring_pos`)."""
    return f"({ring_pos(i)}) % {depth}" if depth > 1 else "0"
