"""How deep a streaming load's ring is: deep enough for its TMA latency, where shared memory allows.

Opt-in (`build_model(load_rings="latency")`, `twill emit-cuda --load-rings latency`): the default,
"solved", keeps every ring at the depth the schedule was solved at, the kernel as before this module.
It stays off by default until the deeper rings are measured on a GPU (session 38 could not).

The solver counts a streaming load's latency as 0 (costs.py) and proves its schedule with the load's
ring at the solve's depth (`streaming_depth`, 2, or `--depth`): the producer may then run that many
tiles ahead. But a TMA load of a 16 KiB tile takes some 3000 cycles (the machine's typical latency,
specs/h200.yaml), and a loop of I = 256 cycles with 2 slots waits most of that latency every second
iteration: the imported row kernels (LayerNorm, RMSNorm, softmax) ran 2-4x Triton's time whatever
their grid (docs/triton-results.md, session 38). So after the solve, with every other part of the
plan made, each ring a load fills by TMA (`Channel` kind "tma") gets

    depth = the least D >= its depth with (D - 1) x I >= the load's typical latency,

one slot more than covers the latency so the producer never waits on the slot being read, at most
the loop's trip count where the graph bounds the loop by a constant (`loop_extent` / the loop's
step) and at most `MAX_DEPTH` else, and skipping the depths at which a wgmma's late release would
deadlock (`Rings.ring_deadlocks`). The rings grow together, a slot at a time, while the kernel's
`Smem` stays within `Program.smem_extras`: the shared memory that keeps the CTAs per SM the
registers and the rest of `Smem` allow (occupancy.py), so a deeper ring never costs a CTA, the TMA
staging of an output or the second copy of the inputs. The loops of a sequence, whose Smem the one
kernel lays side by side (seqfuse.py), each keep within their share of the machine's
(`KernelModel.smem_parts`).

The schedule is unchanged: its buffers keep the depth the solver proved (verify.py checks them and
the kernel's `kSmemModel` counts them); a deeper ring only lets the producer run further ahead of
the same schedule, which the rings' mbarriers order whatever their depth.
"""
from __future__ import annotations

import math
from dataclasses import replace

# The most slots a ring grows to where the loop's trip count is known only at run time.
MAX_DEPTH = 8

# `KernelModel.load_rings`: each load ring's depth, the first the default.
LOAD_RINGS = ("solved",  # the depth the schedule was solved at (its `buffers`)
              "latency")  # deepened for the load's TMA latency (this module's rule)


class StreamDepth:
    """`Program`'s deeper load rings (see the module docstring)."""

    def _deepen_streams(self) -> str:
        """Deepen the load rings by the module's rule; a note of what changed ("" if nothing). The
        rings grow together, a slot a level: the producer issues an iteration's loads in order, so
        the shallowest of them bounds how far ahead it runs, and a level that does not fit is not
        taken by any of them. With `load_rings` "solved" (the default) nothing changes."""
        if self.model.load_rings != "latency":
            return ""
        want = self.stream_depths()
        limit = self.stream_smem_limit()
        start = {v: self.channels[v].depth for v in want}
        level = min(start.values(), default=0)
        while any(self.channels[v].depth < d for v, d in want.items()):
            level += 1
            before = dict(self.channels)
            for value, top in want.items():
                c = self.channels[value]
                depth = max(c.depth, min(level, top))
                while depth > c.depth and depth <= top and self.ring_deadlocks(value, c.consumers, depth):
                    depth += 1
                if depth > top:  # every depth up to the wanted one deadlocks: it stays
                    want[value] = c.depth
                    continue
                self.channels[value] = replace(c, depth=depth)
            if self.smem_bytes() > limit:
                self.channels = before
                break
        grown = {v: self.channels[v].depth for v in want if self.channels[v].depth > start[v]}
        if not grown:
            return ""
        return ("load rings deepened for the TMA latency (streams.py): " +
                ", ".join(f"{v} to {d}" for v, d in sorted(grown.items())))

    def stream_depths(self) -> dict[str, int]:
        """Each TMA load ring's wanted depth: the module's rule, never below its depth now."""
        m = self.model
        latency = load_latencies(m)
        cap = trip_cap(m)
        out = {}
        for name, c in self.channels.items():
            if c.kind != "tma" or name not in latency:
                continue
            need = math.ceil(latency[name] / m.schedule.ii) + 1
            out[name] = max(c.depth, min(need, cap))
        return out

    def stream_smem_limit(self) -> int:
        """What `Smem` may take with the deeper rings: `smem_extras` (the CTAs per SM kept), and for
        one of `smem_parts` loops whose Smem one kernel lays side by side, its share of the machine's."""
        m = self.model
        parts = max(1, m.smem_parts)
        if parts == 1:
            return self.smem_extras
        return min(self.smem_extras, m.machine.limits.smem_bytes // parts // 1024 * 1024)


def load_latencies(model) -> dict[str, float]:
    """Each load op's typical latency in cycles (its spec's `latency: {typical: ...}`, costs.py), where
    the machine gives one (specs/h200.yaml does; a machine without it keeps the solve's depth)."""
    from ..costs import bind
    from ..errors import TwillError
    try:
        costs = bind(model.graph, model.machine)
    except TwillError:
        return {}
    return {c.name: c.latency_range[1] for c in costs
            if c.latency_range is not None and model.is_load(c.name)}


def trip_cap(model) -> int:
    """The most slots a ring may want: the loop's iterations where the graph bounds the loop's extent
    by a constant, at most MAX_DEPTH."""
    extent, step = model.graph.loop_extent, model.ragged.step
    if extent and step:
        return max(1, min(MAX_DEPTH, -(-extent // step)))
    return MAX_DEPTH
