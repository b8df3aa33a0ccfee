"""`twill calibrate`: the microbenchmark sources compile (real nvcc), a recorded H200 run becomes a
spec that machine.py loads and that solves, the no-GPU path, and the determinism of the YAML."""
from __future__ import annotations

import json
import random
import statistics
import subprocess

import pytest
import yaml
from click.testing import CliRunner

from conftest import ROOT, nvcc, nvcc_compile

from twill.calibrate.benches import BENCHES, sources
from twill.calibrate.calibrate import load_raw, raw_text, spec_text
from twill.calibrate.derive import derive
from twill.calibrate.stats import spread
from twill.machine import load_machine, parse_machine
from twill_cli.main import main

RAW = ROOT / "tests" / "data" / "calibrate" / "h200-raw.json"  # twill calibrate --raw on the lent H200
BASE = (ROOT / "specs" / "h200.yaml").read_text()
needs_nvcc = pytest.mark.skipif(nvcc() is None, reason="needs nvcc")


def _has_gpu() -> bool:
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _samples(raw, bench, name, **params):
    rec = next(r for r in raw["results"][bench]["records"]
               if r["name"] == name and all(r["params"].get(k) == v for k, v in params.items()))
    return rec["samples"]


# -- the sources -------------------------------------------------------------------------------------

@needs_nvcc
@pytest.mark.slow
@pytest.mark.parametrize("bench", [pytest.param(b, id=b.name, marks=[] if b.name in ("alu", "tcgen05") else
                                                [pytest.mark.extended]) for b in BENCHES])
# (CI compiles one microbenchmark per target, alu for sm_90a and tcgen05 for sm_100a; the others, wgmma's 30 s of
# shapes among them, are extended, for CI's time)
def test_each_microbenchmark_compiles_for_its_target(bench, tmp_path):
    """Every bench builds with nvcc for its target (tcgen05 for sm_100a, the rest sm_90a), with no
    spills and no serialized wgmma (a bench that serializes would time the wrong thing)."""
    for name, text in sources().items():
        (tmp_path / name).write_text(text)
    arch = bench.arch.removeprefix("sm_")
    rc, log = nvcc_compile(tmp_path / f"{bench.name}.cu", ["-std=c++17", "-O3", f"-gencode=arch=compute_{arch},code=sm_{arch}",
                                                            "-Xptxas", "-v", "-I", str(tmp_path)])
    assert rc == 0, log[-3000:]
    assert "C7510" not in log and "C7520" not in log, "ptxas serialized a wgmma"
    assert " 0 bytes spill stores" in log and not any(
        line for line in log.splitlines() if "spill stores" in line and not line.strip().startswith("0 bytes stack")
        and " 0 bytes spill stores" not in line)


def test_wgmma_bench_uses_the_emitters_instructions():
    """The wgmma bench's header is twill.emit.runtime's wrappers, for each dtype and width it times."""
    from twill.emit.runtime import wgmma_wrapper
    header = sources()["wgmma_ops.cuh"]
    for dtype in ("f16", "bf16", "f8e4m3", "i8"):
        for n in (64, 128, 256):
            assert wgmma_wrapper(n, dtype, False) in header


# -- a recorded run to a spec ------------------------------------------------------------------------

