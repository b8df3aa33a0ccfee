"""Regenerate the schedules tests/test_emit.py emits code from (run from the repository root).

    python tests/data/emit/regenerate.py [NAME ...]

Most are the solver's own output (`twill solve`, joint stage unless the name says .swp), stored so
the tests do not spend minutes solving. attention_fwd_blackwell.b200.fa4 is solved with FA4's
five roles pinned (`--group`: load warp, MMA warp, two softmax warpgroups, a correction
warpgroup), to exercise the 1-warp tcgen05 MMA role and the tensor-memory hand-offs between
roles, which the solver's own choice for that graph (two consumer warpgroups) does not use.
Review the diff of the golden .cu files after regenerating.
"""
from __future__ import annotations

import sys
from pathlib import Path

from twill.fileio import load_graph, write_atomic
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]

SOLVED = {  # name -> (example, or a graph's path from the repository root; gpu, swp_only)
    "fig1.h100": ("fig1", "h100", False),
    "gemm_hopper.h100": ("gemm_hopper", "h100", False),
    "gemm_hopper.h100.swp": ("gemm_hopper", "h100", True),
    "attention_fwd_simple.h100": ("attention_fwd_simple", "h100", False),
    "attention_fwd_simple.h100.swp": ("attention_fwd_simple", "h100", True),
    # the solver's joint schedule after the register-model fix for cross-role reads: softmax on
    # consumer0, the accumulator on consumer1, so the last l is handed over after the loop.
    # attention_fwd_simple.h100 above is the earlier one (an mma role and one consumer); solving
    # it again now gives this schedule too
    "attention_fwd_simple.h100.split": ("attention_fwd_simple", "h100", False),
    "attention_fwd_hopper.h100": ("attention_fwd_hopper", "h100", False),
    # 192-key tiles: a partial last tile where N is not a multiple of 192 (tests/test_gpu.py runs it)
    "attention_fwd_hopper_k192.h100": ("attention_fwd_hopper_k192", "h100", False),
    # the H200's description, with exp2's measured latency: the solver's answer is FA3's
    # intra-warpgroup overlap (bench/gpu_bench.py and tests/test_gpu.py run it)
    "attention_fwd_hopper.h200": ("attention_fwd_hopper", "h200", False),
    "attention_fwd_blackwell.b200": ("attention_fwd_blackwell", "b200", False),
    "attention_bwd_hopper.h100": ("attention_bwd_hopper", "h100", False),
    "attention_bwd_blackwell.b200": ("attention_bwd_blackwell", "b200", False),
    # rows of 32 and 64 bytes: 32- and 64-byte swizzled tiles, K-major and N-major
    "gemm_k16n32.h100": ("tests/data/tir/gemm_k16n32.tir", "h100", False),
    "gemm_k32n16.h100": ("tests/data/tir/gemm_k32n16.tir", "h100", False),
    # bf16 in and out: TMA's bf16 tensor maps, wgmma .bf16, the conversion of C (tests/test_gpu.py runs it)
    "gemm_bf16.h100": ("tests/data/tir/gemm_bf16.tir", "h100", False),
    # head dimension 64: the solver's answer is FA3's intra-warpgroup overlap (tests/test_gpu.py runs it)
    "attention_fwd_d64.h100": ("tests/data/tir/attention_fwd_d64.tir", "h100", False),
    # Triton's own kernels, imported from their TTGIR dumps (tests/test_gpu.py runs them)
    "triton_attn_fwd_tma_sm90.h100": ("tests/data/ttgir/attn_fwd_tma_sm90.ttgir", "h100", False),
    "triton_matmul_sm90.h100": ("tests/data/ttgir/matmul_sm90.ttgir", "h100", False),
    # Triton 3.9 matmuls with A, or B, column-major in memory (tests/test_gpu.py runs them)
    "triton39_mm_acol.h100": ("tests/data/ttgir/triton39/mm_acol.ttgir", "h100", False),
    "triton39_mm_bcol.h100": ("tests/data/ttgir/triton39/mm_bcol.ttgir", "h100", False),
    # 8-bit mma inputs, K-major: wgmma m64nNk32 (e4m3, s8) and tcgen05.mma kind::f8f6f4 / kind::i8
    "gemm_fp8_e4m3.h100": ("tests/data/tir/gemm_fp8_e4m3.tir", "h100", False),
    "gemm_fp8_e5m2.b200": ("tests/data/tir/gemm_fp8_e5m2.tir", "b200", False),
    "gemm_i8.h100": ("tests/data/tir/gemm_i8.tir", "h100", False),
    "gemm_i8.b200": ("tests/data/tir/gemm_i8.tir", "b200", False),
    # the corpus's fp8 GEMM (Triton's TTGIR before its pipeliner); its per-tensor scales, applied
    # after the loop, are not part of the imported graph
    "triton_gemm_fp8_sm90.h100": ("tests/data/ttgir/gemm_fp8_sm90.ttgir", "h100", False),
}

