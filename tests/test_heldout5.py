"""The fifth held-out batch (bench/heldout/kernels5.py, dumped by `bench/heldout/gen.py --module kernels5`
with Triton 3.9 and 3.6, before and after the pipeliner, sm_90 and sm_100: tests/data/ttgir/heldout5):
causal attention in one key loop, MLA-style attention (two dots into the scores), a tl.split epilogue,
W8A16, a 3x3 NHWC conv2d as an implicit GEMM, fused LoRA, varlen attention (cu_seqlens), paged attention
(a block table), an fp8-output GEMM with an amax, attention storing its logsumexp.

- every form of a kernel imports to the graph of its first form, or is refused with a located error
  naming the construct (`REFUSED`), never a traceback;
- the silent-wrong imports the batch showed, each with the construct that is now right or refused;
- the dumps that import go import -> solve -> verify -> emit-cuda -> nvcc with no spill.
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import emitted_and_built, nvcc, refused_at_its_line
from twill.emit import emit_cuda
from twill.errors import InputError
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.tir import print_tir
from twill.ttgir import import_ttgir, load_ttgir
from twill.verify import verify

DATA = Path(__file__).parent / "data" / "ttgir" / "heldout5"
FORMS = ("t39/prepipe", "t39/after", "t36/prepipe", "t36/after")
NAMES = sorted(p.stem for p in (DATA / "t36" / "prepipe").glob("*.ttgir"))

DIVISION = "integer division of the tile's indices"
# kernel -> (a regex of the TTGIR op the import stops at, a regex of what the message says): every form
REFUSED = {
    # `if start_m * BLOCK_M >= seq_len: return`: a cf.cond_br; (without it, the cu_seqlens start in
    # every address would be the gather error below)
    "attn_varlen": (r"cf\.cond_br", "branches the kernel's body into 3 blocks"),
    # the K and V pages from the block table, loaded in the loop
    "attn_paged": (r"tt\.load|async_copy_global_to_local", "computed from a value loaded from memory"),
    # A's rows (n, oh + kh - 1, ow + kw - 1) from // and %; after the pipeliner the border mask is met first
    "conv2d_nhwc": (r"tt\.load|async_copy_global_to_local", f"{DIVISION}|which is not a bound of the tensor's edge"),
    # acc += dot(xa, B_lora) after the loop
    "gemm_lora": (r"warp_group_dot|tc_gen5_mma", "the epilogue has no op for it|outside any loop is not imported"),
}
# one graph per Triton version: Triton 3.6 on sm_100 copies the first dot's S into tensor memory
# before the second dot accumulates into it (`convert qk : @tmem`), 3.9 accumulates in place
PER_VERSION = {"attn_mla_sm100"}


def _key(name: str) -> str:
    return name.rsplit("_sm", 1)[0]


def _read(form: str, name: str) -> str:
    return (DATA / form / f"{name}.ttgir").read_text()


def test_the_batch_is_all_there():
    assert len(NAMES) == 20
    for name in NAMES:
        assert all((DATA / f / f"{name}.ttgir").exists() for f in FORMS), name


@pytest.mark.parametrize("name", NAMES)
def test_every_form_imports_to_one_graph_or_is_refused_at_its_line(name):
    first: dict[str, str] = {}
    for form in FORMS:
        path = DATA / form / f"{name}.ttgir"
        refused = REFUSED.get(_key(name))
        if refused is not None:
            refused_at_its_line(path, *refused)
            continue
        graph, notes = load_ttgir(path)
        assert not [n for n in notes if "no epilogue" in n.message or "folded away" in n.message]
        text = print_tir(graph)
        key = form.split("/")[0] if name in PER_VERSION else ""
        first.setdefault(key, text)
        assert text == first[key], form


def test_one_loop_causal_attention_is_the_plain_causal_mask_in_every_form():
    """`for start_n in range(0, (start_m + 1) * BLOCK_M, BLOCK_N)` with the causal tl.where on every
    block: `causal_mask qk` with no band attributes (d <= 0). On sm_100 after the pipeliner the loop
    computes S and its mask a block ahead (`offs_m >= iv + 64 + c`): read as is, of the key iv + c, that
    is `d <= -64`, which the loop's bounds also cover, so the import wrote `{upper = -64}` (each row's
    last 64 keys dropped); the band is now its peeled copy's, whatever the loop covers."""
    for form in FORMS:
        for arch in ("sm90", "sm100"):
            g, _ = load_ttgir(DATA / form / f"attn_causal_oneloop_{arch}.ttgir")
            masks = [op for op in g.ops if op.opcode == "causal_mask"]
            assert len(masks) == 1 and not dict(masks[0].attrs).keys() & {"upper", "lower"}, (form, arch)
    # the near miss: the loop stopping a block short of the diagonal (start_m * BLOCK_M - ...) leaves
    # keys the mask keeps unvisited: the error at the select
    text = _read("t39/prepipe", "attn_causal_oneloop_sm90")
    row0 = re.search(r"(%\w+) = arith.muli %start_m, %c128_i32 : i32", text).group(1)  # start_m * BLOCK_M
    loop = re.search(r"scf.for %start_n = %c0_i32 to (%\w+) step", text)
    short = text.replace(loop.group(0), loop.group(0).replace(f"to {loop.group(1)} ", f"to {row0} "), 1)
    assert short != text
    with pytest.raises(InputError, match="does not visit every key it keeps"):
        import_ttgir(short, "short.ttgir")


