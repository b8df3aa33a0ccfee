"""A cache of proven-optimal schedules, keyed by everything that determines them.

A Makefile that re-solves unchanged kernels should not pay for the solvers again. The key is a
SHA-256 of the graph's canonical `.tir` text, the machine description (as parsed), the options
that change the answer, and a digest of twill's own solver source; only proven-optimal schedules
are stored, and a hit that fails re-verification is ignored (solved again). The cache lives in ``$TWILL_CACHE_DIR`` or
``$XDG_CACHE_HOME/twill`` (default ``~/.cache/twill``); `--no-cache` bypasses it.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path

from .fileio import write_atomic
from .ir import Graph
from .machine import Machine
from .schedule import Schedule

FORMAT = 1
IGNORED_OPTIONS = ("time_limit", "timings", "cache")


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


def key(graph: Graph, machine: Machine, options) -> str:
    from .tir import print_tir
    relevant = {k: v for k, v in asdict(options).items() if k not in IGNORED_OPTIONS}
    text = json.dumps([FORMAT, _solver_digest(), print_tir(graph), repr(machine), sorted(relevant.items())],
                      default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def load(digest: str) -> Schedule | None:
    path = cache_dir() / f"{digest}.json"
    try:
        return Schedule.from_json(path.read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(digest: str, schedule: Schedule) -> None:
    if not (schedule.optimal and schedule.length_optimal):
        return
    try:
        cache_dir().mkdir(parents=True, exist_ok=True)
        write_atomic(cache_dir() / f"{digest}.json", schedule.to_json())
    except Exception:  # a cache that cannot be written is only a missed speed-up
        pass
