"""Latency intervals (`ops.X.latency: {min, typical, max}` in a machine description) and the slack
a schedule reports for them (twill/slack.py), checked against a brute-force run of the unrolled
steady state on small graphs solved for real."""
from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner

from twill.errors import InputError
from twill.ir import Graph
from twill.machine import load_machine, parse_machine
from twill.pipeline import SolveOptions, solve
from twill.schedule import Schedule
from twill.slack import slack_units
from twill.tir import parse_tir
from twill_cli.main import main

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "tests" / "data" / "machines" / "h100_latency.yaml"

GRAPHS = {
    # a streaming K tile read by two mmas, and an exp2 (interval) between them
    "chain": """kernel chain
input q : f16[64,64] @smem
carry o : f32[64,64] = 0
loop {
  k  = load          : f16[64,64] @smem
  s  = mma q, k      : f32[64,64]
  p  = exp2 s        : f16[64,64]
  o2 = mma p, k, o   : f32[64,64]
  yield o = o2
}
""",
    # a recurrence through the row maximum; p's exp2 has no reader (only its role waits for it)
    "rowmax": """kernel rowmax
input q : f16[64,64] @smem
carry m : f32[64] = -inf
loop {
  k     = load            : f16[64,64] @smem
  s     = mma q, k        : f32[64,64]
  m_new = rowmax s, m     : f32[64]
  p     = exp2 s, m_new   : f16[64,64]
  yield m = m_new
}
""",
    # an exp2 read one iteration later (distance 1) and a load read by a non-mma
    "later": """kernel later
carry a : f32[64,64] = 0
loop {
  x = load            : f32[64,64] @smem
  e = exp2 x          : f32[64,64]
  y = add e@1, a      : f32[64,64]
  yield a = y
}
""",
}


def _machine():
    return load_machine(str(SPEC))


@pytest.fixture(scope="module")
def solved():
    machine = _machine()
    out = {}
    for name, text in GRAPHS.items():
        graph = parse_tir(text, f"{name}.tir")
        for swp in (True, False):
            out[name, swp] = (solve(graph, machine, SolveOptions(swp_only=swp)), graph)
    return out


def brute_force(s: Schedule, graph: Graph, name: str, typical: Fraction, depth: int, iterations: int = 24) -> Fraction | None:
    """The largest delay of `name`'s completion that no instance of the unrolled steady state
    notices, found by running every instance: readers waiting past their start, its role
    (for a synchronous op) busy past its next op's start, or, for a streaming load, its ring
    slot taken again (the producer issues instance i once instance i - depth has left its slot)."""
    ops, ii = s.by_name, s.ii
    v = ops[name]
    readers = [(ops[e.dst], e.distance) for e in graph.edges if e.src == name]
    margins = []
    if v.streaming:
        depth = {b.value: b.depth for b in s.buffers}.get(name, depth)
        from twill import vocab

        def hold(r):
            return r.cycles if vocab.lookup(r.opcode).tensor_core else 0

        def free(k):  # instance k has left its slot
            return max(r.start + (k + d) * ii + hold(r) for r, d in readers)
        issue = Fraction(0)
        for i in range(iterations):
            issue = max(issue, Fraction(free(i - depth)) if i >= depth else Fraction(0))
            if i >= depth:  # the steady state: the ring, not the prologue, decides
                need = min(r.start + (i + d) * ii for r, d in readers)
                margins.append(need - issue - typical)
    else:
        for i in range(iterations):
            ready = v.start + i * ii + v.cycles
            margins += [r.start + (i + d) * ii - ready for r, d in readers]
            if not v.is_async and v.role is not None:
                later = [u.start + k * ii for u in s.ops if u.role == v.role
                         for k in range(iterations + 2) if u.start + k * ii > v.start + i * ii]
                margins.append(min(later) - ready)
    return min(margins) if margins else None


@pytest.mark.parametrize("graph", sorted(GRAPHS))
@pytest.mark.parametrize("swp", [True, False], ids=["swp", "joint"])
def test_slack_matches_a_brute_force_run_of_the_steady_state(solved, graph, swp):
    s, g = solved[graph, swp]
    assert s.latency_slack, "every graph has an op with a latency interval"
    for x in s.latency_slack:
        typical = Fraction(x.typical) / Fraction(s.scale.unit_cycles)
        depth = _machine().streaming_depth
        want = brute_force(s, g, x.op, typical, depth)
        got = slack_units(s, g, x.op, float(typical), depth)
        if want is None:
            assert got is None and x.slack is None
            continue
        assert got == pytest.approx(float(want), abs=1e-6), (x.op, s.to_json())
        assert x.slack == pytest.approx(float(want), abs=1e-3)
        assert x.slack_cycles == pytest.approx(float(want) * s.scale.unit_cycles, abs=0.1)
        assert x.margin_at_max == pytest.approx(x.slack_cycles - (x.max - x.typical), abs=0.1)


