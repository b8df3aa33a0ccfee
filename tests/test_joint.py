"""The joint stage (Yices2) on real solves: optimal I, the strategies it finds, and that every
schedule passes the independent verifier family by family."""
from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from twill.errors import NoScheduleError
from twill.liveness import regs_per_thread
from twill.registers import register_file, register_pool
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.schedule import Schedule
from twill.tir import load_tir, parse_tir
from twill.verify import verify

from conftest import solved_example

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def joint(name: str, gpu: str = "h100", **options):
    return solved_example(name, gpu, **options)  # solved once per test process (conftest)


def test_fig1_joint_is_optimal_at_the_swp_bound():
    s, graph, machine = joint("fig1.tir")
    assert (s.ii, s.length, s.optimal, s.stage) == (2, 4, True, "joint")
    assert dict(s.bounds)["swp_ii"] == 2
    # FA3's intra-warpgroup pipelining: one role, no cross-role traffic.
    assert len(s.roles) == 1 and not s.cross_role_edges
    assert verify(s, graph, machine) == []


def test_attention_simple_splits_softmax_from_the_accumulator():
    """The unsplit 128-row tile (the paper's no-sub-tiling ablation, here on Hopper): S (128
    registers per thread), P (64) and the accumulator (128) cannot share one warpgroup, so the
    accumulator gets a warpgroup of its own. And the SWP bound is not realisable: the softmax
    warpgroup cannot issue S(i+1) while exp2 still reads S(i) (two 128-register S tiles), so S,
    rowmax and exp2 of one iteration follow one another on it, and I rises from 240 to 255."""
    s, graph, machine = joint("attention_fwd_simple.tir")
    assert s.optimal and s.ii > dict(s.bounds)["swp_ii"]
    load_role = next(r for r in s.roles if "k" in r.ops)
    assert set(load_role.ops) == {"k", "v"}, "variable-latency loads run on a dedicated role"
    by_op = {o.name: o for o in s.ops}
    assert by_op["p"].role != by_op["acc_n"].role and by_op["s"].role == by_op["p"].role
    # S(i+1) starts only once exp2 has finished with S(i)
    assert by_op["s"].start + s.ii >= by_op["p"].start + by_op["p"].cycles
    assert regs_per_thread(128 * 128 * 4, 4) == 128
    used, pool = register_file(machine.limits, [(r.warps, r.registers) for r in s.roles])
    assert used <= pool
    for r in s.roles:
        assert machine.limits.min_registers <= r.registers <= machine.limits.registers_per_thread
    assert verify(s, graph, machine) == []


def test_the_register_file_is_what_the_launch_provides():
    """Warpgroups are launched whole at one count per thread (in granules): three warpgroups have
    3 x 128 x 168 registers, not the SM's 65536, so FA3's 24/240/240 fits and 32/248/248 does not."""
    lim = load_machine("h100").limits
    assert register_pool(lim, 3) == 3 * 128 * 168 and register_pool(lim, 4) == 65536
    assert register_file(lim, [(1, 24), (4, 240), (4, 240)]) == (128 * 504, 3 * 128 * 168)
    used, pool = register_file(lim, [(1, 32), (4, 248), (4, 248)])
    assert used > pool
    # one-warp roles share a warpgroup, at the largest of their budgets
    assert register_file(lim, [(1, 24), (1, 64), (4, 200)])[0] == 128 * (64 + 200)


def test_gemm_gives_each_half_its_own_consumer_warpgroup():
    """Two 64x256 f32 accumulators need 2 x 128 registers per thread: more than one warpgroup's
    threads have, so the halves go to two consumer warpgroups (CUTLASS's cooperative kernel)."""
    s, graph, machine = joint("gemm_hopper.tir")
    assert s.optimal and s.ii == dict(s.bounds)["swp_ii"]
    roles = {r.name: r for r in s.roles}
    assert sorted(roles) == ["load", "mma0", "mma1"]
    assert set(roles["load"].ops) == {"a0", "a1", "b"} and roles["load"].warps == 1
    assert {tuple(roles[r].ops) for r in ("mma0", "mma1")} == {("acc0_n",), ("acc1_n",)}
    assert all(roles[r].warps == machine.limits.warp_group for r in ("mma0", "mma1"))
    assert [b.depth for b in s.buffers] == [4, 4, 4]  # the example's {depth = 4}
    assert verify(s, graph, machine) == []


