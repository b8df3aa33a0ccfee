"""The schedule: what `twill solve` finds and what `emit-cuda` and `plot` read.

`Schedule` is frozen and self-contained: it embeds the graph (as `.tir` text) so a schedule file
alone is enough to emit code or draw a chart. `to_json`/`from_json` implement the contract's
`twill-schedule/1` format; field order is fixed so the same schedule gives the same bytes.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace

FORMAT = "twill-schedule/1"


@dataclass(frozen=True)
class ScheduledOp:
    name: str
    opcode: str
    unit: str
    cycles: int  # normalized latency
    occupancy: int  # normalized unit occupancy
    start: int  # start of iteration 0, in normalized units
    role: str | None = None  # warp role (joint stage only)
    issue: str = "warp_group"
    is_async: bool = False
    variable_latency: bool = False
    streaming: bool = False
    machine_cycles: float = 0.0


@dataclass(frozen=True)
class Role:
    """A warp role: `warps` warps (1, or a warpgroup) with a `setmaxnreg` budget per thread."""

    name: str
    warps: int
    registers: int
    ops: tuple[str, ...]


@dataclass(frozen=True)
class Buffer:
    """A streaming load's shared-memory ring buffer: `depth` slots of `bytes` each."""

    value: str
    depth: int
    bytes: int
    space: str = "smem"


@dataclass(frozen=True)
class LatencySlack:
    """An op with a latency interval (machine cycles) and its slack (twill/slack.py): how much
    later than `typical` it may complete before the steady state stalls, in units and machine
    cycles (None: nothing waits for it)."""

    op: str
    min: float
    typical: float
    max: float
    slack: float | None  # units
    slack_cycles: float | None

    @property
    def margin_at_max(self) -> float | None:
        """slack - (max - typical), machine cycles: below 0, the stall when the op takes its max."""
        return None if self.slack_cycles is None else round(self.slack_cycles - (self.max - self.typical), 1)

    def to_dict(self) -> dict:
        return {"op": self.op, "min": self.min, "typical": self.typical, "max": self.max,
                "slack": self.slack, "slack_cycles": self.slack_cycles, "margin_at_max_cycles": self.margin_at_max}


@dataclass(frozen=True)
class Scale:
    """How machine cycles map to the solver's normalized units (stage 0)."""

    map: tuple[tuple[float, int], ...] = ()  # (machine cycles, normalized units)
    distortion: float = 0.0
    unit_cycles: float = 1.0  # machine cycles per normalized unit (least-squares fit)


