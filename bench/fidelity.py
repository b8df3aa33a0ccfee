#!/usr/bin/env python3
"""Model fidelity: the schedule's predicted cycles per steady-state iteration and register budgets
against what the emitted kernel does on the GPU and what ptxas allocates.

    python3 bench/fidelity.py prepare --out DIR [--spec h200 --spec specs/h200-calibrated.yaml]   # here: twill, nvcc
    python3 bench/fidelity.py measure --dir DIR --out RESULTS.json                                 # the GPU machine: torch, nvcc
    python3 bench/fidelity.py report --dir DIR --results RESULTS.json                              # a markdown table

prepare solves each example on each spec, emits its kernel with the torch binding, and records the
prediction: I x scale.machine_cycles_per_unit machine cycles per iteration plus the stall its
streaming loads predict (the largest shortfall of a load's slack at its typical latency, where the
spec gives the load an interval), and each role's register budget and the registers the model
counts for it. With --build it also builds every binding, plain and stamped, into $TWILL_CACHE_DIR. It also asks ptxas (-Xptxas -v) for the kernel's registers and spills, and for each
role's own need: a copy of the kernel whose dispatch runs that role alone, without setmaxnreg and
under a 255-register cap, so that "Used N registers" is what the role's code takes.

measure patches a copy of each kernel so that the first thread of every role writes clock64() at the
top of each pass of its steady-state loop (first tile of the first CTAS CTAs), builds it through its
binding, runs it, and reports per role the median cycles per iteration (a pass covers as many
iterations as the loop's step); it also times the unpatched kernels, in ROUNDS alternating rounds of
every kernel once (triton's do_bench median each), and reports each kernel's median round.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from gpu_stamps import _block_end as block_end  # noqa: E402  (the brace matcher the stamps use)
CASES = (  # (example, adapter, problem size)
    ("examples/gemm_hopper.tir", "gemm", 8192),
    ("examples/attention_fwd_hopper.tir", "attention", 8192),
)
CTAS, SLOTS = 132, 64
ROUNDS = 5  # rounds of alternating timing
ROLE = re.compile(r"__device__ __forceinline__ void (role_\w+)\(")
STEADY = re.compile(r"\n(\s*)for \(; (j[^;]*); (\+\+j|j \+= (\d+))\) \{\n")
NVCC = ["-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-DTWILL_MAIN", "-Xptxas", "-v", "-c"]




def roles(text):
    """(name, start, end) of each role's device function, in the file's order."""
    return [(m.group(1), m.start(), block_end(text, m.start())) for m in ROLE.finditer(text)]


# ---- prepare (here) -----------------------------------------------------------------------------------

def ptxas(path, workdir, cap=None):
    """ptxas's report for one .cu (under -maxrregcount=cap): registers, spill stores/loads, serialization warnings."""
    extra = ["-maxrregcount=%d" % cap] if cap else []
    obj = path + ".o"
    out = subprocess.run(["nvcc", *NVCC, *extra, "-o", obj, path], capture_output=True, text=True)
    if os.path.exists(obj):
        os.remove(obj)
    log = out.stdout + out.stderr
    regs = [int(x) for x in re.findall(r"Used (\d+) registers", log)]
    spills = [int(a) + int(b) for a, b in re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)]
    return {"ok": out.returncode == 0, "registers": max(regs) if regs else None, "spill_bytes": max(spills) if spills else None,
            "serialized": sorted(set(re.findall(r"\((C75\d\d)\)", log))), "log_tail": log.strip().splitlines()[-3:]}


def role_alone(text, keep):
    """The kernel with every role but `keep` dropped from the dispatch, no setmaxnreg and no launch
    bounds: compiled under -maxrregcount=BUDGET, ptxas says whether the role fits its budget."""
    t = re.sub(r"\n\s*twill::setmaxnreg_(inc|dec)<\d+>\(\);[^\n]*", "\n", text)
    for name, _, _ in roles(text):
        if name != keep:
            t = re.sub(r"\b%s(<[^<>]*>)?\(sm, tm, args, (n, tile_at\([^()]*\)|twill_n, twill_tile)\)" % name,
                       "(void)0", t)  # (the one tile of the block; kernel<true>'s tile loop)
    return t.replace("__launch_bounds__(kThreads, 1) ", "")


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


