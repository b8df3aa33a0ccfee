"""The model options: everything besides the graph and the machine that changes a solve's answer.

One frozen `ModelOptions` is the only definition of them. The pipeline builds its problem from it
(`problem.problem_for`), a schedule records it (`recorded`, the JSON's `options`: the fields that
differ from their defaults) with a digest of them (`digest`), the cache keys on that digest,
and `verify` rebuilds the model from what the schedule recorded. `SolveOptions`
(twill/pipeline.py) adds what only shapes a run (its time limit, timings, the cache switch).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields


# Options added after schedules recorded digests: at their default they are left out of the
# digest, so every schedule solved before them keeps its `options_digest`.
ADDED = ("register_reserve", "role_reserve", "tile_handoff")


@dataclass(frozen=True)
class ModelOptions:
    swp_only: bool = False  # stop after stage 1 (the schedule's `stage` records it)
    normalize_bound: int = 300  # U: the largest sum of normalized costs
    max_ii: int | None = None  # give up above this I
    cross_role: bool = True  # allow producer and consumer on different roles
    warps: int | None = None  # override limits.warps
    registers: int | None = None  # override limits.registers_per_thread (a reduced budget)
    register_reserve: int | None = None  # override limits.register_reserve (registers outside tiles)
    depth: int | None = None  # ring-buffer depth of streaming loads
    smt_backend: str = "yices"  # "z3" for comparison only; "cpsat": the joint stage on OR-Tools CP-SAT
    groups: tuple[tuple[str, ...], ...] = ()  # ops pinned together on one role, each group its own role
    # registers per thread the model does not see on one role (emit-cuda's ptxas loop, from that
    # role's ptxas count): (the role's ops, registers, its warps); a role holding any of the ops
    # holds them for the whole loop, as a loop-invariant register input (problem.make_problem)
    role_reserve: tuple[tuple[tuple[str, ...], int, int], ...] = ()
    # may a 2-d register tile go to another role's op that reads it from registers (problem.pinned_edges)?
    # None: the machine's `communication.tile_handoff`; the pipeline sets True where no schedule keeps
    # every such tile on its role (pipeline.solve)
    tile_handoff: bool | None = None

    @property
    def model(self) -> "ModelOptions":
        """The model options alone (a `SolveOptions` drops its run-only fields here)."""
        return ModelOptions(**{f.name: getattr(self, f.name) for f in fields(ModelOptions)})

    def recorded(self) -> tuple[tuple[str, object], ...]:
        """The fields a schedule file records: those that differ from their defaults, sorted by
        name (a default solve records none). `swp_only` is the schedule's `stage` instead."""
        base = ModelOptions()
        out = {}
        for f in fields(ModelOptions):
            value = getattr(self, f.name)
            if f.name != "swp_only" and value != getattr(base, f.name):
                out[f.name] = _tuples(f.name, value)
        return tuple(sorted(out.items()))

    @classmethod
    def from_recorded(cls, pairs, stage: str = "joint") -> "ModelOptions":
        """The options a schedule recorded (its `options` pairs and its `stage`); unknown keys are
        left to `schedule.problems`, which names them."""
        known = {f.name for f in fields(cls)} - {"swp_only"}
        kw = {k: _tuples(k, v) for k, v in pairs if k in known}
        return cls(swp_only=stage == "swp", **kw)

    def digest(self) -> str:
        """SHA-256 of every model field but `swp_only` (defaults included, but for those in ADDED),
        canonical JSON. The
        stage is not in it: a full solve that a time limit ends in stage 1 keeps its options;
        the cache key adds `swp_only` itself."""
        m = self.model
        text = json.dumps([[f.name, getattr(m, f.name)] for f in fields(ModelOptions) if f.name != "swp_only"
                           and not (f.name in ADDED and getattr(m, f.name) == f.default)], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


def _tuples(name: str, value):
    """A recorded option's value as the dataclass holds it (JSON gives lists)."""
    if name == "groups":
        return tuple(tuple(g) for g in value)
    if name == "role_reserve":
        return tuple((tuple(ops), int(regs), int(warps)) for ops, regs, warps in value)
    return value
