"""Profile twill's and Triton's kernels of one held-out kernel once each (for ncu --profile-from-start off).
usage: flatprof.py BATCH KDIR NAME [SIZE-JSON]"""
import inspect, json, sys
from pathlib import Path
sys.path[:0] = ["bench", "bench/heldout"]
import torch
import run as H
from gpu_bench import load_binding
from triton_bench import capture

batch, kdir, name = sys.argv[1:4]
size = json.loads(sys.argv[4]) if len(sys.argv) > 4 else None
K = H._kernels(batch)
mod = load_binding(f"{name}_sm90", kdir)
fns = K.KERNELS[name]
tensors, params = fns["make_inputs"](size, "cuda")
args, outs = capture(K, name, tensors, params)
names = [p.name for p in inspect.signature(mod.run).parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD]
by_name = dict(zip(fns["kernel"].arg_names, args))
names = [n for n in names if n in by_name]
a = tuple(by_name[n] for n in names)
tw = lambda: mod.run(*a)
tr = lambda: fns["launch"](*tensors, **params)
for _ in range(3):
    tw(); tr()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
tw(); torch.cuda.synchronize()
tr(); torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("shapes", [list(t.shape) for t in tensors], "split plan:", getattr(mod, "_LAST_PLAN", None))
