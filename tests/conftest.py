"""Shared pytest setup: the `--update-golden` option and a `golden` fixture, nvcc builds cached
by content, and solves shared between the tests of one process.

Golden files live in tests/golden/. A test calls ``golden("name.ext", text)``: by default the
text must equal the stored file byte for byte; with ``pytest --update-golden`` the file is
(re)written instead, and the diff is reviewed in git like any other change.

The suite runs in parallel (pytest-xdist, the README's `-n` option): nothing here or in a test
may write outside the test's own tmp_path, except the content-addressed nvcc cache below, whose
entries are written whole (a rename) so that workers building the same file never see half of one.
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
GOLDEN = TESTS / "golden"
DATA = TESTS / "data"
ROOT = TESTS.parent


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite the golden files in tests/golden/ instead of comparing against them")
    parser.addoption("--no-nvcc-cache", action="store_true", default=False,
                     help="run nvcc for every build instead of reusing a build of the same source, flags and nvcc")


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
    global NVCC_CACHE
    if not config.getoption("--no-nvcc-cache"):
        cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
        NVCC_CACHE = (cache.mkdir("twill-nvcc") if cache is not None
                      else Path(tempfile.gettempdir()) / f"twill-nvcc-{os.getuid()}")
    # PuLP 3.x warns that its CBC-command API will change in PuLP 4.0; that is twill.modulo's
    # business, not a test failure, and thousands of copies would bury real warnings.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:pulp")


@pytest.fixture(autouse=True)
def private_schedule_cache(tmp_path_factory, monkeypatch):
    """Each test gets an empty schedule cache of its own (outside its tmp_path): results never
    leak between tests. ptxas's reports, a function of their key alone, are shared (below)."""
    private = str(tmp_path_factory.mktemp("twill-cache"))
    monkeypatch.setenv("TWILL_CACHE_DIR", private)
    # emit-cuda's ptxas loop compiles every kernel it writes; the tests that are about it
    # (test_ptxas.py) turn it back on, the others compile what they check themselves.
    monkeypatch.setenv("TWILL_PTXAS_LOOP", "0")
    if NVCC_CACHE is not None:
        # ptxas's reports (twill.ptxas.compile_kernel) are keyed by the text, the flags and the toolchain,
        # like nvcc_compile's builds: one store for every test, so a kernel that two tests emit (a corpus
        # dump and its worked example, say) is compiled once. Not for a test that set its own
        # TWILL_CACHE_DIR: the cache's own tests (test_ptxas.py) count its entries.
        import twill.ptxas
        own = twill.ptxas.cache_dir
        monkeypatch.setattr(twill.ptxas, "cache_dir", lambda: NVCC_CACHE / "ptxas"
                            if os.environ.get("TWILL_CACHE_DIR") == private else own())


# -- nvcc, cached by content ------------------------------------------------------------------------

NVCC_CACHE: Path | None = None  # set by pytest_configure; None: --no-nvcc-cache


def nvcc() -> str | None:
    """The nvcc to build with: on PATH, else CUDA's default install; None without one."""
    found = shutil.which("nvcc")
    if found:
        return found
    default = Path("/usr/local/cuda/bin/nvcc")
    return str(default) if default.is_file() else None


@functools.lru_cache(maxsize=None)
def _toolchain() -> str:
    """What besides the source and the flags decides a build: nvcc (its path and version) and
    the host C++ compiler it drives."""
    out = [nvcc() or ""]
    for cmd in ([nvcc(), "--version"], ["c++", "--version"]):
        try:
            out.append(subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout)
        except (OSError, TypeError):
            out.append("")
    return "\n".join(out)


