"""A solver's search in a worker thread (twill.worker): Ctrl-C at the worst moments of its start.

An interrupt that landed inside `Thread.start`, before the thread existed, left the run waiting forever
for a worker that never ran (a CI run, session 38: a solve hung for 120 s after its SIGINT). Here the
interrupt is placed exactly there, and just after the thread exists, in front of a real Yices check and
a real CP-SAT solve; each run must raise KeyboardInterrupt promptly and exit cleanly."""
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import as_from_a_terminal

ROOT = Path(__file__).resolve().parent.parent

# Thread.start's native call (3.11: _start_new_thread; 3.12 on: _start_joinable_thread), with a SIGINT
# raised to this process before it (the thread never exists) or after it (it exists, not yet started)
INTERRUPT_IN_START = """
import signal, sys, threading
name = next(n for n in ("_start_joinable_thread", "_start_new_thread") if hasattr(threading, n))
native = getattr(threading, name)
def interrupted(*args, **kwargs):
    setattr(threading, name, native)
    if {before}:
        signal.raise_signal(signal.SIGINT)
    started = native(*args, **kwargs)
    signal.raise_signal(signal.SIGINT)
    return started
setattr(threading, name, interrupted)
"""

YICES_CHECK = """
from twill.smt import bounded_check, yices_api
y = yices_api()
ctx = y.Context()
x = y.Terms.new_uninterpreted_term(y.Types.int_type(), "x")
ctx.assert_formula(y.Terms.arith_gt_atom(x, y.Terms.integer(3)))
search = lambda: bounded_check(ctx, deadline=None)
"""

CP_SAT_SOLVE = """
from twill.cpsat_model import _bounded, ortools_cp_model
cp = ortools_cp_model()
m = cp.CpModel()
x = m.new_int_var(0, 10, "x")
m.add(x >= 3)
search = lambda: _bounded(cp.CpSolver(), m, None)
"""

CALL = """
try:
    search()
except KeyboardInterrupt:
    raise SystemExit(7)
raise SystemExit(0)
"""


@pytest.mark.parametrize("solver", [YICES_CHECK, CP_SAT_SOLVE], ids=["yices", "cp-sat"])
@pytest.mark.parametrize("before", [True, False], ids=["before-the-thread", "after-the-thread"])
def test_ctrl_c_inside_thread_start_is_raised_not_waited_on(solver, before):
    code = solver + INTERRUPT_IN_START.format(before=before) + CALL
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)}, preexec_fn=as_from_a_terminal)
    assert proc.returncode == 7, proc.stderr
