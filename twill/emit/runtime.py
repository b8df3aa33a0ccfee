"""The fixed part of every emitted kernel: a small CUDA runtime that owns synchronisation.

ThunderKittens-style: this template owns the mbarrier ring buffers and their phase bits, TMA,
named barriers, register reallocation and the tensor-core instructions; the generated role bodies
only call it. The CUDA lives in cuda_runtime/ as headers one can read and edit as CUDA:
`common.cuh` is included for every target, then the target's own (`Target.runtime`: `sm90.cuh`,
wgmma and register fragments in the accumulator layout; `sm100.cuh`, tcgen05, tensor memory, a row
per thread), then `ops.cuh` (the opcodes' math over either target's fragments). The few
instructions whose operand lists depend on the tile width (wgmma, tcgen05.ld/st) are generated
here by `wgmma_wrapper` and `tmem_wrappers`, one per shape the kernel uses (the latter replace
sm100.cuh's @@TMEM_WRAPPERS@@).
The headers are fragments of one namespace, opened in common.cuh and closed in ops.cuh.

Keep this text stable: every emitted file includes it, and golden files pin it byte for byte.
"""
from __future__ import annotations

from functools import cache
from importlib.resources import files

from ..mma import MMA_INPUTS


def _part(name: str) -> str:
    """One header of cuda_runtime/, as it goes into a kernel: after a blank line."""
    return "\n" + files(__package__).joinpath("cuda_runtime", name).read_text(encoding="utf-8")


def wgmma_wrapper(n: int, dtype: str, a_regs: bool) -> str:
    """`wgmma.mma_async` m64nNkK: A from shared memory (ss) or registers (rs). f16 and bf16 (k16,
    f32 accumulators or f16 ones, transpose operands) as wgmma_wrapper16; 8-bit and TF32 inputs (both
    K-major) as wgmma_wrapper_kmajor. `dtype` is MmaShape.wrapper: the operands, `_accf16` after them for
    f16 accumulators."""
    operands, _, acc = dtype.partition("_acc")
    if operands in ("f16", "bf16"):
        return wgmma_wrapper16(n, operands, a_regs, acc or "f32")
    return wgmma_wrapper_kmajor(n, dtype, a_regs)


def wgmma_wrapper16(n: int, dtype: str, a_regs: bool, acc: str = "f32") -> str:
    """`wgmma.mma_async` m64nNk16 with f32 accumulators (N / 2 floats a thread), or f16 ones (`acc` f16:
    .f16.f16.f16, N / 4 registers of two f16 each, the pair of adjacent columns an f32 fragment holds in
    two: twill::Frag16's words): A from shared memory (ss) or registers (rs)."""
    ptx = {"f16": "f16", "bf16": "bf16"}[dtype]
    half = acc == "f16"
    nd = n // 4 if half else n // 2
    d = ", ".join(f"%{i}" for i in range(nd))
    name = f"wgmma_m64n{n}k16_{'rs' if a_regs else 'ss'}_{dtype}{'_accf16' if half else ''}"
    outs = ", ".join(f'"+{"r" if half else "f"}"(d[{i}])' for i in range(nd))
    types = f"{acc}.{ptx}.{ptx}"
    lines = [("template <int TRANS_B>" if a_regs else "template <int TRANS_A, int TRANS_B>"),
             f"__device__ __forceinline__ void {name}({'uint32_t' if half else 'float'} (&d)[{nd}], "
             + ("const uint32_t* a" if a_regs else "uint64_t a") + ", uint64_t b, int scale_d) {",
             "  asm volatile(",
             '      "{\\n\\t.reg .pred p;\\n\\t"']
    if a_regs:
        a0 = nd
        lines.append(f'      "setp.ne.b32 p, %{a0 + 5}, 0;\\n\\t"')
        lines.append(f'      "wgmma.mma_async.sync.aligned.m64n{n}k16.{types} {{{d}}}, '
                     f'{{%{a0}, %{a0 + 1}, %{a0 + 2}, %{a0 + 3}}}, %{a0 + 4}, p, 1, 1, %{a0 + 6};\\n\\t}}"')
        ins = '"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d), "n"(TRANS_B)'
    else:
        a0 = nd
        lines.append(f'      "setp.ne.b32 p, %{a0 + 2}, 0;\\n\\t"')
        lines.append(f'      "wgmma.mma_async.sync.aligned.m64n{n}k16.{types} {{{d}}}, '
                     f'%{a0}, %{a0 + 1}, p, 1, 1, %{a0 + 3}, %{a0 + 4};\\n\\t}}"')
        ins = '"l"(a), "l"(b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)'
    lines.append(f"      : {outs}")
    lines.append(f"      : {ins});")
    lines.append("}")
    return "\n".join(lines) + "\n"


