"""The register file's rule (twill/registers.py), the one the joint stage, verify and emit-cuda read."""
from __future__ import annotations

from dataclasses import replace

from twill.machine import load_machine
from twill.registers import (budget_ok, default_budget, fit_warpgroups, grow_budgets, launch_max, launch_registers,
                             producer_budget, register_file, register_pool)

LIM = load_machine("h100").limits


def test_launch_registers_divide_the_file_in_granules_up_to_the_launch_maximum():
    assert launch_max(LIM) == 256  # 255 addressable, allocated in granules of 8
    assert [launch_registers(LIM, 128 * w) for w in (1, 2, 3, 4)] == [256, 256, 168, 128]
    assert [register_pool(LIM, w) for w in (1, 2, 3, 4)] == [32768, 65536, 3 * 128 * 168, 65536]
    small = replace(LIM, registers_per_thread=100)  # a reduced budget (--registers 100)
    assert launch_max(small) == 104 and launch_registers(small, 128) == 104 and launch_registers(small, 512) == 128 - 24


def test_budgets_are_granules_within_the_bounds():
    assert budget_ok(LIM, 24) and budget_ok(LIM, 248) and not budget_ok(LIM, 256) and not budget_ok(LIM, 20)
    assert not budget_ok(LIM, 100)


def test_one_warp_roles_fill_a_warpgroup_at_their_largest_budget():
    used, pool = register_file(LIM, [(1, 24), (1, 64), (4, 200)])
    assert used == 128 * (64 + 200) and pool == register_pool(LIM, 2)


def test_growth_shares_the_remainder_among_the_roles_that_compute():
    """FA3's shape: a load warp at the minimum, two consumer warpgroups grown alike to fill the
    three warpgroups' pool (3 x 128 x 168 = 128 x (24 + 240 + 240))."""
    budgets = grow_budgets(LIM, [(1, 10, False), (4, 150, True), (4, 170, True)])
    assert budgets == [24, 232, 248]
    used, pool = register_file(LIM, [(1, 24), (4, 232), (4, 248)])
    assert used <= pool and used + 2 * 128 * 8 > pool  # one more round would not fit
    assert grow_budgets(LIM, [(1, 10, False), (4, 100, True), (4, 100, True)]) == [24, 240, 240]


def test_emit_defaults_and_the_fitting_to_the_pool():
    assert producer_budget(LIM) == 24
    assert default_budget(LIM, 1, producer=True) == 248  # capped by registers_per_thread
    assert default_budget(LIM, 3, producer=True) == (65536 - 128 * 24) // 384 // 8 * 8
    # a one-warp warpgroup gives up registers first, then the largest budgets a granule at a time
    assert fit_warpgroups(LIM, [240, 240, 240], small=[0]) == [24, 240, 240]
    assert fit_warpgroups(LIM, [168, 248, 248], small=[]) == [168, 168, 168]
    assert fit_warpgroups(replace(LIM, registers_per_sm=128 * 3 * 16), [24, 24, 24], small=[]) is None