def nvcc_compile(src: Path, flags: list[str]) -> tuple[int, str]:
    """(exit status, stderr) of `nvcc FLAGS -c SRC -o SRC.o`. A build is a function of the source
    text, the flags and the toolchain, so its result is kept under that key (in the pytest cache,
    or a temporary folder under -p no:cacheprovider) and the same .cu compiled by two tests, two
    workers or two runs is built once: a worker that finds another building it waits for that
    build (a lock per key). An object file is written only when nvcc runs."""
    cmd = [nvcc(), *flags, "-c", str(src), "-o", str(src.with_suffix(".o"))]
    if NVCC_CACHE is None:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        return proc.returncode, proc.stderr
    key = hashlib.sha256(json.dumps([_toolchain(), flags, _source_texts(src)]).encode()).hexdigest()
    entry = NVCC_CACHE / f"{key}.json"
    NVCC_CACHE.mkdir(parents=True, exist_ok=True)
    with open(NVCC_CACHE / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not entry.is_file():
            proc = subprocess.run(cmd, capture_output=True, text=True)
            fd, tmp = tempfile.mkstemp(dir=NVCC_CACHE, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump({"rc": proc.returncode, "stderr": proc.stderr, "cmd": cmd}, f)
            os.replace(tmp, entry)
    found = json.loads(entry.read_text())
    return found["rc"], found["stderr"]


def _source_texts(src: Path, seen: frozenset = frozenset()) -> list[str]:
    """The text of `src` and of the local files it `#include "..."`s (a binding's entry includes its
    kernel .cu), recursively: a build's key must change when any of them does."""
    text = src.read_text()
    texts = [text]
    for name in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, flags=re.M):
        dep = src.parent / name
        if dep.is_file() and dep not in seen:
            texts += _source_texts(dep, seen | {src})
    return texts


# -- solves shared by the tests of one process ------------------------------------------------------

def solved_example(name: str, gpu: str = "h100", **options):
    """(schedule, graph, machine) of examples/NAME solved on `gpu` with SolveOptions(**options),
    once per test process: the same solve asked for by several tests (of test_joint and test_plot,
    say) runs once. Everything returned is frozen; a test that wants a variant uses replace()."""
    from twill.pipeline import SolveOptions
    return _solved_example(name, gpu, SolveOptions(**options))


@functools.lru_cache(maxsize=None)
def _solved_example(name: str, gpu: str, options):
    from twill.machine import load_machine
    from twill.pipeline import solve
    from twill.tir import load_tir
    graph, machine = load_tir(ROOT / "examples" / name), load_machine(gpu)
    return solve(graph, machine, options), graph, machine


def emitted_and_built(schedule, machine, src):
    """(schedule, nvcc's exit status, its log) for the .cu `twill emit-cuda` writes, written to `src`:
    through its ptxas loop (twill/ptxas_loop.py), which builds with nvcc every text it considers. The
    loop's build of the text it returns (nvcc -cubin, `twill.ptxas.nvcc_flags`: ptxas's report on the
    device code) is that text's build, so it is not built twice; a text the loop did not build (the
    one-tile kernel written after the loop chose it) is built here, by `nvcc_compile`."""
    from twill.ptxas import nvcc_flags
    from twill.ptxas_loop import emitter, resolver, run
    result = run(schedule, machine, emitter(machine), resolver(schedule, machine), lambda line: None)
    src.write_text(result.text)
    built = next((r.found.report for r in result.rounds if r.text == result.text), None)
    if built is not None:
        return result.schedule, built.rc, built.log
    rc, err = nvcc_compile(src, nvcc_flags(machine.arch))
    return result.schedule, rc, err


def refused_at_its_line(path, line_pattern: str, message_pattern: str, sequence: bool = False):
    """Importing the dump at `path` raises an InputError whose message matches `message_pattern`, located
    at a line matching `line_pattern` (the TTGIR op that is refused): the held-out batches' refusals.
    `sequence`: as `twill import` does, tile loops one after the other a sequence (import_sequence)."""
    import re
    import pytest
    from twill.errors import InputError
    from twill.ttgir import load_ttgir
    from twill.ttgir.sequence import import_sequence
    with pytest.raises(InputError) as err:
        import_sequence(path.read_text(), str(path)) if sequence else load_ttgir(path)
    d = err.value.diagnostics[0]
    assert re.search(message_pattern, d.message) and d.span is not None, (str(path), d.message)
    line = path.read_text().splitlines()[d.span.line - 1]
    assert re.search(line_pattern, line), (str(path), line)


def as_from_a_terminal():
    """`preexec_fn` of a child a test sends signals to: SIGINT and SIGTERM at their defaults and not blocked,
    as a command started from a terminal has them. A process inherits both from its parent, and a test
    runner's worker may hold either otherwise: in two suite runs of session 31 (2 cores), SIGINT had no
    effect on children of one worker (a solve ran to its end, exit 0; a CP-SAT check's process did not
    raise). What the worker held then was not found; children started so have not failed since."""
    import signal
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
