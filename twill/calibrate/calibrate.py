"""`twill calibrate`, top to bottom: build the benches, run them, keep the raw samples, derive the
machine file's numbers and write the spec. Each step is a function of its inputs; only `measure`
touches nvcc and the GPU.
"""
from __future__ import annotations

import datetime
import json
from pathlib import Path

from twill.errors import InputError

from .benches import BENCHES, BY_NAME
from .build import CalibrationError, NothingMeasured, build, failures, find_nvcc, nvcc_version
from .derive import derive
from .run import arch_of, run_all
from .write import render

RAW_FORMAT = "twill-calibration-raw/1"
BASE_FOR_ARCH = {"sm_90a": "h200", "sm_100a": "b200"}


def selected(only) -> tuple:
    """The benches to build: all, or the named ones plus `device` (which finds the card)."""
    if not only:
        return BENCHES
    unknown = [n for n in only if n not in BY_NAME]
    if unknown:
        raise InputError(f"unknown microbenchmark '{unknown[0]}' (there are: {', '.join(BY_NAME)})")
    return tuple(b for b in BENCHES if b.name == "device" or b.name in only)


def measure(folder: Path, nvcc: str | None = None, only=(), progress=lambda msg: None, timeout: float = 300.0) -> dict:
    """Build every selected bench in `folder`, run those the card runs; the raw document. No nvcc, or
    no card after the build: NothingMeasured (exit 4); a bench nvcc refuses: CalibrationError."""
    compiler = find_nvcc(nvcc)
    if compiler is None:
        where = f"at '{nvcc}'" if nvcc else "here (give --nvcc PATH or put it on the PATH)"
        raise NothingMeasured(f"no nvcc {where}: nothing was built or measured")
    benches = selected(only)
    progress(f"building {len(benches)} microbenchmarks with {compiler}")
    built = build(benches, folder, compiler)
    refused = failures(built)
    if refused:
        raise CalibrationError(f"nvcc refused a microbenchmark:\n{refused}")
    progress("built: " + ", ".join(f"{b.bench.name} ({b.bench.arch})" for b in built))
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    results, skipped = run_all(built, timeout, progress)
    return raw_document(results, skipped, nvcc_version(compiler), date)


def raw_document(results: dict, compile_checked, nvcc: str, date: str) -> dict:
    """The raw measurements as they are recorded: the card, when, the toolchain, every record."""
    d = results["device"]
    return {"format": RAW_FORMAT, "date": date, "card": d["name"], "arch": arch_of(d),
            "compute_capability": f"{d['cc_major']}.{d['cc_minor']}", "driver": str(d["driver"]),
            "nvcc": nvcc, "compile_checked": sorted(compile_checked), "results": results}


def load_raw(path: str) -> dict:
    """A recorded raw document, checked enough that derive cannot fail on it obscurely."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read '{path}': {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a JSON file ({exc})") from None
    if not isinstance(raw, dict) or raw.get("format") != RAW_FORMAT:
        raise InputError(f"{path}: not a raw calibration file (its 'format' is not '{RAW_FORMAT}')")
    for key in ("date", "card", "arch", "compute_capability", "driver", "nvcc", "results"):
        if key not in raw:
            raise InputError(f"{path}: the raw calibration file has no '{key}'")
    if "device" not in raw["results"]:
        raise InputError(f"{path}: the raw calibration file has no device results")
    return raw


def raw_text(raw: dict) -> str:
    """The raw document as written: sorted keys, one record per line's worth of indentation."""
    return json.dumps(raw, indent=1, sort_keys=True) + "\n"


def spec_text(raw: dict, base_text: str, base_label: str, name: str, raw_label: str | None = None) -> str:
    """The calibrated spec for `raw` over the base spec, checked by twill.machine before it is returned."""
    from twill.machine import parse_machine
    text = render(base_text, base_label, derive(raw["results"]), raw, name, raw_label)
    parse_machine(text, f"<calibrated {name}>")  # a spec machine.py would refuse is a bug here, not the user's
    return text
