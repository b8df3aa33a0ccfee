#!/usr/bin/env python3
"""Model fidelity: the schedule's predicted cycles per steady-state iteration and register budgets
against what the emitted kernel does on the GPU and what ptxas allocates.

    python3 bench/fidelity.py prepare --out DIR [--spec h200 ...] [--from BUILD] [--no-ptxas]  # here: twill
    python3 bench/fidelity.py measure --dir DIR --out RESULTS.json                          # the GPU machine: torch, nvcc
    python3 bench/fidelity.py report --dir DIR --results RESULTS.json                       # markdown tables

prepare gathers the kernels into DIR (plan.json and each kernel's schedule, .cu, entry .cu and
binding): the examples of CASES solved and emitted on each --spec (h200 where neither --spec nor
--from is given), and with --from every kernel a `bench/triton_bench.py build` folder holds (the
Triton corpus kernels, run at the corpus's default sizes). For each it records the prediction:
I x scale.machine_cycles_per_unit machine cycles per iteration plus the stall its streaming loads
predict (the largest shortfall of a load's slack at its typical latency, where the spec gives the
load an interval), each role's warps, register budget and the registers the model counts for it.
Unless --no-ptxas it also asks ptxas (twill.ptxas) for the kernel's registers and spills, and per
role for its code's own need (the role alone in the dispatch, no setmaxnreg, no launch bounds: what
`Used N registers` then says) and its spills at its budget (the role alone under its setmaxnreg);
measure does this for every kernel whose plan lacks it, in parallel with the timing.

measure patches a copy of each kernel (bench/fidelity_stamps.py) so that the first thread of every
role writes clock64() at the top of each pass of each steady-state loop (first tile of the first
CTAS CTAs), builds it through its binding, runs it once, and reports per role the median cycles per
iteration over CTAs and passes (a pass covers as many iterations as the loop's step); it also times
the unpatched kernels in ROUNDS alternating rounds of every kernel once (triton's do_bench median
each) and reports each kernel's median round.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)
import fidelity_stamps as fs  # noqa: E402
from fidelity_stamps import roles, stamped  # noqa: E402,F401  (the tests' entry points)

CASES = (  # (example, adapter, problem size)
    ("examples/gemm_hopper.tir", "gemm", 8192),
    ("examples/attention_fwd_hopper.tir", "attention", 8192),
)
ROUNDS = 5  # rounds of alternating timing
FILES = (".json", ".cu", "_entry.cu", ".py")  # a kernel's files in DIR


# ---- prepare (here) -----------------------------------------------------------------------------------

def stall_cycles(s):
    """The steady state's predicted stall per iteration from its streaming loads: a load whose slack
    at its typical latency is negative (twill/slack.py: it lands after its first reader's start) holds
    that reader, and with it the iteration, back by that much; the largest such shortfall."""
    return max([0.0] + [-x["slack_cycles"] for x in s.get("latency_slack") or [] if x.get("slack_cycles") is not None])


def model_registers(sched, spec):
    """Each role's registers per thread at its fullest, as the model counts them (the reserve included)."""
    from twill.machine import load_machine
    from twill.ptxas_loop import model_registers as count
    from twill.schedule import Schedule
    return count(Schedule.from_json(open(sched).read()), load_machine(spec))


def _report(r):
    """One twill.ptxas report as plain data: registers (the largest entry's), spill bytes, serialization codes."""
    codes = sorted({a.code for a in r.advisories if a.serializes})
    return {"ok": r.ok, "registers": max((e.registers for e in r.entries if e.registers is not None), default=None),
            "spill_bytes": r.spill_bytes, "serialized": codes, "log_tail": r.log.strip().splitlines()[-3:] if not r.ok else []}


def ptxas_reports(text, arch, names, jobs=None):
    """ptxas on the whole kernel and, per role, on its code alone: {"ptxas": whole, "ptxas_alone":
    {role: at its budget (its setmaxnreg)}, "ptxas_uncapped": {role: no setmaxnreg, no launch
    bounds}}; the compiles run on `jobs` threads (twill.ptxas: uncached, nvcc as found)."""
    from concurrent.futures import ThreadPoolExecutor
    from twill import ptxas as px
    work = [("ptxas", None, text)] + [(kind, n, source(text, n)) for n in names
                                      for kind, source in (("ptxas_alone", px.probe_source),
                                                           ("ptxas_uncapped", px.count_source))]
    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 2) as pool:
        got = list(pool.map(lambda w: _report(px.compile_kernel(w[2], arch, cache=False)), work))
    out = {"ptxas_alone": {}, "ptxas_uncapped": {}}
    for (kind, n, _), r in zip(work, got):
        if n is None:
            out[kind] = r
        else:
            out[kind][n] = r
    return out


