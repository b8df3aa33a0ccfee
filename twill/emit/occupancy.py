"""CTAs per SM: how many CTAs of an emitted kernel one SM runs at once.

A warp-specialized kernel that gives its roles the whole register file (`setmaxnreg`) runs one CTA
per SM, and its tiles' pipeline fill and epilogue are then idle time on the tensor core. Where a
schedule's roles need far fewer registers (a GEMM's 64x128 half needs 64 per thread, not 248),
two CTAs fit, and one CTA's fill and epilogue overlap the other's main loop (Triton's GEMMs run so:
docs/triton-results.md). The rule (`ctas_per_sm`), from the machine's register file and shared
memory and the Target's SM limits: the largest k for which

- registers: the CTA's warpgroups, each at the registers the model counts for its roles at their
  fullest (the joint stage's check, `ptxas_loop.model_registers`; in whole granules, at least
  `min_registers`), fit the pool one CTA is launched with when k share the SM's file
  (`registers.fit_warpgroups` with k); the budgets are then that fit, never below a role's need;
- shared memory: k CTAs, each its `Smem`, the 1 KiB the kernel may skip to align it and the
  system's reserve per CTA, fit the SM's shared memory (the machine's per-CTA `smem_bytes` plus
  one reserve);
- threads and CTAs: k x the CTA's threads within the SM's threads, k within its CTAs;
- the launch: each CTA gets at least `Target.min_launch_registers` (128) registers a thread, as
  ptxas compiles every instruction within the launch count (below it, kernels spilled or failed).

A schedule without roles (emit-cuda's default roles) has no counted need: one CTA, as before;
likewise on a target whose CTAs allocate tensor memory (`Target.shares_sm`: sm_100a).
What `Smem` holds by choice (the staging of output tiles for TMA, a second copy of the invariant
inputs: smem.py) takes only the shared memory that keeps the CTAs per SM the rest allows
(`smem_share` at `register_ctas`): three ring slots at two CTAs per SM rather than the same with a
TMA store's staging at one.
The kernel is compiled under `__launch_bounds__(kThreads, k)` and a persistent grid launches k
CTAs per SM (kCtasPerSm).
"""
from __future__ import annotations

import math
from dataclasses import replace

from ..registers import fit_warpgroups, launch_registers
from .model import KernelModel, WarpGroup


def warpgroup_needs(model: KernelModel) -> list[int] | None:
    """Each warpgroup's register need per thread (the largest of its roles'), in granules; None
    where the schedule gives no count (no roles of its own)."""
    if model.default_roles:
        return None
    from ..ptxas_loop import model_registers
    need = model_registers(model.schedule, model.machine)
    if not need:
        return None
    lim = model.machine.limits
    g = lim.register_granule
    return [max(lim.min_registers, math.ceil(max(need.get(r, lim.min_registers) for r in wg.roles) / g) * g)
            for wg in model.warpgroups]


def fitted(model: KernelModel, ctas: int, needs: list[int]) -> list[int] | None:
    """The warpgroups' budgets fitted to the pool of a CTA launched `ctas` to an SM, or None where
    a warpgroup would get less than it needs."""
    lim = model.machine.limits
    small = [i for i, wg in enumerate(model.warpgroups) if wg.small]
    budgets = fit_warpgroups(lim, [wg.registers for wg in model.warpgroups], small, ctas)
    if budgets is None or any(b < n for b, n in zip(budgets, needs)):
        return None
    return budgets


def smem_fits(model: KernelModel, ctas: int, smem: int) -> bool:
    """Do `ctas` CTAs of `smem` bytes of `Smem` each fit an SM's shared memory?"""
    t = model.target
    per_sm = model.machine.limits.smem_bytes + t.cta_smem_reserve
    return ctas * (smem + 1024 + t.cta_smem_reserve) <= per_sm


