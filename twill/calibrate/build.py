"""Build the microbenchmarks with nvcc: each source to a program in a build folder.

Every bench is built as a whole program (compiled, assembled by ptxas and linked against the static
CUDA runtime), so a machine without a GPU still checks every source; only running needs the card.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from twill.errors import TwillError

from .benches import Bench, sources


class CalibrationError(TwillError):
    """A microbenchmark failed to build or to run (exit 5); the message holds its log."""

    exit_code = 5


class NothingMeasured(TwillError):
    """Nothing could be measured here: no nvcc, or no CUDA device (exit 4)."""

    exit_code = 4


@dataclass(frozen=True)
class Built:
    bench: Bench
    program: Path | None  # None when nvcc refused it
    log: str  # nvcc's and ptxas's output


def find_nvcc(explicit: str | None = None) -> str | None:
    """The nvcc to use: --nvcc (that one or none), else $NVCC, else the PATH's, else
    /usr/local/cuda/bin/nvcc."""
    if explicit:
        return explicit if (shutil.which(explicit) or Path(explicit).is_file()) else None
    for cand in (os.environ.get("NVCC"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if cand and (shutil.which(cand) or Path(cand).is_file()):
            return cand
    return None


def nvcc_version(nvcc: str) -> str:
    """The release line of `nvcc --version` (`release 13.0, V13.0.88`), or '' if it says none."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return next((line.split("release", 1)[1].strip(" ,") for line in out.splitlines() if "release" in line), "")


def command(nvcc: str, bench: Bench, folder: Path) -> list[str]:
    """The nvcc command line of one bench: C++17, -O3, the a-target of its arch, ptxas's report."""
    arch = bench.arch.removeprefix("sm_")
    return [nvcc, "-std=c++17", "-O3", f"-gencode=arch=compute_{arch},code=sm_{arch}", "-Xptxas", "-v",
            "-I", str(folder), "-o", str(folder / bench.name), str(folder / f"{bench.name}.cu")]


def build(benches, folder: Path, nvcc: str, jobs: int | None = None) -> tuple[Built, ...]:
    """Write every source into `folder` and build each bench there (in parallel, `jobs` at a time)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in sources().items():
        (folder / name).write_text(text, encoding="utf-8")

    def one(bench: Bench) -> Built:
        try:
            done = subprocess.run(command(nvcc, bench, folder), capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.SubprocessError) as exc:
            return Built(bench, None, f"{nvcc}: {exc}")
        ok = done.returncode == 0 and (folder / bench.name).is_file()
        return Built(bench, folder / bench.name if ok else None, done.stdout + done.stderr)

    with ThreadPoolExecutor(max_workers=jobs or max(1, min(len(benches), os.cpu_count() or 1))) as pool:
        return tuple(pool.map(one, benches))


def failures(built) -> str:
    """The logs of the benches nvcc refused, each headed by its name (errors only, 40 lines each)."""
    parts = []
    for b in built:
        if b.program is None:
            lines = [ln for ln in b.log.splitlines() if "error" in ln.lower()] or b.log.splitlines()
            parts.append(f"{b.bench.name}.cu:\n  " + "\n  ".join(lines[:40]))
    return "\n".join(parts)
