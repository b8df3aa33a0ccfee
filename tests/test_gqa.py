"""Grouped-query attention (twill/emit/batch_groups.py): K and V shared by groups of query heads.

Without a GPU: which tensors the rule lets share, what the emitted kernel reads (tile b's K/V
entry b / group), the binding reading the group off the shapes (Q [B, Hq, N, D], K and V
[B, Hkv, N, D], Hq % Hkv == 0) with an ArgumentError naming the tensor otherwise, and the entry
point passing it. On the GPU: tests/test_gpu.py runs it against a reference.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from test_binding import GOLDEN, ROOT, module, meta

from twill.emit import build_model
from twill.emit.batch_groups import shareable
from twill.emit.binding import binding_files
from twill.emit.model import GlobalTensor
from twill.machine import load_machine
from twill.schedule import Schedule

CAUSAL_DIR = ROOT / "tests" / "golden" / "causal"

FWD = "attention_fwd_hopper.h200"


def gqa(mod, q=(2, 8, 512, 128), k=(2, 2, 1024, 128), v=(2, 2, 1024, 128), acc=None):
    given = {"q": meta(mod, q), "k": meta(mod, k), "v": meta(mod, v)}
    if acc is not None:
        given["acc"] = meta(mod, acc)
    return mod.resolve(mod.SPEC, given)


def test_only_inputs_off_the_grid_rows_may_be_shared():
    k = GlobalTensor("k", "k", "load", "f16", (128, 128), ("loop", "fixed"))
    v = GlobalTensor("v", "v", "load", "f16", (128, 128), ("loop", "n"))
    q = GlobalTensor("q", "q", "input", "f16", (128, 128), ("m", "fixed"))
    out = GlobalTensor("out_acc", "acc", "output", "f16", (128, 128), ("m", "n"))
    once = GlobalTensor("w", "w", "load", "f16", (64, 64), ("fixed", "fixed"), per_iteration=True)
    assert [shareable(t) for t in (k, v, q, out, once)] == [True, True, False, False, False]


@pytest.mark.parametrize("hq, hkv", [(8, 8), (8, 2), (8, 1), (32, 4)])
def test_the_group_is_read_off_the_heads(hq, hkv):
    mod = module(FWD)
    plan = gqa(mod, q=(2, hq, 512, 128), k=(2, hkv, 1024, 128), v=(2, hkv, 1024, 128))
    names = [a["name"] for a in mod.SPEC["args"]]
    groups = dict(zip(names, plan["groups"]))
    assert groups == {"q": 1, "k": hq // hkv, "v": hq // hkv, "m": 1, "l": 1, "acc": 1}
    assert plan["batch"] == 2 * hq and plan["shapes"]["acc"] == (2, hq, 512, 128)


def test_a_tensor_without_the_heads_dimension_serves_all_heads_of_its_batch_entry():
    """K and V [B, N, D] under Q [B, H, N, D] (Triton's `K + (bh // H) * stride`, a per-batch key
    bias): as [B, 1, N, D], one entry per group of all H heads."""
    mod = module(FWD)
    plan = gqa(mod, q=(2, 8, 512, 128), k=(2, 1024, 128), v=(2, 1024, 128))
    groups = dict(zip([a["name"] for a in mod.SPEC["args"]], plan["groups"]))
    assert (groups["k"], groups["v"], groups["q"]) == (8, 8, 1) and plan["batch"] == 16


@pytest.mark.parametrize("k, message", [
    ((2, 3, 1024, 128), r"^k: 3 heads \(its last batch dimension, shape \[2, 3, 1024, 128\]\) do not divide q's 8: "
                        r"grouped-query attention needs Hq % Hkv == 0"),
    ((1, 2, 1024, 128), r"^k: batch dimensions \[1, 2\] differ from q's \[2, 8\] other than in the last"),
    ((4, 1024, 128), r"^k: batch dimensions \[4\] differ from q's \[2, 8\]"),
])
def test_heads_that_do_not_group_are_named(k, message):
    mod = module(FWD)
    with pytest.raises(mod.ArgumentError, match=message):
        gqa(mod, k=k)


def test_the_output_and_query_keep_their_batch():
    """Only K and V may have fewer heads: an output with fewer is refused as before."""
    mod = module(FWD)
    with pytest.raises(mod.ArgumentError, match=r"^acc: batch dimensions \[2, 2\] differ from q's \[2, 8\]"):
        gqa(mod, acc=(2, 2, 512, 128))


def test_the_kernel_reads_kv_entry_b_over_the_group():
    text = (GOLDEN / f"{FWD}.cu").read_text()
    loads = re.findall(r"tma_load\([^;]*tm\.(\w+),[^;]*, ([^,;]+)\);", text)
    assert {t: {b for u, b in loads if u == t} for t in ("q0", "k", "v")} == {
        "q0": {"tile.b"}, "k": {"twill_b_k"}, "v": {"twill_b_v"}}
    assert text.count("const int twill_b_k = tile.b / args.k_batch_group;") == 1  # the load warp's, once per tile
    assert "if (p.k_batch_group < 1 || p.batch % p.k_batch_group != 0) return cudaErrorInvalidValue;" in text
    entry = (GOLDEN / f"{FWD}_entry.cu").read_text()
    assert "p.k_batch_group = static_cast<int>(a.batch_groups[1]);" in entry
    assert "p.v_batch_group = static_cast<int>(a.batch_groups[2]);" in entry


CAUSAL = "attention_fwd_causal_hopper.h200"


def test_the_causal_kernels_binding_matches_golden(golden):
    """The causal example's binding (tests/golden/causal/, beside its kernel), which
    bench/gpu_bench.py calls for the causal rows, GQA included."""
    s = Schedule.from_json((ROOT / "tests" / "data" / "causal" / f"{CAUSAL}.json").read_text())
    files = binding_files(build_model(s, load_machine(s.machine)), str(CAUSAL_DIR / f"{CAUSAL}.cu"))
    for path, text in sorted(files.items()):
        golden(f"causal/{Path(path).name}", text)


def test_the_causal_binding_groups_kv_heads():
    mod = module(CAUSAL, CAUSAL_DIR)
    plan = gqa(mod, q=(2, 8, 1024, 128), k=(2, 1, 1024, 128), v=(2, 1, 1024, 128))
    groups = dict(zip([a["name"] for a in mod.SPEC["args"]], plan["groups"]))
    assert (groups["k"], groups["v"], groups["q"]) == (8, 8, 1)


def _features():
    import importlib.util
    spec = importlib.util.spec_from_file_location("attention_features", ROOT / "bench" / "attention_features.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_bench_features_run_golden_kernels_with_bindings():
    feats = _features()
    for name, (fixture, folder, causal, fp8, groups, D) in feats.FEATURES.items():
        where = Path(folder) if folder else GOLDEN
        for suffix in (".cu", ".py", "_entry.cu"):
            assert (where / f"{fixture}{suffix}").is_file(), (name, suffix)
        assert all(32 % g == 0 for g in groups)


def test_the_features_table_reads_its_rows():
    row = {"variant": "attention_gqa", "Hkv": 8, "N": 2048, "twill_tflops": 500.0, "fa4_tflops": 520.0,
           "cudnn_error": "RuntimeError: no kernel", "rel_err": 3e-4, "fa4_rel_err": 4e-4, "ok": True}
    lines = _features().markdown([row])
    assert "| attention_gqa | 8 | 2048 | 500.0 | 520.0 | RuntimeError: no kernel | 0.96x | — | 3.0e-04 | 4.0e-04 | — | yes |" \
        in lines
