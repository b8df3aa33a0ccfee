"""Session 40: where a row kernel's time goes, twill's against Triton's, under Nsight Compute (issue #22).

Deeper load rings (emit-cuda --load-rings latency) did not close the row kernels' gap on the H100 (session 40:
LayerNorm 1000 x 1000 14.5 us against Triton's 5.3, softmax_online 32768 x 1024 134 against 59), so the TMA latency
hypothesis of session 38 is refuted; this profiles one call of each (twill's binding from .devrun/depth/old, built
by bench/triton_notes/s39/build_all.sh, and Triton's launch) between cudaProfilerStart/Stop:

    ncu --profile-from-start off --clock-control none --section SpeedOfLight --section WarpStateStats \
        --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
        python3 bench/triton_notes/s40/rowprof/prof.py layernorm_fwd 1000 1000
"""
import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "heldout"))
sys.path.insert(0, str(ROOT / ".devrun" / "depth"))

import torch  # noqa: E402

import check as depth  # noqa: E402  (.devrun/depth/check.py: the kernels' batches and size keys)
import run as heldout  # noqa: E402
from triton_bench import capture  # noqa: E402


def main(name: str, m: int, n: int) -> None:
    batch, rkey, ckey, _ = depth.KERNELS[name]
    K = heldout._kernels(batch)
    fns = K.KERNELS[name]
    tensors, params = fns["make_inputs"]({rkey: m, ckey: n}, "cuda")
    tri = lambda: fns["launch"](*tensors, **params)  # noqa: E731
    args, _ = capture(K, name, tensors, params)
    by_name = dict(zip(fns["kernel"].arg_names, args))
    mod = depth._binding("old", name)
    names = [p.name for p in inspect.signature(mod.run).parameters.values()
             if p.kind == p.POSITIONAL_OR_KEYWORD and p.name in by_name]
    call = tuple(by_name[x] for x in names)
    for _ in range(3):
        mod.run(*call)
        tri()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    mod.run(*call)
    torch.cuda.synchronize()
    tri()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print("profiled", name, m, n, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
