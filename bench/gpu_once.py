#!/usr/bin/env python3
"""Run one emitted kernel once on random inputs (no timing): the target for a profiler.

    ncu --clock-control none --kernel-name regex:twill_ python3 bench/gpu_once.py gemm 8192
    ncu ... python3 bench/gpu_once.py attention 4096
    ncu ... python3 bench/gpu_once.py attention_bwd 4096
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_bench  # noqa: E402


def main():
    name, size = sys.argv[1], int(sys.argv[2])
    kernel_dir = sys.argv[3] if len(sys.argv) > 3 else gpu_bench.KDIR
    lib, _ = gpu_bench.build(name, kernel_dir)  # the kernel's binding, built
    if name == "gemm":
        r = gpu_bench.run_gemm(gpu_bench.TwillGemm(lib), size, do_time=False)
    elif name == "attention_bwd":
        r = gpu_bench.run_attention_bwd(gpu_bench.TwillAttentionBwd(lib), 4, 32, size, do_time=False, ref_heads=1)
    else:
        r = gpu_bench.run_attention(gpu_bench.TwillAttention(lib), 4, 32, size, do_time=False, ref_heads=1)
    print({k: v for k, v in r.items() if k in ("ok", "rel_err", "nan_count", "twill_error")})


if __name__ == "__main__":
    main()