def prepare(out, specs, build=False):
    os.makedirs(out, exist_ok=True)
    plan = []
    for example, adapter, size in CASES:
        for spec in specs:
            tag = os.path.basename(spec).removesuffix(".yaml")
            name = "%s.%s" % (os.path.basename(example).removesuffix(".tir"), tag)
            sched, cu = os.path.join(out, name + ".json"), os.path.join(out, name + ".cu")
            subprocess.run(["twill", "solve", example, "--gpu", spec, "-o", sched, "-q"], check=True)
            subprocess.run(["twill", "emit-cuda", sched, "--gpu", spec, "-o", cu, "--binding", "torch"], check=True,
                           capture_output=True)
            s = json.load(open(sched))
            text = open(cu).read()
            budgets = {w["name"]: w["registers"] for w in s["warps"]}
            need = model_registers(sched, spec)
            per_role, uncapped = {}, {}
            for role, _, _ in roles(text):
                short = role.removeprefix("role_")
                alone = os.path.join(out, "%s.alone_%s.cu" % (name, short))
                open(alone, "w").write(role_alone(text, role))
                per_role[short] = ptxas(alone, out, budgets.get(short))
                uncapped[short] = ptxas(alone, out, 255)
                os.remove(alone)
            cpu = s["scale"]["machine_cycles_per_unit"]
            stall = stall_cycles(s)
            plan.append({"name": name, "example": example, "spec": spec, "adapter": adapter, "size": size,
                         "ii": s["ii"], "length": s["length"], "optimal": s["optimal"],
                         "cycles_per_unit": cpu, "ii_cycles": s["ii"] * cpu, "load_stall": stall,
                         "predicted_cycles": s["ii"] * cpu + stall, "latency_slack": s.get("latency_slack", []),
                         "roles": [{"name": w["name"], "warps": w["warps"], "registers": w["registers"],
                                    "model_registers": need.get(w["name"]), "ops": w["ops"]} for w in s["warps"]],
                         "ptxas": ptxas(cu, out), "ptxas_alone": per_role, "ptxas_uncapped": uncapped})
            print("prepared %s: I = %d, %.0f cycles per iteration predicted (I %.0f + load stall %.0f)" % (
                name, s["ii"], plan[-1]["predicted_cycles"], s["ii"] * cpu, stall))
    if build:
        prebuild(out, plan)
    json.dump(plan, open(os.path.join(out, "plan.json"), "w"), indent=1, sort_keys=True)


# ---- measure (the GPU machine) ------------------------------------------------------------------------

STAMP = r'''__device__ unsigned long long twill_fid[%d];
#define FID_STAMP(role, k) do { if (threadIdx.x %% 128 == 0 && blockIdx.x < %d && tile.round == 0 && (k) < %d) { \
  unsigned long long c_; asm volatile("mov.u64 %%0, %%%%clock64;" : "=l"(c_) :: "memory"); \
  twill_fid[(blockIdx.x * 8 + (role)) * %d + (k)] = c_; } } while (0)
''' % (CTAS * 8 * SLOTS, CTAS, SLOTS, SLOTS)


def stamped(text):
    """The kernel with a clock64 stamp at the top of each pass of every role's steady loop; the
    iterations per pass of each role."""
    t = text.replace("// ---- shared memory ----", STAMP + "// ---- shared memory ----", 1)
    steps = []
    for index, (name, _, _) in enumerate(roles(t)):
        a = t.index("void %s(" % name)
        b = block_end(t, a)
        body = t[a:b]
        m = STEADY.search(body)
        if not m:
            steps.append(0)
            continue
        steps.append(int(m.group(4) or 1))
        ind = m.group(1)
        new = "\n%sint fid_pass = 0;\n%sfor (; %s; %s) {\n%s  FID_STAMP(%d, fid_pass); ++fid_pass;\n" % (
            ind, ind, m.group(2), m.group(3), ind, index)
        body = body[:m.start()] + new + body[m.end():]
        t = t[:a] + body + t[b:]
    return t, steps