def test_an_address_from_a_loaded_value_is_an_error_not_a_dropped_scalar():
    """Paged attention: `page = tl.load(BT + seq * stride_bt + j)` in the loop, K and V read at
    `page * stride_kp + ...`. The import folded the scalar away with a warning and read K and V as
    contiguous blocks (a graph of plain attention); it is now an error at the K load naming the
    block-table load's line."""
    for form in ("t39/prepipe", "t39/after"):
        text = _read(form, "attn_paged_sm90")
        with pytest.raises(InputError, match="computed from a value loaded from memory") as err:
            import_ttgir(text, "paged.ttgir")
        msg = err.value.diagnostics[0].message
        at = int(re.search(r"at line (\d+)", msg).group(1))
        assert "tt.load" in text.splitlines()[at - 1] and "!tt.ptr<i32>" in text.splitlines()[at - 1], form


def test_an_early_return_is_an_error_at_its_branch():
    text = _read("t39/prepipe", "attn_varlen_sm90")
    with pytest.raises(InputError, match="early return") as err:
        import_ttgir(text, "varlen.ttgir")
    assert "cf.cond_br" in text.splitlines()[err.value.diagnostics[0].span.line - 1]


def test_a_split_epilogue_is_one_store_of_the_whole_tile_in_every_form():
    """The persistent tutorial's EPILOGUE_SUBTILE: the accumulator reshaped [M, 2, N/2], permuted,
    tl.split (on sm_100 after the pipeliner two `ttng.tmem_subslice`s), each half converted and
    stored to its column range: provably one store of the converted tile. (The sm_100 after forms
    had imported the f32 accumulator stored with no epilogue; then they were refused.)"""
    plain: dict[str, str] = {}
    for form in FORMS:
        for arch in ("sm90", "sm100"):
            graph, notes = load_ttgir(DATA / form / f"gemm_epi_split_{arch}.ttgir")
            assert not [n for n in notes if "no epilogue" in n.message], notes
            text = print_tir(graph)
            assert "argument C = acc" in text and "carry acc : f32[128,256]" in text, text
            # the implicit f16 store of acc: written in the halves' dtype (it had been f32, the carry's)
            assert "{output = f16}" in text and "epilogue" not in text, text
            assert text == plain.setdefault(arch, text), (form, arch)


def _edited(form: str, name: str, old: str, new: str, count: int = 1) -> str:
    text = _read(form, name)
    assert old in text, old
    return text.replace(old, new, count)


