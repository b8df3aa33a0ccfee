"""A column split's fixup (twill/emit/fixup.py): a row loop whose epilogue reads its carries (a cross-entropy's loss
from its online (m, l), LayerNorm's mean from its sum) is split by columns like any other, the splits' partial
carries combined in the kernel by the last split of each row tile to arrive, which alone runs the epilogue.

- the plan: such loops split with `fixup` (colsplit.plan), every other split as before;
- emitted: each split writes its partials to the scratch, `twill::split_arrive` per warp, the last combines the
  partials in split order (max, then the rescaled sums: COMBINE's maths) and runs the epilogue under
  `if (twill_last)`; the outputs are written at the batch entry, not per split; launch() refuses a split kernel
  called without the scratch;
- the binding: SPEC["fixup"] sizes the scratch, the packed block ends with its two pointers (the entry's
  static_assert and twill_args_bytes agree with args_format), the splits are picked at the call, the outputs
  are the user's [*batch, M], not [S, ...]; the split's own parameter is a keyword after the kernel's arguments;
- a sequence's loop that is fixed up hands its epilogue's output on: K.py combines nothing of it;
- sm_90a and sm_100a compile the fixed-up kernels with no spill.
"""
from __future__ import annotations

import ctypes
import importlib.util
import inspect
import re
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import nvcc
from test_colsplit import _fake_torch, _seq, _Tensor
from twill.emit.binding_runtime import choose_splits, choose_uneven
from twill.emit.colsplit import plan
from twill_cli.main import main

DATA = Path(__file__).parent / "data" / "ttgir"


