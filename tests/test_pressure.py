"""The register-pressure relaxation (twill/pressure.py) that proves "no joint schedule at any I" before
the joint stage searches I: it must never refute a problem the full solver schedules. Checked two ways:
every schedule the full solver gives (examples, random DAGs at tight register limits) meets the
relaxation with its own roles and budgets pinned; and where the relaxation refutes a random DAG, the
full solver, with the relaxation switched off, finds no schedule either."""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from twill import joint
from twill.errors import NoScheduleError, TimeLimitReached
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.pressure import no_role_assignment
from twill.problem import problem_for
from twill.tir import load_tir, parse_tir
from twill.verify import _problem

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import corpus  # noqa: E402  (bench/corpus.py: random layered DAGs and the attention families)
from conftest import as_from_a_terminal


def _pinned(schedule, graph, machine) -> bool:
    p = _problem(schedule, graph, machine)
    roles = [(r.ops, r.warps, r.registers) for r in schedule.roles]
    return no_role_assignment(p, pin=roles)


@pytest.mark.parametrize("name,gpu", [("fig1.tir", "h100"), ("attention_fwd_hopper.tir", "h100"),
                                      ("attention_bwd_hopper.tir", "h100"), ("attention_fwd_blackwell.tir", "b200")])
def test_example_schedules_meet_the_relaxation(name, gpu):
    from conftest import solved_example
    schedule, graph, machine = solved_example(name, gpu)
    assert not _pinned(schedule, graph, machine)


def _random(n, seed):
    try:
        return parse_tir(corpus.random_dag(n, seed), f"random_{n}_{seed}.tir")
    except IndexError:  # (the generator needs enough computed ops for its carries)
        return None


# (ops, seed, registers per thread): small random DAGs at register limits from loose to too tight (the
# relaxation refutes the 48s and (11, 2, 64), found by a sweep of 160 cases: 41 refuted, all but one at 48)
CASES = [(7, 1, 48), (9, 5, 48), (11, 2, 64), (8, 3, 64), (11, 2, 96), (9, 5, 96), (10, 2, 96), (11, 4, 160),
         (7, 1, 160)]


def test_relaxation_against_the_full_solver(monkeypatch):
    """Each case solved in full with the relaxation off (a NoScheduleError, a schedule, or out of time):
    a schedule meets the relaxation pinned to it and is never refuted by it; a refuted case has no
    schedule. Some cases must be refuted (else the test proves nothing)."""
    refuted, scheduled = 0, 0
    machine = load_machine("h100")
    for n, seed, regs in CASES:
        graph = _random(n, seed)
        if graph is None:
            continue
        options = SolveOptions(cache=False, registers=regs, time_limit=20)
        p = problem_for(graph, machine, options.model)[0]
        says_none = no_role_assignment(p)
        with monkeypatch.context() as m:
            m.setattr(joint, "no_schedule_anywhere", lambda p, deadline=None: None)
            try:
                schedule = solve(graph, machine, options)
            except NoScheduleError:
                schedule = None
            except TimeLimitReached as exc:
                schedule = exc.schedule if exc.schedule.stage == "joint" else None
        if schedule is not None:
            scheduled += 1
            assert not says_none, (n, seed, regs)
            assert not _pinned(schedule, graph, machine), (n, seed, regs)
        refuted += says_none
    assert refuted >= 1 and scheduled >= 1


def test_refutes_the_corpus_backward_at_once():
    """attn_bwd_m64_d128_x2_h200: no joint schedule (the full solver: NoScheduleError after the
    sequential I's check); the relaxation says so in one small CP-SAT check."""
    case = next(c for c in corpus.cases() if c.name == "attn_bwd_m64_d128_x2_h200")
    graph = parse_tir(case.tir, case.name + ".tir")
    machine = load_machine(case.gpu)
    p = problem_for(graph, machine, SolveOptions().model)[0]
    assert no_role_assignment(p)
    with pytest.raises(NoScheduleError, match="no joint schedule exists at any initiation interval"):
        solve(graph, machine, SolveOptions(cache=False, time_limit=30))


def test_does_not_refute_a_solvable_corpus_graph():
    case = next(c for c in corpus.cases() if c.name == "attn_bwd_m64_d128_x1_h100")
    p = problem_for(parse_tir(case.tir, case.name + ".tir"), load_machine(case.gpu), SolveOptions().model)[0]
    assert not no_role_assignment(p)


def test_ctrl_c_after_a_cp_sat_solve_still_raises():
    """CP-SAT's own SIGINT handler (off in cpsat_model._bounded) set the process's handler back to the
    default when a solve ended: a Ctrl-C after the relaxation's check then killed the process (-2)
    where the CLI says "interrupted" and exits 130."""
    import subprocess
    code = ("import os, signal, time\n"
            "from twill.pressure import no_role_assignment\n"
            "from twill.machine import load_machine\n"
            "from twill.pipeline import SolveOptions\n"
            "from twill.problem import problem_for\n"
            "from twill.tir import parse_tir\n"
            "import corpus\n"
            "p = problem_for(parse_tir(corpus.random_dag(9, 5), 'g.tir'), load_machine('h100'), SolveOptions().model)[0]\n"
            "no_role_assignment(p)\n"
            "try:\n"
            "    os.kill(os.getpid(), signal.SIGINT)\n"
            "    time.sleep(2)\n"
            "except KeyboardInterrupt:\n"
            "    raise SystemExit(7)\n")
    env = {**__import__("os").environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'bench'}"}
    assert subprocess.run([sys.executable, "-c", code], env=env, timeout=60,
                          preexec_fn=as_from_a_terminal).returncode == 7


