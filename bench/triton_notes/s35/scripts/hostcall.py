"""Per-call host time of sequence bindings (launches queued, no sync), old K.py (.devrun/s36) against the one that
plans once per kind (.devrun/s37), alternating; then cProfile of the new one's call."""
import cProfile, inspect, io, pstats, sys, time
sys.path.insert(0, "bench"); sys.path.insert(0, "bench/heldout")
import torch
from gpu_bench import load_binding
from triton_bench import capture
import run as R
for batch, name, size in [("7", "layernorm_fwd", {"R": 1000, "N": 1000}), ("8", "rms_norm_fwd", {"M": 1000, "N": 5000})]:
    K = R._kernels(batch)
    fns = K.KERNELS[name]
    tensors, params = fns["make_inputs"](size, "cuda")
    args, outs = capture(K, name, tensors, params)
    by_name = dict(zip(fns["kernel"].arg_names, args))
    runs = {}
    for tag, d in (("old", ".devrun/s36"), ("new", ".devrun/s37")):
        mod = load_binding(f"{name}_sm90", f"{d}/b{batch}")
        names = [p.name for p in inspect.signature(mod.run).parameters.values()
                 if p.kind == p.POSITIONAL_OR_KEYWORD and p.name in by_name]
        a = tuple(by_name[n] for n in names)
        runs[tag] = (mod, a)
        for _ in range(30):
            mod.run(*a)
    torch.cuda.synchronize()
    res = {"old": [], "new": []}
    for rep in range(6):
        for tag in (("old", "new") if rep % 2 == 0 else ("new", "old")):
            mod, a = runs[tag]
            t0 = time.perf_counter()
            for _ in range(200):
                mod.run(*a)
            res[tag].append((time.perf_counter() - t0) / 200 * 1e6)
            torch.cuda.synchronize()
    print(name, {k: round(sorted(v)[len(v) // 2], 1) for k, v in res.items()}, "us a call (host, median of 6)")
    out_old, out_new = runs["old"][0].run(*runs["old"][1]), runs["new"][0].run(*runs["new"][1])
    torch.cuda.synchronize()
    o1 = out_old if isinstance(out_old, tuple) else (out_old,)
    o2 = out_new if isinstance(out_new, tuple) else (out_new,)
    print(name, "same outputs:", all(torch.equal(x, y) for x, y in zip(o1, o2)))
    mod, a = runs["new"]
    pr = cProfile.Profile(); pr.enable()
    for _ in range(300):
        mod.run(*a)
    pr.disable(); torch.cuda.synchronize()
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(14); print(s.getvalue()[-2600:])