@dataclass(frozen=True)
class Schedule:
    kernel: str
    machine: str
    arch: str
    stage: str  # "swp" | "joint"
    ii: int
    length: int
    optimal: bool
    ops: tuple[ScheduledOp, ...]
    roles: tuple[Role, ...] = ()
    buffers: tuple[Buffer, ...] = ()
    cross_role_edges: tuple[tuple[str, str], ...] = ()
    scale: Scale = Scale()
    bounds: tuple[tuple[str, int], ...] = ()  # res_mii, rec_mii, swp_ii, swp_length
    graph_tir: str = ""
    length_optimal: bool = True  # L proven minimal at this I (a time limit can leave it unproven)
    # the model options the solve ran under, where not the machine's own: warps, registers
    # (per-thread budget), depth (default ring depth), cross_role (False when forbidden)
    options: tuple[tuple[str, object], ...] = ()
    stats: tuple[tuple[str, float], ...] = field(default=(), compare=False)
    machine_digest: str = ""  # Machine.digest of the description it was solved with ("" if unknown)
    graph_digest: str = ""  # graph_digest(graph_tir) when solved ("" in files older than digests)
    options_digest: str = ""  # ModelOptions.digest() of the options it was solved under ("" likewise)
    complete: bool = True  # every stage ran to its end (False: a time limit cut one short)
    # ops with a latency interval and their slack (derived: twill/slack.py; the file's
    # "latency_slack", written only when there are such ops)
    latency_slack: tuple[LatencySlack, ...] = ()

    # -- derived views ---------------------------------------------------------------------
    @property
    def by_name(self) -> dict[str, ScheduledOp]:
        return {op.name: op for op in self.ops}

    def stage_of(self, op: ScheduledOp) -> int:
        return op.start // self.ii

    @property
    def copies(self) -> int:
        """How many overlapped iterations the unrolled straight-line program holds."""
        return max(1, math.ceil(self.length / self.ii))

    @property
    def program_length(self) -> int:
        return (self.copies - 1) * self.ii + self.length

    @property
    def phases(self) -> dict[str, tuple[int, int]]:
        """Prologue, one steady-state window of `ii` cycles, epilogue (half-open ranges)."""
        c, ii = self.copies, self.ii
        return {
            "prologue": (0, (c - 1) * ii),
            "steady": ((c - 1) * ii, c * ii),
            "epilogue": (c * ii, self.program_length),
        }

    def instances(self) -> list[dict]:
        """Every (op, iteration) of the unrolled program, ordered by start then op order."""
        out = []
        for i in range(self.copies):
            for op in self.ops:
                out.append({"op": op.name, "iteration": i, "start": op.start + i * self.ii,
                            "end": op.start + i * self.ii + max(op.cycles, 1)})
        out.sort(key=lambda d: (d["start"], d["iteration"]))
        return out

    def with_stats(self, **stats: float) -> "Schedule":
        return replace(self, stats=tuple(sorted({**dict(self.stats), **stats}.items())))

    # -- the file format ---------------------------------------------------------------------
    def to_dict(self) -> dict:
        phases = self.phases
        out = {
            "format": FORMAT,
            "kernel": self.kernel,
            "machine": self.machine,
            "machine_digest": self.machine_digest,
            "graph_digest": self.graph_digest,
            "options_digest": self.options_digest,
            "arch": self.arch,
            "stage": self.stage,
            "ii": self.ii,
            "length": self.length,
            "optimal": self.optimal,
            "length_optimal": self.length_optimal,
            "complete": self.complete,
            "ops": [
                {
                    "name": op.name, "opcode": op.opcode, "unit": op.unit, "cycles": op.cycles,
                    "occupancy": op.occupancy, "start": op.start, "stage": self.stage_of(op),
                    "warp": op.role, "issue": op.issue, "async": op.is_async,
                    "variable_latency": op.variable_latency, "streaming": op.streaming,
                    "machine_cycles": op.machine_cycles,
                }
                for op in self.ops
            ],
            "warps": [
                {"name": r.name, "warps": r.warps, "registers": r.registers, "ops": list(r.ops)}
                for r in self.roles
            ],
            "buffers": [
                {"value": b.value, "depth": b.depth, "bytes": b.bytes, "space": b.space}
                for b in self.buffers
            ],
            "cross_role_edges": [list(e) for e in self.cross_role_edges],
            "program": {
                "copies": self.copies,
                "length": self.program_length,
                **{k: list(v) for k, v in phases.items()},
            },
            "instances": self.instances(),
            "scale": {
                "machine_cycles_per_unit": self.scale.unit_cycles,
                "distortion": self.scale.distortion,
                "map": [[c, n] for c, n in self.scale.map],
            },
            "bounds": dict(self.bounds),
            "options": dict(self.options),
            "graph": self.graph_tir,
            "stats": dict(self.stats),
        }
        if self.latency_slack:
            out["latency_slack"] = [x.to_dict() for x in self.latency_slack]
        out["field_digests"] = {key: field_digest(out[key]) for key in DIGESTED}
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_dict(cls, d: dict) -> "Schedule":
        return cls(
            kernel=d["kernel"], machine=d["machine"], machine_digest=d.get("machine_digest", ""),
            graph_digest=d.get("graph_digest", ""), options_digest=d.get("options_digest", ""),
            complete=d.get("complete", True),
            arch=d.get("arch", ""), stage=d.get("stage", "joint"),
            ii=d["ii"], length=d["length"], optimal=d["optimal"],
            ops=tuple(
                ScheduledOp(
                    name=o["name"], opcode=o["opcode"], unit=o["unit"], cycles=o["cycles"],
                    occupancy=o.get("occupancy", o["cycles"]), start=o["start"], role=o.get("warp"),
                    issue=o.get("issue", "warp_group"), is_async=o.get("async", False),
                    variable_latency=o.get("variable_latency", False), streaming=o.get("streaming", False),
                    machine_cycles=o.get("machine_cycles", 0.0),
                )
                for o in d["ops"]
            ),
            roles=tuple(Role(r["name"], r["warps"], r["registers"], tuple(r["ops"])) for r in d.get("warps", [])),
            buffers=tuple(Buffer(b["value"], b["depth"], b["bytes"], b.get("space", "smem"))
                          for b in d.get("buffers", [])),
            cross_role_edges=tuple(tuple(e) for e in d.get("cross_role_edges", [])),
            scale=Scale(
                map=tuple((c, n) for c, n in d.get("scale", {}).get("map", [])),
                distortion=d.get("scale", {}).get("distortion", 0.0),
                unit_cycles=d.get("scale", {}).get("machine_cycles_per_unit", 1.0),
            ),
            bounds=tuple(d.get("bounds", {}).items()),
            graph_tir=d.get("graph", ""),
            length_optimal=d.get("length_optimal", True),
            options=tuple(sorted((k, tuple(tuple(g) for g in v) if k == "groups" else v)
                                 for k, v in d.get("options", {}).items())),
            stats=tuple(d.get("stats", {}).items()),
            latency_slack=tuple(LatencySlack(x["op"], x["min"], x["typical"], x["max"], x.get("slack"),
                                             x.get("slack_cycles")) for x in d.get("latency_slack", [])),
        )

    @classmethod
    def from_json(cls, text: str) -> "Schedule":
        return cls.from_dict(json.loads(text))


