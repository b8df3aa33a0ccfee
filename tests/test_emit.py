"""twill emit-cuda: golden .cu files, nvcc builds without warnings or spills, the CLI contract.

The schedules come from tests/data/emit/ (the solver's output, stored; regenerate.py rebuilds
them). Compile tests need nvcc (PATH or /usr/local/cuda/bin) and are skipped, saying so, without it.
Numerical checks on an H200 are outside CI: see docs/emit-cuda.md.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest
from click.testing import CliRunner

from twill.emit import EmitError, build_model, emit_cuda
from twill.errors import InputError
from twill.emit.cuda import Renderer
from twill.machine import load_machine
from twill.schedule import Schedule
from twill.tir import parse_tir
from twill_cli.main import main

from conftest import nvcc, nvcc_compile

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "emit"

# fixture -> (target, spill bytes ptxas must report, or None where the schedule's registers
# over-ask and spills are recorded, not required)
FIXTURES = {
    "fig1.h100": ("sm_90a", 0),
    "gemm_hopper.h100": ("sm_90a", 0),
    # the SWP-only schedule has no roles: one warpgroup holds both 64x256 accumulators (256
    # registers per thread) and spills; the joint stage's two consumer warpgroups do not
    "gemm_hopper.h100.swp": ("sm_90a", None),
    "attention_fwd_hopper.h100": ("sm_90a", 0),
    # 192-key tiles, S m64n192 (96 registers): no spills; a partial last tile is masked. Its buffers
    # fill the consumers' 240 registers, so it has no persistent kernel<true>
    "attention_fwd_hopper_k192.h100": ("sm_90a", 0),
    # the H200's description (exp2's measured latency): P in two buffers, FA3's intra-warpgroup
    # overlap, so no persistent kernel<true>; bench/gpu_bench.py runs it
    "attention_fwd_hopper.h200": ("sm_90a", 0),
    # FP8 attention: e4m3 Q, K, V^T; P an e4m3 register tile (Frag8) shuffled into wgmma's 8-bit A
    # fragment for P V^T^T, O multiplied by out_scale (V's descale). FA3's roles, as emit-cuda's
    # ptxas loop leaves them (I = 205: consumer0 given 24 registers more than the model counts)
    "attention_fwd_fp8_hopper.h200": ("sm_90a", 0),
    # the same roles as the solver leaves them (I = 195): no spills, wgmmas serialized (SERIALIZED)
    "attention_fwd_fp8_hopper.h200.plain": ("sm_90a", 0),
    # the SWP-only schedule holds P in two buffers, 14 registers to spare: no kernel<true> (whose
    # wgmmas ptxas serialized). Since kernel<true> went, ptxas spills about 120 bytes in kernel<false>'s
    # mask-free instance, whose code differs by one branch; it is not run on the GPU
    "attention_fwd_simple.h100.swp": ("sm_90a", None),
    "attention_fwd_simple.h100": ("sm_90a", None),  # one warpgroup holds O and P (128 rows): spills
    # the joint stage's answer since operands count while their reader runs: consumer0 issues
    # S(i+1) only after exp2(i) has consumed S(i), so one 128-row S is live at a time
    "attention_fwd_simple.h100.split": ("sm_90a", 0),
    # three warpgroups: S, P, dP, dS and dQ on one (160 registers), dV and dK on one each. No
    # spills since its wgmma descriptors are not hoisted out of the loop and dQ leaves by TMA;
    # ptxas still serializes its wgmmas (SERIALIZED below)
    "attention_bwd_hopper.h100": ("sm_90a", 0),
    "attention_fwd_blackwell.b200": ("sm_100a", 0),  # P in tensor memory, as FA4: no spills
    "attention_fwd_blackwell.b200.fa4": ("sm_100a", None),  # FA4's five roles pinned: spills a little
    # 64-row tcgen05 tiles (M = 64); S and dQ take turns in 128 columns: 512 in all, not 640.
    # Spills a little: a 64-row tile read with tcgen05.ld 32x32b fills half the lanes, so P and dS
    # cost a whole row per thread (64 registers), twice what the model counts
    "attention_bwd_blackwell.b200": ("sm_100a", None),
    # rows of 32 and 64 bytes (32- and 64-byte swizzle); tests/test_gpu.py runs them
    "gemm_k16n32.h100": ("sm_90a", 0),
    "gemm_k32n16.h100": ("sm_90a", 0),
    "gemm_bf16.h100": ("sm_90a", 0),  # bf16 in and out; tests/test_gpu.py runs it
    # head dimension 64, P in two buffers (FA3's intra-warpgroup overlap): no spills. It has no
    # persistent kernel<true>, which spilled 48 bytes at 240 registers (the model counts ~192)
    "attention_fwd_d64.h100": ("sm_90a", 0),
    # imported from Triton's TTGIR (tests/data/ttgir); tests/test_gpu.py runs them
    "triton_attn_fwd_tma_sm90.h100": ("sm_90a", 0),
    "triton_matmul_sm90.h100": ("sm_90a", 0),
    # Triton's persistent GEMM imported with --grow-rows 2: two 128-row tiles sharing B, and a
    # launch that runs the first alone per CTA where its tiles fit the SMs at once (halves.py)
    "grown_gemm_persistent_sm90.h200": ("sm_90a", 0),
    "triton39_mm_acol.h100": ("sm_90a", 0),  # A column-major in memory (K x M): wgmma's transposed A
    "triton39_mm_bcol.h100": ("sm_90a", 0),  # B column-major (N x K): K-major B
    # 512 threads (128 registers at launch): its m64n256 wgmmas are issued as two m64n128 each
    "gemm_3x64.h100": ("sm_90a", 0),
    # 8-bit inputs, both operands K-major (128 values per 128-byte swizzle row, K steps of 32):
    # wgmma m64n256k32 .e4m3 on two consumer warpgroups; tcgen05.mma kind::f8f6f4 (e5m2); s8 into
    # s32 accumulators (FragS32, TRowS32: written out as integers). tests/test_gpu.py may run them
    "gemm_fp8_e4m3.h100": ("sm_90a", 0),
    "gemm_fp8_e5m2.b200": ("sm_100a", 0),
    "gemm_i8.h100": ("sm_90a", 0),
    "gemm_i8.b200": ("sm_100a", 0),
    # the corpus's fp8 GEMM imported from Triton's TTGIR (tests/data/ttgir/gemm_fp8_sm90.ttgir)
    "triton_gemm_fp8_sm90.h100": ("sm_90a", 0),
    # a held-out Triton-style kernel with a per-key bias ([1, 64] f32 per iteration, one plain TMA box);
    # its --no-ptxas-loop schedule over-asks registers and spills; tests/test_gpu.py runs it
    "heldout_biased_softmax.h200": ("sm_90a", None),
    # a held-out attention written with tl.exp (tests/data/ttgir/heldout2/t36/prepipe/attn_exp_sm90.ttgir,
    # imported --split-rows auto, solved for h200): its graph's `knob exp2_scale = sm_scale * log2 e`;
    # ptxas spills (docs/model-fidelity.md); tests/test_gpu.py calls it with the Triton launch's arguments
    "heldout_attn_exp.h200": ("sm_90a", None),
}
# Compiled under `-m extended` only, for CI's time (session 37: about 12 s of nvcc each with nothing else
# running): our own held-out kernels (as for test_corpus' held-out dumps; tests/test_gpu.py still builds and
# runs them) and variants of an example whose emission another fixture's compile covers: the 192-key tiles
# and the H100 twin (attention_fwd_hopper.h200's), FP8 on the solver's roles (the ptxas loop's), the simple
# attention's three schedules (attention_fwd_hopper's roles, gemm_hopper.h100.swp's SWP-only code), FA4's
# pinned roles (the Blackwell attention's own). Their text stays checked by the golden tests.
EXTENDED = ("heldout_biased_softmax.h200", "heldout_attn_exp.h200", "attention_fwd_hopper_k192.h100",
            "attention_fwd_fp8_hopper.h200.plain", "attention_fwd_simple.h100.swp", "attention_fwd_simple.h100",
            "attention_fwd_blackwell.b200.fa4", "attention_fwd_simple.h100.split", "attention_fwd_hopper.h100",
            # imported from the corpus dumps that test_corpus imports, solves, emits and compiles the same way
            "triton_attn_fwd_tma_sm90.h100", "triton_matmul_sm90.h100", "triton_gemm_fp8_sm90.h100",
            # the narrow GEMMs test_tiles_narrower_than_128_bytes_compile builds (k16, n32, k32)
            "gemm_k16n32.h100", "gemm_k32n16.h100",
            # the head dim 64 twin of attention_fwd_hopper.h200's emission (session 38, CI's time: 7 s)
            "attention_fwd_d64.h100")
PERSISTENT_RUNS = ("gemm_hopper.h100", "attention_fwd_hopper.h100")


def _built(names) -> list:
    """The fixtures among `names` as the compile tests' parameters, those of EXTENDED marked so."""
    return [pytest.param(n, marks=[pytest.mark.extended] if n in EXTENDED else []) for n in sorted(names)]  # bench/gpu_bench.py runs these
