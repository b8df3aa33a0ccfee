"""`twill plot` and the terminal Gantt: the chart shows what the schedule says, for every example.

The tests check the data behind the picture (`twill.plot.chart_data`), not pixels: every op
instance of the unrolled program appears exactly once on its unit lane and once on its role lane,
over [start + i*I, that + cycles); the phases are `Schedule.phases`; the I markers are the multiples
of I; the arrows are the graph's dependences between instances. The pictures themselves must
exist, be well-formed and be byte-for-byte reproducible.
"""
from __future__ import annotations

import struct
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest
from click.testing import CliRunner

from twill.schedule import Buffer, Role, Schedule
from twill.tir import parse_tir

from conftest import ROOT, solved_example

# Examples too slow to solve in a test run; none today (every example solves, joint stage
# included, in seconds: docs/benchmarks.md).
SLOW: set[str] = set()
EXAMPLES = sorted(p.stem for p in (ROOT / "examples").glob("*.tir") if p.stem not in SLOW)
GPU = {"attention_fwd_blackwell": "b200", "attention_bwd_blackwell": "b200"}  # the rest: h100
# Examples whose joint schedule is found quickly; the others are drawn from their modulo schedule.
JOINT = {"fig1", "gemm_hopper", "attention_fwd_hopper", "attention_fwd_blackwell"}


def solved(example: str, joint: bool) -> Schedule:
    return solved_example(f"{example}.tir", GPU.get(example, "h100"), swp_only=not joint)[0]  # (conftest)


def joint_fixture() -> Schedule:
    """A hand-made FA4-like joint schedule: the simple attention's modulo schedule with a load role,
    an MMA role, a softmax warpgroup and a correction warpgroup (async MMAs overlap on their role)."""
    base = solved("attention_fwd_simple", False)
    ops = {"load": ("k", "v"), "mma": ("s", "acc_n"), "softmax": ("m_new", "p", "alpha", "l_new"),
           "correction": ("acc_r",)}
    role_of = {op: role for role, names in ops.items() for op in names}
    return replace(
        base, stage="joint", ops=tuple(replace(o, role=role_of[o.name]) for o in base.ops),
        roles=(Role("load", 1, 48, ops["load"]), Role("mma", 1, 48, ops["mma"]),
               Role("softmax", 4, 192, ops["softmax"]), Role("correction", 4, 80, ops["correction"])),
        buffers=(Buffer("k", 2, 32768), Buffer("v", 2, 32768)),
    )


CASES = [(name, name in JOINT) for name in EXAMPLES] + [("joint_fixture", True)]
IDS = [f"{name}-{'joint' if joint else 'swp'}" for name, joint in CASES]


def schedule_of(name: str, joint: bool) -> Schedule:
    return joint_fixture() if name == "joint_fixture" else solved(name, joint)


@pytest.fixture(params=CASES, ids=IDS)
def schedule(request) -> Schedule:
    return schedule_of(*request.param)


# -- the data behind the chart ----------------------------------------------------------------------

def test_every_instance_once_on_its_role_lane_and_its_unit_lane(schedule):
    from twill.plot import chart_data

    chart = chart_data(schedule)
    ops = schedule.by_name
    expected = set()
    for i in range(schedule.copies):
        for op in schedule.ops:
            start = op.start + i * schedule.ii
            end = start + max(op.cycles, 1)
            expected.add((op.name, i, f"unit:{op.unit}", start, end))
            if op.role:
                expected.add((op.name, i, f"role:{op.role}", start, end))
    bars = [(b.op, b.iteration, b.lane, b.start, b.end) for b in chart.bars]
    assert len(bars) == len(set(bars)), "an instance drawn twice on one lane"
    assert set(bars) == expected
    assert len(chart.bars) == len(schedule.instances()) * (2 if schedule.roles else 1)
    assert all(b.opcode == ops[b.op].opcode for b in chart.bars)


def test_lanes_are_the_roles_then_the_units(schedule):
    from twill.plot import chart_data

    chart = chart_data(schedule)
    roles = [ln.name for ln in chart.lanes if ln.kind == "role"]
    units = [ln.name for ln in chart.lanes if ln.kind == "unit"]
    assert roles == [r.name for r in schedule.roles]
    assert sorted(units) == sorted({op.unit for op in schedule.ops})
    assert [ln.kind for ln in chart.lanes] == ["role"] * len(roles) + ["unit"] * len(units)
    for r in schedule.roles:  # a role's lane says its warps and registers
        label = next(ln.label for ln in chart.lanes if ln.key == f"role:{r.name}")
        assert f"{r.warps} warp" in label and f"{r.registers} regs" in label


