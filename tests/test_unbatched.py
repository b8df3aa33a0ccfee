"""One tensor for every batch entry (`{batch = none}`: twill/ttgir/unbatched.py, emit/batch_groups.py, the binding's
`_unbatched`): held-out batch 6's attn_bool_mask reads MASK [N, N] at `MASK + offs_m * stride_mm + cols`, no term
of program id 1 (the batch), where its Q, K, V and O read `pid_y * stride_bh`. Its binding used to refuse
MASK [N, N] ("batch dimensions [] differ from Q's [2, 8]"), and would have taken [B, H, N, N] and read a mask per
head where Triton reads one.

Without a GPU: the import's reading of the program ids (which loads are marked, which are not: the batched GEMM's B,
ALiBi's slopes, a one-row-a-program kernel's weight, a kernel whose stores read no batch), the `.tir` spelling, what
the emitted kernel reads (entry 0, one entry in its tensor map, no group field; nothing else changes), and the
binding's plans. bench/triton_notes/s40/bcast40/ runs it on the GPU.
"""
from __future__ import annotations

import difflib
import importlib.util
import json
import re
from pathlib import Path

import pytest

from conftest import nvcc, nvcc_compile
from test_binding import meta
from twill.emit import build_model, emit_cuda
from twill.emit.binding import binding_files
from twill.errors import InputError
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.schedule import Schedule
from twill.tir import parse_tir, print_tir
from twill.ttgir import import_ttgir, load_ttgir
from twill.ttgir.sequence import import_sequence

ROOT = Path(__file__).resolve().parents[1]
TTGIR = ROOT / "tests" / "data" / "ttgir"
H6 = TTGIR / "heldout6"
EMIT = ROOT / "tests" / "data" / "emit"
FORMS = ("t39/prepipe", "t39/after", "t36/prepipe", "t36/after")


def _marked(graph) -> list[str]:
    """The loads and inputs (an epilogue's among them) of `{batch = none}`."""
    return [op.name for op in graph.ops if op.unbatched] + [v.name for v in graph.inputs if v.unbatched]


def _loads_marked(graph) -> dict[str, bool]:
    return {op.name: op.unbatched for op in graph.ops if op.opcode == "load"}


# -- the import ------------------------------------------------------------------------------------

@pytest.mark.parametrize("form", FORMS)
def test_the_mask_no_batch_program_id_reads_is_one_tensor_for_every_entry(form):
    """MASK's address reads program id 0 only as its tile's first row (`pid_x * 128 * stride_mm`), and the stores'
    batch is program id 1 (`pid_y * stride_bh`): its loads are `{batch = none}`, K and V (and Q, an input) are not.
    sm_100's after-pipeliner form is refused for another reason (tests/test_heldout6.py)."""
    for arch in ("sm90", "sm100"):
        if (arch, form.split("/")[1]) == ("sm100", "after"):
            continue
        g, _ = load_ttgir(H6 / form / f"attn_bool_mask_{arch}.ttgir", split_rows="auto")
        loads = _loads_marked(g)
        assert {n for n, u in loads.items() if u} == {n for n in loads if n.startswith("mk")} != set(), (form, arch)
        assert not any(v.unbatched for v in g.inputs), (form, arch)
        text = print_tir(g)
        assert re.search(r"mk0? += load +: i8\[(64|128),64\] @smem \{batch = none\}", text), text
        assert parse_tir(text) == g


def _per_head(text: str) -> str:
    """The mask offset by the batch as Q is (`MASK + pid_y * stride_bh + ...`): one mask per head."""
    base = re.search(r"= tt\.addptr %Q, (%\w+) : !tt\.ptr<f16>, i64", text).group(1)
    first = re.search(r"\n( +)(%\w+ = tt\.splat )%MASK( : !tt\.ptr<i8>)", text)
    edited = (text[:first.start()] + f"\n{first.group(1)}%mask_bh = tt.addptr %MASK, {base} : !tt.ptr<i8>, i64"
              + text[first.start():])
    edited = re.sub(r"tt\.splat %MASK : !tt\.ptr<i8>", "tt.splat %mask_bh : !tt.ptr<i8>", edited)
    assert edited != text
    return edited