def _refused_at(text: str, op: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        import_ttgir(text, "split.ttgir")
    line = text.splitlines()[err.value.diagnostics[0].span.line - 1]
    assert op in line, line


def test_split_halves_stored_to_overlapping_columns_are_refused():
    # the second half stored 64 columns right of the first, not 128: columns 64..192 written twice
    text = _edited("t39/prepipe", "gemm_epi_split_sm90", "%cst = arith.constant dense<128> : tensor<128x128xi32",
                   "%cst = arith.constant dense<64> : tensor<128x128xi32")
    _refused_at(text, "tt.store", "not provably at the first part's address")
    # on sm_100 after the pipeliner: the subslices themselves overlap
    text = _edited("t39/after", "gemm_epi_split_sm100", "{offset = 128 : i32}", "{offset = 64 : i32}")
    _refused_at(text, "tt.store", "overlap")


def test_one_half_stored_or_halves_computed_differently_is_refused():
    text = _read("t39/prepipe", "gemm_epi_split_sm90")
    last = [ln for ln in text.splitlines() if ln.strip().startswith("tt.store")][-1]
    _refused_at(text.replace(last, ""), "tt.store", "columns 0..128 of a tile of 256")
    # the second half doubled before its conversion: the halves are two different tiles' parts
    text = _edited("t39/prepipe", "gemm_epi_split_sm90", "%5 = arith.truncf %outRHS",
                   "%dbl = arith.addf %outRHS, %outRHS : tensor<128x128xf32, #linear2> loc(#loc36)\n"
                   "    %5 = arith.truncf %dbl")
    _refused_at(text, "tt.store", "columns 128..256 of a tile of 256|columns 0..128 of a tile of 256")


def test_a_split_of_interleaved_columns_is_refused():
    """Without the permute the split halves are the even and the odd columns, not two ranges."""
    text = _edited("t39/prepipe", "gemm_epi_split_sm90", "{order = array<i32: 0, 2, 1>}", "{order = array<i32: 0, 1, 2>}")
    _refused_at(text, "tt.split", "two column ranges")
    text = _edited("t39/prepipe", "gemm_epi_split_sm90", "tensor<128x256xf32, #mma> -> tensor<128x2x128xf32",
                   "tensor<128x256xf32, #mma> -> tensor<128x128x2xf32")
    _refused_at(text, "tt.split", "two column ranges")


def test_a_division_of_the_rows_in_a_loop_load_is_an_error():
    """The conv's A rows `((n * H + oh + kh - 1) * W + ow + kw - 1) * C_IN`, n, oh, ow from // and %
    of the pixel index: with its border mask removed (a 'valid' conv would have none) the import
    read A as a plain [128, 64] tile at row pid_m * 128; the division is now the error."""
    text = _read("t39/prepipe", "conv2d_nhwc_sm90")
    m = re.search(r"tt\.load (%\w+), (%\w+), (%\w+) : (tensor<128x64x)", text)
    assert m is not None
    bare = text.replace(m.group(0), f"tt.load {m.group(1)} : {m.group(4)}", 1)
    with pytest.raises(InputError, match=DIVISION) as err:
        import_ttgir(bare, "conv.ttgir")
    assert "tt.load" in bare.splitlines()[err.value.diagnostics[0].span.line - 1]


def test_mla_scores_are_two_mmas_into_one_accumulator():
    """qk = dot(q_nope, k_nope) + dot(q_rope, k_rope): the second mma accumulates into the first
    (D 128 and 64), and the softmax reads the sum."""
    for form in FORMS:
        g, _ = load_ttgir(DATA / form / "attn_mla_sm90.ttgir")
        by = {op.name: op for op in g.ops}
        mmas = [op for op in g.ops if op.opcode == "mma"]
        first, second = mmas[0], mmas[1]
        assert [o.name for o in second.operands][2] == first.name, form
        assert any(op.opcode == "rowmax" and op.operands[0].name == second.name for op in g.ops), form
        assert by[first.operands[1].name].type.shape == (64, 128) and by[second.operands[1].name].type.shape == (64, 64)


def test_an_mma_accumulating_a_fresh_product_does_not_run_along_the_loop(tmp_path):
    """MLA's rope scores accumulate into this iteration's `mma q, k`, not into a carry: their K (the
    rope dimension, 64 = BLOCK_N) is no loop axis. The binding took KR as [L, L] ("KR gives L = 64,
    but KR gives L = 1024" on the GPU) and the kernel read its tile at column it * 64; KR is [L, 64]
    and its TMA box starts at column 0 (emit/tensors._carried_sum)."""
    from twill.emit import build_model
    from twill.emit.binding import arguments
    from twill.emit.cuda import Renderer
    machine = load_machine("h200")
    g, _ = load_ttgir(DATA / "t36" / "prepipe" / "attn_mla_sm90.ttgir")
    schedule = solve(g, machine, SolveOptions(time_limit=60))
    dims = {a.name: a.dims for a in arguments(Renderer(build_model(schedule, machine)))}
    assert dims["KR"] == (("loop", 64), ("fixed", 64)) and dims["K"] == (("loop", 64), ("fixed", 128))
    src = emit_cuda(schedule, machine)
    loads = re.findall(r"tma_load\(sm\.ld_kr\[[^\]]*\], tm\.kr, [^,]*, ([^,]*), ", src)
    assert loads and set(loads) == {"0"}, loads


def test_the_logsumexp_is_an_epilogue_output_in_the_kernel_units():
    """`m_i += tl.math.log2(l_i)` after the loop, stored to LSE: the graph's m_i is unscaled (the
    exp2 scale folded out), so the stored value is m_i * exp2_scale + log2(l_i)."""
    for form in FORMS:
        for arch in ("sm90", "sm100"):
            g, _ = load_ttgir(DATA / form / f"attn_lse_{arch}.ttgir")
            ep = [(op.opcode, [o.name for o in op.operands]) for op in g.epilogue.ops]
            assert [e[0] for e in ep] == ["mul", "log2", "add", "div", "convert"], (form, arch)
            assert ep[0][1] == ["m_i", "exp2_scale"] and ep[1][1] == ["l_i"], (form, arch)
            assert dict(g.epilogue.outputs)["LSE"] == "m_i_add", (form, arch)


def test_w8a16_converts_the_int8_tile_in_the_loop_and_scales_after_it():
    for form in FORMS:
        g, _ = load_ttgir(DATA / form / "gemm_w8a16_sm90.ttgir")
        loads = {op.name: op for op in g.ops if op.opcode == "load"}
        conv = next(op for op in g.ops if op.opcode == "convert" and op.operands[0].name in loads)
        assert loads[conv.operands[0].name].type.dtype == "i8" and conv.type.dtype == "f16", form
        assert [op.opcode for op in g.epilogue.ops] == ["convert", "mul", "convert"], form


COMPILED = ["attn_causal_oneloop_sm90", "attn_mla_sm90", "gemm_w8a16_sm100", "attn_lse_sm90", "gemm_epi_split_sm90",
            "gemm_epi_split_sm100", "gemm_fp8_out_amax_sm90", "gemm_fp8_out_amax_sm100"]


@pytest.mark.slow
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
@pytest.mark.parametrize("name", COMPILED)
@pytest.mark.extended
def test_heldout5_dump_solves_verifies_emits_and_compiles_clean(name, tmp_path):
    machine = load_machine("b200" if name.endswith("sm100") else "h200")
    graph, _ = load_ttgir(DATA / "t36" / "prepipe" / f"{name}.ttgir", split_rows="auto")
    schedule = solve(graph, machine, SolveOptions(time_limit=60))
    assert schedule.complete
    assert verify(schedule, graph, machine) == []
    schedule, rc, err = emitted_and_built(schedule, machine, tmp_path / f"{name}.cu")  # as emit-cuda, its ptxas loop
    assert verify(schedule, graph, machine) == []
    assert rc == 0, err[-2000:]
    spills = {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)}
    assert spills <= {0}, err[-2000:]
    assert "C7515" not in err and "serialized" not in err, err[-2000:]