# kernel<true> checked as strictly as kernel<false> besides those (tests/test_gpu.py runs them)
PERSISTENT_CLEAN = PERSISTENT_RUNS + ("gemm_fp8_e4m3.h100", "gemm_i8.h100", "triton_gemm_fp8_sm90.h100")
# kernels without spills whose wgmmas ptxas still serializes somewhere: the backward's dK and dV
# warpgroups hold a 128x128 f32 accumulator (128 of their 160 registers). It was C7515 (the
# accumulators' zeros written on the path around the loop) until they were pinned before the
# loop (roles.py, _pinned_carries); now it is C7512, insufficient register resources
# The FP8 attention on FA3's roles as the solver leaves them (I = 195): consumer0 keeps PV(j-1) in
# flight across the loop's back edge with S(j)'s two buffers, the accumulator and P live; ptxas needs
# 250 registers for that pipeline where the model counts 230 (setmaxnreg 240): C7512. emit-cuda's
# ptxas loop solves it again with 24 more (the stored attention_fwd_fp8_hopper.h200, clean)
SERIALIZED = ("attention_bwd_hopper.h100", "attention_fwd_fp8_hopper.h200.plain")


def schedule(name: str) -> Schedule:
    return Schedule.from_json((DATA / f"{name}.json").read_text())


def renderer(name: str) -> Renderer:
    """The emitter's plan of a fixture, for tests that look at it rather than at the text."""
    s = schedule(name)
    return Renderer(build_model(s, load_machine(s.machine)))


@lru_cache(maxsize=None)
def emitted(name: str) -> str:
    s = schedule(name)
    return emit_cuda(s, load_machine(s.machine))


needs_nvcc = pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin): "
                                                       "compile checks skipped")


def nvcc_build(src: Path, arch: str) -> tuple[int, str]:
    """(exit status, stderr) of `nvcc -Xptxas -v` on an emitted file for `arch` (sm_90a, sm_100a),
    test main included (built once per content: conftest.nvcc_compile)."""
    return nvcc_compile(src, ["-std=c++17", f"-gencode=arch=compute_{arch[3:]},code={arch}", "-DTWILL_MAIN",
                              "-Xptxas", "-v"])


def compiled(name: str, tmp: str) -> tuple[int, str]:
    """nvcc_build of a fixture's emitted file."""
    src = Path(tmp) / f"{name}.cu"
    src.write_text(emitted(name))
    return nvcc_build(src, FIXTURES[name][0])


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("emit"))


def ptxas_info(line: str) -> bool:
    return line.startswith("ptxas info") or re.match(r"^\s+\d+ bytes (stack frame|spill|cumulative)", line) is not None


def warnings_in(err: str) -> list[str]:
    """nvcc's stderr less ptxas's -v report: what a clean build leaves empty."""
    return [line for line in err.splitlines() if line.strip() and not ptxas_info(line)]


# -- the emitted text ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_matches_golden(name, golden):
    golden(f"emit/{name}.cu", emitted(name))


def test_tensor_memory_that_cannot_be_shared_is_reported():
    """The Blackwell backward fits 512 columns because S and dQ take turns; with dQ read later
    (its store starting after the next S and dP are written) it overlaps both: 640 columns."""
    data = json.loads((DATA / "attention_bwd_blackwell.b200.json").read_text())
    store = next(o for o in data["ops"] if o["name"] == "store_0")
    store["start"] += 12
    s = Schedule.from_json(json.dumps(data))
    with pytest.raises(EmitError, match="640 columns even where values whose lifetimes do not overlap share them"):
        emit_cuda(s, load_machine(s.machine))


def test_cli_reports_unfit_tensor_memory(tmp_path):
    """The same edit through the CLI, with L made long enough for it: the schedule still verifies
    (the model counts tensor memory per value), and emit-cuda, which must place it, says why not."""
    data = json.loads((DATA / "attention_bwd_blackwell.b200.json").read_text())
    next(o for o in data["ops"] if o["name"] == "store_0")["start"] += 12
    (tmp_path / "s.json").write_text(json.dumps(data))
    result = run(tmp_path / "s.json", "-o", tmp_path / "k.cu")  # without a longer L it verifies no more
    assert result.exit_code == 2 and "fails verification" in result.output and "completion: op 'store_0'" in result.output
    data["length"] += 12
    (tmp_path / "s.json").write_text(json.dumps(data))
    result = run(tmp_path / "s.json", "-o", tmp_path / "k.cu")
    assert result.exit_code == 2 and "640 columns" in result.output and not (tmp_path / "k.cu").exists()


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["ops"][0].update(start=-100), "'start' must be an integer >= 0, not -100"),
    (lambda d: d["ops"][0].update(start=1.5), "'start' must be an integer >= 0, not 1.5"),
    (lambda d: d.update(ii=0), "'ii' must be an integer >= 1, not 0"),
    (lambda d: d.update(ii="abc"), "'ii' must be an integer >= 1, not 'abc'"),
    (lambda d: d["ops"].append(dict(d["ops"][0])), "is listed more than once"),
    (lambda d: d["ops"][2].update(warp="nobody"), "runs on role 'nobody', which 'warps' does not list"),
    (lambda d: d.update(options={"warps": "x"}), "option 'warps' cannot be 'x'"),
    (lambda d: d.update(options={"bogus": 1}), "unknown option 'bogus'"),
    (lambda d: d["warps"][1].update(registers=10000), "fails verification against its graph and h100: registers"),
    (lambda d: d["ops"][2].update(start=0), "fails verification against its graph and h100: dependence"),
    (lambda d: d["ops"][2].update(name="zzz"), "which 'ops' does not list"),  # (a role still lists the old name)
    (lambda d: d.update(arch="sm_100a"), "the schedule says arch sm_100a, but h100 is sm_90a"),
])
@pytest.mark.parametrize("command", ["emit-cuda", "plot"])
def test_an_edited_schedule_is_refused(tmp_path, edit, message, command):
    """emit-cuda and plot check a schedule file before they use it: its fields (types, ranges,
    names) and then, with the machine it was solved for, twill.verify on its own graph."""
    data = json.loads((DATA / "attention_fwd_hopper.h100.json").read_text())
    edit(data)
    (tmp_path / "s.json").write_text(json.dumps(data))
    out = tmp_path / ("k.cu" if command == "emit-cuda" else "k.svg")
    result = CliRunner().invoke(main, [command, str(tmp_path / "s.json"), "-o", str(out)])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output and not out.exists()


def test_output_tiles_go_out_through_tma():
    """Output tiles are written into shared memory and stored by TMA (a bulk-group store of each
    128-byte column block) where the rings leave room: the GEMM's two 64x256 accumulators two
    blocks at a time (all four would not fit beside its 4-deep rings), FA3's O tiles whole, and
    the backward's dQ, stored every iteration and added into by every CTA, whole and with a
    reduce-add. An output that does not fit keeps the threads' own stores. sm_100a does the same
    from its fragments (a row per thread)."""
    def plan(name):
        r = renderer(name)
        return r, {t: (st.role, st.slots, st.blocks) for t, st in r.p.staging.items()}

    _, gemm = plan("gemm_hopper.h100")
    assert gemm == {"out_acc0": ("mma0", 2, 4), "out_acc1": ("mma1", 2, 4)}
    _, fa3 = plan("attention_fwd_hopper.h100")
    assert fa3 == {"out_acc0": ("consumer0", 2, 2), "out_acc1": ("consumer1", 2, 2)}
    _, bwd = plan("attention_bwd_hopper.h100")
    assert bwd == {"store_0": ("consumer0", 4, 4)}
    text = emitted("attention_bwd_hopper.h100")
    body = text[text.index("void store_store_0("):text.index("void store_out_dk(")]
    assert "twill::tma_reduce_add(tm.store_0" in body and "atomicAdd" not in body
    dk = text[text.index("void store_out_dk("):]
    assert "frag_to_global" in dk[:dk.index("}")]  # no room left: the threads store dK themselves
    _, blackwell = plan("attention_fwd_blackwell.b200")  # (compiled, not run: no B200 here)
    assert blackwell == {"out_acc0": ("consumer0", 2, 4)}  # O1's two blocks no longer fit
    _, blackwell_bwd = plan("attention_bwd_blackwell.b200")
    assert blackwell_bwd == {"store_0": ("consumer1", 4, 4)}


def test_a_value_computed_in_accumulator_registers_costs_none():
    """The SWP-only attention's schedule runs exp2 of iteration j+1 while the wgmma of iteration j
    still reads P(j) from registers: P needs two buffers. The rescaled accumulator acc_r is
    computed in acc_n's registers, so it must not count against the budget when emit-cuda checks
    that the second P buffer fits (it once did, and the code waited for the wgmma instead)."""
    r = renderer("attention_fwd_simple.h100.swp")
    assert r.p.alias == {"acc_r": "acc_n"}
    assert r.p.copies["p"] == 2
    assert "no wgmma still uses the registers p overwrites" not in emitted("attention_fwd_simple.h100.swp")


def test_fa3_backward_shares_registers():
    """S and dP of the backward have the same type and never live at once on consumer0 (the exp2
    has read S before dP's wgmma is issued): dP's wgmma writes S's registers."""
    r = renderer("attention_bwd_hopper.h100")
    assert r.p.shared_regs == {"dp": "s"}
    cu = emitted("attention_bwd_hopper.h100")
    assert "// dp takes the registers of s, which no longer needs them" in cu
    assert "twill::Frag<1, 128> dp[" not in cu


