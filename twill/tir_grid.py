"""The `grid` lines of a `.tir` header: a grid axis the graph's loop is split over, and the rows of
the kernel's tile where the graph's are padded to the tensor core's.

    grid := "grid" "split" "=" NAME          (NAME: an `argument` line's name that feeds nothing)
          | "grid" "rows" "=" INT            (INT: 1 .. the rows of the graph's mma tiles - 1)
          | "grid" "flat" "=" NAME           (NAME: an `argument` line's name that feeds nothing)

`grid split = SPLIT_LEN` says that the kernel's loop, as imported from split-KV attention's
``range(split * SPLIT_LEN, split * SPLIT_LEN + SPLIT_LEN, BLOCK_N)`` with ``split = tl.program_id(A)``,
runs over SPLIT_LEN elements of the loop's whole extent per program of a grid axis of splits, and
that every output has a leading dimension of splits over the batch (twill.ttgir.splits). The graph
is one split's loop: solving it is unchanged. emit-cuda runs the split as the outer part of the batch
index, and the binding gives the outputs their leading splits dimension (docs/formats.md, "grid
lines"; docs/emit-cuda.md, "A grid axis of splits").

`grid rows = 16` says that each program of the kernel computes 16 rows of its tensors along the grid's
rows, where the graph's tiles have more: the import padded a dot of fewer rows than the tensor core's
smallest M (GQA decode's 16 query heads of one KV head; wgmma and tcgen05 multiply 64) to 64
(twill.split.pad_rows). Each program's 16 rows are one batch entry of the emitted kernel, its tile a
partial last tile of 16 rows: TMA fills the padded rows of a load with zeros, and a store drops them.
The binding takes the kernel's tensors with their rows as the user holds them (`[B, H, D]`, H a
multiple of 16) and views them as [B, H / 16, 16, D] (docs/emit-cuda.md, "Fewer rows than the tensor
core's").

`grid flat = n_elements` says that the kernel is a flat map over elements (the Triton tutorials' vector add:
`pid * BLOCK + arange(BLOCK)` indexing every tensor's elements, twill.ttgir.flatmap): every tensor holds
n_elements elements, which the graph reads as rows of the loop's extent C (`extent loop = C`); the binding
views each contiguous tensor as [n_elements / C, C] and refuses an n_elements that is not a multiple of C.
"""
from __future__ import annotations

from .errors import did_you_mean

AXES = ("split", "rows", "flat")  # the grid axes a line may name


class GridLines:
    """The `grid` line of a header (twill.tir): parsed, then checked against the `argument` lines."""

    def __init__(self, owner):
        self.owner = owner
        self.item = None  # (the argument's name token, its span)
        self.rows = None  # (the rows, their span)
        self.flat = None  # (the argument of the elements' token, its span)

    def line(self, line) -> None:
        line.expect("grid")
        axis = line.next("the grid axis ('split', 'rows' or 'flat')")
        if axis.text not in AXES:
            self.owner.errors.error(f"unknown grid axis '{axis.text}': a grid line names one of " + ", ".join(AXES),
                                    line.span(axis))
        line.expect("=", "'=' after the grid axis")
        if axis.text == "rows":
            tok = line.next("the rows of each program's tile (an integer)", ("number",))
            line.end()
            if self.rows is not None:
                self.owner.errors.error("a second 'grid rows' line", line.span(tok))
            elif not tok.text.isdigit() or int(tok.text) < 1:
                self.owner.errors.error(f"'{tok.text}' is no count of rows: `grid rows = N` takes a positive integer",
                                        line.span(tok))
            else:
                self.rows = (int(tok.text), line.span(tok))
            return
        if axis.text == "flat":
            tok = line.next("the argument that gives the elements of every tensor")
            line.end()
            if self.flat is not None:
                self.owner.errors.error("a second 'grid flat' line", line.span(tok))
            self.flat = (tok, line.span(tok))
            return
        tok = line.next("the argument that gives each split's length")
        line.end()
        if self.item is not None:
            self.owner.errors.error("a second 'grid split' line: the loop is split over one grid axis", line.span(tok))
        self.item = (tok, line.span(tok))

    def check_rows(self, mma_rows: int | None) -> None:
        """`grid rows = N` needs N fewer than the rows of the graph's mma tiles (`mma_rows`, None where
        the loop has no mma): the padded rows are what the tensor core multiplies and nothing stores."""
        if self.rows is None:
            return
        rows, span = self.rows
        if self.item is not None:
            self.owner.errors.error("'grid rows' with 'grid split': a split kernel's rows are not padded (not built)",
                                    span)
        elif mma_rows is None or rows >= mma_rows:
            self.owner.errors.error(f"grid rows = {rows}, but the graph's mma tiles have "
                                    + (f"{mma_rows} rows: the line says how many of a tile's rows the kernel "
                                       "computes, fewer than the tile's" if mma_rows else "no rows (no mma in the loop)"),
                                    span)

    def rows_build(self) -> int | None:
        return self.rows[0] if self.rows is not None else None

    def flat_build(self) -> str | None:
        return self.flat[0].text if self.flat is not None else None

    def check(self) -> None:
        o = self.owner
        args = {n.name: t for n, t in o.arguments.items}
        if self.flat is not None:
            tok, span = self.flat
            if tok.text not in args:
                o.errors.error(f"'{tok.text}' is no argument of the kernel: a flat map's elements are a launch argument",
                               span, did_you_mean(tok.text, args) if args else None)
            elif args[tok.text] is not None:
                o.errors.error(f"argument '{tok.text}' feeds '{args[tok.text].name}': a flat map's elements are an "
                               "integer argument that feeds nothing else", span)
            elif o.arguments.loop_extent is None:
                o.errors.error("'grid flat' needs an `extent loop = C` line: the columns each tensor's elements are "
                               "viewed in", span)
        if self.item is None:
            return
        tok, span = self.item
        if tok.text not in args:
            o.errors.error(f"'{tok.text}' is no argument of the kernel: a split's length is a launch argument", span,
                           did_you_mean(tok.text, args) if args else "the file has no `argument` lines: a grid "
                           "split is read from an imported kernel's integer argument")
        elif args[tok.text] is not None:
            o.errors.error(f"argument '{tok.text}' feeds '{args[tok.text].name}': a split's length is an integer "
                           "argument that feeds nothing else", span)

    def build(self) -> str | None:
        return self.item[0].text if self.item is not None else None


def print_grid(split: str | None, rows: int | None = None, flat: str | None = None) -> list[str]:
    return ([f"grid split = {split}"] if split else []) + ([f"grid rows = {rows}"] if rows else []) \
        + ([f"grid flat = {flat}"] if flat else [])
