"""Rows at any pitch (issue #22, twill/emit/anypitch.py; `emit-cuda --any-pitch`, off by default until run on a
GPU): a row kernel's load whose rows are not 16 bytes apart is read by one bulk copy a row with no staging copy; the
binding passes its row stride negated (binding_runtime._layout, _any_pitch) where its start is 16-byte aligned
(any_pitch_problems), else stages it as before. The kernels here are emitted with the option (cross-entropy from its
stored schedule, tests/data/anypitch; the LayerNorm and row_var sequences from tests/data/seq; no solve, no ptxas
loop, about a second), their .cu kept golden (tests/golden/anypitch); without the option the kernel is main's
(test_fixup's golden, byte for byte) and the binding stages. Plain Python over the bindings' Metas (no torch, no
GPU); the emitted text: every asynchronous copy's shared destination at the alignment its instruction needs (the
first version put tensor-copy boxes at 272-byte rows, which faulted on an H100)."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import nvcc
from test_binding import meta, module
from test_pitch import strided
from twill.emit import anypitch
from twill_cli.main import main

DATA = Path(__file__).parent / "data"
BF16 = "bfloat16"
XENT, LAYERNORM, ROW_VAR = "cross_entropy_fwd_sm90.h200", "layernorm_fwd_sm90.h200", "row_var_sm90.h200"
SOURCES = {XENT: DATA / "anypitch" / f"{XENT}.json", LAYERNORM: DATA / "seq" / f"{LAYERNORM}.json",
           ROW_VAR: DATA / "seq" / f"{ROW_VAR}.json"}


def _emit(folder: Path, stem: str, *more: str) -> Path:
    r = CliRunner().invoke(main, ["emit-cuda", str(SOURCES[stem]), "-o", str(folder / f"{stem}.cu"), "--binding",
                                  "torch", "--no-ptxas-loop", *more])
    assert r.exit_code == 0, r.output
    return folder


@pytest.fixture(scope="module")
def on(tmp_path_factory) -> Path:
    """The folder of the kernels and bindings emitted with --any-pitch."""
    folder = tmp_path_factory.mktemp("anypitch")
    for stem in SOURCES:
        _emit(folder, stem, "--any-pitch")
    return folder


def xent(folder: Path):
    return module(XENT, folder)


def plan_of(mod, V, R=1000, ptr=1 << 20):
    given = {"LOGITS": meta(mod, (R, V), dtype=BF16, ptr=ptr), "TARGET": meta(mod, (R,), dtype="int32"),
             "LOSS": None, "LSE": None}
    plan = mod.resolve(mod.SPEC, given)
    return dict(zip([a["name"] for a in mod.SPEC["args"]], plan["layouts"]))


def test_the_cross_entropy_logits_take_any_pitch(on):
    """The logits are a load at any pitch: [64 rows, 128 bf16] tiles, rows of W = 136 (one 16-byte chunk more)."""
    arg = next(a for a in xent(on).SPEC["args"] if a["name"] == "LOGITS")
    assert arg["any_pitch"] == [64, 136]


@pytest.mark.parametrize("V", [50257, 781])
def test_rows_off_16_bytes_are_read_at_any_pitch_not_staged(on, V):
    """GPT-2's 50257 bf16 (100514 bytes a row) and 781: the row stride passed negated, the batch stride as is."""
    mod = xent(on)
    assert plan_of(mod, V)["LOGITS"] == ("any pitch", V, -V, 1000 * V)


def test_aligned_rows_keep_the_2d_map_and_the_old_path_stages(on, monkeypatch):
    """ANY_PITCH = False, or TWILL_ANY_PITCH=0 in the environment (read at each call, so it reaches a sequence's
    loops loaded later), stages as before; the plan cache keeps the two apart."""
    mod = xent(on)
    assert plan_of(mod, 32000)["LOGITS"] == ("as is", 32000, 32000, 1000 * 32000)
    assert plan_of(mod, 50264)["LOGITS"][0] == "as is"
    mod.ANY_PITCH = False
    try:
        assert plan_of(mod, 50257)["LOGITS"] == ("stage", 50264, 50264, 1000 * 50264)
    finally:
        mod.ANY_PITCH = True
    monkeypatch.setenv("TWILL_ANY_PITCH", "0")
    assert plan_of(mod, 50257)["LOGITS"] == ("stage", 50264, 50264, 1000 * 50264)
    monkeypatch.setenv("TWILL_ANY_PITCH", "1")
    assert plan_of(mod, 50257)["LOGITS"][0] == "any pitch"