def test_recorded_h200_run_becomes_a_spec_that_loads_and_solves():
    raw = load_raw(str(RAW))
    text = spec_text(raw, BASE, "h200", "h200-cal")
    m = parse_machine(text, "h200-cal.yaml")
    # each measured number is the median of its samples in the recording
    assert m.clock_ghz == round(statistics.median(raw["results"]["device"]["clock_ghz"]), 3)
    assert m.cross_warp_cycles == round(statistics.median(_samples(raw, "sync", "mbarrier_handoff")))
    exp2 = m.op_specs["exp2"]
    one = statistics.median(_samples(raw, "tile", "tile_op", op="exp2", cols=128, warpgroups=1))
    assert exp2.cycles({"elements": 8192}) == pytest.approx(one, rel=2e-3)
    chain = statistics.median(_samples(raw, "wgmma", "wgmma_chain", dtype="f16", n=256, warpgroups=1))
    flop = 2 * 64 * 256 * 16
    mma = m.op_specs["mma"]
    env = {"M": 64, "N": 256, "K": 16, "elements": 64 * 256, "bytes": 64 * 256 * 4, "bits": 16}
    assert mma.occupancy(env) == pytest.approx(chain, rel=0.02)  # one instruction's issue interval
    # an 8-bit m64n256k32 takes an f16 m64n256k16's time, as its chain measured
    f8 = statistics.median(_samples(raw, "wgmma", "wgmma_chain", dtype="f8e4m3", n=256, warpgroups=1))
    assert mma.occupancy({**env, "K": 32, "bits": 8}) == pytest.approx(f8, rel=0.02)
    # what the base says and nothing measured stays the base's
    base = parse_machine(BASE, "h200.yaml")
    assert m.limits.warps == base.limits.warps and m.op_specs["store"] == base.op_specs["store"]
    data = yaml.safe_load(text)
    assert data["calibration"]["card"] == raw["card"] and "ops.store" in data["calibration"]["from_base"]
    assert "ops.exp2.cycles" in data["calibration"]["measured"]
    # and the solver takes it: the Figure 1 graph with its own costs, and the GEMM with the machine's
    from twill.pipeline import SolveOptions, solve
    from twill.fileio import load_graph
    from twill.verify import verify
    graph = load_graph(ROOT / "examples" / "gemm_hopper.tir")
    schedule = solve(graph, m, SolveOptions(time_limit=60))
    assert verify(schedule, graph, m) == []
    mma_op = next(op for op in schedule.ops if op.opcode == "mma")
    assert mma_op.machine_cycles == pytest.approx(mma.cycles(
        {"M": 64, "N": 256, "K": 64, "elements": 64 * 256, "bytes": 64 * 256 * 4, "bits": 16}), rel=1e-6)


def _median(raw, bench, name, **params):
    return statistics.median(_samples(raw, bench, name, **params))


def test_the_load_latency_is_an_interval_of_the_tma_records():
    """ops.load.latency: min from one load alone from L2, typical from every SM streaming from L2,
    max from every SM streaming from HBM (p99); each a line in bytes, min <= typical <= max at every
    tile size; the engine's occupancy 0 (its bandwidth is not modelled)."""
    raw = load_raw(str(RAW))
    m = parse_machine(spec_text(raw, BASE, "h200", "h200-cal"), "h200-cal.yaml")
    load = m.op_specs["load"]
    low, typical, high = load.latency
    assert load.occupancy({"bytes": 32768}) == 0 and load.variable_latency
    for rows in (64, 128):
        env = {"bytes": rows * 128 * 2}
        stream = _median(raw, "tma", "tma_load_latency", mode="stream", footprint="l2", rows=rows, cols=128)
        assert typical(env) == pytest.approx(stream, rel=0.01)  # two points: the line goes through them
    for nbytes in (2048, 8192, 16384, 32768, 65536):
        env = {"bytes": nbytes}
        assert 0 < low(env) <= typical(env) <= high(env)
    hbm = statistics.quantiles(_samples(raw, "tma", "tma_load_latency", mode="stream", footprint="hbm",
                                        rows=128, cols=128), n=100)[98]
    assert high({"bytes": 32768}) == pytest.approx(hbm, rel=0.1)  # a line through 0 over two sizes


