"""encoding.JointEncoding, the joint stage's solver-neutral API: checks answer a `Status`, values are
keyed by op name, a range of I is refuted exactly when each of its I is, every check stops at its
deadline, and Ctrl-C stops `twill explain` at once."""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from twill.encoding import JointEncoding
from twill.errors import Status, TimeLimitReached
from twill.fileio import load_graph
from twill.joint import copies, window
from twill.machine import load_machine
from twill.modulo import modulo_schedule
from twill.pipeline import SolveOptions, build_problem

from conftest import ROOT, as_from_a_terminal

EX = ROOT / "examples"


def problem(name: str, gpu: str, **options):
    p, _ = build_problem(load_graph(str(EX / f"{name}.tir")), load_machine(gpu), SolveOptions(**options))
    return p, modulo_schedule(p)


def fixed_status(p, ii: int, swp_length: int) -> Status:
    with JointEncoding(p, ii, window(p, ii, swp_length)) as enc:
        return enc.check()


def test_values_are_keyed_by_op_name():
    p, swp = problem("fig1", "h100")
    with JointEncoding(p, swp.ii, window(p, swp.ii, swp.length)) as enc:
        assert enc.check() == Status.SAT
        start, slot = enc.starts(), enc.roles()
        assert set(start) == set(slot) == {t.name for t in p.tasks}
        assert enc.makespan() == max(start[t.name] + t.cycles for t in p.tasks)
        assert enc.check(at_most={"L": enc.makespan() - 1}) in (Status.SAT, Status.UNSAT)
        assert sum(1 for w in enc.role_warps().values() if w) == len(set(slot.values()))


@pytest.mark.slow  # about 5 s: fourteen encodings of a 9-op graph
def test_a_range_of_i_is_refuted_exactly_when_each_of_its_i_is():
    """attention_fwd_simple on b200: stage 1's bound 121 is unrealisable up to 194. One encoding over
    [190, 194] is UNSAT, as each I of it is; over [192, 198] the least satisfiable I is 195, the first
    I that is satisfiable alone."""
    p, swp = problem("attention_fwd_simple", "b200")
    c = copies(swp.length, 190)
    with JointEncoding.over(p, 190, 194, c) as enc:
        assert enc.hi == 194
        assert enc.check() == Status.UNSAT
    assert all(fixed_status(p, ii, swp.length) == Status.UNSAT for ii in range(190, 195))
    with JointEncoding.over(p, 192, 198, c) as enc:
        assert enc.check() == Status.SAT
        least, done = enc.minimize("I", 192)
    assert done and least == 195
    assert fixed_status(p, 195, swp.length) == Status.SAT


def test_a_check_stops_at_its_deadline():
    # the whole-window check at its SWP bound takes the solver over 10 s (FA3 on h100, used before, now
    # answers in 0.1 s: the registers family's left-out terms, twill/gaps.py; and with its register
    # tiles kept on their roles, as the h200 spec has it, this one too: tile_handoff=True frees them)
    p, swp = problem("attention_fwd_fp8_hopper", "h200", tile_handoff=True)
    with JointEncoding(p, swp.ii, window(p, swp.ii, swp.length)) as enc:
        assert enc.check(deadline=time.monotonic() - 1) == Status.TIMEOUT
        t0 = time.monotonic()
        assert enc.check(deadline=t0 + 0.2) == Status.TIMEOUT
        assert time.monotonic() - t0 < 1.0


def test_the_joint_stage_does_not_import_the_pipeline():
    """No import cycle: the stages import errors.py for their error types, never pipeline.py."""
    code = "import sys, twill.joint, twill.explain; assert 'twill.pipeline' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60)


TWILL = [sys.executable, "-c", "import sys; from twill_cli.entry import run; sys.exit(run())"]


def test_explain_honours_the_time_limit():
    """The limit bounds the whole explanation: stage 1, the core, the relaxations and the escalation
    (attention_fwd_simple on b200 takes several seconds without one)."""
    from twill.explain import explain
    graph, machine = load_graph(str(EX / "attention_fwd_simple.tir")), load_machine("b200")
    t0 = time.monotonic()
    try:
        ex = explain(graph, machine, SolveOptions(time_limit=1.0))
    except TimeLimitReached as exc:  # during the core: nothing to explain yet (exit 3)
        assert exc.schedule is None
    else:
        assert ex.final_ii is None and "time limit" in ex.final_note
    assert time.monotonic() - t0 < 1.0 + 1.5


@pytest.mark.parametrize("delay", [1.5, 3.0])
def test_ctrl_c_stops_explain_at_once(delay):
    proc = subprocess.Popen(TWILL + ["explain", str(EX / "attention_fwd_simple.tir"), "--gpu", "b200"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=as_from_a_terminal)
    time.sleep(delay)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("explain finished before the signal")
    assert proc.returncode == 130 and "interrupted" in stderr and "Traceback" not in stderr, stderr
    assert time.monotonic() - sent < 2.0