# The fields a file guards with a digest each ("field_digests"): what the solve decided. Not the
# derived views (program, instances: recomputed when read) nor stats (wall times).
DIGESTED = ("kernel", "machine", "machine_digest", "graph_digest", "options_digest", "arch", "stage", "ii",
            "length", "optimal", "length_optimal", "complete", "ops", "warps", "buffers", "cross_role_edges",
            "scale", "bounds", "options", "graph")


def field_digest(value) -> str:
    """A short SHA-256 of one field's canonical JSON."""
    import hashlib
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def edited_fields(data: dict) -> list[str]:
    """The fields of a schedule file whose digest no longer matches (edited or deleted by hand).
    A file without "field_digests" (older than them) has none to check."""
    digests = data.get("field_digests")
    if not isinstance(digests, dict):
        return [] if digests is None else ["field_digests"]
    return [k for k in DIGESTED if k in digests and (k not in data or field_digest(data[k]) != digests[k])]


def graph_digest(tir: str) -> str:
    """SHA-256 of a schedule's embedded graph text."""
    import hashlib
    return hashlib.sha256(tir.encode()).hexdigest()


# The largest times a schedule file may hold: far above any solve (costs are normalized to a few
# hundred units), low enough that unrolling or drawing its program stays quick.
MAX_II = 10**6
MAX_COPIES = 4096


def _count(v, low: int, high: int | None = None) -> bool:
    return type(v) is int and v >= low and (high is None or v <= high)