TMA = Path(__file__).parent / "data" / "ttgir" / "corpus" / "prepipe" / "gemm_persistent_tma_sm90.ttgir"
_WHOLE = """      %3 = arith.truncf %acc : tensor<128x128xf32, #mma> to tensor<128x128xf16, #mma> loc(#loc21)
      %4 = ttg.convert_layout %3 : tensor<128x128xf16, #mma> -> tensor<128x128xf16, #blocked1> loc(#loc22)
      tt.descriptor_store %c_desc[%off_m_4, %off_n_5], %4 : !tt.tensordesc<128x128xf16, #shared>, tensor<128x128xf16, #blocked1> loc(#loc22)
"""
_SUBTILED = """      %r = tt.reshape %acc : tensor<128x128xf32, #mma> -> tensor<128x2x64xf32, #mma> loc(#loc21)
      %t = tt.trans %r {order = array<i32: 0, 2, 1>} : tensor<128x2x64xf32, #mma> -> tensor<128x64x2xf32, #mma> loc(#loc21)
      %h0, %h1 = tt.split %t : tensor<128x64x2xf32, #mma> -> tensor<128x64xf32, #mma> loc(#loc21)
      %s0 = arith.mulf %h0, %cst2 : tensor<128x64xf32, #mma> loc(#loc21)
      %c0 = arith.truncf %s0 : tensor<128x64xf32, #mma> to tensor<128x64xf16, #mma> loc(#loc21)
      tt.descriptor_store %c_desc[%off_m_4, %off_n_5], %c0 : !tt.tensordesc<128x64xf16, #shared>, tensor<128x64xf16, #mma> loc(#loc22)
      %s1 = arith.mulf %h1, %cst2 : tensor<128x64xf32, #mma> loc(#loc21)
      %c1 = arith.truncf %s1 : tensor<128x64xf32, #mma> to tensor<128x64xf16, #mma> loc(#loc21)
      %off_h = arith.addi %off_n_5, %c64_i32 : i32 loc(#loc22)
      tt.descriptor_store %c_desc[%off_m_4, %off_h], %c1 : !tt.tensordesc<128x64xf16, #shared>, tensor<128x64xf16, #mma> loc(#loc22)
"""
_CST2 = "      %cst2 = arith.constant dense<2.000000e+00> : tensor<128x64xf32, #mma> loc(#loc21)\n"


