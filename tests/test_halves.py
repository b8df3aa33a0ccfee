"""Halving (twill/emit/halves.py): a kernel whose warpgroups each compute one row part of a tall
tile runs its first part alone per CTA where that part's tiles fit the SMs at once."""
import json
import re
import subprocess
from pathlib import Path

import pytest

from conftest import nvcc
from twill.emit.build import build_model
from twill.emit import emit_cuda
from twill.emit.cuda import Renderer
from twill.machine import load_machine
from twill.schedule import Schedule

DATA = Path(__file__).resolve().parent / "data" / "emit"
GROWN = "grown_gemm_persistent_sm90.h200"


def renderer(name: str) -> Renderer:
    s = Schedule.from_json((DATA / f"{name}.json").read_text())
    return Renderer(build_model(s, load_machine(s.machine)))


@pytest.mark.parametrize("name, parts", [
    (GROWN, {"mma0": 0, "mma1": 1}),
    ("gemm_hopper.h100", {"mma0": 0, "mma1": 1}),               # two 64-row halves of a 128-row tile
    ("gemm_3x64.h100", {"mma0": 0, "mma1": 1, "mma2": 2}),
    ("attention_fwd_hopper.h100", {}),                          # the softmax: not a part of mmas alone
    ("triton_matmul_sm90.h100", {}),                            # one warpgroup: nothing to halve
    ("attention_fwd_blackwell.b200", {}),                       # tensor memory
])
def test_which_kernels_halve(name, parts):
    assert renderer(name).parts == parts


def test_an_idle_part_returns_loads_nothing_and_counts_no_arrival():
    cu = emit_cuda(Schedule.from_json((DATA / f"{GROWN}.json").read_text()),
                   load_machine("h200"))
    role = cu[cu.index("void role_mma1("):]
    assert role.index("if ((args.idle_parts >> 1) & 1) return;") < role.index("wgmma")
    assert re.search(r"if \(lane == 0 && !\(\(args\.idle_parts >> 1\) & 1\)\) \{\n\s+const int it = j;  // load a1", cu)
    assert "sm.ring_b.init(1, 8 - 4 * ((args.idle_parts >> 1) & 1));" in cu  # B: both parts read it
    assert "sm.ring_a0.init(1, 4);" in cu and "sm.ring_a1.init(1, 4);" in cu
    assert cu.count("if (!args.idle_parts) twill::named_sync(") == 2  # the turns stop while a part idles


HARNESS = r"""
#include "KERNEL.cu"
#include <cstdio>
int main() {
  using namespace NS;
  const int cases[][4] = {  // tiles_m, tiles_n, m_extent, halve
    {4, 8, 0, -1}, {16, 32, 0, -1}, {2, 8, 384, -1}, {3, 8, 600, -1}, {16, 32, 0, 1}, {4, 8, 0, 0}};
  for (const auto& c : cases) {
    Problem p;
    p.tiles_m = c[0]; p.tiles_n = c[1]; p.m_extent = c[2]; p.halve = c[3];
    p.a0_rows_step = p.a1_rows_step = p.out_acc0_rows_step = p.out_acc1_rows_step = 256;
    p.a1_rows_offset = p.out_acc1_rows_offset = 128;
    const int idle = halve(p, 132);
    printf("%d %d %d %d %d %d\n", idle, p.tiles_m, p.m_extent, p.a1_rows_step, p.a1_rows_offset, p.out_acc0_rows_step);
  }
  Problem odd;  // parts placed otherwise than stacked: left as they are
  odd.tiles_m = 1; odd.tiles_n = 1; odd.halve = 1;
  odd.a0_rows_step = odd.a1_rows_step = odd.out_acc0_rows_step = odd.out_acc1_rows_step = 128;
  printf("%d\n", halve(odd, 132));
  return 0;
}
"""


@pytest.mark.skipif(nvcc() is None, reason="needs nvcc")
def test_launch_halves_where_one_parts_tiles_fit_the_sms(tmp_path):
    s = Schedule.from_json((DATA / f"{GROWN}.json").read_text())
    (tmp_path / "kernel.cu").write_text(emit_cuda(s, load_machine(s.machine)))
    ns = f"twill_{s.kernel}"
    (tmp_path / "harness.cu").write_text(HARNESS.replace("KERNEL", "kernel").replace("NS", ns))
    exe = tmp_path / "harness"
    proc = subprocess.run([nvcc(), "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-o", str(exe),
                           str(tmp_path / "harness.cu")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:7] == [
        "2 8 0 128 0 128",      # 4 x 8 tall tiles: 8 x 8 = 64 one-part tiles fit 132 SMs: halved
        "0 16 0 256 128 256",   # 16 x 32: 1024 would not: as it was
        "2 3 0 128 0 128",      # 384 rows: three 128-row tiles, whole
        "2 5 600 128 0 128",    # 600 rows: five, the last partial
        "2 32 0 128 0 128",     # halve = 1: always
        "0 4 0 256 128 256",    # halve = 0: never
        "0",                    # parts not stacked as the binding stacks them
    ]


@pytest.mark.skipif(nvcc() is None, reason="needs nvcc")
def test_the_halving_kernel_compiles_without_spills(tmp_path):
    s = Schedule.from_json((DATA / f"{GROWN}.json").read_text())
    cu = tmp_path / "grown.cu"
    cu.write_text(emit_cuda(s, load_machine(s.machine)))
    from test_emit import nvcc_build  # test_emit's build of its fixture of this schedule: the same text, one build
    rc, err = nvcc_build(cu, "sm_90a")
    assert rc == 0, err[-2000:]
    assert set(re.findall(r"(\d+) bytes spill stores", err)) == {"0"}
    assert "C75" not in err  # no serialized wgmma
