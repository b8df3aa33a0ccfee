"""A row pitch (issues #21, #22): a tensor the kernel reads or writes through TMA is taken with its rows
and batch entries strided (Problem::NAME_row_stride, NAME_batch_stride; host.tpl's `encode`), and the
binding passes a strided view's strides through, or stages a layout TMA cannot read into a buffer whose
rows are padded to 16 bytes (binding_runtime._layout, plan["layouts"]). Plain Python over Metas, no torch
or GPU; the entry's and the launcher's text; tests/test_binding.py builds the entries with nvcc.
"""
from __future__ import annotations

import re
import struct

import pytest

from test_binding import files, meta, module, schedule
from twill.emit import emit_cuda
from twill.machine import load_machine

F16 = "float16"


def strided(mod, shape, strides, dtype=F16, ptr=1 << 20):
    """The Meta of a view of `shape` with `strides` (elements), as describe() reads a torch tensor."""
    dense = mod._dense(tuple(shape))
    return mod.Meta(tuple(shape), dtype, "cuda:0", tuple(strides) == dense, ptr, tuple(strides))


def gemm(mod, a, b, acc=None):
    return mod.resolve(mod.SPEC, {"a": a, "b": b, "acc": acc})


def test_a_view_of_a_wider_tensor_is_taken_as_it_lies():
    """a = x[:, :640] of a [384, 1024] f16 tensor: rows 2048 bytes apart, passed as the row stride, no copy;
    a slice of the batch too ([2, 384, 1024][..., :640]); the output allocated contiguous."""
    mod = module("gemm_hopper.h100")
    plan = gemm(mod, strided(mod, (384, 640), (1024, 1)), meta(mod, (640, 512)))
    assert plan["layouts"][0] == ("as is", 640, 1024, 384 * 1024)
    assert plan["layouts"][1] == ("as is", 512, 512, 640 * 512)
    assert plan["layouts"][2] == ("alloc", 512, 512, 384 * 512)
    plan = gemm(mod, strided(mod, (2, 384, 640), (384 * 1024, 1024, 1)), meta(mod, (2, 640, 512)))
    assert plan["layouts"][0] == ("as is", 640, 1024, 384 * 1024)
    # batch dimensions that flatten evenly: [2, 3] of a [2, 3, 400, 1024] tensor's first 384 rows
    plan = gemm(mod, strided(mod, (2, 3, 384, 640), (3 * 400 * 1024, 400 * 1024, 1024, 1)),
                meta(mod, (2, 3, 640, 512)))
    assert plan["layouts"][0] == ("as is", 640, 1024, 400 * 1024)
    # a contiguous tensor: its own strides, which the launcher's defaults would give too
    assert gemm(mod, meta(mod, (384, 640)), meta(mod, (640, 512)))["layouts"][0] == ("as is", 640, 640, 384 * 640)


def test_rows_off_16_bytes_are_staged_into_padded_rows():
    """The fused-softmax tutorial's kind of size: K = 781 f16 is 1562 bytes a row, N = 1001 f16 2002: an input
    is staged with a pitch of 784 (1568 bytes), an output not given is allocated with a pitch of 1008 and
    returned as its [..., :1001] view; one given is staged and copied back."""
    mod = module("gemm_hopper.h100")
    plan = gemm(mod, meta(mod, (384, 781)), meta(mod, (781, 1001)))
    assert plan["layouts"] == [("stage", 784, 784, 384 * 784), ("stage", 1008, 1008, 781 * 1008),
                               ("alloc", 1008, 1008, 384 * 1008)]
    assert plan["shapes"]["acc"] == (384, 1001) and plan["loop_extent"] == 781
    plan = gemm(mod, meta(mod, (384, 781)), meta(mod, (781, 1001)), meta(mod, (384, 1001)))
    assert plan["layouts"][2] == ("stage", 1008, 1008, 384 * 1008)
    # the output given as the view of a padded buffer (as the binding returns it): taken as it lies
    plan = gemm(mod, meta(mod, (384, 784)), strided(mod, (784, 500), (512, 1)), strided(mod, (384, 500), (512, 1)))
    assert plan["layouts"][1:] == [("as is", 500, 512, 784 * 512), ("as is", 500, 512, 384 * 512)]