def test_blackwell_backward_shares_tensor_memory():
    cu = emitted("attention_bwd_blackwell.b200")
    assert "twill::tmem_alloc(&sm.tmem_base, 512);" in cu
    assert "twill::umma_idesc<64, 128, false, false, false>()" in cu  # S = Q K^T: a 64-row tcgen05.mma
    assert "twill::TRow<128, 64> s_p_0;" in cu  # S read by the 64 lanes that hold it
    # dq's mma waits for S to be read out of the columns they share, and S's for dq
    assert "sm.ring_s.wait_empty(tile.pos + j + 1);  // s[j], which these columns held before, is freed" in cu
    assert "sm.ring_dq.wait_empty(tile.pos + j);  // dq[j - 1], which these columns held before, is freed" in cu
    assert "sm.ring_s.release_by_warp(tile.pos + j);  // s[j] is read: its columns are free" in cu


def test_deterministic_across_processes(tmp_path):
    """The same schedule gives the same bytes, whatever Python's hash seed."""
    outs = []
    for seed in ("1", "2"):
        out = tmp_path / f"k{seed}.cu"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", "from twill_cli.main import main; main()", "emit-cuda",
                        str(DATA / "attention_fwd_hopper.h100.json"), "-o", str(out)], check=True, env=env,
                       capture_output=True)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == emitted("attention_fwd_hopper.h100").encode()


# -- what the kernels are made of -------------------------------------------------------------------

def test_fa3_structure():
    """Producer warp, two consumer warpgroups that ping-pong on the tensor core (FA3)."""
    cu = emitted("attention_fwd_hopper.h100")
    assert "__grid_constant__ CUtensorMap tm_k" in cu and "cp.async.bulk.tensor.3d" in cu
    assert "twill::setmaxnreg_dec<24>()" in cu and cu.count("twill::setmaxnreg_inc<240>()") == 2
    assert "mbarrier.arrive.expect_tx" in cu and "mbarrier.try_wait.parity" in cu
    assert "wgmma.mma_async" in cu and "twill::wgmma_commit();" in cu and "twill::wgmma_wait<" in cu
    assert "wgmma_m64n128k16_rs_f16" in cu  # P from registers
    assert "twill::named_sync(1, 256);  // our turn on the tensor core" in cu
    assert re.search(r"twill::named_arrive\(\d, 256\);  // consumer[01]'s turn", cu)
    assert "// ---- prologue" in cu and "// ---- steady state" in cu and "// ---- epilogue" in cu
    for budget in ("kRegs_consumer0 <= 255", "<= 65536", "kSmemModel <= 232448", "sizeof(Smem) + 1024 <= 232448"):
        assert budget in cu
    assert "op_normalize(acc0_n_final, l0_new_final)" in cu  # O / l written out


def ring_readers(r):
    """(channel, reading role, loop count) for every ring a role frees, over the loop counts the
    windows can tell apart."""
    for chan in r.p.channels.values():
        for role in chan.consumers if chan.empty else ():
            for n in range(r.m.stages, r.m.stages + 2 * r.p.U + 5):
                yield chan, role, n


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_every_ring_slot_is_freed_once(name):
    """Each consumer role frees every instance 0..n-1 of each ring exactly once by the end of its
    loop, whatever n: a CTA's next tile (a persistent grid) starts on empty rings, or waits forever."""
    r = renderer(name)
    checked = 0
    for chan, role, n in ring_readers(r):
        assert Counter(r.p.released(role, chan, n)) == Counter(range(n)), (chan.value, role, n)
        checked += 1
    assert checked or not r.p.channels


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_no_reader_waits_for_a_slot_it_still_holds(name):
    """A reader that waits for instance i of a ring before freeing i - depth waits forever: the
    producer refills that slot only once every reader has freed it. (The FA3-style backward's
    dV warpgroup once freed its one P slot only after issuing the next wgmma, which reads the next P.)"""
    r = renderer(name)
    for chan, role, n in ring_readers(r):
        assert r.p.waits_for_its_own_release(role, chan, n) == [], (chan.value, role, n)


def turn_events(p, role: str, n: int) -> list[tuple[str, str]]:
    """The ping-pong barrier operations role executes over one tile of n iterations (the first and
    last tile of the CTA): ("arrive", X) hands the turn to X, ("sync", X) waits for X's turn."""
    roles = p.pingpong
    nxt = roles[(roles.index(role) + 1) % len(roles)]
    prog = p.programs[role]
    keys = ([("prologue", i) for i in range(p.S - 1)] + [("steady", 0)] * (n - p.S + 1) +
            [("epilogue", i) for i in range(p.S - 1)])
    events = [("arrive", roles[0])] if role == roles[-1] else []
    for key in keys:
        if key in prog.turn_close:
            events.append(("arrive", nxt))
        for pos, _ in enumerate(prog.windows.get(key, ())):
            begin, end = prog.turns.get((key, pos), (False, False))
            events += [("sync", role)] * begin + [("arrive", nxt)] * end
    return events + ([("sync", roles[0])] if role == roles[0] else [])


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_ping_pong_turns_hand_over_without_deadlock(name):
    """Run the named-barrier protocol of the ping-pong roles for many loop counts: every sync
    meets exactly one hand-over, a role never hands over a turn still pending (a named barrier
    would count both arrivals at once), and all roles finish."""
    r = renderer(name)
    p = r.p
    if not p.pingpong:
        return
    for n in range(p.S, p.S + 2 * p.U + 5):
        queues = {role: turn_events(p, role, n) for role in p.pingpong}
        pending = {role: 0 for role in p.pingpong}
        while any(queues.values()):
            moved = False
            for role, q in queues.items():
                while q:
                    kind, bar = q[0]
                    if kind == "arrive":
                        assert pending[bar] == 0, (name, n, role, "hands over a turn still pending")
                        pending[bar] += 1
                    elif pending[bar]:
                        pending[bar] -= 1
                    else:
                        break
                    q.pop(0)
                    moved = True
            assert moved, (name, n, "deadlock", {k: v[:3] for k, v in queues.items()})
        assert all(v == 0 for v in pending.values()), (name, n, pending)


def test_gemm_and_fa3_are_persistent():
    """The grid may loop over tiles where no value crosses roles after the loop (Hopper)."""
    for name in ("gemm_hopper.h100", "attention_fwd_hopper.h100"):
        cu = emitted(name)
        assert "constexpr bool kPersistent = true;" in cu
        assert "for (int t = blockIdx.x, round = 0; t < args.tiles; t += static_cast<int>(gridDim.x), ++round)" in cu
        # any loop count: the rings' positions continue across a CTA's tiles (TileIdx::pos)
        assert "const bool tiles = kPersistent && (p.persistent > 0 || (p.persistent < 0 && iters <= 32));" in cu
        assert "kPhasePeriod == 0" not in cu
    cu = emitted("gemm_hopper.h100")
    assert "constexpr int kPhasePeriod = 8;" in cu  # 4-deep rings: slot and parity repeat every 8
    assert "twill_pos = (twill_pos + twill_n) % kPhasePeriod;" in cu  # a tile's positions start where the last's end
    assert "sm.ring_b.wait_full(tile.pos + j);" in cu and "sm.ld_b[(tile.pos + j) % 4]" in cu
    assert ("if (!tile.last) for (int i = n - 1; i < n; ++i) sm.ring_b.release_by_warp(tile.pos + i);" in cu)  # the last wgmma's B
    cu = emitted("attention_fwd_hopper.h100")
    assert "constexpr int kInputCopies = 2;" in cu and "__half in_q0[kInputCopies][8192];" in cu
    assert "if (tile.round == 0) twill::named_arrive(" in cu and "if (tile.last) twill::named_sync(" in cu
    assert "constexpr bool kPersistent = false;" in emitted("attention_fwd_blackwell.b200")


def test_no_persistent_grid_where_registers_are_tight():
    """A warpgroup that holds a wgmma's register operand in two buffers (P, FA3's intra-warpgroup
    overlap) or whose buffers fill its budget gets no kernel<true>: the tile loop's registers tipped
    ptxas into spills or serialized wgmmas there. The FA3 graph under h100.yaml (P in one buffer,
    46 registers to spare) keeps it."""
    for name in ("attention_fwd_d64.h100", "attention_fwd_hopper.h200", "attention_fwd_hopper_k192.h100"):
        r = renderer(name)
        assert not r.persistent(), name
        assert "constexpr bool kPersistent = false;" in emitted(name)
    d64 = renderer("attention_fwd_d64.h100")
    assert d64.p.copies["p0"] == 2 and all(d64.p.spare_registers(ro) > 0 for ro in d64.m.roles if ro.is_warpgroup)
    assert renderer("attention_fwd_hopper.h100").persistent()


def test_softmax_sums_rows_in_f32_once():
    """The FA3 kernel's exp2 also takes the row sums of P in f32 (op_exp2_sum); the rowsum of P
    then uses them, so P's 16-bit tile is not unpacked again (+5-10% on the H200)."""
    cu = emitted("attention_fwd_hopper.h100")
    assert "twill::Rows<1> p0_sums[1];  // p0's row sums, for l0_new" in cu
    assert "twill::op_exp2_sum(p0[0], p0_sums[0], s0[0], m0_new[" in cu
    assert "twill::op_rowsum(l0_new[0], twill::presum(p0_sums[0]), l0_new[0], alpha0[0]);" in cu
    assert "twill::op_rowsum(l0_new[0], p0[0]" not in cu
    assert "op_exp2_sum(" not in emitted("attention_fwd_blackwell.b200").split("namespace twill_")[1]