@pytest.mark.parametrize("form", ["t36/prepipe", "t39/after"])
def test_a_mask_offset_by_the_batch_is_read_per_entry(form):
    """The same kernel with MASK + pid_y * stride_bh: a mask per batch entry, as before (no attribute)."""
    text = (H6 / form / "attn_bool_mask_sm90.ttgir").read_text()
    g, _ = import_ttgir(_per_head(text), "per_head.ttgir", split_rows="auto")
    assert _loads_marked(g) and not any(_loads_marked(g).values())


@pytest.mark.parametrize("form", FORMS)
def test_a_query_tile_read_by_no_batch_entry_is_an_input_for_every_entry(form):
    """The kernel with Q read at `Q + offs_m * stride_n + offs_d` (no `pid_y * stride_bh`): the input the load
    before the loop becomes (q, its row parts q0 and q1) is `input q0 : ... {batch = none}`."""
    text = (H6 / form / "attn_bool_mask_sm90.ttgir").read_text()
    edited = text.replace("tt.splat %q : !tt.ptr<f16>", "tt.splat %Q : !tt.ptr<f16>")
    assert edited != text
    g, _ = import_ttgir(edited, "one_q.ttgir", split_rows="auto")
    assert [v.name for v in g.inputs if v.unbatched] == ["q0", "q1"], form
    assert re.search(r"\ninput q0 +: f16\[64,64\] @smem \{batch = none\}\n", print_tir(g))
    g, _ = import_ttgir(text, "q.ttgir", split_rows="auto")
    assert not any(v.unbatched for v in g.inputs)


@pytest.mark.parametrize("form", FORMS)
def test_a_batched_gemms_b_read_by_no_batch_entry_is_one_b(form):
    """bmm_bcast_b with `B + pid_b * stride_bb` dropped (its B address reads no batch program id, as a batched GEMM
    over one weight writes it): B's load is `{batch = none}`, A's is not; as dumped, neither (the launch's stride 0 is
    the caller's, which the binding's B [K, N] group serves)."""
    for arch in ("sm90", "sm100"):
        text = (H6 / form / f"bmm_bcast_b_{arch}.ttgir").read_text()
        edited = re.sub(r"tt\.splat %b_ptrs_22 :", "tt.splat %B :", text)
        assert edited != text
        g, _ = import_ttgir(edited, "one_b.ttgir")
        loads = _loads_marked(g)
        b = [t for n, t in g.arguments if n == "B"]
        assert len(loads) == 2 and [n for n, u in loads.items() if u] == b, (form, arch, loads, g.arguments)
        g, _ = import_ttgir(text, "bmm.ttgir")
        assert not any(_loads_marked(g).values()), (form, arch)


@pytest.mark.parametrize("path", [
    "heldout6/t36/prepipe/bmm_bcast_b_sm90.ttgir",  # B + pid_b * stride_bb: per entry (the launch's stride 0 is its own)
    "heldout5/t36/prepipe/gemm_fp8_out_amax_sm90.ttgir",  # no batch: pid_m, pid_n place tiles; the amax's bitcast pointer
    "heldout2/t36/prepipe/attn_alibi_sm90.ttgir",  # SLOPES + pid_y % H: one value per entry, periodic (input slope)
    "heldout7/t36/prepipe/rmsnorm_fwd_sm90.ttgir",  # one row a program: W + cols reads no row, the row is the grid's
    "heldout8/t39/prepipe/layer_norm_fwd_sm90.ttgir",  # (the row program id becomes the tile's rows, rowprog.py)
    "attn_fwd_tma_sm90.ttgir",  # descriptors: each coordinate's program ids (the batch's row offset reads pid_y)
])
def test_loads_that_read_the_batch_or_kernels_without_one_are_not_marked(path):
    found, _ = import_sequence((TTGIR / path).read_text(), path)
    graphs = getattr(found, "graphs", (found,))  # (the normalization kernels are loops in sequence)
    assert graphs and not [n for g in graphs for n in _marked(g)], path


