#!/usr/bin/env python3
"""The register model against ptxas, on every kernel we can build (docs/model-fidelity.md).

    python3 bench/register_fidelity.py run --out DIR [--only SUBSTRING] [--time-limit S]
    python3 bench/register_fidelity.py table DIR/fidelity.json [--before OTHER.json]

`run` solves each case (examples/*.tir on h100, h200 and b200; the Triton 3.9 corpus dumps
tests/data/ttgir/corpus/prepipe/*.ttgir and the held-out dumps tests/data/ttgir/heldout2/t39/prepipe/*.ttgir
imported with `--split-rows auto` as bench/triton_bench.py's IMPORT_ARGS, sm_90 on h200 and sm_100
on b200; plus the held-out attn_exp of Triton 3.6 on h200, the case that spilled), emits its kernel
as `twill emit-cuda --no-ptxas-loop` would (the schedule the model chose, not one ptxas corrected),
and compiles it with nvcc -Xptxas -v (twill.ptxas, cached by content). Per role it records:

- `model`: the registers per thread the model counts for the role at its fullest
  (`ptxas_loop.model_registers`, what the joint stage checked against the budget);
- `budget`: the `setmaxnreg` budget the emitted kernel gives the role's warpgroup;
- `alone`: ptxas's registers for the role's code alone, without setmaxnreg and launch bounds
  (`ptxas.role_registers`: what the code takes when nothing limits it, at most 255);
- `probe`: spill bytes and wgmma serialization of the role's code alone under its budget
  (`ptxas.probe_source`: the kernel with the other roles' calls left out), compiled only where the
  kernel is not clean or `alone` exceeds the budget (else 0: the code fits its budget untouched);

and for the kernel: ptxas's registers at launch, spill bytes and serialization. Each case is written
to DIR/cases/NAME.json as it finishes, so a run that stops resumes where it was (delete a file to
redo it); DIR/fidelity.json and DIR/fidelity.md gather them. The solver's cache answers a case solved
before with the same model.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GPUS = ("h100", "h200", "b200")
IMPORT_ARGS = {"split_rows": "auto"}  # bench/triton_bench.py's IMPORT_ARGS


def cases(only: str | None = None) -> list[dict]:
    """Every case: name, source, machine, and whether it is a TTGIR dump."""
    out = []
    for tir in sorted((ROOT / "examples").glob("*.tir")):
        for gpu in GPUS:
            out.append({"name": f"{tir.stem}@{gpu}", "source": str(tir.relative_to(ROOT)), "gpu": gpu, "ttgir": False})
    dumps = sorted((ROOT / "tests/data/ttgir/corpus/prepipe").glob("*.ttgir"))
    dumps += sorted((ROOT / "tests/data/ttgir/heldout2/t39/prepipe").glob("*.ttgir"))
    dumps += [ROOT / "tests/data/ttgir/heldout2/t36/prepipe/attn_exp_sm90.ttgir"]
    for d in dumps:
        family = d.parts[-3] if "heldout2" in d.parts else "corpus"
        gpu = "b200" if "sm100" in d.stem else "h200"
        out.append({"name": f"{family}/{d.stem}@{gpu}", "source": str(d.relative_to(ROOT)), "gpu": gpu, "ttgir": True})
    # the order a run measures them in: Hopper first (h200 the bench machine, then h100), b200 last
    rank = {"h200": 0, "h100": 1, "b200": 2}
    out.sort(key=lambda c: rank[c["gpu"]])
    return [c for c in out if not only or any(s in c["name"] for s in only.split(","))]


def load(case: dict):
    from twill.tir import load_tir
    from twill.ttgir import load_ttgir
    path = ROOT / case["source"]
    if case["ttgir"]:
        return load_ttgir(path, **IMPORT_ARGS)[0]
    return load_tir(path)


def measure(case: dict, time_limit: float, kernels: Path | None = None) -> dict:
    """Solve, emit, compile one case; the record described in the module docstring."""
    from twill.emit import build_model
    from twill.emit.cuda import render
    from twill.errors import TwillError
    from twill.machine import load_machine
    from twill.pipeline import SolveOptions, TimeLimitReached, solve
    from twill.ptxas import compile_kernel, probe_source, role_registers
    from twill.ptxas_loop import model_registers, role_probes

    rec = dict(case)
    machine = load_machine(case["gpu"])
    try:
        graph = load(case)
    except TwillError as exc:
        return rec | {"stopped": "import", "error": str(exc).splitlines()[0]}
    if not hasattr(graph, "ops"):
        return rec | {"stopped": "import", "error": "loops in sequence (not measured)"}
    t0 = time.time()
    try:
        schedule = solve(graph, machine, SolveOptions(time_limit=time_limit, cache=True))
    except TimeLimitReached as exc:
        schedule = exc.schedule
        rec["proven"] = False
    except TwillError as exc:
        return rec | {"stopped": "solve", "error": str(exc).splitlines()[0], "solve_s": round(time.time() - t0, 1)}
    rec["solve_s"] = round(time.time() - t0, 1)
    rec.setdefault("proven", bool(schedule.optimal))
    if not schedule.roles:
        return rec | {"stopped": "solve", "error": "no joint schedule (stage 1 only)"}
    rec.update(ii=schedule.ii, length=schedule.length, roles=len(schedule.roles))
    try:
        model = build_model(schedule, machine)
        text = render(model)
    except TwillError as exc:
        return rec | {"stopped": "emit", "error": str(exc).splitlines()[0]}
    if kernels is not None:
        kernels.mkdir(parents=True, exist_ok=True)
        (kernels / (case["name"].replace("/", "__") + ".cu")).write_text(text)
    report = compile_kernel(text, machine.arch)
    if not report.ok:
        return rec | {"stopped": "nvcc", "error": report.errors[-400:]}
    rec["kernel"] = {"registers": max(e.registers for e in report.entries), "spill_bytes": report.spill_bytes,
                     "serialized": report.serialized}
    need = model_registers(schedule, machine)
    rows = []
    for ident, name, budget, counted, ops, warps in role_probes(model, schedule, machine):
        alone = role_registers(text, machine.arch, ident)
        row = {"role": name, "ident": ident, "warps": warps, "ops": list(ops), "budget": budget, "model": counted, "alone": alone,
               "probe_spill": 0, "probe_serialized": False}
        if not report.clean or alone is None or alone > budget:  # else the code fits its budget untouched
            probe = compile_kernel(probe_source(text, ident), machine.arch)
            row.update(probe_spill=probe.spill_bytes if probe.ok else None,
                       probe_serialized=probe.serialized if probe.ok else None)
        rows.append(row)
    rec["role_rows"] = rows
    rec["model_all"] = need
    return rec


_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def _ptx(text: str, arch: str, tmp: Path) -> str | None:
    """The PTX of a .cu (nvcc's front end once; ptxas then runs alone on variants of it)."""
    src, ptx = tmp / "probe.cu", tmp / "probe.ptx"
    src.write_text(text)
    proc = subprocess.run(["nvcc", "-std=c++17", f"-gencode=arch=compute_{arch[3:]},code={arch}", "-ptx", str(src),
                           "-o", str(ptx)], capture_output=True, text=True)
    return ptx.read_text() if proc.returncode == 0 else None


def _ptxas_spill(ptx: str, arch: str, tmp: Path) -> tuple[int, bool] | None:
    path = tmp / "variant.ptx"
    path.write_text(ptx)
    proc = subprocess.run(["ptxas", f"-arch={arch}", "-v", str(path), "-o", str(tmp / "variant.cubin")],
                          capture_output=True, text=True)
    if proc.returncode:
        return None
    log = proc.stdout + proc.stderr
    spill = max((max(int(a), int(b)) for a, b in _SPILL.findall(log)), default=0)
    return spill, "C7512" in log  # serialized for want of registers (C7515 is not about registers)


def least_budget(text: str, arch: str, ident: str, budget: int, granule: int = 8, top: int = 256) -> int | None:
    """The least `setmaxnreg` budget at which role `ident`'s code alone (`ptxas.probe_source`: the
    launch, the other warpgroups' budgets and the role's setmaxnreg kept, only its number changed
    in the PTX) compiles with no spill and no wgmma serialized for want of registers: what the role
    needs under setmaxnreg. None where even `top` spills or the PTX has no such setmaxnreg."""
    from twill.ptxas import probe_source
    with tempfile.TemporaryDirectory(prefix="twill-need-") as tmp:
        tmp = Path(tmp)
        ptx = _ptx(probe_source(text, ident), arch, tmp)
        mark = f"setmaxnreg.inc.sync.aligned.u32 {budget};"
        if ptx is None or mark not in ptx:
            return None

        def fits(b: int) -> bool:
            found = _ptxas_spill(ptx.replace(mark, f"setmaxnreg.inc.sync.aligned.u32 {b};"), arch, tmp)
            return found is not None and found == (0, False)
        lo, hi = 24, top  # fits(hi) is checked; find the least granule that fits
        if not fits(hi):
            return None
        lo = lo - granule
        while hi - lo > granule:
            mid = (lo + hi) // 2 // granule * granule
            if fits(mid):
                hi = mid
            else:
                lo = mid
        return hi


def cmd_run(args) -> None:
    out = Path(args.out)
    (out / "cases").mkdir(parents=True, exist_ok=True)
    for case in cases(args.only)[:args.limit or None]:
        path = out / "cases" / (case["name"].replace("/", "__") + ".json")
        if path.exists() and not args.redo:
            continue
        t0 = time.time()
        try:
            rec = measure(case, args.time_limit, out / "kernels")
        except Exception as exc:  # a bench keeps going: the record says what broke
            rec = dict(case) | {"stopped": "crash", "error": "".join(traceback.format_exception_only(exc)).strip()[-400:]}
        rec["seconds"] = round(time.time() - t0, 1)
        path.write_text(json.dumps(rec, indent=1, sort_keys=True))
        print(f"{case['name']}: {summary(rec)} ({rec['seconds']} s)", flush=True)
    gather(out)


def cmd_need(args) -> None:
    """Each recorded role's least budget (`least_budget`) on its kernel kept by `run`."""
    out = Path(args.out)
    for path in sorted((out / "cases").glob("*.json")):
        rec = json.loads(path.read_text())
        if "stopped" in rec or (args.only and not any(x in rec["name"] for x in args.only.split(","))):
            continue
        cu = out / "kernels" / (path.stem + ".cu")
        if not cu.exists():
            continue
        text, changed = cu.read_text(), False
        for row in rec["role_rows"]:
            if "need" in row and not args.redo:
                continue
            if row["model"] is None or row["warps"] < 4:  # a one-warp role's warpgroup: no setmaxnreg.inc
                continue
            row["need"] = least_budget(text, ARCH[rec["gpu"]], row.get("ident") or _ident(text, row["role"]), row["budget"])
            changed = True
        if changed:
            path.write_text(json.dumps(rec, indent=1, sort_keys=True))
            print(rec["name"], [(r["role"], r["model"], r.get("need")) for r in rec["role_rows"]], flush=True)
    gather(out)


ARCH = {"h100": "sm_90a", "h200": "sm_90a", "b200": "sm_100a"}


def _ident(text: str, role: str) -> str:
    """The C++ ident of a role's function (`// ---- role NAME: ...` heads it)."""
    m = re.search(r"// ---- role %s: [^\n]*\n(?:template[^\n]*\n)?__device__ __forceinline__ void role_(\w+)\(" % re.escape(role), text)
    return m.group(1) if m else role


def gather(out: Path) -> None:
    recs = [json.loads(p.read_text()) for p in sorted((out / "cases").glob("*.json"))]
    order = {c["name"]: i for i, c in enumerate(sorted(cases(), key=lambda c: c["name"]))}
    recs.sort(key=lambda r: order.get(r["name"], 1 << 30))
    (out / "fidelity.json").write_text(json.dumps(recs, indent=1, sort_keys=True))
    (out / "fidelity.md").write_text(table(recs))


def summary(rec: dict) -> str:
    if "stopped" in rec:
        return f"stopped at {rec['stopped']}: {rec.get('error', '')[:120]}"
    roles = ", ".join(f"{r['role']} {r['model']}/{r['alone']}" for r in rec["role_rows"])
    return f"I = {rec['ii']}, kernel spill {rec['kernel']['spill_bytes']}: {roles} (model/ptxas)"


def _err(r: dict) -> int | None:
    return None if r["model"] is None or r["alone"] is None else r["alone"] - r["model"]


def _need(rec: dict, r: dict) -> int | None:
    """The role's least spill-free budget where it says something: a budget at or below the
    registers the CTA is launched with only asks setmaxnreg to go down, which ptxas does not
    need, so such an answer says only 'at most the launch count' (None here)."""
    need = r.get("need")
    return need if need is not None and need > rec["kernel"]["registers"] else None


def _need_cell(rec: dict, r: dict) -> str:
    if r.get("need") is None:
        return "-" if r["model"] is None or r["warps"] < 4 or "need" not in r else "> 256"
    need = _need(rec, r)
    return f"<= {rec['kernel']['registers']}" if need is None else str(need)


def table(recs: list[dict], before: dict | None = None) -> str:
    """The markdown table: one line per role of every case that compiled, then the cases that stopped."""
    head = ("| kernel | I | role | budget | model | ptxas alone | alone - model | least spill-free budget | "
            "kernel: spill B |" + (" before: I, budget, model, alone, least, kernel spill |" if before else "") + "\n"
            "|---|---|---|---|---|---|---|---|---|" + ("---|" if before else "") + "\n")
    lines = []
    for rec in recs:
        if "stopped" in rec:
            continue
        b = (before or {}).get(rec["name"])
        brows = {r["role"]: r for r in (b or {}).get("role_rows", [])}
        for i, r in enumerate(rec["role_rows"]):
            k = rec["kernel"]
            err = _err(r)
            cells = [rec["name"] if i == 0 else "", str(rec["ii"]) if i == 0 else "", r["role"], str(r["budget"]),
                     str(r["model"]), str(r["alone"]), "" if err is None else f"{err:+d}", _need_cell(rec, r),
                     f"{k['spill_bytes']}{' (serialized)' if k['serialized'] else ''}" if i == 0 else ""]
            if before:
                br = brows.get(r["role"])
                cells.append("" if b is None else f"stopped ({b['stopped']})" if "stopped" in b else
                             (f"{b['ii']}, {br['budget']}, {br['model']}, {br['alone']}, {_need_cell(b, br)}, "
                              f"{b['kernel']['spill_bytes']}" if br else f"{b['ii']}, no such role"))
            lines.append("| " + " | ".join(cells) + " |")
    stopped = [f"- {r['name']}: stopped at {r['stopped']} ({r.get('error', '')[:160]})" for r in recs if "stopped" in r]
    return head + "\n".join(lines) + "\n\n" + stats(recs) + ("\n\nNot measured:\n\n" + "\n".join(stopped) if stopped else "") + "\n"


def stats(recs: list[dict], tol: int = 16) -> str:
    """Counts: roles measured, within the tolerance of ptxas alone, under the least spill-free
    budget, spilling kernels."""
    kernels = [rec for rec in recs if "stopped" not in rec]
    rows = [r for rec in kernels for r in rec["role_rows"] if _err(r) is not None and r["warps"] >= 4]
    errs = [_err(r) for r in rows]
    within = sum(1 for e in errs if abs(e) <= tol)
    under = sum(1 for e in errs if e > tol)
    needs = [(rec["name"], r["role"], _need(rec, r) - r["model"]) for rec in kernels for r in rec["role_rows"]
             if r["model"] is not None and _need(rec, r) is not None]
    short = [f"{n}:{role} ({d:+d})" for n, role, d in needs if d > 0]
    spill = [rec["name"] for rec in kernels if rec["kernel"]["spill_bytes"]]
    ser = [rec["name"] for rec in kernels if rec["kernel"]["serialized"]]
    return (f"{len(kernels)} kernels, {len(rows)} warpgroup roles with a count: {within} within +-{tol} registers of "
            f"ptxas alone, {under} more than {tol} under it, {len(errs) - within - under} more than {tol} over it "
            f"(median alone - model {sorted(errs)[len(errs) // 2] if errs else 0:+d}). "
            f"Roles whose least spill-free budget (above the launch count) exceeds the model's count: "
            f"{len(short)} of {len(needs)} ({', '.join(short) or 'none'}). "
            f"Kernels that spill: {len(spill)} ({', '.join(spill) or 'none'}); with a wgmma serialized: {len(ser)} "
            f"({', '.join(ser) or 'none'}).")


def cmd_table(args) -> None:
    recs = json.loads(Path(args.json).read_text())
    before = {r["name"]: r for r in json.loads(Path(args.before).read_text())} if args.before else None
    sys.stdout.write(table(recs, before))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--only", help="comma-separated substrings of case names")
    r.add_argument("--time-limit", type=float, default=120.0, help="seconds per solve (default %(default)s)")
    r.add_argument("--redo", action="store_true", help="measure cases already recorded again")
    r.add_argument("--limit", type=int, default=0, help="measure at most this many cases (0: all)")
    r.set_defaults(fn=cmd_run)
    n = sub.add_parser("need", help="each role's least setmaxnreg budget without spills (a ptxas run per try)")
    n.add_argument("--out", required=True)
    n.add_argument("--only")
    n.add_argument("--redo", action="store_true")
    n.set_defaults(fn=cmd_need)
    t = sub.add_parser("table")
    t.add_argument("json")
    t.add_argument("--before")
    t.set_defaults(fn=cmd_table)
    args = p.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