def test_gemm_keeps_one_wgmma_in_flight():
    cu = emitted("gemm_hopper.h100")
    for half in "01":
        body = cu.split(f"void role_mma{half}(")[1].split("\n}\n")[0]
        assert "twill::wgmma_wait<1>();" in body and f"sm.ring_a{half}.release_by_warp(tile.pos + j - 1)" in body
        assert "sm.ring_b.release_by_warp(tile.pos + j - 1)" in body  # the shared B tile: both halves release it
        assert f"acc{half}_n[0] = " not in body  # accumulates in place
        assert "wgmma_m64n256k16_ss_f16" in body
    # the 8 warps of two warpgroups release each B slot, 4 where the launch halves (halves.py)
    assert "sm.ring_b.init(1, 8 - 4 * ((args.idle_parts >> 1) & 1));" in cu
    assert "__half ld_b[4][16384];" in cu  # the example's depth-4 ring
    # {output = f16}: C is written as f16 (as cuBLAS does), though accumulated in f32
    assert "__half* out_acc0;  // output acc0_n: f16" in cu and "float* out_acc" not in cu
    # A and B stream along both grid axes: CTAs walk the output tiles in groups of rows (L2 reuse);
    # the tile is computed once per tile by the dispatcher, not per TMA issue
    assert "int raster_group = 16;" in cu and "args.raster_group = p.raster_group;" in cu
    assert "args.tiles_m, args.tiles_n, args.raster_group);" in cu
    load = cu.split("void role_load(")[1].split("\n}\n")[0]
    assert "tile_of" not in load and "tile_at" not in load


def test_attention_keeps_the_block_order():
    """K and V follow neither grid axis: no grouped order, no raster_group field."""
    cu = emitted("attention_fwd_hopper.h100")
    assert "raster_group" not in cu.split("// ==== host side")[1] and "args.raster_group" not in cu
    assert "args.tiles_m, args.tiles_n, 0);" in cu


def test_default_roles_for_swp_schedule():
    cu = emitted("attention_fwd_simple.h100.swp")
    assert "roles derived by emit-cuda" in cu
    assert "role producer: 1 warp(s)" in cu and "role consumer: 8 warp(s)" in cu  # two warpgroups of 64 rows
    assert "void role_producer(" in cu and "void role_consumer(" in cu


def test_blackwell_structure():
    """FA4's roles: one thread of the MMA warp issues tcgen05.mma into tensor memory; commits
    signal the softmax and correction warpgroups, which read it with tcgen05.ld."""
    cu = emitted("attention_fwd_blackwell.b200.fa4")
    assert "tcgen05.alloc" in cu and "tcgen05.dealloc" in cu and "tcgen05.relinquish_alloc_permit" in cu
    mma = cu.split("void role_mma(")[1].split("\n}\n")[0]
    assert "if (lane == 0) {" in mma and "twill::umma_ss(" in mma and "twill::umma_commit(&sm.ring_s0.full" in mma
    assert "tcgen05.mma.cta_group::1.kind::f16" in cu and "tcgen05.commit" in cu
    softmax = cu.split("void role_softmax0(")[1].split("\n}\n")[0]
    assert "twill::tmem_to_frag(" in softmax and "sm.ring_s0.wait_full" in softmax
    correction = cu.split("void role_correction(")[1].split("\n}\n")[0]
    assert "twill::tmem_rescale<128>(" in correction and "tcgen05.ld" in cu


def test_unknown_opcode_becomes_a_hook(tmp_path):
    from twill.pipeline import SolveOptions, solve
    graph = parse_tir("kernel hooked\ninput x : f16[64,64] @smem\ninput w : f16[64,64] @smem\ncarry acc : f32[64,64] = 0\n"
                      "loop {\n  y = mma x, w : f32[64,64]\n  z = frob y, acc : f32[64,64] {cycles = 4, unit = alu}\n"
                      "  yield acc = z\n}\n", "hooked.tir")
    machine = load_machine("h100")
    cu = emit_cuda(solve(graph, machine, SolveOptions(swp_only=True)), machine)
    assert "// TWILL HOOK: frob (z = frob y, acc : f32[64,64])" in cu
    assert "__device__ __forceinline__ void hook_z(Out& out, const A0& y, const A1& acc)" in cu
    assert "hook_z(z[0], y[0], z[0]);" in cu or "hook_z(z[" in cu
    if nvcc():
        src = tmp_path / "hooked.cu"
        src.write_text(cu)
        rc, err = nvcc_compile(src, ["-std=c++17", "-gencode=arch=compute_90a,code=sm_90a"])
        assert rc == 0 and err == "", err


def test_an_mma_accumulating_in_f16_is_wgmmas_f16_form_for_f16_inputs_only():
    """f16 products accumulated in f16: wgmma m64nNk16.f16.f16.f16 (MmaInputs.narrow); bf16 products have no
    f16 accumulator form and are refused."""
    from twill.pipeline import SolveOptions, solve
    text = ("kernel f16acc\ncarry acc : f16[64,128] = 0\nloop {{\n  a = load : {t}[64,64] @smem\n"
            "  b = load : {t}[64,128] @smem\n  acc_n = mma a, b, acc : f16[64,128]\n  yield acc = acc_n\n}}\n")
    machine = load_machine("h100")
    schedule = solve(parse_tir(text.format(t="f16"), "f16acc.tir"), machine, SolveOptions(swp_only=True))
    assert ".m64n128k16.f16.f16.f16 " in emit_cuda(schedule, machine)
    schedule = solve(parse_tir(text.format(t="bf16"), "f16acc.tir"), machine, SolveOptions(swp_only=True))
    with pytest.raises(EmitError, match="emit-cuda's mma accumulates in f32 \\(the result is f16\\) for bf16"):
        emit_cuda(schedule, machine)


def test_an_mma_whose_shapes_do_not_agree_is_an_error_where_it_is_written():
    from twill.costs import bind
    text = ("kernel k\ncarry acc : f32[64,128] = 0\nloop {\n  a = load : f16[64,64] @smem\n"
            "  b = load : f16[32,128] @smem\n  acc_n = mma a, b, acc : f32[64,128]\n  yield acc = acc_n\n}\n")
    with pytest.raises(InputError, match=r"k.tir:6:11: error: op 'acc_n': the shapes of this mma do not agree: "
                                         r"b is 32x128, neither 64x128 nor 128x64"):
        bind(parse_tir(text, "k.tir"), load_machine("h100"))


def test_arithmetic_with_a_missing_operand_is_refused_not_miscompiled(tmp_path):
    """A unary `mul` (what an import leaves of `qk * scale` once the scalar is folded away) has no
    runtime overload: emit-cuda says so at the op, where nvcc would have failed on its output."""
    from twill.pipeline import SolveOptions, solve
    text = ("kernel unary\ninput x : f16[64,64] @smem\ninput w : f16[64,64] @smem\nloop {\n"
            "  y = mma x, w : f32[64,64]\n  z = mul y : f32[64,64]\n  store z\n}\n")
    machine = load_machine("h100")
    schedule = solve(parse_tir(text, "unary.tir"), machine, SolveOptions(swp_only=True))
    with pytest.raises(EmitError, match=r"<graph of unary>:6:7: error: op 'z': emit-cuda's mul takes 2 operands, and this one has 1"):
        emit_cuda(schedule, machine)


# -- nvcc ----------------------------------------------------------------------------------------

@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("name", _built(FIXTURES))
def test_compiles_without_warnings(name, build_dir):
    rc, err = compiled(name, build_dir)
    assert rc == 0, err
    noise = warnings_in(err)
    assert noise == [], "\n".join(noise)


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("name", _built(n for n, (_, spills) in FIXTURES.items() if spills == 0))
def test_no_spills_and_no_serialized_wgmma(name, build_dir):
    """kernel<false> (a tile per CTA) neither spills nor has ptxas serialize its wgmmas (a sign of
    a synchronisation the emitter got wrong); nor does kernel<true> (a persistent grid) for the
    kernels that run on the GPU. The loop costs a few registers: the SWP-only attention, at the
    edge of its budget, has its wgmmas serialized in kernel<true>; the kernels in SERIALIZED are
    checked for spills only."""
    rc, err = compiled(name, build_dir)
    assert rc == 0, err
    entries = {}
    for part in err.split("Compiling entry function '")[1:]:
        entries[part.split("'")[0]] = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", part)]
    serialized = re.findall(r"\(C75\d\d\).*function '([^']+)'", err)
    strict = [e for e in entries if "ILb0E" in e or name in PERSISTENT_CLEAN]
    assert strict and all(entries[e] and not any(entries[e]) for e in strict), err
    assert name in SERIALIZED or not set(serialized) & set(strict), err


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("name", _built(n for n, (arch, spills) in FIXTURES.items() if spills is None and arch == "sm_90a"))
def test_no_serialized_wgmma_where_it_spills(name, build_dir):
    """The fixtures that still spill (their --no-ptxas-loop schedules over-ask registers) have no
    wgmma serialized in kernel<false> for a reason more registers cannot remove (C7515: a non-wgmma
    instruction defines a wgmma's accumulator inside its pipeline stage; C7510); C7511, too few
    registers for the pipeline, goes with their spills. The held-out attn_exp (two accumulators in one
    consumer) had every wgmma serialized (C7515), at any register count: it issued PV0 ahead of
    the in-place rescale of acc1, so acc1's value carried around the loop was written while a
    wgmma was in flight, and it pinned acc1's start value with the prologue's PV0 in flight."""
    rc, err = compiled(name, build_dir)
    assert rc == 0, err
    serialized = re.findall(r"\((?:C7515|C7510)\).*function '([^']+)'", err)
    assert not [f for f in serialized if "ILb0E" in f], err