def _register_ctas(model: KernelModel) -> dict[int, list[int]]:
    """k -> the warpgroups' budgets at k, for each k > 1 that the registers, the SM's threads and
    CTAs, and the model's `ctas_limit` allow."""
    needs = warpgroup_needs(model) if model.target.shares_sm else None
    if needs is None:
        return {}
    t = model.target
    cap = min(t.sm_threads // model.threads, t.sm_ctas, model.ctas_limit or t.sm_ctas)
    lim = model.machine.limits
    fits = {k: fitted(model, k, needs) for k in range(2, cap + 1)
            if launch_registers(lim, model.threads, k) >= t.min_launch_registers}
    return {k: b for k, b in fits.items() if b is not None}


def register_ctas(model: KernelModel) -> int:
    """The most CTAs per SM the registers (and the SM's threads and CTAs) allow, shared memory aside."""
    return max(_register_ctas(model), default=1)


def smem_share(model: KernelModel, ctas: int) -> int:
    """Bytes of `Smem` each of `ctas` CTAs may take, so that all of them fit an SM (smem_fits)."""
    t = model.target
    per_sm = model.machine.limits.smem_bytes + t.cta_smem_reserve
    return min(per_sm // ctas - 1024 - t.cta_smem_reserve, model.machine.limits.smem_bytes - 1024)


def ctas_per_sm(model: KernelModel, smem: int) -> tuple[int, list[int] | None]:
    """(k, the warpgroups' budgets at k; None for the model's own) by the module's rule."""
    for k, budgets in sorted(_register_ctas(model).items(), reverse=True):
        if smem_fits(model, k, smem):
            return k, budgets
    return 1, None


def default_limit(model: KernelModel) -> int:
    """The CTAs per SM emit-cuda allows when none is asked for (`ctas_per_sm=None`): 2 where the loop's
    computing roles are one warpgroup whose ops are not all mmas (an attention of 64-row tiles: while that
    warpgroup runs its row max, exp2 and sums, the tensor core waits, unless a second CTA's warpgroup has
    its mmas ready), and that warpgroup's counted registers are within a granule of what 2 CTAs are
    launched with (ptxas compiles every instruction within the launch count, 128, whatever `setmaxnreg`
    gives later; the model counts about a granule over ptxas: attn_lse 136, ptxas 128 and no spill,
    where attn_two_pass's second loop, counted 232, spilled 40 bytes); else 1. A warpgroup of mmas
    alone keeps the tensor core fed through wgmma's own queue, and GEMMs ran fastest at one CTA with a
    ring 4 deep (docs/triton-results.md). The rule above still decides whether 2 fit. Measured on an
    H100 (docs/triton-results.md, session 31): attn_lse (64-row tiles, D = 64) 0.74x -> 1.01x Triton's
    kernel time; the 128-row attentions do not fit 2.
    A loop of elementwise ops alone (no mma, no carry: bias + GELU, SwiGLU, whose column split spreads it over
    the grid) is also allowed 2: its one computing warpgroup keeps too few loads and ALU chains in flight
    for an SM's share of the memory bandwidth, and the binding's column split then fills two CTAs an SM
    (binding_runtime.split_elements). Measured on an H100 (docs/triton-results.md, session 36): bias + GELU
    4096 x 4096 34.9 -> 28.8 us, SwiGLU 1000 x 4096 11.8 -> 8.0 us, 4096 x 4096 41.2 -> 38.8 us."""
    opcode = {op.name: op.opcode for op in model.graph.ops}
    if not model.graph.carries and "mma" not in opcode.values():
        return 2
    computing = {o: r for r in model.roles for o in r.ops if opcode.get(o, "load") != "load"}
    groups = {r.first_warp // 4 for r in computing.values()}
    kinds = {opcode[o] for o in computing}
    if len(groups) != 1 or "mma" not in kinds or kinds == {"mma"}:
        return 1
    needs = warpgroup_needs(model)
    lim = model.machine.limits
    launch = launch_registers(lim, model.threads, 2)
    return 2 if needs is not None and needs[groups.pop()] <= launch + lim.register_granule else 1


def with_occupancy(model: KernelModel) -> KernelModel:
    """`model` with its CTAs per SM (and the warpgroups' budgets at that many) by the rule."""
    from .program import Program
    k, budgets = ctas_per_sm(model, Program(model).smem_bytes())
    if k == 1:
        return model
    groups = tuple(replace(wg, registers=b) for wg, b in zip(model.warpgroups, budgets))
    budget = {r.name: min(wg.registers for wg in groups if r.name in wg.roles) for r in model.roles}
    roles = tuple(replace(r, registers=min(r.registers, budget[r.name])) for r in model.roles)
    return replace(model, ctas_per_sm=k, warpgroups=groups, roles=roles)