def predicted(s, spec, sched_path):
    """The plan's prediction for one schedule (its JSON `s`, solved on `spec`)."""
    cpu = s["scale"]["machine_cycles_per_unit"]
    stall = stall_cycles(s)
    need = model_registers(sched_path, spec)
    return {"spec": spec, "arch": s.get("arch", "sm_90a"), "ii": s["ii"], "length": s["length"],
            "optimal": s["optimal"], "cycles_per_unit": cpu, "ii_cycles": s["ii"] * cpu, "load_stall": stall,
            "predicted_cycles": s["ii"] * cpu + stall, "latency_slack": s.get("latency_slack", []),
            "roles": [{"name": w["name"], "warps": w["warps"], "registers": w["registers"],
                       "model_registers": need.get(w["name"]), "ops": w["ops"]} for w in s["warps"]]}


def prepare_example(out, example, adapter, size, spec):
    tag = os.path.basename(spec).removesuffix(".yaml")
    name = "%s.%s" % (os.path.basename(example).removesuffix(".tir"), tag)
    sched, cu = os.path.join(out, name + ".json"), os.path.join(out, name + ".cu")
    subprocess.run(["twill", "solve", example, "--gpu", spec, "-o", sched, "-q"], check=True)
    subprocess.run(["twill", "emit-cuda", sched, "--gpu", spec, "-o", cu, "--binding", "torch"], check=True,
                   capture_output=True)
    return {"name": name, "kernel": os.path.basename(example).removesuffix(".tir"), "example": example,
            "adapter": adapter, "size": size, **predicted(json.load(open(sched)), spec, sched)}


def prepare_build(out, build):
    """Every kernel a triton_bench build folder holds (its build.json's records that did not stop),
    copied into `out` with its prediction; the spec is the one its schedule was solved on."""
    records = json.load(open(os.path.join(build, "build.json")))
    plan = []
    for rec in sorted(records, key=lambda r: r["dump"]):
        stem = rec["dump"].split(".")[0]
        if "stopped" in rec:
            print("skipped %s: its build stopped at %s" % (stem, rec["stopped"]))
            continue
        for suffix in FILES:
            shutil.copy(os.path.join(build, stem + suffix), os.path.join(out, stem + suffix))
        s = json.load(open(os.path.join(out, stem + ".json")))
        plan.append({"name": stem, "kernel": stem.removesuffix("_sm90").removesuffix("_sm100"), "adapter": "triton",
                     "size": "default", "build": os.path.basename(os.path.normpath(build)), "depth": rec.get("depth"),
                     "comparable": rec.get("comparable", True),
                     **predicted(s, s["machine"], os.path.join(out, stem + ".json"))})
    return plan


def prepare(out, specs, builds=(), with_ptxas=True):
    os.makedirs(out, exist_ok=True)
    plan = [prepare_example(out, *case, spec) for case in CASES for spec in specs]
    for build in builds:
        plan += prepare_build(out, build)
    for case in plan:
        if with_ptxas:
            case.update(ptxas_reports(open(os.path.join(out, case["name"] + ".cu")).read(), case["arch"],
                                      [w["name"] for w in case["roles"]]))
        print("prepared %s: I = %d, %.0f cycles per iteration predicted (I %.0f + load stall %.0f)" % (
            case["name"], case["ii"], case["predicted_cycles"], case["ii_cycles"], case["load_stall"]))
    json.dump(plan, open(os.path.join(out, "plan.json"), "w"), indent=1, sort_keys=True)
    return plan


