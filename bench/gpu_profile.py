#!/usr/bin/env python3
"""Nsight Compute, side by side: twill's attention forward against SDPA-cuDNN at one size.

    python3 bench/gpu_profile.py --n 8192 [--kernel-dir DIR] [--out DIR]

Runs `ncu --clock-control none` (the device notes ask to leave the clocks alone) on one launch
of each kernel (twill's through bench/gpu_once.py, cuDNN's through this script's `--cudnn-once`),
reads a fixed list of counters, and prints a markdown table with one row per counter: what each
kernel spent its cycles on (instructions, tensor-pipe activity, stall reasons per issued
instruction). With --out DIR the table and the raw CSV are written there. Kernels shorter than a
millisecond (SDPA's small helper kernels) are left out of the table.
"""
import argparse
import csv
import io
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

METRICS = [
    ("gpu__time_duration.sum", "duration (ns)"),
    ("sm__cycles_elapsed.avg.per_second", "SM clock (Hz)"),
    ("sm__cycles_elapsed.avg", "SM cycles"),
    ("smsp__inst_executed.sum", "warp instructions"),
    ("smsp__issue_active.avg.pct_of_peak_sustained_active", "issue slots busy %"),
    ("sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active", "tensor (gmma) pipe busy %"),
    ("sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active", "MUFU (xu) pipe %"),
    ("sm__inst_executed_pipe_fma.sum", "FMA-pipe instructions"),
    ("sm__inst_executed_pipe_alu.sum", "ALU-pipe instructions"),
    ("sm__inst_executed_pipe_xu.sum", "XU-pipe instructions"),
    ("sm__inst_executed_pipe_uniform.sum", "uniform-pipe instructions"),
    ("smsp__inst_executed_op_shared_st.sum", "shared stores"),
    ("smsp__inst_executed_op_shared_ld.sum", "shared loads"),
    ("smsp__warps_active.avg.per_cycle_active", "warps active per SMSP"),
    ("launch__registers_per_thread", "registers per thread"),
    ("launch__block_size", "threads per CTA"),
    ("launch__grid_size", "CTAs"),
    ("launch__cluster_dim_x", "cluster x"),
    ("launch__cluster_dim_y", "cluster y"),
    ("lts__t_bytes.sum", "L2 bytes (all)"),
    ("lts__t_sectors_op_read.sum", "L2 read sectors"),
    ("l1tex__m_xbar2l1tex_read_bytes.sum", "L2 -> SM bytes"),
    ("smsp__inst_executed_op_ldgsts.sum", "LDGSTS"),
    ("lts__t_sector_hit_rate.pct", "L2 hit %"),
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM throughput %"),
]
STALLS = ["barrier", "long_scoreboard", "short_scoreboard", "wait", "math_pipe_throttle", "mio_throttle",
          "dispatch_stall", "membar", "sleeping", "no_instruction", "not_selected", "selected",
          "branch_resolving", "lg_throttle", "misc", "drain", "imc_miss", "tex_throttle"]
METRICS += [(f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio", f"stall {s} / issue")
            for s in STALLS]


def cudnn_once(n: int) -> None:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (torch.randn(4, 32, n, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        F.scaled_dot_product_attention(q, k, v)  # warm-up: cuDNN builds its plan
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("profiled")
        F.scaled_dot_product_attention(q, k, v)
        torch.cuda.synchronize()


def ncu(cmd: list[str], extra: list[str]) -> list[dict]:
    names = ",".join(m for m, _ in METRICS)
    full = ["ncu", "--clock-control", "none", "--csv", "--metrics", names, *extra, *cmd]
    out = subprocess.run(full, capture_output=True, text=True)
    if out.returncode:
        sys.stderr.write(out.stdout[-3000:] + out.stderr[-3000:])
        raise SystemExit(f"ncu failed ({out.returncode}): {' '.join(full)}")
    text = out.stdout[out.stdout.find('"ID"'):]
    rows: dict[tuple, dict] = {}
    for r in csv.DictReader(io.StringIO(text)):
        key = (r["ID"], r["Kernel Name"])
        rows.setdefault(key, {"kernel": r["Kernel Name"]})[r["Metric Name"]] = r["Metric Value"].replace(",", "")
    return list(rows.values())


def number(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--kernel-dir", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--cudnn-once", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.cudnn_once:
        cudnn_once(a.n)
        return
    twill_cmd = [sys.executable, os.path.join(HERE, "gpu_once.py"), "attention", str(a.n)]
    if a.kernel_dir:
        twill_cmd.append(a.kernel_dir)
    kernels = ncu(twill_cmd, ["--kernel-name", "regex:twill|kernel"])
    kernels += ncu([sys.executable, os.path.abspath(__file__), "--cudnn-once", "--n", str(a.n)],
                   ["--nvtx", "--nvtx-include", "profiled/"])
    kernels = [k for k in kernels if (number(k.get("gpu__time_duration.sum")) or 0) > 1e6]
    head = "| counter | " + " | ".join(k["kernel"][:40] for k in kernels) + " |"
    lines = [f"N = {a.n}, B = 4, H = 32, D = 128, fp16", "", head, "|---|" + "---|" * len(kernels)]
    for m, label in METRICS:
        vals = []
        for k in kernels:
            v = number(k.get(m))
            vals.append("—" if v is None else (f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"))
        lines.append(f"| {label} | " + " | ".join(vals) + " |")
    table = "\n".join(lines)
    print(table)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "profile.md"), "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
