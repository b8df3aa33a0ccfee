#!/usr/bin/env python3
"""Reproduce the Twill paper's results table: the examples and the paper's ablations.

    python bench/paper_table.py [--timeout 300] [--only CASE ...] [--out FILE] [--json FILE]

Each case runs `twill.pipeline.solve(graph, machine, SolveOptions(timings=True, time_limit=T, ...))`
in a fresh child Python process (this script with the hidden `--child` option, as
bench/solve_bench.py does). The solver's own time limit is T; the parent also kills the child's
process group (CBC included) at T + 60 s. A case that hits either is reported as a timeout.

Per case: the SWP bound (I, L of the optimal modulo schedule, `schedule.bounds` swp_ii and
swp_length), the final (I, L), whether the SWP bound was realised by the joint schedule, the warp
roles (name:warps:registers and their ops), whether optimality was proven, and the wall time of
each stage. Writes docs/reproducing-the-paper.md (the generated part; everything after the
`<!-- notes -->` line is hand-written and kept verbatim) and bench/paper_table.json.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from childrun import run_child  # bench/ is on sys.path when this script runs

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples"
DEFAULT_DOC = ROOT / "docs" / "reproducing-the-paper.md"
DEFAULT_JSON = ROOT / "bench" / "paper_table.json"
MARKER = "<!-- notes -->"

# name -> (example, gpu, SolveOptions overrides, what the paper reports)
CASES = {
    "hopper_fwd": ("attention_fwd_hopper", "h100", {},
                   "FA3: a producer (TMA) warp(group) + two ping-pong consumer warpgroups; search 28 s"),
    "blackwell_fwd": ("attention_fwd_blackwell", "b200", {},
                      "FA4: load warp, MMA warp, two softmax warpgroups, correction warpgroup; search 18 s"),
    "blackwell_fwd_fa4_roles": ("attention_fwd_blackwell", "b200",
                                {"groups": [["k", "v"], ["s0", "acc0_n", "s1", "acc1_n"],
                                            ["m0_new", "p0", "alpha0", "l0_new"],
                                            ["m1_new", "p1", "alpha1", "l1_new"], ["acc0_r", "acc1_r"]]},
                                "FA4's roles pinned with --group (not a paper case: is FA4's split optimal here?)"),
    "hopper_bwd": ("attention_bwd_hopper", "h100", {}, "search 84 s"),
    "blackwell_bwd": ("attention_bwd_blackwell", "b200", {},
                      "modulo bound I=15, L=32; joint I=20, L=33 (paper units); search 242 s"),
    "blackwell_bwd_regs": ("attention_bwd_blackwell", "b200", {"registers": 192},
                           "reduced registers: three warpgroups; search 48 s"),
    "blackwell_fwd_warps8": ("attention_fwd_blackwell", "b200", {"warps": 8},
                             "ablation (fewer warps): the minimal I is unsatisfiable"),
    "blackwell_fwd_no_cross_role": ("attention_fwd_blackwell", "b200", {"cross_role": False},
                                    "ablation (no cross-warp communication): the minimal I is unsatisfiable"),
    "blackwell_fwd_no_subtiling": ("attention_fwd_simple", "b200", {},
                                   "ablation (no sub-tiling): the minimal I is unsatisfiable"),
    "hopper_fwd_no_subtiling": ("attention_fwd_simple", "h100", {},
                                "(not a paper case: its no-sub-tiling ablation on Hopper)"),
}


def child(example: str, gpu: str, overrides: str, limit: float) -> int:
    out: dict = {}
    try:
        from twill.fileio import load_graph
        from twill.machine import load_machine
        from twill.pipeline import SolveOptions, TimeLimitReached, solve

        graph = load_graph(str(EX / f"{example}.tir"))
        machine = load_machine(gpu)
        opts = SolveOptions(timings=True, time_limit=limit, **json.loads(overrides))
        t0 = time.perf_counter()
        try:
            s = solve(graph, machine, opts)
            status = "ok"
        except TimeLimitReached as exc:
            s, status = exc.schedule, "timeout"
        out = {"status": status, "wall_seconds": round(time.perf_counter() - t0, 3)}
        if s is not None:
            b = dict(s.bounds)
            out.update({
                "ii": s.ii, "length": s.length, "optimal": bool(s.optimal), "stage": s.stage,
                "swp_ii": b.get("swp_ii"), "swp_length": b.get("swp_length"),
                "res_mii": b.get("res_mii"), "rec_mii": b.get("rec_mii"),
                "unit_cycles": s.scale.unit_cycles if s.scale else None,
                "roles": [[r.name, r.warps, r.registers, list(r.ops)] for r in s.roles],
                "stats": dict(s.stats),
            })
    except Exception as exc:  # reported in the table, never fatal
        out = {"status": "error", "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    print(json.dumps(out), flush=True)
    return 0


def run_case(name: str, timeout: float, extra: dict | None = None) -> dict:
    example, gpu, overrides, _ = CASES[name]
    ov = dict(overrides, **(extra or {}))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", example, gpu, json.dumps(ov), str(timeout)]
    result, elapsed = run_child(cmd, timeout + 60, ROOT)  # the solver stops itself at `timeout`
    result["process_seconds"] = round(elapsed, 3)
    return result


def abbrev_roles(roles: list) -> str:
    if not roles:
        return "-"
    parts = []
    for name, warps, regs, ops in roles:
        shown = ",".join(ops[:8]) + (f",+{len(ops) - 8}" if len(ops) > 8 else "")
        parts.append(f"{name}:{warps}:{regs} ({shown})")
    return "<br>".join(parts)


def _f(x) -> str:
    return "-" if x is None else f"{x:.1f}"


def table(results: dict, timeout: float) -> str:
    head = ("| case | example, GPU, options | SWP bound (I, L) | final (I, L) | SWP bound realised | "
            "roles name:warps:regs (ops) | optimal | normalize s | ILP s | SMT s | total s |")
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, r in results.items():
        example, gpu, ov, _ = CASES[name]
        ov = dict(ov, **r.get("extra", {}))
        opts = ", ".join(f"{k}={v}" for k, v in ov.items())
        what = f"{example}, {gpu}" + (f", {opts}" if opts else "")
        st = r.get("stats", {})
        bound = f"({r['swp_ii']}, {r['swp_length']})" if r.get("swp_ii") is not None else "-"
        final = f"({r['ii']}, {r['length']})" if r.get("ii") is not None else "-"
        if r.get("ii") is not None and r.get("swp_ii") is not None:
            real = "yes" if (r["ii"], r["length"]) == (r["swp_ii"], r["swp_length"]) else (
                "I yes, L no" if r["ii"] == r["swp_ii"] else "no")
        else:
            real = "-"
        if r["status"] == "ok":
            opt = "yes" if r.get("optimal") else "no"
        elif r["status"] == "timeout":
            opt = f"timeout (> {timeout:g} s)" + (", best found shown" if r.get("ii") is not None else "")
        else:
            opt = "error: " + r.get("error", "").replace("|", "/")
        rows.append(f"| {name} | {what} | {bound} | {final} | {real} | {abbrev_roles(r.get('roles', []))} | {opt} "
                    f"| {_f(st.get('normalize_seconds'))} | {_f(st.get('ilp_seconds'))} | {_f(st.get('smt_seconds'))} "
                    f"| {_f(st.get('solve_seconds', r.get('process_seconds') if r['status'] != 'ok' else None))} |")
    return "\n".join(rows) + "\n"


def paper_table(results: dict) -> str:
    rows = ["| case | twill here: (I, L), roles | the paper reports |", "|---|---|---|"]
    for name, r in results.items():
        got = f"({r['ii']}, {r['length']})" if r.get("ii") is not None else r["status"]
        roles = ", ".join(f"{n}:{w}" for n, w, _, _ in r.get("roles", []))
        rows.append(f"| {name} | {got}{'; ' + roles if roles else ''} | {CASES[name][3]} |")
    return "\n".join(rows) + "\n"


def render(data: dict, notes: str) -> str:
    m = data["machine"]
    return "\n".join([
        "# Reproducing the paper's results",
        "",
        "Generated by `python bench/paper_table.py` (the part above the notes is rewritten on every run;",
        "the notes after it are hand-written and kept). Raw results: `bench/paper_table.json`.",
        "",
        f"Measured {data['date']} on {m['nproc']} shared CPU cores ({m['cpu']}), load average "
        f"{', '.join(map(str, m['loadavg_before']))} at the start, twill at commit {m['commit']}.",
        f"Each case is one `twill.pipeline.solve(..., SolveOptions(timings=True, time_limit={data['timeout']:g}))`",
        "in a fresh Python process; times are wall seconds per stage (stage 0 SCIP normalization, stage 1",
        "CBC modulo ILP, stage 2 Yices joint SMT). The cores are shared, so times vary between runs.",
        "(I, L) are in twill's normalized units (see the notes: not the paper's units).",
        "",
        table(data["results"], data["timeout"]),
        "## Next to the paper",
        "",
        paper_table(data["results"]),
        "",
    ]) + MARKER + "\n" + notes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per case (default 300)")
    ap.add_argument("--only", action="append", metavar="CASE", choices=list(CASES))
    ap.add_argument("--out", type=Path, default=DEFAULT_DOC)
    ap.add_argument("--json", type=Path, default=DEFAULT_JSON)
    ap.add_argument("--registers", type=int, help="override the reduced-register case's budget")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child[0], args.child[1], args.child[2], float(args.child[3]))
    if args.registers:
        e, g, ov, p = CASES["blackwell_bwd_regs"]
        CASES["blackwell_bwd_regs"] = (e, g, dict(ov, registers=args.registers), p)
    names = args.only or list(CASES)
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    dirty = [ln[3:] for ln in subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "twill", "specs"],
                                             capture_output=True, text=True).stdout.splitlines() if ln.strip()]
    if dirty:
        commit += f" (+ uncommitted changes in {', '.join(dirty)})"
    machine = {"nproc": len(os.sched_getaffinity(0)), "cpu": cpu, "commit": commit,
               "loadavg_before": [round(x, 2) for x in os.getloadavg()]}
    results = {}
    for n in names:
        print(f"{n} ...", end="", file=sys.stderr, flush=True)
        results[n] = run_case(n, args.timeout)
        r = results[n]
        print(f" {r['status']} I={r.get('ii')} L={r.get('length')} {r.get('stats', {}).get('solve_seconds')}",
              file=sys.stderr)
    data = {"date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "timeout": args.timeout,
            "machine": machine, "results": results}
    print(table(results, args.timeout))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(data, indent=2) + "\n")
    notes = ""
    if args.out.is_file():
        text = args.out.read_text()
        if MARKER in text:
            notes = text.split(MARKER + "\n", 1)[1]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(data, notes or "\n## Where we agree, where we differ\n\n(to be written)\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
