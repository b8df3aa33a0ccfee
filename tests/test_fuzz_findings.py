"""What bench/fuzz.py found (session 42), one case per class: each a real malformed input, refused with exit 2,
a message that says where, and no traceback; and nothing the user had is overwritten by a failed run."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from twill_cli.main import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SPECS = ROOT / "specs"
SCHEDULE = Path(__file__).resolve().parent / "data" / "emit" / "gemm_hopper.h100.json"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def refused(result, *patterns):
    """Exit 2, no traceback, and every regex pattern in the output."""
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output, result.output
    for p in patterns:
        assert re.search(p, result.output), (p, result.output)


@pytest.mark.parametrize("deep", ["[" * 5000 + "]" * 5000, "ops:\n  x: " + "{a: " * 3000 + "1" + "}" * 3000],
                         ids=["flow list", "flow map under ops"])
def test_a_machine_yaml_nested_too_deeply_is_an_error_at_its_place(tmp_path, deep):
    """Was: RecursionError from the YAML reader, exit 1 with a traceback."""
    spec = tmp_path / "m.yaml"
    spec.write_text(deep + "\n")
    refused(run("solve", EXAMPLES / "gemm_hopper.tir", "--gpu", spec, "--swp-only"),
            re.escape(str(spec)) + r":\d+:\d+: error: invalid YAML: nested more than 64 deep", "hint:")


def _edited(tmp_path, edit) -> Path:
    data = json.loads(SCHEDULE.read_text())
    edit(data)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    return path


def test_a_role_listing_an_op_the_schedule_lacks_is_a_malformed_schedule(tmp_path):
    """Was: KeyError in twill/liveness.py under verify, exit 1 with a traceback."""
    path = _edited(tmp_path, lambda d: d["warps"][0].__setitem__("ops", {"a": 1}))
    refused(run("emit-cuda", path, "--no-ptxas-loop"),
            re.escape(f"'{path}' is a malformed schedule: role '")
            + r"\w+': 'ops' names 'a', which 'ops' does not list",
            "hint: write it again")


def test_a_role_and_its_ops_must_agree(tmp_path):
    def move(d):
        first, second = d["warps"][0], d["warps"][1]
        first["ops"] = list(first["ops"]) + [second["ops"][0]]
    path = _edited(tmp_path, move)
    refused(run("emit-cuda", path, "--no-ptxas-loop"), r"'ops' names '\w+', whose 'warp' is '\w+'")


@pytest.mark.parametrize("edit, where", [
    (lambda d: d["ops"][1].pop("name"), r"field 'name' is missing in 'ops'\[1\]"),
    (lambda d: d.pop("ii"), r"field 'ii' is missing at the top level"),
], ids=["op name", "ii"])
def test_a_missing_schedule_field_says_where(tmp_path, edit, where):
    """Was: "is a malformed schedule: KeyError: 'name'" (which entry, and what to do, left out)."""
    path = _edited(tmp_path, edit)
    refused(run("emit-cuda", path, "--no-ptxas-loop"), where, "hint: write it again")


def test_a_machine_mismatch_names_the_schedule_file(tmp_path):
    path = _edited(tmp_path, lambda d: None)
    refused(run("emit-cuda", path, "--gpu", "b200", "--no-ptxas-loop"),
            re.escape(f"'{path}': the schedule was solved for h100 (sm_90a) but --gpu b200 is sm_100a"))


@pytest.mark.parametrize("command", [("solve", EXAMPLES / "gemm_hopper.tir", "--gpu", "h100", "--swp-only"),
                                     ("emit-cuda", SCHEDULE, "--no-ptxas-loop")], ids=["solve", "emit-cuda"])
def test_output_into_a_missing_folder_is_refused_before_the_work(tmp_path, command):
    """Was: the whole solve ran first, then "cannot write" (a long solve lost)."""
    result = run(*command, "-o", tmp_path / "missing" / "out")
    refused(result, "directory '.*missing' does not exist", "hint: create the folder")
    assert "modulo" not in result.output  # no stage ran


def test_a_failed_run_leaves_the_existing_output_untouched(tmp_path):
    graph = tmp_path / "g.tir"
    graph.write_text((EXAMPLES / "gemm_hopper.tir").read_text().replace("= mma a0, b, acc0", "= mma a0, b, nosuch"))
    out = tmp_path / "out.json"
    out.write_text("what the user had\n")
    refused(run("solve", graph, "--gpu", "h100", "--swp-only", "-o", out), re.escape(str(graph)) + r":\d+:\d+: error")
    assert out.read_text() == "what the user had\n"


@pytest.mark.parametrize("args, says, hint", [
    (("solve", SCHEDULE, "--gpu", "h100", "--swp-only"), "is a schedule \\(JSON\\), not a graph", "emit-cuda and plot"),
    (("explain", SPECS / "h100.yaml", "--gpu", "h100"), "is a machine description, not a graph", "--gpu PATH.yaml"),
    (("emit-cuda", SPECS / "h100.yaml", "--gpu", "h100"), "is a machine description, not a graph", "--gpu PATH.yaml"),
    (("import", EXAMPLES / "fig1.tir"), "is a twill graph already, not a Triton TTGIR dump", "import reads a .ttgir"),
    (("import", SCHEDULE), "is a schedule \\(JSON\\)", "hint:"),
], ids=["solve json", "explain yaml", "emit-cuda yaml", "import tir", "import json"])
def test_a_file_of_another_kind_is_named_as_such(args, says, hint):
    """Was: parsed as what it is not: "missing 'kernel NAME' line" at a JSON file's '{', "unexpected
    character '#'" at a .tir's comment, with no word of what to pass instead."""
    refused(run(*args), re.escape(f"'{args[1]}' ") + says, hint)


BIG = 2**63  # past int64: CP-SAT and Yices cannot hold it


@pytest.mark.parametrize("key", ["limits.warps", "limits.smem_bytes", "units.tensor"])
def test_a_machine_count_past_the_limit_names_its_key(tmp_path, key):
    """Was: --gpu with limits.warps: 2^63 ended in a TypeError traceback from CP-SAT, smem_bytes: 2^63 in a
    wrong "no joint schedule exists" (exit 1)."""
    import yaml
    doc = yaml.safe_load((SPECS / "h100.yaml").read_text())
    section, field = key.split(".")
    doc[section][field] = BIG
    spec = tmp_path / "m.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    refused(run("solve", EXAMPLES / "gemm_hopper.tir", "--gpu", spec, "--swp-only"),
            re.escape(str(spec)) + rf":\d+:\d+: error: '{key}' is {BIG}, more than the limit of 2147483647", "hint:")