# ---- measure (the GPU machine) ------------------------------------------------------------------------

def stage(folder, plan):
    """The stamped copy of every kernel (and its binding) under FOLDER/stamped: (its folder, the
    iterations per pass of each kernel's roles' loops)."""
    sdir = os.path.join(folder, "stamped")
    os.makedirs(sdir, exist_ok=True)
    steps_of = {}
    for case in plan:
        name = case["name"]
        text = open(os.path.join(folder, name + ".cu")).read()
        out, steps_of[name] = stamped(text, {w["name"]: w["warps"] for w in case["roles"]})
        open(os.path.join(sdir, name + ".cu"), "w").write(out)
        entry = open(os.path.join(folder, name + "_entry.cu")).read()
        open(os.path.join(sdir, name + "_entry.cu"), "w").write(fs.entry_with_reader(entry, out))
        shutil.copy(os.path.join(folder, name + ".py"), sdir)
    return sdir, steps_of


def build_all(folder, sdir, plan):
    """Every kernel's binding, plain and stamped, built at once (nvcc in parallel, into the bindings'
    cache, $TWILL_CACHE_DIR): {(name, folder): (module, spills) or the exception}."""
    from concurrent.futures import ThreadPoolExecutor
    import gpu_bench as g

    def build(job):
        try:
            return g.build_binding(*job)
        except Exception as exc:
            return exc
    jobs = [(c["name"], d) for c in plan for d in (folder, sdir)]
    with ThreadPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 4)) as pool:
        return dict(zip(jobs, pool.map(build, jobs)))


def calls_for(case, plain_mod, mod, corpus):
    """(the plain kernel's call, the stamped kernel's call, the flops of one call, a check of the
    stamped kernel's outputs or None) for one case: the examples through gpu_bench's adapters, the
    corpus kernels with the arguments the corpus launch passes its Triton kernel (triton_bench)."""
    import torch
    import gpu_bench as g
    size = case["size"]
    if case["adapter"] == "gemm":
        a = torch.randn(size, size, device="cuda", dtype=torch.float16)
        b = torch.randn(size, size, device="cuda", dtype=torch.float16)
        fp, fsd = g.TwillGemm(plain_mod), g.TwillGemm(mod)
        c = torch.empty(size, size, device="cuda", dtype=fp.out_dtype)
        return (lambda: fp(a, b, c)), (lambda: fsd(a, b, c)), 2.0 * size ** 3, None
    if case["adapter"] == "attention":
        BH, D = 32, 128
        q, k, v = (torch.randn(BH, size, D, device="cuda", dtype=torch.float16) for _ in range(3))
        fp, fsd = g.TwillAttention(plain_mod), g.TwillAttention(mod)
        o = fp.outputs(BH, size, D, "cuda")
        return (lambda: fp(q, k, v, o, 0.088)), (lambda: fsd(q, k, v, o, 0.088)), 4.0 * BH * size * size * D, None
    import triton_bench as tb
    name = case["kernel"]
    fns = corpus.KERNELS[name]
    tensors, params = fns["make_inputs"](None, "cuda")
    args, outs = tb.capture(corpus, name, tensors, params)
    plain, stamped_call = tb.twill_call(plain_mod, name, args), tb.twill_call(mod, name, args)

    def check():  # the stamped kernel's outputs against the fp32 reference (the stamps change no result)
        refs, error = tb.references(fns, tensors, params)
        if refs is None:
            return error
        stamped_call()
        torch.cuda.synchronize()
        return max(tb.rel_error(o, r) for o, r in zip(outs, refs))
    try:
        flops = tb.flops(name, tensors)
    except KeyError:  # a kernel the bench counts no flops for
        flops = None
    return plain, stamped_call, flops, check if case.get("comparable", True) else None