def test_an_accumulator_carried_into_the_loop_is_computed_with_no_wgmma_in_flight():
    """The FP8 attention at I = 195 (FA3's roles): consumer1 issues S(j), then rescales acc1 in
    place at its window's end, the value its next window's PV accumulates into. Those rescales (the
    steady windows' and the prologue's last) come after a wgmma_wait<0>; consumer0's rescale, read
    by its own window's PV, keeps S(j) in flight (waits.py, _carried_into_loop)."""
    text = emitted("attention_fwd_fp8_hopper.h200.plain")
    c0, c1 = text.index("void role_consumer0"), text.index("void role_consumer1")
    ends = text.index("// ---- after the loop", c1)
    rescales = [i for i in range(c1, ends) if text.startswith("twill::op_rescale(acc1_n", i)]
    assert len(rescales) >= 3
    steady = text.index("// ---- steady state", c1)
    for i in rescales:
        if i < text.index("// ---- epilogue", steady):  # the prologue's last window and the loop's
            assert text.rfind("twill::wgmma_wait<0>();", 0, i) > text.rfind("twill::wgmma_commit();", 0, i), text[i - 600:i]
    first = text.index("twill::op_rescale(acc0_n", text.index("// ---- steady state", c0))
    assert text.rfind("twill::wgmma_wait<", 0, first) < text.rfind("twill::wgmma_commit();", 0, first)


@pytest.mark.slow
@pytest.mark.extended  # the plain FP8 variant's compile (EXTENDED above)
@needs_nvcc
def test_the_fp8_attentions_wgmmas_are_serialized_for_registers_alone(build_dir):
    """At I = 195 ptxas serialized the FP8 attention's wgmmas for C7515 (consumer1's rescale of
    acc1 with S(j) in flight, carried into the loop) as well as C7512 (consumer0's registers); the
    rescale after wgmma_wait<0> leaves C7512 alone, which more registers remove (emit-cuda's ptxas
    loop: the stored attention_fwd_fp8_hopper.h200 compiles clean, test_compiles_without_spills)."""
    rc, err = compiled("attention_fwd_fp8_hopper.h200.plain", build_dir)
    assert rc == 0, err
    assert "(C7515)" not in err and "(C7512)" in err, err


def test_an_accumulating_wgmma_is_not_issued_ahead_of_another_accumulators_rescale():
    """`_issue_early` moves PV up past independent work, but not past its role's in-place rescale of
    another accumulator (attn_exp's consumer0 holds acc0 and acc1): both rescales come before the
    other half's PV, so neither is computed while a wgmma is in flight; and the prologue's PV0 is
    retired before acc1's start value is pinned."""
    order = renderer("heldout_attn_exp.h200").p.order
    assert order.index("acc_rescale0") < order.index("acc_new1")
    assert order.index("acc_rescale1") < order.index("acc_new0")
    text = emitted("heldout_attn_exp.h200")
    pin = text.index("twill::fence_frag(acc_new1[c]);  // acc_new1's start value")
    assert text.rfind("twill::wgmma_wait<0>();", 0, pin) > text.rfind("twill::wgmma_commit();", 0, pin)
    # FA3's consumers (one accumulator each, a fresh S in flight at the pin) keep their order and no wait
    fa3 = emitted("attention_fwd_d64.h100")
    pin = fa3.index("'s start value, in its registers before the loop")
    assert "before the start values are pinned" not in fa3[pin - 300:pin]


@needs_nvcc
def test_the_corpus_gqa_attention_compiles_without_spills(tmp_path):
    """Triton's GQA attention forward (tests/data/ttgir/attn_gqa_fwd_sm90.ttgir), imported, solved
    and emitted for h100, spills in neither kernel<false> nor kernel<true>. Its persistent kernel
    spilled 4 bytes: consumer0, at its 248 registers, kept the sign extension of an int of Args
    (the column origin of the m output's tile, added to the pointer term by term) live across the
    whole tile loop. A row vector's origin is now one offset, converted once."""
    out = tmp_path / "gqa.cu"
    result = CliRunner().invoke(main, ["emit-cuda", str(ROOT / "tests" / "data" / "ttgir" / "attn_gqa_fwd_sm90.ttgir"),
                                       "--gpu", "h100", "-q", "-o", str(out)])
    assert result.exit_code == 0, result.output
    from twill.ptxas import compile_kernel  # ptxas's report as emit-cuda's loop reads it (test_corpus builds the same)
    report = compile_kernel(out.read_text(), "sm_90a")
    assert report.ok and warnings_in(report.log) == [], report.log
    assert len(report.entries) >= 2 and report.spill_bytes == 0, report.log


# -- the command line ---------------------------------------------------------------------------------

def run(*args):
    return CliRunner().invoke(main, ["emit-cuda", *map(str, args)])


def test_cli_writes_only_when_changed(tmp_path):
    out = tmp_path / "k.cu"
    first = run(DATA / "gemm_hopper.h100.json", "-o", out)
    assert first.exit_code == 0, first.output
    assert out.read_text() == emitted("gemm_hopper.h100")
    os.utime(out, (1_000_000, 1_000_000))
    again = run(DATA / "gemm_hopper.h100.json", "-o", out)
    assert again.exit_code == 0 and "unchanged" in again.output
    assert out.stat().st_mtime == 1_000_000
    other = run(DATA / "fig1.h100.json", "-o", out)
    assert other.exit_code == 0 and out.stat().st_mtime != 1_000_000
    assert not [p for p in tmp_path.iterdir() if p.name != "k.cu"]  # no temporary left behind


def test_cli_stdout(tmp_path):
    result = run(DATA / "fig1.h100.json")
    assert result.exit_code == 0 and result.output == emitted("fig1.h100")


def test_cli_solves_a_graph_first(tmp_path):
    out = tmp_path / "fig1.cu"
    result = CliRunner().invoke(main, ["emit-cuda", str(ROOT / "examples" / "fig1.tir"), "--gpu", "h100", "-q",
                                       "-o", str(out)])
    assert result.exit_code == 0, result.output
    from twill.fileio import load_graph
    from twill.pipeline import solve
    machine = load_machine("h100")
    assert out.read_text() == emit_cuda(solve(load_graph(ROOT / "examples" / "fig1.tir"), machine), machine)


@pytest.mark.parametrize("setup,args,message", [
    (None, ["missing.json"], "does not exist"),
    ("{not json", ["bad.json"], "not valid JSON"),
    ('{"format": "other/1"}', ["bad.json"], "not a twill schedule"),
    ('{"format": "twill-schedule/1"}', ["bad.json"], "malformed schedule"),
    (None, [ROOT / "examples" / "fig1.tir"], "needs --gpu"),
    (None, [DATA / "gemm_hopper.h100.json", "--gpu", "b200"], "solved for h100 (sm_90a)"),
    # solved with a machine .yaml of the user's: emit-cuda needs that file, not a bundled namesake
    (json.dumps({**json.loads((DATA / "gemm_hopper.h100.json").read_text()), "machine": "my_gpu"}), ["bad.json"],
     "solved for machine 'my_gpu', which is not a bundled spec"),
])
def test_cli_bad_input_exits_2(tmp_path, monkeypatch, setup, args, message):
    monkeypatch.chdir(tmp_path)
    if setup is not None:
        (tmp_path / "bad.json").write_text(setup)
    result = run(*args, "-o", tmp_path / "out.cu")
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out.cu").exists()


def test_a_users_spec_under_a_bundled_name_is_not_mistaken_for_it(tmp_path):
    """A schedule records its machine's digest: solved with a spec of the user's that reuses the
    name h100 with other limits, emit-cuda without --gpu refuses the bundled h100, and with the
    user's spec it emits."""
    spec = tmp_path / "my_h100.yaml"
    spec.write_text((ROOT / "specs" / "h100.yaml").read_text().replace("register_reserve: 32", "register_reserve: 40"))
    sched = tmp_path / "fig1.json"
    solved = CliRunner().invoke(main, ["solve", str(ROOT / "examples" / "fig1.tir"), "--gpu", str(spec), "-q",
                                       "-o", str(sched)])
    assert solved.exit_code == 0, solved.output
    assert json.loads(sched.read_text())["machine_digest"] == load_machine(str(spec)).digest != load_machine("h100").digest
    refused = run(sched, "-o", tmp_path / "a.cu")
    assert refused.exit_code == 2 and "not the bundled h100" in refused.output and not (tmp_path / "a.cu").exists()
    assert run(sched, "--gpu", spec, "-o", tmp_path / "b.cu").exit_code == 0