def test_an_integer_attribute_past_the_limit_is_an_error_at_it(tmp_path):
    """Was: {depth = 2^63} passed the attribute's rule and ended in an OverflowError traceback."""
    graph = tmp_path / "g.tir"
    graph.write_text((EXAMPLES / "gemm_hopper.tir").read_text().replace("{depth = 4}", f"{{depth = {BIG}}}", 1))
    refused(run("solve", graph, "--gpu", "h100", "--time-limit", "10"),
            re.escape(str(graph)) + rf":\d+:\d+: error: attribute 'depth' is {BIG}, past the limit of 2147483647")


@pytest.mark.parametrize("option", ["--warps", "--max-ii", "--depth", "--normalize-bound", "--split-rows"])
def test_an_integer_option_past_the_limit_is_a_usage_error(option):
    """Was: --warps 2^63 reached CP-SAT (a TypeError traceback)."""
    refused(run("solve", EXAMPLES / "gemm_hopper.tir", "--gpu", "h100", option, BIG),
            re.escape(f"Invalid value for '{option}'"), "2147483647")


def test_the_count_limits_agree():
    from twill.machine import MAX_COUNT as machine
    from twill.tir_text import MAX_COUNT as tir
    from twill_cli.common import MAX_COUNT as cli
    assert machine == tir == cli == 2**31 - 1


