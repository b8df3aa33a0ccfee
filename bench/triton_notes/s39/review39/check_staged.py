"""GPU check of the staging buffers' lifetime (branch review39): three tensors staged in one call of gemm_tf32's
binding, A at a pitch TMA cannot read (rows of K + 1 f32), B row-major (its .mT copied K-major) and C given at
such a pitch (written into a buffer, copied back). Before review39's fix `call` held only the last buffer: A's
went back to torch's caching allocator before the launch and C's buffer (the same size) could take its memory,
so that the kernel read A where it wrote C. Build here with bench/triton_notes/s39/tf32/run.sh build (carry
.devrun/tf32), then on the GPU:

    python bench/triton_notes/s39/review39/check_staged.py .devrun/tf32

Prints one JSON object: per size, the layouts the plan chose (all three "stage") and the relative error of the
third call's C against a.double() @ b.double() (below 1e-2: correct; the buggy runtime fails where C's buffer
took A's memory, from the second call on)."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]


def main() -> None:
    import torch
    kdir = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / ".devrun" / "tf32")
    spec = importlib.util.spec_from_file_location("gemm_tf32_binding", kdir / "k" / "gemm_tf32_sm90.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = []
    for m, n, k in ((1024, 1024, 1024), (4096, 4096, 4096), (2048, 2048, 2048)):
        torch.manual_seed(39)
        a = torch.randn(m, k + 1, device="cuda")[:, :k]  # rows of k + 1 f32: staged
        b = torch.randn(k, n, device="cuda")  # [K, N] row-major: its .mT staged
        c = torch.full((m, n + 1), float("nan"), device="cuda")[:, :n]  # rows of n + 1 f32: staged
        ref = a.double() @ b.double()
        row = {"size": [m, n, k]}
        try:
            plan = mod.resolve(mod.SPEC, {x: mod.describe(t) for x, t in (("A", a), ("B", b), ("C", c))})
            row["layouts"] = [lay[0] for lay in plan["layouts"]]
            for _ in range(3):  # (the caching allocator's blocks are reused from the second call on)
                c.fill_(float("nan"))
                out = mod.run(a, b, c)
            torch.cuda.synchronize()
            err = ((out.double() - ref).norm() / ref.norm()).item()
            row["rel_error"], row["correct"] = err, err < 1e-2 and out.data_ptr() == c.data_ptr()
        except Exception as exc:  # recorded; the next size goes on
            row["error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
        rows.append(row)
    print(json.dumps({"card": torch.cuda.get_device_name(), "torch": torch.__version__, "cases": rows}, indent=1))


if __name__ == "__main__":
    main()
