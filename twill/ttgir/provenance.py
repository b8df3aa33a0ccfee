"""Which kernel argument feeds which tensor: every pointer of a TTGIR function followed back to the
argument it derives from (through `tt.splat`, `tt.addptr`, `tt.broadcast`, `tt.make_tensor_ptr`,
`tt.make_tensor_descriptor`, `ttng.tensormap_create`, `tt.advance`, layout views and loop iter_args),
for each load and store (`Signature`; docs/ttgir-import.md, section 11)."""
from __future__ import annotations

from dataclasses import dataclass, field

from .opnames import ASYNC_COPIES as COPIES
from .parser import MOp

POINTER_FLOW = {"tt.splat", "tt.addptr", "tt.broadcast", "tt.expand_dims", "ttg.convert_layout", "tt.advance",
                "tt.make_tensor_ptr", "tt.make_tensor_descriptor", "tt.reshape", "ttng.reinterpret_tensor_descriptor"}
LOADS = {"tt.load", "tt.descriptor_load", "tt.experimental_descriptor_load"}
STORES = {"tt.store", "tt.descriptor_store", "tt.experimental_descriptor_store", "ttng.async_tma_copy_local_to_global"}


@dataclass(frozen=True)
class Signature:
    """The function's arguments in order, (name, kind: pointer | scalar | descriptor | other), and
    where pointers lead: SSA name of a load's result, or "LINE:COL" of a store -> argument name."""

    args: tuple = ()
    loads: dict = field(default_factory=dict)
    stores: dict = field(default_factory=dict)


# -- pointer provenance -----------------------------------------------------------------------

def func_args(func: MOp, types) -> list[tuple[str, object, object]]:
    """The function's arguments (``%x: type`` in its signature), in order: (name, MType, token)."""
    toks, out = func.tokens, []
    for i, tok in enumerate(toks[:-1]):
        if tok.kind == "ssa" and toks[i + 1].is_(":"):
            mtype, _ = types.read(toks, i + 2)
            out.append((tok.text[1:], mtype, tok))
    return out


def _kind(mtype) -> str:
    if mtype.kind == "ptr" or (mtype.kind == "tensor" and mtype.elem == "ptr"):
        return "pointer"
    if mtype.kind == "desc":
        return "descriptor"
    return "scalar" if mtype.kind == "scalar" else "other"


def signature(func: MOp, types, locs=None) -> Signature:
    """The arguments of `func` and the pointer argument behind each load (keyed by the SSA name
    the load's node gets: its result, or for a TMA copy without one the variable its loc names)
    and each store (keyed by its position)."""
    from .locs import name as loc_name
    args = func_args(func, types)
    prov = {name: name for name, t, _ in args if _kind(t) in ("pointer", "descriptor")}
    loads, stores = {}, {}

    def walk(ops):
        for op in ops:
            names = [n.split("#")[0] for n, _ in op.operands()]
            src = next((prov[n] for n in names if n in prov), None)
            if op.name == "ttng.tensormap_create" and len(names) > 1 and names[1] in prov:
                prov[names[0]] = prov[names[1]]  # it writes the descriptor (operand 0) of a pointer (1)
            elif op.name in POINTER_FLOW and src is not None:
                for r in op.results:
                    prov[r.split("#")[0]] = src
            elif op.name in LOADS and src is not None and op.results:
                loads[op.results[0]] = src
            elif op.name in COPIES and src is not None:
                key = op.results[0] if op.results else loc_name(op.loc, locs or {})
                if key:
                    loads.setdefault(key, src)
            elif op.name in STORES and src is not None:
                stores[f"{op.head.line}:{op.head.col}"] = src
            if op.name == "scf.for":
                toks = op.tokens
                for i in range(len(toks) - 2):
                    if toks[i].kind == "ssa" and toks[i + 1].is_("=") and toks[i + 2].kind == "ssa":
                        init = toks[i + 2].text[1:].split("#")[0]
                        if init in prov:
                            prov[toks[i].text[1:]] = prov[init]
            for region in op.regions:
                for block in region:
                    walk(block.ops)
    walk(func.body())
    return Signature(tuple((n, _kind(t)) for n, t, _ in args), loads, stores)