def test_alibis_slope_stays_one_value_per_batch_entry():
    """ALiBi's `tl.load(SLOPES + off_bh % H)` reads the batch: the binding still broadcasts [H] under [B, H]."""
    g, _ = load_ttgir(TTGIR / "heldout2/t36/prepipe/attn_alibi_sm90.ttgir")
    slopes = [v for v in g.inputs if v.type.shape == (1,) and not v.computed]
    assert slopes and not any(v.unbatched for v in slopes)


# -- the .tir spelling -----------------------------------------------------------------------------

GEMM = """kernel g
input s : f32[1] {batch = none}
carry acc : f32[64,64] = 0
loop {
  a = load : f16[64,64] @smem
  b = load : f16[64,64] @smem {batch = none}
  acc_n = mma a, b, acc : f32[64,64]
  yield acc = acc_n
}
"""


def test_the_attribute_on_a_load_and_an_input_reads_and_prints_back():
    g = parse_tir(GEMM)
    assert [v.unbatched for v in g.inputs] == [True] and _loads_marked(g) == {"a": False, "b": True}
    text = print_tir(g)
    assert re.search(r"input s +: f32\[1\] \{batch = none\}\n", text)
    assert re.search(r"\n  b += load +: f16\[64,64\] @smem \{batch = none\}\n", text)
    assert parse_tir(text) == g
    plain = parse_tir(GEMM.replace(" {batch = none}", ""))
    assert "batch" not in print_tir(plain)  # a file without it prints as before


@pytest.mark.parametrize("edit, message", [
    (("input s : f32[1] {batch = none}", "input s : f32[1] {batch = all}"),
     "x.tir:2:7: error: input 's': attribute 'batch' must be none"),
    (("input s : f32[1] {batch = none}", "input s : f32[1] {output = f16}"),
     "x.tir:2:19: error: unknown input attribute 'output'"),
    (("@smem {batch = none}", "@smem {batch = 2}"), "x.tir:6:7: error: op 'b': batch = 2: a load's batch is none"),
])
def test_a_bad_attribute_is_an_error_at_its_line(edit, message):
    with pytest.raises(InputError) as e:
        parse_tir(GEMM.replace(*edit), "x.tir")
    assert message in str(e.value), str(e.value)


# -- emit-cuda -------------------------------------------------------------------------------------

def _schedule(name: str, edit) -> Schedule:
    data = json.loads((EMIT / f"{name}.json").read_text())
    graph = edit(data["graph"])
    assert graph != data["graph"]
    data["graph"] = graph
    return Schedule.from_json(json.dumps(data))


def _gemm_b_unbatched() -> Schedule:
    return _schedule("gemm_3x64.h100", lambda g: g.replace("f16[64,256] @smem\n", "f16[64,256] @smem {batch = none}\n"))