def test_a_start_off_16_bytes_is_staged_and_a_large_tensor_is_not(on):
    """A start off 16 bytes is staged (the bulk copies' chunks count from it); 50000 rows of 50257 (2.5e9 elements,
    past the flat map's 32-bit coordinates of the first version) need no map and are read at any pitch."""
    mod = xent(on)
    assert plan_of(mod, 50257, ptr=(1 << 20) + 2)["LOGITS"][0] == "stage"
    assert plan_of(mod, 50257, R=50000)["LOGITS"][0] == "any pitch"
    arg = next(a for a in mod.SPEC["args"] if a["name"] == "LOGITS")
    assert mod.any_pitch_problems(arg, (1000, 50257), 50257, (1 << 20) + 2) == [
        "the base address 0x100002 is not 16-byte aligned"]
    assert mod.any_pitch_problems(arg, (1000, 50257), 50000, 1 << 20) == [
        "rows 50000 elements apart, shorter than a row of 50257"]


# -- the emitted kernels: each copy's shared destination at its instruction's alignment ----------------------

# (the CUDA C++ Programming Guide's TMA table: cp.async.bulk.tensor's shared destination 128-byte aligned; the
# PTX ISA: cp.async.bulk's global source and shared destination 16-byte aligned, its size a multiple of 16)
TENSOR_COPY_ALIGN, BULK_COPY_ALIGN = 128, 16
ESIZE = {"__nv_bfloat16": 2, "__half": 2, "float": 4}
KERNELS = [f"{XENT}.cu", f"{LAYERNORM}.L0.cu", f"{LAYERNORM}.L1.cu", f"{LAYERNORM}.fused.cu", f"{ROW_VAR}.L0.cu"]


@pytest.mark.parametrize("name", KERNELS)
def test_the_kernels_with_rows_at_any_pitch_match_golden(on, golden, name):
    """Each kernel emitted with --any-pitch, byte for byte (tests/golden/anypitch)."""
    golden(f"anypitch/{name}", (on / name).read_text())


def _function(text: str, name: str) -> str:
    """The body of the runtime function `name` in an emitted kernel's text."""
    start = text.index(f" {name}(")
    return text[start:text.index("\n}\n", start)]


@pytest.mark.parametrize("name", KERNELS)
def test_each_row_of_a_slot_is_copied_to_an_address_its_copy_allows(on, name):
    """The header's row copier writes row r at r * W * sizeof(T) bytes into the slot: with W * sizeof(T) not a
    multiple of 128 (272 bytes for 136 bf16), only a non-tensor bulk copy may write there (a tensor copy there was
    the H100's "misaligned address"); each instantiation's rows at 16-byte multiples (anypitch.row_offsets), its
    slot a multiple of 128 bytes, so every slot of the ring (1024-byte aligned) still takes the 2-d map's boxes."""
    text = (on / name).read_text()
    body = _function(text, "bulk_rows")
    assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" in body
    assert "cp.async.bulk.tensor" not in body and "tma_load" not in body
    assert "r * static_cast<uint32_t>(W * sizeof(T))" in body  # row r's destination
    calls = set(re.findall(r"twill::bulk_rows<(\w+), (\d+), (\d+)>\((sm\.ld_\w+)\[", text))
    assert calls
    for ctype, rows, w, slot in calls:
        esize, rows, w = ESIZE[ctype], int(rows), int(w)
        assert (w * esize) % BULK_COPY_ALIGN == 0 and (w * esize) % TENSOR_COPY_ALIGN != 0
        decl = re.search(rf"alignas\(1024\) {ctype} {slot[3:]}\[(\d+)\]\[(\d+)\];", text)
        assert decl and int(decl[2]) == rows * w and (rows * w * esize) % TENSOR_COPY_ALIGN == 0