def test_a_subtiled_descriptor_store_is_the_whole_tile_stored_by_its_coordinates():
    """The persistent tutorial's form: each half (scaled, converted) stored through the descriptor at
    column coordinate off_n and off_n + BN/2: the graph of the whole tile scaled and stored once."""
    text = TMA.read_text()
    assert _WHOLE in text
    subtiled = text.replace(_WHOLE, _CST2 + _SUBTILED)
    graph, _ = import_ttgir(subtiled, "subtiled.ttgir")
    whole, _ = import_ttgir(text.replace(_WHOLE, _WHOLE.replace(
        "%3 = arith.truncf %acc :", "%cst2 = arith.constant dense<2.000000e+00> : tensor<128x128xf32, #mma> loc(#loc21)\n"
        "      %s0 = arith.mulf %acc, %cst2 : tensor<128x128xf32, #mma> loc(#loc21)\n      %c0 = arith.truncf %s0 :")
        .replace("convert_layout %3", "convert_layout %c0")), "whole.ttgir")
    out = print_tir(graph)
    assert "s0 = mul acc    : f32[128,128] {scalar = 2.0}" in out, out
    assert out == print_tir(whole)
    # the second half 32 columns right of the first: columns 32..96 twice, 96..128 never
    shifted = subtiled.replace("%off_h = arith.addi %off_n_5, %c64_i32", "%off_h = arith.addi %off_n_5, %c32_i32") \
        .replace("%cst2 = arith.constant", "%c32_i32 = arith.constant 32 : i32 loc(#loc21)\n      %cst2 = arith.constant", 1)
    _refused_at(shifted, "tt.descriptor_store", "not provably at the first part's address")
    # a half scaled by a tile (not a scalar) is refused at the op
    tile = subtiled.replace("%s1 = arith.mulf %h1, %cst2", "%s1 = arith.mulf %h1, %h0")
    _refused_at(tile, "arith.mulf", "only elementwise ops with scalar operands")


def _quarters(offsets: tuple[int, ...]) -> str:
    """The TMA GEMM's epilogue subtiled twice (each half reshaped, permuted and split again), each
    quarter converted and stored at column coordinate off_n + offsets[q]."""
    t = "tensor<128x{}xf32, #mma>"
    lines = ["      %r = tt.reshape %acc : tensor<128x128xf32, #mma> -> tensor<128x2x64xf32, #mma> loc(#loc21)",
             "      %t = tt.trans %r {order = array<i32: 0, 2, 1>} : tensor<128x2x64xf32, #mma> -> "
             "tensor<128x64x2xf32, #mma> loc(#loc21)",
             f"      %h0, %h1 = tt.split %t : tensor<128x64x2xf32, #mma> -> {t.format(64)} loc(#loc21)"]
    for h in (0, 1):
        lines += [f"      %r{h} = tt.reshape %h{h} : {t.format(64)} -> tensor<128x2x32xf32, #mma> loc(#loc21)",
                  f"      %t{h} = tt.trans %r{h} {{order = array<i32: 0, 2, 1>}} : tensor<128x2x32xf32, #mma> -> "
                  "tensor<128x32x2xf32, #mma> loc(#loc21)",
                  f"      %q{2 * h}, %q{2 * h + 1} = tt.split %t{h} : tensor<128x32x2xf32, #mma> -> {t.format(32)} loc(#loc21)"]
    for q, off in enumerate(offsets):
        lines += [f"      %qk{q} = arith.constant {off} : i32 loc(#loc22)",
                  f"      %qo{q} = arith.addi %off_n_5, %qk{q} : i32 loc(#loc22)",
                  f"      %qc{q} = arith.truncf %q{q} : {t.format(32)} to tensor<128x32xf16, #mma> loc(#loc21)",
                  f"      tt.descriptor_store %c_desc[%off_m_4, %qo{q}], %qc{q} : !tt.tensordesc<128x32xf16, #shared>, "
                  "tensor<128x32xf16, #mma> loc(#loc22)"]
    return "\n".join(lines) + "\n"


