"""FlashAttention's backward emitted by twill: the preprocessing and the softmax scale in graphs.

examples/attention_bwd_delta_hopper.tir computes Delta = rowsum(dO * O) (FlashAttention's
preprocessing kernel); examples/attention_bwd_flash_hopper.tir is the main backward kernel fed with
the unscaled Q, whose epilogue scales dK by the softmax scale and writes dK and dV in f16;
examples/attention_bwd_causal_hopper.tir is the same with the causal mask, each key tile's loop
starting at the query block of its first key (ragged.causal_first). The
schedules in tests/data/attention_bwd/ are `twill solve`'s (stored so the tests do not solve); the
kernels and bindings in tests/golden/attention_bwd/ are what bench/attention_features.py runs
(row attention_bwd_emitted). Without a GPU: the examples solve proven optimal to the stored
schedules, the files are golden, nvcc builds them with no spill; on a Hopper GPU: Delta against
torch and the whole backward against float32 autograd.
"""
from __future__ import annotations

import importlib.util
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from twill.emit import build_model, emit_cuda
from twill.emit.binding import binding_files
from twill.emit.ragged import causal_first, causal_keeps
from twill.fileio import load_graph
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.schedule import Schedule

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from ringcheck import ring_deadlock  # noqa: E402

DATA = ROOT / "tests" / "data" / "attention_bwd"
GOLDEN = ROOT / "tests" / "golden" / "attention_bwd"
KERNELS = {"attention_bwd_delta_hopper.h200": "attention_bwd_delta_hopper.tir",
           "attention_bwd_flash_hopper.h100": "attention_bwd_flash_hopper.tir",
           "attention_bwd_flash_hopper.h200": "attention_bwd_flash_hopper.tir",
           "attention_bwd_causal_hopper.h200": "attention_bwd_causal_hopper.tir"}
LOG2E = 1.4426950408889634
OUTER_CACHE = os.environ.get("TWILL_CACHE_DIR")  # the bindings' build folder, before a test's own cache