def test_an_emitter_error_about_an_op_of_a_graph_file_is_at_its_line(tmp_path):
    """Was: "error: op 'acc_n': emit-cuda's tcgen05.mma is M = 128 or 64 (got 48)" with no place, though emit-cuda
    read the op from a file."""
    text = (ROOT / "tests" / "data" / "tir" / "gemm_i8.tir").read_text()
    graph = tmp_path / "g.tir"
    graph.write_text(re.sub(r"(?<=[\[,])128(?=[\],])", "48", text))
    refused(run("emit-cuda", graph, "--gpu", "b200", "--swp-only", "--no-ptxas-loop", "-o", tmp_path / "k.cu"),
            re.escape(str(graph)) + r":\d+:\d+: error: op '\w+': emit-cuda's tcgen05.mma is M = 128 or 64")
    assert not (tmp_path / "k.cu").exists()


UNARY = ("kernel unary\ninput x : f16[64,64] @smem\ninput w : f16[64,64] @smem\n\n# blank lines and comments move the "
         "ops down\n\nloop {\n  y = mma x, w : f32[64,64]\n  z = mul y : f32[64,64]\n  store z\n}\n")


def test_an_emitter_error_is_at_the_line_of_the_users_file_not_of_the_reprinted_graph(tmp_path):
    """Was: "<graph of unary>:6:7": a line of the graph as twill re-printed it, not of the file the user wrote
    (line 9 here), nor of the schedule file."""
    graph = tmp_path / "u.tir"
    graph.write_text(UNARY)
    refused(run("emit-cuda", graph, "--gpu", "h100", "--swp-only", "--no-ptxas-loop", "-o", tmp_path / "u.cu"),
            re.escape(f"{graph}:9:7: error: op 'z': emit-cuda's mul takes 2 operands"))
    schedule = tmp_path / "u.json"
    assert run("solve", graph, "--gpu", "h100", "--swp-only", "-q", "-o", schedule).exit_code == 0
    refused(run("emit-cuda", schedule, "--no-ptxas-loop", "-o", tmp_path / "u.cu"),
            re.escape(f"{schedule} (its 'graph'):") + r"\d+:7: error: op 'z'")
    assert not (tmp_path / "u.cu").exists()


def test_a_schedule_whose_graph_does_not_parse_names_the_file(tmp_path):
    """Was: "<graph of gemm_hopper>:1:1: error: ..." with no word of which file, or what to do."""
    def edit(d):
        d["graph"] = "{{{"
        for k in [k for k in d if "digest" in k]:
            d.pop(k)
    path = _edited(tmp_path, edit)
    refused(run("emit-cuda", path, "--no-ptxas-loop"), re.escape(f"{path} (its 'graph'):1:1: error:"),
            re.escape(f"'{path}': its 'graph' is not a graph twill reads"), "hint: solve it again")


@pytest.mark.parametrize("args, says", [
    (("--out", "{tmp}/missing/x.yaml"), "directory '.*missing' does not exist"),
    (("--out", "{tmp}/x.yaml", "--raw", "{tmp}/missing/raw.json"), "directory '.*missing' does not exist"),
    (("--out", "{tmp}/x.yaml", "--base", "nosuch"), "--base nosuch: no such spec"),
], ids=["out", "raw", "base"])
def test_calibrate_refuses_its_outputs_and_base_before_the_benches(tmp_path, args, says):
    """Was: the microbenchmarks were built (and, on a GPU, run: minutes) before a missing --out folder or a
    misspelt --base was said."""
    result = run("calibrate", *(a.format(tmp=tmp_path) for a in args))
    refused(result, says)
    assert "built:" not in result.output


def test_an_emitter_error_about_the_whole_kernel_names_the_file(tmp_path):
    """Was: "error: a 48-row tile cannot be split over 1 warpgroup(s) of 64-row wgmma blocks", no file, no hint."""
    text = (EXAMPLES / "attention_bwd_flash_hopper.tir").read_text()
    graph = tmp_path / "g.tir"
    graph.write_text(re.sub(r"(?<=[\[,])64(?=[\],])", "48", text))
    refused(run("emit-cuda", graph, "--gpu", "h100", "--swp-only", "--no-ptxas-loop", "-o", tmp_path / "k.cu"),
            re.escape(f"error: {graph}: a 48-row tile cannot be split"), "hint: give the loop's row tiles")
