"""emit-cuda's ptxas loop: compile the emitted kernel, and where ptxas contradicts the model, make
the model tighter and solve again.

The rule. The kernel is compiled (twill.ptxas, cached by content). It contradicts the model when
any instance of the kernel template spills or has its wgmmas serialized (C7515 and its kin); the
model said every role's registers fit its `setmaxnreg` budget. Probes (one compile per role, the
other roles left out of the dispatch) say whose code it is, and for that role ptxas's own register
count (its code alone, without setmaxnreg: `ptxas.role_registers`). For each such role, with B its
`setmaxnreg` budget, N the registers the model counts for it at its fullest (twill.liveness), R
ptxas's count and s the registers ptxas spilled (spill bytes per thread / 4, rounded up):

    short = R - N         (ptxas counted R where the model counted N, R above the budget B)
    short = B + s - N     (a spill, without a count above B: ptxas needed at least B + s)
    short = g             (a serialization alone, with no count above B: one granule a round)

at least one granule g (`limits.register_granule`). Only the role that contradicts the model is
tightened: its shortfall, rounded up to a granule, becomes registers that any role holding its ops
keeps for the whole loop (`role_reserve` of twill.options: a register input of the problem read by
those ops), and the graph is solved again under it (where no schedule exists under it, with half
the step, in granules); the other roles keep their model. That is at most ROUNDS solves; the first
round whose kernel is clean is emitted, and if none is, the first schedule is (it was optimal for
the model as given; a tighter model that still spills is no better at a longer I), unless a later
round at no more I compiles better (`least_bad`). What changed goes to stderr,
one line each.
A schedule of stage 1 alone (no roles), or one a time limit cut short, is only reported on.

The persistent instances. Where ptxas compiles kernel<true, ...> (a CTA looping over tiles) worse
than kernel<false, ...> (`persistent_worse`: a serialization they lack, or more spill), the kernel is
first compiled with its tile loop's parameters read the other way (`tile_args`, kernel.py `_tiles`:
per tile through an opaque pointer, or as nvcc hoists them): where that compiles kernel<true> no worse
than kernel<false>, it is kept for every later round. Where kernel<true> is still worse, the kernel
is emitted one CTA per tile (`one_tile_per_cta`), and a round whose one-tile instances are clean
ends the loop: dropping the tile loop costs no I, solving again does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

from .ptxas import Attribution, RoleFinding, attribute, compile_kernel, find_nvcc
from .schedule import Schedule

ROUNDS = 3
# Seconds one solve again may take where the user gave no --time-limit: emit-cuda runs from
# Makefiles, and a re-solve that does not finish must not hang the build. At the limit the loop
# stops and the first schedule's kernel is written.
RESOLVE_TIME_LIMIT = 120.0


@dataclass(frozen=True)
class Round:
    """One compile of the loop: the registers the model was given on top of its own count (per role,
    `role_reserve`), the schedule and its kernel."""

    reserve: tuple
    schedule: Schedule
    text: str
    found: Attribution


@dataclass(frozen=True)
class LoopResult:
    schedule: Schedule
    text: str
    rounds: tuple[Round, ...]
    chosen: int  # index into rounds
    one_tile_per_cta: bool = False  # kernel<true> dropped: it compiled worse than kernel<false> (persistent_worse)
    hidden_position: bool = False  # kernel<false> with its ring position hidden (it compiled better so)
    tile_args: bool | None = None  # kernel<true>'s parameters per tile or not (None: build_model's default)

    @property
    def changed(self) -> bool:
        return self.chosen != 0

    @property
    def build_options(self) -> dict:
        """The emitter's options the loop chose (`emit.emitted`'s keywords) for the text it returns."""
        return dict(one_tile_per_cta=self.one_tile_per_cta, hidden_position=self.hidden_position,
                    tile_args=self.tile_args)


def role_probes(model, schedule: Schedule, machine) -> list[tuple]:
    """(ident, name, setmaxnreg budget of its warpgroup, the model's registers or None, the
    schedule's ops of the role, its warps) per role of the emitter's model (`twill.emit.build_model`)."""
    budget = {}
    for g in model.warpgroups:
        for r in g.roles:
            budget[r] = g.registers
    need = model_registers(schedule, machine)
    where = {r.name: (tuple(r.ops), r.warps) for r in schedule.roles}
    return [(r.ident, r.name, budget.get(r.name, r.registers), need.get(r.name), *where.get(r.name, ((), 4)))
            for r in model.roles]


def model_registers(schedule: Schedule, machine) -> dict[str, int]:
    """The registers per thread the model counts for each role of a joint schedule at its fullest
    (its reserve included), as the joint stage checked them; {} for a schedule without roles."""
    if not schedule.roles or not schedule.graph_tir:
        return {}
    from .liveness import role_register_use
    from .options import ModelOptions
    from .problem import problem_for
    from .tir import parse_tir
    graph = parse_tir(schedule.graph_tir, f"<graph of {schedule.kernel}>")
    p = problem_for(graph, machine, ModelOptions.from_recorded(schedule.options, schedule.stage),
                    dict(schedule.scale.map))[0]
    out = {}
    for r in schedule.roles:
        use = role_register_use(schedule, p, r)
        out[r.name] = int(use.used[use.held > 0].max()) if use.held.any() else p.limits.min_registers
    return out


def shortfall(f: RoleFinding, granule: int) -> int:
    """Registers the model did not see on this role (the module's rule), in whole granules."""
    model = f.model_registers if f.model_registers is not None else f.budget
    spilled = math.ceil(f.spill_bytes / 4)
    if f.registers is not None and f.registers > f.budget:
        short = f.registers - model
    else:
        short = f.budget + spilled - model if spilled else granule
    return max(granule, math.ceil(short / granule) * granule)


def contradictions(found: Attribution) -> list[str]:
    """What the probes said against the model, a line per role (the summary gives the instances)."""
    lines = []
    for f in found.offending:
        model = f"the model counts {f.model_registers}" if f.model_registers is not None else "no model count"
        if f.registers is not None:
            model += f", ptxas {f.registers} alone"
        what = ([f"{f.spill_bytes} bytes spilled"] if f.spill_bytes else []) + (
            [f"wgmma serialized ({', '.join(f.codes)})"] if f.serialized else [])
        lines.append(f"ptxas: role {f.role} (setmaxnreg {f.budget}, {model}): {'; '.join(what)}")
    if found.unattributed:
        lines.append("ptxas: no role's code alone shows it (the roles together do)")
    return lines


def emitter(machine, **build_args) -> Callable:
    """The `emit` of `run` for the kernel emit-cuda writes (`emit.emitted(schedule, machine, **build_args)`:
    its loop split by columns where it splits; emit-cuda's kernel options): the model in the loop's choice of
    one tile per CTA and hidden ring position, and its text."""
    def emit(s: Schedule, one_tile: bool = False, hidden: bool = False, tile_args: bool | None = None):
        from .emit import emitted
        return emitted(s, machine, one_tile_per_cta=one_tile, hidden_position=hidden, tile_args=tile_args,
                       **build_args)
    return emit


def run(schedule: Schedule, machine, emit: Callable[[Schedule], tuple[object, str]],
        solve_again: Callable[[int], Schedule] | None, note: Callable[[str], None],
        rounds: int = ROUNDS) -> LoopResult:
    """The loop (module docstring). `emit(schedule, one_tile_per_cta, hidden_position, tile_args)` gives (the
    emitter's model, the .cu text); `solve_again(role_reserve)` the schedule under those per-role
    registers (None: report only)."""
    from .errors import TwillError
    nvcc = find_nvcc()
    raw, hidden, tile_args = emit, False, None

    def emit(s, one_tile):  # noqa: F811 (the caller's emit, in the forms of kernel<false> and <true> chosen below)
        return raw(s, one_tile, hidden, tile_args)
    model, text = emit(schedule, False)
    if nvcc is None:
        note("ptxas: skipped: nvcc not found (set NVCC or put nvcc on PATH; --no-ptxas-loop silences this)")
        return LoopResult(schedule, text, (), 0)
    lim = machine.limits
    reserve = tuple(tuple(x) for x in dict(schedule.options).get("role_reserve", ()))
    history = [Round(reserve, schedule, text, attribute(text, machine.arch, role_probes(model, schedule, machine), nvcc))]
    note(f"ptxas ({machine.arch}): {history[0].found.report.summary()}")
    if not history[0].found.report.ok:
        note("ptxas: the kernel does not compile:\n" + history[0].found.report.errors)
        return LoopResult(schedule, text, tuple(history), 0)
    if not one_tile_clean(history[0].found.report):
        model_h, text_h = raw(schedule, False, True)
        found_h = attribute(text_h, machine.arch, role_probes(model_h, schedule, machine), nvcc)
        if found_h.report.ok and _one_tile_badness(found_h.report) < _one_tile_badness(history[0].found.report):
            note(f"ptxas loop: kernel<false> with its tile's ring position hidden from the compiler: "
                 f"{found_h.report.summary()}")
            hidden, model, text = True, model_h, text_h
            history[0] = Round(reserve, schedule, text_h, found_h)
    if persistent_worse(history[0].found.report):
        flip = not model.tile_args
        model_a, text_a = raw(schedule, False, hidden, flip)
        report_a = compile_kernel(text_a, machine.arch, nvcc)  # (the probes only for a form that is kept)
        if report_a.ok and _persistent_badness(report_a) < _persistent_badness(history[0].found.report):
            found_a = attribute(text_a, machine.arch, role_probes(model_a, schedule, machine), nvcc)
            note(f"ptxas loop: kernel<true> with its parameters {'read per tile' if flip else 'as nvcc hoists them'}: "
                 f"{found_a.report.summary()}")
            tile_args, model, text = flip, model_a, text_a
            history[0] = Round(reserve, schedule, text_a, found_a)
    solves = 0
    while not history[-1].found.report.clean and not (persistent_worse(history[-1].found.report)
                                                       and one_tile_clean(history[-1].found.report)) and solves < rounds:
        last = history[-1]
        for line in contradictions(last.found):
            note(line)
        if solve_again is None:
            note("ptxas loop: this schedule is not solved again (stage 1 alone, or a time limit cut it short)")
            break
        offending = last.found.offending or tuple(
            RoleFinding(r, b, n, last.found.report.spill_bytes, last.found.report.serialized, ops=ops, warps=w)
            for _, r, b, n, ops, w in role_probes(emit(last.schedule, False)[0], last.schedule, machine) if n is not None)
        if not offending:
            break
        worst = max(offending, key=lambda f: (shortfall(f, lim.register_granule), f.role))
        grow = shortfall(worst, lim.register_granule)
        again, solves, grow = _solve_tighter(last.reserve, grow, worst, solve_again, lim, note, solves, rounds)
        if again is None:
            break
        try:
            model, text = emit(again, False)
        except TwillError as exc:  # a schedule the emitter cannot lay out: keep what we have
            note(f"ptxas loop: the new schedule cannot be emitted ({str(exc).splitlines()[0]}): stopping")
            break
        found = attribute(text, machine.arch, role_probes(model, again, machine), nvcc)
        history.append(Round(_tightened(last.reserve, worst, grow), again, text, found))
        note(f"ptxas loop: I = {again.ii} (was {schedule.ii}), L = {again.length}, "
             f"roles {', '.join(f'{r.name} {r.registers}' for r in again.roles) or 'derived'}; "
             f"{found.report.summary()}")
    chosen = next((i for i, r in enumerate(history) if r.found.report.clean), None)
    if chosen is None:  # else the first round clean without its persistent instances (the loop stops there too)
        chosen = next((i for i, r in enumerate(history) if persistent_worse(r.found.report)
                       and one_tile_clean(r.found.report)), None)
    if chosen is None:
        chosen = least_bad(history)
    if persistent_worse(history[chosen].found.report):
        pick = history[chosen]
        note("ptxas: the persistent kernel<true> compiles worse than kernel<false> (" + pick.found.report.summary()
             + "): one CTA per tile" + (f" (round {chosen}'s schedule)" if solves else ""))
        return LoopResult(pick.schedule, emit(pick.schedule, True)[1], tuple(history), chosen, True, hidden, tile_args)
    if solves:
        note(f"ptxas loop: emitting round {chosen}'s schedule" + (
            " (no round was clean: the first schedule, as the model solved it)" if chosen == 0
            else f" ({_describe(history[chosen].reserve)}" + (
                ")" if history[chosen].found.report.clean else
                f"; no round was clean: it spills least at no more I, {history[chosen].found.report.summary()})")))
    pick = history[chosen]
    return LoopResult(pick.schedule, pick.text, tuple(history), chosen, hidden_position=hidden, tile_args=tile_args)


def least_bad(history) -> int:
    """The round to emit where none is clean: the first schedule (optimal for the model as given), unless
    a later round costs no more I and compiles better (no serialization where it has one, or less spill
    of its worst instance): a tighter model that still spills is no better at a longer I, but at the
    same I it is (swiglu_bwd on b200 with 64-column tiles: round 0 spilled 1012 bytes, round 3 16 at
    the same I = 128)."""
    def badness(r):
        return (r.found.report.serialized, r.found.report.spill_bytes)
    first = history[0]
    better = [i for i, r in enumerate(history) if r.found.report.ok and r.schedule.ii <= first.schedule.ii
              and badness(r) < badness(first)]
    return min(better, key=lambda i: (badness(history[i]), history[i].schedule.ii, i), default=0)


def _instances(report, persistent: bool | None = None) -> list:
    """The entries of the emitted template's instances: kernel<true, ...> (persistent) or kernel<false, ...>."""
    return [e for e in report.entries if e.instance.startswith("kernel<")
            and (persistent is None or e.instance.startswith("kernel<true") == persistent)]


def _badness(entries) -> tuple:
    """How badly these instances compiled: a serialized wgmma, then the most spill."""
    return (any(e.serialized for e in entries), max((e.spill_bytes for e in entries), default=0))


def persistent_worse(report) -> bool:
    """Whether the persistent instances kernel<true, ...> compiled worse than the instances of one
    tile per CTA: a serialized wgmma where those have none, or more spill. The tile loop keeps a few
    more registers live (the tile, its ring positions), and where a warpgroup's registers are tight
    that is what tips ptxas over (the Triton causal forward's kernel<true> had its wgmmas serialized,
    its kernel<false> spilled 12 bytes). Then the kernel runs one CTA per tile: its pipeline fill
    and drain are not overlapped with the next tile's, a cost the serialization would exceed."""
    tiles, one = _instances(report, True), _instances(report, False)
    if not tiles or not one:
        return False
    return _badness(tiles) > _badness(one)


def _persistent_badness(report) -> tuple:
    """How badly kernel<true> compiled against kernel<false>: worse than it (persistent_worse), then
    its own serialization and most spill."""
    return (persistent_worse(report),) + _badness(_instances(report, True))


def _one_tile_badness(report) -> tuple:
    """How badly the instances of one tile per CTA compiled: a serialization, then the most spill."""
    return _badness(_instances(report, False))


def one_tile_clean(report) -> bool:
    """The instances of one tile per CTA compile clean (no spill, no serialization)."""
    one = _instances(report, False)
    return report.ok and bool(one) and all(e.clean for e in one)


def _tightened(reserve: tuple, role, grow: int) -> tuple:
    """`role_reserve` with `grow` more registers for the ops of `role` (added to an entry of the same ops)."""
    out, done = [], False
    for ops, regs, warps in reserve:
        if tuple(ops) == tuple(role.ops):
            out.append((tuple(ops), regs + grow, warps))
            done = True
        else:
            out.append((tuple(ops), regs, warps))
    return tuple(out) if done else tuple(out) + ((tuple(role.ops), grow, role.warps),)


def _describe(reserve: tuple) -> str:
    return "; ".join(f"{regs} more registers for the role of {', '.join(ops)}" for ops, regs, _ in reserve) or "no extra registers"


def _solve_tighter(reserve: tuple, grow: int, role, solve_again, lim, note, solves: int, rounds: int):
    """Solve with `grow` more registers on the role of `role`'s ops; where no schedule exists, or
    the role would be left fewer than `min_registers` for tiles, halve the step (in granules) and
    try again, while solves are left. Returns (schedule or None, solves, the step taken)."""
    from .errors import NoScheduleError, TwillError
    g, short = lim.register_granule, grow
    held = next((regs for ops, regs, _ in reserve if tuple(ops) == tuple(role.ops)), 0)
    while solves < rounds:
        new = held + grow
        if lim.register_reserve + new + lim.min_registers <= lim.registers_per_thread:
            solves += 1
            step = "" if grow == short else f"; a step of {grow}"
            note(f"ptxas loop: round {solves}: role {role.role} ({', '.join(role.ops)}) gets {held} -> {new} "
                 f"registers the model did not see (it was {short} registers short{step}), solving again")
            try:
                return solve_again(_tightened(reserve, role, grow)), solves, grow
            except NoScheduleError:
                note(f"ptxas loop: no schedule with {new} more registers on role {role.role}")
            except TwillError as exc:
                note(f"ptxas loop: solving again failed ({str(exc).splitlines()[0]}): stopping")
                return None, solves, grow
        if grow <= g:
            break
        grow = max(g, math.ceil(grow / 2 / g) * g)
    return None, solves, grow


def resolver(schedule: Schedule, machine, options=None, progress=None) -> Callable[[int], Schedule] | None:
    """`solve_again` for run(): the schedule's graph solved under its own options (or `options`,
    a SolveOptions) with more registers on one role (`role_reserve`); None where the loop cannot help (stage 1
    alone, an incomplete schedule, no embedded graph)."""
    if schedule.stage != "joint" or not schedule.complete or not schedule.graph_tir:
        return None
    from .options import ModelOptions
    from .pipeline import SolveOptions, solve
    from .tir import parse_tir
    if options is None:
        base = ModelOptions.from_recorded(schedule.options, schedule.stage)
        options = SolveOptions(**{f: getattr(base, f) for f in base.__dataclass_fields__})
    graph = parse_tir(schedule.graph_tir, f"<graph of {schedule.kernel}>")
    if options.tile_handoff is None and not machine.tile_handoff and not dict(schedule.options).get("tile_handoff"):
        # the schedule keeps its register tiles on their roles: so must a schedule with more registers,
        # not fall back to handing them over (pipeline.solve), which cost far more than a spill on the
        # card (docs/model-fidelity.md, session 30); with none, the loop keeps the rounds it has
        options = replace(options, tile_handoff=False)

    limit = options.time_limit if options.time_limit is not None else RESOLVE_TIME_LIMIT

    def again(role_reserve: tuple) -> Schedule:
        return solve(graph, machine, replace(options, role_reserve=role_reserve, time_limit=limit),
                     progress or (lambda *a: None))
    return again
