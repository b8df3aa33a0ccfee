"""The ninth held-out batch (bench/heldout/kernels9.py, dumped by `bench/heldout/gen.py --module kernels9` with
Triton 3.9 and 3.6, before and after the pipeliner, sm_90 and sm_100: tests/data/ttgir/heldout9): the official
Triton tutorials not covered by earlier batches: 05's layer-norm backward (dx with its spin lock, and the dw/db
column sums), 08's grouped GEMM, 10's block-scaled (mxfp8) matmul, 04's dropout (a kept mask, and seeded with
tl.rand), 07's libdevice asin. asin imports (a flat map of the math library's asin); every other form is refused
at the TTGIR line of the construct the graph cannot hold, with a message naming it, never a traceback, an
unlocated error or a silently wrong graph.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import refused_at_its_line
from twill.errors import InputError
from twill.ttgir import import_ttgir

DATA = Path(__file__).parent / "data" / "ttgir" / "heldout9"
FORMS = ("t39/prepipe", "t39/after", "t36/prepipe", "t36/after")
NAMES = sorted(p.stem for p in (DATA / "t36" / "prepipe").glob("*.ttgir"))

_FLAT = (r"tt\.splat %block_start", "the program id indexes elements, not a row")
# kernel -> (a regex of the TTGIR op the import stops at, a regex of what the message says): every form
REFUSED = {
    # the partial dw/db added under a spin lock: `while tl.atomic_cas(Lock, 0, 1) == 1`
    "layer_norm_bwd_dx": (r"scf\.while", r"'scf\.while' \(a while loop\)"),
    # column sums after a loop over rows: tl.sum(dw, axis=0) of a [32, 128] carry
    "layer_norm_bwd_dwdb": (r'"tt\.reduce"\(', r"along axis 0 \(one value a column"),
    # the K loop's A tile from a pointer loaded from group_a_ptrs (was: an unlocated "no loop computes a tile")
    "grouped_matmul": (r"= (tt\.load|ttg\.async_copy_global_to_local) %a_ptrs",
                       "reads addresses computed from a value loaded from memory"),
    # a flat map over elements since session 32 (ttgir/flatmap.py), its select of the kept mask and 0.0 since
    # session 38 (`select ne x_keep, x_div {scalar = 0}`); then x / (1 - p): a scalar computed from an argument
    # (not a product of arguments and constants), which no op's operand holds.
    # seeded dropout's tl.rand reads the offsets as values: not a flat map
    "dropout": (r"arith\.divf %x", "neither a constant nor one of the kernel's float arguments"),
    "seeded_dropout": _FLAT,
}
IMPORTED = {"asin"}  # libdevice's asin: the math library's op (vocab.LIBM), a flat map since session 32
# block-scaled: sm_100 keeps the scaled tcgen05 mma; sm_90 emulates it, the e8m0 scales upcast by a bitcast
ARCH_REFUSED = {
    ("block_scaled_matmul", "sm100"): (r"ttng\.tc_gen5_mma_scaled", r"block-scaled dot \(`tl\.dot_scaled`"),
    ("block_scaled_matmul", "sm90"): (r"tt\.bitcast %scale_a", r"reads the bits of a i16 tile as bf16"),
}


def _key(name: str) -> tuple[str, str]:
    kernel, arch = name.rsplit("_", 1)
    return kernel, arch


def test_the_batch_is_all_there():
    assert len(NAMES) == 14
    for name in NAMES:
        assert all((DATA / f / f"{name}.ttgir").exists() for f in FORMS), name
    assert {_key(n)[0] for n in NAMES} == set(REFUSED) | {k for k, _ in ARCH_REFUSED} | IMPORTED


@pytest.mark.parametrize("name", [n for n in NAMES if _key(n)[0] not in IMPORTED])
def test_every_form_is_refused_at_its_line(name):
    kernel, arch = _key(name)
    line, message = ARCH_REFUSED.get((kernel, arch)) or REFUSED[kernel]
    for form in FORMS:
        refused_at_its_line(DATA / form / f"{name}.ttgir", line, message, sequence=True)


def test_the_grouped_gemm_is_refused_one_graph_at_a_time_too():
    """The one-graph import (`load_ttgir`, `twill solve X.ttgir`) says the same: before, the group loop
    (no tile op of its own) was taken as the graph and the error was the file's, at no line."""
    for form in FORMS:
        refused_at_its_line(DATA / form / "grouped_matmul_sm90.ttgir", *REFUSED["grouped_matmul"])