def test_row_offsets_are_what_the_bulk_copies_allow():
    m_rows, w = 64, 136
    t = type("T", (), {"tile": (m_rows, 128), "dtype": "bf16"})
    offs = anypitch.row_offsets(t)
    assert offs[:3] == [0, 272, 544] and len(offs) == m_rows and w * 2 == 272
    assert all(o % anypitch.ROW_ALIGN == 0 for o in offs) and any(o % TENSOR_COPY_ALIGN for o in offs)


@pytest.mark.parametrize("name", KERNELS)
def test_every_tensor_copy_lands_at_a_128_byte_multiple(on, name):
    """Every twill::tma_load: into a slot (1024-byte aligned), or the slot plus a constant multiple of 128 bytes."""
    text = (on / name).read_text()
    dsts = re.findall(r"twill::tma_load\(([^,]+),", text)
    assert dsts
    for d in dsts:
        off = re.fullmatch(r"reinterpret_cast<char\*>\(sm\.\w+\[[^\]]+\]\) \+ (\d+)", d)
        assert off or re.fullmatch(r"sm\.\w+(\[[^\]]+\])?", d), d
        assert not off or int(off[1]) % TENSOR_COPY_ALIGN == 0, d


def test_the_readers_load_one_element_at_a_time(on):
    """rows_to_frag reads a row that starts at any element boundary: through `const T*`, one element a load (a
    wider load at a 2-byte offset is a misaligned address), never through a cast to a wider type."""
    body = _function((on / f"{XENT}.cu").read_text(), "rows_to_frag")
    assert "const T* base = static_cast<const T*>(tile);" in body
    assert "reinterpret_cast" not in body and "uint32_t" not in body and "float2" not in body


def _copies(first, rs, end, rows, w, esize):
    """What bulk_rows (anypitch_sm90.cuh) issues for one tile, in Python: (shared offset, global byte offset,
    bytes) a row, and the bytes it announces on the barrier."""
    k = 16 // esize
    out = []
    for r in range(rows):
        a = (first + r * rs) & ~(k - 1)
        if end - a <= 0:
            break
        out.append((r * w * esize, a * esize, min(end - a, w) * esize))
    return out, sum(c[2] for c in out)


