"""`build_model(schedule, machine)`: the frozen `KernelModel` (model.py) of a schedule, read off it in
the graph's own terms: the target of its arch, the mma shapes and operand layouts, the roles and
their warpgroups (placement.py), the global tensors (tensors.py), the online-softmax normalizers."""
from __future__ import annotations

from dataclasses import replace

from ..ir import Graph
from ..machine import Machine
from ..schedule import Schedule
from .model import EmitError, KernelModel, mma_shape
from .copies import with_tile_copies
from .occupancy import default_limit, with_occupancy
from .placement import _place, _roles
from . import scalar_atomic
from .streams import LOAD_RINGS
from .target import target_for
from .tensors import _tensors


def build_model(schedule: Schedule, machine: Machine, graph: Graph | None = None,
                ctas_per_sm: int | None = None, tile_copies: bool | None = None, one_tile_per_cta: bool = False,
                hidden_position: bool = False, tile_args: bool | None = None, smem_parts: int = 1, load_rings: str = "solved",
                any_pitch: bool = False) -> KernelModel:
    """The model of `schedule`'s kernel: one CTA per SM, the whole register file to it, or, given
    `ctas_per_sm`, as many as fit up to that (occupancy.py). Several are opt-in: at the 128 launch
    registers of two CTAs ptxas may refuse a kernel (C7602), and the H200's GEMMs ran fastest as one
    CTA with a ring 4 deep (docs/triton-results.md). `tile_copies`: a second warpgroup of the
    computing role takes every other tile of a persistent CTA where the rule of copies.py allows it
    (None: where `copies.pays`: a loop with an mma and an epilogue that computes).
    `one_tile_per_cta`: no persistent kernel<true> (emit-cuda's ptxas loop, where ptxas compiled
    it worse than the kernel of one tile per CTA). `hidden_position`: kernel<false> gives each role
    its tile with the ring position (0) hidden from the compiler (emit-cuda's ptxas loop, where the
    constant position compiled worse: kernel.py, `_tiles`). `tile_args`: kernel<true>'s tile loop gives each
    tile's roles the kernel's Args through a pointer the compiler cannot see is the last tile's, so that it
    reads each parameter where the tile uses it rather than holding every one the roles read in a register
    across the whole loop (kernel.py, `_tiles`; None: where a tile's loop is causal, `ragged.causal`, else off;
    emit-cuda's ptxas loop turns it on where kernel<true> compiled worse than kernel<false>). `smem_parts`: the kernels whose Smem one CTA
    lays side by side (a sequence's loops, seqfuse.py): each deepens its load rings within its share
    (streams.py). `load_rings`: "solved" (the default) keeps each load ring at the depth the schedule was solved
    at; "latency" deepens the TMA load rings for the load's latency (streams.py, emit-cuda --load-rings).
    `any_pitch`: a row kernel's load whose rows are not 16 bytes apart is read where it lies, by bulk copies,
    not staged by the binding (anypitch.py; emit-cuda --any-pitch, off by default until run on a GPU)."""
    if load_rings not in LOAD_RINGS:
        raise EmitError(f"load_rings is one of {', '.join(LOAD_RINGS)}, not {load_rings!r}")
    if graph is None:
        from ..tir import parse_tir
        if not schedule.graph_tir:
            raise EmitError("the schedule file holds no graph ('graph' is empty): solve it again with twill solve")
        graph = parse_tir(schedule.graph_tir, f"<graph of {schedule.kernel}>")
    arch = schedule.arch or machine.arch
    target = target_for(arch)
    if target is None:
        raise EmitError(f"emit-cuda targets sm_90a (Hopper) and sm_100a (Blackwell); machine "
                        f"'{schedule.machine}' is {arch or 'of no known arch'}")
    missing = [op.name for op in graph.ops if op.name not in schedule.by_name]
    if missing:
        raise EmitError(f"the schedule does not place op(s) {', '.join(missing)} of its own graph")
    mma = {op.name: mma_shape(graph, op) for op in graph.ops if op.opcode == "mma"}
    roles, default = _roles(schedule, graph, machine, target, mma)
    role_of = {op: r.name for r in roles for op in r.ops}
    roles, groups = _place(roles, machine, target)
    stages = 1 + max(op.start // schedule.ii for op in schedule.ops)
    tensors = _tensors(graph, mma)
    model = KernelModel(schedule=schedule, graph=graph, machine=machine, arch=arch, target=target, roles=roles,
                        warpgroups=groups, default_roles=default,
                        role_of=tuple(sorted(role_of.items())), tensors=tensors,
                        mma=tuple(sorted(mma.items())), stages=stages, normalizers=(),
                        one_tile_per_cta=one_tile_per_cta, hidden_position=hidden_position,
                        tile_args=bool(tile_args), smem_parts=smem_parts,
                        load_rings=load_rings, any_pitch=any_pitch)
    model = with_occupancy(replace(model, normalizers=_normalizers(model),
                                   ctas_limit=ctas_per_sm or default_limit(model)))
    if tile_args is None:  # a causal loop's tile: its own trip count, its parameters read per tile
        from .ragged import causal
        model = replace(model, tile_args=bool(causal(model).masks))
    scalar_atomic.check(model)  # what of an atomic output is not emitted is refused here
    if tile_copies is None:
        from .copies import pays
        tile_copies = pays(model)
    return with_tile_copies(model) if tile_copies else model


def _normalizers(model: KernelModel) -> tuple[tuple[str, str], ...]:
    """Online softmax: a carry updated through `rescale acc, alpha` whose partner carry is a
    `rowsum ..., l, alpha` of the same alpha is divided by that sum when it is written out."""
    graph = model.graph
    out = []
    rowsums = {}
    for carry, src in graph.yields:
        op = graph.by_name.get(src)
        if op is not None and op.opcode == "rowsum" and len(op.operands) == 3:
            rowsums[op.operands[2].name] = carry
    for carry, src in graph.yields:
        seen, todo = set(), [src]
        while todo:  # walk back through the accumulator chain of this iteration
            name = todo.pop()
            op = graph.by_name.get(name)
            if op is None or name in seen:
                continue
            seen.add(name)
            if op.opcode == "rescale" and len(op.operands) == 2 and op.operands[1].name in rowsums:
                out.append((carry, rowsums[op.operands[1].name]))
                break
            if op.opcode == "mma" and len(op.operands) == 3:
                todo.append(op.operands[2].name)
            elif op.opcode == "rescale" and op.operands:
                todo.append(op.operands[0].name)
    return tuple(sorted(set(out)))
