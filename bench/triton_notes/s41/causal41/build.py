"""HERE (twill installed, nvcc; no GPU): the causal forward's kernels for bench.py, into OUT (.devrun/causal41).

    python bench/triton_notes/s41/causal41/build.py [OUT]

Each variant is emitted, compiled for sm_90a with tests/data/causal/gpu_causal.py's shim into lib{name}.so, and
ptxas's verdict printed (a variant that spills or serializes is still built: bench.py reports what it is):
- h200: tests/data/causal/attention_fwd_causal_hopper.h200.json as emit-cuda writes it now (== the golden
  tests/golden/causal/attention_fwd_causal_hopper.h200.cu): kernel<true> reads Args per tile (tile_args) and
  compiles clean; launched with persistent = 1 (one CTA per SM) and 0 (a CTA per tile, kernel<false>);
- h200_hoisted: the same schedule with tile_args=False, session 26's persistent kernel (C7512 in kernel<true>),
  to show the change on the card;
- h100: examples/attention_fwd_causal_hopper.tir solved for --gpu h100 (I = 512: no QK/PV overlap inside a
  consumer; its kernel<true> compiled clean before this branch too), persistent = 1 and 0.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))


def _gpu_causal():
    spec = importlib.util.spec_from_file_location("gpu_causal", ROOT / "tests" / "data" / "causal" / "gpu_causal.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str]) -> int:
    from twill import ptxas
    from twill.emit import emitted
    from twill.machine import load_machine
    from twill.schedule import Schedule
    out = Path(argv[0] if argv else ROOT / ".devrun" / "causal41")
    out.mkdir(parents=True, exist_ok=True)
    h200 = Schedule.from_json((ROOT / "tests" / "data" / "causal" / "attention_fwd_causal_hopper.h200.json").read_text())
    h100_json = out / "attention_fwd_causal_hopper.h100.json"
    subprocess.run([shutil.which("twill") or "twill", "solve", str(ROOT / "examples" / "attention_fwd_causal_hopper.tir"),
                    "--gpu", "h100", "-q", "-o", str(h100_json)], check=True)
    h100 = Schedule.from_json(h100_json.read_text())
    variants = {"h200": (h200, {}), "h200_hoisted": (h200, {"tile_args": False}), "h100": (h100, {})}
    g = _gpu_causal()
    ns, shim = g.SHIMS["attention_fwd_causal_hopper.h200"]
    golden = (ROOT / "tests" / "golden" / "causal" / "attention_fwd_causal_hopper.h200.cu").read_text()
    for name, (s, options) in variants.items():
        _, text = emitted(s, load_machine(s.machine), **options)
        if name == "h200":
            assert text == golden, "the h200 variant is not the golden kernel: run the causal tests"
        cu = out / f"causal_{name}.cu"
        cu.write_text(text)
        report = ptxas.compile_kernel(text, "sm_90a")
        print(f"{name}: I = {s.ii}, {report.summary()}", flush=True)
        build = out / "build"
        lib, spills = g.build_shim(str(cu), ns, shim, str(build), name)
        shutil.copy(lib._name, out / f"lib{name}.so")
        print(f"  lib{name}.so{'; ' + '; '.join(spills) if spills else ''}", flush=True)
    print(f"built: carry {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out} and run "
          "'bash bench/triton_notes/s41/causal41/run.sh gpu' on the GPU machine")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
