#!/bin/bash
# GPU check of heldout9's dropout (branch argscalar): `tl.where(keep, x / (1 - p), 0.0)`, its 1 - p the prologue's
# scalar ops (ttgir/scalarexpr.py), computed once per role from the launch's p. Run from the repository root.
# The GPU machine has no solvers: run the build line here first, carry .devrun/dropout/k, then the rest there.
set -e
python bench/heldout/run.py build --batch 9 --out .devrun/dropout/k dropout   # here: import, solve, emit, nvcc
python bench/heldout/run.py check --batch 9 --kernels .devrun/dropout/k      # there: p = 0.5 (make_inputs' default)
cat .devrun/dropout/k/check.json
# p = 0.3 too (1 / (1 - p) is no power of two): the binding against the reference's formula, as JSON
python - <<'PY'
import json, sys
sys.path.insert(0, "bench")
import torch
from gpu_bench import load_binding
mod = load_binding("dropout_sm90", ".devrun/dropout/k")
torch.manual_seed(95)
x = torch.randn(98432, device="cuda")
keep = (torch.rand(98432, device="cuda") > 0.5).to(torch.int32)
out = torch.empty_like(x)
mod.run(x, keep, out, x.numel(), 0.3)
ref = torch.where(keep != 0, x / (1 - 0.3), 0.0)
err = ((out - ref).abs().max() / ref.abs().max()).item()
print(json.dumps({"p": 0.3, "rel_error": err, "correct": err < 1e-5}))
PY
