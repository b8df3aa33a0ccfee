"""The fixed part of every emitted kernel: a small CUDA runtime that owns synchronisation.

ThunderKittens-style: this template owns the mbarrier ring buffers and their phase bits, TMA,
named barriers, register reallocation and the tensor-core instructions; the generated role bodies
only call it. The CUDA lives in cuda_runtime/ as headers one can read and edit as CUDA:
`common.cuh` is included for every target, then `sm90.cuh` (wgmma, register fragments in the
accumulator layout) or `sm100.cuh` (tcgen05, tensor memory, a row per thread), then `ops.cuh`
(the opcodes' math over either target's fragments). The few instructions whose operand lists
depend on the tile width (wgmma, tcgen05.ld/st) are generated here by `wgmma_wrapper` and
`tmem_wrappers`, one per shape the kernel uses (the latter replace sm100.cuh's @@TMEM_WRAPPERS@@).
The headers are fragments of one namespace, opened in common.cuh and closed in ops.cuh.

Keep this text stable: every emitted file includes it, and golden files pin it byte for byte.
"""
from __future__ import annotations

from importlib.resources import files


def _part(name: str) -> str:
    """One header of cuda_runtime/, as it goes into a kernel: after a blank line."""
    return "\n" + files(__package__).joinpath("cuda_runtime", name).read_text(encoding="utf-8")


def wgmma_wrapper(n: int, dtype: str, a_regs: bool) -> str:
    """`wgmma.mma_async` m64nNk16 with f32 accumulators: A from shared memory (ss) or registers (rs)."""
    ptx = {"f16": "f16", "bf16": "bf16"}[dtype]
    nd = n // 2
    d = ", ".join(f"%{i}" for i in range(nd))
    name = f"wgmma_m64n{n}k16_{'rs' if a_regs else 'ss'}_{dtype}"
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(nd))
    lines = [("template <int TRANS_B>" if a_regs else "template <int TRANS_A, int TRANS_B>"),
             f"__device__ __forceinline__ void {name}(float (&d)[{nd}], "
             + ("const uint32_t* a" if a_regs else "uint64_t a") + ", uint64_t b, int scale_d) {",
             "  asm volatile(",
             '      "{\\n\\t.reg .pred p;\\n\\t"']
    if a_regs:
        a0 = nd
        lines.append(f'      "setp.ne.b32 p, %{a0 + 5}, 0;\\n\\t"')
        lines.append(f'      "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptx}.{ptx} {{{d}}}, '
                     f'{{%{a0}, %{a0 + 1}, %{a0 + 2}, %{a0 + 3}}}, %{a0 + 4}, p, 1, 1, %{a0 + 6};\\n\\t}}"')
        ins = '"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d), "n"(TRANS_B)'
    else:
        a0 = nd
        lines.append(f'      "setp.ne.b32 p, %{a0 + 2}, 0;\\n\\t"')
        lines.append(f'      "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptx}.{ptx} {{{d}}}, '
                     f'%{a0}, %{a0 + 1}, p, 1, 1, %{a0 + 3}, %{a0 + 4};\\n\\t}}"')
        ins = '"l"(a), "l"(b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)'
    lines.append(f"      : {outs}")
    lines.append(f"      : {ins});")
    lines.append("}")
    return "\n".join(lines) + "\n"


def tmem_wrappers() -> str:
    """tcgen05.ld / tcgen05.st of 32 consecutive 32-bit columns (shape 32x32b, x32)."""
    regs = ", ".join(f"%{i}" for i in range(32))
    outs = ", ".join(f'"=f"(r[{i}])' for i in range(32))
    ins = ", ".join(f'"f"(r[{i}])' for i in range(32))
    regs_st = ", ".join(f"%{i + 1}" for i in range(32))
    return (
        "__device__ __forceinline__ void tmem_ld32(uint32_t taddr, float* r) {\n"
        f'  asm volatile("tcgen05.ld.sync.aligned.32x32b.x32.b32 {{{regs}}}, [%32];"\n'
        f"               : {outs}\n"
        '               : "r"(taddr) : "memory");\n'
        "}\n\n"
        "__device__ __forceinline__ void tmem_st32(uint32_t taddr, const float* r) {\n"
        f'  asm volatile("tcgen05.st.sync.aligned.32x32b.x32.b32 [%0], {{{regs_st}}};"\n'
        f'               :: "r"(taddr), {ins}\n'
        '               : "memory");\n'
        "}\n"
    )


COMMON = _part("common.cuh")
SM90 = _part("sm90.cuh")
SM100 = _part("sm100.cuh").replace("@@TMEM_WRAPPERS@@", tmem_wrappers())
OPS = _part("ops.cuh")
# The op vocabulary's extension (twill/vocab.py), after OPS, for the kernels that use it: the
# target's column vectors, row minima and scans, then the shared math.
VOCAB = {"sm_90a": _part("vocab_sm90.cuh") + _part("vocab.cuh"), "sm_100a": _part("vocab_sm100.cuh") + _part("vocab.cuh")}
