"""The rings of every emitted kernel, run as a protocol (tests/ringcheck.py): no role waits forever.

tests/data/ring/ holds two kernels that deadlocked before the ring depth counted the window in
which an asynchronous wgmma frees its slot (Program._late_release): Triton 3.6's causal attention
forward and attention-backward dQ kernels, imported before the pipeliner
(`twill import X.ttgir`) and solved with `twill solve --gpu h200` (the stored schedules).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from ringcheck import negative_positions, restart_every_tile, ring_deadlock, ring_tiles  # noqa: E402
from twill.emit import emit_cuda  # noqa: E402
from twill.machine import load_machine  # noqa: E402
from twill.schedule import Schedule  # noqa: E402

GOLDEN = sorted(p for p in (ROOT / "tests" / "golden").rglob("*.cu") if "constexpr int kStages" in p.read_text())
DATA = ROOT / "tests" / "data" / "ring"
IMPORTED = ("attn_causal_fwd_sm90.h200", "attn_bwd_dq_sm90.h200")


def _stages(text: str) -> int:
    return int(re.search(r"constexpr int kStages = (\d+);", text).group(1))


def _emitted(name: str) -> str:
    s = Schedule.from_json((DATA / f"{name}.json").read_text())
    return emit_cuda(s, load_machine(s.machine))


def test_every_golden_kernel_is_checked():
    assert len(GOLDEN) >= 20  # the kernels that the emitter's goldens hold (entry files have no loop)


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: str(p.relative_to(ROOT / "tests" / "golden")))
def test_no_golden_kernel_deadlocks(path):
    text = path.read_text()
    S = _stages(text)
    for n in range(S, S + 7):
        assert ring_deadlock(text, n) == {}, n
        assert negative_positions(text, n) == [], n


def test_an_instance_before_the_first_is_not_released():
    """Held-out attn_kvlen's h200 schedule as emit-cuda's ptxas loop re-solved it (80 registers more
    for consumer0, I = 118): its softmax role computes alpha = exp2(m_i - m_new) from m_new[j - 1],
    whose instance -1 in the prologue is the carry's -inf, never in the ring. Its release was emitted
    all the same: `release_by_warp(-1)`, slot -1 % 2 = -1 in C++, an arrival on the wrong barrier
    (the kernel died with a launch failure on the GPU). None is emitted now."""
    text = _emitted("attn_kvlen_sm90.h200.reserve")
    assert "alpha = exp2 m_i, m_new (iteration 0)" in text
    for n in range(_stages(text), 10):
        assert negative_positions(text, n) == [] and ring_deadlock(text, n) == {}, n


PERSISTENT = [p for p in GOLDEN if "constexpr bool kPersistent = true;" in p.read_text()]


def test_the_goldens_hold_persistent_kernels():
    assert len(PERSISTENT) >= 10


@pytest.mark.parametrize("path", PERSISTENT, ids=lambda p: str(p.relative_to(ROOT / "tests" / "golden")))
def test_a_persistent_ctas_tiles_of_any_length_continue_their_rings(path):
    """A persistent CTA's tiles (kernel<true>) run one after another on hardware-like mbarriers
    (ringcheck.ring_tiles): tiles of lengths that are no multiple of kPhasePeriod (17 with the
    GEMMs' period of 8), and lengths that differ from tile to tile (a causal grid's, a ragged
    loop's), continue each ring's positions (TileIdx::pos): no wait passes on another position's
    phase, no release frees another occupant, no role hangs."""
    text = path.read_text()
    S = _stages(text)
    for ns in ([17, 17, 17], [S, S + 1, S + 2, S + 3, S + 5], [S + 9, S + 2, S, S + 6], [S + 3]):
        assert ring_tiles(text, ns) == [], ns


@pytest.mark.parametrize("path", PERSISTENT[:4], ids=lambda p: str(p.relative_to(ROOT / "tests" / "golden")))
def test_the_check_finds_rings_restarted_every_tile(path):
    """The same kernels with every ring restarted at 0 per tile (kernel<true> as it was): the check
    finds the hang or the wrong phase at 17-iteration tiles, and none at multiples of kPhasePeriod
    (where restarting was sound, and the launcher used to allow kernel<true> only there)."""
    text = path.read_text()
    period = int(re.search(r"constexpr int kPhasePeriod = (\d+);", text).group(1))
    old = restart_every_tile(text)
    assert ring_tiles(old, [17, 17, 17]) != []
    k = -(-_stages(text) // period) * period
    assert ring_tiles(old, [k, k + period, k]) == []


@pytest.mark.parametrize("name", IMPORTED)
def test_the_imported_kernels_that_hung_no_longer_deadlock(name):
    text = _emitted(name)
    for n in range(_stages(text), 9):
        assert ring_deadlock(text, n) == {}, n


def test_the_check_finds_the_causal_deadlock_with_p_one_slot_deep():
    """The H200 causal kernel as it was emitted before: P's ring one slot deep. consumer0 waits to
    hand P[1] over while consumer1, which frees P[0] only in the window after its wgmma read it,
    waits for corr[1], which consumer0 writes after P[1]."""
    text = _emitted("attn_causal_fwd_sm90.h200")
    short = re.sub(r"twill::Ring<\d+> ring_p;", "twill::Ring<1> ring_p;", text)
    assert short != text
    stuck = ring_deadlock(short, 4)
    assert stuck["consumer0"][:2] == ("wait_empty", "p") and stuck["consumer1"][:2] == ("wait_full", "corr")


def test_the_check_finds_the_dq_deadlock_with_k_freed_after_its_refill_is_awaited():
    """The dQ kernel as it was emitted before: consumer0 freed K[j-2] after its first wgmma of
    window j, which waits for K[j], the load of which waits for that slot (two slots)."""
    text = _emitted("attn_bwd_dq_sm90.h200")
    lines = text.split("\n")
    i = next(k for k, l in enumerate(lines) if "sm.ring_k.release_by_warp(tile.pos + j - 2);" in l)
    assert "sm.ring_k.wait_full(tile.pos + j);" in lines[i + 1]
    lines[i], lines[i + 1] = lines[i + 1], lines[i]  # the release where it was
    stuck = ring_deadlock("\n".join(lines), 4)
    assert stuck["load"][:2] == ("wait_empty", "k") and stuck["consumer0"][:2] == ("wait_full", "k")


def test_a_persistent_gemms_frees_at_the_end_of_a_tile_are_run():
    """`for (int i = n - h; i < n; ++i) release(i)` of a tile that is not the CTA's last: the check
    runs the CTA's last tile, which keeps them (the loop over i raised NameError before)."""
    text = (ROOT / "tests" / "golden" / "emit" / "gemm_hopper.h100.cu").read_text()
    assert "if (!tile.last) for (int i = n - 1; i < n; ++i)" in text
    assert ring_deadlock(text, 3) == {}


@pytest.mark.parametrize("seed", [*range(5), *(pytest.param(s, marks=pytest.mark.extended) for s in range(5, 10))])
def test_random_loops_do_not_deadlock(seed):
    """The random FlashAttention-like loops of test_emit (streamed loads of random depth read by
    wgmmas), solved for each target: the emitted rings run to the end for every loop count."""
    import random
    from test_emit import _ring_graph
    from twill.pipeline import solve
    from twill.tir import parse_tir
    text = _ring_graph(random.Random(seed))
    for gpu in ("h100", "h200", "b200"):
        machine = load_machine(gpu)
        cu = emit_cuda(solve(parse_tir(text, f"rings{seed}.tir"), machine), machine)
        S = _stages(cu)
        for n in range(S, S + 5):
            assert ring_deadlock(cu, n) == {}, (gpu, text, n)


@pytest.mark.parametrize("name", IMPORTED)
def test_the_imported_kernels_free_every_ring_slot_once(name):
    """Their rings, deeper or freed at another place now, are still freed exactly once per instance
    (a persistent CTA's next tile starts on empty rings) and no role waits for a slot it holds."""
    from collections import Counter
    from test_emit import ring_readers
    from twill.emit import build_model
    from twill.emit.cuda import Renderer
    s = Schedule.from_json((DATA / f"{name}.json").read_text())
    r = Renderer(build_model(s, load_machine(s.machine)))
    for chan, role, n in ring_readers(r):
        assert Counter(r.p.released(role, chan, n)) == Counter(range(n)), (chan.value, role, n)
        assert r.p.waits_for_its_own_release(role, chan, n) == [], (chan.value, role, n)