def test_fixture_schedules_are_the_solvers():
    """Every fixture but the hand-written FA4 one is stage output as twill writes it."""
    for path in DATA.glob("*.json"):
        data = json.loads(path.read_text())
        assert data["format"] == "twill-schedule/1"
        assert data["stage"] == ("swp" if path.name.endswith(".swp.json") else "joint")


@pytest.mark.parametrize("dtype, ctype_", [("bf16", "__nv_bfloat16"), ("f32", "float")])
def test_output_dtype_of_a_carry(tmp_path, dtype, ctype_):
    """{output = DTYPE} on a carry sets the element type the kernel writes it in (default: its own)."""
    text = (ROOT / "examples" / "gemm_hopper.tir").read_text().replace("{output = f16}", f"{{output = {dtype}}}")
    graph = tmp_path / "g.tir"
    graph.write_text(text)
    out = tmp_path / "g.cu"
    result = CliRunner().invoke(main, ["emit-cuda", str(graph), "--gpu", "h100", "-q", "-o", str(out)])
    assert result.exit_code == 0, result.output
    cu = out.read_text()
    assert f"{ctype_}* out_acc0;  // output acc0_n: {dtype}" in cu and f"{ctype_}* out_acc1 = nullptr;" in cu


def _ring_graph(rng) -> str:
    """A random FlashAttention-like loop: 2-3 streamed loads of random depth, S = mma of two of
    them, its softmax, and an accumulating mma of P with a third; sometimes a second accumulator."""
    loads = [f"l{i}" for i in range(rng.randint(2, 3))]
    second = rng.random() < 0.5
    lines = ["kernel rings", "carry acc : f32[64,64] = 0"] + (["carry acc2 : f32[64,64] = 0"] if second else [])
    lines += ["loop {"] + [f"  {x} = load : f16[64,64] @smem {{depth = {rng.randint(1, 4)}}}" for x in loads]
    order = rng.sample(loads, len(loads))  # every load is read by some mma
    a, b, c = order[0], order[1], order[2] if len(order) > 2 else rng.choice(loads)
    d = rng.choice(loads)
    lines += [f"  s = mma {a}, {b} : f32[64,64]", "  m = rowmax s : f32[64]", "  p = exp2 s, m : f16[64,64]",
              f"  acc_n = mma p, {c}, acc : f32[64,64]"]
    if second:
        lines += [f"  acc2_n = mma {a}, {d}, acc2 : f32[64,64]", "  yield acc = acc_n, acc2 = acc2_n", "}"]
    else:
        lines += ["  yield acc = acc_n", "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("seed", range(10))
def test_ring_slots_of_random_loops_are_freed_once(seed):
    """On loops the fixtures do not cover, every consumer frees every ring instance exactly once:
    a persistent CTA's next tile would otherwise wait forever (or reuse a slot still read)."""
    import random
    from twill.pipeline import solve
    rng = random.Random(seed)
    text = _ring_graph(rng)
    for gpu in ("h100", "b200"):
        machine = load_machine(gpu)
        s = solve(parse_tir(text, f"rings{seed}.tir"), machine)
        r = Renderer(build_model(s, machine))
        for chan, role, n in ring_readers(r):
            assert Counter(r.p.released(role, chan, n)) == Counter(range(n)), (gpu, text, chan.value, role, n)
            assert r.p.waits_for_its_own_release(role, chan, n) == [], (gpu, text, chan.value, role, n)
        assert "__global__" in r.render()  # and the whole file renders


def test_a_load_of_an_earlier_iteration_is_refused(tmp_path):
    text = (ROOT / "examples" / "gemm_hopper.tir").read_text().replace("mma a0, b, acc0", "mma a0@1, b, acc0")
    (tmp_path / "g.tir").write_text(text)
    result = CliRunner().invoke(main, ["emit-cuda", str(tmp_path / "g.tir"), "--gpu", "h100", "-q",
                                       "-o", str(tmp_path / "g.cu")])
    assert result.exit_code == 2 and "reads 'a0@1', a load of an earlier iteration" in result.output
    assert not (tmp_path / "g.cu").exists()


@needs_nvcc
@pytest.mark.parametrize("gpu, arch", [("h100", "90a"), ("b200", "100a")])
def test_a_random_loop_compiles_without_warnings(tmp_path, gpu, arch):
    """One of the random loops above, solved and emitted for each target, builds cleanly
    (all ten seeds do; one is compiled here to keep the suite short)."""
    import random
    from twill.pipeline import solve
    machine = load_machine(gpu)
    s = solve(parse_tir(_ring_graph(random.Random(3)), "rings3.tir"), machine)
    src = tmp_path / "k.cu"
    src.write_text(emit_cuda(s, machine))
    rc, err = nvcc_build(src, f"sm_{arch}")
    assert rc == 0, err
    noise = warnings_in(err)
    assert noise == [], "\n".join(noise)


NARROW_GEMMS = {  # (k, n) of a one-warpgroup GEMM tile: rows of 32 and 64 bytes (32- and 64-byte swizzle),
    "k32": (32, 128), "k16": (16, 64), "n32": (64, 32)}  # besides the fixtures gemm_k16n32 and gemm_k32n16


def narrow_gemm(k: int, n: int) -> str:
    return (f"kernel gemm_k{k}n{n}\n"
            f"carry acc : f32[64,{n}] = 0 {{output = f16}}\n"
            "loop {\n"
            f"  a     = load : f16[64,{k}] @smem {{depth = 4}}\n"
            f"  b     = load : f16[{k},{n}] @smem {{depth = 4}}\n"
            f"  acc_n = mma a, b, acc : f32[64,{n}]\n"
            "  yield acc = acc_n\n}\n")


# -- 8-bit mma inputs -------------------------------------------------------------------------------

def gemm8(a: str, b: str, acc: str, b_shape: str = "[128,128]", attrs: str = " {transpose_b = true}",
          n: int = 128) -> str:
    """A one-tile GEMM of 8-bit inputs: a [128, 128], b `b_shape` (square by default, N x K)."""
    return (f"kernel gemm8\ncarry acc : {acc}[128,{n}] = 0\nloop {{\n  a = load : {a}[128,128] @smem\n"
            f"  b = load : {b}{b_shape} @smem\n  acc_n = mma a, b, acc : {acc}[128,{n}]{attrs}\n"
            "  yield acc = acc_n\n}\n")


def emit8(text: str, gpu: str) -> str:
    from twill.pipeline import SolveOptions, solve
    machine = load_machine(gpu)
    return emit_cuda(solve(parse_tir(text, "gemm8.tir"), machine, SolveOptions(swp_only=True)), machine)


@pytest.mark.parametrize("gpu, dtype, acc, wanted", [
    ("h100", "f8e5m2", "f32", "wgmma.mma_async.sync.aligned.m64n128k32.f32.e5m2.e5m2 {"),
    ("h100", "f8e4m3", "f32", "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"),
    ("h100", "i8", "i32", "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {"),
    ("b200", "f8e4m3", "f32", "twill::umma_ss_f8f6f4(sm.tmem_base, twill::desc_kmajor<__nv_fp8_e4m3, 128, 128>"
                              "(sm.ld_a[(tile.pos + j) % 2], 0, 32 * kk), twill::desc_kmajor<__nv_fp8_e4m3, 128, 128>"
                              "(sm.ld_b[(tile.pos + j) % 2], 0, 32 * kk), twill::umma_idesc8<128, 128, 1, 0, 0>()"),
    ("b200", "f8e5m2", "f32", "twill::umma_idesc8<128, 128, 1, 1, 1>()"),
    ("b200", "i8", "i32", "twill::umma_ss_i8(sm.tmem_base, twill::desc_kmajor<int8_t, 128, 128>"),
    ("h100", "f8e4m3 f8e5m2", "f32", "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e5m2 {"),  # a, b of two fp8s
    ("h100", "f8e5m2 f8e4m3", "f32", "twill::wgmma_m64n128k32_ss_f8e5m2_f8e4m3(acc_n[0].x[mb]"),
    ("b200", "f8e5m2 f8e4m3", "f32", "twill::umma_idesc8<128, 128, 1, 1, 0>()"),
])
def test_8bit_inputs_take_the_tensor_cores_8bit_instructions(gpu, dtype, acc, wanted):
    """An mma of 8-bit inputs is wgmma k32 (PTX: .e4m3/.e5m2 into f32, .s8 into s32; no transpose
    operands) or tcgen05.mma kind::f8f6f4 / kind::i8 (D format F32 = 1 or S32 = 2, A and B formats
    E4M3 = 0, E5M2 = 1, signed 8-bit = 1): K = 128 in 4 steps of 32 values (32 bytes of a row), the
    tiles moved by TMA as bytes in 128-value swizzle rows."""
    a, _, b = dtype.partition(" ")
    cu = emit8(gemm8(a, b or a, acc), gpu)
    assert wanted in cu
    assert "for (int kk = 0; kk < 4; ++kk)" in cu and "32 * kk" in cu and "16 * kk" not in cu
    assert "CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, p.a" in cu and "128, 128, 128))" in cu  # 128 x 128 boxes, 128-byte swizzle
    assert "#include <cuda_fp8.h>" in cu
    if acc == "i32":  # integer accumulators stay integers on the way out
        assert ("twill::FragS32<" if gpu == "h100" else "twill::TRowS32<128> acc_n_final;") in cu
        assert "int32_t* out_acc;" in cu


def test_bf16_takes_the_bf16_instructions_on_both_targets():
    """bf16 operands: wgmma .bf16 (the fixture gemm_bf16.h100) and, on sm_100a, kind::f16 with
    the A and B formats BF16 = 1 (umma_idesc's BF16 flag); TMA's bf16 tensor maps on both."""
    text = (ROOT / "tests" / "data" / "tir" / "gemm_bf16.tir").read_text()
    cu = emit8(text, "b200")
    assert "twill::umma_ss(sm.tmem_base, twill::desc_kmajor<__nv_bfloat16, 64, 64>" in cu
    assert "twill::umma_idesc<64, 128, true, false, true>()" in cu and "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16" in cu
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in emitted("gemm_bf16.h100")


def test_kernels_without_8bit_mmas_leave_the_runtime_as_it_was():
    """The 8-bit part of the runtime (cuda_fp8.h, FragS32, the 8-bit tcgen05 kinds) goes only into
    kernels that use it, so every other kernel's text is what it was (the goldens pin it)."""
    for name in ("gemm_hopper.h100", "attention_fwd_blackwell.b200", "gemm_bf16.h100"):
        assert "cuda_fp8.h" not in emitted(name) and "FragS32" not in emitted(name)
    assert "umma_ss_i8(" in emitted("gemm_fp8_e5m2.b200")  # one part per target, every kind in it


@pytest.mark.parametrize("text, message", [
    (gemm8("f8e4m3", "f8e4m3", "f32", "[128,256]", "", n=256),  # b stored K x N
     "the tensor core reads f8e4m3 operands K-major only, and b is K x N"),
    (gemm8("f8e4m3", "f8e4m3", "f32", "[128,128]", " {transpose_b = false}"),
     "reads f8e4m3 operands K-major only, and b is K x N"),
    (gemm8("f8e4m3", "i8", "f32"), "takes a and b of one dtype of f16, bf16, f8e4m3, f8e5m2, i8, f32 \\(TF32\\), or of two "
                                   "fp8 ones \\(got f8e4m3, i8\\)"),
    (gemm8("i8", "i8", "f32"), "emit-cuda's mma accumulates in i32 \\(the result is f32\\) for i8 inputs"),
    (gemm8("f8e4m3", "f8e4m3", "f16"), "accumulates in f32 \\(the result is f16\\) for f8e4m3 inputs"),
])
@pytest.mark.parametrize("gpu", ["h100", "b200"])
def test_8bit_mmas_the_tensor_core_cannot_do_are_refused(text, message, gpu):
    with pytest.raises(EmitError, match=message):
        emit8(text, gpu)


def test_an_fp8_gemm_whose_b_is_k_by_n_reads_its_transpose(tmp_path):
    """Triton 3.9's fp8 matmul (tests/data/ttgir/triton39/mm_fp8.ttgir) has B K x N in memory and
    transposes it on its way to shared memory; TMA cannot, and 8-bit wgmma reads K-major only. Once
    refused here, the import now types B as the kernel reads it, N x K, `{transposed = true}` (ttgir/kmajor.py):
    the binding copies the caller's [K, N] tensor transposed, and the mma reads both operands K-major. The same
    graph written by hand with B K x N, no attribute, is still the error, its hint naming the attribute."""
    path = ROOT / "tests" / "data" / "ttgir" / "triton39" / "mm_fp8.ttgir"
    result = CliRunner().invoke(main, ["emit-cuda", str(path), "--gpu", "h100", "-q", "-o", str(tmp_path / "k.cu")])
    assert result.exit_code == 0, result.output
    assert "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {" in (tmp_path / "k.cu").read_text()
    with pytest.raises(EmitError, match="reads f8e4m3 operands K-major only, and b is K x N") as err:
        emit8(gemm8("f8e4m3", "f8e4m3", "f32", "[128,128]", " {transpose_b = false}"), "h100")
    assert "{transposed = true}" in err.value.diagnostics[0].hint


def test_an_8bit_mma_with_a_in_registers_is_refused():
    """wgmma's 8-bit A fragment is not the accumulator layout the register math writes: a computed
    int8 A operand is refused (stage it in shared memory), not miscompiled; a computed fp8 one is
    an fp8 register tile (twill::Frag8) shuffled into the A fragment (FP8 attention's P)."""
    text = ("kernel r8\ncarry acc : f32[64,128] = 0\nloop {\n  x = load : f16[64,128] @smem\n"
            "  a = convert x : f8e4m3[64,128]\n  b = load : f8e4m3[128,128] @smem\n"
            "  acc_n = mma a, b, acc : f32[64,128] {transpose_b = true}\n  yield acc = acc_n\n}\n")
    assert "twill::frag8_to_a(" in emit8(text, "h100")
    text = text.replace("f32[64,128] = 0", "i32[64,128] = 0").replace("f8e4m3", "i8").replace(": f32", ": i32")
    with pytest.raises(EmitError, match="wgmma of i8 reads a from shared memory, but 'a' is a i8 tile in reg"):
        emit8(text, "h100")


def test_the_corpus_fp8_gemm_imports_and_emits_for_both_targets(tmp_path):
    """Triton's fp8 GEMM (e4m3, B transposed in shared memory: K-major) from its sm_90 and sm_100
    dumps: imported, solved and emitted with the 8-bit instructions (the sm_90 one is a fixture,
    compiled with the others)."""
    for dump, gpu, wanted in (("gemm_fp8_sm90", "h100", "twill::wgmma_m64n128k32_ss_f8e4m3("),
                              ("gemm_fp8_sm100", "b200", "twill::umma_ss_f8f6f4(")):
        out = tmp_path / f"{dump}.cu"
        result = CliRunner().invoke(main, ["emit-cuda", str(ROOT / "tests" / "data" / "ttgir" / f"{dump}.ttgir"),
                                           "--gpu", gpu, "-q", "-o", str(out)])
        assert result.exit_code == 0, result.output
        assert wanted in out.read_text()


@needs_nvcc
@pytest.mark.parametrize("tile", sorted(NARROW_GEMMS))
def test_tiles_narrower_than_128_bytes_compile(tmp_path, tile):
    """A tile whose rows are 64 or 32 bytes (K = 32 or 16 columns of f16, or N = 32) is loaded and
    read by the tensor core with a 64- or 32-byte swizzle (the GPU test runs them)."""
    from twill.pipeline import solve
    k, n = NARROW_GEMMS[tile]
    machine = load_machine("h100")
    src = tmp_path / "k.cu"
    src.write_text(emit_cuda(solve(parse_tir(narrow_gemm(k, n), "narrow.tir"), machine), machine))
    sw = {32: 32, 64: 64}.get(2 * k, 128)
    assert f"64, {sw // 2}, {sw}))" in src.read_text()  # a's tensor map: 64-row boxes of one swizzle block
    rc, err = nvcc_build(src, "sm_90a")
    assert rc == 0, err
    noise = warnings_in(err)
    assert noise == [], "\n".join(noise)
    assert "0 bytes spill stores" in err


# attention_fwd_simple with its values named like the emitted code's own locals and helpers
RISKY_NAMES = {"acc_n": "c", "l_new": "b", "m_new": "i", "p": "f", "alpha": "t", "acc_r": "kk", "s": "tile",
               "q": "mb", "k": "r0", "v": "row0", "m": "cb", "l": "ib", "acc": "leader"}


def _device_words(name: str) -> set[str]:
    """Identifiers the device part of a golden file uses unqualified that no graph or role name
    of its schedule is part of: the emitter's own vocabulary."""
    from twill.emit.model import ident
    s = schedule(name)
    g = parse_tir(s.graph_tir, name)
    user = {ident(v.name) for v in g.inputs + g.carries} | {ident(o.name) for o in g.ops}
    user |= {ident(r.name) for r in s.roles} | {ident(s.kernel)}
    if g.epilogue:  # (its ops' locals are NAME_ep)
        user |= {ident(o.name) for o in g.epilogue.ops}
    text = (ROOT / "tests" / "golden" / "emit" / f"{name}.cu").read_text()
    body = text[text.index("namespace twill_"):text.index("#ifndef TWILL_NO_HOST")]
    body = re.sub(r'"[^"\n]*"', "", re.sub(r"//[^\n]*", "", body))
    words = set(re.findall(r"(?<![\w.:>])([A-Za-z_]\w*)", body))
    return {w for w in words if not any(u in w for u in user)}


def test_the_emitters_own_names_are_reserved_for_its_locals():
    """A graph value whose local would take a name the device code already uses (a value `c`
    beside `for (int c = ...)`) is renamed (twill.emit.model.local): every such name in the
    goldens is reserved, so a new local in the emitter cannot silently reopen the clash."""
    from twill.emit.model import local
    keywords = {"if", "for", "int", "const", "return", "auto", "void", "float", "struct", "template", "typename",
                "bool", "unsigned", "char", "static", "constexpr", "else", "while", "switch", "case", "break",
                "default", "true", "false", "nullptr", "sizeof", "alignas", "asm", "volatile", "using", "namespace",
                "inline", "static_assert", "static_cast", "reinterpret_cast", "const_cast", "pragma", "unroll",
                "round", "double", "long"}
    loose = {w for name in FIXTURES for w in _device_words(name)
             if w not in keywords and local(w) == w}
    assert loose == set()


@pytest.mark.slow
@needs_nvcc
def test_values_named_like_the_emitters_own_locals_compile(tmp_path):
    from twill.pipeline import solve
    text = (ROOT / "examples" / "attention_fwd_simple.tir").read_text()
    text = re.sub(r"#[^\n]*", "", text)
    text = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: RISKY_NAMES.get(m.group(0), m.group(0)), text)
    text = text.replace("[128,128]", "[64,64]").replace("[128]", "[64]")  # the same ops and names, a quicker build
    machine = load_machine("h100")
    src = tmp_path / "k.cu"
    src.write_text(emit_cuda(solve(parse_tir(text, "risky.tir"), machine), machine))
    rc, err = nvcc_build(src, "sm_90a")
    assert rc == 0, err


