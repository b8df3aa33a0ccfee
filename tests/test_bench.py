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