def stage(folder, plan):
    """The stamped copy of every kernel (and its binding) under FOLDER/stamped: (its folder, the
    iterations per pass of each kernel's roles)."""
    import shutil
    sdir = os.path.join(folder, "stamped")
    os.makedirs(sdir, exist_ok=True)
    steps_of = {}
    for case in plan:
        name = case["name"]
        text, steps_of[name] = stamped(open(os.path.join(folder, name + ".cu")).read())
        open(os.path.join(sdir, name + ".cu"), "w").write(text)
        ns = next(n for n in re.findall(r"namespace (\w+) \{", text) if n != "twill")  # the kernel's own
        entry = open(os.path.join(folder, name + "_entry.cu")).read()
        open(os.path.join(sdir, name + "_entry.cu"), "w").write(entry + (
            '\nextern "C" int fid_get(void* dst, size_t n) { return (int)cudaMemcpyFromSymbol(dst, NS::twill_fid, n); }'
            '\nextern "C" int fid_clear(size_t n) { void* p; cudaGetSymbolAddress(&p, NS::twill_fid); return (int)cudaMemset(p, 0, n); }\n'
        ).replace("NS::", ns + "::"))
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
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        return dict(zip(jobs, pool.map(build, jobs)))


def prebuild(folder, plan):
    """Build the bindings here, so that the GPU machine finds them in the carried cache."""
    sdir, _ = stage(folder, plan)
    for job, got in build_all(folder, sdir, plan).items():
        print("built %s (%s): %s" % (job[0], os.path.basename(job[1]), "error: %s" % got if isinstance(got, Exception) else "ok"))


