"""bench/solve_bench.py on fig1: one run into a temporary folder (never docs/ or bench/)."""
from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT


def test_bench_fig1(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "solve_bench.py"), "--only", "fig1",
                           "--repeat", "1", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    doc = (tmp_path / "benchmarks.md").read_text()
    rows = [ln.split("|")[1:-1] for ln in doc.splitlines() if ln.startswith("| fig1 |")]
    assert len(rows) == 2, doc  # the main table and the Yices-versus-z3 table
    cells = [c.strip() for c in rows[0]]
    assert cells[:5] == ["fig1", "h100", "2", "4", "yes"]
    assert [c.strip() for c in rows[1]][-1] == "yes", "z3 finds the same I, L, optimality and roles"
    assert "<!-- log -->" in doc.splitlines()

    fig1 = json.loads((tmp_path / "results.json").read_text())["examples"]["fig1"]
    assert (fig1["status"], fig1["ii"], fig1["length"], fig1["optimal"]) == ("ok", 2, 4, True)


def test_triton_bench_captures_what_a_launch_passes_its_kernel():
    """The run step calls twill's binding with the arguments the corpus launch gives its Triton
    kernel: `capture` runs the launch with the kernel replaced by a recorder (no GPU, no Triton)."""
    import types
    sys.path.insert(0, str(ROOT / "bench"))
    import triton_bench

    calls = []

    class Kernel:
        def __getitem__(self, grid):
            return lambda *a, **k: calls.append(a)

    module = types.SimpleNamespace(toy_kernel=Kernel())

    def launch(a, b, scale=2.0):
        out = bytearray(len(a))  # a tensor, as far as capture is concerned
        module.toy_kernel[(1,)](a, b, out, len(a), scale, BLOCK=128)
        return out

    module.KERNELS = {"toy": {"launch": launch}}
    args, outs = triton_bench.capture(module, "toy", ([1, 2], [3, 4]), {"scale": 0.5})
    assert args[:2] == ([1, 2], [3, 4]) and args[3:] == (2, 0.5) and outs == (args[2],)
    assert not calls and isinstance(module.toy_kernel, Kernel)  # never launched; the kernel put back


def test_bench_builds_with_the_load_rings_the_environment_names(monkeypatch):
    """TWILL_BENCH_LOAD_RINGS (read by the bench alone) adds emit-cuda's --load-rings, unless the bench's own
    --emit-args chose."""
    sys.path.insert(0, str(ROOT / "bench"))
    import triton_bench

    monkeypatch.delenv("TWILL_BENCH_LOAD_RINGS", raising=False)
    assert triton_bench.bench_emit_args(("--ctas-per-sm", "1")) == ("--ctas-per-sm", "1")
    monkeypatch.setenv("TWILL_BENCH_LOAD_RINGS", "latency")
    assert triton_bench.bench_emit_args(("--ctas-per-sm", "1")) == ("--ctas-per-sm", "1", "--load-rings", "latency")
    assert triton_bench.bench_emit_args(("--load-rings", "solved")) == ("--load-rings", "solved")
    monkeypatch.delenv("TWILL_BENCH_LOAD_RINGS")
    monkeypatch.delenv("TWILL_BENCH_ANY_PITCH", raising=False)
    assert triton_bench.bench_emit_args() == ()
    monkeypatch.setenv("TWILL_BENCH_ANY_PITCH", "1")  # emit-cuda --any-pitch (anypitch.py), off by default
    assert triton_bench.bench_emit_args(("--ctas-per-sm", "1")) == ("--ctas-per-sm", "1", "--any-pitch")
    assert triton_bench.bench_emit_args(("--any-pitch",)) == ("--any-pitch",)