@needs_nvcc
def test_a_one_warp_mma_role_reads_its_tensor_memory_out_as_a_warpgroup(tmp_path):
    """On b200 the solver gives this GEMM a 1-warp MMA role (its accumulator lives in tensor
    memory); tcgen05.ld reads it out a warp per 32 lanes, so emit-cuda makes that role a warpgroup
    (it refused: 'no warpgroup role can read acc_n out of tensor memory')."""
    from twill.pipeline import solve
    machine = load_machine("b200")
    s = solve(parse_tir(narrow_gemm(64, 32), "narrow.tir"), machine)
    assert all(r.warps == 1 for r in s.roles)
    src = tmp_path / "k.cu"
    src.write_text(emit_cuda(s, machine))
    assert "the roles' 5 warp(s)" in src.read_text()
    rc, err = nvcc_build(src, "sm_100a")
    assert rc == 0, err


def test_an_mma_operand_narrower_than_32_bytes_is_refused():
    from twill.pipeline import solve
    machine = load_machine("h100")
    text = narrow_gemm(64, 8)  # b: 8 columns of f16, 16 bytes a row
    with pytest.raises(EmitError, match="multiple of 32 bytes"):
        emit_cuda(solve(parse_tir(text, "narrow.tir"), machine), machine)


@needs_nvcc
@pytest.mark.skipif(shutil.which("make") is None, reason="make not found")
def test_makefile_builds_an_example_and_remakes_only_what_changed(tmp_path):
    """examples/Makefile, as a user runs it: graph -> schedule -> .cu -> .o with the installed
    `twill` and nvcc. A comment added to the graph re-solves it, but emit-cuda leaves the .cu
    untouched (same text), so make does not recompile the object."""
    twill = shutil.which("twill") or str(Path(sys.executable).parent / "twill")
    if not Path(twill).is_file():
        pytest.skip("the twill command is not installed")
    ex = tmp_path / "examples"
    ex.mkdir()
    for f in ("Makefile", "gemm_hopper.tir"):
        shutil.copy(ROOT / "examples" / f, ex / f)

    def make():
        proc = subprocess.run(["make", "-C", str(ex), f"TWILL={twill}", f"NVCC={nvcc()}", "NVCCFLAGS=-std=c++17",
                               "gemm_hopper.o"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    first = make()
    assert "solve gemm_hopper.tir" in first and "emit-cuda" in first and "gemm_hopper.o" in first
    cu = (ex / "gemm_hopper.cu").read_text()
    assert cu == emitted("gemm_hopper.h100")  # the bundled schedule fixture is the solver's answer
    obj = (ex / "gemm_hopper.o").stat().st_mtime_ns
    with open(ex / "gemm_hopper.tir", "a") as f:
        f.write("# a comment changes the graph file, not the kernel\n")
    second = make()
    assert "solve gemm_hopper.tir" in second and "nvcc" not in second
    assert (ex / "gemm_hopper.o").stat().st_mtime_ns == obj


# -- which way a square b is read --------------------------------------------------------------------

def _square_b_graph(q_space: str, s_attr: str = "", pv_attr: str = "") -> str:
    return f"""kernel sq
input q : f16[64,128] {q_space}
input w : f16[128,64] @smem
carry acc : f32[64,128] = 0
loop {{
  k = load : f16[128,128] @smem
  v = load : f16[128,128] @smem
  s = mma q, k : f32[64,128] {s_attr}
  p = exp2 s : f16[64,128]
  acc_n = mma p, v, acc : f32[64,128] {pv_attr}
  t = mma q, w : f32[64,64] {pv_attr}
  yield acc = acc_n
}}
"""


@pytest.mark.parametrize("q_space", ["@smem", ""])
def test_square_b_is_transposed_after_data_and_not_after_a_computed_tile(q_space):
    """Q K^T whether Q is a shared-memory tile or a register input (it was read as Q K when Q sat
    in registers, and the kernel computed the wrong product), P V for a computed P; the
    transpose_b attribute overrides the default and may not contradict b's shape."""
    from twill.emit.model import mma_shape
    graph = parse_tir(_square_b_graph(q_space), "sq.tir")
    assert mma_shape(graph, graph.op("s")).b_kmajor and not mma_shape(graph, graph.op("acc_n")).b_kmajor
    assert not mma_shape(graph, graph.op("t")).b_kmajor  # w is K x N by its shape
    flipped = parse_tir(_square_b_graph(q_space, s_attr="{transpose_b = false}"), "sq.tir")
    assert not mma_shape(flipped, flipped.op("s")).b_kmajor
    contradicted = parse_tir(_square_b_graph(q_space, pv_attr="{transpose_b = true}"), "sq.tir")
    assert mma_shape(contradicted, contradicted.op("acc_n")).b_kmajor  # square: the attribute decides
    with pytest.raises(EmitError, match="transpose_b = true, but b is 128x64"):
        mma_shape(contradicted, contradicted.op("t"))


def _module(path: Path):
    import importlib.util
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_bench_runs_golden_kernels_of_its_graphs():
    """bench/gpu_bench.py runs the golden files themselves (no twill needed on the GPU machine),
    which test_matches_golden keeps equal to what emit-cuda writes today, so the GPU numbers cannot be
    about older code. Each of its kernels is a fixture solved from the graph and for the machine
    the bench reports, in the namespace its shim uses."""
    bench = _module(ROOT / "bench" / "gpu_bench.py")
    solved = _module(DATA / "regenerate.py").SOLVED
    assert Path(bench.KDIR) == ROOT / "tests" / "golden" / "emit"
    for name, (fixture, namespace, graph, _) in bench.KERNELS.items():
        assert fixture in FIXTURES, name
        example, gpu, swp_only = solved[fixture]
        assert graph in (example, f"examples/{example}.tir") and not swp_only, name
        assert bench.spec(name) == gpu == schedule(fixture).machine, name
        assert f"namespace {namespace} {{" in emitted(fixture), name


def test_a_one_row_tile_loads_unswizzled_in_one_box():
    """TMA swizzles by the shared-memory address: a [1, 64] f32 tile (a per-key bias) under a 128-byte
    swizzle had its second box at +128 bytes and its odd ring slots at +256, off the 1024-byte atom
    its reader assumes, and so read permuted columns (the held-out kernel was 0.24 off on the H200).
    It loads as one plain box, its map unswizzled, and the runtime's Tile agrees (kSw 16 below 8 rows)."""
    import re
    from twill.emit.model import swizzle_bytes
    text = emitted("heldout_biased_softmax.h200")
    loads = [line for line in text.splitlines() if "twill::tma_load(" in line and "tm.bias" in line]
    assert loads and all("reinterpret_cast" not in line for line in loads)  # one box per slot, at the slot
    enc = re.search(r"encode\(&tm_bias, [^;]*\)\)", text).group(0)
    assert enc.endswith("1, 64, 16))"), enc
    assert "ROWS % 8 != 0    ? 16" in text
    assert [swizzle_bytes(256, r) for r in (1, 4, 8, 64)] == [16, 16, 128, 128]


def test_a_value_staged_for_one_reader_is_copied_into_registers_and_freed_before_the_op():
    """attn_exp hands s and m_new from consumer0 to the exp2's role through one-slot rings. The model
    holds a staged value only until its reader starts (liveness.memory_holds); read in place, the
    slot stayed held through the whole exp2 and the producer could not stage the next S, which the
    schedule overlaps (held-out D = 64 attention ran 2.3x slower than Triton on an H100). Each such
    read copies the tile into registers and frees its slot before the op; the releases after the
    op are gone, and every slot is still freed exactly once (ringcheck, test_ringcheck)."""
    p = renderer("heldout_attn_exp.h200").p
    copied = [c for c in p.channels.values() if c.copied]
    assert {c.value for c in copied} >= {"s0", "s1", "m_new0", "m_new1"}
    text = emitted("heldout_attn_exp.h200")
    for c in copied:
        ring, stage = f"sm.ring_{c.ident}", f"sm.stage_{c.ident}["
        assert f"const twill::View<1, 128, float> {c.ident}_" not in text
        reads = [i for i in range(len(text)) if text.startswith(f"twill::buffer_to_frag(", i)
                 and text.startswith(stage, text.index(",", i) + 2)]
        assert reads, c.value
        for i in reads:
            line_end = text.index("\n", i)
            assert text[line_end:].lstrip().startswith(f"{ring}.release_by_warp("), c.value
        assert text.count(f"{ring}.release_by_warp(") == len(reads) + text.count(f"{ring}.release_by_warp(tile.pos + i)")
