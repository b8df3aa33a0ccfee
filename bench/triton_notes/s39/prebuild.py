"""Prebuild every binding library under the given folders (NVCC, TWILL_CACHE_DIR from the environment)."""
import os, sys, time, json
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor
sys.path.insert(0, "bench")
from gpu_bench import load_binding

jobs = []
for d in sys.argv[1:]:
    for p in sorted(Path(d).rglob("*_sm90.py")):
        mod = load_binding(p.stem, str(p.parent))
        if hasattr(mod, "SPEC"):
            jobs.append((str(p), mod.build_library)); continue
        first = mod._module(mod.LOOPS[0][1])
        for loop, file, _, _ in mod.LOOPS:
            jobs.append((f"{p}.{loop}", mod._module(file).build_library))
        if mod.FUSED:
            jobs.append((f"{p}.fused", lambda mod=mod, first=first: first.build(mod._fused_spec(first), mod.HERE)))

def run(job):
    label, fn = job
    t0 = time.time()
    try:
        fn(); return {"build": label, "s": round(time.time() - t0, 1)}
    except Exception as exc:
        return {"build": label, "error": f"{type(exc).__name__}: {exc}"[-400:]}
with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
    for r in pool.map(run, jobs):
        print(json.dumps(r), flush=True)
