"""The ninth held-out batch (bench/heldout/kernels9.py, dumped by `bench/heldout/gen.py --module kernels9` with
Triton 3.9 and 3.6, before and after the pipeliner, sm_90 and sm_100: tests/data/ttgir/heldout9): the official
Triton tutorials not covered by earlier batches: 05's layer-norm backward (dx with its spin lock, and the dw/db
column sums), 08's grouped GEMM, 10's block-scaled (mxfp8) matmul, 04's dropout (a kept mask, and seeded with
tl.rand), 07's libdevice asin. asin imports (a flat map of the math library's asin), and so does the dropout with its kept
mask (a flat map of a select, its 1 - p a scalar op of the prologue: ttgir/scalarexpr.py), and the seeded dropout (its
tl.rand one `rand` op: tests/test_rand.py); every other form is refused
at the TTGIR line of the construct the graph cannot hold, with a message naming it, never a traceback, an
unlocated error or a silently wrong graph.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import emitted_and_built, nvcc, refused_at_its_line
from twill.errors import InputError
from twill.ttgir import import_ttgir

DATA = Path(__file__).parent / "data" / "ttgir" / "heldout9"
FORMS = ("t39/prepipe", "t39/after", "t36/prepipe", "t36/after")
NAMES = sorted(p.stem for p in (DATA / "t36" / "prepipe").glob("*.ttgir"))

# kernel -> (a regex of the TTGIR op the import stops at, a regex of what the message says): every form
REFUSED = {
    # the partial dw/db added under a spin lock: `while tl.atomic_cas(Lock, 0, 1) == 1`
    "layer_norm_bwd_dx": (r"scf\.while", r"'scf\.while' \(a while loop\)"),
    # the K loop's A tile from a pointer loaded from group_a_ptrs (was: an unlocated "no loop computes a tile")
    "grouped_matmul": (r"= (tt\.load|ttg\.async_copy_global_to_local) %a_ptrs",
                       "reads addresses computed from a value loaded from memory"),
}
# libdevice's asin: the math library's op (vocab.LIBM), a flat map since session 32; dropout: a flat map of a select
# since session 38, its x / (1 - p) a prologue op of the argument p (ttgir/scalarexpr.py)
# seeded_dropout since session 39: tl.rand's Philox rounds one `rand` op (ttgir/rand.py; tests/test_rand.py)
# layer_norm_bwd_dwdb since session 40: column sums of a loop over row blocks, one column a program (ttgir/colsum.py;
# tests/test_heldout12.py checks it)
IMPORTED = {"asin", "dropout", "seeded_dropout", "layer_norm_bwd_dwdb"}
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


STORED_CARRY = (
    "    %q = tt.splat %FINAL_DW : !tt.ptr<f32> -> tensor<32x128x!tt.ptr<f32>, #blocked>\n"
    "    %q2 = tt.addptr %q, %offs_11 : tensor<32x128x!tt.ptr<f32>, #blocked>, tensor<32x128xi32, #blocked>\n"
    "    tt.store %q2, %db_12#0 : tensor<32x128x!tt.ptr<f32>, #blocked>\n")


def test_a_loop_over_rows_without_an_mma_is_refused_at_its_load():
    """The dw/db loop with its [32, 128] carry stored as it is (no column sum after it): the loop steps DW's rows
    (`(i + rows)[:, None] * N`), and a loop with no mma runs along its tiles' columns in emit-cuda, so it imported
    as a loop over DW's columns (`argument M {extent = [m, loop]}`), silently another kernel. Now each load is an
    error at its line (steps.row_errors); a GEMM's B, stepped along its rows by the K loop, is not (an mma)."""
    text = (DATA / "t39/prepipe/layer_norm_bwd_dwdb_sm90.ttgir").read_text()
    edited = text[:text.index('    %sum_dw = "tt.reduce"')] + STORED_CARRY + text[text.index("    tt.return"):]
    with pytest.raises(InputError) as err:
        import_ttgir(edited, "layer_norm_bwd_dwdb_sm90.ttgir")
    lines = edited.splitlines()
    assert [lines[d.span.line - 1].split("=")[0].strip() for d in err.value.diagnostics] == ["%dw_25", "%db_28"]
    assert all("stepped by the loop along its rows (32 of its [32, 128] tile's rows" in d.message
               for d in err.value.diagnostics)


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


