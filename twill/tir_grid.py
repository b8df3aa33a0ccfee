"""The `grid` line of a `.tir` header: a grid axis the graph's loop is split over.

    grid := "grid" "split" "=" NAME          (NAME: an `argument` line's name that feeds nothing)

`grid split = SPLIT_LEN` says that the kernel's loop, as imported from split-KV attention's
``range(split * SPLIT_LEN, split * SPLIT_LEN + SPLIT_LEN, BLOCK_N)`` with ``split = tl.program_id(A)``,
runs over SPLIT_LEN elements of the loop's whole extent per program of a grid axis of splits, and
that every output has a leading dimension of splits over the batch (twill.ttgir.splits). The graph
is one split's loop: solving it is unchanged. emit-cuda runs the split as the outer part of the batch
index, and the binding gives the outputs their leading splits dimension (docs/formats.md, "grid
lines"; docs/emit-cuda.md, "A grid axis of splits").
"""
from __future__ import annotations

from .errors import did_you_mean

AXES = ("split",)  # the grid axes a line may name


class GridLines:
    """The `grid` line of a header (twill.tir): parsed, then checked against the `argument` lines."""

    def __init__(self, owner):
        self.owner = owner
        self.item = None  # (the argument's name token, its span)

    def line(self, line) -> None:
        line.expect("grid")
        axis = line.next("the grid axis ('split')")
        if axis.text not in AXES:
            self.owner.errors.error(f"unknown grid axis '{axis.text}': a grid line names one of " + ", ".join(AXES),
                                    line.span(axis))
        line.expect("=", "'=' after the grid axis")
        tok = line.next("the argument that gives each split's length")
        line.end()
        if self.item is not None:
            self.owner.errors.error("a second 'grid split' line: the loop is split over one grid axis", line.span(tok))
        self.item = (tok, line.span(tok))

    def check(self) -> None:
        if self.item is None:
            return
        o = self.owner
        tok, span = self.item
        args = {n.name: t for n, t in o.arguments.items}
        if tok.text not in args:
            o.errors.error(f"'{tok.text}' is no argument of the kernel: a split's length is a launch argument", span,
                           did_you_mean(tok.text, args) if args else "the file has no `argument` lines: a grid "
                           "split is read from an imported kernel's integer argument")
        elif args[tok.text] is not None:
            o.errors.error(f"argument '{tok.text}' feeds '{args[tok.text].name}': a split's length is an integer "
                           "argument that feeds nothing else", span)

    def build(self) -> str | None:
        return self.item[0].text if self.item is not None else None


def print_grid(split: str | None) -> list[str]:
    return [f"grid split = {split}"] if split else []