@pytest.mark.parametrize("how, shape, strides, ptr", [
    ("the last dimension not contiguous (a transpose)", (384, 640), (1, 384), 1 << 20),
    ("a row stride off 16 bytes", (384, 640), (641, 1), 1 << 20),
    ("a start off 16 bytes", (384, 640), (640, 1), (1 << 20) + 2),
    ("batch dimensions that do not flatten", (2, 3, 384, 640), (384 * 640, 2 * 384 * 640, 640, 1), 1 << 20),
    ("a broadcast batch (stride 0)", (2, 384, 640), (0, 640, 1), 1 << 20),
    ("overlapping rows", (384, 640), (320, 1), 1 << 20),
])
def test_a_layout_tma_cannot_read_is_staged(how, shape, strides, ptr):
    mod = module("gemm_hopper.h100")
    b = meta(mod, (2, 3, 640, 512) if len(shape) == 4 else (2, 640, 512) if len(shape) == 3 else (640, 512))
    plan = gemm(mod, strided(mod, shape, strides, ptr=ptr), b)
    assert plan["layouts"][0] == ("stage", 640, 640, 384 * 640), how


def test_a_row_vector_takes_any_pitch_of_its_one_row():
    """lse [*batch, L] f32 is read through TMA one row a batch entry: 777 elements (3108 bytes) are staged with
    a pitch of 780; 776 are taken as they lie, the row stride a 16-byte multiple the map never steps by."""
    mod = module("attention_bwd_hopper.h100")
    shapes = {"k": (2, 256, 128), "v": (2, 256, 128), "q": (2, 777, 128), "do": (2, 777, 128), "lse": (2, 777),
              "dlt": (2, 777)}
    given = {n: meta(mod, s, dtype="float32" if n in ("lse", "dlt") else F16) for n, s in shapes.items()}
    plan = mod.resolve(mod.SPEC, given)
    lay = dict(zip([a["name"] for a in mod.SPEC["args"]], plan["layouts"]))
    assert lay["lse"] == lay["dlt"] == ("stage", 780, 780, 780)
    given.update(lse=meta(mod, (2, 776), dtype="float32"), dlt=meta(mod, (2, 776), dtype="float32"),
                 q=meta(mod, (2, 776, 128)), do=meta(mod, (2, 776, 128)))
    lay = dict(zip([a["name"] for a in mod.SPEC["args"]], mod.resolve(mod.SPEC, given)["layouts"]))
    assert lay["lse"] == ("as is", 776, 776, 776)


def test_a_tensor_written_with_plain_stores_is_contiguous_or_staged():
    """dk and dv are written with plain stores (no tensor map): the kernel indexes them contiguously, so a
    contiguous one is taken as it lies and any other layout is staged into a contiguous copy (no padding)."""
    mod = module("attention_bwd_hopper.h100")
    assert [a["name"] for a in mod.SPEC["args"] if not a["tma"]] == ["dk", "dv"]
    shapes = {"k": (2, 256, 128), "v": (2, 256, 128), "q": (2, 512, 128), "do": (2, 512, 128), "lse": (2, 512),
              "dlt": (2, 512)}
    given = {n: meta(mod, s, dtype="float32" if n in ("lse", "dlt") else F16) for n, s in shapes.items()}
    given["dk"] = meta(mod, (2, 256, 128), dtype="float32")
    given["dv"] = strided(mod, (2, 256, 128), (256 * 256, 256, 1), dtype="float32")
    lay = dict(zip([a["name"] for a in mod.SPEC["args"]], mod.resolve(mod.SPEC, given)["layouts"]))
    assert lay["dk"] == ("as is", 128, 0, 0) and lay["dv"] == ("stage", 128, 0, 0) and lay["dq"][0] == "alloc"


def test_the_block_holds_a_row_and_a_batch_stride_per_tensor():
    """args_format packs, after the pointers and batch groups, a row stride per tensor then a batch stride per
    tensor (twill_args' row_strides, batch_strides), read off the plan's layouts by _prepare."""
    mod = module("gemm_hopper.h100")
    assert struct.calcsize(mod.args_format(mod.SPEC)) == 8 * (13 + 4 * 3)
    assert mod._padded((2, 384, 781), 784) == (2, 384, 784)
    plan = gemm(mod, meta(mod, (384, 781)), meta(mod, (781, 512)))
    assert [x[2] for x in plan["layouts"]] + [x[3] for x in plan["layouts"]] == [784, 512, 512, 384 * 784,
                                                                                 781 * 512, 384 * 512]


