"""CTAs per SM (twill/emit/occupancy.py): as many as the roles' counted registers and the kernel's
shared memory fit, and the launch bounds, budgets and persistent grid that follow."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import nvcc, nvcc_compile
from twill.emit import build_model
from twill.emit.cuda import render
from twill.emit.occupancy import register_ctas, smem_fits, smem_share
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.tir import parse_tir

EXAMPLES = Path(__file__).parents[1] / "examples"

# Two 64x128 halves of a 128x128 f16 GEMM tile: 64 accumulator registers a thread each, one
# 32 KiB ring slot per iteration (a0, a1, b): depth 3 is 96 KiB, two CTAs fit an SM; depth 4 not.
GEMM = """kernel halves
carry acc0 : f32[64,128] = 0 {{output = f16}}
carry acc1 : f32[64,128] = 0 {{output = f16}}
loop {{
  a0 = load : f16[64,64] @smem {{depth = {d}}}
  a1 = load : f16[64,64] @smem {{depth = {d}}}
  b  = load : f16[64,128] @smem {{depth = {d}}}
  n0 = mma a0, b, acc0 : f32[64,128]
  n1 = mma a1, b, acc1 : f32[64,128]
  yield acc0 = n0, acc1 = n1
}}
"""


def _model(text: str, gpu: str = "h200", **kw):
    """The emitter's model, several CTAs allowed (emit-cuda --ctas-per-sm 32: as many as fit) unless
    `ctas_per_sm` says otherwise (the default is one)."""
    kw.setdefault("ctas_per_sm", 32)
    machine = load_machine(gpu)
    return build_model(solve(parse_tir(text, "g.tir"), machine, SolveOptions()), machine, **kw)


def _launch(text: str) -> str:
    return re.search(r"__launch_bounds__\(kThreads, (\w+)\)", text).group(1)


def test_two_ctas_fit_a_gemm_of_small_halves_and_the_kernel_says_so():
    m = _model(GEMM.format(d=3))
    assert m.ctas_per_sm == 2 and m.launch_registers == 128  # 65536 / (2 x 256 threads)
    text = render(m)
    assert _launch(text) == "kCtasPerSm" and "constexpr int kCtasPerSm = 2;" in text
    assert "sms * kCtasPerSm" in text  # the persistent grid: two CTAs per SM
    # the warpgroups' budgets fit the smaller pool, and none is below what the model counts
    assert 128 * sum(g.registers for g in m.warpgroups) <= 32768
    assert all(g.registers >= 24 for g in m.warpgroups) and max(g.registers for g in m.warpgroups) == 232
    # what Smem holds by choice (TMA staging of the outputs) would make it one CTA: left out
    assert "out_out" not in text.split("struct Smem {")[1].split("};")[0]


def test_one_cta_where_the_rings_take_more_than_half_the_sm():
    m = _model(GEMM.format(d=4))  # 128 KiB of rings
    assert m.ctas_per_sm == 1 and register_ctas(m) == 2  # the registers would allow two
    text = render(m)
    assert _launch(text) == "1" and "kCtasPerSm" not in text


def test_ctas_per_sm_one_keeps_the_whole_register_file_for_one_cta():
    m = _model(GEMM.format(d=3), ctas_per_sm=1)
    assert m.ctas_per_sm == 1 and m.launch_registers == 256  # 65536 / 256 threads
    assert _launch(render(m)) == "1"


def test_attention_keeps_one_cta_its_consumers_need_the_register_file():
    m = _model((EXAMPLES / "attention_fwd_hopper.tir").read_text())
    assert m.ctas_per_sm == 1 and register_ctas(m) == 1


def test_the_shared_memory_rule_counts_each_ctas_reserve():
    m = _model(GEMM.format(d=3))
    per_sm = 232448 + 1024  # the machine's per-CTA limit plus one reserve: 228 KiB
    assert smem_share(m, 2) == per_sm // 2 - 2048
    assert smem_fits(m, 2, smem_share(m, 2)) and not smem_fits(m, 2, smem_share(m, 2) + 1024)
    assert smem_share(m, 1) == 232448 - 1024


@pytest.mark.slow
@pytest.mark.skipif(nvcc() is None, reason="needs nvcc")
def test_a_two_cta_kernel_compiles_at_half_the_registers(tmp_path):
    src = tmp_path / "halves.cu"
    src.write_text(render(_model(GEMM.format(d=3))))
    rc, err = nvcc_compile(src, ["-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v"])
    assert rc == 0, err[-2000:]
    assert re.search(r"Used 128 registers", err) and "spill stores" not in err.replace("0 bytes spill stores", "")


def test_two_ctas_by_default_for_one_warpgroup_of_softmax_that_fits_their_launch():
    """occupancy.default_limit: attn_lse's one 64-row warpgroup (mmas, row max, exp2, sums; counted 136
    registers) runs two CTAs unasked; the 128-row attention of two warpgroups, a plain GEMM's mma-only
    warpgroups and attn_two_pass's second loop (one warpgroup counted 232: it spilled at two) keep one;
    asking for one gives one."""
    from twill.emit.occupancy import default_limit
    from twill.sequence import load_sequence_schedule
    from twill.ttgir import load_ttgir
    data = Path(__file__).parent / "data"
    machine = load_machine("h200")
    lse, _ = load_ttgir(data / "ttgir" / "heldout5" / "t36" / "prepipe" / "attn_lse_sm90.ttgir", split_rows="auto")
    schedule = solve(lse, machine, SolveOptions(time_limit=60))
    model = build_model(schedule, machine)
    assert default_limit(model) == 2 and model.ctas_per_sm == 2
    assert build_model(schedule, machine, ctas_per_sm=1).ctas_per_sm == 1
    for loop in load_sequence_schedule(data / "seq" / "attn_two_pass_sm90.h200.json").schedules:
        assert default_limit(build_model(loop, machine)) == 1, loop.kernel
    gqa, _ = load_ttgir(data / "ttgir" / "attn_gqa_fwd_sm90.ttgir", split_rows="auto")
    assert default_limit(build_model(solve(gqa, machine, SolveOptions(time_limit=60)), machine)) == 1
    gemm = Path(__file__).parent.parent / "examples" / "gemm_hopper.tir"
    g = parse_tir(gemm.read_text(), str(gemm))
    assert default_limit(build_model(solve(g, machine, SolveOptions(time_limit=60)), machine)) == 1


ELEMENTWISE = """kernel gelu_rows
argument X = x
argument Y = store_0
argument N {{extent = loop}}
{carry}loop {{
  x = load : f16[64,64] @smem
  t = exp x : f32[64,64]
  y = mul t, x : f16[64,64]
  store y
{reduce}}}
"""


def test_two_ctas_by_default_for_a_loop_of_elementwise_ops_alone():
    """occupancy.default_limit: a loop with no mma and no carry (bias + GELU, SwiGLU) runs two CTAs an SM unasked,
    so that twice the warps keep loads and ALU chains in flight (its column split then fills 2 x the SMs); the
    same loop with a row sum carried keeps one (the column split's partials and fixup were measured so)."""
    from twill.emit.occupancy import default_limit
    machine = load_machine("h200")
    plain = build_model(solve(parse_tir(ELEMENTWISE.format(carry="", reduce=""), "e.tir"), machine, SolveOptions()),
                        machine)
    assert default_limit(plain) == 2 and plain.ctas_per_sm == 2
    summed = ELEMENTWISE.format(carry="carry s : f32[64] = 0 {output = f32}\n",
                                reduce="  r = rowsum t, s : f32[64]\n  yield s = r\n")
    carried = build_model(solve(parse_tir(summed, "s.tir"), machine, SolveOptions()), machine)
    assert default_limit(carried) == 1 and carried.ctas_per_sm == 1