def _evaluate(graph, arrays: dict, numbers: dict) -> dict:
    """The flat map's graph in numpy over whole arrays: the prologue's scalar ops on the arguments (`numbers`), then
    the loop's ops on the loaded arrays (`arrays`, by argument); the stored arrays, by argument."""
    import numpy as np
    feeds = {t: a for a, t in graph.arguments if t is not None}
    env = {s.name: np.float32(numbers[feeds.get(s.name, s.name)]) for s in graph.prologue.scalars}
    table = {"neg": lambda a: -a, "recip": lambda a: np.float32(1) / a, "exp": np.exp, "sqrt": np.sqrt,
             "log": np.log, "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
             "div": lambda a, b: a / b, "ne": lambda a, b: (a != b).astype(np.float32),
             "select": lambda c, a, b: np.where(c != 0, a, b)}
    out = {}
    for op in graph.prologue.ops + graph.ops:
        if op.opcode == "load":
            env[op.name] = arrays[feeds[op.name]]
        elif op.opcode == "store":
            out[feeds[op.name]] = env[op.operands[0].name]
        else:
            xs = [env[o.name] for o in op.operands]
            xs += [np.float32(op.attr("scalar"))] if op.attr("scalar") is not None else []
            env[op.name] = table[op.opcode](*xs)
    return out


def _dropout_inputs():
    import numpy as np
    rng = np.random.default_rng(0)
    return rng.standard_normal(1000).astype(np.float32), (rng.random(1000) > 0.5).astype(np.int32)


@pytest.mark.parametrize("arch", ["sm90", "sm100"])
def test_dropout_imports_with_its_keep_scale_a_prologue_op(arch):
    """04's dropout, `tl.where(x_keep, x / (1 - p), 0.0)`: its 1 - p (`arith.subf %one, %p`, a scalar computed from
    the float argument p) was refused (no operand held it); now it is the prologue's `neg p` then `add {scalar =
    1}` on one value (ttgir/scalarexpr.py), which the loop's div reads; the select's b is its {scalar = 0}, the
    condition the table's `ne` of the loaded mask. Every form imports to the same ops (their names differ by
    form), and a numpy evaluation of each is the reference's formula at p = 0.3 (not 1 / (1 - p) = 2 of p = 0.5)."""
    import numpy as np
    from twill.tir import print_tir
    x, keep = _dropout_inputs()
    for form in FORMS:
        graph, _ = import_ttgir((DATA / form / f"dropout_{arch}.ttgir").read_text(), f"dropout_{arch}.ttgir")
        assert sorted(op.opcode for op in graph.ops) == ["div", "load", "load", "ne", "select", "store"], form
        assert [(op.opcode, op.attr("scalar"), str(op.type)) for op in graph.prologue.ops] == \
            [("neg", None, "f32[1]"), ("add", 1, "f32[1]")], form
        assert [v.name for v in graph.prologue.scalars] == ["p"] and ("p", "p") in graph.arguments, form
        assert "prologue {\n  scalar p : f32\n" in print_tir(graph), form
        out = _evaluate(graph, {"x_ptr": x, "x_keep_ptr": keep}, {"p": 0.3})["output_ptr"]
        assert np.allclose(out, np.where(keep != 0, x / (np.float32(1) - np.float32(0.3)), 0), rtol=1e-6), form
        assert not np.allclose(out, np.where(keep != 0, x / np.float32(0.5), 0)), form