@pytest.mark.parametrize("R, V, esize", [(1000, 50257, 2), (1000, 781, 2), (13, 781, 4), (64, 50257, 2)])
def test_the_row_copies_stay_in_the_tensor_and_bring_what_the_readers_read(R, V, esize):
    """Every copy 16-byte aligned at both ends and of a multiple of 16 bytes, none past the tensor's last 16-byte
    chunk (no zero fill: past it a bulk copy would read another allocation or fault), the bytes announced those
    issued, and every element rows_to_frag reads (valid rows and columns, shifted by s_r) inside its row's copy."""
    cols, rows = 128, 64
    k = 16 // esize
    w = cols + k
    end = -(-(R * V) // k) * k  # launch()'s NAME_end
    for tile_m in range(-(-R // rows)):
        for col0 in range(0, V, cols):
            first = tile_m * rows * V + col0
            copies, total = _copies(first, V, end, rows, w, esize)
            assert total <= rows * w * esize
            for dst, src, size in copies:
                assert dst % 16 == 0 and src % 16 == 0 and size % 16 == 0 and 0 < size <= w * esize
                assert src + size <= end * esize
            for r in range(min(rows, R - tile_m * rows)):
                e = first + r * V
                _, src, size = copies[r]
                shift = (tile_m * rows * (V % k) + col0 + r * (V % k)) % k  # the reader's (shift + r * step) & (k-1)
                assert src == (e - shift) * esize
                assert (shift + min(cols, V - col0)) * esize <= size  # the row's last valid element was brought


def test_layernorm_781_columns_are_read_at_any_pitch(on):
    """The LayerNorm forward's loops (a sequence) each read X [R, 781] f16 at any pitch."""
    mod = module(f"{LAYERNORM}.L0", on)
    x = next(a for a in mod.SPEC["args"] if a.get("any_pitch"))
    given = {a["name"]: (meta(mod, (1000, 781), dtype=a["dtype"]) if a is x else None) for a in mod.SPEC["args"]
             if not a["output"] or a is x}
    for a in mod.SPEC["args"]:
        if not a["output"] and a is not x:
            given[a["name"]] = meta(mod, (781,), dtype=a["dtype"]) if a["dims"] and len(a["dims"]) == 1 else None
    lay = dict(zip([a["name"] for a in mod.SPEC["args"]], mod.resolve(mod.SPEC, {k: v for k, v in given.items()
                                                                                 if v is not None})["layouts"]))
    assert lay[x["name"]] == ("any pitch", 781, -781, 1000 * 781)


def test_a_sequence_reads_an_odd_row_stride_at_any_pitch_in_every_loop(on, monkeypatch):
    """row_var's two loops both read X (test_pitch: a view of rows 4104 elements apart is passed as it lies): an odd
    row stride (4097) is read at any pitch in each loop, its stride negated, or with TWILL_ANY_PITCH=0 staged in
    each (as a kernel emitted without the option)."""
    def load(path):
        spec = importlib.util.spec_from_file_location(f"anypitch_{path.name[:-3].replace('.', '_')}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    seq = load(on / f"{ROW_VAR}.py")
    l0 = load(on / seq.LOOPS[0][1])
    for stride, flag, want in ((4104, "1", ("as is", 4096, 4104, 250 * 4104)),
                               (4097, "1", ("any pitch", 4096, -4097, 250 * 4097)),
                               (4097, "0", ("stage", 4096, 4096, 250 * 4096))):
        monkeypatch.setenv("TWILL_ANY_PITCH", flag)
        plans = seq.plans({"X": strided(l0, (250, 4096), (stride, 1))})
        lays = {loop: dict(zip([a["name"] for a in seq._module(f).SPEC["args"]], plans[loop]["layouts"]))
                for loop, f, _, _ in seq.LOOPS}
        assert lays["L0"]["X"] == lays["L1"]["X"] == want


def test_without_the_option_the_kernel_has_no_any_pitch_code_and_the_binding_stages(on, tmp_path):
    """emit-cuda without --any-pitch (the default): the kernel is main's (test_fixup keeps it golden), with no bulk
    copy, shifted reader or any-pitch field; no argument of the binding's spec has the "any_pitch" key, so the
    logits at 50257 columns are staged into rows of 50264, as before."""
    text = (_emit(tmp_path, XENT) / f"{XENT}.cu").read_text()
    for word in ("bulk_rows", "rows_to_frag", "_ap_", "any pitch", "anypitch"):
        assert word not in text, word
    assert "bulk_rows" in (on / f"{XENT}.cu").read_text()
    mod = xent(tmp_path)
    assert not any("any_pitch" in a for a in mod.SPEC["args"])
    assert plan_of(mod, 50257)["LOGITS"] == ("stage", 50264, 50264, 1000 * 50264)
    assert (tmp_path / f"{XENT}.cu").read_text() == (Path(__file__).parent / "golden" / "fixup" / f"{XENT}.cu").read_text()


@pytest.mark.slow
@pytest.mark.extended  # (CI's time: 6 s; --any-pitch is off by default and its emitted text is golden)
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
def test_the_cross_entropy_kernel_at_any_pitch_compiles_for_sm90a_without_warnings_or_spills(on):
    """The option's kernel is in no other test's build (the default emits main's): nvcc and ptxas on it, as
    emit-cuda's users build it (the row copier, the shifted reads, the host's launch)."""
    from test_emit import nvcc_build, warnings_in
    rc, err = nvcc_build(on / f"{XENT}.cu", "sm_90a")
    assert rc == 0, err[-2000:]
    assert warnings_in(err) == [], err[-2000:]
    spills = {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)}
    assert spills <= {0}, err[-2000:]