def measure(folder, out_path, with_ptxas=True):
    import ctypes
    import tempfile
    from concurrent.futures import ThreadPoolExecutor
    import torch
    import gpu_bench as g
    plan = json.load(open(os.path.join(folder, "plan.json")))
    sdir, steps_of = stage(folder, plan)
    built = build_all(folder, sdir, plan)
    corpus = None
    if any(c["adapter"] == "triton" for c in plan):
        import triton_bench as tb
        corpus = tb.load_variant(None, False, Path(tempfile.mkdtemp(prefix="fidelity-")))
    # ptxas for the kernels whose plan lacks it: on the CPUs while the GPU runs
    pool = ThreadPoolExecutor(max_workers=1)
    pending = {c["name"]: pool.submit(ptxas_reports, open(os.path.join(folder, c["name"] + ".cu")).read(), c["arch"],
                                      [w["name"] for w in c["roles"]], max(1, (os.cpu_count() or 4) - 2))
               for c in plan if with_ptxas and "ptxas" not in c}
    results, calls = [], {}

    def dump(cases):  # after each kernel too: a run cut short keeps what it measured
        json.dump({"card": torch.cuda.get_device_name(), "torch": torch.__version__, "cases": cases},
                  open(out_path, "w"), indent=1, sort_keys=True)
    for case in plan:
        name = case["name"]
        res = {"name": name}
        try:
            for job in ((name, folder), (name, sdir)):
                if isinstance(built[job], Exception):
                    raise built[job]
            plain_mod, plain_spills = built[(name, folder)]
            mod, _ = built[(name, sdir)]
            lib = mod.library(mod.SPEC, mod.HERE)
            call_p, call_s, flops, check = calls_for(case, plain_mod, mod, corpus)
            calls[name] = (call_p, flops)
            ms_s = g.bench_ms(call_s)
            nbytes = fs.WORDS * 8
            lib.fid_clear(ctypes.c_size_t(nbytes))
            call_s()
            torch.cuda.synchronize()
            buf = (ctypes.c_ulonglong * fs.WORDS)()
            lib.fid_get(buf, ctypes.c_size_t(nbytes))
            text = open(os.path.join(sdir, name + ".cu")).read()
            res.update({"ms_stamped": ms_s, "steps": steps_of[name], "spills": plain_spills,
                        "per_role": fs.per_role(list(buf), [n for n, _, _ in roles(text)], steps_of[name]),
                        "sm_clock_mhz": g.sm_clock_mhz()})
            if check:
                res["stamped_rel_error"] = check()
        except Exception as exc:  # one case's failure must not lose the others
            import traceback
            res["error"] = "%s: %s" % (type(exc).__name__, exc)
            res["traceback"] = traceback.format_exc()[-2000:]
        print(json.dumps(res, sort_keys=True), flush=True)
        results.append(res)
        dump(results)
        torch.cuda.empty_cache()
    alternate(calls, results, g)
    for res in results:
        if res["name"] in pending:
            try:
                res.update(pending[res["name"]].result())
            except Exception as exc:
                res["ptxas_error"] = "%s: %s" % (type(exc).__name__, exc)
    pool.shutdown()
    dump(results)


def alternate(calls, results, g, rounds=ROUNDS):
    """Time the unstamped kernels in turn, ROUNDS rounds of every kernel once (the card's clock drifts
    under sustained load, so kernels compared are timed side by side): each kernel's median."""
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, (call, _) in calls.items():
            times[name].append(g.bench_ms(call))
            times[name + ".mhz"] = times.get(name + ".mhz", []) + [g.sm_clock_mhz()]
    for res in results:
        if res["name"] in calls:
            ms = statistics.median(times[res["name"]])
            flops = calls[res["name"]][1]
            res.update({"ms": ms, "ms_rounds": times[res["name"]], "tflops": flops / ms / 1e9 if flops else None,
                        "sm_clock_mhz_rounds": times[res["name"] + ".mhz"]})


# ---- report --------------------------------------------------------------------------------------------

GOAL = 0.15  # the goal: predicted within 15% of measured


def load_results(path):
    """{name: result} from a measure run (a dict with "cases"; a session-22 run is a bare list)."""
    if not path:
        return {}
    got = json.load(open(path))
    return {r["name"]: r for r in (got["cases"] if isinstance(got, dict) else got)}


def _label(c):
    return c.get("kernel") or os.path.basename(c["example"]).removesuffix(".tir")