# Sub-tiled GEMM chains on h100 (register tiles kept on their roles: problem.pinned_edges), (rows, depth,
# parts, registers per thread, warps), that the relaxation refutes only with the pinned edges' same-role
# constraint (found by a sweep of 105 chains: 9 such; the full solver says "no schedule" to each in 1-3 s).
PINNED_REFUTED = [(128, 2, 2, 96, 16), (128, 3, 2, 128, 16), (192, 2, 3, 160, 12)]
# and ones it leaves feasible, which the full solver schedules with the tiles kept
PINNED_SCHEDULED = [(128, 2, 2, 255, 16), (128, 3, 2, 200, 16)]


def _chain(rows, depth, parts):
    return parse_tir(corpus.split(corpus.gemm_chain(rows, depth), parts, "chain"), "chain.tir")


def _solve_without_relaxation(monkeypatch, graph, options):
    with monkeypatch.context() as m:
        m.setattr(joint, "no_schedule_anywhere", lambda p, deadline=None: None)
        return solve(graph, load_machine("h100"), options)


@pytest.mark.parametrize("case", PINNED_REFUTED)
def test_pinned_tiles_refute_only_what_has_no_schedule(case, monkeypatch):
    """The relaxation keeps a pinned edge's ops on one role (families.dependence's same-role item): it
    refutes these chains with the tiles kept and not with the hand-off allowed, and the full solver, with
    the relaxation off, finds no schedule with the tiles kept either."""
    rows, depth, parts, regs, warps = case
    graph, machine = _chain(rows, depth, parts), load_machine("h100")
    kept = SolveOptions(cache=False, registers=regs, warps=warps, tile_handoff=False, time_limit=30)
    assert no_role_assignment(problem_for(graph, machine, kept.model)[0])
    assert not no_role_assignment(problem_for(graph, machine, replace(kept, tile_handoff=True).model)[0])
    with pytest.raises(NoScheduleError):
        _solve_without_relaxation(monkeypatch, graph, kept)


@pytest.mark.parametrize("case", PINNED_SCHEDULED)
def test_pinned_tiles_keep_what_has_a_schedule(case, monkeypatch):
    """A chain the full solver schedules with the tiles kept (relaxation off) is not refuted, and its
    schedule's roles and budgets meet the relaxation pinned to them (the pinned edges' ops share a role)."""
    rows, depth, parts, regs, warps = case
    graph, machine = _chain(rows, depth, parts), load_machine("h100")
    kept = SolveOptions(cache=False, registers=regs, warps=warps, tile_handoff=False, time_limit=30)
    p = problem_for(graph, machine, kept.model)[0]
    assert p.option("pinned", ())
    assert not no_role_assignment(p)
    try:
        schedule = _solve_without_relaxation(monkeypatch, graph, kept)
    except TimeLimitReached as exc:
        schedule = exc.schedule
    assert schedule.stage == "joint"
    assert not _pinned(schedule, graph, machine)


def test_tiles_kept_refuted_before_the_long_searches(monkeypatch):
    """The corpus' gemm_chain_m192_x3_p3_h200 with its tiles kept has no joint schedule (the relaxation
    refutes it with the pinned edges): the joint stage says so once the role hints' quick ascents found
    nothing, with no check of the plain ascent at the SWP bound (joint._at_one_ii; before session 33 the
    heuristic and the plain ascent ran first, 3-4 CPU s, a third of the solve)."""
    from twill.encoding import JointEncoding
    case = next(c for c in corpus.cases() if c.name == "gemm_chain_m192_x3_p3_h200")
    graph, machine = parse_tir(case.tir, case.name + ".tir"), load_machine(case.gpu)
    plain = []
    check = JointEncoding.check

    def counted(self, deadline=None, at_most=None, assume=None, roles=None, starts=None):
        if roles is None and starts is None:
            plain.append(at_most)
        return check(self, deadline, at_most, assume, roles, starts)

    monkeypatch.setattr(JointEncoding, "check", counted)
    with pytest.raises(NoScheduleError, match="no joint schedule exists at any initiation interval"):
        solve(graph, machine, SolveOptions(cache=False, tile_handoff=False, time_limit=60))
    assert plain == []


def test_large_graphs_relaxed_before_the_encoding(monkeypatch):
    """From joint.EARLY_RELAXATION_OPS ops the relaxation comes before the SWP bound's encoding is built
    (random_n90_s12's takes 5.9 CPU s): with the threshold at 1, a first pass the relaxation refutes builds
    no encoding at all."""
    from twill.encoding import JointEncoding
    case = next(c for c in corpus.cases() if c.name == "gemm_chain_m192_x3_p3_h200")
    graph, machine = parse_tir(case.tir, case.name + ".tir"), load_machine(case.gpu)
    built = []
    enter = JointEncoding.__enter__
    monkeypatch.setattr(JointEncoding, "__enter__", lambda self: built.append(self.lo) or enter(self))
    monkeypatch.setattr(joint, "EARLY_RELAXATION_OPS", 1)
    with pytest.raises(NoScheduleError, match="no joint schedule exists at any initiation interval"):
        solve(graph, machine, SolveOptions(cache=False, tile_handoff=False, time_limit=60))
    assert built == []