FA4_GROUPS = (  # FlashAttention-4's warp roles, as --group pins them
    ("k", "v"),
    ("s0", "acc0_n", "s1", "acc1_n"),
    ("m0_new", "p0", "alpha0", "l0_new"),
    ("m1_new", "p1", "alpha1", "l1_new"),
    ("acc0_r", "acc1_r"),
)


# Solved with roles pinned (--group), for code paths the solver's own choice does not take.
PINNED = {
    # three consumer warpgroups and the load warp's: 512 threads, launched with 128 registers each,
    # too few for one m64n256 wgmma (C7602): each is issued as two m64n128 (tests/test_gpu.py runs it)
    "gemm_3x64.h100": ("tests/data/tir/gemm_3x64.tir", "h100", (("acc0_n",), ("acc1_n",), ("acc2_n",))),
    # FP8 attention: e4m3 Q, K and V^T, P rounded to e4m3 in registers for the second wgmma
    # (tests/test_fp8_attention.py; tests/test_gpu.py runs it), on FA3's roles: a load warp and two
    # consumer warpgroups, each with its half's S, softmax and PV. Since the mma costs 8-bit
    # operands at twice the f16 rate, the solver's own answer is I = 158 units (1037 cycles)
    # against these roles' 195 (1280): two consumers' exp2 moved to two softmax warpgroups, P handed
    # across roles; emitted plainly, that kernel spills (emit-cuda's ptxas loop makes kernel<false> clean).
    # Stored as emit-cuda's ptxas loop leaves it (PTXAS_LOOP): at I = 195 ptxas needs 250 registers
    # for consumer0's pipeline where the model counts 230 (C7512 at setmaxnreg 240)
    "attention_fwd_fp8_hopper.h200": ("examples/attention_fwd_fp8_hopper.tir", "h200", (
        ("k", "vt"),
        ("s0", "m0_new", "p0", "alpha0", "l0_new", "acc0_r", "acc0_n"),
        ("s1", "m1_new", "p1", "alpha1", "l1_new", "acc1_r", "acc1_n"))),
    # the same, as the solver leaves it (I = 195): ptxas serializes its wgmmas for consumer0's
    # registers (C7512); consumer1 rescales acc1 with S(j) in flight at its window's end, which
    # the emitter computes after wgmma_wait<0> (C7515 otherwise: waits.py, _carried_into_loop)
    "attention_fwd_fp8_hopper.h200.plain": ("examples/attention_fwd_fp8_hopper.tir", "h200", (
        ("k", "vt"),
        ("s0", "m0_new", "p0", "alpha0", "l0_new", "acc0_r", "acc0_n"),
        ("s1", "m1_new", "p1", "alpha1", "l1_new", "acc1_r", "acc1_n"))),
}


# Stored as `twill emit-cuda`'s ptxas loop leaves them (twill/ptxas_loop.py: solved again with the
# registers ptxas found the model short of), where the plain schedule's kernel does not compile clean.
# Needs nvcc; the loop's kernel options (one tile per CTA, a hidden ring position) are not part of a
# schedule, so a name whose loop chooses them fails here.
PTXAS_LOOP = {"attention_fwd_fp8_hopper.h200"}


def ptxas_loop(schedule, machine, options: SolveOptions):
    from twill.ptxas_loop import emitter, find_nvcc, resolver, run
    if find_nvcc() is None:
        raise SystemExit("regenerate.py: nvcc not found (the ptxas loop's fixtures need it)")
    result = run(schedule, machine, emitter(machine), resolver(schedule, machine, options),
                 lambda line: print(line, file=sys.stderr))
    if result.one_tile_per_cta or result.hidden_position:
        raise SystemExit("regenerate.py: the ptxas loop chose kernel options a schedule does not record")
    return result.schedule


def solved(name: str) -> str:
    example, gpu, swp = SOLVED[name]
    graph = load_graph(ROOT / example if "/" in example else ROOT / "examples" / f"{example}.tir")  # .tir or .ttgir
    return solve(graph, load_machine(gpu), SolveOptions(swp_only=swp)).to_json()


def pinned(name: str) -> str:
    path, gpu, groups = PINNED[name]
    machine, options = load_machine(gpu), SolveOptions(groups=groups)
    schedule = solve(load_graph(ROOT / path), machine, options)
    return (ptxas_loop(schedule, machine, options) if name in PTXAS_LOOP else schedule).to_json()


def fa4() -> str:
    graph = load_graph(ROOT / "examples" / "attention_fwd_blackwell.tir")
    return solve(graph, load_machine("b200"), SolveOptions(groups=FA4_GROUPS)).to_json()


def main(names: list[str]) -> None:
    for name in names or [*SOLVED, *PINNED, "attention_fwd_blackwell.b200.fa4"]:
        text = (fa4() if name == "attention_fwd_blackwell.b200.fa4" else pinned(name) if name in PINNED
                else solved(name))
        write_atomic(HERE / f"{name}.json", text, only_if_changed=True)
        print("wrote", name, file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
