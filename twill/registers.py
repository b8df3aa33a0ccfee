"""The register file of a CTA: one rule that the joint stage, verify and emit-cuda all read.

Every number comes from the machine's `limits` (PTX ISA and the CUDA Programming Guide):

- A thread's registers are allocated in granules of `register_granule` (8), so the
  `registers_per_thread` (255) a thread may address take `launch_max` (256) at launch.
- Launch: under `__launch_bounds__(threads, 1)` a CTA of `threads` threads starts with the SM's
  `registers_per_sm` divided evenly, in granules, at most `launch_max` each (`launch_registers`):
  3 warpgroups get 168 per thread, 1 or 2 warpgroups 256. Under `__launch_bounds__(threads, k)`
  (k CTAs to an SM, twill/emit/occupancy.py) the file is divided among k CTAs' threads.
- Pool: `setmaxnreg` only moves registers between the warpgroups of a running CTA, so their
  budgets must fit what it was launched with, threads x launch_registers (`register_pool`); a
  warpgroup asking for more than the others gave back waits forever.
- Budgets: a role's budget is a multiple of the granule in [min_registers, registers_per_thread]
  (`budget_ok`); `setmaxnreg` takes one count per warpgroup, so warpgroup roles take their
  warpgroups at their budget and one-warp roles fill warpgroups four at a time, each at the
  largest budget among them (`register_file`).
- Split: the joint stage gives each role what it needs, then shares the remainder among the
  roles that compute, one granule a round (`grow_budgets`, FA3's 24/240/240); emit-cuda derives
  budgets for a schedule without roles (`default_budget`) and fits warpgroup budgets into the
  pool, one-warp warpgroups first (`fit_warpgroups`).
"""
from __future__ import annotations

import math


def granule_down(lim, x: int) -> int:
    """x rounded down to a whole granule, at least one granule."""
    g = lim.register_granule
    return max(g, (x // g) * g)


def launch_max(lim) -> int:
    """Registers a thread can hold at launch or ask `setmaxnreg` for: registers_per_thread in whole
    granules (255 -> 256)."""
    g = lim.register_granule
    return -(-lim.registers_per_thread // g) * g


def launch_registers(lim, threads: int, ctas: int = 1) -> int:
    """Registers per thread a CTA of `threads` threads is launched with when `ctas` CTAs share the
    SM (`__launch_bounds__(threads, ctas)`): the SM's file divided evenly among their threads, in
    granules, at most `launch_max`."""
    g = lim.register_granule
    return min((lim.registers_per_sm // (threads * ctas)) // g * g, launch_max(lim))


def register_pool(lim, warpgroups: int, ctas: int = 1) -> int:
    """Registers a CTA of `warpgroups` warpgroups is launched with, all threads together (`ctas`
    CTAs to an SM)."""
    threads = 32 * lim.warp_group * warpgroups
    return threads * launch_registers(lim, threads, ctas)


def budget_ok(lim, budget: int) -> bool:
    """Can a role ask `setmaxnreg` for `budget` registers per thread?"""
    return budget % lim.register_granule == 0 and lim.min_registers <= budget <= lim.registers_per_thread


def launched_warpgroups(lim, warps: list[int]) -> tuple[int, int]:
    """(warpgroups of warpgroup roles, warpgroups the one-warp roles fill four at a time) for roles
    of the given warps: the CTA launches whole warpgroups."""
    wgsz = lim.warp_group
    return sum(w // wgsz for w in warps if w >= wgsz), -(-sum(1 for w in warps if w < wgsz) // wgsz)


def register_file(lim, roles: list[tuple[int, int]]) -> tuple[int, int]:
    """(registers the budgets take, registers the launch provides) for roles given as (warps,
    budget). Warpgroup roles take their warpgroups at their budget; one-warp roles fill warpgroups
    four at a time, each warpgroup at the largest budget among them (one `setmaxnreg` per group)."""
    wgsz, threads = lim.warp_group, 32 * lim.warp_group
    big, packed = launched_warpgroups(lim, [w for w, _ in roles])
    small = [b for w, b in roles if w < wgsz]
    used = sum(threads * (w // wgsz) * b for w, b in roles if w >= wgsz) + threads * packed * max(small, default=0)
    return used, register_pool(lim, max(big + packed, 1))


def grow_budgets(lim, roles: list[tuple[int, int, bool]]) -> list[int]:
    """Budgets for roles given as (warps, registers needed, may grow): each need in whole granules
    (at least min_registers), then every role that may grow takes one granule more per round,
    while the register file holds all of them, so that roles alike stay alike."""
    g = lim.register_granule
    budgets = [max(lim.min_registers, math.ceil(need / g) * g) for _, need, _ in roles]
    growers = [i for i, (_, _, grows) in enumerate(roles) if grows]
    while True:
        growing = [i for i in growers if budgets[i] + g <= lim.registers_per_thread]
        for i in growing:
            budgets[i] += g
        used, pool = register_file(lim, [(w, b) for (w, _, _), b in zip(roles, budgets)])
        if not growing or used > pool:
            for i in growing:
                budgets[i] -= g
            return budgets


def producer_budget(lim) -> int:
    """The budget of emit-cuda's default load warp: the least `setmaxnreg` takes."""
    return granule_down(lim, lim.min_registers)


def default_budget(lim, warpgroups: int, producer: bool) -> int:
    """The budget of emit-cuda's default consumer role of `warpgroups` warpgroups: the SM's file
    less the load warp's warpgroup, shared evenly, in granules, at most registers_per_thread."""
    free = lim.registers_per_sm - (32 * lim.warp_group * producer_budget(lim) if producer else 0)
    return min(granule_down(lim, free // (32 * lim.warp_group * warpgroups)),
               granule_down(lim, lim.registers_per_thread))


def fit_warpgroups(lim, budgets: list[int], small: list[int], ctas: int = 1) -> list[int] | None:
    """Warpgroup budgets that fit the pool (of a CTA launched `ctas` to an SM): the warpgroups of
    one-warp roles (indices `small`, a TMA or MMA issuer paying for a whole warpgroup) give up
    registers first, down to min_registers, then the largest budgets one granule at a time; None
    where even that cannot fit."""
    g = lim.register_granule
    pool = register_pool(lim, len(budgets), ctas)
    threads = 32 * lim.warp_group
    budgets = list(budgets)
    for i in small:
        while threads * sum(budgets) > pool and budgets[i] - g >= lim.min_registers:
            budgets[i] -= g
    while threads * sum(budgets) > pool:
        i = max(range(len(budgets)), key=lambda k: (budgets[k], -k))
        if budgets[i] - g < lim.min_registers:
            return None
        budgets[i] -= g
    return budgets
