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


@pytest.mark.parametrize("line, said", [
    ("grid rows = SPLIT_LEN", "unknown grid axis 'rows'"),
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
