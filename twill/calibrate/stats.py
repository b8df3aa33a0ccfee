"""The spread of a measurement: min, median, 99th percentile (nearest rank), count."""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Spread:
    min: float
    median: float
    p99: float
    max: float
    n: int

    def text(self, unit: str = "") -> str:
        """`median 1012 (min 990, p99 1100, n 72)`, numbers to 4 significant digits."""
        u = f" {unit}" if unit else ""
        return f"median {num(self.median)}{u} (min {num(self.min)}, p99 {num(self.p99)}, n {self.n})"


def spread(samples) -> Spread:
    """Spread of a non-empty sequence of numbers. The median of an even count is the mean of the
    two middle values; p99 is the value at rank ceil(0.99 n) of the sorted samples."""
    xs = sorted(float(x) for x in samples)
    if not xs:
        raise ValueError("no samples")
    n = len(xs)
    mid = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    return Spread(xs[0], mid, xs[max(0, math.ceil(0.99 * n) - 1)], xs[-1], n)


def num(x: float) -> str:
    """A number as the written spec shows it: 4 significant digits, no exponent below 1e7."""
    if x == 0:
        return "0"
    digits = max(0, 3 - int(math.floor(math.log10(abs(x)))))
    text = f"{x:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