def schedule(name: str) -> Schedule:
    return Schedule.from_json((DATA / f"{name}.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_examples_solve_proven_optimal_to_the_stored_schedules(name):
    """Under the stored schedule's per-role registers (emit-cuda's ptxas loop gave the causal
    kernel's consumer 32 more: `role_reserve`), the example solves to it, proven optimal."""
    stored = schedule(name)
    reserve = tuple((tuple(ops), regs, warps) for ops, regs, warps in dict(stored.options).get("role_reserve", ()))
    s = solve(load_graph(ROOT / "examples" / KERNELS[name]), load_machine(name.split(".")[1]),
              SolveOptions(role_reserve=reserve))
    assert s.optimal and s.length_optimal
    assert (s.ii, s.length) == (stored.ii, stored.length)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_kernels_and_bindings_are_golden(name, golden):
    s = schedule(name)
    machine = load_machine(s.machine)
    golden(f"attention_bwd/{name}.cu", emit_cuda(s, machine))
    for path, text in binding_files(build_model(s, machine), str(GOLDEN / f"{name}.cu")).items():
        golden(f"attention_bwd/{Path(path).name}", text)


def test_delta_reads_two_tiles_and_writes_one_value_per_row():
    text = emit_cuda(schedule("attention_bwd_delta_hopper.h200"), load_machine("h200"))
    assert "twill::op_reduce_sum(dlt[0], pr[0]);" in text and "twill::wgmma_m64" not in text  # no tensor core


def test_the_backward_takes_the_softmax_scale_and_writes_f16_gradients():
    spec = _module("attention_bwd_flash_hopper.h100").SPEC
    args = {a["name"]: a for a in spec["args"]}
    assert args["dk"]["dtype"] == args["dv"]["dtype"] == "float16" and args["dq"]["dtype"] == "float32"
    text = (GOLDEN / "attention_bwd_flash_hopper.h100.py").read_text()
    assert "def attention_bwd_flash_hopper(k, v, q, do, lse, dlt, softmax_scale," in text


def _nvcc() -> str | None:
    return shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


@pytest.mark.slow
@pytest.mark.skipif(_nvcc() is None, reason="nvcc not found")
@pytest.mark.parametrize("name", [pytest.param(k, marks=pytest.mark.extended) if k.endswith(".h100") else k
                                  for k in sorted(KERNELS)])  # (the H100 flash kernel: the H200's twin, 9 s)
def test_the_kernels_compile_for_sm90a_without_warnings_or_spills(name, tmp_path):
    proc = subprocess.run([_nvcc(), "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-DTWILL_MAIN",
                           "-Xptxas", "-v", "-c", str(GOLDEN / f"{name}.cu"), "-o", str(tmp_path / "k.o")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = [line for line in proc.stderr.splitlines() if line.strip()]
    assert not [line for line in report if "warning" in line.lower()], report
    spills = [line for line in report if "spill" in line]
    assert spills and all(" 0 bytes spill stores, 0 bytes spill loads" in line for line in spills), spills


def _module(name: str):
    spec = importlib.util.spec_from_file_location("binding_" + name.replace(".", "_"), GOLDEN / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# -- the causal backward without a GPU ---------------------------------------------------------------

CAUSAL = "attention_bwd_causal_hopper.h200"


def test_a_key_tiles_loop_starts_at_the_query_block_of_its_first_key():
    """ragged.causal_first: every query that keeps a key of the tile lies at or after the first
    iteration, the blocks skipped keep none, and a tile near the end starts early enough for the
    pipeline's stages (those extra blocks are masked whole)."""
    for step, rows, iters, stages in ((64, 128, 16, 2), (64, 128, 18, 2), (128, 128, 8, 3), (64, 64, 8, 1)):
        for m in range(iters * step // rows):
            first = causal_first(iters, stages, step, m * rows)
            assert iters - first >= stages and first >= 0
            kept = [q for q in range(iters * step) if any(causal_keeps(q, key) for key in range(m * rows, (m + 1) * rows))]
            assert first * step <= kept[0]  # nothing kept is skipped
            assert first == max(0, min(kept[0] // step, iters - stages))  # and no block keeping nothing runs, but for the stages


def test_the_causal_backward_offsets_every_loop_index_by_the_tiles_first_block():
    text = emit_cuda(schedule(CAUSAL), load_machine("h200"))
    assert "const int n = causal_iters(args, tile_at(args, blockIdx.x, 0));  // this key tile's query blocks" in text
    assert "return max(0, min(start / kLoopStep, args.iters - kStages));" in text
    loads = [line for line in text.splitlines() if "twill::tma_load(sm.ld_" in line]
    assert loads and all("(causal_first(args, tile) + it) * 64" in line for line in loads)
    assert "const int r0 = (causal_first(args, tile) + it) * 64" in text  # dQ's rows
    masks = [line.strip() for line in text.splitlines() if "twill::mask_causal(" in line and "void" not in line]
    assert masks and all(line.endswith("tile.m * args.k_rows_step + args.k_rows_offset);") for line in masks)
    assert "return twill::TileIdx{in / size," in text  # the first key tiles (longest loops) first


def test_the_causal_backwards_rings_never_deadlock():
    """Every loop length a key tile runs (kStages and up): no role waits forever."""
    text = emit_cuda(schedule(CAUSAL), load_machine("h200"))
    stages = int(re.search(r"constexpr int kStages = (\d+);", text).group(1))
    for n in range(stages, stages + 9):
        assert ring_deadlock(text, n) == {}, n


def test_the_causal_backward_takes_the_flash_backwards_arguments():
    args = {a["name"]: a for a in _module(CAUSAL).SPEC["args"]}
    assert [a for a in args if not args[a]["output"]] == ["k", "v", "q", "do", "lse", "dlt"]
    assert args["q"]["dims"] == [["loop", 64], ["n", 128]] and args["k"]["dims"] == [["m", 128], ["n", 128]]
    assert args["dq"]["dtype"] == "float32" and args["dk"]["dtype"] == args["dv"]["dtype"] == "float16"
    assert "def attention_bwd_causal_hopper(k, v, q, do, lse, dlt, softmax_scale," in (GOLDEN / f"{CAUSAL}.py").read_text()


# -- on a Hopper GPU ---------------------------------------------------------------------------------

def _gpu_ready() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0) and _nvcc() is not None


def _bench(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gpu = pytest.mark.skipif(not _gpu_ready(), reason="needs a Hopper (sm_90) GPU, torch and nvcc")


@pytest.fixture
def built(private_schedule_cache, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TWILL_CACHE_DIR", OUTER_CACHE or str(tmp_path_factory.mktemp("b")))

    def build(name):
        mod = _module(name)
        mod.build_library()
        return mod
    return build


@gpu
def test_delta_matches_torch(built):
    import torch
    feats = _bench("attention_features")
    torch.manual_seed(3)
    o, d_o = (torch.randn(2, 3, 1024, 128, device="cuda", dtype=torch.float16) for _ in range(2))
    got = feats.delta(built("attention_bwd_delta_hopper.h200"), o, d_o)
    want = (o.float() * d_o.float()).sum(-1)
    assert torch.allclose(got, want, rtol=1e-3, atol=1e-3)


@gpu
@pytest.mark.parametrize("group", (1, 4))
def test_the_emitted_backward_matches_autograd(built, group):
    """twill's forward (O, m, l), the Delta kernel and the scaled backward: dQ, dK, dV against
    float32 autograd of softmax(Q K^T / sqrt(D)) V; grouped (4 query heads per K/V head): dK and
    dV summed over the group's query heads."""
    import torch
    feats, g = _bench("attention_features"), _bench("gpu_bench")
    B, H, N, D = 1, 4, 512, 128
    torch.manual_seed(5 + group)
    q, d_o = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(2))
    k, v = (torch.randn(B, H // group, N, D, device="cuda", dtype=torch.float16) for _ in range(2))
    scale = 1 / math.sqrt(D)
    fwd, _ = g.build_binding("attention_fwd_hopper.h200")
    out = fwd.run(q, k, v, exp2_scale=scale * LOG2E)
    grads = feats.emitted_backward(built("attention_bwd_delta_hopper.h200"), built("attention_bwd_flash_hopper.h100"),
                                   q, k, v, out.acc, out.m, out.l, d_o, scale)
    torch.cuda.synchronize()
    assert [tuple(x.shape) for x in grads] == [(B, H, N, D), (B, H // group, N, D), (B, H // group, N, D)]
    for got, want in zip(grads, feats.reference_backward(q, k, v, d_o, scale, H, group)):
        assert g.rel_err(got[0], want) < 1e-2


@gpu
@pytest.mark.parametrize("group", (1, 4))
@pytest.mark.parametrize("n", (512, 1152))
def test_the_emitted_causal_backward_matches_autograd(built, group, n):
    """The causal backward (each key tile's loop from its diagonal's query block) from the causal
    forward's O and logsumexp: dQ, dK, dV against float32 autograd of the masked softmax; N = 1152
    has 9 key tiles and 18 query blocks, so tiles start at odd and even blocks alike."""
    import torch
    feats, g = _bench("attention_features"), _bench("gpu_bench")
    B, H, D = 1, 4, 128
    torch.manual_seed(11 + group + n)
    q, d_o = (torch.randn(B, H, n, D, device="cuda", dtype=torch.float16) for _ in range(2))
    k, v = (torch.randn(B, H // group, n, D, device="cuda", dtype=torch.float16) for _ in range(2))
    scale = 1 / math.sqrt(D)
    o, lse = feats.causal_forward(q, k, v, scale)
    grads = feats.emitted_causal_backward(built("attention_bwd_delta_hopper.h200"),
                                          built("attention_bwd_causal_hopper.h200"), q, k, v, o, lse, d_o, scale)
    torch.cuda.synchronize()
    assert [tuple(x.shape) for x in grads] == [(B, H, n, D), (B, H // group, n, D), (B, H // group, n, D)]
    for got, want in zip(grads, feats.reference_backward(q, k, v, d_o, scale, H, group, causal=True)):
        assert g.rel_err(got[0], want) < 1e-2
