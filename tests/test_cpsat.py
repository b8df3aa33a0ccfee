"""The joint stage on CP-SAT (`--smt-backend cpsat`, and `yices-cpsat`: Yices up to the first
schedule, CP-SAT for L and the tie-breaks) against Yices on the same graphs: the same I, L and
tie-break values (roles, cross-role edges, warps, sum of starts) and, since the last tie-breaks
(the lexicographically least starts, role slots and warps) leave one schedule, the same starts, roles
and warps; every schedule passes
the verifier, and a second CP-SAT solve gives the same file byte for byte."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from twill.errors import NoScheduleError
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.tir import load_tir
from twill.verify import verify

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import corpus  # noqa: E402  (bench/corpus.py: the generated corpus)

# Few on purpose (CI's 2 cores): the backend's helper checked 4 examples and 7 corpus graphs this way
# (attention_bwd_blackwell, attention_fwd_blackwell on b200; random_n15_s2, attn_bwd_m64_d64_x1_h200,
# gemm_chain_m128_x3_p2_h100, fa4_p2_d64 besides these), all equal (docs/benchmarks.md's log).
EXAMPLES = [("fig1", "h100"), ("gemm_hopper", "h100")]
CORPUS = ["random_n10_s0", "random_n12_s1", "tmem_gemm_m256_x3_p2"]


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    return {c.name: (tir, yaml) for c, tir, yaml in corpus.write(d) if c.name in CORPUS}


def _graph(name, corpus_files):
    if name in CORPUS:
        tir, yaml = corpus_files[name]
        return load_tir(str(tir)), load_machine(str(yaml))
    return load_tir(str(ROOT / "examples" / f"{name}.tir")), load_machine(dict(EXAMPLES)[name])


def _summary(s):
    return {"I": s.ii, "L": s.length, "optimal": s.optimal, "complete": s.complete, "roles": len(s.roles),
            "cross-role edges": len(s.cross_role_edges), "warps": sum(r.warps for r in s.roles),
            "starts": sum(o.start for o in s.ops), "each start": [(o.name, o.start) for o in s.ops],
            "each role": [(o.name, o.role) for o in s.ops], "role warps": [(r.name, r.warps) for r in s.roles]}


@pytest.mark.slow
@pytest.mark.parametrize("name", [e for e, _ in EXAMPLES] + CORPUS)
def test_cpsat_matches_yices(name, corpus_files):
    graph, machine = _graph(name, corpus_files)
    out = {}
    for backend in ("yices", "cpsat", "yices-cpsat"):
        s = solve(graph, machine, SolveOptions(smt_backend=backend, cache=False, time_limit=120))
        assert verify(s, graph, machine) == [], backend
        out[backend] = _summary(s)
    assert out["cpsat"] == out["yices"]
    assert out["yices-cpsat"] == out["yices"]


def test_cpsat_is_deterministic(corpus_files):
    graph, machine = _graph("random_n12_s1", corpus_files)
    files = {solve(graph, machine, SolveOptions(smt_backend="cpsat", cache=False)).to_json() for _ in range(2)}
    assert len(files) == 1


@pytest.mark.parametrize("backend", ["cpsat", "yices-cpsat"])
def test_no_joint_schedule_at_any_ii(backend):
    """fig1 on one warp: no role can be a warpgroup, so no I works (the fully sequential I refuted)."""
    graph, machine = load_tir(str(ROOT / "examples" / "fig1.tir")), load_machine("h100")
    with pytest.raises(NoScheduleError, match="at any initiation interval"):
        solve(graph, machine, SolveOptions(smt_backend=backend, cache=False, warps=1))


@pytest.mark.slow
def test_cpsat_refutes_the_swp_bound():
    """attention_fwd_simple on b200: CP-SAT proves the SWP bound I unrealisable (as Yices does,
    tests/test_joint.py), so with --max-ii at the bound there is no schedule."""
    graph, machine = load_tir(str(ROOT / "examples" / "attention_fwd_simple.tir")), load_machine("b200")
    bound = solve(graph, machine, SolveOptions(swp_only=True, cache=False)).ii
    with pytest.raises(NoScheduleError):
        solve(graph, machine, SolveOptions(smt_backend="cpsat", cache=False, max_ii=bound))