def measure(folder, out_path):
    import ctypes
    import torch
    import gpu_bench as g
    plan = json.load(open(os.path.join(folder, "plan.json")))
    sdir, steps_of = stage(folder, plan)
    built = build_all(folder, sdir, plan)
    results, calls = [], {}
    for case in plan:
        name = case["name"]
        res = {"name": name}
        try:
            steps = steps_of[name]
            text = open(os.path.join(sdir, name + ".cu")).read()
            for job in ((name, folder), (name, sdir)):
                if isinstance(built[job], Exception):
                    raise built[job]
            plain_mod, plain_spills = built[(name, folder)]
            mod, spills = built[(name, sdir)]
            lib = mod.library(mod.SPEC, mod.HERE)
            size = case["size"]
            if case["adapter"] == "gemm":
                a = torch.randn(size, size, device="cuda", dtype=torch.float16)
                b = torch.randn(size, size, device="cuda", dtype=torch.float16)
                fp, fs = g.TwillGemm(plain_mod), g.TwillGemm(mod)
                c = torch.empty(size, size, device="cuda", dtype=fp.out_dtype)
                call_p, call_s = (lambda fp=fp, a=a, b=b, c=c: fp(a, b, c)), (lambda: fs(a, b, c))
                flops = 2.0 * size ** 3
            else:
                BH, D = 32, 128
                q, k, v = (torch.randn(BH, size, D, device="cuda", dtype=torch.float16) for _ in range(3))
                fp, fs = g.TwillAttention(plain_mod), g.TwillAttention(mod)
                o = fp.outputs(BH, size, D, "cuda")
                call_p, call_s = (lambda fp=fp, q=q, k=k, v=v, o=o: fp(q, k, v, o, 0.088)), (lambda: fs(q, k, v, o, 0.088))
                flops = 4.0 * BH * size * size * D
            calls[name] = (call_p, flops)
            ms_s = g.bench_ms(call_s)
            nbytes = CTAS * 8 * SLOTS * 8
            lib.fid_clear(ctypes.c_size_t(nbytes))
            call_s()
            torch.cuda.synchronize()
            buf = (ctypes.c_ulonglong * (nbytes // 8))()
            lib.fid_get(buf, ctypes.c_size_t(nbytes))
            per_role = {}
            for index, (role, _, _) in enumerate(roles(text)):
                if not steps[index]:
                    continue
                diffs = []
                for cta in range(CTAS):
                    base = (cta * 8 + index) * SLOTS
                    xs = [buf[base + k] for k in range(SLOTS) if buf[base + k]]
                    diffs += [(y - x) / steps[index] for x, y in zip(xs[2:], xs[3:])]  # past the first passes
                if diffs:
                    qs = sorted(diffs)
                    per_role[role.removeprefix("role_")] = {"median": statistics.median(qs), "min": qs[0],
                                                            "p99": qs[max(0, int(0.99 * len(qs)) - 1)], "n": len(qs)}
            res.update({"ms_stamped": ms_s, "steps": steps,
                        "per_role": per_role, "spills": plain_spills, "sm_clock_mhz": g.sm_clock_mhz()})
        except Exception as exc:  # one case's failure must not lose the others
            import traceback
            res["error"] = "%s: %s" % (type(exc).__name__, exc)
            res["traceback"] = traceback.format_exc()[-2000:]
        print(json.dumps(res, sort_keys=True), flush=True)
        results.append(res)
    alternate(calls, results, g)
    json.dump(results, open(out_path, "w"), indent=1, sort_keys=True)


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
            res.update({"ms": ms, "ms_rounds": times[res["name"]], "tflops": calls[res["name"]][1] / ms / 1e9,
                        "sm_clock_mhz_rounds": times[res["name"] + ".mhz"]})


# ---- report --------------------------------------------------------------------------------------------

def report(folder, results_path):
    plan = {c["name"]: c for c in json.load(open(os.path.join(folder, "plan.json")))}
    results = {r["name"]: r for r in json.load(open(results_path))} if results_path else {}
    print("| kernel | spec | I (units) | predicted cycles/iter: I + load stall | measured cycles/iter (median per role) | error | ms (median of %d alternating rounds) | TFLOP/s |" % ROUNDS)
    print("|---|---|---|---|---|---|---|---|")
    for name, c in plan.items():
        r = results.get(name, {})
        roles_m = r.get("per_role", {})
        worst = max((v["median"] for v in roles_m.values()), default=None)
        cells = ", ".join("%s %.0f" % (k, v["median"]) for k, v in sorted(roles_m.items())) or r.get("error", "not run")
        err = "%+.0f%%" % (100 * (c["predicted_cycles"] - worst) / worst) if worst else ""
        print("| %s | %s | %d | %.0f = %.0f + %.0f | %s | %s | %s | %s |" % (
            os.path.basename(c["example"]), os.path.basename(c["spec"]), c["ii"], c["predicted_cycles"],
            c["ii_cycles"], c["load_stall"], cells, err, "%.3f" % r["ms"] if "ms" in r else "",
            "%.0f" % r["tflops"] if "tflops" in r else ""))
    print()
    print("| kernel | spec | role | budget | model's registers | ptxas, the role alone: registers (no cap), at its budget: registers, spill bytes | whole kernel: registers, spill bytes, warnings |")
    print("|---|---|---|---|---|---|---|")
    for name, c in plan.items():
        k = c["ptxas"]
        for w in c["roles"]:
            a = c["ptxas_alone"].get(w["name"], {})
            u = c.get("ptxas_uncapped", {}).get(w["name"], {})
            print("| %s | %s | %s | %d | %s | %s; %s, %s | %s, %s, %s |" % (
                os.path.basename(c["example"]), os.path.basename(c["spec"]), w["name"], w["registers"],
                w.get("model_registers"), u.get("registers"), a.get("registers"), a.get("spill_bytes"),
                k["registers"], k["spill_bytes"], " ".join(k["serialized"]) or "none"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--out", required=True)
    p.add_argument("--spec", action="append")
    p.add_argument("--build", action="store_true", help="also build the bindings here (into $TWILL_CACHE_DIR)")
    m = sub.add_parser("measure")
    m.add_argument("--dir", required=True)
    m.add_argument("--out", required=True)
    r = sub.add_parser("report")
    r.add_argument("--dir", required=True)
    r.add_argument("--results")
    a = ap.parse_args()
    if a.cmd == "prepare":
        prepare(a.out, a.spec or ["h200"], a.build)
    elif a.cmd == "measure":
        measure(a.dir, a.out)
    else:
        report(a.dir, a.results)


if __name__ == "__main__":
    main()
