"""Solve times of the graphs real Triton kernels import to (issue 25: graphs nobody here wrote by hand).

    python bench/heldout_solves.py OUT.json [--time-limit S] [--split auto|none|both] [--gpus sm90=h200,sm100=b200]

Every held-out dump of tests/data/ttgir/heldout*/t39/prepipe (Triton 3.9 before its pipeliner; the after form and
Triton 3.6 give the same graph, tests/test_heldout*.py) and of the corpus (tests/data/ttgir/corpus/prepipe) is
imported (`twill import`, by default also `--split-rows auto` where that gives another graph); each distinct graph
that imports is solved once in a fresh `twill solve --no-cache --time-limit S` process (sm_90 dumps on h200, sm_100
on b200 by default), recording the wall and CPU seconds, I, L, whether it was proven, and the joint stage's
progress lines (where the time went). Deterministic order; the rows are written as they finish. A dump refused at
import is listed with its exit code and not solved.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "ttgir"


def dumps() -> list[Path]:
    out = sorted((DATA / "corpus" / "prepipe").glob("*.ttgir"))
    for batch in sorted(DATA.glob("heldout*"), key=lambda p: (len(p.name), p.name)):
        out += sorted((batch / "t39" / "prepipe").glob("*.ttgir"))
    return out


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def solve(tir: Path, gpu: str, limit: float) -> dict:
    cpu0, t0 = _children_cpu(), time.monotonic()
    proc = subprocess.run(["twill", "solve", str(tir), "--gpu", gpu, "--no-cache", "--time-limit", str(limit),
                           "--format", "json"], capture_output=True, text=True, timeout=limit * 3 + 60)
    row = {"rc": proc.returncode, "seconds": round(time.monotonic() - t0, 2),
           "cpu_seconds": round(_children_cpu() - cpu0, 2)}
    try:
        s = json.loads(proc.stdout)
        row.update(ii=s.get("ii"), length=s.get("length"), optimal=s.get("optimal"))
    except ValueError:
        row["error"] = (proc.stderr.strip().splitlines() or [""])[-1][:300]
    row["progress"] = [line.strip() for line in proc.stderr.splitlines() if re.match(r"\s*[\d.]+s joint", line)][-40:]
    return row


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--time-limit", type=float, default=60)
    ap.add_argument("--split", choices=("auto", "none", "both"), default="both")
    ap.add_argument("--gpus", default="sm90=h200,sm100=b200")
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args(argv)
    gpus = dict(kv.split("=") for kv in a.gpus.split(","))
    splits = {"auto": [("--split-rows", "auto")], "none": [()], "both": [(), ("--split-rows", "auto")]}[a.split]
    rows, seen = [], set()
    with tempfile.TemporaryDirectory() as tmp:
        for dump in dumps():
            batch = dump.parents[1].name if dump.parents[1].name == "corpus" else dump.parents[2].name
            name = f"{batch}/{dump.stem}"  # (the session 42 JSON in bench/heldout_solves names the corpus "ttgir")
            if a.only and not any(o in name for o in a.only):
                continue
            gpu = gpus["sm100" if dump.stem.endswith("sm100") else "sm90"]
            for split in splits:
                tir = Path(tmp) / "g.tir"
                tir.unlink(missing_ok=True)
                imp = subprocess.run(["twill", "import", str(dump), "-o", str(tir), *split], capture_output=True,
                                     text=True)
                row = {"dump": name, "split": "auto" if split else "none", "gpu": gpu, "import_rc": imp.returncode}
                if imp.returncode != 0 or not tir.exists():
                    rows.append(row)
                    continue
                text = tir.read_text()
                key = hashlib.sha256((gpu + text).encode()).hexdigest()
                if key in seen:
                    continue
                seen.add(key)
                row["ops"] = len(re.findall(r"^\s+\w+\s*=", text, flags=re.M))
                row.update(solve(tir, gpu, a.time_limit))
                rows.append(row)
                print(f"{name:50} {row['split']:5} {gpu} ops={row['ops']:3} rc={row['rc']} "
                      f"{row['seconds']:6.1f}s I={row.get('ii')} L={row.get('length')} opt={row.get('optimal')}",
                      flush=True)
                Path(a.out).write_text(json.dumps({"time_limit": a.time_limit, "rows": rows}, indent=1))
    Path(a.out).write_text(json.dumps({"time_limit": a.time_limit, "rows": rows}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
