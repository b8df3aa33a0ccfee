"""Build here (nvcc, the solvers) what run.sh checks on the GPU machine (session 40, spill40; issues #21, #27).

Each held-out row kernel's Triton 3.6 prepipe *sm_100* dump, which the import now reads as 128 x 64 tiles (rowprog.TILES:
the sm_100 row tile; its sm_90 dump stays 64 x 128), is solved for h200 and emitted for sm_90a with its torch binding,
named NAME_sm90 so that `bench/heldout/run.py check` runs it unchanged (its inputs, the Triton launch's arguments,
its fp32 reference). The GPU lent here is an H200 (sm_90): sm_100a kernels cannot run on it, so this checks the
128-row row kernels (two 64-row wgmma-layout blocks a warpgroup on sm_90a) where they can run; the sm_100a builds are
compile-checked by the tests (`-m extended`).

    python bench/triton_notes/s40/spill40/build.py --out .devrun/s40spill   # about 10-15 minutes on 2 cores
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "heldout"))

# batch (run.py --batch) -> the row kernels whose sm_100 dump imports as 128 x 64 tiles (every one of them, found by
# importing each batch's t36/prepipe sm_100 dumps: rowprog, rowwhole, flatmap and block2d kernels)
ROW_KERNELS = {
    "6": ["cross_entropy_fwd", "layernorm_2loop"],
    "7": ["layernorm_fwd", "rmsnorm_fwd", "softmax_fused", "softmax_online", "xent_scalar"],
    "8": ["geglu_fwd", "layer_norm_fwd", "rms_norm_fwd", "softmax_row", "swiglu_fwd", "vector_add"],
    "9": ["asin", "dropout", "seeded_dropout"],
    "10": ["add_rmsnorm", "bias_gelu", "gelu_erf", "kl_logits", "kldiv_rows", "softmax_bwd"],
    "11": ["softmax_temp", "swiglu_bwd"],
    "rand": ["dropout_2d", "dropout_rows_loop", "dropout_rows", "noise_flat", "rand_rounds7"],
}


def main() -> None:
    from run import BATCHES
    from triton_bench import IMPORT_ARGS, build_attempt
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--time-limit", type=float, default=300)
    ap.add_argument("--batch", action="append", help="only these batches (default: all of ROW_KERNELS)")
    a = ap.parse_args()
    out = Path(a.out)
    for batch, names in ROW_KERNELS.items():
        if a.batch and batch not in a.batch:
            continue
        kdir, dumps = out / f"b{batch}", out / f"b{batch}" / "dumps"
        dumps.mkdir(parents=True, exist_ok=True)
        records = []
        for name in names:
            src = ROOT / "tests" / "data" / "ttgir" / BATCHES[batch][1] / "t36" / "prepipe" / f"{name}_sm100.ttgir"
            dump = dumps / f"{name}_sm90.ttgir"  # the sm_100 text (its target cuda:100), named as run.py check reads it
            shutil.copyfile(src, dump)
            rec = build_attempt(dump, kdir, "h200", "sm_90a", a.time_limit, IMPORT_ARGS)
            rec["source"] = str(src.relative_to(ROOT))
            records.append(rec)
            print(batch, name, rec.get("stopped", "ok"), rec.get("ii"), rec.get("stages", {}).get("nvcc"),
                  rec.get("error", "")[-300:], flush=True)
        (kdir / "build.json").write_text(json.dumps(records, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
