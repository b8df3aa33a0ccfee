"""Causal attention: Triton's two key loops imported as one masked loop, the mask and the per-tile
trip counts emitted, and (on a Hopper GPU) the emitted kernels against torch.

    python tests/data/causal/gpu_causal.py [--n 8192]   # on a Hopper GPU: correctness, TFLOP/s vs SDPA

The schedules in tests/data/causal/ are `twill solve --gpu h200`'s of
examples/attention_fwd_causal_hopper.tir and of the import of attn_causal_fwd_sm90.ttgir
(Triton's causal kernel, /work/shared/triton/kernels.py's attn_causal_fwd_kernel, dumped before the
pipeliner), stored so the tests do not spend minutes solving.
"""
from __future__ import annotations

import ctypes
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ringcheck import ring_deadlock  # noqa: E402
from twill.emit import build_model, emit_cuda  # noqa: E402
from twill.emit.cuda import render  # noqa: E402
from twill.emit.ragged import causal_iters, causal_keeps  # noqa: E402
from twill.errors import InputError  # noqa: E402
from twill.machine import load_machine  # noqa: E402
from twill.schedule import Schedule  # noqa: E402
from twill.tir import parse_tir, print_tir  # noqa: E402
from twill.ttgir import import_ttgir, load_ttgir  # noqa: E402

DATA = ROOT / "tests" / "data" / "causal"
DUMPS = {"attn_causal_fwd_sm90": "attn_causal_fwd_sm90.ttgir",  # Triton 3.x as dumped for the corpus
         "attn_causal_fwd_sm90.triton36": "attn_causal_fwd_sm90.triton36.ttgir"}  # Triton 3.6 on the H200
KERNELS = ("attention_fwd_causal_hopper.h200", "triton_attn_causal_fwd_sm90.h100")


def opcodes(graph) -> list[str]:
    return [op.opcode for op in graph.ops]


# -- import ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("stem", sorted(DUMPS))
def test_the_two_causal_loops_import_as_one_masked_loop(stem, golden):
    graph, warnings = load_ttgir(DATA / DUMPS[stem])
    assert [w for w in warnings if "--split-rows" not in (w.hint or "")] == []  # nothing dropped
    assert opcodes(graph).count("causal_mask") == 1
    mask = next(op for op in graph.ops if op.opcode == "causal_mask")
    assert [o.name for o in mask.operands] == ["s"] and mask.type.shape == (128, 128)
    readers = sorted(op.opcode for op in graph.ops if any(o.name == mask.name for o in op.operands))
    assert readers == ["exp2", "rowmax"]
    assert {c.name: c.init for c in graph.carries}["m_i"] == "-inf"  # the first loop's inits
    golden(f"causal/{stem}.tir", print_tir(graph))
    assert print_tir(parse_tir(print_tir(graph), "x.tir")) == print_tir(graph)


def _text() -> str:
    return (DATA / DUMPS["attn_causal_fwd_sm90"]).read_text()


NEAR_MISSES = {  # a change to the dump -> the two loops are no longer one
    "a strict comparison (the diagonal masked too)": ("arith.cmpi sge, %visible, %visible_64",
                                                     "arith.cmpi sgt, %visible, %visible_64"),
    "the sides swapped (keys >= queries)": ("arith.cmpi sge, %visible, %visible_64",
                                            "arith.cmpi sge, %visible_64, %visible"),
    "the second loop not starting where the first ends": ("scf.for %start_n = %start_m_1 to %0",
                                                          "scf.for %start_n = %c0_i32 to %0"),
    "a different body (the scores scaled twice)": ("%s_66 = arith.select %visible_65, %s_60, %cst",
                                                   "%s_66 = arith.select %visible_65, %s_59, %cst"),
    "masked with 0 rather than -inf": ("%s_66 = arith.select %visible_65, %s_60, %cst ",
                                       "%s_66 = arith.select %visible_65, %s_60, %cst_0 "),
}