def test_bars_of_one_sub_row_never_overlap(schedule):
    from twill.plot import chart_data

    chart = chart_data(schedule)
    rows = {ln.key: ln.rows for ln in chart.lanes}
    by_row: dict = {}
    for b in chart.bars:
        assert 0 <= b.row < rows[b.lane]
        by_row.setdefault((b.lane, b.row), []).append((b.start, b.end))
    for spans in by_row.values():
        spans.sort()
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))


def test_phases_and_ii_markers_are_the_schedules(schedule):
    from twill.plot import chart_data

    chart = chart_data(schedule)
    assert {p.name: (p.start, p.end) for p in chart.phases} == schedule.phases
    assert [p.name for p in chart.phases] == ["prologue", "steady", "epilogue"]
    ii = schedule.ii
    assert chart.ii == ii and chart.markers[0] == 0
    assert all(m % ii == 0 for m in chart.markers)
    assert list(chart.markers) == list(range(0, chart.markers[-1] + 1, ii))
    assert chart.markers[-1] + ii > max(schedule.program_length, schedule.copies * ii)  # they span the program
    assert chart.program_length == schedule.program_length and chart.copies == schedule.copies


def test_arrows_are_the_graphs_dependences_between_instances(schedule):
    from twill.plot import chart_data

    chart = chart_data(schedule)
    graph = parse_tir(schedule.graph_tir)
    ops = schedule.by_name
    expected = {(e.src, j - e.distance, e.dst, j) for e in graph.edges
                for j in range(e.distance, schedule.copies)}
    got = [(a.src, a.src_iteration, a.dst, a.dst_iteration) for a in chart.arrows]
    assert len(got) == len(set(got)) and set(got) == expected
    for a in chart.arrows:
        src, dst = ops[a.src], ops[a.dst]
        assert a.x1 == dst.start + a.dst_iteration * schedule.ii
        assert a.x0 == src.start + a.src_iteration * schedule.ii + max(src.cycles, 1)
        assert a.x1 >= a.x0 - max(src.cycles, 1) + src.cycles  # the dependence holds
        assert a.src_lane == (f"role:{src.role}" if src.role and dst.role else f"unit:{src.unit}")


def test_kinds_colour_every_opcode(schedule):
    from twill.plot import chart_data, colours

    chart = chart_data(schedule)
    assert set(chart.kinds) == {op.opcode for op in schedule.ops}
    palette = colours(chart)
    assert set(palette) == set(chart.kinds)
    assert len(set(palette.values())) == len(palette), "two kinds share a colour"


# -- the pictures -------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_picture_is_produced_and_deterministic(schedule, fmt, tmp_path):
    pytest.importorskip("matplotlib")
    from twill.plot import DPI, WIDTH_IN, chart_data, label_places, render

    chart = chart_data(schedule)
    first, second = tmp_path / f"a.{fmt}", tmp_path / f"b.{fmt}"
    render(chart, first, arrows=True)
    render(chart_data(Schedule.from_json(schedule.to_json())), second, arrows=True)  # via the file format
    data = first.read_bytes()
    assert data == second.read_bytes()
    if fmt == "png":
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", data[16:24])
        assert width == round(WIDTH_IN * DPI) and height > 100
    else:
        root = ET.fromstring(data)
        assert root.tag.endswith("svg")
        text = data.decode()
        assert "<dc:date>" not in text
        assert schedule.kernel in text  # the title, kept as a comment beside its glyph paths
        placed = {f"{b.op}[{b.iteration}]" for b, (side, _) in zip(chart.bars, label_places(chart))
                  if side != "none"}
        assert placed, "no bar is labelled"
        for label in placed:  # each label is kept as a comment beside its glyph paths
            assert f"<!-- {label} -->" in text, label


def test_labels_fit_or_move_beside_the_bar():
    from twill.plot import chart_data, label_places

    chart = chart_data(joint_fixture())
    places = label_places(chart)
    assert len(places) == len(chart.bars)
    by_bar = {(b.op, b.iteration, b.lane): side for b, (side, _) in zip(chart.bars, places)}
    assert by_bar[("p", 0, "unit:sfu")] == "in"  # a long bar holds its label
    assert by_bar[("k", 0, "unit:tma")] == "right"  # a zero-cycle load has it beside


def test_missing_matplotlib_is_a_clear_input_error(monkeypatch):
    import sys

    from twill.errors import InputError
    from twill.plot import chart_data, render_bytes

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(InputError) as err:
        render_bytes(chart_data(solved("fig1", False)), "svg")
    assert "matplotlib, which is not installed" in err.value.render() and "pip install twill-sched" in err.value.render()