BITCAST = """\
module attributes {{"ttg.num-warps" = 4 : i32}} {{
  tt.func public @k(%X: !tt.ptr<{src}>, %Y: !tt.ptr<f32>) {{
    %c0 = arith.constant 0 : i32
    %c64 = arith.constant 64 : i32
    %c4096 = arith.constant 4096 : i32
    %zero = arith.constant dense<0.0> : tensor<64x64xf32>
    %r = scf.for %k = %c0 to %c4096 step %c64 iter_args(%acc = %zero) -> (tensor<64x64xf32>) : i32 {{
      %p = tt.splat %X : !tt.ptr<{src}> -> tensor<64x64x!tt.ptr<{src}>>
      %x = tt.load %p : tensor<64x64x!tt.ptr<{src}>>
      %f = tt.bitcast %x : tensor<64x64x{src}> -> tensor<64x64x{dst}>
      %e = arith.extf %f : tensor<64x64x{dst}> to tensor<64x64xf32>
      %s = arith.addf %acc, %e : tensor<64x64xf32>
      scf.yield %s : tensor<64x64xf32>
    }}
    %q = tt.splat %Y : !tt.ptr<f32> -> tensor<64x64x!tt.ptr<f32>>
    tt.store %q, %r : tensor<64x64x!tt.ptr<f32>>
    tt.return
  }}
}}
"""


@pytest.mark.parametrize("src, dst", [("i16", "f16"), ("f16", "bf16")])
def test_a_bitcast_to_another_number_is_refused_at_its_line(src, dst):
    """`.to(tl.float16, bitcast=True)` of an integer tile (or f16 bits read as bf16) is another value, not a
    view: it was taken for one, and the graph would have added the old numbers as if they were the new ones."""
    text = BITCAST.format(src=src, dst=dst)
    with pytest.raises(InputError) as err:
        import_ttgir(text, "bitcast.ttgir")
    d = err.value.diagnostics[0]
    assert f"reads the bits of a {src} tile as {dst}" in d.message
    assert "tt.bitcast" in text.splitlines()[d.span.line - 1]


def test_a_bitcast_to_the_same_type_is_still_a_view():
    """A bitcast that keeps the element type is the tile itself: the loop imports, no op of it for the bitcast."""
    graph, _ = import_ttgir(BITCAST.format(src="f16", dst="f16"), "bitcast.ttgir")
    assert graph.ops and not any("bitcast" in op.opcode for op in graph.ops)


@pytest.mark.parametrize("arch", ["sm90", "sm100"])
def test_asin_imports_as_a_flat_map_of_the_math_librarys_asin(arch):
    """Every form of 07's kernel is one graph: a row map over the [n / 128, 128] view whose one op is asin, the
    math library's (vocab.LIBM: libdevice's __nv_asinf read as math.asin)."""
    from twill.tir import print_tir
    texts = set()
    for form in FORMS:
        graph, _ = import_ttgir((DATA / form / f"asin_{arch}.ttgir").read_text(), f"asin_{arch}.ttgir")
        assert [op.opcode for op in graph.ops] == ["load", "asin", "store"], form
        texts.add(print_tir(graph))
    assert len(texts) == 1


@pytest.mark.parametrize("arch", ["sm90", "sm100"])
def test_dropout_with_a_constant_keep_scale_is_a_flat_map_of_a_select(arch):
    """The dropout's `tl.where(x_keep, x / (1 - p), 0.0)`: its select of a constant side was refused (`reads the
    constant 0.0 as its operand 3`); now the select's b is its {scalar = 0}, the condition the table's `ne` of
    the loaded mask. The near miss of the kernel (its 1 - p a constant 0.5) imports, every form, to the same ops
    (their names differ by form); a numpy evaluation of each is the reference's formula."""
    import numpy as np
    from twill.tir import print_tir
    rng = np.random.default_rng(0)
    x, keep = rng.standard_normal(1000).astype(np.float32), (rng.random(1000) > 0.5).astype(np.int32)
    for form in FORMS:
        text = (DATA / form / f"dropout_{arch}.ttgir").read_text()
        half = re.sub(r"arith\.divf %x(\w*), %output\w*", r"arith.divf %x\1, %half", text, count=1)
        half = half.replace("    %pid = ", "    %half = arith.constant dense<5.000000e-01> : tensor<1024xf32, #blocked>\n"
                            "    %pid = ", 1)
        assert half != text
        graph, _ = import_ttgir(half, f"dropout_{arch}.ttgir")
        assert sorted(op.opcode for op in graph.ops) == ["div", "load", "load", "ne", "select", "store"], form
        env = {op.name: keep if op.type.dtype == "i32" else x for op in graph.ops if op.opcode == "load"}
        for op in graph.ops[2:-1]:
            args, v = [env[o.name] for o in op.operands], op.attr("scalar")
            env[op.name] = {"ne": lambda: (args[0] != v).astype(np.float32), "div": lambda: args[0] / np.float32(v),
                            "select": lambda: np.where(args[0] != 0, args[1], np.float32(v))}[op.opcode]()
        out = env[graph.ops[-1].operands[0].name]
        assert np.array_equal(out, np.where(keep != 0, x / np.float32(0.5), np.float32(0.0))), form