@pytest.mark.parametrize("why", sorted(NEAR_MISSES))
def test_loops_that_differ_in_anything_are_not_merged(why):
    old, new = NEAR_MISSES[why]
    text = _text()
    assert old in text
    # Not merged, the two loops stay two tile loops in sequence: an error at the one left out
    # (twill/ttgir/loops.py); with --loop 1 the diagonal loop alone, whose mask compares the query
    # rows with keys offset by the loop: a band of keys (ttgir/band.py) that this loop, over the
    # diagonal block only, does not cover (an error at the mask), or no band (the sides swapped, 0 for
    # -inf: an error at the mask). The loop from 0 to the diagonal is a whole causal loop: with --loop 1
    # it imports alone, its mask a causal_mask.
    # (since session 27 the loop from 0 to the diagonal alone is refused too: its range moves with the
    # program id and no mask of it says so, grid.py; both loops' errors then, no loop to choose)
    with pytest.raises(InputError, match="loop [01] would be left out|moves with the program id"):
        import_ttgir(text.replace(old, new, 1), "near_miss.ttgir")
    if why == "the second loop not starting where the first ends":
        graph, _ = import_ttgir(text.replace(old, new, 1), "near_miss.ttgir", loop=1)
        assert [op.opcode for op in graph.ops].count("causal_mask") == 1
        return
    with pytest.raises(InputError, match="element indices|does not visit every key it keeps"):
        import_ttgir(text.replace(old, new, 1), "near_miss.ttgir", loop=1)


def test_either_loop_named_with_loop_is_the_merged_loop():
    whole, _ = import_ttgir(_text(), "c.ttgir")
    for n in (0, 1):
        assert import_ttgir(_text(), "c.ttgir", loop=n)[0] == whole


# -- the rules, in plain Python ---------------------------------------------------------------------

def test_trip_counts_run_each_query_tile_to_its_diagonal():
    # 128-key blocks, 128-row query tiles (FA3's two 64-row halves end at 128 (m + 1)), 2 stages
    assert [causal_iters(64, 2, 128, 128 * (m + 1)) for m in range(6)] == [2, 2, 3, 4, 5, 6]
    assert causal_iters(8, 2, 128, 128 * 64) == 8  # never past the loop's own extent
    assert causal_iters(8, 3, 64, 100) == 3  # 2 blocks hold the rows, the pipeline needs 3
    assert causal_iters(8, 1, 64, 100) == 2  # the block holding rows 64-99 is the last one
    # every key a row keeps lies in one of its tile's iterations
    for step, rows in ((128, 128), (64, 128), (128, 64)):
        for m in range(5):
            n = causal_iters(10 ** 6, 1, step, rows * (m + 1))
            last_key = max(k for k in range(n * step + step) if causal_keeps(rows * (m + 1) - 1, k))
            assert (n - 1) * step <= last_key < n * step


def test_the_mask_keeps_keys_at_or_before_the_query():
    assert causal_keeps(5, 5) and causal_keeps(5, 0) and not causal_keeps(5, 6)


def _frag_row(warp: int, lane: int, b: int, i: int) -> int:  # sm90.cuh's frag_row, frag_col
    return 64 * b + 16 * warp + lane // 4 + 8 * ((i >> 1) & 1)


def _frag_col(lane: int, i: int) -> int:
    return 8 * (i >> 2) + 2 * (lane % 4) + (i & 1)


def _mask_causal_constants() -> tuple[str, str]:
    """The two formulas of twill::mask_causal, read from its header: d (per thread) and the
    element's test (d + constant > 0)."""
    text = (ROOT / "twill" / "emit" / "cuda_runtime" / "causal.cuh").read_text()
    d = re.search(r"int d = (.*);", text).group(1)
    test = re.search(r"if \((d \+ .*) > 0\) f\.x\[b\]\[i\] = -INFINITY;", text).group(1)
    return d, test


def _mask_causal_skip() -> str:
    """The header's early return: the thread's test (on d and N) that it has nothing to mask."""
    text = (ROOT / "twill" / "emit" / "cuda_runtime" / "causal.cuh").read_text()
    return re.search(r"if \((d .*) <= 0\) return;", text).group(1)


def test_mask_causal_skips_only_threads_with_nothing_to_mask():
    """The early return is sound (a thread that takes it keeps every element) and is taken by
    every thread of a tile left of the diagonal (its last key at or before its first query), so
    only the diagonal blocks pay the per-element test."""
    d_expr, test_expr = _mask_causal_constants()
    skip = _mask_causal_skip()
    for q0, k0 in ((0, 0), (128, 0), (64, 0), (128, 128), (0, 128), (192, 128), (127, 0), (256, 128)):
        skipped = []
        for tid in range(128):
            lane = tid % 32
            d = _c_expr(d_expr, {"k0": k0, "q0": q0, "tid": tid, "lane": lane})
            if _c_expr(skip, {"d": d, "N": 128}) <= 0:
                skipped.append(tid)
                assert not any(_c_expr(test_expr, {"d": d, "b": b, "i": i}) > 0 for b in range(2) for i in range(64))
        if k0 + 127 <= q0:
            assert skipped == list(range(128)), (q0, k0)
        if k0 + 127 > q0 + 127:  # right of the diagonal: every thread masks
            assert skipped == [], (q0, k0)


