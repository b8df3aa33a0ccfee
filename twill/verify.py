"""An independent, plain-Python check of a schedule against its graph and machine.

No solver is involved: every constraint family is re-derived from the graph, the machine
description and the schedule's own normalization map, and checked by enumeration over the
steady state. `verify` returns the list of violations (empty when the schedule is valid);
`check` raises. Each family is one function in `FAMILIES`, so a violation names its family.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import TwillError
from .ir import Graph
from .liveness import memory_use, role_register_use
from .registers import budget_ok, launched_warpgroups, register_file
from .machine import Machine
from .options import ModelOptions
from .problem import Problem, ScaleMismatch, problem_for
from .schedule import Schedule


@dataclass(frozen=True)
class Violation:
    family: str
    message: str

    def __str__(self) -> str:
        return f"{self.family}: {self.message}"


class VerificationError(TwillError):
    exit_code = 4


def _problem(schedule: Schedule, graph: Graph, machine: Machine) -> Problem:
    """The model the schedule was solved in: `problem_for` under the schedule's recorded options,
    with its own normalization map (ScaleMismatch when the map lacks one of the graph's costs)."""
    options = ModelOptions.from_recorded(schedule.options, schedule.stage)
    return problem_for(graph, machine, options, dict(schedule.scale.map))[0]


def check_ops(s: Schedule, p: Problem):
    names = {o.name for o in s.ops}
    for name in sorted({o.name for o in s.ops if [q.name for q in s.ops].count(o.name) > 1}):
        yield Violation("uniqueness", f"op '{name}' is scheduled more than once")
    for t in p.tasks:
        if t.name not in names:
            yield Violation("uniqueness", f"op '{t.name}' is not scheduled")
    for o in s.ops:
        t = p.task.get(o.name)
        if t is None:
            yield Violation("uniqueness", f"scheduled op '{o.name}' is not in the graph")
        else:
            for key, model in OP_FIELDS.items():
                have, want = getattr(o, key), getattr(t, model)
                if have != want or type(have) is not type(want):
                    yield Violation("consistency", f"op '{o.name}': '{OP_KEYS.get(key, key)}' is {have!r}, "
                                                   f"the model says {want!r}")
        if o.start < 0:
            yield Violation("consistency", f"op '{o.name}' starts at {o.start} < 0")


# ScheduledOp field -> the Task field the model derives it from; and the JSON key where they differ
OP_FIELDS = {"opcode": "opcode", "unit": "unit", "cycles": "cycles", "occupancy": "occupancy", "issue": "issue",
             "is_async": "is_async", "variable_latency": "variable_latency", "streaming": "streaming",
             "machine_cycles": "machine_cycles"}
OP_KEYS = {"is_async": "async"}


def check_buffers(s: Schedule, p: Problem):
    """Each streaming load's ring, as the model sizes it: a depth or size edited in the file would
    change the kernel emit-cuda writes."""
    if s.stage != "joint":
        return
    want = {t.name: (t.depth, t.bytes, t.space) for t in p.tasks if t.streaming}
    have = {b.value: (b.depth, b.bytes, b.space) for b in s.buffers}
    for name in sorted(set(want) | set(have)):
        if want.get(name) != have.get(name):
            yield Violation("consistency", f"buffer '{name}': depth/bytes/space is "
                                           f"{'/'.join(map(str, have[name])) if name in have else 'missing'}, "
                                           f"the model says {'/'.join(map(str, want[name])) if name in want else 'none'}")


def check_completion(s: Schedule, p: Problem):
    for o in s.ops:
        if o.start + o.cycles > s.length:
            yield Violation("completion", f"op '{o.name}' ends at {o.start + o.cycles} > L = {s.length}")


def _cross(s: Schedule, src: str, dst: str) -> bool:
    ops = s.by_name
    return s.stage == "joint" and ops[src].role != ops[dst].role


def check_dependence(s: Schedule, p: Problem):
    start = {o.name: o.start for o in s.ops}
    for d in p.deps:
        extra = p.cross if _cross(s, d.src, d.dst) else 0
        need = start[d.src] + d.latency + extra
        have = start[d.dst] + d.distance * s.ii
        if have < need:
            via = f" + cross-role {extra}" if extra else ""
            yield Violation("dependence", f"{d.src} -> {d.dst} (distance {d.distance}): {d.dst} starts at "
                                          f"{start[d.dst]} + {d.distance}*{s.ii} = {have}, needs "
                                          f"{start[d.src]} + {d.latency}{via} = {need}")


def check_capacity(s: Schedule, p: Problem):
    ii = s.ii
    for unit, cap in p.caps:
        use = [[] for _ in range(ii)]
        for o in s.ops:
            if o.unit == unit:
                for c in range(o.occupancy):
                    use[(o.start + c) % ii].append(o.name)
        for r, names in enumerate(use):
            if len(names) > cap:
                yield Violation("capacity", f"unit {unit} at steady-state cycle {r}: {', '.join(names)} "
                                            f"exceed its capacity {cap}")


def check_roles(s: Schedule, p: Problem):
    if s.stage != "joint":
        return
    lim = p.limits
    roles = {r.name: r for r in s.roles}
    for o in s.ops:
        role = roles.get(o.role)
        if role is None:
            yield Violation("roles", f"op '{o.name}' has no role")
            continue
        if o.name not in role.ops:
            yield Violation("roles", f"op '{o.name}' is not listed in role {role.name}")
        if o.issue == "warp_group" and role.warps < lim.warp_group:
            yield Violation("roles", f"op '{o.name}' is issued by a warpgroup but role {role.name} has "
                                     f"{role.warps} warp(s)")
    role_of = {o.name: o.role for o in s.ops}
    groups = [g for g in p.option("groups", ()) if g]  # --group pins
    for g in groups:
        if len({role_of[v] for v in g}) > 1:
            yield Violation("roles", f"group {', '.join(g)} is pinned to one role but runs on "
                                     f"{', '.join(sorted({str(role_of[v]) for v in g}))}")
    firsts = [role_of[g[0]] for g in groups]
    if len(set(firsts)) < len(firsts):
        yield Violation("roles", "two pinned groups share a role")
    _, packed = launched_warpgroups(lim, [r.warps for r in s.roles])
    total = sum(r.warps for r in s.roles if r.warps >= lim.warp_group) + lim.warp_group * packed
    if total > lim.warps:
        yield Violation("roles", f"roles launch {total} warps (one-warp roles fill whole warpgroups), "
                                 f"more than the {lim.warps} allowed")
    for r in s.roles:
        if r.warps not in (1, lim.warp_group):
            yield Violation("roles", f"role {r.name} has {r.warps} warps (a warp or a warpgroup)")


def check_variable_latency(s: Schedule, p: Problem):
    if s.stage != "joint":
        return
    for r in s.roles:
        kinds = {p.task[n].variable_latency for n in r.ops if n in p.task}
        if len(kinds) > 1:
            yield Violation("variable_latency", f"role {r.name} mixes variable-latency ops with others")


def check_registers(s: Schedule, p: Problem):
    if s.stage != "joint":
        return
    lim = p.limits
    for r in s.roles:
        if not budget_ok(lim, r.registers):
            yield Violation("registers", f"role {r.name}: budget {r.registers} is not a multiple of "
                                         f"{lim.register_granule} in [{lim.min_registers}, {lim.registers_per_thread}]")
        use = role_register_use(s, p, r)
        t = use.first_over(r.registers, held=True)  # (a role holding nothing needs only the machine's minimum)
        if t is not None:
            used, names = use[t]
            yield Violation("registers", f"role {r.name} at steady-state cycle {t}: {', '.join(names)} "
                                         f"need {used} registers per thread, budget {r.registers}")
    used, pool = register_file(lim, [(r.warps, r.registers) for r in s.roles])
    if used > pool:
        yield Violation("registers", f"register budgets take {used} registers (one-warp roles fill whole "
                                     f"warpgroups), more than the {pool} the CTA is launched with")


def check_memory(s: Schedule, p: Problem):
    if s.stage != "joint":
        return
    for space, limit in (("smem", p.limits.smem_bytes), ("tmem", p.limits.tmem_bytes)):
        use = memory_use(s, p, space)
        t = use.first_over(limit)
        if t is not None:
            used, names = use[t]
            yield Violation("memory", f"@{space} at steady-state cycle {t}: {', '.join(names)} need "
                                      f"{used} bytes, more than {limit}")


def check_cross_role(s: Schedule, p: Problem):
    if s.stage != "joint":
        return
    declared = {tuple(e) for e in s.cross_role_edges}
    actual = {(d.src, d.dst) for d in p.deps if _cross(s, d.src, d.dst)}
    for e in sorted(actual - declared):
        yield Violation("cross_role", f"edge {e[0]} -> {e[1]} crosses roles but is not listed")
    for src, dst in sorted(actual & set(p.option("pinned", ()))):
        yield Violation("cross_role", f"edge {src} -> {dst} hands a register tile to another role that "
                                      "reads it from registers, which this machine's tile_handoff forbids")
    if not p.option("cross_role", True):  # solved with cross-role communication forbidden
        for src, dst in sorted(actual):
            if not p.task[src].variable_latency:
                yield Violation("cross_role", f"edge {src} -> {dst} crosses roles, which the solve forbade "
                                              f"(--no-cross-role)")


def check_blocking(s: Schedule, p: Problem):
    """A blocking op does not start while another op of its role is in progress: u is in progress
    at t when some instance of u started strictly before t and is still busy at t."""
    if s.stage != "joint":
        return
    from .liveness import blocking_ops, busy
    ii = s.ii
    ops = s.by_name
    for v in sorted(blocking_ops(s, p)):
        t = ops[v].start
        for o in s.ops:
            if o.name == v or o.role != ops[v].role:
                continue
            b = busy(p.task[o.name])
            # offsets t - (start(u) + k*I) for the instances of u that started before t
            first = (t - o.start) % ii or ii
            if first < b:
                yield Violation("blocking", f"{v} waits on a barrier at steady-state cycle {t % ii} while "
                                            f"{o.name} (same role {o.role}) is in progress")


FAMILIES = {
    "uniqueness/consistency": check_ops,
    "buffers": check_buffers,
    "completion": check_completion,
    "dependence": check_dependence,
    "capacity": check_capacity,
    "roles": check_roles,
    "variable_latency": check_variable_latency,
    "registers": check_registers,
    "memory": check_memory,
    "cross_role": check_cross_role,
    "blocking": check_blocking,
}


def verify(schedule: Schedule, graph: Graph, machine: Machine) -> list[Violation]:
    if schedule.kernel != graph.kernel:
        return [Violation("uniqueness", f"the schedule is of kernel '{schedule.kernel}', the graph is "
                                        f"'{graph.kernel}'")]
    try:
        p = _problem(schedule, graph, machine)
    except ScaleMismatch as exc:  # another graph's schedule, or an edited 'scale'
        return [Violation("uniqueness", f"the schedule does not fit this graph: {exc}")]
    out: list[Violation] = []
    for family in FAMILIES.values():
        out.extend(family(schedule, p))
        if any(v.family == "uniqueness" for v in out):  # the other families need each op placed once
            return out
    return out


def check(schedule: Schedule, graph: Graph, machine: Machine) -> None:
    bad = verify(schedule, graph, machine)
    if bad:
        raise VerificationError(*(f"schedule fails verification: {v}" for v in bad))