def _amount(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


OPTION_CHECKS = {  # what each model option a schedule records (pipeline.model_options) may be
    "warps": lambda v: _count(v, 1), "registers": lambda v: _count(v, 1), "depth": lambda v: _count(v, 1),
    "register_reserve": lambda v: _count(v, 0),
    "cross_role": lambda v: isinstance(v, bool), "tile_handoff": lambda v: isinstance(v, bool),
    "groups": lambda v: isinstance(v, (list, tuple)) and all(isinstance(g, (list, tuple)) and
                                                           all(isinstance(n, str) for n in g) for g in v),
    "normalize_bound": lambda v: _count(v, 1), "max_ii": lambda v: _count(v, 1),
    "smt_backend": lambda v: v in ("yices", "z3", "cpsat", "yices-cpsat"),
    "role_reserve": lambda v: isinstance(v, (list, tuple)) and all(  # [ops, registers, warps] each
        isinstance(e, (list, tuple)) and len(e) == 3 and isinstance(e[0], (list, tuple))
        and all(isinstance(n, str) for n in e[0]) and _count(e[1], 1) and _count(e[2], 1) for e in v),
}
FLAGS = ("optimal", "length_optimal", "complete")  # the schedule's booleans
TEXTS = ("kernel", "machine", "arch", "graph_tir", "machine_digest", "graph_digest", "options_digest")
STAGES = ("swp", "joint")


def problems(s: Schedule) -> list[str]:
    """What makes a schedule read from a file unusable before any model is built: wrong types,
    values out of range, names that do not add up (a hand-edited file, say). [] when it is sound."""
    out = []
    for key in FLAGS:
        if not isinstance(getattr(s, key), bool):
            out.append(f"'{key}' must be true or false, not {getattr(s, key)!r}")
    for key in TEXTS:
        if not isinstance(getattr(s, key), str):
            out.append(f"'{'graph' if key == 'graph_tir' else key}' must be a string, not {getattr(s, key)!r}")
    if s.stage not in STAGES:
        out.append(f"'stage' must be 'swp' or 'joint', not {s.stage!r}")
    elif s.stage == "swp" and (s.roles or any(o.role is not None for o in s.ops)):
        out.append("stage 'swp' has no warp roles, but 'warps' or an op's 'warp' names some")
    elif s.stage == "joint" and not s.roles:
        out.append("stage 'joint' needs its warp roles, but 'warps' is empty")
    if not _count(s.ii, 1):
        out.append(f"'ii' must be an integer >= 1, not {s.ii!r}")
    elif s.ii > MAX_II:
        out.append(f"'ii' is {s.ii}, more than the limit of {MAX_II} (schedule.MAX_II)")
    if not _count(s.length, 0):
        out.append(f"'length' must be an integer >= 0, not {s.length!r}")
    elif _count(s.ii, 1, MAX_II) and s.length > MAX_COPIES * s.ii:
        out.append(f"'length' is {s.length}, more than {MAX_COPIES} iterations of ii = {s.ii} "
                   "(schedule.MAX_COPIES)")
    if not s.ops:
        out.append("'ops' is empty")
    names = [o.name for o in s.ops]
    for name in sorted({n for n in names if names.count(n) > 1}, key=str):
        out.append(f"op '{name}' is listed more than once")
    roles = {r.name for r in s.roles}
    for o in s.ops:
        if not _count(o.start, 0):
            out.append(f"op '{o.name}': 'start' must be an integer >= 0, not {o.start!r}")
        elif _count(s.length, 0) and o.start > s.length:
            out.append(f"op '{o.name}': 'start' is {o.start}, past 'length' {s.length}")
        for key in ("is_async", "variable_latency", "streaming"):
            if not isinstance(getattr(o, key), bool):
                out.append(f"op '{o.name}': '{key.replace('is_', '')}' must be true or false")
        for key in ("cycles", "occupancy"):
            if not _amount(getattr(o, key)):
                out.append(f"op '{o.name}': '{key}' must be a number >= 0, not {getattr(o, key)!r}")
        if s.roles and o.role not in roles:
            out.append(f"op '{o.name}' runs on role {o.role!r}, which 'warps' does not list")
    on_role = {o.name: o.role for o in s.ops if isinstance(o.name, str)}
    for r in s.roles:
        if not (_count(r.warps, 1) and _count(r.registers, 1)):
            out.append(f"role '{r.name}': 'warps' and 'registers' must be integers >= 1")
        for name in r.ops:  # the role's list and the ops' 'warp' fields must say the same
            if not isinstance(name, str) or name not in on_role:
                out.append(f"role '{r.name}': 'ops' names {name!r}, which 'ops' does not list")
            elif on_role[name] != r.name:
                out.append(f"role '{r.name}': 'ops' names '{name}', whose 'warp' is {on_role[name]!r}")
    for b in s.buffers:
        if not (_count(b.depth, 1) and _count(b.bytes, 0)):
            out.append(f"buffer '{b.value}': 'depth' must be an integer >= 1 and 'bytes' >= 0")
    for key, value in s.options:
        check = OPTION_CHECKS.get(key)
        if check is None:
            out.append(f"unknown option '{key}' (options: {', '.join(OPTION_CHECKS)})")
        elif not check(value):
            out.append(f"option '{key}' cannot be {value!r}")
    return out
