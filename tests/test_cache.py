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
