"""What the tensor core takes: the operand dtypes of an `mma` and what each becomes (wgmma on sm_90a,
tcgen05.mma on sm_100a), and which of an mma's operands lie K-major. One home for facts the importer
(ttgir/kmajor.py, ttgir/compute.py) and emit-cuda (emit/model.py, emit/runtime.py) both read.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import EmitError
from .ir import Graph, Op

@dataclass(frozen=True)
class MmaInputs:
    """What the tensor core does with one input dtype (PTX ISA, wgmma.mma_async and tcgen05.mma).

    k: the K of one instruction (32 bytes of each operand row: m64nNk16 for 16-bit inputs, k32 for
    8-bit, k8 for f32 ones, which the tensor core reads as TF32: their low 13 mantissa bits are not
    used); acc: the accumulator dtype; ptx: the wgmma type name; kind: tcgen05.mma's .kind;
    code: the a/b format field of its instruction descriptor; transposable: whether an operand may
    be MN-major (wgmma transposes only f16 and bf16 operands, so 8-bit and TF32 ones are K-major, both
    of them read from shared memory); n_step: the N of a wgmma in steps of this many (and 8, 16 or 24);
    narrow: the other accumulator dtypes the tensor core takes for these inputs (wgmma
    m64nNk16.f16.f16.f16: f16 accumulators packed two to a register, half the f32 ones' registers;
    `tl.dot(a, b, acc, out_dtype=tl.float16)`). emit-cuda emits them on sm_90a (ops._wgmma).
    """

    k: int
    acc: str
    ptx: str
    kind: str
    code: int
    transposable: bool
    n_step: int = 8
    narrow: tuple[str, ...] = ()

    def wgmma_n_ok(self, n: int) -> bool:
        return 8 <= n <= 256 and (n % self.n_step == 0 or n in (8, 16, 24))


MMA_INPUTS = {
    "f16": MmaInputs(16, "f32", "f16", "f16", 0, True, narrow=("f16",)),
    "bf16": MmaInputs(16, "f32", "bf16", "f16", 1, True),
    "f8e4m3": MmaInputs(32, "f32", "e4m3", "f8f6f4", 0, False),
    "f8e5m2": MmaInputs(32, "f32", "e5m2", "f8f6f4", 1, False),
    "i8": MmaInputs(32, "i32", "s8", "i8", 1, False, n_step=16),  # signed 8-bit; N = 8, 16, 24, 32, 48, ...
    # f32 operands: TF32 products (Triton's tl.dot of fp32 tensors, input_precision="tf32"); kind::tf32's
    # a/b format is 2 (PTX ISA, tcgen05 instruction descriptor: F16 = 0, BF16 = 1, TF32 = 2)
    "f32": MmaInputs(8, "f32", "tf32", "tf32", 2, False),
}


FP8 = ("f8e4m3", "f8e5m2")  # the dtypes whose mmas take a and b of either (wgmma .e4m3.e5m2, kind::f8f6f4)


def operand_majors(graph: Graph, op: Op) -> tuple[int, bool, bool]:
    """(K, a K-major, b K-major) of an `mma` whose shapes agree (mma_shape's rules: the shapes, else
    `transpose_a` / `transpose_b`, else whether a is data). An EmitError where an attribute contradicts
    the shapes."""
    a, b = (graph.operand_type(o) for o in op.operands[:2])
    m, n = op.type.shape
    a_kmajor = a.shape[0] == m
    said_a = op.attr("transpose_a")
    if said_a is not None and a.shape[0] != a.shape[1] and said_a == a_kmajor:
        raise EmitError(f"op '{op.name}': transpose_a = {str(said_a).lower()}, but a is {a.shape[0]}x{a.shape[1]} "
                        f"for a result of {m} rows")
    if said_a is not None:
        a_kmajor = not said_a
    k = a.shape[1] if a_kmajor else a.shape[0]
    nk, kn = b.shape == (n, k), b.shape == (k, n)
    said = op.attr("transpose_b")
    if nk != kn and said is not None and said != nk:
        raise EmitError(f"op '{op.name}': transpose_b = {str(said).lower()}, but b is {b.shape[0]}x{b.shape[1]} "
                        f"for a {m}x{n} result with K = {k}")
    if nk != kn:
        kmajor = nk
    elif said is not None:
        kmajor = said
    else:
        producer = graph.by_name.get(op.operands[0].name)
        kmajor = producer is None or producer.opcode == "load"
    return k, a_kmajor, kmajor