# -- the command ---------------------------------------------------------------------------------------

def run(*args):
    from twill_cli.main import main
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_cli_plots_a_schedule_file(tmp_path, fmt):
    pytest.importorskip("matplotlib")
    sched = tmp_path / "s.json"
    sched.write_text(solved("attention_fwd_simple", True).to_json())  # a file is verified: a solver's schedule
    out = tmp_path / f"chart.{fmt}"
    result = run("plot", str(sched), "-o", str(out), "--arrows")
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:4] in (b"\x89PNG", b"<?xm")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp file left


def test_cli_plots_a_graph_after_solving_it(tmp_path):
    pytest.importorskip("matplotlib")
    from twill.plot import chart_data, render_bytes

    out = tmp_path / "fig1.svg"
    result = run("plot", str(ROOT / "examples" / "fig1.tir"), "--gpu", "h100", "--swp-only", "-q", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == render_bytes(chart_data(solved("fig1", False)), "svg")


@pytest.mark.parametrize("args, message", [
    (["examples/fig1.tir", "-o", "x.svg"], "needs --gpu"),
    (["SCHED", "-o", "x.pdf"], "name it .svg or .png"),
    (["missing.json", "-o", "x.svg"], "does not exist"),
    (["BAD", "-o", "x.svg"], "not a JSON file"),
    (["OTHER", "-o", "x.svg"], "is not a twill schedule"),
    (["NOGRAPH", "-o", "x.svg", "--arrows"], "holds no graph"),  # a file plot cannot verify is not drawn
    (["SCHED", "--swp-only", "-o", "x.svg"], "already a schedule"),
    (["SCHED", "--gpu", "b200", "-o", "x.svg"], "but --gpu b200 is sm_100a"),  # as emit-cuda refuses it
    (["SCHED", "-o", "no/such/dir/x.svg"], "does not exist"),
])
def test_cli_errors_exit_2_without_traceback(tmp_path, monkeypatch, args, message):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "fig1.tir").write_text((ROOT / "examples" / "fig1.tir").read_text())
    fig1 = solved("fig1", False)
    files = {"SCHED": fig1.to_json(), "BAD": '{"format": ', "OTHER": '{"a": 1}',
             "NOGRAPH": replace(fig1, graph_tir="").to_json()}
    for key, text in files.items():
        (tmp_path / f"{key.lower()}.json").write_text(text)
    args = [f"{a.lower()}.json" if a in files else a for a in args]
    result = run("plot", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "x.svg").exists()


# -- the terminal Gantt ----------------------------------------------------------------------------------

def test_table_of_a_joint_schedule_gains_a_per_role_gantt():
    from twill.report import render_table, role_gantt

    s = joint_fixture()
    text = render_table(s)
    assert "steady state per role" in text
    gantt = [line.plain for line in role_gantt(s)]
    for role in s.roles:
        assert any(line.lstrip().startswith(f"role {role.name} ") for line in gantt)
    body = [line for line in gantt[2:]]
    width = len(body[0].split("|")[1])
    assert all(len(line.split("|")[1]) == width for line in body)
    assert "[acc_n(i-1)" in text  # an op of stage 1 is marked as the previous iteration's
    assert "[p=" in text and "[s=" in text


def test_table_of_a_swp_schedule_has_no_role_gantt():
    from twill.report import render_table

    assert "steady state per role" not in render_table(solved("fig1", False))


def test_unknown_opcodes_and_many_kinds_still_draw(tmp_path):
    """Opcodes without a colour of their own take distinct spare colours; the legend wraps."""
    pytest.importorskip("matplotlib")
    from twill.plot import KIND_COLOURS, chart_data, colours, render
    from twill.schedule import ScheduledOp

    kinds = list(KIND_COLOURS) + ["frobnicate", "tt.dot_scaled"]
    ops = tuple(ScheduledOp(f"op{i}", k, ("tma", "tensor", "sfu", "alu")[i % 4], 3 + i, 3 + i, 2 * i,
                            role=f"r{i % 3}") for i, k in enumerate(kinds))
    s = Schedule("many", "h100", "sm_90a", "joint", 20, 45, False, ops,
                 roles=tuple(Role(f"r{j}", 4, 96, ()) for j in range(3)))
    chart = chart_data(s)
    palette = colours(chart)
    assert len(set(palette.values())) == len(kinds)
    assert chart.arrows == ()  # no graph embedded, no arrows
    render(chart, tmp_path / "many.svg", arrows=True)
    assert (tmp_path / "many.svg").stat().st_size > 0