def wgmma_wrapper_kmajor(n: int, dtype: str, a_regs: bool) -> str:
    """`wgmma.mma_async` of inputs read K-major only (PTX has no transpose operands for them): m64nNk32 of
    8-bit ones, e4m3 or e5m2 into f32 accumulators (`d, a, b, p, imm-scale-a, imm-scale-b`), s8 into s32
    accumulators (`d, a, b, p`); m64nNk8 of f32 ones as .tf32 into f32 accumulators (`d, a, b, p, 1, 1`).
    `dtype` is a's, or a's and b's (`f8e4m3_f8e5m2`). A in registers (rs) is four 32-bit registers a
    thread (4 8-bit values each, or one TF32 value each)."""
    a_type, _, b_type = dtype.partition("_")  # "f8e4m3_f8e5m2": a's dtype, then b's
    kind, b_kind = MMA_INPUTS[a_type], MMA_INPUTS[b_type or a_type]
    nd = n // 2
    d = ", ".join(f"%{i}" for i in range(nd))
    name = f"wgmma_m64n{n}k{kind.k}_{'rs' if a_regs else 'ss'}_{dtype}"
    integer = kind.acc == "i32"
    elem, reg = ("int32_t", "r") if integer else ("float", "f")
    types = f"{'s32' if integer else 'f32'}.{kind.ptx}.{b_kind.ptx}"
    scales = "" if integer else ", 1, 1"
    outs = ", ".join(f'"+{reg}"(d[{i}])' for i in range(nd))
    a0 = nd
    if a_regs:
        a_ops, p = f"{{%{a0}, %{a0 + 1}, %{a0 + 2}, %{a0 + 3}}}, %{a0 + 4}", a0 + 5
        ins = '"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d)'
    else:
        a_ops, p = f"%{a0}, %{a0 + 1}", a0 + 2
        ins = '"l"(a), "l"(b), "r"(scale_d)'
    lines = [f"__device__ __forceinline__ void {name}({elem} (&d)[{nd}], "
             + ("const uint32_t* a" if a_regs else "uint64_t a") + ", uint64_t b, int scale_d) {",
             "  asm volatile(",
             '      "{\\n\\t.reg .pred p;\\n\\t"',
             f'      "setp.ne.b32 p, %{p}, 0;\\n\\t"',
             f'      "wgmma.mma_async.sync.aligned.m64n{n}k{kind.k}.{types} {{{d}}}, {a_ops}, p{scales};\\n\\t}}"',
             f"      : {outs}",
             f"      : {ins});",
             "}"]
    return "\n".join(lines) + "\n"


def mma_extension(model) -> list[str]:
    """The runtime's part for 8-bit tensor-core inputs and integer accumulators, for a kernel that
    has any (an empty list otherwise, so other kernels' text does not change): cuda_fp8.h (the
    fp8 element types, included outside the namespace), then mma8_sm90.cuh or mma8_sm100.cuh
    (the s32 accumulator fragments, the 8-bit tcgen05.mma kinds)."""
    types = [v.type for v in model.graph.values.values()] + [op.type for op in model.graph.ops if op.type]
    types += [op.type for op in model.graph.epilogue.ops if op.type]  # an fp8 output (the FP8 GEMM's scaled C)
    eight_bit = any(t.dtype in ("f8e4m3", "f8e5m2") for t in types)
    wide_int = any(t.dtype == "i32" and len(t.shape) == 2 for t in types)
    if not (eight_bit or wide_int or any(s.inputs.k == 32 for s in model.mma_shape.values())):
        return []
    part = _part(model.target.mma8_runtime)
    return ["}  // namespace twill\n\n#include <cuda_fp8.h>\n\nnamespace twill {" + part]


