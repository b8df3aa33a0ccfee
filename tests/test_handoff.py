"""The default joint search hands a phase Yices does not finish in joint.HANDOFF_SECONDS to CP-SAT
(joint_cpsat.finish_from), which proves that phase and the ones after it. Every phase's answer is its
proven optimum and the lexicographic steps (starts, role slots, warps) leave one schedule, so the file
must not depend on where the hand-off happened: here each phase in turn is made to "run out of time" on
Yices (its minimization reports itself unfinished, as a deadline would make it), and the schedule must
be the plain Yices search's, byte for byte."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from twill import joint
from twill.encoding import JointEncoding
from twill.errors import TimeLimitReached
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.tir import load_tir
from twill.verify import verify


ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import corpus  # noqa: E402  (bench/corpus.py: the generated corpus)

GRAPHS = ["random_n12_s1", "attn_bwd_m64_d64_x1_h200"]  # 4 and 3 roles; under a second each on Yices


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    return {c.name: (tir, yaml) for c, tir, yaml in corpus.write(d) if c.name in GRAPHS + ["random_n24_s5"]}


def _solve(name, files, **options):
    tir, yaml = files[name]
    graph, machine = load_tir(str(tir)), load_machine(str(yaml))
    s = solve(graph, machine, SolveOptions(cache=False, **options))
    assert verify(s, graph, machine) == []
    return s.to_json()


def _run_out_at(monkeypatch, phase):
    """Make `phase` report itself unfinished on Yices (as its budget running out would)."""
    if phase == "lexicographic":
        monkeypatch.setattr(joint, "_lex", lambda enc, deadline: False)
        return
    plain = JointEncoding.minimize

    def minimize(self, objective, lo, deadline=None, measure=None, **options):
        if objective != phase:
            return plain(self, objective, lo, deadline, measure, **options)
        hi = (measure or (lambda: self.value(objective)))()
        self.bound(objective, hi)  # (as minimize does when its deadline comes)
        return hi, False

    monkeypatch.setattr(JointEncoding, "minimize", minimize)


@pytest.mark.slow
@pytest.mark.parametrize("name", GRAPHS)
def test_handoff_at_any_phase_gives_the_yices_schedule(name, files, monkeypatch):
    monkeypatch.setattr(joint, "HANDOFF_SECONDS", 1e9)
    monkeypatch.setattr(joint, "HANDOFF_CHECK_SECONDS", {})
    plain = _solve(name, files)
    from twill import joint_cpsat
    calls = []
    real = joint_cpsat.finish_from
    monkeypatch.setattr(joint_cpsat, "finish_from", lambda *a: calls.append("finish_from") or real(*a))
    for phase in joint.HANDED_OFF:
        with monkeypatch.context() as m:
            _run_out_at(m, phase)
            calls.clear()
            assert _solve(name, files) == plain, phase
            assert calls == ["finish_from"], phase  # CP-SAT took over


@pytest.mark.parametrize("phase", sorted(joint.HANDOFF_CHECK_SECONDS))
@pytest.mark.parametrize("name", GRAPHS)
def test_one_slow_check_hands_its_phase_off(name, phase, files, monkeypatch):
    """A check of the fewest roles or of the sum of starts that runs past its cap (here none may run at
    all) hands that phase to CP-SAT at once, whatever the phase's own budget, and the file is still the
    plain search's."""
    monkeypatch.setattr(joint, "HANDOFF_SECONDS", 1e9)
    monkeypatch.setattr(joint, "HANDOFF_CHECK_SECONDS", {})
    plain = _solve(name, files)
    from twill import joint_cpsat
    phases = []
    real = joint_cpsat.finish_from
    monkeypatch.setattr(joint_cpsat, "finish_from", lambda *a: phases.append(a[4]) or real(*a))
    monkeypatch.setattr(joint, "HANDOFF_CHECK_SECONDS", {phase: -1.0})
    assert _solve(name, files) == plain
    assert phases == [phase]


def test_handoff_is_the_default_backends_only():
    """Yices (the default) hands off; z3 and the CP-SAT backends do not (they choose their solver)."""
    class P:
        def __init__(self, backend):
            self.backend = backend

        def option(self, key, default=None):
            return self.backend or default

    assert joint._handoff_available(P(None)) and joint._handoff_available(P("yices"))
    assert not any(joint._handoff_available(P(b)) for b in ("z3", "cpsat", "yices-cpsat"))


def test_time_limit_during_handoff_returns_the_best_schedule(files, monkeypatch):
    """A time limit that ends CP-SAT's part still returns the best schedule found, not proven. The
    clock is made to pass the limit as CP-SAT takes over (a wall-clock limit raced the machine's
    load: the first schedule came after 8 s on busy cores, the proof before it on idle ones)."""
    import time
    from twill import joint_cpsat
    monkeypatch.setattr(joint, "HANDOFF_SECONDS", 0.0)
    real_clock, real_finish, late = time.monotonic, joint_cpsat.finish_from, [0.0]

    def finish_from(*args):
        late[0] = 1e6  # CP-SAT takes over: from now on the time limit has passed
        return real_finish(*args)
    monkeypatch.setattr(joint_cpsat, "finish_from", finish_from)
    monkeypatch.setattr(time, "monotonic", lambda: real_clock() + late[0])
    with pytest.raises(TimeLimitReached) as exc:
        _solve("random_n24_s5", files, time_limit=600)
    s = exc.value.schedule
    assert s is not None and s.stage == "joint" and not s.complete
    tir, yaml = files["random_n24_s5"]
    assert verify(s, load_tir(str(tir)), load_machine(str(yaml))) == []


def test_a_handoff_schedule_that_fails_verify_is_not_kept(files, monkeypatch):
    """A schedule CP-SAT hands back that verify rejects (a discrepancy between the two models: here
    made by moving every op to cycle 0) is dropped and the phase goes on on Yices alone, to the plain
    search's file, proven (the file records optimal and complete)."""
    from dataclasses import replace
    from twill import joint_cpsat
    name = GRAPHS[0]
    monkeypatch.setattr(joint, "HANDOFF_SECONDS", 1e9)
    monkeypatch.setattr(joint, "HANDOFF_CHECK_SECONDS", {})
    plain = _solve(name, files)
    real, calls = joint_cpsat.finish_from, []

    def broken(*args):
        calls.append(args[4])
        result = real(*args)
        return replace(result, starts=tuple((v, 0) for v, _ in result.starts))
    monkeypatch.setattr(joint_cpsat, "finish_from", broken)
    monkeypatch.setattr(joint, "HANDOFF_CHECK_SECONDS", {"roles": -1.0})
    assert _solve(name, files) == plain
    assert calls == ["roles"]  # handed off once, then Yices alone
