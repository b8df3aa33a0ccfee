"""Run the built microbenchmarks and collect their JSON.

A program exits 3 (printing {"error": "no CUDA device"}) when the runtime finds no card; the
device bench runs first, so that a machine without a GPU is told so after the build and before
anything else is tried.
"""
from __future__ import annotations

import json
import subprocess

from .build import Built, CalibrationError, NothingMeasured

NO_DEVICE = 3  # the exit code of a bench program that found no CUDA device


def arch_of(device: dict) -> str:
    """The a-target of the card the device bench saw: compute capability 9.0 -> sm_90a."""
    return f"sm_{device['cc_major']}{device['cc_minor']}a"


def run_one(built: Built, timeout: float) -> dict:
    """Run one program; its JSON. No device: NothingMeasured; a crash, a timeout or bad JSON: CalibrationError."""
    name = built.bench.name
    try:
        done = subprocess.run([str(built.program)], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CalibrationError(f"the {name} microbenchmark ran past {timeout:g} s and was stopped") from None
    except OSError as exc:
        raise CalibrationError(f"cannot run the {name} microbenchmark: {exc.strerror or exc}") from None
    if done.returncode == NO_DEVICE:
        raise NothingMeasured("no CUDA device here: the microbenchmarks were built (compile-checked) but "
                              "nothing was measured; run twill calibrate on the GPU it should describe")
    if done.returncode != 0:
        raise CalibrationError(f"the {name} microbenchmark failed (exit {done.returncode}):\n  "
                               + "\n  ".join((done.stderr or done.stdout).strip().splitlines()[-20:]))
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise CalibrationError(f"the {name} microbenchmark printed no valid JSON ({exc})") from None


def run_all(built, timeout: float = 300.0, progress=None) -> tuple[dict, tuple[str, ...]]:
    """Run the device bench, then every bench the card's arch runs: (results by bench, benches only
    compile-checked because the card cannot run them)."""
    by = {b.bench.name: b for b in built}
    if "device" not in by:
        raise CalibrationError("the device microbenchmark was not built")
    device = run_one(by["device"], timeout)
    arch = arch_of(device)
    results, skipped = {"device": device}, []
    for b in built:
        if b.bench.name == "device":
            continue
        if b.bench.arch != arch:
            skipped.append(b.bench.name)
            continue
        if progress:
            progress(f"running {b.bench.name}: {b.bench.measures}")
        try:
            results[b.bench.name] = run_one(b, timeout)
        except CalibrationError as exc:  # the others still run; the spec keeps the base's values for it
            results[b.bench.name] = {"bench": b.bench.name, "error": str(exc), "records": []}
            if progress:
                progress(f"error: {exc}")
    return results, tuple(skipped)


def failed(results: dict) -> tuple[str, ...]:
    """The benches that ran and failed (their error is in their result)."""
    return tuple(sorted(name for name, r in results.items() if "error" in r))