def cycles_rows(plan, results):
    """The cycles table: per kernel its prediction, each role's measured median, the error against
    the slowest role (every role of a pipeline runs at one period), the times."""
    rows = ["| kernel | spec | I (units) x cycles/unit | predicted cycles/iter: I + load stall "
            "| measured cycles/iter (median per role) | error | ms (median of %d alternating rounds) | ms stamped |" % ROUNDS,
            "|---|---|---|---|---|---|---|---|"]
    for c in plan:
        r = results.get(c["name"], {})
        measured = r.get("per_role", {})
        worst = max((v["median"] for v in measured.values()), default=None)
        cells = ", ".join("%s %.0f" % (k, v["median"]) for k, v in sorted(measured.items())) or r.get("error", "not run")[:120]
        err = (c["predicted_cycles"] - worst) / worst if worst else None
        err_cell = "" if err is None else ("%+.0f%%" % (100 * err) if abs(err) <= GOAL else "**%+.0f%%**" % (100 * err))
        rows.append("| %s | %s | %d x %.2f | %.0f = %.0f + %.0f | %s | %s | %s | %s |" % (
            _label(c), os.path.basename(c["spec"]).removesuffix(".yaml"), c["ii"], c["cycles_per_unit"],
            c["predicted_cycles"], c["ii_cycles"], c["load_stall"], cells, err_cell,
            "%.3f" % r["ms"] if "ms" in r else "", "%.3f" % r["ms_stamped"] if "ms_stamped" in r else ""))
    return rows


def register_rows(plan, results):
    """The registers table: per role its budget, the model's count, ptxas's count of its code alone
    (no cap) and the difference, its spills at its budget, and the whole kernel's report."""
    rows = ["| kernel | spec | role | warps | budget | model | ptxas, the role alone (no cap) | model - ptxas "
            "| at its budget: spill bytes, serialized | whole kernel: registers, spill bytes, serialized |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for c in plan:
        src = c if "ptxas" in c else results.get(c["name"], {})
        k = src.get("ptxas")
        whole = "%s, %s, %s" % (k["registers"], k["spill_bytes"], " ".join(k["serialized"]) or "none") if k else "not run"
        for w in c["roles"]:
            a = src.get("ptxas_alone", {}).get(w["name"], {})
            u = src.get("ptxas_uncapped", {}).get(w["name"], {})
            need, got = w.get("model_registers"), u.get("registers")
            diff = "%+d" % (need - got) if need is not None and got is not None else ""
            at = "%s, %s" % (a.get("spill_bytes"), " ".join(a.get("serialized") or []) or "none") if a else ""
            rows.append("| %s | %s | %s | %d | %d | %s | %s | %s | %s | %s |" % (
                _label(c), os.path.basename(c["spec"]).removesuffix(".yaml"), w["name"], w.get("warps", 4), w["registers"], need, got if got is not None else "",
                diff, at, whole))
    return rows


def report(folder, results_path):
    plan = json.load(open(os.path.join(folder, "plan.json")))
    results = load_results(results_path)
    return "\n".join(cycles_rows(plan, results) + [""] + register_rows(plan, results))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--out", required=True)
    p.add_argument("--spec", action="append", help="solve and emit the examples on this machine (repeatable)")
    p.add_argument("--from", dest="builds", action="append", default=[],
                   help="a bench/triton_bench.py build folder: its kernels as built (repeatable)")
    p.add_argument("--no-ptxas", action="store_true", help="leave ptxas's reports to measure")
    m = sub.add_parser("measure")
    m.add_argument("--dir", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--no-ptxas", action="store_true", help="no ptxas reports for kernels whose plan lacks them")
    r = sub.add_parser("report")
    r.add_argument("--dir", required=True)
    r.add_argument("--results")
    a = ap.parse_args()
    if a.cmd == "prepare":
        prepare(a.out, a.spec or ([] if a.builds else ["h200"]), a.builds, not a.no_ptxas)
    elif a.cmd == "measure":
        measure(a.dir, a.out, not a.no_ptxas)
    else:
        print(report(a.dir, a.results))


if __name__ == "__main__":
    main()
