"""Bind a graph to a machine: each op's unit, latency and occupancy in machine cycles.

This is where an opcode meets the machine description. Per-op attributes in the `.tir` file
override the description's fields. An op the description does not know must carry `cycles` and
`unit` itself; otherwise it is a located error.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import ErrorCollector, did_you_mean
from .expr import ExprError, parse_expr
from . import vocab
from .ir import DTYPE_BITS, Graph, Op
from .machine import ISSUE_KINDS, Machine, OpSpec


@dataclass(frozen=True)
class OpCost:
    name: str
    opcode: str
    unit: str
    cycles: float  # latency: when the result is ready
    occupancy: float  # how long the unit stays busy
    issue: str
    is_async: bool
    variable_latency: bool
    streaming: bool  # variable latency and no in-loop inputs: counted as zero latency
    space: str  # where the result lives
    bytes: int  # size of the result
    reads_tmem: bool  # reads a @tmem operand (into registers unless it is an mma)
    depth: int  # ring-buffer depth of a streaming load
    # (min, typical, max) machine cycles where the description gives a latency interval (and the
    # op does not override its cycles); a streaming load keeps it though its cycles count as 0
    latency_range: tuple[float, float, float] | None = None
    # machine cycles an async op keeps its issuing role busy where the description gives `hold`
    # (0: one issue cycle); a sync op keeps it busy for its latency
    hold: float = 0.0


def shape_env(graph: Graph, op: Op) -> dict[str, float]:
    """The names a cycle expression may use, derived from the op's result and operand types.

    `elements` counts the largest tile the op touches (a row reduction works on its input, not
    its result); `bytes` is the result's size (the largest operand's for an op without result);
    M and N are the result's last two dimensions and K the first operand's other dimension.
    `bits` is the operand width: of an mma, its first operand's dtype (a: the tensor core's rate
    follows its input kind, not the accumulator's); of any other op, the widest dtype it touches.
    """
    types = [t for t in (graph.operand_type(o) for o in op.operands) if t is not None]
    env = {"elements": 0.0, "bytes": 0.0, "M": 1.0, "N": 1.0, "K": 1.0, "bits": 0.0}
    tiles = types + ([op.type] if op.type else [])
    if tiles:
        env["elements"] = float(max(t.elements for t in tiles))
        env["bytes"] = float(op.type.bytes if op.type else max(t.bytes for t in types))
        a = graph.operand_type(op.operands[0]) if op.operands else None
        mma = a is not None and (d := vocab.lookup(op.opcode)) is not None and d.family == "mma"
        env["bits"] = float(DTYPE_BITS[a.dtype] if mma else max(DTYPE_BITS[t.dtype] for t in tiles))
    main = op.type or (types[0] if types else None)
    if main is not None and main.shape:
        env["M"] = float(main.shape[-2]) if len(main.shape) >= 2 else 1.0
        env["N"] = float(main.shape[-1])
    if types and types[0].shape:
        # K is the first operand's dimension that is not M: its last one, unless the operand is
        # used transposed ([K, M], as P^T in dV = P^T dO), when its last dimension is M.
        a = types[0].shape
        transposed = len(a) >= 2 and a[-1] == env["M"] and a[-2] != env["M"]
        env["K"] = float(a[-2] if transposed else a[-1])
    return env


def mma_mismatch(graph: Graph, op: Op) -> str | None:
    """Why the rank-2 operands of an mma cannot multiply into its result (None when they can):
    the table's one shape rule (twill.vocab), for costing and for emit-cuda (a schedule's graph)."""
    return vocab.mma_mismatch(op.type, [graph.operand_type(o) for o in op.operands[:2]])


def op_spec(graph: Graph, op: Op, machine: Machine) -> OpSpec | None:
    """The machine file's entry for the op's opcode; else, for a table opcode (twill.vocab) whose
    rate class the machine gives, the generic one: its default unit, issue and async, and
    ``elements * w / rate`` cycles (w = 2 for 64-bit data); else None."""
    spec = machine.op_specs.get(op.opcode)
    d = vocab.lookup(op.opcode)
    if spec is not None or d is None:
        return spec
    types = [t for t in (graph.operand_type(o) for o in op.operands) if t is not None] + ([op.type] if op.type else [])
    if not types:
        return None
    elements = max(t.elements for t in types)
    bits = max(DTYPE_BITS[t.dtype] for t in types)
    cycles = vocab.generic_cycles(op.opcode, elements, bits, machine.rate_of)
    if cycles is None:
        return None
    return OpSpec(unit=d.unit, cycles=parse_expr(cycles), issue=d.issue, is_async=d.is_async,
                  variable_latency=d.variable_latency)


def _in_loop_inputs(graph: Graph, op: Op) -> bool:
    return any(o.name in graph.by_name or (o.name in graph.values and graph.values[o.name].kind == "carry")
               for o in op.operands)


def _latency_interval(op, spec, attrs: dict, env) -> tuple[tuple[float, float, float] | None, str | None]:
    """The op's (min, typical, max) latency where its spec gives one (and no `cycles` attribute
    overrides it), or why it cannot be had: (interval or None, error message or None)."""
    if spec.latency is None or "cycles" in attrs:
        return None, None
    try:
        interval = tuple(b(env) for b in spec.latency)
    except (ExprError, ZeroDivisionError) as exc:
        return None, f"op '{op.name}': cannot evaluate its latency interval: {exc}"
    if not interval[0] <= interval[1] <= interval[2]:
        return None, (f"op '{op.name}': its latency interval comes to min {interval[0]:g}, typical "
                      f"{interval[1]:g}, max {interval[2]:g}: not min <= typical <= max")
    return interval, None


def _hold(op, spec, attrs: dict, env) -> tuple[float, str | None]:
    """How long the op keeps its issuing role busy, in machine cycles, where its spec gives `hold`
    (or the op a `hold` attribute): the expression's value, at most the op's occupancy of its unit
    (a role cannot be held by an instruction its unit has already taken); else 0."""
    if "hold" in attrs:
        return max(float(attrs["hold"]), 0.0), None
    if spec.hold is None:
        return 0.0, None
    try:
        value = spec.hold(env)
        busy = float(attrs["occupancy"]) if "occupancy" in attrs else (
            spec.occupancy(env) if spec.occupancy is not None else spec.cycles(env))
    except (ExprError, ZeroDivisionError) as exc:
        return 0.0, f"op '{op.name}': cannot evaluate its hold: {exc}"
    return max(min(value, busy), 0.0), None


def _unrated_mma(graph: Graph, op: Op, spec: OpSpec, attrs: dict, env, machine: Machine) -> str | None:
    """Why the machine has no cost for an mma of operands other than 16-bit (None where it has): its
    ops.mma.cycles reads the shapes (M, N, K) but not `bits`, so it is the rate of one operand width (an
    f16 mma's), which would cost an f32 (TF32: half the f16 rate per FLOP on H100, H200 and B200) or 8-bit
    one (twice) as f16. A constant, or the op's own `cycles`, is taken as given."""
    d = vocab.lookup(op.opcode)
    if d is None or d.family != "mma" or "cycles" in attrs or env["bits"] in (0.0, 16.0):
        return None
    names = spec.cycles.names
    if "bits" in names or not names & {"M", "N", "K", "elements", "bytes"}:
        return None
    dtype = graph.operand_type(op.operands[0]).dtype
    what = " (TF32 on the tensor core)" if dtype == "f32" else ""
    return (f"op '{op.name}' multiplies {dtype} operands{what}, and machine '{machine.name}' costs an mma from its "
            f"shapes alone (ops.mma.cycles = {spec.cycles}, which does not read `bits`): it has no cost for "
            f"{int(env['bits'])}-bit operands")


def bind(graph: Graph, machine: Machine) -> tuple[OpCost, ...]:
    errors = ErrorCollector()
    specs, caps = machine.op_specs, machine.unit_caps
    out = []
    for op in graph.ops:
        spec = op_spec(graph, op, machine)
        attrs = dict(op.attrs)
        if spec is None and not {"cycles", "unit"} <= attrs.keys():
            d = vocab.lookup(op.opcode)
            hint = (f"'{op.opcode}' costs elements / rates.{d.cost}: give the machine file a "
                    f"'rates: {{{d.cost}: N}}' entry, describe it in 'ops', or give it {{cycles = N, unit = NAME}}"
                    if d is not None and d.cost else did_you_mean(op.opcode, specs) or
                    "describe it in the machine file's 'ops', or give it {cycles = N, unit = NAME} attributes")
            errors.error(f"unknown opcode '{op.opcode}' for machine '{machine.name}'", op.span, hint)
            continue
        spec = spec or OpSpec(unit=str(attrs["unit"]), cycles=parse_expr(0))
        unit = str(attrs.get("unit", spec.unit))
        if unit not in caps:
            errors.error(f"op '{op.name}' uses unit '{unit}', which machine '{machine.name}' does not have "
                         f"(units: {', '.join(caps)})", op.span)
            continue
        issue = str(attrs.get("issue", spec.issue))
        if issue not in ISSUE_KINDS:
            errors.error(f"op '{op.name}': issue must be one of {', '.join(ISSUE_KINDS)}", op.span)
            continue
        env = shape_env(graph, op)
        if (d := vocab.lookup(op.opcode)) is not None and d.family == "mma" and (why := mma_mismatch(graph, op)):
            errors.error(f"op '{op.name}': the shapes of this mma do not agree: {why}", op.span,
                         "an mma takes a [M, K] (or [K, M]), b [K, N] (or [N, K]) and gives [M, N]")
            continue
        if (why := _unrated_mma(graph, op, spec, attrs, env, machine)) is not None:
            errors.error(why, op.span, f"write ops.mma.cycles in {machine.file} with `bits`, the operand width "
                         "(specs/h100.yaml: 2*M*N*K*bits/16 / 4096: 8-bit operands at twice the f16 rate, f32 ones "
                         "as TF32 at half), or give the op {cycles = N}")
            continue
        try:
            cycles = float(attrs["cycles"]) if "cycles" in attrs else spec.cycles(env)
            occupancy = (float(attrs["occupancy"]) if "occupancy" in attrs
                         else spec.occupancy(env) if spec.occupancy is not None else cycles)
        except (ExprError, ZeroDivisionError) as exc:
            errors.error(f"op '{op.name}': cannot evaluate its cycles: {exc}", op.span,
                         f"see ops.{op.opcode} in {machine.file}" if op.opcode in specs else None)
            continue
        if cycles < 0 or occupancy < 0:
            key = "cycles" if cycles < 0 else "occupancy"
            errors.error(f"op '{op.name}': its {key} {'come' if key == 'cycles' else 'comes'} to {min(cycles, occupancy):g}, less than 0", op.span,
                         f"ops.{op.opcode}.{key} in {machine.file} must not be negative for this op's shapes")
            continue
        hold, why = _hold(op, spec, attrs, env)
        if why is not None:
            errors.error(why, op.span, f"see ops.{op.opcode}.hold in {machine.file}")
            continue
        interval, why = _latency_interval(op, spec, attrs, env)
        if why is not None:
            errors.error(why, op.span, f"see ops.{op.opcode}.latency in {machine.file}")
            continue
        variable = bool(attrs.get("variable_latency", spec.variable_latency))
        streaming = variable and not _in_loop_inputs(graph, op)
        if streaming:
            cycles = 0.0
        reads_tmem = any((t := graph.operand_type(o)) is not None and t.space == "tmem" for o in op.operands)
        out.append(OpCost(
            name=op.name, opcode=op.opcode, unit=unit, cycles=max(cycles, 0.0), occupancy=max(occupancy, 0.0),
            issue=issue, is_async=bool(attrs.get("async", spec.is_async)), variable_latency=variable,
            streaming=streaming, space=op.type.space if op.type else "reg",
            bytes=op.type.footprint if op.type else 0, reads_tmem=reads_tmem,
            depth=int(attrs.get("depth", machine.streaming_depth)), latency_range=interval,
            hold=hold if bool(attrs.get("async", spec.is_async)) else 0.0,
        ))
    errors.raise_if_any()
    return tuple(out)

