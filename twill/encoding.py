"""The joint problem at one I, or over a range of I, in QF_LIA, and the solver that decides it, behind
`JointEncoding`'s solver-neutral API (check, minimize, core, values keyed by op name; answers are
`errors.Status`). This is the only module of twill that holds a solver context (smt.py loads the
backends for it); every check takes a deadline.

The terms (variables, window, helpers) are joint_terms.py's `Encoding`; the constraint families
are families.py's `FAMILIES`. Used by the escalation of stage 2 (joint.py) and by `explain`, which
guards each family item with an assumption literal.
"""
from __future__ import annotations

import time

from .errors import Status
from .families import FAMILIES, symmetry_breaking
from .gaps import Gaps
from .joint_terms import Encoding, Split
from .problem import Problem
from .smt import bounded_check, smt_backend

__all__ = ["FAMILIES", "IMPLIED", "OBJECTIVES", "UNGUARDED", "Encoding", "JointEncoding"]

# Family items asserted even when the others are guarded: they remove no schedule (the symmetry breaking
# of role slots, and each op's slot being one of them), so no unsat core needs them, and without them a
# check that drops other items must refute every renumbering of the roles (explain's core: minutes).
UNGUARDED = {("roles", "order"), ("roles", "slot")}
# Family items that follow from the family's other items (cuts: they remove no schedule, and help the
# solver refute or find one): asserted where nothing is guarded, left out where explain guards the
# items, so that a core names the items they follow from.
IMPLIED = {("registers", "average"), ("registers", "carried")}

# Where every item is asserted, the registers and memory families leave out the intervals no schedule
# has cover a check point, from the bounds on start differences the dependences and the window give
# (gaps.Gaps): the same constraints, fewer terms.
GAPS = True

OBJECTIVES = {
    # what `JointEncoding.minimize` can minimize, as terms of an Encoding
    "I": lambda e: e.I,
    "L": lambda e: e.L,
    "roles": lambda e: e.count(e.used),
    "cross-role edges": lambda e: e.add(e.num(0), *[e.T.ite(e.same_role(d.src, d.dst), e.num(0), e.num(1))
                                                 for d in e.p.deps]),
    "warps": lambda e: e.add(*[e.warps(w) for w in range(e.K)]),
    "starts": lambda e: e.add(*[e.start[t.name] for t in e.p.tasks]),
    # and "start:OP": one op's start, "role:OP": its role slot, "warps:W": role slot W's warps
}


# After a satisfiable check whose model beat the bound asked for, `minimize` checks just below that
# model's value next (is it the least?) instead of bisecting: on the corpus' tmem_gemm_m256_x2_p4 the
# sum of starts' first model was its optimum and the bisection then paid five refutations near it
# for the one that proves it (docs/benchmarks.md, log, session 28).
INCUMBENT_PROBE = True


