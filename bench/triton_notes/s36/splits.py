"""Kernel time of a one-loop kernel at several column splits (twill_split_cols), and Triton's."""
import inspect, json, sys
sys.path[:0] = ["bench", "bench/heldout"]
import torch
import run as H
from gpu_bench import load_binding
from triton_bench import capture, graph_ms, rel_error

batch, kdir, name, L = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
size = json.loads(sys.argv[5]) if len(sys.argv) > 5 else None
K = H._kernels(batch)
mod = load_binding(f"{name}_sm90", kdir)
fns = K.KERNELS[name]
tensors, params = fns["make_inputs"](size, "cuda")
ref = fns["reference"](*tensors, **params)
args, outs = capture(K, name, tensors, params)
names = [p.name for p in inspect.signature(mod.run).parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD]
by_name = dict(zip(fns["kernel"].arg_names, args))
names = [n for n in names if n in by_name]
a = tuple(by_name[n] for n in names)
tr = lambda: fns["launch"](*tensors, **params)
row = {"triton": graph_ms(tr) * 1e3}
for e in [None, L // 2, L // 4, L // 8, L // 16, L // 32]:
    try:
        f = lambda: mod.run(*a, twill_split_cols=e)
        f(); torch.cuda.synchronize()
        err = rel_error(outs[0], ref if not isinstance(ref, (tuple, list)) else ref[0])
        row[str(e)] = (round(graph_ms(f) * 1e3, 1), f"{err:.1e}")
    except Exception as exc:
        row[str(e)] = f"{type(exc).__name__}: {str(exc)[:120]}"
row["triton2"] = graph_ms(tr) * 1e3
print(kdir, name, size, json.dumps(row))
