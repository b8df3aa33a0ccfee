"""A grid axis of splits: split-KV's key loop divided over a program id (docs/ttgir-import.md,
section 2, "Program ids"; the `.tir` line `grid split = ARG`, docs/formats.md).

The form recognised, with p = ``tt.get_program_id A`` and ARG a scalar argument of the kernel:

- the chosen loop runs ``for iv = p * ARG to p * ARG + ARG step S``: lower bound p * ARG, upper
  bound the lower one plus ARG, a constant step S (the emitted loop's tile along it; the binding
  checks that S divides ARG at the call). Split s runs the loop's iterations s * ARG / S .. (s + 1)
  * ARG / S - 1 of the whole key range;
- every store's address reads p only as ``(p * num_programs(B) + b) * R`` (b = ``tt.get_program_id
  B``, a program id the loads read: the batch): its output has a leading dimension of splits, over
  the batch entries;
- p is read nowhere else: loads (after the pipeliner, the copies peeled before the loop too) read it
  only through the loop's two bounds, which are leaves of the walk here, as the induction variable is.

Anything near it (another lower bound, a constant added to it, an upper bound not lower + ARG, a
variable step, p elsewhere) is not this form: the caller's error at the loop or the op (grid.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from .addresses import Addresses, poly_int
from .parser import MOp, walk
from .types import TypeReader


@dataclass(frozen=True)
class Split:
    """The loop's split: program id `axis` ("x", "y", "z") runs over splits of `arg` elements each."""

    axis: str
    arg: str


def loop_split(module, func: MOp, loop: MOp, axes: frozenset) -> tuple[Split | None, str]:
    """(the split, "") where the loop's bounds are the form above over one program id of `axes`,
    else (None, why not)."""
    t = loop.tokens
    if len(axes) != 1:
        return None, f"its bounds read {len(axes)} program ids"
    axis = next(iter(axes))
    addr = Addresses(func, TypeReader(module.source, module.aliases))
    pid = f"pid_{axis}"
    lower, upper, step = (addr.of(tok.text[1:]) for tok in (t[2], t[4], t[6]))
    if lower is None or upper is None or step is None or lower.coefs or upper.coefs:
        return None, "its bounds are no polynomial of scalars the import follows"
    if poly_int(step.const) is None or poly_int(step.const) <= 0:
        return None, "its step is not a positive constant"
    terms = dict(lower.const)
    scaled = [m for m in terms if pid in m]
    if len(scaled) != 1 or terms[scaled[0]] != 1 or len(scaled[0]) != 2 or scaled[0].count(pid) != 1:
        return None, f"its lower bound is not program_id({AXES[axis]}) * ARG"
    arg = next(a for a in scaled[0] if a != pid)
    if arg not in addr.args or arg.startswith(("%", "pid_", "iv:")):
        return None, f"its lower bound is program_id({AXES[axis]}) times '{arg}', which is no scalar argument of the kernel"
    rest = {m: c for m, c in terms.items() if m != scaled[0]}
    if rest:
        return None, ("its lower bound adds " + " + ".join(_term(m, c) for m, c in sorted(rest.items()))
                      + f" to program_id({AXES[axis]}) * {arg}: a split's first key is emitted as its index times "
                      f"{arg} only")
    over = dict(_sub(upper.const, _add_arg(lower.const, arg)))
    short = over.get((), 0)
    if set(over) - {()} or short > 0 or short % poly_int(step.const) or (short and not _pipelined(loop)):
        return None, (f"its upper bound is not the lower bound plus {arg}"
                      + (" (less whole steps only after Triton's pipeliner, which peels the last iterations)"
                         if not set(over) - {()} and short < 0 else ""))
    return Split(axis, arg), ""


def _add_arg(poly, arg: str) -> tuple:
    terms = dict(poly)
    terms[(arg,)] = terms.get((arg,), 0) + 1
    return tuple(sorted((m, c) for m, c in terms.items() if c))


def _sub(a, b) -> tuple:
    terms = dict(a)
    for m, c in b:
        terms[m] = terms.get(m, 0) - c
    return tuple(sorted((m, c) for m, c in terms.items() if c))


def _pipelined(loop: MOp) -> bool:
    """Whether the loop is Triton's pipeliner's (it carries shared-memory buffers or async tokens): its
    upper bound may stop whole steps short, the last iterations peeled after it (depipe.py reads them)."""
    return any("memdesc" in t.text or "async.token" in t.text for t in loop.tokens)


def _term(monomial: tuple, coef: int) -> str:
    return " * ".join([str(coef)] * (coef != 1 or not monomial) + [a.lstrip("%") for a in monomial])


AXES = {"x": 0, "y": 1, "z": 2}


def stores_read_split(module, func: MOp, split: Split, names: list[str]) -> str:
    """"" where each address in `names` (a store's) reads the split's program id p only as
    (p * num_programs(B) + b) * R, else why not."""
    addr = Addresses(func, TypeReader(module.source, module.aliases))
    nprog = {f"%{r}": op.tokens[0].text for op in walk(func.body()) if op.name == "tt.get_num_programs"
             for r in op.results if op.tokens}
    pid = f"pid_{split.axis}"
    for name in names:
        a = addr.of(name)
        if a is None:
            return "its address is no polynomial the import follows"
        for poly in (*a.coefs, a.const):
            terms = dict(poly)
            for m, c in terms.items():
                if pid not in m:
                    continue
                counts = [x for x in m if x in nprog]
                if m.count(pid) != 1 or len(counts) != 1:
                    return (f"it reads program_id({AXES[split.axis]}) other than as (program_id({AXES[split.axis]}) * "
                            "num_programs(B) + program_id(B)) * ROW: its output would have no leading dimension of splits")
                batch = f"pid_{nprog[counts[0]]}"
                rest = tuple(sorted([x for x in m if x not in (pid, counts[0])] + [batch]))
                if batch == pid or terms.get(rest) != c:
                    return (f"it reads program_id({AXES[split.axis]}) * num_programs({AXES.get(nprog[counts[0]], '?')}) "
                            f"without program_id({AXES.get(nprog[counts[0]], '?')}) beside it: its output would have no "
                            "leading dimension of splits over the batch")
    return ""

