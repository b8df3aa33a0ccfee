"""Rows TMA cannot read as boxes, read where they lie (twill/emit/unaligned.py, issue #22): a row kernel's load warp
reads such a tensor a box a row through a flat tensor map, and the binding takes it as it lies instead of staging
it into rows padded to 16 bytes.

- the binding's plan: GPT-2's vocabulary (50257 bf16 logits a row), a view x[:, :N] of such rows, a start off 16
  bytes: "as is" with their strides for the cross-entropy's logits; what the flat map cannot take (elements off
  their size, a flat row past int32, a last dimension not contiguous) and any kernel without the path (a GEMM's
  A, read by the tensor core) staged as before;
- the kernel (the fixed-up cross-entropy's golden, tests/golden/fixup): every load site has the flat branch
  beside the 2-d map's, launch() encodes the flat map only where the layout needs it, the load warp's warpgroup
  runs at ROW_REGISTERS; a GEMM's text has none of it (its golden unchanged);
- tests/test_fixup.py builds that kernel's binding with nvcc (no spill on sm_90a); bench/unaligned_gpu.py runs
  it on a GPU against torch and Triton.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from test_binding import meta, module
from test_pitch import strided
from twill.emit import unaligned

GOLDEN = Path(__file__).parent / "golden" / "fixup"
XE = "cross_entropy_fwd_sm90.h200"
BF16 = "bfloat16"


def _xe():
    spec = importlib.util.spec_from_file_location("unaligned_xe", GOLDEN / f"{XE}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _logits_layout(mod, logits, rows=1000):
    plan = mod.resolve(mod.SPEC, {"LOGITS": logits, "TARGET": meta(mod, (rows,), dtype="int32"), "LOSS": None,
                                  "LSE": None}, sizes={"V": logits.shape[-1]})
    return dict(zip([a["name"] for a in mod.SPEC["args"]], plan["layouts"]))["LOGITS"]


def test_the_logits_are_the_one_argument_read_a_box_a_row():
    mod = _xe()
    assert [a["name"] for a in mod.SPEC["args"] if a.get("unaligned")] == ["LOGITS"]
    assert not any(a.get("unaligned") for a in module("gemm_hopper.h100").SPEC["args"])  # A and B feed the mma


@pytest.mark.parametrize("how, shape, strides, ptr, want", [
    ("GPT-2's vocabulary, contiguous: rows of 100514 bytes", (1000, 50257), (50257, 1), 1 << 20,
     ("as is", 50257, 50257, 1000 * 50257)),
    ("a view x[:, :50000] of those rows", (1000, 50000), (50257, 1), 1 << 20, ("as is", 50000, 50257, 1000 * 50257)),
    ("rows of 16-byte multiples starting 2 bytes off a boundary", (1000, 32000), (32000, 1), (1 << 20) + 2,
     ("as is", 32000, 32000, 1000 * 32000)),
    ("aligned rows: the 2-d map, as before", (1000, 32000), (32000, 1), 1 << 20, ("as is", 32000, 32000, 1000 * 32000)),
    ("elements off their size (an odd address)", (1000, 50257), (50257, 1), (1 << 20) + 1,
     ("stage", 50264, 50264, 1000 * 50264)),
    ("a flat row past int32's coordinates", (50000, 50257), (50257, 1), 1 << 20,
     ("stage", 50264, 50264, 50000 * 50264)),
    ("the last dimension not contiguous", (1000, 50257), (1, 1000), 1 << 20, ("stage", 50264, 50264, 1000 * 50264)),
])
def test_rows_tma_cannot_read_as_boxes_are_taken_as_they_lie(how, shape, strides, ptr, want):
    mod = _xe()
    assert _logits_layout(mod, strided(mod, shape, strides, dtype=BF16, ptr=ptr), rows=shape[0]) == want, how


def test_a_kernel_without_the_path_still_stages():
    """The GEMM's A (read by wgmma, so no row path): rows of 781 halves are staged into rows of 784, as before."""
    mod = module("gemm_hopper.h100")
    plan = mod.resolve(mod.SPEC, {"a": meta(mod, (384, 781)), "b": meta(mod, (781, 512)), "acc": None})
    assert plan["layouts"][0] == ("stage", 784, 784, 384 * 784)


def test_the_kernel_reads_the_rows_a_box_a_row_where_its_launch_says_so():
    cu = (GOLDEN / f"{XE}.cu").read_text()
    loads = cu.count("sm.ring_x.expect_full(")
    assert loads >= 2 and cu.count("if (args.x_rows.flat) {") == loads  # every load site has both branches
    assert cu.count("twill::load_rows<__nv_bfloat16, 64, 128>(sm.ld_x[") == loads
    assert "twill::RowPitch x_rows;" in cu and "args.x_rows = x_rows;" in cu
    # the flat map only where the 2-d map cannot be encoded; the 2-d one as before otherwise
    assert "if (unaligned(p.x, 2, x_rs, x_bs)) {" in cu and "if (!encode_rows(&tm_x, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16" in cu
    assert "} else if (!encode(&tm_x, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, p.x," in cu
    assert f"twill::setmaxnreg_dec<{unaligned.ROW_REGISTERS}>();" in cu  # the load warp's warpgroup
    gemm = (Path(__file__).parent / "golden" / "emit" / "gemm_hopper.h100.cu").read_text()
    assert "load_rows" not in gemm and "encode_rows" not in gemm and "RowPitch" not in gemm
