"""Shared pytest setup: the `--update-golden` option and a `golden` fixture.

Golden files live in tests/golden/. A test calls ``golden("name.ext", text)``: by default the
text must equal the stored file byte for byte; with ``pytest --update-golden`` the file is
(re)written instead, and the diff is reviewed in git like any other change.
"""
from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
GOLDEN = TESTS / "golden"
DATA = TESTS / "data"
ROOT = TESTS.parent


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite the golden files in tests/golden/ instead of comparing against them")


@pytest.fixture
def update_golden(request) -> bool:
    return request.config.getoption("--update-golden")


@pytest.fixture
def golden(update_golden):
    """``golden(name, text)``: compare `text` with tests/golden/NAME, or rewrite it on request."""

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if update_golden:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        assert path.is_file(), f"missing golden file {path}: run pytest --update-golden and review the diff"
        expected = path.read_text()
        assert text == expected, f"output differs from {path} (run pytest --update-golden if the change is intended)"

    return check


def pytest_configure(config):
    # PuLP 3.x warns that its CBC-command API will change in PuLP 4.0; that is twill.modulo's
    # business, not a test failure, and thousands of copies would bury real warnings.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:pulp")


@pytest.fixture(autouse=True)
def private_schedule_cache(tmp_path_factory, monkeypatch):
    """Each test gets an empty schedule cache of its own (outside its tmp_path): results never
    leak between tests."""
    monkeypatch.setenv("TWILL_CACHE_DIR", str(tmp_path_factory.mktemp("twill-cache")))