def _emit(tmp_path, batch: str, name: str, gpu: str = "h200"):
    """import -> emit-cuda --binding torch (no ptxas loop): (the kernel's .cu text, the binding's module)."""
    tir, cu = tmp_path / f"{name}.tir", tmp_path / f"{name}.cu"
    for argv in (["import", str(DATA / batch / "t36/prepipe" / f"{name}_sm90.ttgir"), "-o", str(tir)],
                 ["emit-cuda", str(tir), "--gpu", gpu, "-o", str(cu), "--binding", "torch", "--no-ptxas-loop",
                  "--time-limit", "20"]):
        r = CliRunner().invoke(main, argv)
        assert r.exit_code == 0, r.output
    spec = importlib.util.spec_from_file_location(f"{name}_{gpu}_fixup", tmp_path / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return cu.read_text() if cu.exists() else "", mod  # (a sequence: K.LOOP.cu, K.py)


def test_loops_whose_epilogue_reads_their_folds_split_with_the_fixup():
    got = {name: [plan(g).fixup for g in _seq(batch, name).graphs]
           for batch, name in [("heldout6", "cross_entropy_fwd"), ("heldout7", "xent_scalar"),
                               ("heldout7", "layernorm_fwd"), ("heldout7", "softmax_online"), ("heldout2", "row_stats")]}
    assert got == {"cross_entropy_fwd": [True], "xent_scalar": [True], "layernorm_fwd": [True, True, False],
                   "softmax_online": [False, False], "row_stats": [True]}, got


def test_the_cross_entropy_is_split_and_its_splits_combined_in_the_kernel(tmp_path, monkeypatch):
    """cross_entropy_fwd (batch 6: the online logsumexp over V, then LOSS = lse - x[target] and LSE): emitted split
    by columns with the fixup; at 1000 x 32000 bf16 on 132 SMs its binding picks S = choose_splits(16 row tiles,
    250 iterations) and the outputs stay [1000]."""
    text, mod = _emit(tmp_path, "heldout6", "cross_entropy_fwd")
    assert "grid split = twill_split_cols" in text
    fix = text.split("// ---- the column split's fixup")[1].split("if (twill_last) {\n    twill::Rows")[0]
    # this split's partials, the arrival, the combine in split order: the max first, then the rescaled sums
    assert fix.index("twill::frag_to_buffer(twill_part + (tile.b / args.batch * 2 + 0) * 64, m_new_final") \
        < fix.index("twill::split_arrive(") < fix.index("twill::fold_max(m_new_final, twill_m)") \
        < fix.index("twill::fill(s_new_final, 0.f)") < fix.index("twill::fold_rescaled(s_new_final, twill_l, twill_m, "
                                                                   "m_new_final, args.exp2_scale)"), fix
    after = text.split("bool twill_last = true;")[1]
    assert after.index("if (twill_last) {") < after.index("twill::gather_rows(") < after.index("store_out_LOSS(")
    assert "twill_split_b) * 1 * static_cast<int>(twill::grid_extent(args.m_extent, args.tiles_m, args.out_LOSS" in text
    assert "if (p.splits > 1 && (p.twill_partials == nullptr || p.twill_arrivals == nullptr))" in text
    assert ("args.x_cols = static_cast<int>((p.loop_whole > 0 ? static_cast<uint64_t>(p.loop_whole) : "
            "loop_elements(p, 128) * static_cast<uint64_t>(p.splits)));") in text  # the gather's row: all of it
    assert mod.SPEC["fixup"] == {"rows": 64, "carries": 2} and "folds" not in mod.SPEC
    # the Triton kernel's arguments in its order, positional; the split's own parameter (none of them) a keyword
    params = inspect.signature(mod.run).parameters
    assert [n for n, q in params.items() if q.kind == q.POSITIONAL_OR_KEYWORD] == ["LOGITS", "TARGET", "LOSS", "LSE",
                                                                                     "stride_row", "V"]
    assert params["twill_split_cols"].kind == inspect.Parameter.KEYWORD_ONLY
    assert mod.args_format(mod.SPEC).endswith("q2P")
    entry = (tmp_path / "cross_entropy_fwd_entry.cu").read_text()
    assert "void* fixup[2];" in entry and "p.twill_arrivals = static_cast<int*>(a.fixup[1]);" in entry
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(132))
    monkeypatch.setattr(mod, "_SMS", {})
    logits, target = _Tensor(np.zeros((1000, 32000)), "bfloat16"), _Tensor(np.zeros(1000), "int32")
    run = mod._prepare(mod.SPEC, {"LOGITS": logits, "TARGET": target, "LOSS": None, "LSE": None}, None, _Tensor, str)
    want = choose_splits(16, 250, mod.SPEC["stages"], 132)
    assert want > 1 and run.plan["splits"] == want and run.tail == (want, 0), run.plan  # (even: no whole extent)
    assert run.plan["shapes"]["LOSS"] == (1000,) and run.plan["shapes"]["LSE"] == (1000,)


def test_a_sequence_hands_on_what_its_fixed_up_loop_computes(tmp_path):
    """LayerNorm (batch 7): the mean's and the variance's loops are fixed up (their epilogues compute the mean
    and rstd the next loops read), the normalizing pass splits as it is: K.py combines nothing."""
    _, seq_mod = _emit(tmp_path, "heldout7", "layernorm_fwd")
    assert {loop: folds for loop, (_, _, folds, _) in seq_mod.SPLITS.items()} == {"L0": (), "L1": (), "L2": ()}
    assert seq_mod.COMBINE == {}
    for loop in ("L0", "L1"):
        text = (tmp_path / f"layernorm_fwd.{loop}.cu").read_text()
        assert "twill::split_arrive(" in text and "if (twill_last) {" in text, loop
        assert seq_mod._module(f"layernorm_fwd.{loop}.py").SPEC["fixup"] == {"rows": 64, "carries": 1}


