"""bench/fidelity.py on the Triton corpus: prepare from a triton_bench build folder, the stamped
kernel as nvcc builds it, the reading of the stamps, the report's tables. (measure runs on a GPU.)"""
from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, nvcc, nvcc_compile

BENCH = ROOT / "bench"
DUMP = "gemm_bias_gelu_sm90.ttgir"  # persistent, its mma role on two warpgroups taking turns by tile


def _load(name):
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def fid():
    return _load("fidelity")


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """One corpus kernel through `bench/triton_bench.py build` (import, solve, emit, nvcc)."""
    if shutil.which("twill") is None:
        pytest.skip("the twill command is not installed")
    out = tmp_path_factory.mktemp("build")
    proc = subprocess.run([sys.executable, str(BENCH / "triton_bench.py"), "build", "--dumps",
                           str(ROOT / "tests" / "data" / "ttgir" / "corpus" / "prepipe"), "--pattern", DUMP,
                           "--out", str(out), "--depths", "4", "--time-limit", "60"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


@pytest.mark.extended  # (a triton_bench build: the bench's plumbing, 18 s of CI's time)
def test_prepare_reads_a_triton_bench_build(fid, build, tmp_path):
    """Every kernel of the build folder, copied with its files; its prediction from its schedule:
    I x machine cycles per unit plus the load stall, each role's warps, budget and model count."""
    plan = fid.prepare(str(tmp_path), [], [str(build)], with_ptxas=nvcc() is not None)
    assert [c["name"] for c in plan] == ["gemm_bias_gelu_sm90"]
    c = plan[0]
    s = json.loads((build / "gemm_bias_gelu_sm90.json").read_text())
    assert (c["kernel"], c["adapter"], c["spec"], c["ii"]) == ("gemm_bias_gelu", "triton", s["machine"], s["ii"])
    assert c["predicted_cycles"] == pytest.approx(s["ii"] * s["scale"]["machine_cycles_per_unit"] + fid.stall_cycles(s))
    assert [(w["name"], w["warps"], w["registers"]) for w in c["roles"]] == [
        (w["name"], w["warps"], w["registers"]) for w in s["warps"]]
    assert all(w["model_registers"] for w in c["roles"])
    for suffix in fid.FILES:
        assert (tmp_path / f"gemm_bias_gelu_sm90{suffix}").read_text() == (build / f"gemm_bias_gelu_sm90{suffix}").read_text()
    assert json.loads((tmp_path / "plan.json").read_text()) == plan
    if nvcc():
        assert c["ptxas"]["ok"] and c["ptxas"]["registers"] > 0
        for w in c["roles"]:  # the role's code alone: at most 255 registers, and something
            assert 0 < c["ptxas_uncapped"][w["name"]]["registers"] <= 255
            assert c["ptxas_alone"][w["name"]]["ok"]


@pytest.mark.extended
@pytest.mark.skipif(nvcc() is None, reason="needs nvcc")
def test_stamped_corpus_kernel_builds_for_sm90a(fid, build, tmp_path):
    """The stamped copy of a persistent corpus kernel and its entry (with the stamps' reader)
    compile for sm_90a as its binding builds them; one stamp per role's steady loop."""
    plan = fid.prepare(str(tmp_path), [], [str(build)], with_ptxas=False)
    sdir, steps = fid.stage(str(tmp_path), plan)
    assert steps == {"gemm_bias_gelu_sm90": [[1], [1]]}
    text = (tmp_path / "stamped" / "gemm_bias_gelu_sm90.cu").read_text()
    assert "FID_STAMP(0, 0, 1, fid_pass0)" in text and "FID_STAMP(1, 0, 4, fid_pass0)" in text
    entry = tmp_path / "stamped" / "gemm_bias_gelu_sm90_entry.cu"
    assert "fid_get" in entry.read_text() and "fid_clear" in entry.read_text()
    rc, log = nvcc_compile(entry, ["-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-O3",
                                   "-Xcompiler", "-fPIC"])
    assert rc == 0, log[-3000:]


def test_stamps_every_steady_loop_of_a_role(fid):
    """A role with two steady loops (and a step of 2 in the second): a pass counter and a stamp of
    its own for each, and the loops' steps in order."""
    text = """// ---- shared memory ----
__device__ __forceinline__ void role_consumer0(Smem& sm, const Maps& tm, const Args& args, const int n, const twill::TileIdx& tile) {
  int j = 0;
  for (; j < n; ++j) {
    f(j);
  }
  for (; j + 2 <= n; j += 2) {
    g(j);
  }
}
"""
    out, steps = fid.stamped(text)
    assert steps == [[1, 2]]
    assert "FID_STAMP(0, 0, 4, fid_pass0)" in out and "FID_STAMP(0, 1, 4, fid_pass1)" in out
    assert out.count("int fid_pass") == 2
    with pytest.raises(ValueError):
        fid.stamped("__global__ void k() {}")


def test_per_role_reads_the_main_loop(fid):
    """Cycles per iteration of each role: consecutive passes past the first two, over CTAs, divided
    by the loop's step; the loop with the most passes is the role's."""
    fs = fid.fs
    words = [0] * fs.WORDS

    def put(cta, role, loop, stamps):
        base = ((cta * fs.ROLES + role) * fs.LOOPS + loop) * fs.SLOTS
        words[base:base + len(stamps)] = stamps
    for cta in range(3):  # role 0: one pass per iteration, 1000 cycles after two slow first passes
        put(cta, 0, 0, [10, 5000, 9000, 10000, 11000, 12000])
        put(cta, 1, 0, [10, 20, 30])  # role 1, loop 0: too few passes to count
        put(cta, 1, 1, [100, 900, 1700, 2900, 4100])  # loop 1: 2 iterations a pass, 1200 a pass
    got = fs.per_role(words, ["role_load", "role_consumer0"], [[1], [1, 2]])
    assert got["load"]["median"] == 1000 and got["load"]["n"] == 9
    assert (got["consumer0"]["median"], got["consumer0"]["loop"], got["consumer0"]["n"]) == (600, 1, 6)


def test_report_from_recorded_results(fid, tmp_path):
    """The tables from session 22's recorded plan and H200 run (a bare list of results), and a
    measure run's dict form for a corpus kernel: the error against the slowest role, in bold past 15%."""
    data = ROOT / "tests" / "data" / "calibrate"
    shutil.copy(data / "fidelity-plan.json", tmp_path / "plan.json")
    text = fid.report(str(tmp_path), str(data / "fidelity-h200.json"))
    assert "| gemm_hopper | h200-old | 256 x 4.00 | 1024 = 1024 + 0 | load 1069, mma0 1064, mma1 1068 | -4% |" in text
    assert "| attention_fwd_hopper | h200-old | 344 x 5.95 | 2048 = 2048 + 0 |" in text and "| **-23%** |" in text
    assert "| attention_fwd_hopper | h200-old | consumer0 | 4 | 240 | 195 | 254 | -59 | 32, none | 168, 0, none |" in text
    plan = [{"name": "k_sm90", "kernel": "k", "adapter": "triton", "spec": "h200", "ii": 144, "cycles_per_unit": 3.5,
             "ii_cycles": 504.0, "load_stall": 1127.5, "predicted_cycles": 1631.5,
             "roles": [{"name": "load", "warps": 1, "registers": 24, "model_registers": 24},
                       {"name": "consumer0", "warps": 4, "registers": 248, "model_registers": 130}]}]
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    results = {"card": "NVIDIA H200", "cases": [{
        "name": "k_sm90", "ms": 0.1234, "ms_stamped": 0.125,
        "per_role": {"load": {"median": 6000.0}, "consumer0": {"median": 6100.0}},
        "ptxas": {"registers": 168, "spill_bytes": 0, "serialized": []},
        "ptxas_alone": {"load": {"spill_bytes": 0, "serialized": []}, "consumer0": {"spill_bytes": 8, "serialized": ["C7515"]}},
        "ptxas_uncapped": {"load": {"registers": 30}, "consumer0": {"registers": 200}}}]}
    (tmp_path / "r.json").write_text(json.dumps(results))
    text = fid.report(str(tmp_path), str(tmp_path / "r.json"))
    assert "| k | h200 | 144 x 3.50 | 1632 = 504 + 1128 | consumer0 6100, load 6000 | **-73%** | 0.123 | 0.125 |" in text
    assert "| k | h200 | consumer0 | 4 | 248 | 130 | 200 | -70 | 8, C7515 | 168, 0, none |" in text
    assert "| k | h200 | load | 1 | 24 | 24 | 30 | -6 | 0, none | 168, 0, none |" in text
