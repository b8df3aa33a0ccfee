"""Dump the TTGIR of bench/seq/kernels.py's kernels for sm_90 and sm_100, after Triton's pipeliner
(k.asm["ttgir"]) and before it (the IR printed before TritonGPUAssignLatencies, MLIR_ENABLE_DUMP=1),
into tests/data/seq/NAME_smCC.ttgir and NAME_smCC.prepipe.ttgir. Needs Triton (3.9: /tmp/tri39),
no GPU:  TRITON_DEFAULT_FP_FUSION=1 /tmp/tri39/bin/python bench/seq/gen.py [NAME ...]
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "data", "seq")


def one(name: str, cc: int) -> None:
    sys.path.insert(0, HERE)
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    import kernels
    spec = kernels.DUMPS[name]
    fn = spec["kernel"]
    attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in spec.get("divisible_by_16", [])}
    src = ASTSource(fn=fn, signature=spec["signature"], constexprs=spec["constexprs"], attrs=attrs)
    k = triton.compile(src, target=GPUTarget("cuda", cc, 32),
                       options=dict(num_warps=spec["num_warps"], num_stages=spec["num_stages"]))
    with open(os.path.join(OUT, f"{name}_sm{cc}.ttgir"), "w") as f:
        f.write(k.asm["ttgir"])


def main(names):
    os.makedirs(OUT, exist_ok=True)
    sys.path.insert(0, HERE)
    import kernels
    for name in names or list(kernels.DUMPS):
        for cc in (90, 100):
            env = dict(os.environ, TRITON_ALWAYS_COMPILE="1", TRITON_DEFAULT_FP_FUSION="1")
            # after the pipeliner: this process's compile; before it: the dump of a second compile
            subprocess.run([sys.executable, __file__, "--one", name, str(cc)], env=env, check=True)
            env.update(MLIR_ENABLE_DUMP="1")
            log = subprocess.run([sys.executable, __file__, "--one", name, str(cc)], env=env, check=True,
                                 capture_output=True, text=True).stderr
            marker = "// -----// IR Dump Before TritonGPUAssignLatencies"
            start = log.find(marker)
            if start < 0:
                raise SystemExit(f"{name} sm{cc}: no dump before TritonGPUAssignLatencies")
            end = log.find("// -----// IR Dump", start + len(marker))
            with open(os.path.join(OUT, f"{name}_sm{cc}.prepipe.ttgir"), "w") as f:
                f.write(log[start:end if end > 0 else None].split("\n", 1)[1].strip() + "\n")
            print(f"{name} sm{cc}: ok")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        one(sys.argv[2], int(sys.argv[3]))
    else:
        main(sys.argv[1:])
