"""Rows at any pitch (issue #22, twill/emit/anypitch.py): a row kernel's load whose rows are not 16 bytes apart is
read through a flat map with no staging copy; the binding passes its row stride negated (binding_runtime._layout,
_any_pitch) where the flat map keeps TMA's rules (tma_map_problems), else stages it as before. Plain Python over
the golden bindings' Metas (no solve, no torch, no GPU); the emitted text of the golden kernels (nvcc builds them
in test_fixup.py and test_seqfuse.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from test_binding import meta, module

GOLDEN = Path(__file__).parent / "golden"
BF16 = "bfloat16"


def xent():
    return module("cross_entropy_fwd_sm90.h200", GOLDEN / "fixup")


def plan_of(mod, V, R=1000, ptr=1 << 20):
    given = {"LOGITS": meta(mod, (R, V), dtype=BF16, ptr=ptr), "TARGET": meta(mod, (R,), dtype="int32"),
             "LOSS": None, "LSE": None}
    plan = mod.resolve(mod.SPEC, given)
    return dict(zip([a["name"] for a in mod.SPEC["args"]], plan["layouts"]))


def test_the_cross_entropy_logits_take_any_pitch():
    """The logits are a load at any pitch: [64 rows, 128 bf16] tiles, boxes of W = 136 (one 16-byte chunk more)."""
    arg = next(a for a in xent().SPEC["args"] if a["name"] == "LOGITS")
    assert arg["any_pitch"] == [64, 136]


@pytest.mark.parametrize("V", [50257, 781])
def test_rows_off_16_bytes_are_read_at_any_pitch_not_staged(V):
    """GPT-2's 50257 bf16 (100514 bytes a row) and 781: the row stride passed negated, the batch stride as is."""
    mod = xent()
    assert plan_of(mod, V)["LOGITS"] == ("any pitch", V, -V, 1000 * V)


def test_aligned_rows_keep_the_2d_map_and_the_old_path_stages():
    mod = xent()
    assert plan_of(mod, 32000)["LOGITS"] == ("as is", 32000, 32000, 1000 * 32000)
    assert plan_of(mod, 50264)["LOGITS"][0] == "as is"
    mod.ANY_PITCH = False
    try:
        assert plan_of(mod, 50257)["LOGITS"] == ("stage", 50264, 50264, 1000 * 50264)
    finally:
        mod.ANY_PITCH = True


def test_a_start_off_16_bytes_or_a_flat_map_past_2_31_is_staged():
    mod = xent()
    assert plan_of(mod, 50257, ptr=(1 << 20) + 2)["LOGITS"][0] == "stage"
    # 50000 rows of 50257: 2.5e9 elements, past a 32-bit coordinate
    assert plan_of(mod, 50257, R=50000)["LOGITS"][0] == "stage"


def test_the_flat_map_and_its_rules():
    """The flat map launch() encodes (host.py) for 1000 x 50257 bf16: one row of every element, strides padded to
    16 bytes, a box of 136; tma_map_problems names each broken rule."""
    mod = xent()
    arg = next(a for a in mod.SPEC["args"] if a["name"] == "LOGITS")
    dims, strides, box, last = mod.any_pitch_map(arg, (1000, 50257), 50257, 1000 * 50257)
    assert dims == [1000 * 50257, 1, 1] and box == [136, 1, 1] and strides == [100514000, 100514000]
    assert last == 1000 * 50257 + 65 * 50257 + 136
    assert mod.tma_map_problems(1 << 20, 2, dims, strides, box) == []
    problems = mod.tma_map_problems((1 << 20) + 2, 2, [50257, 1000], [100514], [300, 64])
    assert problems == ["the base address 0x100002 is not 16-byte aligned", "stride 1 of 100514 bytes (a multiple of "
                        "16 below 2^40)", "box extent 0 of 300 elements (1 to 256)",
                        "a box row of 300 x 2 bytes (a multiple of 16)"]
    assert mod.tma_map_problems(1 << 20, 2, [781], [], [7]) == ["a box row of 7 x 2 bytes (a multiple of 16)"]


def test_the_kernel_reads_the_flat_map_and_shifts_its_rows():
    """The emitted kernel: a ring slot of 64 x 136 bf16, the full barrier's bytes by path, tma_rows in the load
    role, rows_to_frag in the readers, the flat map in launch()."""
    text = (GOLDEN / "fixup" / "cross_entropy_fwd_sm90.h200.cu").read_text()
    assert "ld_x[2][8704]" in text and "(args.x_ap_rs != 0 ? 17408 : 16384)" in text
    assert "twill::tma_rows<__nv_bfloat16, 64, 136>(" in text
    assert "twill::rows_to_frag<__nv_bfloat16, 64, 128>(" in text
    assert "const bool x_any = p.x_row_stride < 0;" in text


def test_layernorm_781_columns_are_read_at_any_pitch():
    """The LayerNorm forward's loops (a sequence) each read X [R, 781] f16 at any pitch."""
    mod = module("layernorm_fwd_sm90.h200.L0", GOLDEN / "seqfuse")
    x = next(a for a in mod.SPEC["args"] if a.get("any_pitch"))
    given = {a["name"]: (meta(mod, (1000, 781), dtype=a["dtype"]) if a is x else None) for a in mod.SPEC["args"]
             if not a["output"] or a is x}
    for a in mod.SPEC["args"]:
        if not a["output"] and a is not x:
            given[a["name"]] = meta(mod, (781,), dtype=a["dtype"]) if a["dims"] and len(a["dims"]) == 1 else None
    lay = dict(zip([a["name"] for a in mod.SPEC["args"]], mod.resolve(mod.SPEC, {k: v for k, v in given.items()
                                                                                 if v is not None})["layouts"]))
    assert lay[x["name"]] == ("any pitch", 781, -781, 1000 * 781)