def test_too_few_warps_has_no_schedule():
    # The loads need a role of their own and the rest a warpgroup: 5 warps, not 4.
    with pytest.raises(NoScheduleError):
        joint("attention_fwd_simple.tir", warps=4)


def test_cli_exit_code_1_without_a_schedule():
    from twill_cli.main import main
    result = CliRunner().invoke(main, ["solve", str(EXAMPLES / "attention_fwd_simple.tir"), "--gpu", "h100",
                                       "--warps", "4", "-q"])
    assert result.exit_code == 1


def _random_graph(rng: random.Random, n: int) -> str:
    units = ["tensor", "sfu", "alu"]
    lines = ["kernel r", "input x : f16[64,64] @smem", "carry c : f32[64,64] = 0", "loop {"]
    names = []
    for i in range(n):
        operands = [rng.choice(names)] if names and rng.random() < 0.8 else ["x"]
        if i == n - 1 or (i > 0 and rng.random() < 0.2):
            operands.append("c")
        unit = rng.choice(units)
        opcode = {"tensor": "mma", "sfu": "exp2", "alu": "max"}[unit]  # well-shaped table ops (twill.vocab)
        if opcode == "mma":
            operands.insert(1, "x")
        lines.append(f"  o{i} = {opcode} {', '.join(operands)} : f32[64,64] {{cycles = {rng.randint(1, 4)}}}")
        names.append(f"o{i}")
    lines += [f"  yield c = o{n - 1}", "}"]
    return "\n".join(lines)


@pytest.mark.parametrize("seed", range(12))
def test_random_graphs_verify_and_respect_the_swp_bound(seed):
    rng = random.Random(seed)
    graph = parse_tir(_random_graph(rng, rng.randint(3, 5)), f"random{seed}.tir")
    machine = load_machine("h100")
    s = solve(graph, machine, SolveOptions(max_ii=60))
    swp = solve(graph, machine, SolveOptions(swp_only=True))
    assert s.ii >= swp.ii
    assert verify(s, graph, machine) == []


def _overlap(a, b, ii) -> bool:
    """Do two ops' busy intervals overlap somewhere in the steady state (modulo ii)?"""
    cells_a = {(a.start + c) % ii for c in range(max(a.cycles, 1))}
    return any((b.start + c) % ii in cells_a for c in range(max(b.cycles, 1)))


@pytest.mark.slow
def test_fa3_ping_pong_on_hopper():
    s, graph, machine = joint("attention_fwd_hopper.tir")
    assert s.optimal and s.ii == dict(s.bounds)["swp_ii"]
    by_op = {o.name: o for o in s.ops}
    loads = {by_op["k"].role, by_op["v"].role}
    assert len(loads) == 1 and set(next(r for r in s.roles if r.name in loads).ops) == {"k", "v"}
    # Each 64-row half runs on its own consumer warpgroup ...
    half0 = {by_op[n].role for n in ("s0", "p0", "acc0_n")}
    half1 = {by_op[n].role for n in ("s1", "p1", "acc1_n")}
    assert len(half0) == len(half1) == 1 and half0 != half1
    roles = {r.name: r for r in s.roles}
    assert all(roles[r].warps == machine.limits.warp_group for r in half0 | half1)
    # ... skewed so that one half's exponential runs while the other half uses the tensor core.
    assert any(_overlap(by_op[f"p{h}"], by_op[m], s.ii) for h, others in ((0, ("s1", "acc1_n")), (1, ("s0", "acc0_n")))
               for m in others)
    assert sum(32 * r.warps * r.registers for r in s.roles) <= machine.limits.registers_per_sm
    assert verify(s, graph, machine) == []


