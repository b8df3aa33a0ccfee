"""The scheduling problem every solver stage reads: integer costs, dependences, capacities.

A `Problem` is built from a bound graph (`costs.bind`) and the normalization map of stage 0.
It is immutable and holds no solver objects; stages are pure functions of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from .costs import OpCost, bind
from .errors import Diagnostic, ErrorCollector, InputError, did_you_mean
from .ir import Graph
from .machine import Limits, Machine
from .options import ModelOptions


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
    hold: int = 0  # normalized cycles an async op keeps its role busy (0: one issue cycle)
    # bytes of the register file the result takes on a warpgroup that holds it in registers: a
    # vector's fragment replicates it (registers.register_bytes); 0: `bytes`
    reg_bytes: int = 0
    # registers per thread its role keeps for the op's temporaries while it runs (liveness.scratch)
    scratch: int = 0
    # the ops whose @tmem result this op reads elementwise: a tile of its own result's shape (liveness.in_place_read)
    tmem_elementwise: tuple[str, ...] = ()

    @property
    def register_bytes(self) -> int:
        return self.reg_bytes or self.bytes


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

    from .registers import register_bytes
    types = {op.name: op.type for op in graph.ops}
    reads = {op.name: [o for o in op.operands] for op in graph.ops}
    known = {v.name: v.type for v in list(graph.inputs) + list(graph.carries)} | types

    def tile(t) -> bool:  # a 2-d register tile, or one read out of tensor memory into registers
        return t is not None and t.space in ("reg", "tmem") and len(t.shape) == 2 and min(t.shape) > 1

    def scratch(c: OpCost) -> int:
        from .vocab import lookup
        d = lookup(c.opcode)
        own = d.scratch if d is not None else 0  # an op's own temporaries (rand's Philox state), on any machine
        if machine.limits.register_scratch == 0 or (d is not None and d.tensor_core) or c.streaming:
            return own
        ins = [known.get(o.name) for o in reads.get(c.name, ())]
        return max(own, machine.limits.register_scratch if tile(types.get(c.name)) or any(tile(t) for t in ins) else 0)

    def held(c: OpCost) -> int:
        t = types.get(c.name)
        return register_bytes(machine.arch, t.shape, c.bytes, machine.limits.warp_group) if t is not None and c.space == "reg" else 0

    def tmem_elementwise(c: OpCost) -> tuple[str, ...]:
        t = types.get(c.name)
        if t is None or c.space != "reg":
            return ()
        return tuple(dict.fromkeys(e.src for e in graph.edges if e.dst == c.name and types.get(e.src) is not None
                                   and types[e.src].space == "tmem" and types[e.src].shape == t.shape))

    tasks = tuple(
        Task(c.name, c.opcode, c.unit, units(c.cycles), units(c.occupancy), c.issue, c.is_async,
             c.variable_latency, c.streaming, c.space, c.bytes, c.reads_tmem, c.depth, c.cycles,
             units(c.hold), held(c) if held(c) != c.bytes else 0, scratch(c), tmem_elementwise(c))
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
            register_inputs.append((v.name, register_bytes(machine.arch, v.type.shape, v.type.footprint,
                                                           machine.limits.warp_group), readers))
    for i, (ops, regs, warps) in enumerate(dict(options or {}).get("role_reserve", ())):
        # registers ptxas found on a role that the model does not see: held by any role of these ops
        register_inputs.append((f"<ptxas reserve {i}>", regs * 4 * 32 * warps, tuple(ops)))
    return Problem(
        kernel=graph.kernel, machine=machine.name, tasks=tasks, deps=deps, caps=machine.units,
        cross=units(machine.cross_warp_cycles), limits=machine.limits,
        invariant_bytes=tuple(sorted(invariant.items())), register_inputs=tuple(register_inputs),
        options=tuple(sorted((options or {}).items())),
    )


def distinct_costs(costs: tuple[OpCost, ...], machine: Machine) -> tuple[float, ...]:
    """The positive cycle counts stage 0 normalizes: latencies, occupancies, the cross-role delay."""
    values = ({c.cycles for c in costs} | {c.occupancy for c in costs} | {c.hold for c in costs}
              | {machine.cross_warp_cycles})
    return tuple(sorted(v for v in values if v > 0))


# Sizes no GPU tile loop comes near, past which the solvers' time and memory grow without bound:
# each is an error at the line that exceeds it, naming the limit.
SIZE_LIMITS = {
    "ops": 256,  # operations in the loop body (pairwise resource constraints grow with its square)
    "distance": 1024,  # iterations a dependence reaches back (NAME@D)
    "cycles": 1e9,  # machine cycles of one op's latency or occupancy (half a second at 2 GHz)
}


def check_size(graph: Graph, costs: tuple[OpCost, ...] = ()) -> None:
    """The graph (and, once bound, its costs) within `SIZE_LIMITS`."""
    errors = ErrorCollector()
    if len(graph.ops) > SIZE_LIMITS["ops"]:
        op = graph.ops[SIZE_LIMITS["ops"]]
        errors.error(f"the loop has {len(graph.ops)} operations, more than the limit of {SIZE_LIMITS['ops']} "
                     "(SIZE_LIMITS['ops']): no GPU tile loop needs so many", op.span,
                     "split the loop, or schedule a smaller tile")
    for op in graph.ops:
        for operand in op.operands:
            if operand.distance is not None and operand.distance > SIZE_LIMITS["distance"]:
                errors.error(f"iteration distance {operand.distance} exceeds the limit of "
                             f"{SIZE_LIMITS['distance']} (SIZE_LIMITS['distance'])", operand.span or op.span)
    spans = {op.name: op.span for op in graph.ops}
    for c in costs:
        for what, value in (("cycles", c.cycles), ("occupancy", c.occupancy)):
            if not value <= SIZE_LIMITS["cycles"]:  # (nan too)
                errors.error(f"op '{c.name}' has {what} {value:g}, more than the limit of "
                             f"{SIZE_LIMITS['cycles']:g} machine cycles (SIZE_LIMITS['cycles'])", spans.get(c.name))
                break
    errors.raise_if_any()


def check_groups(graph: Graph, groups: tuple[tuple[str, ...], ...]) -> None:
    """--group names ops of the graph, each at most once."""
    names = {op.name for op in graph.ops}
    seen: set[str] = set()
    for g in groups:
        for name in g:
            if name not in names:
                raise InputError(Diagnostic(f"--group names '{name}', which is not an op of kernel "
                                            f"'{graph.kernel}'", None,
                                            did_you_mean(name, sorted(names)) or f"its ops: {', '.join(sorted(names))}"))
            if name in seen:
                raise InputError(Diagnostic(f"--group names op '{name}' twice: each op is in at most one group",
                                            None, None))
            seen.add(name)


def pinned_edges(graph: Graph) -> tuple[tuple[str, str], ...]:
    """The edges whose ops must share a role on a machine without `communication.tile_handoff`: a
    2-d register tile computed in the loop (not a load's, nor one in tensor memory) that its reader
    would take from registers. Handed to another warpgroup, such a tile goes through shared memory,
    a store and a load of every element, which the model's cross-role delay does not price: on an
    H100 the held-out D = 64 attentions whose exp2 ran on its own warpgroup (the scores handed over
    each iteration) took 2.3x Triton's kernel time, their single-warpgroup schedule 1.0x
    (docs/model-fidelity.md). Not pinned: a row vector (a max, a sum), and a tile an mma reads from
    shared memory in any case (its b, or an a stored K x M: the backward's P^T and dS^T)."""
    ops = {op.name: op for op in graph.ops}
    out = []
    for e in graph.edges:
        src, dst = ops.get(e.src), ops.get(e.dst)
        t = src.type if src is not None else None
        if (src is None or dst is None or t is None or src.opcode == "load" or t.space != "reg"
                or len(t.shape) != 2 or min(t.shape) <= 1 or (dst.opcode == "mma" and _from_smem(dst, e.operand, t))):
            continue
        out.append((e.src, e.dst))
    return tuple(dict.fromkeys(out))


def pinned_for(graph: Graph, machine: Machine, options: ModelOptions) -> tuple[tuple[str, str], ...]:
    """`pinned_edges` where the solve keeps register tiles on their roles: `options.tile_handoff`, or
    where that is None, the machine's `communication.tile_handoff`, is false; () otherwise."""
    handoff = machine.tile_handoff if options.tile_handoff is None else options.tile_handoff
    return () if handoff else pinned_edges(graph)


def _from_smem(mma, operand: int, t) -> bool:
    """Does `mma` read its operand `operand` (of type t) from shared memory whichever role made it?
    b always (wgmma, tcgen05); a where it is stored K x M (its rows are not the result's)."""
    if operand == 1:
        return True
    if operand != 0 or mma.type is None:
        return False
    said = mma.attr("transpose_a")
    return bool(said) if said is not None and t.shape[0] == t.shape[1] else t.shape[0] != mma.type.shape[0]


class ScaleMismatch(Exception):
    """A normalization map (a schedule's own) lacks a cost the graph on this machine has."""


def problem_for(graph: Graph, machine: Machine, options: ModelOptions, scale: dict[float, int] | None = None,
                deadline: float | None = None):
    """The one model of (graph, machine, options), shared by the pipeline, verify and explain.

    With `scale` (a schedule's recorded map) no normalization is solved, and a cost the map lacks
    raises ScaleMismatch; otherwise stage 0 (SCIP) runs, within `deadline` (time.monotonic()).
    Returns (Problem, Normalization or None)."""
    from .normalize import normalize

    check_size(graph)
    check_groups(graph, options.groups)
    machine = machine.restricted(options.warps, options.registers, options.depth, options.register_reserve)
    if not machine.cross_warp_cycles <= SIZE_LIMITS["cycles"]:
        raise InputError(Diagnostic(f"{machine.file}: 'communication.cross_warp_cycles' is "
                                    f"{machine.cross_warp_cycles:g}, more than the limit of "
                                    f"{SIZE_LIMITS['cycles']:g} machine cycles (SIZE_LIMITS['cycles'])"))
    costs = bind(graph, machine)
    check_size(graph, costs)
    norm = None
    if scale is None:
        norm = normalize(distinct_costs(costs, machine), options.normalize_bound, deadline)
        scale = norm.as_dict()
    missing = [c for c in distinct_costs(costs, machine) if c not in scale]
    if missing:
        raise ScaleMismatch(f"its normalization map has no entry for {missing[0]:g} machine cycles")
    pinned = pinned_for(graph, machine, options)
    extra = {"cross_role": options.cross_role, "smt_backend": options.smt_backend, "groups": options.groups,
             **({"role_reserve": options.role_reserve} if options.role_reserve else {}),
             **({"pinned": pinned} if pinned else {})}
    return make_problem(graph, machine, costs, scale, extra), norm
