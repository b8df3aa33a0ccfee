"""The scheduling problem every solver stage reads: integer costs, dependences, capacities.

A `Problem` is built from a bound graph (`costs.bind`) and the normalization map of stage 0.
It is immutable and holds no solver objects; stages are pure functions of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from .costs import OpCost
from .ir import Graph
from .machine import Limits, Machine


@dataclass(frozen=True)
class Task:
    """One op as the solver sees it: integer latency and occupancy in normalized units."""

    name: str
    opcode: str
    unit: str
    cycles: int
    occupancy: int
    issue: str
    is_async: bool
    variable_latency: bool
    streaming: bool
    space: str
    bytes: int
    reads_tmem: bool
    depth: int
    machine_cycles: float


@dataclass(frozen=True)
class Dep:
    """`dst` of iteration i + distance waits `latency` after `src` of iteration i starts."""

    src: str
    dst: str
    distance: int
    latency: int
    operand: int = 0  # which operand of dst it feeds (an mma's accumulator is operand 2)


@dataclass(frozen=True)
class Problem:
    kernel: str
    machine: str
    tasks: tuple[Task, ...]
    deps: tuple[Dep, ...]
    caps: tuple[tuple[str, int], ...]
    cross: int  # normalized cross-role delay
    limits: Limits
    invariant_bytes: tuple[tuple[str, int], ...] = ()  # loop-invariant inputs per memory space
    # loop-invariant inputs held in registers: (name, bytes, the ops that read it); each role
    # that reads one holds it for the whole loop
    register_inputs: tuple[tuple[str, int, tuple[str, ...]], ...] = ()
    options: tuple[tuple[str, object], ...] = field(default=())

    @cached_property
    def index(self) -> dict[str, int]:
        return {t.name: i for i, t in enumerate(self.tasks)}

    @cached_property
    def task(self) -> dict[str, Task]:
        return {t.name: t for t in self.tasks}

    @property
    def cap(self) -> dict[str, int]:
        return dict(self.caps)

    def option(self, key: str, default=None):
        return dict(self.options).get(key, default)


def make_problem(graph: Graph, machine: Machine, costs: tuple[OpCost, ...], scale: dict[float, int],
                 options: dict | None = None) -> Problem:
    """Apply the normalization map `scale` (machine cycles -> units) to the bound costs."""
    def units(c: float) -> int:
        return 0 if c <= 0 else scale[c]

    tasks = tuple(
        Task(c.name, c.opcode, c.unit, units(c.cycles), units(c.occupancy), c.issue, c.is_async,
             c.variable_latency, c.streaming, c.space, c.bytes, c.reads_tmem, c.depth, c.cycles)
        for c in costs
    )
    lat = {t.name: t.cycles for t in tasks}
    deps = tuple(Dep(e.src, e.dst, e.distance, lat[e.src], e.operand) for e in graph.edges)
    invariant: dict[str, int] = {}
    register_inputs = []
    for v in graph.inputs:
        invariant[v.type.space] = invariant.get(v.type.space, 0) + v.type.footprint
        readers = tuple(op.name for op in graph.ops if any(o.name == v.name for o in op.operands))
        if v.type.space == "reg" and readers:
            register_inputs.append((v.name, v.type.footprint, readers))
    return Problem(
        kernel=graph.kernel, machine=machine.name, tasks=tasks, deps=deps, caps=machine.units,
        cross=units(machine.cross_warp_cycles), limits=machine.limits,
        invariant_bytes=tuple(sorted(invariant.items())), register_inputs=tuple(register_inputs),
        options=tuple(sorted((options or {}).items())),
    )


def distinct_costs(costs: tuple[OpCost, ...], machine: Machine) -> tuple[float, ...]:
    """The positive cycle counts stage 0 normalizes: latencies, occupancies, the cross-role delay."""
    values = {c.cycles for c in costs} | {c.occupancy for c in costs} | {machine.cross_warp_cycles}
    return tuple(sorted(v for v in values if v > 0))