def tf32_part(model) -> list[str]:
    """tcgen05.mma kind::tf32 (tf32_sm100.cuh) for a kernel with an mma of f32 operands on a target with
    tensor memory; [] otherwise (sm_90a's wgmma .tf32 wrappers are generated per shape: wgmma_wrapper)."""
    if not model.target.tensor_memory or not any(s.inputs.kind == "tf32" for s in model.mma_shape.values()):
        return []
    return [_part("tf32_sm100.cuh").lstrip("\n")]


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


@cache
def target_part(target) -> str:
    """The target's own header (sm90.cuh, sm100.cuh), its tcgen05.ld/st wrappers filled in."""
    return _part(target.runtime).replace("@@TMEM_WRAPPERS@@", tmem_wrappers())


def causal_part(target) -> str:
    """The target's causal mask (only in kernels with a causal_mask, ragged.py)."""
    return _part(target.causal_runtime)


def band_part(target) -> str:
    """The target's mask of a band of keys (only in kernels whose causal_mask has a band other than the
    causal one: ragged.py, ttgir/band.py)."""
    return _part(target.band_runtime)


def tail_part(target) -> str:
    """mask_tail (only in kernels with a tail_mask, or a partial-tile mask on sm_100a: ragged.py)."""
    return _part(target.tail_runtime)


def tail16_part(target) -> str:
    """The partial-tile mask of a 16-bit register tile (only in kernels whose rowmax or exp2 reads a tile loaded with
    {fill = -inf} from shared memory: ragged._filled_read)."""
    return _target_part("tail16", target)


def _target_part(stem: str, target) -> str:
    """The part STEM_sm90.cuh or STEM_sm100.cuh: the target's own form of a runtime part."""
    return _part(f"{stem}_{target.runtime.split('.')[0]}.cuh")


def gather_part(target) -> str:
    """gather_rows (only in kernels whose epilogue has a gather: gather.py)."""
    return _target_part("gather", target)


def transposed_part(target) -> str:
    """frag_to_global_t(_clip): a carry's {column_major = true} output written transposed (stores.py)."""
    return _target_part("transposed", target)


def bits_part(target) -> str:
    """Bits: comparison tiles held as one bit an element (only in kernels that hold one: bitmasks.py; sm_90a)."""
    return _target_part("bits", target)


def scalar_atomic_part(target) -> str:
    """rows_max (the target's), warp_max, atomic_max_float: a scalar atomic output (scalar_atomic.py)."""
    from .scalar_atomic import HEADERS
    return "".join(_part(name) for name in HEADERS[target.runtime])


def anypitch_part(target) -> str:
    """bulk_rows and rows_to_frag: a load's rows at any pitch (anypitch.py; sm_90a's register fragments)."""
    return _target_part("anypitch", target)


def libm_part(opcodes) -> str:
    """op_OPCODE for each of the math library's functions a kernel uses (twill/vocab.py's LIBM), as
    vocab.cuh's TWILL_UNARY writes its ops: accurate CUDA functions (erff, asinf, ...), in the kernels that
    use them only."""
    from ..vocab import LIBM
    return "".join(
        f"// {op}: {LIBM[op]} of each element (vocab.LIBM)\n"
        "template <typename Out, typename X>\n"
        f"__device__ __forceinline__ void op_{op}(Out& out, const X& x) {{\n"
        "  constexpr bool R = is_rows<Out>::value;\n"
        f"  for_each(out, [&](auto... e) {{ return {LIBM[op]}(at<R>(x, e...)); }});\n"
        "}\n" for op in sorted(set(opcodes)) if op in LIBM)


@cache
def vocab_part(target) -> str:
    """The op vocabulary's extension (twill/vocab.py), after OPS, for the kernels that use it: the
    target's column vectors, row minima and scans, then the shared math."""
    return "".join(_part(name) for name in target.vocab_runtime)


COMMON = _part("common.cuh")
OPS = _part("ops.cuh")
