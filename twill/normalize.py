"""Stage 0: cost normalization with SCIP.

Solving time grows with the cycle counts, and scaling every cost by one factor gives an
isomorphic problem, so only ratios matter. Given the distinct positive costs C, find integers C'
minimizing the worst cross-ratio error F::

    minimize   F
    subject to -F <= C[i]*C'[j] - C[j]*C'[i] <= F     for all pairs i < j
               1 <= sum(C') <= U
               C'[i] >= 1                            (no positive cost becomes 0)

then, among the maps with that F, the one with the smallest sum (a deterministic tie-break).
Costs that are already integers summing to at most U are kept unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import TwillError


@dataclass(frozen=True)
class Normalization:
    map: tuple[tuple[float, int], ...]
    distortion: float  # the optimal F, relative to the largest C[i]*C'[j]
    unit_cycles: float  # least-squares machine cycles per normalized unit
    proven: bool = True  # False when a time limit stopped SCIP before its optimum

    def as_dict(self) -> dict[float, int]:
        return dict(self.map)


def normalize(costs: tuple[float, ...], bound: int = 300, deadline: float | None = None) -> Normalization:
    """The normalization of `costs` within `bound`; by `deadline` (time.monotonic()) SCIP stops
    and its best map so far is taken (or, with none, costs rounded in proportion), marked
    `proven=False`."""
    if not costs:
        return Normalization((), 0.0, 1.0)
    if all(float(c).is_integer() for c in costs) and sum(costs) <= bound:
        return Normalization(tuple((c, int(c)) for c in costs), 0.0, 1.0)
    if len(costs) > bound:
        raise TwillError(f"{len(costs)} distinct costs cannot be normalized within a bound of {bound}: "
                         "raise --normalize-bound")
    scaled, proven = _solve(costs, bound, deadline)
    # SCIP's tolerances (1e-6) cannot tell ratios apart once the costs span more than about a
    # million: it "proved" F = 0 for (1, 64, 1e9) mapped to (1, 1, 1). The costs rounded in
    # proportion are then better; the map kept is the one with the smaller true error, where it is
    # smaller by more than floating-point noise (an exact map and its multiple both have error ~0,
    # and the solver's, the smallest, is kept).
    rounded = _proportional(costs, bound)
    noise = 1e-12 * max(costs) * max(rounded + list(scaled))  # a product's rounding error, and then some
    if _worst(costs, rounded) + noise < _worst(costs, scaled):
        scaled = rounded
    worst = _worst(costs, scaled)
    top = max(c * s for c in costs for s in scaled)
    unit = sum(c * s for c, s in zip(costs, scaled)) / sum(s * s for s in scaled)
    return Normalization(tuple(zip(costs, scaled)), worst / top if top else 0.0, unit, proven)


def _worst(costs, scaled) -> float:
    """The worst cross-ratio error F of a map."""
    return max((abs(ci * scaled[j] - cj * scaled[i]) for i, ci in enumerate(costs)
                for j, cj in enumerate(costs) if i < j), default=0.0)


def _proportional(costs: tuple[float, ...], bound: int) -> list[int]:
    """Costs rounded in proportion, none below 1, the sum at most `bound`: the map when SCIP had
    no time, or when its tolerances failed it."""
    total = sum(costs)
    out = [max(1, round(c / total * bound)) for c in costs]
    while sum(out) > bound and max(out) > 1:
        out[out.index(max(out))] -= 1
    return out


def _solve(costs: tuple[float, ...], bound: int, deadline: float | None = None) -> tuple[list[int], bool]:
    from pyscipopt import Model, quicksum

    # Work on costs scaled so the largest is 1: the same optimum, better conditioned.
    big = max(costs)
    c = [x / big for x in costs]

    def build(f_cap: float | None):
        import time
        model = Model("normalize")
        if deadline is not None:
            model.setParam("limits/time", max(0.01, deadline - time.monotonic()))
        model.hideOutput()
        model.setParam("misc/catchctrlc", False)  # Ctrl-C is Python's KeyboardInterrupt, not a SCIP status
        model.setParam("randomization/randomseedshift", 0)
        scaled = [model.addVar(f"scaled[{costs[i]:g}]", vtype="I", lb=1, ub=bound) for i in range(len(c))]
        f = model.addVar("F", lb=0.0)
        for i in range(len(c)):
            for j in range(i + 1, len(c)):
                model.addCons(c[i] * scaled[j] - c[j] * scaled[i] <= f, f"ratio+[{costs[i]:g},{costs[j]:g}]")
                model.addCons(c[j] * scaled[i] - c[i] * scaled[j] <= f, f"ratio-[{costs[i]:g},{costs[j]:g}]")
        model.addCons(quicksum(scaled) <= bound, "sum<=U")
        if f_cap is None:
            model.setObjective(f, "minimize")
        else:
            model.addCons(f <= f_cap, "F<=F*")
            model.setObjective(quicksum(scaled), "minimize")
        model.optimize()
        return model, scaled, model.getStatus()

    model, first, status = build(None)
    if status == "userinterrupt":
        raise KeyboardInterrupt
    if status == "timelimit":
        return ([int(round(model.getVal(v))) for v in first] if model.getNSols() else _proportional(costs, bound),
                False)
    if status != "optimal":
        raise TwillError(f"cost normalization failed: SCIP status {status}")
    ints = [int(round(model.getVal(v))) for v in first]
    # The tie-break: the smallest sum among the maps with the first optimum's F, capped at that F
    # recomputed exactly from its rounded integers (SCIP's own F carries its feasibility
    # tolerance). The cap can still sit just below what SCIP's tolerances admit, which made the
    # second model infeasible (costs 1, 8809, 13220, 0.0625; then 10.67, 60, 64, 512, 1365.33):
    # the first optimum, which meets the cap, is then the answer.
    best = max((abs(c[i] * ints[j] - c[j] * ints[i]) for i in range(len(c)) for j in range(i + 1, len(c))),
               default=0.0)
    model, scaled, status = build(best * (1 + 1e-9) + 1e-9)
    if status == "userinterrupt":
        raise KeyboardInterrupt
    if status != "optimal":
        return ints, status != "timelimit"
    return [int(round(model.getVal(v))) for v in scaled], True
