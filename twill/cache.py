"""A cache of complete schedules, keyed by everything that determines them.

A Makefile that re-solves unchanged kernels should not pay for the solvers again. The key is a
SHA-256 of the graph's canonical `.tir` text, the machine description's digest, the digest of every
model option (`ModelOptions.digest`: the stage, the normalization bound, --max-ii, the warp,
register and depth limits, --no-cross-role, the groups, the SMT backend) and a digest of twill's
own solver source. Only a complete schedule (every stage ran to its end: no time limit cut it) is
stored. An entry is served only when it passes every check: it parses as a schedule with sound
fields (`schedule.problems`), its graph, machine and options digests and its stage are those of
this solve, it is complete, and `verify` accepts it for this graph and machine; anything else is
solved again (and the entry replaced). The cache lives in ``$TWILL_CACHE_DIR`` or
``$XDG_CACHE_HOME/twill`` (default ``~/.cache/twill``); `--no-cache` bypasses it.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .fileio import write_atomic
from .ir import Graph
from .machine import Machine
from .options import ModelOptions
from .schedule import Schedule, graph_digest, problems

FORMAT = 2


def cache_dir() -> Path:
    if os.environ.get("TWILL_CACHE_DIR"):
        return Path(os.environ["TWILL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "twill"


def _solver_digest() -> str:
    """A digest of the solver's own source: a changed model must never be answered from a cache
    filled by another (a version number is not enough between releases)."""
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(here.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def key(graph: Graph, machine: Machine, options: ModelOptions) -> str:
    from .tir import print_tir
    text = json.dumps([FORMAT, _solver_digest(), graph_digest(print_tir(graph)), machine.digest, repr(machine),
                       options.model.digest(), options.swp_only])
    return hashlib.sha256(text.encode()).hexdigest()


def usable(schedule: Schedule, graph: Graph, machine: Machine, options: ModelOptions) -> bool:
    """Whether a cached schedule answers this solve: sound, of this graph, machine, options and
    stage, complete, and verified."""
    from .tir import print_tir
    from .verify import verify
    options = options.model
    if problems(schedule) or not schedule.complete:
        return False
    if (schedule.graph_digest, schedule.machine_digest, schedule.options_digest) != (
            graph_digest(print_tir(graph)), machine.digest, options.digest()):
        return False
    if schedule.stage != ("swp" if options.swp_only else "joint"):
        return False
    try:
        return not verify(schedule, graph, machine)
    except Exception:  # an entry that cannot even be checked (edited, corrupt) is solved again
        return False


def load(digest: str, graph: Graph, machine: Machine, options: ModelOptions) -> Schedule | None:
    path = cache_dir() / f"{digest}.json"
    try:
        schedule = Schedule.from_json(path.read_text())
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    return schedule if usable(schedule, graph, machine, options) else None


def store(digest: str, schedule: Schedule, graph: Graph, machine: Machine, options: ModelOptions) -> None:
    if not usable(schedule, graph, machine, options):
        return
    try:
        cache_dir().mkdir(parents=True, exist_ok=True)
        write_atomic(cache_dir() / f"{digest}.json", schedule.to_json())
    except Exception:  # a cache that cannot be written is only a missed speed-up
        pass
