"""Triage of the held-out dumps: where each stops on its way import -> solve -> emit-cuda -> nvcc.

    python bench/heldout/triage.py DUMPS OUT [--only NAME ...] [--time-limit S]

DUMPS holds VERSION/{prepipe,after}/NAME_smCC.ttgir (gen.py's folders, one per Triton version,
e.g. tests/data/ttgir/heldout2). Every dump is imported (`twill import`, the default and
`--split-rows auto`) and its graph compared with the one of the first version's prepipe form (both
forms of a kernel must give one graph); each distinct graph then goes through solve (--gpu h100 for
sm_90, b200 for sm_100), emit-cuda (--binding torch) and nvcc with bench/triton_bench.py's
build_attempt. Writes OUT/triage.json and prints one row a dump.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from triton_bench import build_attempt  # noqa: E402


def _import(dump: Path, out: Path, args: tuple[str, ...]) -> tuple[int, str, str]:
    proc = subprocess.run(["twill", "import", str(dump), "-o", str(out), *args], capture_output=True, text=True)
    errs = [line for line in proc.stderr.splitlines() if "error:" in line or "warning:" in line]
    text = out.read_text() if proc.returncode == 0 and out.exists() else ""
    return proc.returncode, (errs[0] if errs else ""), text


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("dumps")
    p.add_argument("out")
    p.add_argument("--only", nargs="*")
    p.add_argument("--time-limit", type=float, default=300)
    p.add_argument("--no-build", action="store_true", help="import and compare only")
    a = p.parse_args(argv)
    root, out = Path(a.dumps), Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    versions = sorted(d.name for d in root.iterdir() if d.is_dir())[::-1]  # t39 before t36
    names = sorted({f.stem for v in versions for f in (root / v).glob("*/*.ttgir")})
    if a.only:
        names = [n for n in names if any(n.startswith(o) for o in a.only)]
    rows = []
    for name in names:
        arch_gpu = ("b200", "sm_100a") if name.endswith("sm100") else ("h100", "sm_90a")
        graphs: dict[str, str] = {}
        for split in ((), ("--split-rows", "auto")):
            tag = "split" if split else "whole"
            for v in versions:
                for form in ("prepipe", "after"):
                    dump = root / v / form / f"{name}.ttgir"
                    if not dump.exists():
                        continue
                    tir = out / f"{name}.{v}.{form}.{tag}.tir"
                    rc, msg, text = _import(dump, tir, split)
                    row = {"dump": f"{v}/{form}/{name}", "split": tag, "import_rc": rc, "import_msg": msg}
                    if rc == 0:
                        first = graphs.setdefault(tag, text)
                        row["same_graph"] = text == first
                        if text == first and (v, form) != (versions[0], "prepipe") and "built" in graphs:
                            row["stage"] = "as the first form"
                        elif not a.no_build and (text != first or (v, form) == (versions[0], "prepipe")):
                            where = out / v / form / tag
                            where.mkdir(parents=True, exist_ok=True)
                            rec = build_attempt(dump, where, arch_gpu[0], arch_gpu[1], a.time_limit, split)
                            row["stage"] = rec.get("stopped", "ok")
                            row["error"] = rec.get("error", "")[-400:]
                            row["ii"], row["optimal"] = rec.get("ii"), rec.get("optimal")
                            row["spill"] = rec.get("stages", {}).get("nvcc", {}).get("spill_bytes")
                            row["comparable"] = rec.get("comparable")
                            graphs["built"] = "1"
                    else:
                        row["stage"] = "import"
                    rows.append(row)
                    print(json.dumps(row)[:400], flush=True)
            graphs.pop("built", None)
        (out / "triage.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
