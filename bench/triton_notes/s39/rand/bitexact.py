"""Element-for-element checks of twill's random numbers against Triton's on a GPU (run.sh's last step).

    python bench/triton_notes/s39/rand/bitexact.py K9_DIR K6_DIR     # the folders run.py build wrote

1. Triton's tl.rand and tl.randint, a one-line kernel, against twill/philox.py (numpy): every word and float equal.
2. The seeded dropout's binding (K9_DIR/seeded_dropout_sm90.py) against Triton's kernel (bench/heldout/kernels9.py):
   the kept set equal element for element and the kept values x / (1 - p) within a few ulps (Triton divides with div.full), for n = 98432, 98433 (the
   binding's padded tail launch) and 2^22, seeds 123, -7 and 2^40 + 3 (Triton's launch passes it as i64), p = 0.5,
   0.3.
3. The attention dropout's binding (K6_DIR/attn_dropout_sm90.py): q = 0 makes P uniform (1 / N a key), and V the
   identity on one block of 64 keys (zero elsewhere) makes O[b, h, i, j] = keep[b, h, i, kb * 64 + j] / (N (1 - p)):
   the kept set read exactly, block by block, against Triton's own kernel's and the reference's keep kernel's.
Prints one JSON line per check; exits 1 where any differs.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[4]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "bench" / "heldout")]
from gpu_bench import load_binding  # noqa: E402
from twill import philox  # noqa: E402

FAILED = []


def report(**row) -> None:
    print(json.dumps(row), flush=True)
    if not row.get("equal", True):
        FAILED.append(row)


@triton.jit
def _draw(OUT_F, OUT_I, seed, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(OUT_F + offs, tl.rand(seed, offs), mask=offs < n)
    tl.store(OUT_I + offs, tl.randint(seed, offs), mask=offs < n)


def check_stream() -> None:
    n = 98433
    for seed in (0, 123, -7, (1 << 40) + 3, (1 << 31) - 1):
        f = torch.empty(n, device="cuda", dtype=torch.float32)
        i = torch.empty(n, device="cuda", dtype=torch.int32)
        _draw[(triton.cdiv(n, 1024),)](f, i, seed, n, BLOCK=1024)
        words = philox.randint(seed, np.arange(n))
        ok_i = np.array_equal(i.cpu().numpy().view(np.uint32), words)
        ok_f = np.array_equal(f.cpu().numpy().view(np.uint32), philox.uniform(words).view(np.uint32))
        report(check="tl.rand vs twill/philox.py", seed=seed, equal=ok_i and ok_f, words=ok_i, floats=ok_f)


def check_seeded(k9: str) -> None:
    import kernels9 as K
    mod = load_binding("seeded_dropout_sm90", k9)
    for n in (98432, 98433, 1 << 22):
        torch.manual_seed(n)
        x = torch.randn(n, device="cuda")
        for seed in (123, -7, (1 << 40) + 3):
            for p in (0.5, 0.3):
                tri = K.seeded_dropout_launch(x, p, seed)
                out = torch.full_like(x, float("nan"))
                got = mod.run(x, out, n, p, seed)
                torch.cuda.synchronize()
                nz = x != 0
                flipped = int(((got != 0) != (tri != 0))[nz].sum())
                close = bool(torch.allclose(got, tri, rtol=1e-6, atol=0))
                report(check="seeded_dropout kept set vs Triton", n=n, seed=seed, p=p, flipped=flipped,
                       values_close=close, nan=bool(torch.isnan(got).any()), equal=flipped == 0 and close)


def check_attention(k6: str) -> None:
    import kernels6 as K
    mod = load_binding("attn_dropout_sm90", k6)
    B, H, D, p, seed = 2, 4, 64, 0.1, 1234
    for N in (128, 256):
        q = torch.zeros(B, H, N, D, device="cuda", dtype=torch.float16)
        k = torch.randn(B, H, N, D, device="cuda").to(torch.float16)
        keep = torch.empty(B * H * N * N, device="cuda", dtype=torch.int8)
        K._keep_mask_kernel[(triton.cdiv(keep.numel(), 1024),)](keep, seed, p, keep.numel(), BLOCK=1024)
        keep = keep.view(B, H, N, N) != 0
        flipped = {"twill": 0, "triton": 0}
        for kb in range(N // 64):
            v = torch.zeros(B, H, N, D, device="cuda", dtype=torch.float16)
            v[:, :, kb * 64:(kb + 1) * 64, :] = torch.eye(64, device="cuda", dtype=torch.float16)
            want = keep[:, :, :, kb * 64:(kb + 1) * 64]
            tri = K.attn_dropout_launch(q, k, v, seed=seed, dropout_p=p)
            o = torch.full_like(q, float("nan"))
            got = mod.run(q, k, v, o, q.stride(1), q.stride(2), N, 1.0 / D ** 0.5, seed, p)
            torch.cuda.synchronize()
            flipped["twill"] += int(((got != 0) != want).sum())
            flipped["triton"] += int(((tri != 0) != want).sum())
        report(check="attn_dropout kept set (V = identity blocks)", N=N, heads=B * H, flipped_twill=flipped["twill"],
               flipped_triton=flipped["triton"], equal=flipped["twill"] == 0 and flipped["triton"] == 0)


def main() -> None:
    k9, k6 = sys.argv[1], sys.argv[2]
    check_stream()
    check_seeded(k9)
    check_attention(k6)
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
