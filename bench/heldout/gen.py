"""Dump the held-out kernels (kernels.py beside this file) as TTGIR, no GPU needed.

    PYTHON gen.py [--module kernels3] OUTDIR [NAME ...]   # PYTHON: a Python with Triton (3.9, 3.6, ...)

--module names the kernels file beside this one (default kernels: the second batch; kernels3: the third;
kernels4: the fourth).

For each DUMPS entry and each of sm_90 and sm_100 it compiles the kernel with
`triton.compile(ASTSource(...), target=GPUTarget("cuda", CC, 32), options=...)` in a child process
with MLIR_ENABLE_DUMP set to the kernel's name, and writes
    OUTDIR/after/NAME_smCC.ttgir     k.asm["ttgir"]: the end of make_ttgir, after Triton's pipeliner
    OUTDIR/prepipe/NAME_smCC.ttgir   the module printed before TritonGPUAssignLatencies (the pipeliner's
                                     first pass) in the pass log of the same compile
as ../shared/triton/gen.py and tests/data/ttgir/triton36/one.py did for the corpus. A kernel that does
not compile is reported and skipped.
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = re.compile(r"^// -----// IR Dump Before TritonGPUAssignLatencies\b")
ANY = re.compile(r"^// -----// .*IR Dump")

CHILD = r"""
import os, sys
sys.path.insert(0, {here!r})
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import importlib
kernels = importlib.import_module({module!r})
spec = kernels.DUMPS[{name!r}]
fn = spec["kernel"]
attrs = {{(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in spec.get("divisible_by_16", [])}}
try:
    src = ASTSource(fn=fn, signature=spec["signature"], constexprs=spec["constexprs"], attrs=attrs)
except TypeError:  # older releases: `constants`
    src = ASTSource(fn=fn, signature=spec["signature"], constants=spec["constexprs"], attrs=attrs)
k = triton.compile(src, target=GPUTarget("cuda", {cc}, 32),
                   options=dict(num_warps=spec["num_warps"], num_stages=spec["num_stages"]))
sys.stdout.write(k.asm["ttgir"])
"""


def prepipe(log: str) -> str | None:
    lines = log.split("\n")
    start = next((i for i, line in enumerate(lines) if HEADER.match(line)), None)
    if start is None:
        return None
    end = next((j for j in range(start + 1, len(lines)) if ANY.match(lines[j])), len(lines))
    body = "\n".join(lines[start + 1:end]).strip("\n")
    return body + "\n"


def main(argv):
    module = "kernels"
    if argv[:1] == ["--module"]:
        module, argv = argv[1], argv[2:]
    out, names = argv[0], argv[1:]
    sys.path.insert(0, HERE)
    import importlib
    kernels = importlib.import_module(module)
    names = names or list(kernels.DUMPS)
    for sub in ("after", "prepipe"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    for name in names:
        fname = kernels.DUMPS[name]["kernel"].__name__
        for cc in (90, 100):
            env = dict(os.environ, MLIR_ENABLE_DUMP=fname, TRITON_ALWAYS_COMPILE="1")
            env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
            proc = subprocess.run([sys.executable, "-c", CHILD.format(here=HERE, module=module, name=name, cc=cc)],
                                  env=env, capture_output=True, text=True)
            key = f"{name}_sm{cc}"
            if proc.returncode != 0 or not proc.stdout.strip():
                print(f"FAIL {key}: {proc.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            with open(os.path.join(out, "after", key + ".ttgir"), "w") as f:
                f.write(proc.stdout)
            before = prepipe(proc.stderr)
            if before is not None:
                with open(os.path.join(out, "prepipe", key + ".ttgir"), "w") as f:
                    f.write(before)
            print(f"ok   {key}{'' if before else ' (no prepipe copy)'}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
