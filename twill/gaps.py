"""Bounds on the difference of two ops' starts that hold in every joint schedule of one window:
the longest paths of the difference constraints every schedule meets (each dependence,
start[dst] + d*I >= start[src] + latency, the cross-role delay left out, and the window,
0 <= start[v] <= lmax - cycles(v)). The registers family reads them to leave out the iterations
whose instance of a value can never cover a check point (`joint_terms.Encoding.live_during`): the
same constraints, fewer terms.

Over a range [lo, hi] of I each bound is taken at the I where it is weakest (every weight,
latency - d * I and cycles - copies * I, falls as I grows: at hi), so it holds at every I of the
range."""
from __future__ import annotations

import numpy as np

from .problem import Problem

NEG = -(1 << 40)


class Gaps:
    """`lo(a, b)` <= start[a] - start[b] <= `hi(a, b)` in every schedule of the window (ops by name)."""

    def __init__(self, p: Problem, ii: int, lmax: int):
        names = [t.name for t in p.tasks]
        self.index = {v: i for i, v in enumerate(names)}
        n = len(names)
        z = n  # the origin: start[z] = 0
        w = np.full((n + 1, n + 1), NEG, dtype=np.int64)  # w[a, b]: start[b] - start[a] >= w[a, b]
        np.fill_diagonal(w, 0)
        for d in p.deps:
            a, b = self.index[d.src], self.index[d.dst]
            w[a, b] = max(w[a, b], d.latency - d.distance * ii)
        for t in p.tasks:
            i = self.index[t.name]
            w[z, i] = max(w[z, i], 0)
            w[i, z] = max(w[i, z], t.cycles - lmax)
        for k in range(n + 1):  # Floyd-Warshall, longest paths
            np.maximum(w, w[:, k:k + 1] + w[k:k + 1, :], out=w)
            np.maximum(w, NEG, out=w)
        self.feasible = bool(np.all(np.diag(w) <= 0))
        self.w = w

    def lo(self, a: str, b: str) -> int:
        """The least start[a] - start[b]."""
        return int(self.w[self.index[b], self.index[a]])

    def hi(self, a: str, b: str) -> int:
        """The largest start[a] - start[b]."""
        return -int(self.w[self.index[a], self.index[b]])