@pytest.mark.parametrize("example, options", [
    ("attention_fwd_blackwell.tir", {"warps": 8}),  # fewer warps
    ("attention_fwd_simple.tir", {}),               # no sub-tiling
])
@pytest.mark.slow
def test_blackwell_ablations_make_the_swp_bound_unrealisable(example, options):
    """At the SWP bound the joint problem is unsatisfiable (the full escalation of the 8-warp
    ablation climbs from I = 242 to 300 and takes about 90 s: docs/reproducing-the-paper.md)."""
    graph, machine = load_tir(EXAMPLES / example), load_machine("b200")
    bound = solve(graph, machine, SolveOptions(swp_only=True, **options)).ii
    with pytest.raises(NoScheduleError):
        solve(graph, machine, SolveOptions(max_ii=bound, **options))
    if not options:  # the one that escalates quickly: a schedule at a larger I, verified
        s, _, _ = joint(example, "b200", **options)
        assert s.ii > bound and verify(s, graph, machine) == []


@pytest.mark.parametrize("example, gpu", [("fig1.tir", "h100"), ("attention_bwd_blackwell.tir", "b200")])
def test_z3_backend_agrees_with_yices(example, gpu):
    pytest.importorskip("z3")
    a, graph, machine = joint(example, gpu)
    b, _, _ = joint(example, gpu, smt_backend="z3")
    assert (b.ii, b.length, b.optimal) == (a.ii, a.length, a.optimal)
    assert sorted(r.name for r in b.roles) == sorted(r.name for r in a.roles)
    assert verify(b, graph, machine) == []


# -- the model options a solve ran under are recorded, and verify checks against them -------------

def test_schedule_records_the_model_options_and_verify_applies_them():
    s, graph, machine = joint("gemm_hopper.tir", registers=200, depth=3)
    assert dict(s.options) == {"registers": 200, "depth": 3}
    assert Schedule.from_json(s.to_json()) == s and json.loads(s.to_json())["options"] == {"registers": 200, "depth": 3}
    assert verify(s, graph, machine) == []
    # a default solve claims nothing: its JSON says so, and a tighter claim must fail verification
    d, _, _ = joint("gemm_hopper.tir")
    assert json.loads(d.to_json())["options"] == {}
    bad = {v.family for v in verify(replace(d, options=(("registers", 128),)), graph, machine)}
    assert bad == {"registers"}  # 64x256 f32 accumulator + reserve > 128 per thread
    fewer = {v.family for v in verify(replace(d, options=(("warps", 8),)), graph, machine)}
    assert fewer == {"roles"}  # load + two warpgroups = 9 warps


def test_verify_rejects_cross_role_edges_a_no_cross_role_solve_forbade():
    s, graph, machine = joint("attention_fwd_simple.tir")
    inner = [e for e in s.cross_role_edges if not s.by_name[e[0]].variable_latency]
    assert inner  # the joint schedule hands values between its consumer warpgroups
    found = verify(replace(s, options=tuple(sorted(s.options + (("cross_role", False),)))), graph, machine)
    assert {v.family for v in found} == {"cross_role"} and len(found) == len(inner)


# -- pinned role groups (--group) ---------------------------------------------------------------------

FA4_GROUPS = (("k", "v"), ("s0", "acc0_n", "s1", "acc1_n"), ("m0_new", "p0", "alpha0", "l0_new"),
              ("m1_new", "p1", "alpha1", "l1_new"), ("acc0_r", "acc1_r"))