def test_a_tile_subtiled_twice_is_the_whole_tile_stored_once():
    text = TMA.read_text()
    graph, _ = import_ttgir(text.replace(_WHOLE, _quarters((0, 32, 64, 96))), "quarters.ttgir")
    plain, _ = import_ttgir(text, "plain.ttgir")
    assert print_tir(graph) == print_tir(plain)
    # the quarters' columns are 0, 32, 64, 96 in the order of the splits: stored at 0, 64, 32, 96 they
    # are each written where another belongs
    _refused_at(text.replace(_WHOLE, _quarters((0, 64, 32, 96))), "tt.descriptor_store",
                "not provably at the first part's address")


TMA_AFTER = Path(__file__).parent / "data" / "ttgir" / "corpus" / "after" / "gemm_persistent_tma_sm90.ttgir"
_AFTER_WHOLE = """      %4 = arith.truncf %acc_21 : tensor<128x128xf32, #mma> to tensor<128x128xf16, #mma> loc(#loc22)
      ttng.async_tma_store_wait {pendings = 0 : i32, read_only} loc(#loc12)
      ttg.local_store %4, %3 : tensor<128x128xf16, #mma> -> !ttg.memdesc<128x128xf16, #shared, #smem, mutable> loc(#loc12)
      ttng.fence_async_shared {bCluster = false} loc(#loc12)
      ttng.async_tma_copy_local_to_global %c_desc_6[%off_m_9, %off_n_10] %3 : !tt.tensordesc<128x128xf16, #shared>, !ttg.memdesc<128x128xf16, #shared, #smem, mutable> loc(#loc12)
"""


def _after_halves(shift: int) -> str:
    t = "tensor<128x64x{}, #mma>"
    out = ["      %r = tt.reshape %acc_21 : tensor<128x128xf32, #mma> -> tensor<128x2x64xf32, #mma> loc(#loc22)",
           "      %t = tt.trans %r {order = array<i32: 0, 2, 1>} : tensor<128x2x64xf32, #mma> -> tensor<128x64x2xf32, "
           "#mma> loc(#loc22)",
           f"      %h0, %h1 = tt.split %t : tensor<128x64x2xf32, #mma> -> {t.format('f32')} loc(#loc22)",
           f"      %hk = arith.constant {shift} : i32 loc(#loc12)",
           "      %hn0 = arith.addi %off_n_10, %hk : i32 loc(#loc12)"]
    for h, col in ((0, "%off_n_10"), (1, "%hn0")):
        out += [f"      %hc{h} = arith.truncf %h{h} : {t.format('f32')} to {t.format('f16')} loc(#loc22)",
                "      ttng.async_tma_store_wait {pendings = 0 : i32, read_only} loc(#loc12)",
                f"      ttg.local_store %hc{h}, %3 : {t.format('f16')} -> !ttg.memdesc<128x64xf16, #shared, #smem, "
                "mutable> loc(#loc12)",
                "      ttng.fence_async_shared {bCluster = false} loc(#loc12)",
                f"      ttng.async_tma_copy_local_to_global %c_desc_6[%off_m_9, {col}] %3 : !tt.tensordesc<128x64xf16, "
                "#shared>, !ttg.memdesc<128x64xf16, #shared, #smem, mutable> loc(#loc12)"]
    return "\n".join(out) + "\n"


def test_subtiled_tma_stores_from_shared_memory_after_the_pipeliner_are_the_whole_tile():
    """After the pipeliner a descriptor store is a local_store into a staging buffer and a TMA copy
    from it: each half through the same buffer, at column coordinates off_n and off_n + 64."""
    text = TMA_AFTER.read_text()
    assert _AFTER_WHOLE in text
    graph, _ = import_ttgir(text.replace(_AFTER_WHOLE, _after_halves(64)), "after.ttgir")
    plain, _ = import_ttgir(text, "plain.ttgir")
    assert print_tir(graph) == print_tir(plain)
    _refused_at(text.replace(_AFTER_WHOLE, _after_halves(48)), "async_tma_copy_local_to_global",
                "not provably at the first part's address")


def _epilogue_numpy(graph, env: dict) -> dict:
    """The graph's epilogue evaluated in numpy over `env` (carries' last values, inputs): each op by its
    opcode (a convert to f8e4m3 saturates at +-448 and keeps the value, as the reference compares)."""
    import numpy as np
    table = {"mul": lambda x, y: x * y, "abs": np.abs, "convert": lambda x: np.clip(x, -448, 448),
             "reduce_max": None, "reduce_min": None, "reduce_sum": None}
    for op in graph.epilogue.ops:
        args = [env[o.name] for o in op.operands]
        if op.opcode.startswith("reduce_"):
            f = {"reduce_max": np.max, "reduce_min": np.min, "reduce_sum": np.sum}[op.opcode]
            env[op.name] = np.atleast_1d(f(args[0], axis=op.attr("axis")))
        else:
            env[op.name] = table[op.opcode](*args)
    return env