def _c_expr(expr: str, env: dict[str, int]) -> int:
    """An integer C expression of the header (+ - * / % >> & on ints, threadIdx.x) in Python."""
    py = expr.replace("threadIdx.x", "tid").replace("/", "//")
    return eval(py, {"__builtins__": {}}, env)  # noqa: S307 - a test reading our own header


def test_mask_causal_masks_exactly_the_keys_after_each_query():
    """The header's per-element test, evaluated for every thread of a warpgroup and element of a
    Frag<2, 128>, at tiles on, left of and right of the diagonal, against the element rule."""
    d_expr, test_expr = _mask_causal_constants()
    for q0, k0 in ((0, 0), (128, 0), (64, 0), (128, 128), (0, 128), (192, 128)):
        for tid in range(0, 128, 5):
            warp, lane = (tid // 32) % 4, tid % 32
            d = _c_expr(d_expr, {"k0": k0, "q0": q0, "tid": tid, "lane": lane})
            for b in range(2):
                for i in range(64):
                    masked = _c_expr(test_expr, {"d": d, "b": b, "i": i}) > 0
                    q, k = q0 + _frag_row(warp, lane, b, i), k0 + _frag_col(lane, i)
                    assert masked == (not causal_keeps(q, k)), (q0, k0, tid, b, i)


# -- emit ------------------------------------------------------------------------------------------

def _emitted(name: str) -> str:
    s = Schedule.from_json((DATA / f"{name}.json").read_text())
    return emit_cuda(s, load_machine(s.machine))


@pytest.mark.parametrize("name", KERNELS)
def test_emitted_causal_kernel_matches_golden(name, golden):
    text = _emitted(name)
    assert "twill::mask_causal(" in text and "causal_iters(args, tile_at(args, blockIdx.x, 0))" in text
    assert "constexpr bool kRagged = false;" in text
    golden(f"causal/{name}.cu", text)


def test_the_causal_forward_runs_persistent_with_its_parameters_read_per_tile():
    """FA3's causal forward has a kernel<true> (each CTA's tiles longest first, each its own
    causal_iters, ring positions continued) whose roles read Args through a pointer laundered once
    per tile (`tile_args`, kernel.py `_tiles`): with the parameters hoisted out of the tile loop its
    consumers' wgmmas were serialized (C7512; session 26: 0.54-0.62x of kernel<false> on an H100).
    The kernel<false> branch and its Args reads are as before. The Triton import hands l over after
    the loop (a value crossing roles), so it stays one CTA per tile, without the per-tile reads."""
    text = _emitted("attention_fwd_causal_hopper.h200")
    assert "constexpr bool kPersistent = true;" in text and "const __grid_constant__ Args args)" in text
    loop = 'const Args* twill_ap = &args;  asm volatile("" : "+l"(twill_ap));  const Args& twill_args = *twill_ap;  '
    assert text.count(loop) == 3  # the producer warp and both consumer warpgroups
    assert text.count("twill::TileIdx twill_tile = tile_at(twill_args, t, round);  const int twill_n = "
                      "causal_iters(twill_args, twill_tile);") == 3
    assert "role_consumer0(sm, tm, twill_args, twill_n, twill_tile);" in text
    assert "else role_consumer0(sm, tm, args, n, tile_at(args, blockIdx.x, 0));" in text
    plain = render(build_model(Schedule.from_json((DATA / "attention_fwd_causal_hopper.h200.json").read_text()),
                               load_machine("h200"), tile_args=False))
    assert "twill_ap" not in plain and "const Args args)" in plain and "constexpr bool kPersistent = true;" in plain
    imported = _emitted("triton_attn_causal_fwd_sm90.h100")
    assert "constexpr bool kPersistent = false;" in imported and "twill_pos" not in imported
    assert "twill_ap" not in imported and "const Args args)" in imported


def test_a_kernel_without_causal_mask_has_none_of_its_code():
    s = Schedule.from_json((ROOT / "tests" / "data" / "emit" / "attention_fwd_hopper.h200.json").read_text())
    text = emit_cuda(s, load_machine(s.machine))
    assert "mask_causal" not in text and "causal_iters" not in text


def test_a_mask_read_by_an_op_for_which_minus_inf_is_not_absent_is_refused():
    """A rowsum of the masked scores would add -inf: emit-cuda refuses rather than compute it."""
    data = json.loads((DATA / "triton_attn_causal_fwd_sm90.h100.json").read_text())
    assert "rowsum p, l_i, corr " in data["graph"]
    data["graph"] = data["graph"].replace("rowsum p, l_i, corr ", "rowsum s_causal_mask, l_i, corr ")
    s = Schedule.from_json(json.dumps(data))
    with pytest.raises(InputError, match="only rowmax and exp2 may read it"):
        emit_cuda(s, load_machine(s.machine))


# -- the rings of the emitted code, run as a protocol (tests/ringcheck.py) ----------------------

@pytest.mark.parametrize("name", KERNELS)
def test_the_causal_kernels_rings_never_deadlock(name):
    """Every tile length a causal grid runs (kStages and up): no role waits forever."""
    text = _emitted(name)
    stages = int(re.search(r"constexpr int kStages = (\d+);", text).group(1))
    for n in range(stages, stages + 9):
        assert ring_deadlock(text, n) == {}, n


def test_the_h200_schedules_kernel_no_longer_deadlocks():
    """The imported kernel solved for the H200 (tests/data/causal/*.h200.deadlock.json) hung on the
    GPU: consumer0 waited to hand p[j] over (a ring of depth 1) while consumer1, which frees p[j - 1]
    only in its next window, waited for corr[j], which consumer0 sends after p[j]. An emitter bug:
    the ring depth now counts the window in which the wgmma frees P (program.py's _late_release;
    tests/test_ringcheck.py runs the check on the kernel with the old depth)."""
    text = _emitted("triton_attn_causal_fwd_sm90.h200.deadlock")
    for n in range(2, 11):
        assert ring_deadlock(text, n) == {}, n


def _nvcc() -> str | None:
    return shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


@pytest.mark.slow
@pytest.mark.skipif(_nvcc() is None, reason="nvcc not found")
def test_the_imported_causal_kernel_compiles_for_sm90a_without_warnings_or_spills(tmp_path):
    src = tmp_path / "causal.cu"
    src.write_text(_emitted("triton_attn_causal_fwd_sm90.h100"))
    proc = subprocess.run([_nvcc(), "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-DTWILL_MAIN",
                           "-Xptxas", "-v", "-c", str(src), "-o", str(tmp_path / "causal.o")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = [l for l in proc.stderr.splitlines() if l.strip()]
    assert not [l for l in report if "warning" in l.lower()], report
    spills = [l for l in report if "spill" in l]
    assert spills and all(" 0 bytes spill stores, 0 bytes spill loads" in l for l in spills), spills


@pytest.mark.slow
@pytest.mark.extended  # (about a minute: nvcc builds the kernel twice, and the probes)
@pytest.mark.skipif(_nvcc() is None, reason="nvcc not found")
def test_the_persistent_causal_kernel_compiles_clean_and_the_hoisted_one_does_not():
    """kernel<true> of FA3's causal forward (h200 schedule: two wgmmas in flight per consumer at 240
    registers) compiles with no spill and no serialized wgmma with its parameters read per tile; with
    them hoisted out of the tile loop (tile_args=False, the session-26 kernel) ptxas serializes its
    wgmmas (C7512), kernel<false> clean in both. emit-cuda's ptxas loop keeps the persistent kernel."""
    from twill import ptxas
    from twill.ptxas_loop import emitter, run
    s = Schedule.from_json((DATA / "attention_fwd_causal_hopper.h200.json").read_text())
    machine = load_machine(s.machine)
    per_tile = ptxas.compile_kernel(_emitted("attention_fwd_causal_hopper.h200"), "sm_90a")
    assert per_tile.ok and per_tile.clean, per_tile.summary()
    assert {e.instance for e in per_tile.entries} == {"kernel<false, false>", "kernel<true, false>"}
    hoisted = ptxas.compile_kernel(render(build_model(s, machine, tile_args=False)), "sm_90a")
    worse = {e.instance: e for e in hoisted.entries}
    assert worse["kernel<true, false>"].serialized and worse["kernel<false, false>"].clean, hoisted.summary()
    lines = []
    result = run(s, machine, emitter(machine), None, lines.append)
    assert not result.one_tile_per_cta and result.tile_args is None and result.rounds[0].found.report.clean, lines
    assert "constexpr bool kPersistent = true;" in result.text and "twill_args" in result.text
    # an emitter whose default hoists them: the loop finds kernel<true> worse and reads them per tile
    hoisting = emitter(machine)

    def emit(schedule, one_tile=False, hidden=False, tile_args=None):
        return hoisting(schedule, one_tile, hidden, False if tile_args is None else tile_args)
    lines = []
    result = run(s, machine, emit, None, lines.append)
    assert result.tile_args is True and not result.one_tile_per_cta, lines
    assert any(line.startswith("ptxas loop: kernel<true> with its parameters read per tile: ") for line in lines), lines
    assert result.text == _emitted("attention_fwd_causal_hopper.h200") and result.build_options["tile_args"] is True


# -- on a Hopper GPU ---------------------------------------------------------------------------------

def _gpu():
    """tests/data/causal/gpu_causal.py, the GPU side (it imports no twill)."""
    spec = importlib.util.spec_from_file_location("gpu_causal", DATA / "gpu_causal.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _gpu_ready() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0) and _nvcc() is not None


@pytest.mark.slow
@pytest.mark.skipif(not _gpu_ready(), reason="needs a Hopper (sm_90) GPU, torch and nvcc")
@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("n", (1024, 1152, 4096))
@pytest.mark.parametrize("persistent", (0, 1))
def test_emitted_causal_kernel_matches_torch(name, n, persistent, tmp_path_factory):
    """persistent = 1: one CTA per SM takes tiles of differing trip counts in a row, longest first,
    its rings' positions continuing from tile to tile (N = 1152: 9 query tiles per head, 144 in
    all, more than the SMs; N = 4096: 512). The golden kernels take no partial key tile
    (kRagged = false), so N is a multiple of 128. The Triton import has no kernel<true> (its
    launcher then runs one CTA per tile)."""
    import torch
    g = _gpu()
    lib, _ = g.causal_library(name, str(tmp_path_factory.mktemp("causal")))
    torch.manual_seed(n)
    q, k, v = (torch.randn(16, n, 128, device="cuda", dtype=torch.float16) for _ in range(3))  # B=2, H=8
    o, unwritten = g.run_causal(lib, q, k, v, persistent)
    assert unwritten == 0
    heads = (0, 7, 15)
    ref = g.causal_reference(q[list(heads)], k[list(heads)], v[list(heads)], len(heads))
    err = float((o[list(heads)].double() - ref.double()).norm() / ref.double().norm())
    assert err < 1e-2, err


def _tile_order(tiles_m: int, per_m: int, iters: int, stream: int, budget: int) -> list[tuple[int, int]]:
    """ragged.causal_code's tile_at in Python: (m, r) of CTA t = 0, 1, ..."""
    g = max(1, min(per_m, budget // max(iters * stream, 1)))
    order = []
    for t in range(tiles_m * per_m):
        group, rest = divmod(t, g * tiles_m)
        size = min(g, per_m - group * g)
        order.append((tiles_m - 1 - rest // size, group * g + rest % size))
    return order


def test_the_tiles_run_longest_first_in_groups_of_heads_that_share_l2():
    from twill.emit.ragged import L2_STREAM_BYTES
    for tiles_m, per_m, iters in ((64, 128, 64), (128, 128, 128), (16, 128, 16), (8, 5, 8), (3, 1, 3)):
        order = _tile_order(tiles_m, per_m, iters, 65536, L2_STREAM_BYTES)
        assert sorted(order) == [(m, r) for m in range(tiles_m) for r in range(per_m)]  # every tile once
        g = max(1, min(per_m, L2_STREAM_BYTES // (iters * 65536)))
        for start in range(0, len(order), g * tiles_m):
            block = order[start:start + g * tiles_m]
            assert len({r for _, r in block}) * iters * 65536 <= max(L2_STREAM_BYTES, iters * 65536)
            assert [m for m, _ in block] == sorted((m for m, _ in block), reverse=True)  # longest first
    text = _emitted("attention_fwd_causal_hopper.h200")
    assert "const int g = static_cast<int>(max(1LL, min(static_cast<long long>(per_m), kL2StreamBytes" in text
    assert "constexpr long long kStreamBytes = 65536;" in text  # K and V: 2 x 128 x 128 x 2 bytes
