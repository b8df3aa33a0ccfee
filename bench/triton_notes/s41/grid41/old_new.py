"""swiglu_bwd's binding with one split (twill_split_cols = the whole 4096 columns: the unsplit grid main ran) against its
own split (none given) and Triton's kernel, 5 alternating rounds of CUDA-graph replays (us), at 1000 and 2048 rows.
Usage (GPU machine, repository root): python bench/triton_notes/s41/grid41/old_new.py .devrun/grid41/b11"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "bench" / "heldout")]

import torch  # noqa: E402
from gpu_bench import load_binding  # noqa: E402
from triton_bench import graph_ms, rel_error  # noqa: E402
from run import _kernels  # noqa: E402

kdir = Path(sys.argv[1])
K = _kernels("11")
fns = K.KERNELS["swiglu_bwd"]
mod = load_binding("swiglu_bwd_sm90", str(kdir))
rows = {}
for M in (1000, 2048):
    (dc, a, b), params = fns["make_inputs"]({"M": M}, "cuda")
    ref = fns["reference"](dc, a, b)
    forms = {"one split (old)": lambda: mod.run(dc, a, b, twill_split_cols=4096),
             "own split (new)": lambda: mod.run(dc, a, b),
             "triton": lambda: fns["launch"](dc, a, b)}
    errs = {k: rel_error(f(), ref) for k, f in forms.items()}
    torch.cuda.synchronize()
    times = {k: [] for k in forms}
    for _ in range(5):
        for k, f in forms.items():
            times[k].append(graph_ms(f) * 1e3)
    med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    rows[M] = {"rel_error": errs, "us": med}
    print(M, "x 4096:", json.dumps({k: round(v, 1) for k, v in med.items()}), "errors", json.dumps(errs), flush=True)
(kdir / "old_new.json").write_text(json.dumps(rows, indent=1))