def test_the_wgmma_hold_and_rowmax_rules():
    """mma.hold: the occupancy less the instructions the tensor core queues (a chain of 32 issues
    in 51.7 cycles per instruction of 66.2: 7 queued); rowmax: the generic rule at FMNMX's rate."""
    raw = load_raw(str(RAW))
    m = parse_machine(spec_text(raw, BASE, "h200", "h200-cal"), "h200-cal.yaml")
    mma = m.op_specs["mma"]
    issue = _median(raw, "wgmma", "wgmma_issue", dtype="f16", n=128, warpgroups=1)
    chain = _median(raw, "wgmma", "wgmma_chain", dtype="f16", n=128, warpgroups=1)
    queued = 32 - 32 * issue / chain
    assert 6 < queued < 8
    env = {"M": 64, "N": 128, "K": 128, "elements": 8192, "bytes": 32768, "bits": 16}
    one = mma.occupancy(env) / 8  # an m64n128k128 is 8 m64n128k16 instructions
    assert mma.hold(env) == pytest.approx(mma.occupancy(env) - queued * one, rel=1e-3)
    f8 = {**env, "bits": 8}  # an f8 m64n128k128 is 4 m64n128k32, each an f16 m64n128k16's time
    assert mma.occupancy(f8) == pytest.approx(4 * one, rel=1e-9)
    assert mma.hold(f8) == pytest.approx(mma.occupancy(f8) - queued * one, rel=1e-3)
    fmnmx = _median(raw, "alu", "alu_rate", op="fmnmx")
    assert m.op_specs["rowmax"].cycles({"elements": 8192}) == pytest.approx(8192 / fmnmx, rel=1e-3)
    assert m.op_specs["rowmax"].occupancy is None


def _numbers(node, key=""):
    """Line numbers of the numeric values (and cycle expressions) under a YAML node."""
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            yield from _numbers(v, k.value)
    elif isinstance(node, yaml.SequenceNode):
        for v in node.value:
            yield from _numbers(v, key)
    elif node.tag.endswith((":int", ":float")) or key in ("cycles", "occupancy"):
        yield node.start_mark.line


def test_every_number_says_whether_it_was_measured_or_is_the_bases():
    """Outside the calibration record, each number's comment begins `measured DATE on CARD:` or
    `from BASE:`; in the record, each says which bench measured it."""
    raw = load_raw(str(RAW))
    text = spec_text(raw, BASE, "h200", "h200-cal")
    lines = text.splitlines()
    root = yaml.compose(text)
    stamp = f"# measured {raw['date'][:10]} on {raw['card']}: "
    for k, v in root.value:
        for n in set(_numbers(v, k.value)):
            comment = "#" + lines[n].partition("#")[2]
            if k.value == "calibration":
                assert comment.startswith("# measured by the "), lines[n]
            else:
                assert comment.startswith((stamp, "# from h200: ")), lines[n]


