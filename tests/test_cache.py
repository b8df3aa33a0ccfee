"""The schedule cache: a rerun is answered from the cache, byte for byte, and --no-cache solves."""
import json
import os
from pathlib import Path

from click.testing import CliRunner

from twill_cli.main import main

FIG1 = str(Path(__file__).resolve().parent.parent / "examples" / "fig1.tir")


def test_rerun_hits_the_cache_and_gives_the_same_bytes():
    runner = CliRunner()
    first = runner.invoke(main, ["solve", FIG1, "--gpu", "h100", "--format", "json"])
    assert first.exit_code == 0
    cached = list(Path(os.environ["TWILL_CACHE_DIR"]).glob("*.json"))
    assert len(cached) == 1 and json.loads(cached[0].read_text())["ii"] == 2
    second = runner.invoke(main, ["solve", FIG1, "--gpu", "h100", "--format", "json"])
    assert "cache hit" in second.output
    assert second.stdout == first.stdout
    third = runner.invoke(main, ["solve", FIG1, "--gpu", "h100", "--format", "json", "--no-cache"])
    assert "cache hit" not in third.output and third.stdout == first.stdout


def test_options_that_change_the_answer_change_the_key():
    runner = CliRunner()
    runner.invoke(main, ["solve", FIG1, "--gpu", "h100", "-q", "--format", "json"])
    runner.invoke(main, ["solve", FIG1, "--gpu", "h100", "-q", "--format", "json", "--swp-only"])
    assert len(list(Path(os.environ["TWILL_CACHE_DIR"]).glob("*.json"))) == 2


def test_a_cached_schedule_that_fails_verification_is_solved_again():
    runner = CliRunner()
    first = runner.invoke(main, ["solve", FIG1, "--gpu", "h100", "--format", "json", "-q"])
    [cached] = Path(os.environ["TWILL_CACHE_DIR"]).glob("*.json")
    data = json.loads(cached.read_text())
    for op in data["ops"]:
        op["start"] = 0  # every dependence broken
    cached.write_text(json.dumps(data))
    again = runner.invoke(main, ["solve", FIG1, "--gpu", "h100", "--format", "json"])
    assert again.exit_code == 0 and "cache hit" not in again.output
    assert again.stdout == first.stdout


# -- only complete, checked results are cached, and an entry is checked before use (issue 24) -------

ATTN = str(Path(__file__).resolve().parent.parent / "examples" / "attention_fwd_hopper.tir")
GEMM = str(Path(__file__).resolve().parent.parent / "examples" / "gemm_hopper.tir")


def _entries():
    return list(Path(os.environ["TWILL_CACHE_DIR"]).glob("*.json"))


def test_a_time_limited_solve_is_not_cached():
    """--time-limit cut the search (exit 3, marked not proven): nothing is stored, so a later
    solve without a limit is never served it."""
    runner = CliRunner()
    # (FA3 on h100 now solves within the second: the b200 solve of the unsplit forward takes several)
    cut = runner.invoke(main, ["solve", ATTN.replace("attention_fwd_hopper", "attention_fwd_simple"), "--gpu", "b200",
                               "--time-limit", "1", "--format", "json", "-q"])
    assert cut.exit_code == 3 and json.loads(cut.stdout)["complete"] is False, cut.output
    assert _entries() == []


def _plant(graph_path: str, options, schedule) -> Path:
    from twill import cache
    from twill.fileio import load_graph
    from twill.machine import load_machine
    digest = cache.key(load_graph(graph_path), load_machine("h100"), options)
    path = Path(os.environ["TWILL_CACHE_DIR"]) / f"{digest}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(schedule)
    return path


def test_an_entry_of_the_wrong_stage_is_solved_again():
    """A --swp-only schedule under a full solve's key is not served to the full solve."""
    from twill.pipeline import SolveOptions
    runner = CliRunner()
    swp = runner.invoke(main, ["solve", FIG1, "--gpu", "h100", "--swp-only", "--format", "json", "-q", "--no-cache"])
    _plant(FIG1, SolveOptions(), swp.stdout)
    full = runner.invoke(main, ["solve", FIG1, "--gpu", "h100", "--format", "json"])
    assert full.exit_code == 0 and "cache hit" not in full.output
    assert json.loads(full.stdout)["stage"] == "joint"


def test_an_entry_holding_another_graphs_schedule_is_solved_again():
    """Another graph's schedule under this graph's key: solved again, no KeyError."""
    from twill.pipeline import SolveOptions
    runner = CliRunner()
    other = runner.invoke(main, ["solve", GEMM, "--gpu", "h100", "--format", "json", "-q", "--no-cache"])
    _plant(FIG1, SolveOptions(), other.stdout)
    result = runner.invoke(main, ["solve", FIG1, "--gpu", "h100", "--format", "json"])
    assert result.exit_code == 0 and "cache hit" not in result.output, result.output
    assert json.loads(result.stdout)["kernel"] == "fig1"


def test_every_model_option_is_in_the_key():
    from dataclasses import fields, replace

    from twill import cache
    from twill.fileio import load_graph
    from twill.machine import load_machine
    from twill.options import ModelOptions
    graph, machine = load_graph(FIG1), load_machine("h100")
    changed = {"swp_only": True, "normalize_bound": 100, "max_ii": 9, "cross_role": False, "warps": 8,
               "registers": 128, "depth": 3, "smt_backend": "z3", "groups": (("S", "O"),), "register_reserve": 48,
               "role_reserve": ((("S",), 16, 4),), "tile_handoff": True}
    assert set(changed) == {f.name for f in fields(ModelOptions)}
    keys = {cache.key(graph, machine, replace(ModelOptions(), **{k: v})) for k, v in changed.items()}
    assert len(keys | {cache.key(graph, machine, ModelOptions())}) == len(changed) + 1


def test_a_schedule_records_and_checks_exactly_the_model_options():
    """What a schedule file may record (schedule.OPTION_CHECKS) is ModelOptions' fields, less the
    stage; a non-default one round-trips through the file and its digest."""
    from dataclasses import fields

    from twill.options import ModelOptions
    from twill.schedule import OPTION_CHECKS
    assert set(OPTION_CHECKS) == {f.name for f in fields(ModelOptions)} - {"swp_only"}
    opts = ModelOptions(warps=8, groups=(("S", "O"),), normalize_bound=100, smt_backend="z3")
    back = ModelOptions.from_recorded(opts.recorded())
    assert back == opts and back.digest() == opts.digest() != ModelOptions().digest()
    assert all(OPTION_CHECKS[k](v) for k, v in opts.recorded())
