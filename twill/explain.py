"""`twill explain`: why the SWP bound I0 of stage 1 is (or is not) realisable by the joint stage.

The joint problem at I0 (`encoding.build`) is built with every constraint item guarded by an
assumption literal keyed (family, detail): details already name the op, edge, pair of ops or
role slot (e.g. registers "s@0": value s checked on role slot 0). With every guard assumed and
L within stage 1's window, Yices either finds a schedule (I0 is realisable) or returns an unsat
core. The core is shrunk to a minimal one by deletion (drop one guard, re-check the rest; keep it
dropped while still unsat), so every item in it is needed for the conflict. Each item is turned
into a sentence from a per-family template filled with the graph's ops, units and limits.

Then, for every family in the core, candidate relaxations are *checked* by re-solving at I0: the
whole family dropped (the generic check), and the user-visible knob that loosens it (more warps,
a larger register ceiling, cross-role communication, a shallower ring...). Finally the ordinary
I escalation (`joint.solve_joint`) finds the smallest realisable I.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from .errors import NoScheduleError, Status, TimeLimitReached
from .joint import EXTRA_COPIES
from .liveness import regs_per_thread
from .problem import Problem
from .sentences import message

Key = tuple  # (family, detail)


@dataclass(frozen=True)
class CoreItem:
    family: str
    detail: str
    message: str


TIME_LIMIT_NOTE = "the time limit came first"  # a relaxation whose check the limit ended


@dataclass(frozen=True)
class Relaxation:
    family: str
    change: str
    satisfiable: bool | None  # None: not a change that can be tried (the note says why)
    note: str = ""


@dataclass
class Explanation:
    kernel: str
    machine: str
    swp_ii: int
    swp_length: int
    lmax: int
    realisable: bool
    core: list[CoreItem] = field(default_factory=list)
    relaxations: list[Relaxation] = field(default_factory=list)
    final_ii: int | None = None
    final_length: int | None = None
    final_roles: list[tuple[str, int, tuple[str, ...]]] = field(default_factory=list)
    final_note: str = ""
    schedule: object = None  # the joint Schedule (at I0 when realisable)
    checks: int = 0
    problem: Problem | None = None
    cut_short: bool = False  # a time limit ended a relaxation's check or the search for the final I
    swp_length_floor: int | None = None  # where stage 1 left L unproven: its floor (swp_length: a schedule's L)

    @property
    def complete(self) -> bool:
        return not self.cut_short and all(r.note != TIME_LIMIT_NOTE for r in self.relaxations)

    def to_dict(self) -> dict:
        return {
            "kernel": self.kernel, "machine": self.machine,
            "swp_ii": self.swp_ii, "swp_length": self.swp_length,
            **({"swp_length_floor": self.swp_length_floor} if self.swp_length_floor is not None else {}),
            "length_window": self.lmax,
            "realisable": self.realisable,
            "core": [{"family": c.family, "detail": c.detail, "message": c.message} for c in self.core],
            "relaxations": [{"family": r.family, "change": r.change, "satisfiable": r.satisfiable,
                             **({"note": r.note} if r.note else {})} for r in self.relaxations],
            "final_ii": self.final_ii, "final_length": self.final_length,
            "final_roles": [{"name": n, "warps": w, "ops": list(o)} for n, w, o in self.final_roles],
            **({"final_note": self.final_note} if self.final_note else {}),
        }


# -- checking subsets of guards --------------------------------------------------------------------

class GuardedProblem:
    """The joint problem at one I with every item guarded; checks subsets of the guards, each bounded
    by `deadline` (time.monotonic() seconds): past it a check raises TimeLimitReached."""

    def __init__(self, p: Problem, ii: int, lmax: int, deadline: float | None = None):
        from .encoding import JointEncoding
        self.p, self.ii, self.lmax, self.deadline = p, ii, lmax, deadline
        self.enc = JointEncoding(p, ii, lmax, guard=lambda family, detail: (family, detail))
        self.guards = self.enc.guards

    @property
    def checks(self) -> int:
        return self.enc.checks

    def check(self, keys) -> bool:
        """True when the items of `keys` (all others off) are satisfiable together."""
        status = self.enc.check(self.deadline, assume=list(keys))
        if status == Status.TIMEOUT:
            raise TimeLimitReached(None, "the time limit ended `twill explain` before the conflict was explained")
        return status == Status.SAT

    def core(self) -> list[Key]:
        return self.enc.core()

    def minimal_core(self) -> list[Key]:
        """A minimal unsat subset of all guards, by deletion (after the solver's own core)."""
        if self.check(list(self.guards)):
            return []
        core = self.core()
        i = 0
        while i < len(core):
            rest = core[:i] + core[i + 1:]
            if not self.check(rest):
                # Still unsat without core[i]: keep it dropped, and shrink to the solver's new core.
                # Items before i stay: each was necessary in a superset, so in every unsat subset.
                smaller = set(self.core())
                core = [k for k in rest if k in smaller]
            else:
                i += 1
        return core

    def dispose(self):
        self.enc.close()


def family_summary(p: Problem, family: str, items: list[CoreItem]) -> str | None:
    """A line over a family's items where it adds what they do not say (the register footprint of
    each value pinned to a role slot); None where it would only repeat the items listed below it."""
    lim = p.limits
    details = [c.detail for c in items]
    if family == "registers":
        pairs = [d.split("@") for d in details if "@" in d]
        if pairs:
            each = ", ".join(f"{v} on slot {w} ({regs_per_thread(p.task[v].register_bytes, lim.warp_group)} per thread "
                             f"on a warpgroup, {regs_per_thread(p.task[v].register_bytes, 1)} on one warp)" for v, w in pairs)
            return (f"registers: {each}; each, with the reserve {lim.register_reserve} and the values live with "
                    f"it on its role, must fit a budget of at most {lim.registers_per_thread} per thread")
    return None


# -- relaxations ----------------------------------------------------------------------------------

def _check_whole(p: Problem, ii: int, lmax: int, deadline: float | None) -> bool | None:
    """Is the joint problem at `ii` satisfiable (None: the deadline came first)?"""
    from .encoding import JointEncoding
    with JointEncoding(p, ii, lmax) as enc:
        status = enc.check(deadline)
    return None if status == Status.TIMEOUT else status == Status.SAT


def relaxations(gp: GuardedProblem, core: list[Key], rebuild, swp_length: int,
                pinned_depth: frozenset = frozenset()) -> list[Relaxation]:
    """For each family of the core: dropping it all (generic), then the knob that loosens it.
    `rebuild(**changes)` gives the Problem for changed SolveOptions (warps, registers, ...);
    `pinned_depth` names the ops whose ring depth the .tir sets (`{depth = N}`, which --depth,
    a default, does not change)."""
    p, ii, lmax = gp.p, gp.ii, gp.lmax
    out: list[Relaxation] = []
    families = list(dict.fromkeys(f for f, _ in core))
    def dropped(fam, change, keep):
        try:
            out.append(Relaxation(fam, change, gp.check(keep)))
        except TimeLimitReached:
            out.append(Relaxation(fam, change, None, TIME_LIMIT_NOTE))

    for fam in families:
        dropped(fam, f"drop every {fam} constraint (what-if, not a flag)", [k for k in gp.guards if k[0] != fam])
    if len(families) > 1:
        dropped("+".join(families), "drop every constraint of all these families together (what-if)",
                [k for k in gp.guards if k[0] not in families])

    def tried(fam, change, problem, window_len=None, note=""):
        verdict = _check_whole(problem, ii, window_len or lmax, gp.deadline)
        out.append(Relaxation(fam, change, verdict, note if verdict is not None else TIME_LIMIT_NOTE))

    cross_off = not p.option("cross_role", True)
    for fam in families:
        _knobs(fam, p, ii, swp_length, rebuild, pinned_depth, tried, out)
    if cross_off and "dependence" not in families:
        tried("dependence", "allow cross-role communication (drop --no-cross-role)", rebuild(cross_role=True))
    return out


def _knobs(fam: str, p: Problem, ii: int, swp_length: int, rebuild, pinned_depth, tried, out) -> None:
    """The knobs that loosen family `fam`, each tried (`tried`) or said impossible (appended to
    `out`): more warps, no --group pins, more registers, cross-role communication, shallower
    rings, a longer window; a unit's capacity is the machine's."""
    from .joint import window
    lim = p.limits
    more_warps = lim.warps + lim.warp_group
    cross_off = not p.option("cross_role", True)
    if fam == "roles" or fam == "blocking" or fam == "variable_latency":
        tried(fam, f"--warps {more_warps}", rebuild(warps=more_warps))
    if fam == "roles" and p.option("groups"):
        tried(fam, "drop the --group pins", rebuild(groups=()))
    if fam == "registers":
        if lim.registers_per_thread < 255:
            tried(fam, "--registers 255", rebuild(registers=255))
        else:
            out.append(Relaxation(fam, "a larger register ceiling", None,
                                  "not possible: 255 registers per thread is the architectural maximum; "
                                  "smaller (sub-tiled) values or more roles to spread them over would be"))
        tried(fam, f"--warps {more_warps}", rebuild(warps=more_warps))
    if fam == "dependence":
        if cross_off:
            tried(fam, "allow cross-role communication (drop --no-cross-role)", rebuild(cross_role=True))
        elif p.cross > 0:
            tried(fam, "cross-role delay 0 (what-if: free communication between roles)", replace(p, cross=0))
    if fam == "memory":
        _memory_knob(p, rebuild, pinned_depth, tried, out)
    if fam == "completion":
        tried(fam, "one more stage of length (L window + I)", p, window(p, ii, swp_length, EXTRA_COPIES + 1))
    if fam == "capacity":
        out.append(Relaxation(fam, "a unit of larger capacity", None,
                              "capacity is the machine's; shorter occupancies (smaller tiles) would relax it"))


def _memory_knob(p: Problem, rebuild, pinned_depth, tried, out) -> None:
    """Shallower streaming rings: the deepest one less deep, through {depth = N} where the .tir
    pins it, else --depth."""
    fam = "memory"
    depths = sorted({t.depth for t in p.tasks if t.streaming})
    deepest = [t.name for t in p.tasks if t.streaming and depths and t.depth == depths[-1]]
    if depths and depths[-1] > 1 and set(deepest) & pinned_depth:
        d = depths[-1] - 1
        shallower = replace(p, tasks=tuple(replace(t, depth=min(t.depth, d)) if t.streaming else t
                                           for t in p.tasks))
        tried(fam, f"{{depth = {d}}} on {', '.join(deepest)} (the .tir sets their depth; --depth is "
                   "only the default)", shallower)
    elif depths and depths[-1] > 1:
        tried(fam, f"--depth {depths[-1] - 1}", rebuild(depth=depths[-1] - 1))
    else:
        out.append(Relaxation(fam, "a shallower ring", None, "streaming rings are already at depth 1"))


# -- the whole explanation ------------------------------------------------------------------------

def explain(graph, machine, options, progress=lambda stage, info: None, deadline: float | None = None) -> Explanation:
    """The explanation of `graph` on `machine`; `options.time_limit` (or `deadline`, time.monotonic()
    seconds, whichever comes first) bounds the whole of it: every check stops there."""
    import math
    import time

    from .joint import window
    from .modulo import modulo_schedule
    from .pipeline import build_problem, schedule_from_modulo

    if options.time_limit is not None:
        deadline = min(deadline or math.inf, time.monotonic() + options.time_limit)

    def left():
        return None if deadline is None else max(0.01, deadline - time.monotonic())

    progress("normalize", {})
    p, norm = build_problem(graph, machine, options)
    progress("modulo", {})
    swp = modulo_schedule(p, options.max_ii, left(), earliest=False)  # (only its I and L are read)
    if swp is None:
        raise NoScheduleError(f"no modulo schedule with I <= {options.max_ii}: raise --max-ii")
    ii, length = swp.ii, swp.length
    lmax = window(p, ii, length)
    ex = Explanation(graph.kernel, machine.name, ii, length, lmax, realisable=False, problem=p,
                     swp_length_floor=swp.length_floor)

    # The joint search first: where it schedules I0 (the usual case), that is the answer, found with its
    # role hint and symmetry breaking (explain's guarded checks have neither: FA3's took 10 s, the solve 2).
    progress("joint", {"from I": ii})
    base = schedule_from_modulo(p, swp, norm, graph, machine, options)
    outcome = _joint_outcome(p, swp, base, options, progress, deadline)
    from .pipeline import tiles_pinned
    if outcome[0] is None and not outcome[2] and tiles_pinned(graph, machine, options):
        # no schedule keeps every register tile on its role: as `solve` does, the model with them
        # handed between roles (pipeline.solve, communication.tile_handoff) is the one explained
        progress("handoff", {"retry": "register tiles handed between roles"})
        return explain(graph, machine, replace(options, tile_handoff=True), progress, deadline)
    if outcome[0] is not None and outcome[0].ii == ii:
        ex.realisable = True
        return _record(ex, *outcome, graph, machine)

    progress("explain", {"I": ii, "check": "all constraints"})
    gp = GuardedProblem(p, ii, lmax, deadline)
    try:
        _core_and_relaxations(ex, gp, graph, machine, options, progress)
    finally:
        gp.dispose()
    if ex.realisable:  # (the joint search was cut short by the time limit before it scheduled I0)
        outcome = _joint_outcome(p, swp, base, options, progress, deadline)
    return _record(ex, *outcome, graph, machine)


def _core_and_relaxations(ex: Explanation, gp: GuardedProblem, graph, machine, options, progress) -> None:
    """Is the problem at the SWP bound realisable? If not, its minimal core in the graph's terms
    and the relaxations of its families, into `ex`."""
    from .pipeline import build_problem
    p, ii, lmax = gp.p, gp.ii, gp.lmax
    ex.realisable = gp.check(list(gp.guards))
    if not ex.realisable:
        progress("explain", {"I": ii, "minimizing": "core"})
        from .encoding import FAMILIES
        order = list(FAMILIES)
        core = sorted(gp.minimal_core(), key=lambda k: (order.index(k[0]) if k[0] in order else 99, k[1]))
        ex.core = [CoreItem(f, d, message(p, ii, lmax, f, d)) for f, d in core]
        progress("explain", {"I": ii, "checking": "relaxations"})

        def rebuild(**changes):
            return build_problem(graph, machine, replace(options, **changes))[0]

        pinned = frozenset(op.name for op in graph.ops if "depth" in dict(op.attrs))
        ex.relaxations = relaxations(gp, core, rebuild, ex.swp_length, pinned)
    ex.checks = gp.checks


def _joint_outcome(p, swp, base, options, progress, deadline):
    """(schedule or None, note or None, cut short?) of the joint search from I0."""
    from .joint import joint_schedule
    try:
        return joint_schedule(p, swp, base, replace(options, time_limit=None), progress, deadline), None, False
    except NoScheduleError as exc:
        return None, exc.diagnostics[0].message, False
    except TimeLimitReached as exc:
        if exc.schedule is None:
            return None, "the time limit ended the search before any schedule was found", True
        return exc.schedule, "not proven optimal (time limit)", True


def _record(ex: Explanation, sched, note, cut_short, graph, machine) -> Explanation:
    """`ex` with the joint search's outcome (its schedule verified)."""
    from .verify import check
    ex.final_note, ex.cut_short = note or ex.final_note, ex.cut_short or cut_short
    if sched is None:
        return ex
    check(sched, graph, machine)
    ex.final_ii, ex.final_length = sched.ii, sched.length
    ex.final_roles = [(r.name, r.warps, tuple(r.ops)) for r in sched.roles]
    ex.schedule = sched
    return ex


def render_text(ex: Explanation) -> str:
    from .report import render_table
    l0 = (f"L0 = {ex.swp_length}" if ex.swp_length_floor is None else
          f"{ex.swp_length_floor} <= L0 <= {ex.swp_length} (not proven; the window is the same)")
    lines = [f"{ex.kernel} on {ex.machine}: stage 1's SWP bound is I0 = {ex.swp_ii}, {l0} "
             f"(joint stage checked with L <= {ex.lmax})."]
    if ex.realisable:
        lines.append(f"I0 = {ex.swp_ii} is realisable: the joint stage schedules it with roles and registers.")
        if ex.schedule is not None:
            lines += ["", render_table(ex.schedule).rstrip()]
        return "\n".join(lines) + "\n"
    lines.append(f"I0 = {ex.swp_ii} is NOT realisable. A minimal conflict ({len(ex.core)} constraints; "
                 "dropping any one of them removes it):")
    fams = list(dict.fromkeys(c.family for c in ex.core))
    for fam in fams:
        lines.append(f"  [{fam}]")
        summary = family_summary(ex.problem, fam, [c for c in ex.core if c.family == fam]) if ex.problem else None
        if summary is not None:
            lines.append("    " + summary)
        for c in ex.core:
            if c.family == fam:
                lines.append(f"    - {c.message}   ({c.family} {c.detail})")
    lines += ["", "What would relax it, each checked by re-solving at I0:"]
    for r in ex.relaxations:
        verdict = {True: "satisfiable", False: "still unsatisfiable", None: "not tried"}[r.satisfiable]
        lines.append(f"  {r.family:<16} {r.change}: {verdict}" + (f" ({r.note})" if r.note else ""))
    lines.append("")
    if ex.final_ii is None:
        lines.append(f"No larger I works either: {ex.final_note}")
    else:
        roles = ", ".join(f"{n} ({w} warp{'s' if w != 1 else ''}: {' '.join(o)})" for n, w, o in ex.final_roles)
        lines.append(f"Smallest realisable I: {ex.final_ii} (I0 + {ex.final_ii - ex.swp_ii}), "
                     f"L = {ex.final_length} (L0 = {ex.swp_length}); roles: {roles}"
                     + (f" [{ex.final_note}]" if ex.final_note else ""))
    return "\n".join(lines) + "\n"