def test_fa4_roles_are_an_optimal_blackwell_schedule():
    """FA4's strategy, pinned: a load warp, a one-warp MMA role, two softmax warpgroups and a
    correction warpgroup reach the same (I, L) as twill's own (fewer-role) optimum, so FA4's
    split is optimal in the model; the fewest-roles tie-break is why twill prefers three roles."""
    free, graph, machine = joint("attention_fwd_blackwell.tir", "b200")
    fa4, _, _ = joint("attention_fwd_blackwell.tir", "b200", groups=FA4_GROUPS)
    assert fa4.optimal and (fa4.ii, fa4.length) == (free.ii, free.length) == (dict(free.bounds)["swp_ii"], free.length)
    assert len(free.roles) < len(fa4.roles)
    roles = {r.name: r for r in fa4.roles}
    assert sorted(roles) == ["correction", "load", "mma", "softmax0", "softmax1"]
    assert roles["mma"].warps == 1 and set(roles["mma"].ops) == {"s0", "acc0_n", "s1", "acc1_n"}
    assert {roles[r].warps for r in ("softmax0", "softmax1", "correction")} == {machine.limits.warp_group}
    # the correction warpgroup streams O through registers 32 columns at a time: a small budget
    assert roles["correction"].registers < min(roles["softmax0"].registers, roles["softmax1"].registers)
    assert sum(32 * r.warps * r.registers for r in fa4.roles) <= machine.limits.registers_per_sm
    assert verify(fa4, graph, machine) == []
    # the groups are recorded, and verify holds the schedule to them
    assert dict(fa4.options)["groups"] == FA4_GROUPS
    assert {v.family for v in verify(replace(free, options=(("groups", FA4_GROUPS),)), graph, machine)} == {"roles"}


def test_group_naming_an_unknown_op_is_an_input_error():
    from twill_cli.main import main
    result = CliRunner().invoke(main, ["solve", str(EXAMPLES / "fig1.tir"), "--gpu", "h100", "--group", "S,Q", "-q"])
    assert result.exit_code == 2 and "'Q'" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("seed", range(8))
def test_random_pins_are_respected_and_never_beat_the_free_optimum(seed):
    """Random graphs, random partitions of some of their ops into --group pins: the pinned
    solve (when one exists) keeps each group on one role and the groups apart, passes verify, and
    its I is never below the free solve's (pins only remove schedules)."""
    rng = random.Random(1000 + seed)
    graph = parse_tir(_random_graph(rng, rng.randint(3, 5)), f"pinned{seed}.tir")
    machine = load_machine("h100")
    ops = [op.name for op in graph.ops]
    rng.shuffle(ops)
    k = rng.randint(1, min(3, len(ops)))
    groups = tuple(tuple(ops[i::k]) for i in range(k))[: rng.randint(1, k)]
    free = solve(graph, machine, SolveOptions(max_ii=60))
    try:
        pinned = solve(graph, machine, SolveOptions(max_ii=60, groups=groups))
    except NoScheduleError:
        return  # a partition can be infeasible (an mma pinned apart from its only warpgroup...)
    role = {o.name: o.role for o in pinned.ops}
    assert all(len({role[v] for v in g}) == 1 for g in groups)
    assert len({role[g[0]] for g in groups}) == len(groups)
    assert pinned.ii >= free.ii and verify(pinned, graph, machine) == []


# -- memory lifetimes -------------------------------------------------------------------------------

def test_an_mma_holds_its_memory_operands_until_it_completes_and_accumulates_in_place():
    """P (@tmem) stays in tensor memory while the PV mma that reads it runs (the tensor core reads
    its operands as it executes); the accumulator chain O -> rescale -> mma is one tile, never two;
    the softmax reads S whole into its registers, so S's columns are free from its start. The joint
    stage's encoding and `verify` (through liveness.memory_use) share these rules."""
    from twill.liveness import live_intervals, memory_use
    from twill.verify import _problem
    s, graph, machine = joint("attention_fwd_blackwell.tir", "b200")
    p = _problem(s, graph, machine)
    ops, lives = s.by_name, live_intervals(s, p)
    pv = ops["acc0_n"]
    assert lives["p0"][1] >= pv.start + pv.cycles  # held until the mma completes
    assert lives["s0"][1] == max(ops["p0"].start, ops["m0_new"].start)  # read whole at the start
    assert lives["acc0_n"][3] == pv.start + pv.cycles  # counted from its end: written in place
    use = memory_use(s, p, "tmem")
    for t in range(pv.start, pv.start + pv.cycles):
        names = [n.split(" ")[0] for n in use[t % s.ii][1]]
        assert "p0" in names and names.count("acc0_r") + names.count("acc0_n") == 1
    assert max(u for u, _ in use) <= machine.limits.tmem_bytes


