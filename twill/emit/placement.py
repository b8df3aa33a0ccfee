"""The warp roles of an emitted kernel and where their warps sit: the schedule's roles (or, for a
`--swp-only` schedule, a default warp specialization: a producer warp for the loads, one consumer
role for everything else), 1-warp roles four to a padded warpgroup (`setmaxnreg` acts on a whole
warpgroup), and each warpgroup's register budget fitted to what the CTA is launched with."""
from __future__ import annotations

import math

from ..ir import Graph
from ..machine import Machine
from ..registers import default_budget, fit_warpgroups, producer_budget, register_pool
from ..schedule import Schedule
from .model import LOAD_OPCODES, EmitError, MmaShape, RoleInfo, WarpGroup
from .target import Target


def _roles(schedule: Schedule, graph: Graph, machine: Machine, target: Target,
           mma: dict[str, MmaShape]) -> tuple[tuple[RoleInfo, ...], bool]:
    if schedule.roles:
        roles = tuple(RoleInfo(r.name, r.warps, r.registers, tuple(r.ops)) for r in schedule.roles)
        placed = [op for r in roles for op in r.ops]
        unplaced = [op.name for op in graph.ops if op.name not in placed]
        if unplaced:
            raise EmitError(f"op(s) {', '.join(unplaced)} belong to no role of the schedule")
        for r in roles:
            if r.warps != 1 and r.warps % 4:
                raise EmitError(f"role '{r.name}' has {r.warps} warps: a role is one warp or whole warpgroups")
            for op in r.ops:
                if graph.by_name[op].opcode == "mma" and target.mma_warpgroup and not r.is_warpgroup:
                    raise EmitError(f"op '{op}' is a wgmma but role '{r.name}' is not a warpgroup")
        return _reads_out_tmem(roles, graph, target), False
    return _default_roles(schedule, graph, machine, target, mma), True


def _reads_out_tmem(roles: tuple[RoleInfo, ...], graph: Graph, target: Target) -> tuple[RoleInfo, ...]:
    """On sm_100a an accumulator carried in tensor memory is read out after the loop by a whole
    warpgroup (tcgen05.ld: each warp reads its own quarter of the 128 lanes). Where the schedule
    has only 1-warp roles (a one-warp MMA role and a load warp), the role whose mma yields that
    carry is emitted as a warpgroup: its first thread still issues the MMAs."""
    if not target.tensor_memory or any(r.is_warpgroup for r in roles):
        return roles
    yielded = {src for _, src in graph.yields}
    holder = next((r.name for r in roles for op in r.ops
                   if op in yielded and graph.by_name[op].opcode == "mma"), None)
    return tuple(RoleInfo(r.name, 4, r.registers, r.ops) if r.name == holder else r for r in roles)


def _default_roles(schedule: Schedule, graph: Graph, machine: Machine, target: Target,
                   mma: dict[str, MmaShape]) -> tuple[RoleInfo, ...]:
    """Warp specialization for a schedule without roles: loads on a producer warp, the rest on one
    consumer role of as many warpgroups as its register tiles need (each takes a slice of rows)."""
    limits = machine.limits
    loads = tuple(op.name for op in graph.ops if op.opcode in LOAD_OPCODES)
    rest = tuple(op.name for op in graph.ops if op.opcode not in LOAD_OPCODES)
    roles = []
    if loads:
        roles.append(RoleInfo("producer", 1, producer_budget(limits), loads))
    if rest:
        need = _register_estimate(graph, rest, limits.register_reserve)
        groups = 1
        rows = _common_rows(graph, rest)
        while (target.register_fragments and need / groups > 224 and rows % (64 * (groups + 1)) == 0
               and 4 * (groups + 1) + (4 if loads else 0) <= max(limits.warps, 4)):
            groups += 1
        roles.append(RoleInfo("consumer", 4 * groups, default_budget(limits, groups, bool(loads)), rest))
    return tuple(roles)


def _common_rows(graph: Graph, ops: tuple[str, ...]) -> int:
    rows = [graph.by_name[o].type.shape[0] for o in ops
            if graph.by_name[o].type is not None and graph.by_name[o].type.space == "reg"]
    return math.gcd(*rows) if rows else 64


def _register_estimate(graph: Graph, ops: tuple[str, ...], reserve: int) -> float:
    """Registers per thread of one warpgroup holding every register result of `ops` at once."""
    total = sum(graph.by_name[o].type.bytes for o in ops
                if graph.by_name[o].type is not None and graph.by_name[o].type.space == "reg")
    return total / (128 * 4) + reserve


def _place(roles: tuple[RoleInfo, ...], machine: Machine,
           target: Target) -> tuple[tuple[RoleInfo, ...], tuple[WarpGroup, ...]]:
    """1-warp roles first, four to a warpgroup; then each warpgroup role on its own warpgroups."""
    small = [r for r in roles if not r.is_warpgroup]
    big = [r for r in roles if r.is_warpgroup]
    placed: list[RoleInfo] = []
    groups: list[WarpGroup] = []
    for g in range(0, len(small), 4):
        members = small[g:g + 4]
        for i, r in enumerate(members):
            placed.append(RoleInfo(r.name, r.warps, r.registers, r.ops, first_warp=4 * len(groups) + i))
        groups.append(WarpGroup(len(groups), tuple(r.name for r in members), max(r.registers for r in members),
                                small=True))
    for r in big:
        placed.append(RoleInfo(r.name, r.warps, r.registers, r.ops, first_warp=4 * len(groups)))
        for _ in range(r.warpgroups):
            groups.append(WarpGroup(len(groups), (r.name,), r.registers))
    order = {r.name: i for i, r in enumerate(roles)}
    placed.sort(key=lambda r: order[r.name])
    groups = _fit_registers(groups, machine)
    if 128 * len(groups) > target.max_threads:
        raise EmitError(f"the roles need {len(groups)} warpgroups ({128 * len(groups)} threads): more than a CTA holds")
    return tuple(placed), tuple(groups)


def _fit_registers(groups: list[WarpGroup], machine: Machine) -> list[WarpGroup]:
    """setmaxnreg moves registers between the warpgroups of a CTA but never beyond what the CTA
    was launched with: a warpgroup asking for more than the others gave back blocks forever. So
    budgets are fitted to that pool (twill/registers.py, `fit_warpgroups`); the file says so."""
    lim = machine.limits
    small = [i for i, g in enumerate(groups) if len(g.roles) > 1 or _is_small(g)]
    budgets = fit_warpgroups(lim, [g.registers for g in groups], small)
    if budgets is None:
        pool = register_pool(lim, len(groups))
        raise EmitError(f"the warpgroups' register budgets ({', '.join(str(g.registers) for g in groups)}) "
                        f"cannot fit the {pool} registers a CTA of {128 * len(groups)} threads is launched with")
    return [WarpGroup(g.index, g.roles, b, g.small) for g, b in zip(groups, budgets)]


def _is_small(g: WarpGroup) -> bool:
    return g.small
