"""The band of keys a `causal_mask` keeps (docs/formats.md): element (r, c), key k = k0 + c and
query q = q0 + r, is kept where d = k - q has ``lower + lower_by * w <= d <= upper + upper_by * w``,
w the launch scalar named by `arg`. No attribute: the plain causal mask (``d <= 0``). The import
reads it from a Triton mask (twill/ttgir/band.py); emit-cuda masks it and derives each tile's key
blocks from it (twill/emit/ragged.py)."""
from __future__ import annotations

from dataclasses import dataclass


BAND_ATTRS = ("upper", "upper_by", "lower", "lower_by", "arg")


@dataclass(frozen=True)
class Band:
    upper: int = 0
    upper_by: int = 0
    lower: int | None = None
    lower_by: int = 0
    arg: str | None = None  # the integer argument the `_by` coefficients multiply

    def attrs(self) -> tuple[tuple[str, object], ...]:
        out = [("upper", self.upper)] if (self.upper or self.upper_by or self.lower is not None) else []
        out += [("upper_by", self.upper_by)] if self.upper_by else []
        out += [("lower", self.lower)] if self.lower is not None else []
        out += [("lower_by", self.lower_by)] if self.lower_by else []
        out += [("arg", self.arg)] if self.arg else []
        return tuple(out)

    def keeps(self, key: int, query: int, w: int = 0) -> bool:
        """The element rule: d = key - query within the band (w the argument's value)."""
        d = key - query
        if d > self.upper + self.upper_by * w:
            return False
        return self.lower is None or d >= self.lower + self.lower_by * w


def from_attrs(attrs) -> Band:
    """The band of a causal_mask's attributes; ValueError where one is not what it must be."""
    a = dict(attrs)
    for k in ("upper", "upper_by", "lower", "lower_by"):
        if k in a and (isinstance(a[k], bool) or not isinstance(a[k], int)):
            raise ValueError(f"{k} = {a[k]}: a band's bounds and coefficients are integers")
    if "arg" in a and not isinstance(a["arg"], str):
        raise ValueError(f"arg = {a['arg']}: the name of a scalar given at launch")
    return Band(int(a.get("upper", 0)), int(a.get("upper_by", 0)),
                None if a.get("lower") is None else int(a["lower"]), int(a.get("lower_by", 0)),
                a.get("arg") if isinstance(a.get("arg"), str) else None)