def test_the_solver_schedules_at_typical(solved):
    """An interval's typical value is the op's latency: the schedule is the one the same spec
    with `cycles: typical` gives (the digests differ, the times do not)."""
    s, _ = solved["chain", True]
    exp2 = s.by_name["p"]
    assert exp2.machine_cycles == 64 * 64 / 16  # typical: elements / 16
    spec = SPEC.read_text().replace('latency: {min: "elements / 20", typical: "elements / 16", max: "elements / 8"}',
                                    'cycles: "elements / 16"')
    plain = parse_machine(spec.replace("latency: {min: 500, typical: 800, max: 5000}, occupancy: 0", "cycles: 0"), "plain.yaml")
    again = solve(parse_tir(GRAPHS["chain"], "chain.tir"), plain, SolveOptions(swp_only=True))
    assert [(o.name, o.start, o.cycles) for o in again.ops] == [(o.name, o.start, o.cycles) for o in s.ops]
    assert again.latency_slack == () and plain.digest != _machine().digest


def test_slack_is_in_the_json_and_the_table_and_old_files_load(solved, tmp_path):
    s, _ = solved["chain", False]
    data = json.loads(s.to_json())
    entries = {x["op"]: x for x in data["latency_slack"]}
    assert set(entries) == {"k", "p"} and entries["k"]["max"] == 5000 and entries["k"]["typical"] == 800
    assert Schedule.from_json(s.to_json()) == s
    old = dict(data)
    del old["latency_slack"]
    assert Schedule.from_json(json.dumps(old)).latency_slack == ()
    graph = tmp_path / "chain.tir"
    graph.write_text(GRAPHS["chain"])
    result = CliRunner().invoke(main, ["solve", str(graph), "--gpu", str(SPEC), "-q"])
    assert result.exit_code == 0, result.output
    assert "latency intervals" in result.output and "k: min 500, typical 800, max 5000 cycles; slack" in result.output
    out = tmp_path / "chain.json"
    assert CliRunner().invoke(main, ["solve", str(graph), "--gpu", str(SPEC), "-q", "-o", str(out)]).exit_code == 0
    assert CliRunner().invoke(main, ["emit-cuda", str(out), "--gpu", str(SPEC), "-q", "--no-ptxas-loop",
                                     "-o", str(tmp_path / "k.cu")]).exit_code == 0


def test_a_spec_without_intervals_keeps_its_digest():
    """The digest a schedule records (and emit-cuda checks) is the same for a description with no
    interval, so every schedule solved before still matches its machine."""
    h100 = load_machine("h100")
    text = (ROOT / "specs" / "h100.yaml").read_text()
    assert parse_machine(text, "h100.yaml").digest == h100.digest
    assert h100.op_specs["load"].latency is None


BAD = [
    ('latency: {min: 500, typical: 800}', "missing required key 'ops.load.latency.max'"),
    ('latency: {min: 500, typical: 800, max: 300}', "'ops.load.latency.max' is 300, less than 'ops.load.latency.typical' (800)"),
    ('latency: {min: 900, typical: 800, max: 5000}', "'ops.load.latency.typical' is 800, less than 'ops.load.latency.min' (900)"),
    ('latency: {min: 500, typical: 800, max: 5000, mean: 2}', "unknown key 'ops.load.latency.mean'"),
    ('latency: {min: 500, typical: "8 +", max: 5000}', "'ops.load.latency.typical'"),
    ('latency: 800', "'ops.load.latency' must be a mapping"),
    ('cycles: 0, latency: {min: 500, typical: 800, max: 5000}',
     "'ops.load.cycles' and 'ops.load.latency' both give its latency"),
    ('variable_latency: true', "missing required key 'ops.load.cycles'"),
]


@pytest.mark.parametrize("fields,message", BAD, ids=[b[1][:40] for b in BAD])
def test_a_bad_interval_is_an_error_naming_its_key(fields, message, tmp_path):
    text = SPEC.read_text().replace("latency: {min: 500, typical: 800, max: 5000}", fields)
    with pytest.raises(InputError) as exc:
        parse_machine(text, "m.yaml")
    assert message in str(exc.value), str(exc.value)
    spec = tmp_path / "m.yaml"
    spec.write_text(text)
    graph = tmp_path / "g.tir"
    graph.write_text(GRAPHS["chain"])
    result = CliRunner().invoke(main, ["solve", str(graph), "--gpu", str(spec), "-q"])
    assert result.exit_code == 2 and "Traceback" not in result.output and "m.yaml:" in result.output


def test_an_interval_that_comes_out_of_order_for_a_shape_is_located_at_the_op(tmp_path):
    """max = 300 - elements / 64 is below typical = elements / 16 for a 64 x 64 tile: the op is named."""
    text = SPEC.read_text().replace('max: "elements / 8"', 'max: "300 - elements / 64"')
    spec = tmp_path / "m.yaml"
    spec.write_text(text)
    graph = tmp_path / "g.tir"
    graph.write_text(GRAPHS["chain"])
    result = CliRunner().invoke(main, ["solve", str(graph), "--gpu", str(spec), "-q"])
    assert result.exit_code == 2, result.output
    assert "g.tir:7:" in result.output and "op 'p'" in result.output and "latency interval" in result.output