def test_a_scalar_expression_of_arguments_is_the_prologues_ops():
    """The general rule, on dropout's dump with its 1 - p replaced by (exp(p) + sqrt(p) * p) / 2 and then 3 / that
    (a constant first: `recip` then `mul {scalar = 3}`): every step a prologue op on one value; the graph computes
    the formula. Refused at their line: a scalar loaded from memory (no expression), and the flat map's element
    count read as a number (`float(n_elements)`: the binding derives it from the tensors, no scalar holds it)."""
    import numpy as np
    text = (DATA / "t36/prepipe/dropout_sm90.ttgir").read_text()
    expr = ("%e = math.exp %p : f32\n    %r = math.sqrt %p : f32\n"
            "    %s = arith.mulf %r, %p : f32\n    %h = arith.addf %e, %s : f32\n"
            "    %c2 = arith.constant 2.000000e+00 : f32\n    %c3 = arith.constant 3.000000e+00 : f32\n"
            "    %q = arith.divf %h, %c2 : f32\n    %output_9 = arith.divf %c3, %q : f32")
    old = "%output_9 = arith.subf %output, %p : f32"
    edited = text.replace(old, expr, 1)
    assert edited != text
    graph, _ = import_ttgir(edited, "dropout_sm90.ttgir")
    assert [op.opcode for op in graph.prologue.ops] == ["exp", "sqrt", "mul", "add", "div", "recip", "mul"]
    assert [v.name for v in graph.prologue.scalars] == ["p"]
    x, keep = _dropout_inputs()
    p = 0.3
    out = _evaluate(graph, {"x_ptr": x, "x_keep_ptr": keep}, {"p": p})["output_ptr"]
    scale = 3 / ((np.exp(p) + np.sqrt(p) * p) / 2)
    assert np.allclose(out, np.where(keep != 0, x / scale, 0), rtol=1e-5)
    for new, match in [("%pl = tt.load %x_ptr : !tt.ptr<f32>\n    %output_9 = arith.subf %output, %pl : f32",
                        "neither a constant nor one of the kernel's float arguments"),
                       ("%nf = arith.sitofp %n_elements : i32 to f32\n    %output_9 = arith.subf %nf, %p : f32",
                        "the flat map's element count 'n_elements' is read as a number")]:
        with pytest.raises(InputError, match=match) as err:
            import_ttgir(text.replace(old, new, 1), "dropout_sm90.ttgir")
        assert "%x" in text.replace(old, new, 1).splitlines()[err.value.diagnostics[0].span.line - 1] \
            or "%output_9" in text.replace(old, new, 1).splitlines()[err.value.diagnostics[0].span.line - 1]


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
@pytest.mark.parametrize("arch", ["sm90", pytest.param("sm100", marks=pytest.mark.extended)])
def test_dropout_solves_jointly_emits_and_compiles_clean(arch, tmp_path):
    """The dropout, import -> solve (joint, proven optimal) -> emit-cuda -> nvcc with no spill: each role computes
    1 - p once before its loop, from the launch's p (one nvcc build here, sm_90a; sm_100a extended)."""
    from twill.machine import load_machine
    from twill.pipeline import SolveOptions, solve
    machine = load_machine("b200" if arch == "sm100" else "h200")
    graph, _ = import_ttgir((DATA / "t36/prepipe" / f"dropout_{arch}.ttgir").read_text(), f"dropout_{arch}.ttgir")
    schedule = solve(graph, machine, SolveOptions(time_limit=60))
    assert schedule.complete and schedule.optimal and schedule.length_optimal and schedule.roles
    _, rc, err = emitted_and_built(schedule, machine, tmp_path / f"dropout_{arch}.cu")
    assert rc == 0, err[-2000:]
    assert {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)} <= {0}, err[-2000:]
    text = (tmp_path / f"dropout_{arch}.cu").read_text()
    assert "(-static_cast<float>(args.p))" in text and "+ 1.0f)" in text


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
@pytest.mark.parametrize("arch", ["sm90", pytest.param("sm100", marks=pytest.mark.extended)])
def test_seeded_dropout_solves_emits_and_compiles_clean(arch, tmp_path):
    """The seeded dropout, import -> solve -> emit-cuda -> nvcc with no spill: each element's Philox rounds in
    registers (twill::op_rand, cuda_runtime/philox.cuh) at the counter extent * row + column + the launch's first
    element, the seed the launch's 64 bits (one nvcc build here, sm_90a; sm_100a extended)."""
    from twill.machine import load_machine
    from twill.pipeline import SolveOptions, solve
    machine = load_machine("b200" if arch == "sm100" else "h200")
    name = f"seeded_dropout_{arch}.ttgir"
    graph, _ = import_ttgir((DATA / "t36/prepipe" / name).read_text(), name)
    schedule = solve(graph, machine, SolveOptions(time_limit=60))
    assert schedule.complete and schedule.roles
    _, rc, err = emitted_and_built(schedule, machine, tmp_path / f"seeded_dropout_{arch}.cu")
    assert rc == 0, err[-2000:]
    assert {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)} <= {0}, err[-2000:]
    text = (tmp_path / f"seeded_dropout_{arch}.cu").read_text()
    assert "twill::op_rand<10>(" in text and "static_cast<unsigned long long>(args.seed)" in text
    assert "args.flat_first" in text and "long long seed;" in text