def test_the_kernel_reads_entry_0_of_a_tensor_for_every_batch_entry():
    """gemm_3x64 with B `{batch = none}`: B is read at batch entry 0 through a map of one entry, with no group field
    (B was shareable, GQA's rule); every other line is the golden's, byte for byte."""
    golden = (ROOT / "tests" / "golden" / "emit" / "gemm_3x64.h100.cu").read_text()
    cu = emit_cuda(_gemm_b_unbatched(), load_machine("h100"))
    changed = [line for line in difflib.unified_diff(golden.splitlines(), cu.splitlines(), lineterm="", n=0)
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed and all(re.search(r"\bb\b|_b\b|\bb_|tm\.b\b", line) for line in changed), changed
    assert "b_batch_group" not in cu and "twill_b_b" not in cu
    assert cu.count("tm.b, &sm.ring_b.full") == 4 and all(
        line.rstrip().endswith(", 0);") for line in cu.splitlines() if "tm.b, &sm.ring_b.full" in line)
    assert "p.b, loop_elements(p, 64), twill::grid_extent(p.n_extent, p.tiles_n, p.b_cols_step), uint64_t(1)," in cu
    assert "// load b: f16 [1][iters*64][tiles_n*256]" in cu


def test_an_input_for_every_entry_is_read_at_entry_0():
    """attention_fwd_hopper's q0 `{batch = none}` (one query tile set for every head): read at entry 0; q1 at tile.b."""
    s = _schedule("attention_fwd_hopper.h100", lambda g: g.replace("input q0   : f16[64,128] @smem\n",
                                                                     "input q0   : f16[64,128] @smem {batch = none}\n"))
    cu = emit_cuda(s, load_machine("h100"))
    q0 = [line for line in cu.splitlines() if "tm.q0, &sm.inputs_ready" in line]
    q1 = [line for line in cu.splitlines() if "tm.q1, &sm.inputs_ready" in line]
    assert q0 and all(line.rstrip().endswith(", 0);") for line in q0)
    assert q1 and all(line.rstrip().endswith(", tile.b);") for line in q1)


@pytest.mark.parametrize("div", [1, 2])
def test_a_tile_per_iteration_for_every_entry_is_read_at_its_iteration_alone(div):
    """A tile per iteration (a scale per group along K: `[I, N]`, `iter_div` D: a row per D iterations) of
    `{batch = none}`: its row is the iteration's (over D) with no batch entry's rows before it, and its map holds
    ceil(I / D) rows, not batch times them."""
    from twill.emit import host
    from twill.emit.cuda import Renderer
    from twill.emit.model import GlobalTensor
    m = build_model(_gemm_b_unbatched(), load_machine("h100"))
    r = Renderer(m)
    each, one = (GlobalTensor("w", "w", "load", "f32", (1, 256), ("fixed", "n"), per_iteration=True, iter_div=div,
                              unbatched=u) for u in (False, True))
    it = "(it)" if div == 1 else "(it) / 2"
    iters = "loop_iters(p)" if div == 1 else "((loop_iters(p) + 1) / 2)"
    assert r._origin(each, "it")[2] == ("tile.b * n + (it)" if div == 1 else "tile.b * ((n + 1) / 2) + (it) / 2")
    assert r._origin(one, "it")[2] == it
    assert host._dims(m, each)[2] == f"static_cast<uint64_t>(p.batch) * {iters}"
    assert host._dims(m, one)[2] == f"static_cast<uint64_t>({iters})"
    assert r.shape_doc(one) == ("f32 [iters][1][tiles_n*256]" if div == 1 else "f32 [ceil(iters/2)][1][tiles_n*256]")


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
def test_the_kernel_with_a_tensor_for_every_entry_compiles(tmp_path):
    src = tmp_path / "g.cu"
    src.write_text(emit_cuda(_gemm_b_unbatched(), load_machine("h100")))
    rc, err = nvcc_compile(src, ["-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v"])
    assert rc == 0, err[-2000:]


# -- the binding ------------------------------------------------------------------------------------

def _binding(tmp_path, schedule: Schedule, machine: str, name: str):
    m = load_machine(machine)
    for path, text in binding_files(build_model(schedule, m), str(tmp_path / f"{name}.cu")).items():
        Path(path).write_text(text)
    spec = importlib.util.spec_from_file_location(name, tmp_path / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_binding_takes_it_without_batch_dimensions_and_refuses_real_ones(tmp_path):
    mod = _binding(tmp_path, _gemm_b_unbatched(), "h100", "gb")
    args = {a["name"]: a for a in mod.SPEC["args"]}
    assert args["b"].get("unbatched") and mod.layout(args["b"]) == "[L, N]"
    assert not any(a.get("unbatched") for n, a in args.items() if n != "b")
    a = meta(mod, (4, 192, 512))
    for b in ((512, 256), (1, 512, 256), (1, 1, 512, 256)):
        plan = mod.resolve(mod.SPEC, {"a": a, "b": meta(mod, b)})
        assert plan["batch"] == 4 and plan["shapes"]["b"] == (512, 256), b
    with pytest.raises(mod.ArgumentError, match=r"^b: the kernel reads one b for every batch entry .* got \[4, 512, "
                                                 r"256\], whose batch dimensions \[4\] it would not read past the first"):
        mod.resolve(mod.SPEC, {"a": a, "b": meta(mod, (4, 512, 256))})
    with pytest.raises(mod.ArgumentError, match=r"^b: expected shape \[L, N\]"):
        mod.resolve(mod.SPEC, {"a": a, "b": meta(mod, (512,))})
    assert "ONE for every batch entry" in (tmp_path / "gb.py").read_text()


def test_a_batch_prefix_groups_the_rest(tmp_path):
    """`_group`, NumPy's broadcasting of a batch prefix: K [B] under Q [B, H] serves H entries each, K with no batch
    (or 1s only) every entry; anything else is refused as before."""
    s = Schedule.from_json((EMIT / "attention_fwd_hopper.h200.json").read_text())
    mod = _binding(tmp_path, s, "h200", "afh")
    names = [a["name"] for a in mod.SPEC["args"]]

    def groups(k):
        plan = mod.resolve(mod.SPEC, {"q": meta(mod, (2, 8, 512, 128)), "k": meta(mod, k), "v": meta(mod, k)})
        return dict(zip(names, plan["groups"]))["k"], plan["batch"]

    assert groups((2, 1024, 128)) == (8, 16)
    assert groups((1024, 128)) == (16, 16)
    assert groups((1, 1, 1024, 128)) == (16, 16) and groups((1, 1024, 128)) == (16, 16)
    assert groups((2, 4, 1024, 128)) == (2, 16)
    with pytest.raises(mod.ArgumentError, match=r"^k: batch dimensions \[1, 8\] differ from q's \[2, 8\]"):
        groups((1, 8, 1024, 128))


@pytest.mark.slow
def test_attn_bool_masks_binding_takes_one_mask_under_the_heads(tmp_path):
    """The held-out kernel as bench/heldout/run.py builds it (Triton 3.6 before the pipeliner, split rows auto, h200):
    q, k, v [2, 8, 1024, 64] with MASK [1024, 1024] (or [1, 1, 1024, 1024]) plan 16 batch entries, MASK as it lies;
    MASK [2, 8, 1024, 1024] or [8, 1024, 1024] is refused naming it."""
    g, _ = load_ttgir(H6 / "t36/prepipe/attn_bool_mask_sm90.ttgir", split_rows="auto")
    mod = _binding(tmp_path, solve(g, load_machine("h200"), SolveOptions(time_limit=300)), "h200", "bm")
    q = meta(mod, (2, 8, 1024, 64))
    for mask in ((1024, 1024), (1, 1, 1024, 1024)):
        plan = mod.resolve(mod.SPEC, {"Q": q, "K": q, "V": q, "MASK": meta(mod, mask, "int8")},
                           sizes={"N_CTX": 1024})
        names = [a["name"] for a in mod.SPEC["args"]]
        assert plan["batch"] == 16 and plan["batch_shape"] == (2, 8) and plan["tiles_m"] == 8
        assert plan["layouts"][names.index("MASK")] == ("as is", 1024, 1024, 1024 * 1024)
        assert plan["shapes"]["O"] == (2, 8, 1024, 64)
    for mask in ((2, 8, 1024, 1024), (8, 1024, 1024)):
        with pytest.raises(mod.ArgumentError, match=r"^MASK: the kernel reads one MASK for every batch entry"):
            mod.resolve(mod.SPEC, {"Q": q, "K": q, "V": q, "MASK": meta(mod, mask, "int8")})
    with pytest.raises(mod.ArgumentError, match=r"^MASK: gives M = 512"):
        mod.resolve(mod.SPEC, {"Q": q, "K": q, "V": q, "MASK": meta(mod, (512, 1024), "int8")})


@pytest.mark.extended  # (a b200 solve of a second and one nvcc build; sm_90a's is run.py build's, bench/triton_notes/s40)
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
def test_attn_bool_mask_compiles_for_sm100_with_the_mask_read_at_entry_0(tmp_path):
    g, _ = load_ttgir(H6 / "t36/prepipe/attn_bool_mask_sm100.ttgir", split_rows="auto")
    machine = load_machine("b200")
    cu = emit_cuda(solve(g, machine, SolveOptions(time_limit=120)), machine)
    mask = [line for line in cu.splitlines() if "tm.mk" in line and "tma_load(" in line]
    assert mask and all(line.rstrip().endswith(", 0);") for line in mask)
    src = tmp_path / "bm.cu"
    src.write_text(cu)
    rc, err = nvcc_compile(src, ["-std=c++17", "-gencode=arch=compute_100a,code=sm_100a", "-Xptxas", "-v"])
    assert rc == 0, err[-2000:]
    assert {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)} <= {0}, err[-2000:]
