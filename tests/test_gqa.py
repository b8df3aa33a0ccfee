"""Grouped-query attention (twill/emit/batch_groups.py): K and V shared by groups of query heads.

Without a GPU: which tensors the rule lets share, what the emitted kernel reads (tile b's K/V
entry b / group), the binding reading the group off the shapes (Q [B, Hq, N, D], K and V
[B, Hkv, N, D], Hq % Hkv == 0) with an ArgumentError naming the tensor otherwise, and the entry
point passing it. On the GPU: tests/test_gpu.py runs it against a reference.
"""
from __future__ import annotations

import re

import pytest

from test_binding import GOLDEN, module, meta

from twill.emit.batch_groups import shareable
from twill.emit.model import GlobalTensor

FWD = "attention_fwd_hopper.h200"


def gqa(mod, q=(2, 8, 512, 128), k=(2, 2, 1024, 128), v=(2, 2, 1024, 128), acc=None):
    given = {"q": meta(mod, q), "k": meta(mod, k), "v": meta(mod, v)}
    if acc is not None:
        given["acc"] = meta(mod, acc)
    return mod.resolve(mod.SPEC, given)


def test_only_inputs_off_the_grid_rows_may_be_shared():
    k = GlobalTensor("k", "k", "load", "f16", (128, 128), ("loop", "fixed"))
    v = GlobalTensor("v", "v", "load", "f16", (128, 128), ("loop", "n"))
    q = GlobalTensor("q", "q", "input", "f16", (128, 128), ("m", "fixed"))
    out = GlobalTensor("out_acc", "acc", "output", "f16", (128, 128), ("m", "n"))
    once = GlobalTensor("w", "w", "load", "f16", (64, 64), ("fixed", "fixed"), per_iteration=True)
    assert [shareable(t) for t in (k, v, q, out, once)] == [True, True, False, False, False]


@pytest.mark.parametrize("hq, hkv", [(8, 8), (8, 2), (8, 1), (32, 4)])
def test_the_group_is_read_off_the_heads(hq, hkv):
    mod = module(FWD)
    plan = gqa(mod, q=(2, hq, 512, 128), k=(2, hkv, 1024, 128), v=(2, hkv, 1024, 128))
    names = [a["name"] for a in mod.SPEC["args"]]
    groups = dict(zip(names, plan["groups"]))
    assert groups == {"q": 1, "k": hq // hkv, "v": hq // hkv, "m": 1, "l": 1, "acc": 1}
    assert plan["batch"] == 2 * hq and plan["shapes"]["acc"] == (2, hq, 512, 128)


@pytest.mark.parametrize("k, message", [
    ((2, 3, 1024, 128), r"^k: 3 heads \(its last batch dimension, shape \[2, 3, 1024, 128\]\) do not divide q's 8: "
                        r"grouped-query attention needs Hq % Hkv == 0"),
    ((1, 2, 1024, 128), r"^k: batch dimensions \[1, 2\] differ from q's \[2, 8\] other than in the last"),
    ((4, 1024, 128), r"^k: batch dimensions \[4\] differ from q's \[2, 8\]"),
])
def test_heads_that_do_not_group_are_named(k, message):
    mod = module(FWD)
    with pytest.raises(mod.ArgumentError, match=message):
        gqa(mod, k=k)


def test_the_output_and_query_keep_their_batch():
    """Only K and V may have fewer heads: an output with fewer is refused as before."""
    mod = module(FWD)
    with pytest.raises(mod.ArgumentError, match=r"^acc: batch dimensions \[2, 2\] differ from q's \[2, 8\]"):
        gqa(mod, acc=(2, 2, 512, 128))


def test_the_kernel_reads_kv_entry_b_over_the_group():
    text = (GOLDEN / f"{FWD}.cu").read_text()
    loads = re.findall(r"tma_load\([^;]*tm\.(\w+),[^;]*, ([^,;]+)\);", text)
    assert {t: {b for u, b in loads if u == t} for t in ("q0", "k", "v")} == {
        "q0": {"tile.b"}, "k": {"twill_b_k"}, "v": {"twill_b_v"}}
    assert text.count("const int twill_b_k = tile.b / args.k_batch_group;") == 1  # the load warp's, once per tile
    assert "if (p.k_batch_group < 1 || p.batch % p.k_batch_group != 0) return cudaErrorInvalidValue;" in text
    entry = (GOLDEN / f"{FWD}_entry.cu").read_text()
    assert "p.k_batch_group = batch_groups[1];" in entry and "p.v_batch_group = batch_groups[2];" in entry
