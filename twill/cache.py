"""A cache of proven-optimal schedules, keyed by everything that determines them.

A Makefile that re-solves unchanged kernels should not pay for the solvers again. The key is a
SHA-256 of the graph's canonical `.tir` text, the machine description (as parsed), the options
that change the answer, and the twill version; only proven-optimal schedules are stored, and a
hit is re-verified before it is used. The cache lives in ``$TWILL_CACHE_DIR`` or
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


def key(graph: Graph, machine: Machine, options) -> str:
    from importlib.metadata import PackageNotFoundError, version

    from .tir import print_tir
    try:
        release = version("twill-sched")
    except PackageNotFoundError:
        release = "source"
    relevant = {k: v for k, v in asdict(options).items() if k not in IGNORED_OPTIONS}
    text = json.dumps([FORMAT, release, print_tir(graph), repr(machine), sorted(relevant.items())],
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