def test_the_fp8_amax_is_a_whole_tile_reduction_and_an_atomic_max_output():
    """`tl.atomic_max(AMAX, tl.max(tl.abs(acc)))`: the tt.reshape to 1-D and the tt.reduce are `reduce_max`
    of the rows then of those (one f32 value), and Triton's float atomic max (a `max` of the bits where the
    sign is clear, a `umin` where it is set) the output `AMAX = .. {atomic = max}`; C is (acc * scale) in
    f8e4m3. Evaluated in numpy against the kernel's formula, every form one graph."""
    import numpy as np
    from twill.tir import parse_tir
    for form in FORMS:
        for arch in ("sm90", "sm100"):
            g, _ = load_ttgir(DATA / form / f"gemm_fp8_out_amax_{arch}.ttgir")
            assert parse_tir(print_tir(g)).epilogue == g.epilogue, (form, arch)
            (name, value, kind), = g.epilogue.atomics
            assert (name, kind) == ("AMAX", "max") and dict(g.arguments)["AMAX"] == "AMAX", (form, arch)
            assert [op.opcode for op in g.epilogue.ops if op.opcode.startswith("reduce")] == ["reduce_max"] * 2
            rng = np.random.default_rng(5)
            a, b = rng.standard_normal((128, 256)), rng.standard_normal((256, 128))
            acc = sum(a[:, k:k + 64] @ b[k:k + 64] for k in range(0, 256, 64))
            env = _epilogue_numpy(g, {"acc": acc, "SCALE": np.array([16.0])})
            c = env[dict(g.epilogue.outputs)["acc"]]
            assert np.allclose(c, np.clip((a @ b) * 16.0, -448, 448)) and (abs(c) == 448).any() and (abs(c) < 448).any()
            assert env[value].shape == (1,) and np.isclose(env[value][0], np.abs(a @ b).max()), (form, arch)
            assert g.epilogue.by_name[dict(g.epilogue.outputs)["acc"]].type.dtype == "f8e4m3"


def test_one_half_of_a_float_atomic_max_or_an_atomic_on_the_tile_is_refused():
    """Triton's float atomic max is two integer atomics; one alone updates only one sign's values."""
    text = _read("t39/prepipe", "gemm_fp8_out_amax_sm90")
    umin = next(ln for ln in text.splitlines() if "tt.atomic_rmw umin" in ln)
    _refused_at(text.replace(umin, ""), "tt.atomic_rmw", "the other sign's update is missing")
    # the umin's mask the non-negative test: not Triton's lowering
    _refused_at(text.replace(umin, umin.replace("%6 :", "%7 :")), "tt.atomic_rmw umin", "not a half")
    # the reshaped tile read by anything but a reduction
    red = text.index('%2 = "tt.reduce"(%1)')
    _refused_at(text[:red] + "%2x = math.absf %1 : tensor<16384xf32, #blocked3> loc(#loc1)\n    " + text[red:],
                "math.absf", "reshaped to one dimension")