def test_the_yaml_is_deterministic(tmp_path, monkeypatch):
    """specs/h200-calibrated.yaml is `twill calibrate --from-raw tests/data/calibrate/h200-raw.json`,
    byte for byte: through the CLI, and from the raw file with its benches in another order."""
    bundled = (ROOT / "specs" / "h200-calibrated.yaml").read_text()
    raw = json.loads(raw_text(load_raw(str(RAW))))
    keys = list(raw["results"])
    random.Random(7).shuffle(keys)
    raw["results"] = {k: raw["results"][k] for k in keys}
    assert spec_text(raw, BASE, "h200", "h200-calibrated", "tests/data/calibrate/h200-raw.json") == bundled
    out = tmp_path / "h200-calibrated.yaml"
    monkeypatch.chdir(ROOT)  # the raw file's path, as the spec records it, is relative to the checkout
    res = CliRunner().invoke(main, ["calibrate", "--from-raw", "tests/data/calibrate/h200-raw.json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_text() == bundled
    assert load_machine(str(out)).name == "h200-calibrated"


def test_spread():
    s = spread(range(1, 101))
    assert (s.min, s.median, s.p99, s.max, s.n) == (1, 50.5, 99, 100, 100)
    assert spread([3.0]).p99 == 3.0


def test_derive_skips_what_was_not_measured():
    """A run with only the device bench measures the clock and the limits; the rest is the base's."""
    raw = load_raw(str(RAW))
    only = dict(raw, results={"device": raw["results"]["device"]})
    paths = {m.path for m in derive(only["results"])}
    assert paths == {"clock_ghz", "limits.smem_bytes", "limits.registers_per_sm"}
    m = parse_machine(spec_text(only, BASE, "h200", "x"), "x.yaml")
    assert m.op_specs["exp2"] == parse_machine(BASE, "h200.yaml").op_specs["exp2"]


# -- the command line ----------------------------------------------------------------------------------

@needs_nvcc
@pytest.mark.slow
@pytest.mark.skipif(_has_gpu(), reason="this machine has a GPU")
def test_without_a_gpu_it_builds_then_exits_4(tmp_path):
    out = tmp_path / "spec.yaml"
    res = CliRunner().invoke(main, ["calibrate", "--out", str(out), "--only", "sync", "--build-dir", str(tmp_path / "b")])
    assert res.exit_code == 4, res.output
    assert "no CUDA device" in res.output and "Traceback" not in res.output
    assert (tmp_path / "b" / "device").is_file() and (tmp_path / "b" / "sync").is_file()  # compile-checked
    assert not out.exists()


def test_without_nvcc_it_exits_4(tmp_path):
    res = CliRunner().invoke(main, ["calibrate", "--out", str(tmp_path / "s.yaml"), "--nvcc", str(tmp_path / "no-nvcc")])
    assert res.exit_code == 4 and "no nvcc at" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("content,message", [
    ("{", "not a JSON file"),
    ('{"format": "other"}', "not a raw calibration file"),
    ('{"format": "twill-calibration-raw/1"}', "has no 'date'"),
])
def test_a_bad_raw_file_is_exit_2(tmp_path, content, message):
    bad = tmp_path / "raw.json"
    bad.write_text(content)
    res = CliRunner().invoke(main, ["calibrate", "--from-raw", str(bad), "--out", str(tmp_path / "s.yaml")])
    assert res.exit_code == 2 and message in res.output and "Traceback" not in res.output


def test_unknown_bench_and_base(tmp_path):
    res = CliRunner().invoke(main, ["calibrate", "--out", str(tmp_path / "s.yaml"), "--only", "wgmmaa"])
    assert res.exit_code == 2 and "unknown microbenchmark 'wgmmaa'" in res.output
    res = CliRunner().invoke(main, ["calibrate", "--from-raw", str(RAW), "--out", str(tmp_path / "s.yaml"),
                                    "--base", "h900"])
    assert res.exit_code == 2 and "--base h900" in res.output


# -- bench/fidelity.py's kernel patches --------------------------------------------------------------

def _fidelity():
    import importlib.util
    spec = importlib.util.spec_from_file_location("fidelity", ROOT / "bench" / "fidelity.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("fixture,roles,step", [("attention_fwd_hopper.h200", 3, 2), ("gemm_hopper.h100", 3, 1)])
def test_fidelity_stamps_every_roles_steady_loop(fixture, roles, step):
    """One stamp at the top of each role's steady-state loop, which covers `step` iterations a pass;
    a one-warp role's stamp is written by lane 0 of its warp, a warpgroup's by its first thread."""
    f = _fidelity()
    text = (ROOT / "tests" / "golden" / "emit" / f"{fixture}.cu").read_text()
    stamped, steps = f.stamped(text, {"load": 1})
    assert steps == [[step]] * roles
    assert stamped.count("FID_STAMP(") == roles + 1  # the macro's definition and one per role
    assert "FID_STAMP(0, 0, 1, fid_pass0)" in stamped and "FID_STAMP(1, 0, 4, fid_pass0)" in stamped


def test_fidelity_predicts_the_load_stall_from_the_slack():
    """bench/fidelity.py's prediction: I in cycles plus the largest shortfall of a load's slack at
    typical (none without an interval, or where every load lands in time)."""
    f = _fidelity()
    assert f.stall_cycles({}) == 0
    assert f.stall_cycles({"latency_slack": [{"slack_cycles": 100.0}, {"slack_cycles": None}]}) == 0
    assert f.stall_cycles({"latency_slack": [{"slack_cycles": -625.1}, {"slack_cycles": -113.0},
                                             {"slack_cycles": 40.0}]}) == 625.1