class JointEncoding:
    """The joint problem at one I (`JointEncoding(p, ii, lmax)`), or over a range of I
    (`JointEncoding.over(p, lo, hi, copies)`, window copies * I), on a solver: the only object of
    twill that holds solver objects, behind a solver-neutral API. Answers are `Status`es, values are
    keyed by op name, objectives by name (`OBJECTIVES`), guards by whatever `guard(family, detail)`
    returns. Every check is bounded by a `deadline` (time.monotonic() seconds, None: none) and stops
    within a fraction of a second on Ctrl-C (KeyboardInterrupt).

    With `guard`, each family item is asserted under an assumption literal `guard(family, detail)`,
    and `check(assume=keys)` assumes only those: `core()` is then the keys of an unsat core."""

    def __init__(self, p: Problem, ii: int, lmax: int, families=FAMILIES, guard=None, *, upto: int | None = None,
                 copies: int | None = None):
        self._y = smt_backend(p.option("smt_backend", "yices"))
        hi = ii if upto is None else upto
        while True:
            try:
                self._build(p, ii, hi, lmax, copies, families, guard)
                break
            except Split as split:  # a Python-level decision changes inside the range: encode less of it
                self._ctx.dispose()
                hi = split.at - 1
        self.p, self.lo, self.hi = p, ii, hi
        self.names, self.slots = self._e.names, self._e.K
        self.guards = tuple(self._guards)
        self._model, self._assumed = None, False
        self._params = None
        self._objectives: dict = {}
        self.checks, self.last_check_seconds = 0, 0.0
        self.symmetric = False  # `break_symmetry` done
        self.floor: dict[str, int] = {}  # objective -> the least value a minimization has not refuted
        # A bound on the process' CPU time (time.process_time() seconds) for every check while set: a
        # phase's budget (joint._minimize), in CPU seconds so that where a phase is handed over does not
        # depend on the machine's load (docs/benchmarks.md, log, session 42)
        self.cpu_until: float | None = None

    @classmethod
    def over(cls, p: Problem, lo: int, hi: int, copies: int, families=FAMILIES) -> "JointEncoding":
        """Every I in [lo, hi'] at once, window copies * I, where hi' <= hi is as far as the families'
        own case splits on I stay the same (`self.hi` says)."""
        return cls(p, lo, copies * lo, families, upto=hi, copies=copies)

    def _build(self, p, lo, hi, lmax, copies, families, guard):
        y = self._y
        self._ctx = self._new_context()
        self._e = e = Encoding(p, lo, hi, y, lmax, copies)
        if guard is None and {"dependence", "completion"} <= set(families) and GAPS:
            gaps = Gaps(p, hi, lmax if lo == hi else copies * hi)
            e.gaps = gaps if gaps.feasible else None
        self._guards = {}
        formulas = []
        for name, family in families.items():
            for detail, formula in family(e):
                if guard is None or (name, detail.partition(":")[0]) in UNGUARDED:
                    formulas.append(formula)
                elif (name, detail) in IMPLIED:
                    continue
                else:
                    key = guard(name, detail)
                    if key not in self._guards:
                        self._guards[key] = e.var(f"[{key}]", e.bool)
                    formulas.append(e.T.implies(self._guards[key], formula))
        self._asserted, self._stale, self._revive_seconds = [], False, 0.0
        self._assert(formulas + e.defs)
        self._status = {y.Status.SAT: Status.SAT, y.Status.UNSAT: Status.UNSAT}  # anything else: not decided

    # -- checks ---------------------------------------------------------------------------------
    def _term(self, objective: str):
        if objective not in self._objectives:
            kind, _, what = objective.partition(":")
            self._objectives[objective] = (OBJECTIVES[objective](self._e) if not what else
                                           self._e.start[what] if kind == "start" else
                                           self._e.role[what] if kind == "role" else self._e.warps(int(what)))
        return self._objectives[objective]

    def check(self, deadline: float | None = None, at_most: dict | None = None, assume=None,
              roles: dict[str, int] | None = None, starts: dict[str, int] | None = None,
              cpu_seconds: float | None = None) -> Status:
        """Satisfiable? With `at_most` {objective: k}, under objective <= k for this check only;
        with `roles` {op: slot} or `starts` {op: start}, under those roles or starts for this check
        only (an UNSAT answer then says nothing of the problem); with `assume` (guard keys), under
        those guards alone. A SAT answer keeps its model. TIMEOUT where `deadline`, `cpu_seconds` of
        the process' CPU time from now, or `cpu_until` came first."""
        cpu_until = self._cpu_bound(cpu_seconds)
        if cpu_until is not None and time.process_time() >= cpu_until:
            return Status.TIMEOUT
        if not self._live(deadline):
            return Status.TIMEOUT
        if assume is None and not self._assumed and self._ctx.status() == self._y.Status.UNSAT:
            return Status.UNSAT  # the assertions contradict each other outright (Yices then refuses push)
        self._assumed = self._assumed or assume is not None  # (then an UNSAT status is the assumptions')
        e = self._e
        extra = ([e.le(self._term(k), e.num(v)) for k, v in (at_most or {}).items()]
                 + [e.same_slot(v, w) for v, w in (roles or {}).items()]
                 + [e.eq(e.start[v], e.num(t)) for v, t in (starts or {}).items()])
        literals = None if assume is None else [self._guards[k] for k in assume]
        if extra:  # under an assumption literal, not push/pop: what the solver learns stays learnt
            lit = e.var(f"[check {self.checks}]", e.bool)
            self._assert([e.T.implies(lit, e.T.yand(extra))])
            literals = (literals or []) + [lit]
            self._assumed = True
        t0 = time.monotonic()
        status = self._status.get(bounded_check(self._ctx, literals, deadline, self._params, cpu_until),
                                  Status.TIMEOUT)
        self.checks += 1
        self.last_check_seconds = time.monotonic() - t0
        if status == Status.SAT:
            self._model = self._y.Model.from_context(self._ctx, 1)
        elif status == Status.TIMEOUT and self._ctx.status() == getattr(self._y.Status, "INTERRUPTED", None):
            self._stale = True
        if extra:
            self._assert([e.T.ynot(lit)])  # retired: its clause holds from now on
        return status

    def check_aside(self, deadline: float | None = None, at_most: dict | None = None,
                    cpu_seconds: float | None = None) -> tuple[Status, dict[str, int], dict[str, int]]:
        """`check` on a fresh context of everything asserted so far, disposed after: this context's
        state (what its solver has learnt, which decides how long its later checks take) stays as it
        was. (status, starts, roles): the starts and role slots of a SAT answer's model, else empty."""
        cpu_until = self._cpu_bound(cpu_seconds)
        if cpu_until is not None and time.process_time() >= cpu_until:
            return Status.TIMEOUT, {}, {}
        e = self._e
        ctx = self._new_context()
        try:
            ctx.assert_formulas(self._asserted + [e.le(self._term(k), e.num(v)) for k, v in (at_most or {}).items()])
            status = self._status.get(bounded_check(ctx, None, deadline, self._params, cpu_until), Status.TIMEOUT)
            if status != Status.SAT:
                return status, {}, {}
            model = self._y.Model.from_context(ctx, 1)
            return (status, {v: model.get_integer_value(e.start[v]) for v in self.names},
                    {v: model.get_integer_value(e.role[v]) for v in self.names})
        finally:
            ctx.dispose()

    def check_partition(self, blocks, deadline: float | None = None,
                        at_most: dict | None = None) -> tuple[Status, list[tuple[str, str, bool]]]:
        """Satisfiable with the ops on roles as `blocks` (lists of ops, each one role, whatever its
        slot)? Under assumptions, one per relation (each op with its block's first op, the blocks'
        first ops apart): UNSAT comes with a core of those relations, (a, b, same), under which no
        schedule of this encoding exists (the rest of the partition may be anything). With `at_most`
        {objective: k}, under objective <= k too (one more assumption): `core_bounded` then says
        whether the core needed it (if not, the core holds whatever the objective). A SAT answer
        keeps its model."""
        relations = [(b[0], v, True) for b in blocks for v in b[1:]]
        relations += [(b[0], c[0], False) for i, b in enumerate(blocks) for c in blocks[i + 1:]]
        return self.check_relations(relations, deadline, at_most)

    def check_relations(self, relations, deadline: float | None = None,
                        at_most: dict | None = None) -> tuple[Status, list[tuple[str, str, bool]]]:
        """`check_partition` of the relations (a, b, same) alone, each under an assumption."""
        if not self._live(deadline):
            self.core_bounded = False
            return Status.TIMEOUT, []
        e, T = self._e, self._e.T
        lits = []
        for a, b, same in relations:
            lit = e.var(f"[partition {self.checks} {a},{b}]", e.bool)
            self._assert([T.implies(lit, e.same_role(a, b) if same else T.ynot(e.same_role(a, b)))])
            lits.append(lit)
        bound = None
        if at_most:
            bound = e.var(f"[partition {self.checks} at most]", e.bool)
            self._assert([T.implies(bound, T.yand([e.le(self._term(k), e.num(v)) for k, v in at_most.items()]))])
        self.core_bounded = False
        self._assumed = True
        t0 = time.monotonic()
        status = self._status.get(bounded_check(self._ctx, lits + ([bound] if bound is not None else []), deadline,
                                                self._params, self.cpu_until), Status.TIMEOUT)
        self.checks += 1
        self.last_check_seconds = time.monotonic() - t0
        core = []
        if status == Status.SAT:
            self._model = self._y.Model.from_context(self._ctx, 1)
        elif status == Status.UNSAT:
            index = {lit: r for lit, r in zip(lits, relations)}
            found = self._ctx.get_unsat_core()
            core = [index[t] for t in found if t in index]
            self.core_bounded = bound is not None and any(t == bound for t in found)
        elif self._ctx.status() == getattr(self._y.Status, "INTERRUPTED", None):
            self._stale = True
        return status, core

    @property
    def assert_seconds(self) -> float:
        """How long the longest assertion into the context took (the first: everything), what a fresh
        context of it costs (`check_aside`, `_revive`)."""
        return self._revive_seconds

    def _cpu_bound(self, cpu_seconds: float | None) -> float | None:
        """The process CPU time (time.process_time()) a check may run to: `cpu_until`, and
        `cpu_seconds` from now."""
        bounds = [b for b in (self.cpu_until, None if cpu_seconds is None else time.process_time() + cpu_seconds)
                  if b is not None]
        return min(bounds) if bounds else None

    def _assert(self, formulas: list) -> None:
        """Assert from now on, and keep for `_revive` (on a context a deadline stopped, only kept: the
        fresh context asserts them)."""
        self._asserted += formulas
        if not self._stale:
            t0 = time.monotonic()
            self._ctx.assert_formulas(formulas)
            self._revive_seconds = max(self._revive_seconds, time.monotonic() - t0)

    def _revive(self) -> None:
        """A fresh context with everything asserted so far: Yices accepts nothing but pop or a reset
        on a context whose check was interrupted (a deadline), and the solver terms outlive it.
        What the old context had learnt is lost; only a check a deadline stopped pays this."""
        t0 = time.monotonic()
        self._ctx.dispose()
        self._ctx = self._new_context()
        self._ctx.assert_formulas(self._asserted)
        self._stale = False
        self._revive_seconds = time.monotonic() - t0

    def _live(self, deadline: float | None) -> bool:
        """Revive the context where a deadline stopped its last check, when the next check needs it
        (`_stale`): not at once, since the fresh context asserts every formula again, which Yices does
        not interrupt (10-12 s on the corpus' 130-op random DAG, where the solve's last checks then ran
        that far past its time limit: docs/benchmarks.md, log, session 41). False, with nothing done,
        where the deadline comes sooner than the last assertion of everything took (the check could
        not start before it anyway)."""
        if not self._stale:
            return True
        if deadline is not None and deadline - time.monotonic() < self._revive_seconds:
            return False
        self._revive()
        return True

    def _new_context(self):
        cfg = self._y.Config()
        cfg.default_config_for_logic("QF_LIA")
        return self._y.Context(cfg)

    def break_symmetry(self) -> None:
        """Assert the orderings of interchangeable ops (families.symmetry_breaking) from now on: they
        keep a schedule of every objective's optimum, so any search may add them at any point. Not
        on a guarded encoding: a check that assumes only some items need not be symmetric."""
        assert not self.guards, "symmetry breaking is for unguarded encodings"
        self._assert(symmetry_breaking(self._e))
        self.symmetric = True

    def bound(self, objective: str, k: int) -> None:
        """Assert objective <= k from now on."""
        self._assert([self._e.le(self._term(objective), self._e.num(k))])

    def bound_below(self, objective: str, k: int) -> None:
        """Assert objective >= k from now on (proven elsewhere: a search by partitions), as `floor`."""
        self._assert([self._e.le(self._e.num(k), self._term(objective))])
        self.floor[objective] = max(k, self.floor.get(objective, k))

    def minimize(self, objective: str, lo: int, deadline: float | None = None, measure=None,
                 from_below: int = 0, check_seconds: float | None = None,
                 probe_floor: bool = False) -> tuple[int, bool]:
        """The least k >= lo with objective <= k satisfiable, from the value the last model has
        (satisfiable), asserted from then on. Binary search, except that once at most `from_below`
        values remain, it tries them from below (the first satisfiable is the least: unsatisfiable
        checks are the cheap ones where a loose bound makes a satisfiable one dear). `measure()` reads
        what the current model really achieves (at most the objective's value), so each satisfiable
        check can lower the bound further. Returns the bound and whether the search finished (a
        deadline, or a check running past `check_seconds` of CPU time, can stop it). With `probe_floor`, `lo` itself
        is checked first; after a model that beat its bound, the value just below it (INCUMBENT_PROBE)."""
        measure = measure or (lambda: self.value(objective))
        hi = measure()
        first = lo if probe_floor else None
        undershot = False  # the last model beat the bound asked for: its value may well be the least
        while lo < hi:
            mid = (lo if hi - lo <= from_below or lo == first else hi - 1 if undershot and INCUMBENT_PROBE
                   else (lo + hi) // 2)
            status = self.check(deadline, {objective: mid}, cpu_seconds=check_seconds)
            if status == Status.TIMEOUT:
                break
            undershot = False
            if status == Status.SAT:
                value = measure()
                undershot = value < mid
                hi = min(mid, value)
            else:
                lo = mid + 1
                if not self.guards:  # proven: objective > mid, kept as a fact for the checks after it
                    self._assert([self._e.le(self._e.num(lo), self._term(objective))])
                    self.floor[objective] = lo
        self.bound(objective, hi)
        return hi, lo >= hi

    def core(self) -> list:
        """The guard keys of the last unsat check's core (the solver's, not necessarily minimal)."""
        key_of = {t: k for k, t in self._guards.items()}
        return [key_of[t] for t in self._ctx.get_unsat_core() if t in key_of]

    # -- the last model, in the graph's names ------------------------------------------------------
    def value(self, objective: str) -> int:
        return self._model.get_integer_value(self._term(objective))

    def starts(self) -> dict[str, int]:
        return {v: self._model.get_integer_value(self._e.start[v]) for v in self.names}

    def roles(self) -> dict[str, int]:
        """op -> role slot."""
        return {v: self._model.get_integer_value(self._e.role[v]) for v in self.names}

    def role_warps(self) -> dict[int, int]:
        """role slot -> its warps (0: unused)."""
        return {w: self._model.get_integer_value(self._e.warps(w)) for w in range(self.slots)}

    def makespan(self) -> int:
        """The length the model's starts really need (its L may be larger)."""
        start = self.starts()
        return max([start[t.name] + t.cycles for t in self.p.tasks] + [0])

    def close(self) -> None:
        self._ctx.dispose()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
