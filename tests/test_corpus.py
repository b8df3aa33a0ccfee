"""The Triton corpus end to end: every dump goes import -> solve (joint, proven optimal) ->
emit-cuda -> nvcc, for sm_90a (h100) or sm_100a (b200), with no spill and no serialized wgmma.

The dumps are tests/data/ttgir/corpus/prepipe (Triton 3.9, before its pipeliner; test_ttgir
checks that each after-pipeliner dump imports to the same graph, so one form is built here) and
the worked examples of tests/data/ttgir. What does not go through yet is listed in KNOWN with
the stage and the reason, as a strict xfail: the day it goes through, the test says so.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import nvcc, nvcc_compile
from twill.emit import emit_cuda
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.ttgir import load_ttgir

DATA = Path(__file__).parent / "data" / "ttgir"
DUMPS = sorted((DATA / "corpus" / "prepipe").glob("*.ttgir")) + sorted(DATA.glob("*.ttgir"))

# dump stem -> why it does not go through (the stage is in the message)
KNOWN = {
    "corpus/attn_causal_fwd_sm100": "import: the sm_100 causal pair is not merged into one masked loop "
                                    "(twill/ttgir/merge.py matches the sm_90 form only), so it is two loops",
    "corpus/ssd_chunk_scan_sm90": "emit-cuda: a cumsum along axis 0 of a rank-1 tile (emit scans rank-2 "
                                  "tiles along their last axis only)",
    "corpus/ssd_chunk_scan_sm100": "emit-cuda: a cumsum along axis 0 of a rank-1 tile",
}


def _key(path: Path) -> str:
    return f"corpus/{path.stem}" if path.parent.name == "prepipe" else path.stem


def _case(path: Path):
    key = _key(path)
    marks = [pytest.mark.xfail(strict=True, reason=KNOWN[key])] if key in KNOWN else []
    return pytest.param(path, id=key, marks=marks)


@pytest.mark.slow
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
@pytest.mark.parametrize("path", [_case(p) for p in DUMPS])
def test_every_corpus_dump_solves_emits_and_compiles_clean(path, tmp_path):
    blackwell = "sm100" in path.stem
    machine = load_machine("b200" if blackwell else "h100")
    graph, _ = load_ttgir(path)
    schedule = solve(graph, machine, SolveOptions())
    assert schedule.stage == "joint" and schedule.optimal and schedule.complete
    src = tmp_path / f"{path.stem}.cu"
    src.write_text(emit_cuda(schedule, machine))
    arch = machine.arch
    rc, err = nvcc_compile(src, ["-std=c++17", f"-gencode=arch=compute_{arch[3:]},code={arch}", "-Xptxas", "-v"])
    assert rc == 0, err[-2000:]
    spills = {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)}
    assert spills <= {0}, err[-2000:]
    assert "C7515" not in err and "serialized" not in err, err[-2000:]