def test_the_entry_passes_each_tma_tensors_strides_and_the_launcher_encodes_them(tmp_path):
    """K_entry.cu sets NAME_row_stride and NAME_batch_stride of every Problem pointer behind a TMA tensor
    (both halves of FA3's q), none of a tensor written with plain stores; the launcher's maps take them,
    0 meaning contiguous."""
    texts = files("attention_fwd_hopper.h100", tmp_path)
    entry = next(t for p, t in texts.items() if p.endswith("_entry.cu"))
    assert "int64_t row_strides[6], batch_strides[6];" in entry
    assert "static_assert(sizeof(twill_args) == 8 * 37," in entry
    assert re.search(r"p\.q0_row_stride = a\.row_strides\[0\];  p\.q0_batch_stride = a\.batch_strides\[0\];", entry)
    assert re.search(r"p\.q1_row_stride = a\.row_strides\[0\];", entry)
    assert "p.m_row_stride" not in entry and "p.l_row_stride" not in entry  # plain stores
    s = schedule("attention_fwd_hopper.h100")
    text = emit_cuda(s, load_machine(s.machine))
    assert "int64_t q0_row_stride = 0, q0_batch_stride = 0;" in text
    assert re.search(r"const uint64_t k_rs = p\.k_row_stride > 0 \? static_cast<uint64_t>\(p\.k_row_stride\) : ", text)
    assert re.search(r"encode\(&tm_k, [^;]*, k_rs, k_bs, ", text)
    assert "row_stride == o.row_stride && batch_stride == o.batch_stride" in text  # MapCache's key
    assert "m_row_stride" not in text


def test_an_output_whose_elements_overlap_is_refused_by_name():
    """An expanded output (stride 0) has no place for each element the kernel writes: an ArgumentError naming it,
    where an expanded input is staged (copied into a buffer of its own)."""
    mod = module("gemm_hopper.h100")
    with pytest.raises(mod.ArgumentError, match=r"^acc: an output whose elements overlap \(stride 0 along its "
                                                r"dimension 0, shape \[2, 384, 512\]: an expand\(\)\) cannot be written"):
        gemm(mod, meta(mod, (2, 384, 640)), meta(mod, (2, 640, 512)), strided(mod, (2, 384, 512), (0, 512, 1)))
    plan = gemm(mod, strided(mod, (2, 384, 640), (0, 640, 1)), meta(mod, (2, 640, 512)))
    assert plan["layouts"][0] == ("stage", 640, 640, 384 * 640)


def test_a_sequence_takes_a_view_in_every_loop_that_reads_it():
    """row_var's two loops both read X: the sequence's pre-pass (plans) resolves each loop with the user's tensor as
    it lies (a view of rows 4104 elements apart: its stride passed to both loops' maps) or staged in each (an odd
    row stride), and hands L0's total [M] to L1 as L0 allocates it."""
    import importlib.util
    from test_sequence import GOLDEN as SEQ

    def load(path):
        spec = importlib.util.spec_from_file_location(path.name[:-3].replace(".", "_"), path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    seq = load(SEQ / "row_var_sm90.h200.py")
    l0 = load(SEQ / seq.LOOPS[0][1])
    for stride, want in ((4104, ("as is", 4096, 4104, 250 * 4104)), (4097, ("stage", 4096, 4096, 250 * 4096))):
        plans = seq.plans({"X": strided(l0, (250, 4096), (stride, 1))})
        lays = {loop: dict(zip([a["name"] for a in seq._module(f).SPEC["args"]], plans[loop]["layouts"]))
                for loop, f, _, _ in seq.LOOPS}
        assert lays["L0"]["X"] == lays["L1"]["X"] == want
        assert lays["L0"]["total"] == ("alloc", 250, 0, 0) and lays["L1"]["total"] == ("as is", 250, 0, 0)