@pytest.mark.slow
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found")
@pytest.mark.parametrize("gpu", ["h200", pytest.param("b200", marks=pytest.mark.extended)])  # CI's time: sm_100a extended
def test_the_fixed_up_kernel_builds_and_its_entry_reads_the_block_the_binding_packs(tmp_path, gpu):
    """The binding's own build of the fixed-up cross-entropy (sm_90a, sm_100a), and the entry's block (fixup
    pointers included) is the size args_format packs. sm_90a's has no spill as the schedule is; sm_100a's spills
    without the ptxas loop emit-cuda runs (which gives softmax1 32 more registers: clean, 38 s here)."""
    _, mod = _emit(tmp_path, "heldout6", "cross_entropy_fwd", gpu)
    so = mod.build_library(str(tmp_path / "cache"))
    if gpu == "h200":
        assert mod.spills(Path(so + ".log").read_text()) == []
    assert re.search(r"Compiling entry function '\w*kernel", Path(so + ".log").read_text())
    lib = ctypes.CDLL(so)
    assert lib.twill_args_bytes() == struct.calcsize(mod.args_format(mod.SPEC))


def test_a_partial_last_column_tile_splits_unevenly(tmp_path, monkeypatch):
    """GPT-2's vocabulary, 1000 x 50257 (393 tiles of 128, the last partial): S - 1 splits of q whole tiles and a
    last of what they leave (choose_uneven), the launch given the whole extent (Problem::loop_whole) for the tensor
    maps, the gather's row length and the last split's own iterations and partial tile (split_iters,
    twill_loop_tail); a split that is no whole number of tiles, or leaves the last fewer iterations than the
    pipeline's stages, is refused naming the argument."""
    text, mod = _emit(tmp_path, "heldout6", "cross_entropy_fwd")
    assert "return tile.b / args.batch == args.splits - 1 ? args.last_iters : args.iters;" in text
    assert "const int n = split_iters(args, tile_at(args, blockIdx.x, 0));" in text
    assert re.search(r"if \(\(j \+ 1\) == n - 1 && twill_loop_tail < kLoopStep\) twill::mask_past<1>", text)
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(132))
    monkeypatch.setattr(mod, "_SMS", {})
    logits, target = _Tensor(np.zeros((1000, 50257)), "bfloat16"), _Tensor(np.zeros(1000), "int32")
    tensors = {"LOGITS": logits, "TARGET": target, "LOSS": None, "LSE": None}
    run = mod._prepare(mod.SPEC, tensors, None, _Tensor, str)
    s, q = choose_uneven(16, 393, mod.SPEC["stages"], 132)
    assert s > 1 and run.plan["splits"] == s and run.plan["loop_extent"] == q * 128 and run.tail == (s, 50257)
    assert run.plan["shapes"]["LOSS"] == (1000,)
    with pytest.raises(mod.ArgumentError, match=r"twill_split_cols = 1000 is not a multiple of 128"):
        mod._prepare(mod.SPEC, tensors, None, _Tensor, str, split=1000)
    with pytest.raises(mod.ArgumentError, match=r"the last of L = 50257's 2 splits would run 1 iteration\(s\)"):
        mod._prepare(mod.SPEC, tensors, None, _Tensor, str, split=392 * 128)


def test_the_fixed_up_cross_entropy_matches_golden(tmp_path, golden):
    """The fixed-up cross-entropy's kernel, binding and entry (h200, no ptxas loop: the schedule as solved), byte for
    byte (tests/golden/fixup); tests/test_gpu.py runs them against torch where a GPU is."""
    stem = "cross_entropy_fwd_sm90.h200"
    tir = tmp_path / "xe.tir"
    for argv in (["import", str(DATA / "heldout6/t36/prepipe/cross_entropy_fwd_sm90.ttgir"), "-o", str(tir)],
                 ["emit-cuda", str(tir), "--gpu", "h200", "-o", str(tmp_path / f"{stem}.cu"), "--binding", "torch",
                  "--no-ptxas-loop", "--time-limit", "20"]):
        r = CliRunner().invoke(main, argv)
        assert r.exit_code == 0, r.output
    for suffix in (".cu", ".py", "_entry.cu"):
        golden(f"fixup/{stem}{suffix}", (tmp_path / f"{stem}{suffix}").read_text())
