"""Tile copies: two warpgroups of a GEMM-like kernel's computing role take a persistent CTA's
tiles in turn, so one's epilogue (the accumulator converted, staged and stored) overlaps the
other's main loop (CUTLASS's ping-pong kernel; Triton gets the same overlap from two CTAs per SM).

With one computing warpgroup a persistent CTA's tensor core idles from the last wgmma of a tile
to the first of the next: the wgmma drain, the epilogue's math, its stores. Measured on an H200
(docs/triton-results.md, session 24): the persistent fp16 and the fp8 GEMMs ran at 0.90x Triton's
kernel time with one computing warpgroup.

The rule (`with_tile_copies`): on a target with a persistent grid, one CTA per SM, where

- the schedule has its own roles: one computing role of one warpgroup, the other roles 1-warp
  roles that only load (so every ring is a TMA load's, filled by one producer in tile order);
- the kernel keeps no inputs in shared memory across the loop, hands nothing between roles
  after the loop, stages no register operand for the tensor core and holds nothing in tensor memory;
- the warpgroups, the copy included, fit the register file with each at least the registers the
  model counts for its roles (occupancy.py's `warpgroup_needs`), and `Smem` with the copy's own
  output staging fits the machine's shared memory.

Copy c computes the CTA's tiles of rounds c, c + 2, ... Ring positions continue across the CTA's
tiles (TileIdx::pos, kernel.py: each copy counts the iterations of the tiles it skips too), so the
loop may run any number of iterations. A copy may wait on a ring only after the other copy has
passed all its waits of the tile before (an mbarrier's parity tells apart two phases, not three:
a wait at position p could otherwise pass on the phase of p - 2 * depth): the copy that ends its
tile's waits arrives on the turn barrier, and the next copy syncs on it before its tile
(`round > 0`). Each copy has its own named barrier and output staging.
"""
from __future__ import annotations

from dataclasses import replace

from ..registers import fit_warpgroups
from .model import KernelModel, WarpGroup

COPIES = 2


def eligible_role(model: KernelModel):
    """The one computing role a tile copy duplicates, or None (see the module docstring)."""
    m = model
    if m.ctas_per_sm != 1 or not m.target.persistent_grid or m.target.tensor_memory or m.default_roles:
        return None
    big = [r for r in m.roles if r.is_warpgroup]
    if len(big) != 1 or big[0].warpgroups != 1:
        return None
    if any(not m.is_load(op) for r in m.roles if not r.is_warpgroup for op in r.ops):
        return None
    if any(v.kind == "input" and v.type.space == "smem" for v in m.values.values()):
        return None
    return big[0]


def pays(model: KernelModel) -> bool:
    """Whether emit-cuda copies the computing warpgroup by default (`tile_copies=None`): where a
    GEMM-like graph (its loop runs an mma) has an epilogue that computes (ops after the loop other
    than joins and conversions), whose time a copy hides behind the other copy's main loop on the
    tensor core. Measured on an H100 (docs/triton-results.md, session 27), against the same
    schedule without a copy: GEMM + GELU 0.94x -> 1.05x Triton, the fp8 GEMM with its scales
    0.91x -> 0.93x, the plain persistent GEMM (no epilogue ops) 0.97x -> 0.94x."""
    from ..vocab import lookup
    moves = {"join", "convert"}  # families that only move or retype values (W4A16's join: no copy)
    math = [op for op in model.graph.epilogue.ops if getattr(lookup(op.opcode), "family", None) not in moves]
    return bool(math) and any(op.opcode == "mma" for op in model.graph.ops)


def with_tile_copies(model: KernelModel) -> KernelModel:
    """`model` with a copy of its computing warpgroup where the module's rule allows it."""
    role = eligible_role(model)
    if role is None:
        return model
    from .occupancy import warpgroup_needs
    needs = warpgroup_needs(model)
    if needs is None:
        return model
    lim = model.machine.limits
    first = role.first_warp // 4
    groups = list(model.warpgroups) + [WarpGroup(len(model.warpgroups), (role.name,), model.warpgroups[first].registers,
                                                 copy=1)]
    needs = needs + [needs[first]]
    if 128 * len(groups) > model.target.max_threads:
        return model
    small = [i for i, wg in enumerate(groups) if wg.small]
    budgets = fit_warpgroups(lim, [wg.registers for wg in groups], small)
    if budgets is None or any(b < n for b, n in zip(budgets, needs)):
        return model
    groups = tuple(replace(wg, registers=b) for wg, b in zip(groups, budgets))
    budget = {r.name: min(wg.registers for wg in groups if r.name in wg.roles) for r in model.roles}
    roles = tuple(replace(r, registers=min(r.registers, budget[r.name])) for r in model.roles)
    copied = replace(model, warpgroups=groups, roles=roles, tile_copies=COPIES)
    from .program import Program
    p = Program(copied)
    if (p.handoffs or p.scratch or p.scratch_b or p.pingpong or p.smem_bytes() > p.smem_limit()
            or any(p.spare_registers(r) < 0 for r in copied.roles if r.is_warpgroup)
            or any(c > 1 for c in p.copies.values())):
        return model
    return copied