def _amax_kernel(arch: str = "sm90"):
    machine = load_machine("b200" if arch == "sm100" else "h200")
    g, _ = load_ttgir(DATA / "t36" / "prepipe" / f"gemm_fp8_out_amax_{arch}.ttgir")
    schedule = solve(g, machine, SolveOptions(time_limit=60))
    assert schedule.complete and verify(schedule, g, machine) == []
    return schedule, machine


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
def test_the_amax_is_one_atomic_per_tile_after_a_reduction_across_the_warps(tmp_path):
    """sm_90a: the tile's |acc| reduced per row (op_reduce_max), per thread and warp (rows_max, warp_max), across
    the role's warps in shared memory after its named barrier, then ONE float atomic max by the role's first
    thread (scalar_atomic.py); AMAX an f32 pointer of Args and Problem, checked non-null. Built once (nvcc -cubin):
    no spill, no serialized wgmma."""
    from conftest import nvcc_compile
    from twill.ptxas import nvcc_flags
    schedule, machine = _amax_kernel()
    text = emit_cuda(schedule, machine)
    body = text[text.index("__device__ __forceinline__ void role_mma"):text.index("// ---- the kernel:")]
    assert body.count("atomic_max_float(") == 1 and "atomicAdd" not in body
    lines = body.splitlines()
    i = next(i for i, ln in enumerate(lines) if "twill::atomic_max_float(args.AMAX, t);" in ln)
    assert re.fullmatch(r"\s*if \(threadIdx\.x % 128 == 0\) \{", lines[i - 3]), lines[i - 3]  # one thread of 128
    at = {k: next(i for i, ln in enumerate(lines) if k in ln)
          for k in ("store_out_acc(", "op_reduce_max(acc_abs_reduce_max_ep", "warp_max(twill::rows_max(",
                    "if (lane == 0) sm.red_AMAX[tile.round % 4][wi] = v;", "twill::named_sync(", "atomic_max_float(")}
    assert sorted(at.values()) == list(at.values()), at  # reduce, per warp, to shared memory, barrier, one atomic
    assert "float red_AMAX[4][32];" in text and "float* AMAX;" in text and "if (p.AMAX == nullptr)" in text
    assert "atomicMax(reinterpret_cast<int*>(p), __float_as_int(v))" in text
    assert "atomicMin(reinterpret_cast<unsigned int*>(p), __float_as_uint(v))" in text
    src = tmp_path / "amax.cu"
    src.write_text(text)
    rc, err = nvcc_compile(src, nvcc_flags(machine.arch))
    assert rc == 0, err[-2000:]
    assert {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)} <= {0}, err[-2000:]
    assert "C7515" not in err and "serialized" not in err, err[-2000:]


def test_the_amax_binding_takes_one_f32_the_caller_initializes(tmp_path):
    """The binding's AMAX: a required f32 tensor of one element (the kernel's pointer), refused missing,
    of another dtype or of more than one element."""
    import importlib.util
    from twill.emit.binding import binding_files
    from twill.emit.build import build_model
    schedule, machine = _amax_kernel()
    for path, text in binding_files(build_model(schedule, machine), str(tmp_path / "k.cu")).items():
        Path(path).write_text(text)
    spec = importlib.util.spec_from_file_location("amax_binding", tmp_path / "k.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    meta = lambda shape, dtype: mod.Meta(shape, dtype, "cuda:0", True, 1 << 20)  # noqa: E731
    given = {"SCALE": meta((1,), "float32"), "A": meta((256, 512), "bfloat16"), "B": meta((512, 384), "bfloat16"),
             "AMAX": meta((1,), "float32"), "C": None}
    plan = mod.resolve(mod.SPEC, given)
    assert (plan["tiles_m"], plan["tiles_n"], plan["shapes"]["AMAX"]) == (2, 3, (1,))
    for amax, message in ((None, "AMAX: missing"), (meta((1,), "float16"), "AMAX: expected torch.float32"),
                          (meta((2,), "float32"), "AMAX: expected shape")):
        with pytest.raises(mod.ArgumentError, match=message):
            mod.resolve(mod.SPEC, {**given, "AMAX": amax})
    text = (tmp_path / "k.py").read_text()
    assert "AMAX.numel() != 1" in text and "the caller initializes it" in text
    assert "p.AMAX = static_cast<decltype(p.AMAX)>(a.tensors[3]);" in (tmp_path / "k_entry.cu").read_text()


def test_the_sm100_amax_is_the_threads_rows_then_the_same_one_atomic():
    """sm_100a: a thread's row of the tensor-memory tile (TScal) is its rows_max; then as on sm_90a (no build here:
    the extended compiled test builds it)."""
    schedule, machine = _amax_kernel("sm100")
    text = emit_cuda(schedule, machine)
    assert "__device__ __forceinline__ float rows_max(const TScalR<R>& r) { return r.x; }" in text
    assert text.count("twill::atomic_max_float(args.AMAX, t);") == 1 and "float red_AMAX[2][32];" in text


def test_a_scalar_atomic_output_is_refused_at_emit_where_not_written():
    """A min (which a partial tile's zero padding would change) or a max of a tile that is not |carry| is refused,
    not emitted wrong."""
    from twill.emit import EmitError
    from twill.tir import parse_tir
    schedule, machine = _amax_kernel()
    for old, new, message in (("{atomic = max}", "{atomic = min}", "emits only {atomic = max}"),
                              ("acc_abs                       = abs acc", "acc_abs = neg acc", "not this one")):
        assert old in schedule.graph_tir
        edited = replace(schedule, graph_tir=schedule.graph_tir.replace(old, new))
        parse_tir(edited.graph_tir)
        with pytest.raises(EmitError, match=message):
            emit_cuda(edited, machine)
