"""The dtype a carry is written out in after the loop (`Carry.output`)."""
from __future__ import annotations

from dataclasses import replace

from ..errors import InputError
from .opnames import CONVERSIONS
from .parser import MOp
from .state import Lowering
from .values import Carry


def _output_dtypes(lw: Lowering, loop: MOp, after) -> list[Carry]:
    """Each carry with the dtype its final value is converted to after the loop, if any: the
    accumulator Triton truncates to f16 before its store is written out in f16 (`{output = f16}`),
    also after arithmetic on it (attention's O / l, which follows O: of the carries an op reads, the
    one of highest rank). A value is followed through the ops after the loop by data flow from the
    loop's results (and from a buffer carry's memory)."""
    seed: dict[str, int] = {}  # SSA name -> the carry it derives from
    for k, c in enumerate(lw.carries):
        if c.arg is not None and c.arg < len(loop.results):
            seed[loop.results[c.arg]] = k
        elif c.buf is not None:
            for name in [lw.buffers[c.buf][0]] + lw.views.get(c.buf, []):
                seed[name] = k
    found: dict[int, str] = {}
    parted: set[str] = set()  # values that are column parts of a carry (tl.split, tmem_subslice: parts.py)
    for op in after:
        ks = [seed[key] for name, _ in op.operands() for key in (name, name + "#0") if key in seed]
        if not ks:
            continue
        k = max(ks, key=lambda j: len(lw.carries[j].type.shape))  # O / l follows O, the whole tile
        for r in op.results:
            seed.setdefault(r, k)
        if op.name in ("tt.split", "ttng.tmem_subslice") or any(
                key in parted for name, _ in op.operands() for key in (name, name + "#0")):
            parted.update(op.results)
        if op.name in CONVERSIONS and k not in found:
            try:
                _, outs = lw.signature(op)
            except InputError:
                continue
            tt = outs[0].tile() if outs else None
            shape = lw.carries[k].type.shape
            part = (op.results[0] in parted and len(tt.shape) == 2 == len(shape) and tt.shape[0] == shape[0]
                    and tt.shape[1] < shape[1] and shape[1] % tt.shape[1] == 0) if tt is not None else False
            if (tt is not None and tt.dtype in ("f16", "bf16", "f32") and tt.dtype != lw.carries[k].type.dtype
                    and (tt.shape == shape or part)):  # P computed from m is not m's output
                found[k] = tt.dtype  # (a column part converted: the epilogue stores the parts as the tile)
    return [replace(c, output=found.get(k)) for k, c in enumerate(lw.carries)]

