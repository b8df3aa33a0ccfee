"""The join op (twill/vocab.py): W4A16's `tt.join` of its even and odd accumulators after the loop,
imported as the epilogue's `join`, and the sm_90a runtime's column interleave checked lane by lane."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from twill.ir import TensorType
from twill.tir import parse_tir, print_tir
from twill.ttgir import load_ttgir

DATA = Path(__file__).parent / "data" / "ttgir"
RUNTIME = Path(__file__).parent.parent / "twill" / "emit" / "cuda_runtime"


@pytest.mark.parametrize("path", ["corpus/prepipe/gemm_w4a16_sm90.ttgir", "corpus/after/gemm_w4a16_sm90.ttgir",
                                  "corpus/prepipe/gemm_w4a16_sm100.ttgir", "triton36/after/gemm_w4a16_sm90.ttgir"])
def test_w4a16_writes_the_join_of_its_accumulators(path):
    g, notes = load_ttgir(DATA / path)
    (join,) = g.epilogue.ops  # the truncation to f16 after it is the join's own rounding
    assert join.opcode == "join" and [o.name for o in join.operands] == ["acc_even", "acc_odd"]
    assert join.type == TensorType("f16", (128, 128)) and dict(g.epilogue.outputs) == {"C": join.name}
    assert dict(g.arguments)["C"] == "C"
    assert not [n for n in notes if "tt.join" in n.message]
    assert parse_tir(print_tir(g), "w.tir") == g


def _c(expr: str, env: dict) -> int:
    py = expr.replace("/", "//").replace("~3", "(~3)")
    return eval(py, {}, env)  # noqa: S307 (the header's own integer expressions)


def test_the_sm90_join_reads_each_column_from_the_lane_that_holds_it():
    """Element i of lane L holds column 8 (i >> 2) + 2 (L % 4) + (i & 1) of its row (sm90.cuh's
    frag_col); the join's column c is x's column c / 2 (c even) or y's. The shuffle source and
    element the header computes hold exactly that column, in the same row."""
    text = (RUNTIME / "join_sm90.cuh").read_text()
    decl = re.search(r"const int blk = (.+?), h = (.+?), e = (.+?);", text).groups()
    src = re.search(r"const int src = (.+?);", text).group(1)
    pick = re.search(r"\(q & 1\) \? x1 : x0", text)
    assert pick is not None
    col = lambda i, lane: 8 * (i >> 2) + 2 * (lane % 4) + (i & 1)  # noqa: E731
    half = lambda i: (i >> 1) & 1  # noqa: E731 (the row within the lane's pair of rows)
    n = 64  # x and y are [64, 64]: 32 elements per lane; the join 64
    for lane in range(32):
        q = lane % 4
        for i in range(0, n, 2):
            env = {"i": i, "lane": lane, "q": q}
            env["blk"] = _c(decl[0], env)
            env["h"] = _c(decl[1], env)
            e = _c(decl[2], env)
            s = _c(src, env)
            got = e + (q & 1)  # the element of lane s the pick keeps
            assert s // 4 == lane // 4 and half(got) == half(i)  # same quad (rows), same row of the pair
            for k, which in ((i, 0), (i + 1, 1)):  # out element k is column 2 * c_src + which
                assert col(k, lane) == 2 * col(got, s) + which, (lane, i, k)
