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


# -- a register value's fragment ------------------------------------------------------------------
# 32-bit registers per thread of a warpgroup (128 threads) that a vector takes in the fragment
# layout the emitted code holds it in, per architecture (twill/emit/fragments.py and the runtime's
# types). A 2-d tile is spread evenly (its bytes over the threads) where its layout uses every thread
# (TILE_ROWS); a vector is not:
# - sm_90a, the wgmma accumulator layout: the 4 threads of a quad share each row (a thread holds
#   rows 16w + t/4 and + 8 of each 64-row block), so a value per row takes M / 32 registers
#   (`Rows<M/64>`: 2 floats per 64 rows, any dtype); a value per column N / 2 (`Cols<N>`: each
#   thread's columns of every 8, replicated over the rows).
# - sm_100a, tcgen05.ld's 32x32b layout: a row per thread, so a value per row takes one register
#   per started 128 rows (`TScal`, `TScalR<64>`), a value per column N (`TCols<N>`, every row's).
VECTOR_WORDS = {
    "sm_90a": {"rows": lambda m: math.ceil(m / 32), "cols": lambda n: math.ceil(n / 2)},
    "sm_100a": {"rows": lambda m: math.ceil(m / 128), "cols": lambda n: n},
}


# The rows over which a warpgroup's fragment of a 2-d tile spreads every thread, per architecture; a
# tile of fewer rows leaves threads idle and takes the registers of this many rows. sm_100a,
# tcgen05.ld's layouts (`TRow<N, R>`, `TRow16<N, H, R>`): a 128-row tile is a row per thread; a
# 64-row one (tcgen05's M = 64) a row per thread of lanes 0-15 of each warp, its N columns on each of
# those 64 threads, so twice its bytes (an f32[64, 128] tile is 128 registers a thread, not 64). sm_90a's
# wgmma layout spreads a 64-row block over all 128 threads: its bytes.
TILE_ROWS = {"sm_100a": 128}


def vector_kind(shape: tuple[int, ...]) -> str | None:
    """'rows' for a value per row ([M], [M, 1]), 'cols' for a value per column ([1, N]), else None
    (the emitter's rule: twill/emit/fragments.py)."""
    if len(shape) == 1 or (len(shape) == 2 and shape[1] == 1 and shape[0] > 1):
        return "rows" if shape != (1,) else None
    return "cols" if len(shape) == 2 and shape[0] == 1 and shape[1] > 1 else None


def register_bytes(arch: str, shape: tuple[int, ...], nbytes: int, warp_group: int = 4) -> int:
    """Bytes a register value takes in the register file of the warpgroup that holds it: its own
    bytes for a tile, and for a row or column vector the registers of its fragment (VECTOR_WORDS)
    over all of the warpgroup's threads, replication included (an f32[64] row statistic: 2 per
    thread on sm_90a, 1024 bytes, not 256); for a 2-d tile of fewer rows than its fragment spreads
    over (TILE_ROWS), those rows' registers (an f32[64, 128] on sm_100a: 65536 bytes, not 32768). An
    architecture without a table keeps the bytes."""
    kind = vector_kind(tuple(shape))
    if kind is None and len(shape) == 2 and 0 < shape[0] < TILE_ROWS.get(arch, 0):
        return nbytes * math.ceil(TILE_ROWS[arch] / shape[0])
    words = VECTOR_WORDS.get(arch, {}).get(kind) if kind else None
    if words is None:
        return nbytes
    n = shape[0] if kind == "rows" else shape[1]
    return max(nbytes, words(n) * 4 * 32 * warp_group)
