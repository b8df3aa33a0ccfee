"""The `.tir` line `grid split = ARG` (twill/tir_grid.py, docs/formats.md "grid lines"): read,
written back, and every misuse an error at its line."""
from __future__ import annotations

import pytest

from twill.errors import InputError
from twill.tir import parse_tir, print_tir

GRAPH = """kernel k
argument X = x
argument SPLIT_LEN
{grid}
input x : f16[64,64] @smem
carry acc : f32[64,64] = 0
loop {{
  w   = load             : f16[64,64] @smem
  acc_n = mma x, w, acc  : f32[64,64]
  yield acc = acc_n
}}
"""


def test_a_grid_split_is_read_and_written_back():
    g = parse_tir(GRAPH.format(grid="grid split = SPLIT_LEN"), "g.tir")
    assert g.split == "SPLIT_LEN"
    assert "\ngrid split = SPLIT_LEN\n" in print_tir(g)
    assert parse_tir(print_tir(g), "g.tir") == g
    assert parse_tir(GRAPH.format(grid=""), "g.tir").split is None


def test_grid_rows_is_read_and_written_back():
    """`grid rows = 16`: the kernel's rows of a tile the import padded to 64 (twill.split.pad_rows)."""
    g = parse_tir(GRAPH.format(grid="grid rows = 16"), "g.tir")
    assert g.tile_rows == 16 and g.split is None
    assert "\ngrid rows = 16\n" in print_tir(g)
    assert parse_tir(print_tir(g), "g.tir") == g


@pytest.mark.parametrize("line, said", [
    ("grid cols = SPLIT_LEN", "unknown grid axis 'cols'"),
    ("grid rows = SPLIT_LEN", "expected the rows of each program's tile"),
    ("grid rows = 64", "grid rows = 64, but the graph's mma tiles have 64 rows"),
    ("grid rows = 0", "'0' is no count of rows"),
    ("grid split = SPLIT_LEN\ngrid rows = 16", "'grid rows' with 'grid split'"),
    ("grid split = SPLITLEN", "'SPLITLEN' is no argument of the kernel"),
    ("grid split = X", "argument 'X' feeds 'x'"),
    ("grid split SPLIT_LEN", "'='"),
    ("grid split = SPLIT_LEN\ngrid split = SPLIT_LEN", "a second 'grid split' line"),
])
def test_a_bad_grid_line_is_an_error_at_it(line, said):
    text = GRAPH.format(grid=line)
    with pytest.raises(InputError) as err:
        parse_tir(text, "g.tir")
    d = err.value.diagnostics[0]
    assert said in d.message and text.splitlines()[d.span.line - 1].startswith("grid"), d.render()