HOLD = """
kernel hold
input x : f16[64,64] @smem
loop {
  a = load : f16[64,64] @smem
  p = exp2 a : f32[64,64] @tmem {cycles = 200}
  o = mma p, x : f32[64,64] @tmem {cycles = 200}
  r = exp2 o : f16[64,64] {cycles = 10}
  store r
}
"""


@pytest.mark.slow
def test_an_mma_reading_tensor_memory_keeps_it_until_done_and_writes_elsewhere():
    """With tensor memory for two 64-column tiles, P (32 KiB) and O (32 KiB) fill it while the mma
    runs: it reads P until it completes, and writes O beside P, not over it (an mma writes in place
    only over its accumulator). So the next P starts only when O is done: I = 100 + 100 units
    (P's exponential, then the mma), where the SWP bound is the 128-unit TMA store. Releasing P at
    the mma's start, or writing O over P, would give 128, a schedule verify rejects."""
    text = (Path(__file__).resolve().parent.parent / "specs" / "b200.yaml").read_text()
    from twill.machine import parse_machine
    machine = parse_machine(text.replace("tmem_bytes: 262144 ", "tmem_bytes: 65536 "), "tight.yaml")
    graph = parse_tir(HOLD, "hold.tir")
    s = solve(graph, machine, SolveOptions())
    assert dict(s.scale.map)[200] == 100  # units: 2 machine cycles each
    assert (dict(s.bounds)["swp_ii"], s.ii, s.optimal) == (128, 200, True)
    assert verify(s, graph, machine) == []


def test_a_register_input_occupies_its_readers_registers_for_the_whole_loop():
    """An input without @smem (Q held in registers) costs every role that reads it its registers at
    every cycle: 64x128 f16 is 32 per thread of a warpgroup. verify and the budgets count it."""
    from twill.liveness import role_register_use
    from twill.verify import _problem
    text = (EXAMPLES / "attention_fwd_hopper.tir").read_text().replace(
        "input q0    : f16[64,128] @smem", "input q0    : f16[64,128]")
    graph, machine = parse_tir(text, "qreg.tir"), load_machine("h100")
    s = solve(graph, machine, SolveOptions())
    assert verify(s, graph, machine) == []
    p = _problem(s, graph, machine)
    reader = next(r for r in s.roles if "s0" in r.ops)
    use = role_register_use(s, p, reader)
    assert all(any(n.startswith("q0 (input, 32)") for n in names) for _, names in use)
    assert max(u for u, _ in use) <= reader.registers


def test_progress_says_what_is_being_proven():
    """Each report of the joint stage names I, and once a schedule is found L, the quantity being
    minimized (L, then each tie-break in order, then the lexicographic steps) and how long the last check took."""
    reports = []
    graph, machine = load_tir(EXAMPLES / "fig1.tir"), load_machine("h100")
    solve(graph, machine, SolveOptions(), lambda stage, info: reports.append((stage, dict(info))))
    minimizing = [info for stage, info in reports if stage == "joint" and "minimizing" in info]
    assert [i["minimizing"] for i in minimizing] == ["L", "roles", "cross-role edges", "warps", "starts",
                                                     "lexicographic"]
    assert all(i["I"] == 2 and i["L"] == 4 and float(i["last check s"]) >= 0 for i in minimizing)
