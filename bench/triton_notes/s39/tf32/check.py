"""GPU check of the TF32 GEMM and of the binding's staged K-major transpose (run.sh check; branch tf32, issue #21).

    python bench/triton_notes/s39/tf32/check.py .devrun/tf32      # DIR/k/gemm_tf32_sm90.py, DIR/fp8/mm_fp8_sm90.py

Each case calls a binding and compares its output with the reference (gemm_tf32: a.double() @ b.double(), relative
Frobenius error below 1e-2, Triton's own TF32 kernel's error beside it; mm_fp8: a.float() @ b.float(), below 5e-2),
B given as the Triton kernel takes it, [K, N] row-major (the binding copies B.mT into a K-major buffer each call:
"staged"), and as the w.t() of a contiguous [N, K] w (its .mT is K-major: no copy, "as is"). Times: per call
(median of 10, host included) and per launch in one CUDA graph (the GPU alone), the copy b.mT.contiguous() alone,
and Triton's gemm_tf32 at the same size. Prints one JSON object.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
sys.path.insert(0, str(ROOT / "bench"))


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _layout_of(mod, args: dict) -> str:
    """How the binding takes B for these tensors: "stage" (copied) or "as is" (plan["layouts"])."""
    given = {n: None if t is None else mod.describe(t) for n, t in args.items()}
    plan = mod.resolve(mod.SPEC, given)
    names = [a["name"] for a in mod.SPEC["args"]]
    return plan["layouts"][names.index("B")][0]


def _case(mod, a, b, c, ref, tol, label, time_it, expect):
    import torch
    from triton_bench import graph_ms, median_ms, rel_error
    row = {"case": label, "shapes": [list(a.shape), list(b.shape)], "b_strides": list(b.stride())}
    try:
        row["b_layout"] = _layout_of(mod, {"A": a, "B": b, "C": c})
        row["b_layout_as_expected"] = row["b_layout"] == expect  # "stage": copied; "as is": read where it lies
        c.fill_(float("nan"))
        out = mod.run(a, b, c)
        torch.cuda.synchronize()
        row["rel_error"] = rel_error(out, ref)
        row["correct"] = row["rel_error"] < tol
        if time_it:
            row["twill_ms"] = median_ms(lambda: mod.run(a, b, c), reps=10)
            row["twill_kernel_ms"] = graph_ms(lambda: mod.run(a, b, c))
    except Exception as exc:  # recorded; the next case goes on
        row["error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
    return row


def tf32(kdir: Path) -> list[dict]:
    import torch
    from triton_bench import graph_ms, rel_error
    mod = _load(kdir / "k" / "gemm_tf32_sm90.py", "gemm_tf32_binding")
    k3 = _load(ROOT / "bench" / "heldout" / "kernels3.py", "kernels3")
    rows = []
    for (m, n, k), time_it in (((1024, 1024, 1024), False), ((4096, 4096, 4096), True), ((1000, 1000, 1000), False),
                               ((384, 640, 260), False)):
        torch.manual_seed(39)
        a = torch.randn(m, k, device="cuda")
        w = torch.randn(n, k, device="cuda")  # B's transpose, K-major: a Linear's weight
        b = w.t().contiguous()  # B [K, N] row-major, as the Triton launch passes it
        ref = a.double() @ b.double()
        c = torch.empty(m, n, device="cuda")
        size = f"{m}x{n}x{k}"
        rows.append(_case(mod, a, b, c, ref, 1e-2, f"gemm_tf32 {size} B row-major", time_it, "stage"))
        rows.append(_case(mod, a, w.t(), c, ref, 1e-2, f"gemm_tf32 {size} B = w.t()", time_it, "as is"))
        if m % 128 == 0 and n % 128 == 0 and k % 32 == 0:
            tri = k3.gemm_tf32_launch(a, b)
            rows[-2]["triton_rel_error"] = rel_error(tri, ref)
            if time_it:
                rows[-2]["triton_kernel_ms"] = graph_ms(lambda: k3.gemm_tf32_launch(a, b))
                rows[-2]["copy_kernel_ms"] = graph_ms(lambda: b.mT.contiguous())  # what staging adds
    return rows


def fp8(kdir: Path) -> list[dict]:
    import torch
    path = kdir / "fp8" / "mm_fp8_sm90.py"
    if not path.exists():
        return [{"case": "mm_fp8", "error": f"{path} not built (run.sh build)"}]
    mod = _load(path, "mm_fp8_binding")
    rows = []
    for (m, n, k), time_it in (((1024, 1024, 1024), False), ((4096, 4096, 4096), True)):
        torch.manual_seed(8)
        a = (torch.randn(m, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
        w = (torch.randn(n, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
        b = w.t().contiguous()
        ref = a.float() @ b.float()
        c = torch.empty(m, n, device="cuda", dtype=torch.float16)
        rows.append(_case(mod, a, b, c, ref, 5e-2, f"mm_fp8 {m}x{n}x{k} B row-major", time_it, "stage"))
        rows.append(_case(mod, a, w.t(), c, ref, 5e-2, f"mm_fp8 {m}x{n}x{k} B = w.t()", time_it, "as is"))
    return rows


def main() -> None:
    import torch
    kdir = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / ".devrun" / "tf32")
    out = {"card": torch.cuda.get_device_name(), "torch": torch.__version__, "cases": tf32(kdir) + fp8(kdir)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
