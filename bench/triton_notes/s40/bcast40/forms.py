"""The mask's batch forms on the GPU (run.sh's step 2): python forms.py KERNELS_DIR (run.py build's output)."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "bench"))
from gpu_bench import load_binding  # noqa: E402


def reference(q, k, v, mask, scale):
    s = (q.float() @ k.float().transpose(-1, -2)) * scale
    return torch.softmax(s.masked_fill(mask == 0, float("-inf")), -1) @ v.float()


def rel(a, b):
    return float((a.float() - b.float()).abs().max() / b.float().abs().max())


def main(kdir: str) -> None:
    mod = load_binding("attn_bool_mask_sm90", kdir)
    torch.manual_seed(7)
    B, H, N, D = 2, 8, 1024, 64
    q, k, v = (torch.randn(B, H, N, D, device="cuda").to(torch.float16) for _ in range(3))
    mask = (torch.rand(N, N, device="cuda") < 0.7).to(torch.int8)
    mask.fill_diagonal_(1)
    scale = 1.0 / math.sqrt(D)
    row = {}

    def call(q, k, v, m):
        o = torch.empty_like(q)
        return mod.run(q, k, v, m, o, q.stride(1), q.stride(2), m.stride(-2), q.shape[2], scale)

    o = call(q, k, v, mask)
    row["shared_rel_error"] = rel(o, reference(q, k, v, mask, scale))
    o11 = call(q, k, v, mask.view(1, 1, N, N))
    row["ones_same_bits"] = bool(torch.equal(o, o11))
    for shape in ((B, H, N, N), (H, N, N)):
        try:
            call(q, k, v, mask.expand(*shape).contiguous())
            row[f"refused_{shape}"] = False
        except mod.ArgumentError as e:
            row[f"refused_{shape}"] = str(e).startswith("MASK: the kernel reads one MASK for every batch entry")
    per_head = (torch.rand(B, H, N, N, device="cuda") < 0.7).to(torch.int8)
    row["per_head_reference_differs"] = rel(reference(q, k, v, per_head, scale), reference(q, k, v, mask, scale)) > 0.1
    qg = torch.randn(1, 16, N, D, device="cuda").to(torch.float16)
    kg, vg = (torch.randn(1, 4, N, D, device="cuda").to(torch.float16) for _ in range(2))
    og = call(qg, kg, vg, mask)
    row["gqa_rel_error"] = rel(og, reference(qg, kg.repeat_interleave(4, 1), vg.repeat_interleave(4, 1), mask, scale))
    row["ok"] = (row["shared_rel_error"] < 1e-2 and row["ones_same_bits"] and row["gqa_rel_error"] < 1e-2
                 and all(v for k2, v in row.items() if k2.startswith("refused_")))
    print(json.dumps(row, indent=1))
    (Path(kdir) / "forms.json").write_text(json.dumps(row, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
