"""A loop extent that is not a multiple of the tile (twill/emit/ragged.py, Problem::loop_extent).

What the kernels compute on a partial last tile is checked on the GPU (tests/test_gpu.py: keys 777,
1000, 1088 and 1152 against torch for the 128- and 192-key FA3 kernels, a GEMM with K = 1000). Here:
which values the plan masks, where it refuses and why, and what the emitted code says about it.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from twill.emit import build_model, emit_cuda
from twill.emit.ragged import plan
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.schedule import Schedule
from twill.tir import parse_tir

DATA = Path(__file__).resolve().parent / "data" / "emit"


def model(name: str):
    s = Schedule.from_json((DATA / f"{name}.json").read_text())
    return build_model(s, load_machine(s.machine))


@pytest.mark.parametrize("name, step, masks", [
    ("attention_fwd_hopper.h100", 128, (("m0_new", "s0", 1), ("m1_new", "s1", 1))),
    ("attention_fwd_hopper_k192.h100", 192, (("m0_new", "s0", 1), ("m1_new", "s1", 1))),
    ("attention_fwd_d64.h100", 128, (("m0_new", "s0", 1), ("m1_new", "s1", 1))),
    ("triton_attn_fwd_tma_sm90.h100", 128, (("m_ij", "qk", 1),)),
    # the backward loops over queries: S's rows run along the loop, masked before P = exp2(S - lse)
    ("attention_bwd_hopper.h100", 64, (("p", "s", 0),)),
    # a GEMM's K: the zero fill adds nothing, no mask
    ("gemm_hopper.h100", 64, ()),
    ("gemm_k16n32.h100", 16, ()),
])
def test_the_plan_masks_scores_before_their_first_max_like_reader(name, step, masks):
    r = plan(model(name))
    assert (r.step, r.masks, r.why_not) == (step, masks, "")


def test_scores_handed_to_another_role_are_masked_before_the_hand_over():
    """S computed on the mma role and read (rowmax, exp2) on the softmax role, through a copy in
    shared memory: the mma role masks it before it writes the copy (`published`); no reader of its
    own, so no mask at a reader. (It was refused until session 26: held-out attn_kvlen's schedule
    for h200 put exp2 in a role of its own and lost its partial last key tile.)"""
    r = plan(model("attention_fwd_simple.h100"))
    assert (r.step, r.masks, r.why_not, r.published) == (128, (), "", (("s", 1),))


@pytest.mark.parametrize("name, why", [
    ("fig1.h100", "no loaded tile runs along the loop"),
    ("attention_fwd_blackwell.b200", "rowmax m0_new reads s0, which runs along the loop, not as a register fragment of sm_90a"),
])
def test_the_plan_refuses_what_it_cannot_mask(name, why):
    r = plan(model(name))
    assert r.masks == () and r.why_not.startswith(why)


def solved(text: str):
    graph = parse_tir(text, "ragged.tir")
    machine = load_machine("h100")
    s = solve(graph, machine, SolveOptions(swp_only=True))
    return build_model(s, machine, graph), emit_cuda(s, machine)


GRAPH = """kernel ragged
input q : f16[64,128] @smem
carry m : f32[64] = -inf
carry l : f32[64] = 0
loop {
  k = load : f16[128,128] @smem
  s = mma q, k : f32[64,128]
  m_new = rowmax s, m : f32[64]
  %s
  yield m = m_new, l = l_new
}
"""


def test_a_value_also_summed_is_refused_not_masked():
    """-inf is right for rowmax and exp2 only: a rowsum of the same scores needs their zero fill."""
    m, cu = solved(GRAPH % "l_new = rowsum s, l : f32[64]")
    assert m.ragged.why_not == ("rowmax m_new reads s, which runs along the loop, and so does l_new, "
                                "for which an absent element is not -inf")
    assert "constexpr bool kRagged = false;  // the last iteration's tile may be partial: not here, rowmax m_new" in cu
    assert "mask_past<" not in cu.split("// ---- role ")[1]
    # launch refuses a partial tile rather than compute something else
    assert "if (p.loop_extent < 0 || (p.loop_extent % kLoopStep != 0 && !kRagged))" in cu


def test_a_load_read_by_rowmax_is_refused():
    graph = GRAPH.replace("[64", "[128")  # 128 query rows, so that a rowmax of the 128-row k is well shaped
    _, cu = solved(graph.replace("m_new = rowmax s, m", "m_new = rowmax k, m") % "l_new = rowsum s, l : f32[128]")
    assert re.search(r"kRagged = false;  // .*: not here, rowmax m_new reads k, which runs along the loop, "
                     r"straight from memory", cu)


def test_the_emitted_mask_runs_on_the_last_iteration_only():
    """In the loop only its last window tests the iteration number; after it, `case r` and the
    epilogue know which window runs iteration n - 1. Prologue windows never do (n >= kStages)."""
    s = Schedule.from_json((DATA / "attention_fwd_hopper_k192.h100.json").read_text())
    cu = emit_cuda(s, load_machine("h100"))
    assert "constexpr int kLoopStep = 192;" in cu and "constexpr bool kRagged = true;" in cu
    role = cu.split("void role_consumer0(")[1].split("\n}\n")[0]
    prologue, rest = role.split("// ---- steady state")
    loop, after = rest.split("switch (n - j)")
    assert "mask_past" not in prologue
    assert loop.count("mask_past<1>(s0[0], 0, args.loop_tail)") == 1
    assert "if constexpr (kTail) if ((j + 1) == n - 1 && args.loop_tail < kLoopStep) twill::mask_past<1>(s0[0]" in loop
    assert after.count("if constexpr (kTail) if (args.loop_tail < kLoopStep) twill::mask_past<1>(s0[0], 0, "
                       "args.loop_tail)") == 1
    # the masked tile is S before its rowmax: the mask comes right before the op that reads it
    at = role.index("if constexpr (kTail) if ((j + 1) == n - 1")
    assert role[at:].split("\n")[1].strip() == "// m0_new = rowmax s0, m0 (iteration j + 1)"
    # only the roles that mask take kTail, and launch() runs kernel<..., true> for a partial tile alone
    assert "template <bool kTail>  // the loop's last tile is partial: mask it (ragged.py)\n" \
           "__device__ __forceinline__ void role_consumer0(" in cu
    assert "template <bool kTail>  // the loop's last tile is partial: mask it (ragged.py)\n" \
           "__device__ __forceinline__ void role_load(" not in cu
    assert "role_consumer0<kTail>(sm, tm, args, n, tile_at(args, blockIdx.x, 0));" in cu
    assert "constexpr bool kMasks = true;" in cu
    assert "  const bool tail = kMasks && args.loop_tail < kLoopStep;" in cu
    assert "                      : (tail ? kernel<false, kMasks> : kernel<false, false>);" in cu
    # the host: the iteration count and the last tile's valid keys from loop_extent
    assert "return p.loop_extent > 0 ? (p.loop_extent + kLoopStep - 1) / kLoopStep : p.iters;" in cu
    assert "args.loop_tail = p.loop_extent > 0 ? p.loop_extent - (iters - 1) * kLoopStep : kLoopStep;" in cu
    assert "encode(&tm_k, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, p.k, loop_elements(p, 192)," in cu


def test_a_kernel_without_a_loop_axis_takes_no_extent():
    cu = emit_cuda(Schedule.from_json((DATA / "fig1.h100.json").read_text()), load_machine("h100"))
    assert "constexpr int kLoopStep = 0;" in cu and "  if (p.loop_extent != 0)\n" in cu


def test_a_kernel_that_needs_no_mask_has_no_tail_instance():
    """A GEMM's partial K tile needs only the zero fill: kRagged, but no kernel<..., true>."""
    cu = emit_cuda(Schedule.from_json((DATA / "gemm_hopper.h100.json").read_text()), load_machine("h100"))
    assert "constexpr bool kRagged = true;" in cu and "constexpr bool kMasks = false;" in cu
    assert "template <bool kTail>" not in cu and "mask_past<" not in cu.split("// ---- role ")[1]
