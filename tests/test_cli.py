"""The command line as a user meets it: exit codes, located messages, formats, atomic output.

Most tests drive the click app in-process with CliRunner; those where the real process matters
(exit status, which stream carries what, imports at start-up) run the installed `twill` script.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from twill_cli.main import main

from conftest import DATA, ROOT

CLI = DATA / "cli"
FIG1 = str(CLI / "fig1.tir")


def twill_exe() -> str:
    local = Path(sys.executable).parent / "twill"
    return str(local) if local.exists() else shutil.which("twill")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([twill_exe(), *args], capture_output=True, text=True, timeout=120)


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def solve_json(*args: str) -> dict:
    result = invoke("solve", *args, "--format", "json", "-q")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# -- every bad input: exit 2, FILE:LINE:COL, never a traceback -------------------------------------

ERRORS = [  # (fixture, line, col, message)
    ("undefined_name.tir", 5, 15, "undefined name 'undefined_name'"),
    ("redefined_name.tir", 5, 3, "'s' is already defined"),
    ("unknown_opcode.tir", 5, 7, "unknown opcode 'exp3' for machine 'h100'"),
    ("bad_dtype.tir", 2, 11, "unknown dtype 'f17'"),
    ("bad_dimension.tir", 4, 25, "a dimension must be a positive integer, found '-1'"),
    ("bad_space.tir", 2, 23, "unknown memory space 'gmem'"),
    ("carry_without_yield.tir", 3, 7, "carry 'acc' without yield"),
    ("zero_distance_cycle.tir", 4, 14, "dependence cycle of total distance 0: a -> b -> c -> a"),
    ("missing_colon.tir", 4, 16, "expected ':' and the result type, found 'f32'"),
    ("bad_character.tir", 4, 12, "unexpected character ';'"),
    ("unclosed_loop.tir", 3, 1, "the loop is not closed: missing '}'"),
    ("unknown_attribute.tir", 4, 30, "unknown attribute 'cycels'"),
    ("bad_attribute_value.tir", 4, 38, "attribute 'async' must be true or false"),
    ("unknown_knob_argument.tir", 4, 19, "'sm_scal' is no argument of the kernel"),
]


@pytest.mark.parametrize("fixture, line, col, message", ERRORS, ids=[e[0] for e in ERRORS])
@pytest.mark.parametrize("swp_only", [True, False], ids=["swp-only", "joint"])
def test_bad_graph_exits_2_with_a_located_message(fixture, line, col, message, swp_only):
    path = str(CLI / fixture)
    result = invoke("solve", path, "--gpu", "h100", *(["--swp-only"] if swp_only else []), "-q")
    assert result.exit_code == 2, result.output
    assert f"{path}:{line}:{col}: error: {message}" in result.stderr
    assert "^" in result.stderr  # the caret under the source line
    assert result.stdout == ""
    assert "Traceback" not in result.output


def test_every_error_of_a_file_is_reported_at_once():
    path = str(CLI / "many_errors.tir")
    result = invoke("solve", path, "--gpu", "h100", "--swp-only")
    assert result.exit_code == 2
    for where in ("4:14: error: undefined name 'r'", "5:16: error: unknown dtype 'f99'",
                  "6:3: error: 't' is already defined"):
        assert f"{path}:{where}" in result.stderr


def test_bad_machine_key_names_file_line_and_path():
    machine = str(CLI / "misspelt_key.yaml")
    result = invoke("solve", FIG1, "--gpu", machine, "--swp-only")
    assert result.exit_code == 2
    assert f"{machine}:10:3: error: unknown key 'limits.smem_bytez'" in result.stderr
    assert "did you mean 'smem_bytes'?" in result.stderr
    assert "Traceback" not in result.output


def test_unknown_gpu_suggests_a_bundled_one():
    result = invoke("solve", FIG1, "--gpu", "h10", "--swp-only")
    assert result.exit_code == 2
    assert "unknown GPU 'h10'" in result.stderr and "did you mean 'h100'?" in result.stderr


@pytest.mark.parametrize("args, message", [
    (["solve", "no/such/graph.tir", "--gpu", "h100"], "graph 'no/such/graph.tir' does not exist"),
    (["solve", FIG1], "solve needs --gpu"),
    (["solve", FIG1, "--gpu", "no/such/machine.yaml"], "cannot read machine description 'no/such/machine.yaml'"),
    (["solve", FIG1, "--gpu", "h100", "--format", "xml"], "Invalid value for '--format'"),
    (["solve", FIG1, "--gpu", "h100", "--bogus"], "--bogus"),
    (["solve", FIG1, "--gpu", "h100", "-o", "no/such/dir/out.json", "--swp-only"],
     "directory 'no/such/dir' does not exist"),
    (["solve", str(CLI), "--gpu", "h100"], "is a directory"),
    (["nosuchcommand"], "No such command"),
    *((["solve", FIG1, "--gpu", "h100", "--time-limit", t], "Invalid value for '--time-limit'")
      for t in ("nan", "inf", "0", "-1", "abc")),
    (["emit-cuda", FIG1, "--gpu", "h100", "--time-limit", "nan"], "Invalid value for '--time-limit'"),
    (["emit-cuda", FIG1, "--gpu", "h100", "--load-rings", "deep"],
     "Invalid value for '--load-rings': 'deep' is not one of 'solved', 'latency'"),
    (["solve", FIG1, "--gpu", "h100", "--group", ","], "',' names no op"),
    (["solve", FIG1, "--gpu", ""], "give a bundled name"),
])
def test_usage_errors_exit_2(args, message):
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_real_process_streams_and_exit_codes(tmp_path):
    bad = run("solve", str(CLI / "undefined_name.tir"), "--gpu", "h100")
    assert bad.returncode == 2 and bad.stdout == ""
    assert f"{CLI / 'undefined_name.tir'}:5:15: error: undefined name" in bad.stderr
    assert "Traceback" not in bad.stderr
    good = run("solve", FIG1, "--gpu", "h100", "--swp-only", "--format", "json")
    assert good.returncode == 0
    assert json.loads(good.stdout)["ii"] == 2  # data on stdout; progress went to stderr
    assert "modulo" in good.stderr
    quiet = run("solve", FIG1, "--gpu", "h100", "--swp-only", "-q")
    assert quiet.returncode == 0 and quiet.stderr == ""
    missing = run("solve", str(tmp_path / "none.tir"), "--gpu", "h100")
    assert missing.returncode == 2 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr


def test_no_schedule_exits_1():
    result = invoke("solve", FIG1, "--gpu", "h100", "--swp-only", "--max-ii", "1")
    assert result.exit_code == 1
    assert "no modulo schedule with I <= 1" in result.stderr
    assert "Traceback" not in result.output


def test_help_imports_no_solver():
    code = ("import sys\nfrom twill_cli.main import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
            "heavy = [m for m in ('pulp', 'pyscipopt', 'yices', 'yices_api') if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "solve" in result.stdout


def test_version():
    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout.startswith("twill, version ")


# -- output: formats, -o, determinism --------------------------------------------------------------

def test_formats_agree():
    as_json = solve_json(FIG1, "--gpu", "h100", "--swp-only")
    as_yaml = invoke("solve", FIG1, "--gpu", "h100", "--swp-only", "--format", "yaml", "-q")
    assert as_yaml.exit_code == 0 and yaml.safe_load(as_yaml.stdout) == as_json
    table = invoke("solve", FIG1, "--gpu", "h100", "--swp-only", "--format", "table", "-q")
    assert table.exit_code == 0
    assert "I = 2, L = 4, optimal" in table.stdout
    default = invoke("solve", FIG1, "--gpu", "h100", "--swp-only", "-q")
    assert default.stdout == table.stdout  # table is the default


def test_schedule_json_fields():
    s = solve_json(FIG1, "--gpu", "h100", "--swp-only")
    assert s["format"] == "twill-schedule/1"
    assert (s["kernel"], s["machine"], s["arch"], s["stage"]) == ("fig1", "h100", "sm_90a", "swp")
    assert (s["ii"], s["length"], s["optimal"]) == (2, 4, True)
    start = {o["name"]: o["start"] for o in s["ops"]}
    assert start["S"] == 0 and start["O"] == 3 and start["P"] in (1, 2)
    assert all({"name", "opcode", "unit", "cycles", "start", "stage", "warp"} <= set(o) for o in s["ops"])
    assert s["bounds"] == {"res_mii": 2, "rec_mii": 1, "swp_ii": 2, "swp_length": 4}
    assert s["scale"]["machine_cycles_per_unit"] == 1.0 and s["scale"]["distortion"] == 0.0
    assert s["program"]["copies"] == 2 and s["program"]["length"] == 6
    assert "kernel fig1" in s["graph"]


def test_output_file_is_written_and_matches_stdout(tmp_path):
    out = tmp_path / "fig1.json"
    result = invoke("solve", FIG1, "--gpu", "h100", "--swp-only", "-o", str(out))
    assert result.exit_code == 0
    assert result.stdout == ""  # with -o and no --format, nothing on stdout
    assert f"wrote {out}: I = 2, L = 4" in result.stderr
    assert json.loads(out.read_text()) == solve_json(FIG1, "--gpu", "h100", "--swp-only")
    both = invoke("solve", FIG1, "--gpu", "h100", "--swp-only", "-o", str(out), "--format", "json", "-q")
    assert both.stdout == out.read_text()


@pytest.mark.parametrize("args", [
    [str(CLI / "undefined_name.tir"), "--gpu", "h100"],
    [FIG1, "--gpu", str(CLI / "misspelt_key.yaml")],
    [FIG1, "--gpu", "h100", "--swp-only", "--max-ii", "1"],
])
def test_failing_run_leaves_existing_output_untouched(tmp_path, args):
    out = tmp_path / "schedule.json"
    out.write_text("precious\n")
    os.utime(out, (1_000_000_000, 1_000_000_000))
    result = invoke("solve", *args, "-o", str(out))
    assert result.exit_code in (1, 2)
    assert out.read_text() == "precious\n"
    assert out.stat().st_mtime == 1_000_000_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["schedule.json"]  # no temporary left behind


def test_output_replaces_atomically(tmp_path):
    """The write goes to a temporary file in the same directory and is renamed over the target."""
    out = tmp_path / "schedule.json"
    out.write_text("old\n")
    inode = out.stat().st_ino
    assert invoke("solve", FIG1, "--gpu", "h100", "--swp-only", "-o", str(out), "-q").exit_code == 0
    assert json.loads(out.read_text())["ii"] == 2
    assert out.stat().st_ino != inode  # a new file was renamed into place, not rewritten in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["schedule.json"]


def test_same_inputs_give_byte_identical_json(tmp_path):
    for name in ("a.json", "b.json"):
        assert run("solve", FIG1, "--gpu", "h100", "--swp-only", "-q", "-o", str(tmp_path / name)).returncode == 0
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    gemm = str(ROOT / "examples" / "gemm_hopper.tir")
    first, second = (invoke("solve", gemm, "--gpu", "h100", "--swp-only", "--format", "json", "-q").stdout
                     for _ in range(2))
    assert first == second and json.loads(first)["ii"] == 256


def test_timings_only_on_request():
    assert solve_json(FIG1, "--gpu", "h100", "--swp-only")["stats"] == {}
    stats = solve_json(FIG1, "--gpu", "h100", "--swp-only", "--timings")["stats"]
    assert {"normalize_seconds", "ilp_seconds", "solve_seconds"} <= set(stats)


# -- golden files ----------------------------------------------------------------------------------

def test_golden_fig1_table(golden):
    result = invoke("solve", FIG1, "--gpu", "h100", "--swp-only", "--format", "table", "-q")
    assert result.exit_code == 0
    golden("fig1_swp.txt", result.stdout)


def test_golden_fig1_json(golden):
    result = invoke("solve", FIG1, "--gpu", "h100", "--swp-only", "--format", "json", "-q")
    assert result.exit_code == 0
    golden("fig1_swp.json", result.stdout)


# -- the examples and the contract check's cases ---------------------------------------------------

@pytest.mark.parametrize("example, ii", [("fig1.tir", 2), ("gemm_hopper.tir", 256), ("attention_fwd_simple.tir", None)])
def test_examples_solve_swp_only(example, ii):
    s = solve_json(str(ROOT / "examples" / example), "--gpu", "h100", "--swp-only")
    assert s["optimal"] and s["ii"] >= max(s["bounds"]["res_mii"], s["bounds"]["rec_mii"])
    if ii is not None:
        assert s["ii"] == ii


def test_contract_check_cases(tmp_path):
    """The cases of ../shared/checks/contract-check, run here so CI catches a regression."""
    s = json.loads(run("solve", str(ROOT / "examples" / "fig1.tir"), "--gpu", "h100", "--swp-only",
                       "--format", "json").stdout)
    starts = [o["start"] for o in s["ops"]]
    assert s["ii"] == 2 and max(o["start"] + o["cycles"] for o in s["ops"]) - min(starts) == 4

    bad = tmp_path / "bad.tir"
    bad.write_text("kernel k\ninput q : f16[64,64] @smem\nloop {\n  s = mma q, q : f32[64,64]\n"
                   "  p = exp2 s, undefined_name : f16[64,64]\n}\n")
    result = run("solve", str(bad), "--gpu", "h100")
    assert result.returncode == 2 and "Traceback" not in result.stdout + result.stderr
    assert f"{bad}:5:" in result.stdout + result.stderr

    machine = tmp_path / "bad.yaml"
    machine.write_text("name: x\nunits: {tensor: 1}\nlimitz: {}\n")
    ok = tmp_path / "ok.tir"
    ok.write_text("kernel k\ninput q : f16[64,64] @smem\nloop {\n  s = mma q, q : f32[64,64] {cycles = 1, unit = tensor}\n}\n")
    result = run("solve", str(ok), "--gpu", str(machine))
    assert result.returncode == 2 and "Traceback" not in result.stdout + result.stderr
    assert "limitz" in result.stdout + result.stderr


def test_python_api_as_the_package_docstring_shows_it():
    """`import twill` loads no solver; the names it offers solve, verify and emit as the CLI does."""
    import twill
    from twill import emit_cuda, load_graph, load_machine, solve, SolveOptions
    from twill.verify import verify

    probe = "import sys, twill; print(sorted(m for m in ('pulp', 'yices', 'pyscipopt') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip() == "[]"
    graph, machine = load_graph(ROOT / "examples" / "fig1.tir"), load_machine("h100")
    schedule = solve(graph, machine, SolveOptions(time_limit=60))
    assert (schedule.ii, schedule.optimal) == (2, True) and verify(schedule, graph, machine) == []
    assert "namespace twill" in emit_cuda(schedule, machine)
    assert twill.__version__ and set(twill.__all__) >= {"solve", "load_graph", "emit_cuda"}


# -- where -o points ----------------------------------------------------------------------------------

def test_output_to_a_fifo_writes_into_it_and_keeps_it(tmp_path):
    """`-o /dev/null` (or /dev/stdout, a FIFO) is written in place: renaming the finished file over
    it, as for a regular file, replaced /dev/null itself with a regular file when run as root."""
    import stat
    import threading
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    result = invoke("solve", FIG1, "--gpu", "h100", "-q", "-o", str(fifo))
    reader.join(timeout=60)
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert json.loads(got[0])["ii"] == 2


@pytest.mark.parametrize("command", [["solve", FIG1, "--gpu", "h100"], ["import", str(ROOT / "tests" / "data" / "ttgir" / "matmul_sm90.ttgir")]])
def test_output_where_nothing_can_be_written_is_an_error_not_a_traceback(command):
    """A directory where no file can be made (here /proc, which refuses even root) exits 2 saying so."""
    if not os.path.isdir("/proc"):
        pytest.skip("needs /proc")
    result = invoke(*command, "-o", "/proc/twill-out.json")
    assert result.exit_code == 2 and "cannot write '/proc/twill-out.json'" in result.output, result.output
    assert "Traceback" not in result.output


def test_output_through_a_symlink_replaces_its_target_and_keeps_the_link(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    result = invoke("solve", FIG1, "--gpu", "h100", "-q", "-o", str(link))
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and json.loads(target.read_text())["ii"] == 2


def test_output_to_a_directory_is_exit_2(tmp_path):
    result = invoke("solve", FIG1, "--gpu", "h100", "-q", "-o", str(tmp_path))
    assert result.exit_code == 2 and "is a directory" in result.output


def test_a_file_that_is_not_utf8_is_located(tmp_path):
    bad = tmp_path / "bin.tir"
    bad.write_bytes(b"kernel k\nloop {\n  x = f \xff : f32[1]\n}\n")
    result = invoke("solve", str(bad), "--gpu", "h100")
    assert result.exit_code == 2 and f"{bad}:3:9: error: graph '{bad}' is not UTF-8 text: byte 0xff" in result.output
    crlf = tmp_path / "crlf.tir"  # and Windows line ends still read as lines
    crlf.write_bytes((ROOT / "examples" / "fig1.tir").read_bytes().replace(b"\n", b"\r\n"))
    assert invoke("solve", str(crlf), "--gpu", "h100", "--swp-only", "-q").exit_code == 0


@pytest.mark.parametrize("command", ["solve", "emit-cuda", "plot"])
def test_output_onto_the_input_is_refused(tmp_path, command):
    graph = tmp_path / "g.tir"
    graph.write_text((ROOT / "examples" / "fig1.tir").read_text())
    result = invoke(command, str(graph), "--gpu", "h100", "-o", str(graph))
    assert result.exit_code == 2 and "is the input file itself" in result.output, result.output
    assert graph.read_text() == (ROOT / "examples" / "fig1.tir").read_text()
