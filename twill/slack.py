"""Latency slack: how much later than its typical latency an op may complete before the steady
state stalls, for the ops whose machine description gives a latency interval (min / typical /
max; twill.machine). The solver schedules such an op at its typical latency; this module, plain
Python over the finished schedule, says what its worst case costs.

The schedule is static: op v of iteration i starts at start(v) + i*I, and a role runs its ops in
that order, so a reader whose operand is not there at its start waits, and its role falls behind.
All times are in the schedule's units (`cycles` of the ops, `start`, I); machine cycles are
units x `scale.unit_cycles`.

- An op v that is not a streaming load: its result is ready at start(v) + c(v), with c(v) its
  normalized (typical) latency. For each reader r over an edge of distance d, r of iteration
  i + d starts at start(r) + d*I + i*I. So

      slack(v) = min over readers r of  start(r) + d*I - (start(v) + c(v))

  and, for an op that is not async (its role waits for it to finish), also the start of the next
  op on v's role, the next instance of v included: min over ops u of v's role and k >= 0 of
  start(u) + k*I > start(v), minus (start(v) + c(v)).
- A streaming load v (variable latency, no input from the loop: its cycles count as 0 and it
  owns a ring of D slots, `buffers`): its producer waits for nothing but a free slot, so
  instance i is issued when instance i - D has left the slot, when its last reader is done
  with it: reader r (distance d) at start(r) + d*I + h(r) of instance i - D, with h(r) = c(r)
  for an mma (the tensor core reads shared memory until it completes) and 0 otherwise. It lands
  T (the typical latency, in units) later, and its first reader needs it at
  min_r start(r) + d*I of instance i. So

      slack(v) = min_r (start(r) + d*I) + D*I - max_r (start(r) + d*I + h(r)) - T

An op with no reader and no role to hold up has no slack bound (None). The margin at max is
slack - (max - typical) in machine cycles: negative, the steady state stalls by that much each
time the op takes its maximum.
"""
from __future__ import annotations

from dataclasses import dataclass

from .ir import Graph
from .schedule import LatencySlack, Schedule


def _next_on_role(s: Schedule, v) -> int | None:
    """The earliest start after start(v) of an op of v's role, any later iteration included."""
    if v.role is None:
        return None
    best = None
    for u in s.ops:
        if u.role != v.role:
            continue
        k = 0 if u.start > v.start else (v.start - u.start) // s.ii + 1
        t = u.start + k * s.ii
        best = t if best is None else min(best, t)
    return best


def slack_units(s: Schedule, graph: Graph, name: str, typical_units: float, depth: int | None = None) -> float | None:
    """slack(v) of the module's rule, in units; `typical_units` is T for a streaming load, and D
    its ring's depth in `buffers` (a joint schedule), else `depth` (the solve's)."""
    ops = s.by_name
    v = ops[name]
    readers = [(ops[e.dst], e.distance) for e in graph.edges if e.src == name and e.dst in ops]
    if v.streaming:
        depth = {b.value: b.depth for b in s.buffers}.get(name, depth)
        if depth is None or not readers:
            return None
        need = min(r.start + d * s.ii for r, d in readers)
        free = max(r.start + d * s.ii + (r.cycles if _holds(graph, r.name) else 0) for r, d in readers)
        return need + depth * s.ii - free - typical_units
    ready = v.start + v.cycles
    bounds = [r.start + d * s.ii - ready for r, d in readers]
    if not v.is_async and (nxt := _next_on_role(s, v)) is not None:
        bounds.append(nxt - ready)
    return min(bounds) if bounds else None


def _holds(graph: Graph, op: str) -> bool:
    from . import vocab
    d = vocab.lookup(graph.by_name[op].opcode)
    return d is not None and d.tensor_core


def latency_slack(s: Schedule, graph: Graph, intervals: dict[str, tuple[float, float, float]],
                  depths: dict[str, int] | None = None) -> tuple[LatencySlack, ...]:
    """The slack of every op with a latency interval (machine cycles: min, typical, max), in
    the schedule's op order; `depths`: the ring depth of each streaming load where the schedule
    has no `buffers` (stage 1 alone)."""
    out = []
    unit = s.scale.unit_cycles or 1.0
    for op in s.ops:
        if op.name not in intervals:
            continue
        low, typical, high = intervals[op.name]
        units = slack_units(s, graph, op.name, typical / unit, (depths or {}).get(op.name))
        out.append(LatencySlack(op.name, low, typical, high,
                                None if units is None else round(units, 3),
                                None if units is None else round(units * unit, 1)))
    return tuple(out)
