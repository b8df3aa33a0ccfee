"""What the emitted kernel is made of, read off a schedule: roles, values, tiles and global tensors.

This module holds the frozen data, `KernelModel` and its parts, and the views the emitter reads;
`build_model(schedule, machine)` (build.py) makes one; nothing here writes CUDA text. A model
states, in the graph's own terms:

- its target (target.py);
- the warp roles: the schedule's (joint stage) or, for a `--swp-only` schedule, a default warp
  specialization (a producer warp for the loads, one consumer role for everything else);
- where each role's warps sit (1-warp roles share a padded warpgroup, since `setmaxnreg` acts on a
  whole warpgroup) and the register budget each warpgroup asks for (placement.py);
- the layout of every mma operand (`b` stored N x K, "K-major", or K x N, "MN-major");
- which global tensor every input, load, output carry and store reads or writes, and along which
  grid axis each tile dimension moves (`m`: blockIdx.x, `n`: blockIdx.y, `loop`: the loop counter,
  `fixed`: the whole extent is one tile; tensors.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from ..costs import mma_mismatch
from ..errors import Diagnostic, EmitError, InputError
from ..ir import Graph, Op, TensorType
from ..machine import Machine
from ..mma import FP8, MMA_INPUTS, operand_majors
from ..registers import launch_registers
from ..schedule import Schedule
from .target import Target

LOAD_OPCODES = ("load",)


_CXX_WORDS = frozenset("""
    alignas alignof and asm auto bool break case catch char class const constexpr continue decltype default
    delete do double else enum explicit export extern false float for friend goto if inline int long
    mutable namespace new noexcept not nullptr operator or private protected public register return short
    signed sizeof static struct switch template this throw true try typedef typeid typename union unsigned
    using virtual void volatile while xor args sm tm n j it lane wgi warp warpgroup kernel main
""".split())


# Names the emitted device code declares or uses unqualified where the graph's values become
# locals (the role functions, the store helpers, the kernel): a value's local is renamed past them.
_DEVICE_WORDS = frozenset("""
    Args Maps Smem Problem F T INFINITY size_t uintptr_t uint32_t uint64_t int8_t int16_t int32_t int64_t
    threadIdx blockIdx blockDim gridDim warpSize
    b batch c c0 cb dst exp2_scale out_scale f i ib idle_parts inputs_free inputs_ready iters kk ld leader loop_tail m_extent mb n_extent nc r0
    raster_group row0 rows_left t
    tile tile_at tiles tiles_m tiles_n tmem_base smem_raw std
""".split())
_DEVICE_PREFIXES = re.compile(r"^(cuda|cu[A-Z]|CU|__|k[A-Z]|twill|role_|store_(out|store)_|hook_)")


def local(name: str) -> str:
    """The C++ local a graph value becomes in the device code: its `ident`, with one more
    underscore where that is a name the emitted code itself uses there (a value named `c` or
    `tile`). Shared-memory fields and the host's Problem keep `ident`, which is stable."""
    out = ident(name)
    return out + "_" if out in _DEVICE_WORDS or _DEVICE_PREFIXES.match(out) else out


def ident(name: str) -> str:
    """A C++ identifier for a graph name (`m_new` stays, `x.1` becomes `x_1`, `do` becomes `do_`:
    C++ keywords and the names the emitted code itself uses get a trailing underscore)."""
    out = re.sub(r"[^A-Za-z0-9_]", "_", name)
    out = out if re.match(r"[A-Za-z_]", out) else f"v_{out}"
    return out + "_" if out in _CXX_WORDS else out


# -- roles -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RoleInfo:
    name: str
    warps: int
    registers: int
    ops: tuple[str, ...]
    first_warp: int = 0

    @property
    def ident(self) -> str:
        return ident(self.name)

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def is_warpgroup(self) -> bool:
        return self.warps % 4 == 0

    @property
    def warpgroups(self) -> int:
        return self.warps // 4


@dataclass(frozen=True)
class WarpGroup:
    """One warpgroup of the CTA: the roles living in it and the `setmaxnreg` budget it asks for."""

    index: int
    roles: tuple[str, ...]
    registers: int
    small: bool = False  # holds 1-warp roles
    copy: int = 0  # > 0: a copy of the computing role's warpgroup that takes every other tile (copies.py)


# -- tiles and tensors -------------------------------------------------------------------------

@dataclass(frozen=True)
class MmaShape:
    m: int
    n: int
    k: int
    b_kmajor: bool  # b stored N x K (a @ b^T) rather than K x N (a @ b)
    dtype: str  # input dtype
    accumulate: bool  # has a third operand (c)
    a_kmajor: bool = True  # a stored M x K; False: stored K x M and used transposed (P^T dO)
    b_dtype: str = ""  # b's dtype where it is not a's (fp8: e4m3 x e5m2)
    acc: str = ""  # the accumulator's dtype where it is not the inputs' kind.acc (one of kind.narrow: f16)

    @property
    def inputs(self) -> "MmaInputs":
        return MMA_INPUTS[self.dtype]

    @property
    def b_inputs(self) -> "MmaInputs":
        return MMA_INPUTS[self.b_dtype or self.dtype]

    @property
    def operands(self) -> str:
        """The input dtypes as the runtime's wrapper names say them: `f16`, `f8e4m3_f8e5m2`."""
        return f"{self.dtype}_{self.b_dtype}" if self.b_dtype else self.dtype

    @property
    def wrapper(self) -> str:
        """The runtime's wrapper suffix: the operands, then `_acc` and the accumulator's dtype where it is
        a narrow one (`f16_accf16`: wgmma .f16.f16.f16)."""
        return f"{self.operands}_acc{self.acc}" if self.acc else self.operands


# Registers one wgmma takes besides its f32 accumulators (descriptors, a's fragment, the predicate):
# ptxas asked for 154 to compile an m64n256k16 (128 accumulators) at a launch cap of 128.
WGMMA_REGISTERS = 32

DIM_LABELS = ("rows", "cols")  # a tile's two dimensions, as the launcher's fields name them


@dataclass(frozen=True)
class GlobalTensor:
    """A tensor in global memory: `[batch][rows][cols]`, moved through by tiles of `tile`."""

    name: str  # C++ identifier
    value: str  # graph value it carries
    kind: str  # "input" | "load" | "output" | "store"
    dtype: str
    tile: tuple[int, int]  # (rows, cols) of one tile; a rank-1 value is (1, n)
    axes: tuple[str, str]  # per dimension: "m" | "n" | "loop" | "fixed"
    per_iteration: bool = False  # varies with the loop but has no loop dimension: one tile per iteration
    rank: int = 2
    # a load's view of its argument (its .tir attributes): the tile's column j is element
    # col_stride * j + col_offset of a row `tile[1]` = cols * col_stride wide; a per-iteration tile's
    # row is the iteration over iter_div
    col_stride: int = 1
    col_offset: int = 0
    iter_div: int = 1
    column_major: bool = False  # the kernel's argument is the transpose of this layout ({column_major = true})
    # a load's {transposed = true} (ttgir/kmajor.py): the caller's tensor is this layout's transpose, which the
    # binding hands the kernel as its .mT (copied into this layout where that is not how it lies)
    transposed: bool = False
    # a load's or input's {batch = none}: one tensor for every batch entry, read at entry 0 (batch_groups.py)
    unbatched: bool = False

    @property
    def tile_bytes(self) -> int:
        return self.tile[0] * self.tile[1] * dtype_bytes(self.dtype)

    def placed_dims(self) -> list[tuple[int, str]]:
        """The dimensions that move with the grid, as (index, "rows" | "cols"). Each has a runtime
        placement: the tile of CTA b starts at b * step + offset (by default step = the tile's size
        and offset = 0, a tensor of its own; sub-tiles of one tensor share it with a larger step)."""
        first = 1 if self.rank == 1 else 0
        return [(d, DIM_LABELS[d]) for d in range(first, 2) if self.axes[d] in ("m", "n")]


def plain_box(t: GlobalTensor) -> bool:
    """A tensor moved in one unswizzled TMA box per tile: a row vector, or a one-row tile (see
    swizzle_bytes: a tile of fewer than 8 rows is not swizzled)."""
    return t.rank == 1 or t.tile[0] == 1


def dtype_bytes(dtype: str) -> int:
    from ..ir import DTYPE_BITS
    return max(1, DTYPE_BITS[dtype] // 8)


def swizzle_bytes(line: int, rows: int = 8) -> int:
    """The swizzle of a shared-memory tile of `rows` rows of `line` bytes: the widest of 128, 64
    and 32 bytes that divides a row, or 16 (none). A swizzle permutes 16-byte chunks by the bits
    of their shared-memory address above the row (TMA reads the address, not the row), so it is
    what the readers expect only where every column block and ring slot starts on a whole
    swizzle atom of 8 rows: a tile whose rows are not a multiple of 8 (a [1, N] column vector)
    is not swizzled. The runtime's `Tile` computes the same."""
    if rows % 8:
        return 16
    return next(sw for sw in (128, 64, 32, 16) if line % sw == 0)


@dataclass(frozen=True)
class ValueInfo:
    name: str
    type: TensorType
    producer: str | None  # op name; None for an input
    role: str | None  # role of the producer (None for an input)
    kind: str  # "input" | "result"


@dataclass(frozen=True)
class Use:
    """`op` (on `role`) reads `value` of the iteration `distance` earlier, as operand `index`."""

    value: str
    op: str
    role: str
    distance: int
    index: int


@dataclass(frozen=True)
class KernelModel:
    schedule: Schedule
    graph: Graph
    machine: Machine
    arch: str  # the machine's name for it: "sm_90a", "sm_100a"
    target: Target  # what emit-cuda writes for that arch (target.py)
    roles: tuple[RoleInfo, ...]
    warpgroups: tuple[WarpGroup, ...]
    default_roles: bool  # derived here (swp-only schedule) rather than read from the schedule
    role_of: tuple[tuple[str, str], ...]  # op -> role
    tensors: tuple[GlobalTensor, ...]
    mma: tuple[tuple[str, MmaShape], ...]
    stages: int
    normalizers: tuple[tuple[str, str], ...]  # carry -> carry that divides it at the end (online softmax)
    ctas_per_sm: int = 1  # CTAs an SM runs at once (occupancy.py): __launch_bounds__, the persistent grid
    ctas_limit: int = 0  # at most this many (emit-cuda --ctas-per-sm); 0: as many as fit
    tile_copies: int = 1  # warpgroups of the computing role taking a persistent CTA's tiles in turn (copies.py)
    one_tile_per_cta: bool = False  # no kernel<true> (the ptxas loop's choice where it compiled worse: ptxas_loop.py)
    hidden_position: bool = False  # kernel<false>'s ring position 0 hidden from the compiler (ptxas_loop.py)
    tile_args: bool = False  # kernel<true> reads Args afresh for each tile (kernel.py `_tiles`; ptxas_loop.py)
    smem_parts: int = 1  # kernels whose Smem one CTA lays side by side (a sequence's loops: seqfuse.py, streams.py)
    load_rings: str = "solved"  # load rings: the solve's depth, or "latency": deepened for the TMA latency (streams.py)
    any_pitch: bool = False  # loads whose rows are not 16 bytes apart read by bulk copies (anypitch.py; emit-cuda --any-pitch)

    # -- views ---------------------------------------------------------------------------------
    @cached_property
    def role(self) -> dict[str, RoleInfo]:
        return {r.name: r for r in self.roles}

    @cached_property
    def op_role(self) -> dict[str, str]:
        return dict(self.role_of)

    @cached_property
    def mma_shape(self) -> dict[str, MmaShape]:
        return dict(self.mma)

    @cached_property
    def ops(self) -> dict[str, Op]:
        return self.graph.by_name

    @cached_property
    def sched(self):
        return self.schedule.by_name

    @property
    def threads(self) -> int:
        return 128 * len(self.warpgroups)

    @property
    def launch_registers(self) -> int:
        """Registers per thread the CTA is launched with (`ctas_per_sm` CTAs to an SM)."""
        return launch_registers(self.machine.limits, self.threads, self.ctas_per_sm)

    def wgmma_n(self, shape: MmaShape) -> int:
        """The N of each wgmma instruction an mma of `shape` is issued as. ptxas compiles one
        instruction within the registers a thread is launched with, whatever setmaxnreg gives its
        warpgroup later: an m64n256 (128 accumulator registers) in a CTA of 512 threads (128 each)
        is a fatal C7602. Such an N is halved, each half a wgmma into its half of the fragment."""
        cap = min(self.machine.limits.registers_per_thread, self.launch_registers)
        n, step = shape.n, 8 if shape.b_kmajor else 64  # an N-major B is addressed in 64-column blocks
        while (n // 2 + WGMMA_REGISTERS > cap and n % 2 == 0 and (n // 2) % step == 0
               and shape.inputs.wgmma_n_ok(n // 2)):
            n //= 2
        return n

    def stage(self, op: str) -> int:
        return self.sched[op].start // self.schedule.ii

    def residue(self, op: str) -> int:
        return self.sched[op].start % self.schedule.ii

    @cached_property
    def values(self) -> dict[str, ValueInfo]:
        out = {v.name: ValueInfo(v.name, v.type, None, None, "input") for v in self.graph.inputs}
        for op in self.graph.ops:
            if op.has_result and op.type is not None:
                out[op.name] = ValueInfo(op.name, op.type, op.name, self.op_role[op.name], "result")
        return out

    @cached_property
    def carry_source(self) -> dict[str, str]:
        """carry name -> the body result it takes each iteration."""
        return dict(self.graph.yields)

    @cached_property
    def carry_init(self) -> dict[str, str]:
        return {c.name: c.init or "0" for c in self.graph.carries}

    def resolve(self, operand) -> tuple[str, int]:
        """An operand as (value, distance): a carry reads its yielded result one iteration back."""
        if operand.distance is not None:
            return operand.name, operand.distance
        if operand.name in self.carry_source and operand.name in self.graph.values:
            return self.carry_source[operand.name], 1
        return operand.name, 0

    @cached_property
    def uses(self) -> dict[str, tuple[Use, ...]]:
        out: dict[str, list[Use]] = {}
        for op in self.graph.ops:
            for i, operand in enumerate(op.operands):
                value, dist = self.resolve(operand)
                out.setdefault(value, []).append(Use(value, op.name, self.op_role[op.name], dist, i))
        return {k: tuple(v) for k, v in out.items()}

    def carry_of(self, value: str) -> str | None:
        for carry, src in self.graph.yields:
            if src == value:
                return carry
        return None

    def is_load(self, op: str) -> bool:
        return self.ops[op].opcode in LOAD_OPCODES

    @cached_property
    def ragged(self):
        """How a partial last tile is handled (ragged.Ragged)."""
        from .ragged import plan
        return plan(self)

    @cached_property
    def tensor(self) -> dict[str, GlobalTensor]:
        """By C++ name: a load's or a store's is its op's, an output's is out_CARRY."""
        return {t.name: t for t in self.tensors}


# -- mma shapes --------------------------------------------------------------------------------

def mma_shape(graph: Graph, op: Op) -> MmaShape:
    """The GEMM an `mma a, b[, c]` does: result [M, N], a [M, K], b [N, K] or [K, N].

    When b is square the shapes cannot tell: `{transpose_b = true}` says b is N x K (a @ b^T),
    `false` K x N (a @ b); likewise `{transpose_a = true}` says a square a is K x M (a^T @ b).
    Without it, b is N x K when a is data (an input or a loaded tile: the Q K^T of attention) and
    K x N when a is computed in the loop (the P V of attention). A third operand is the
    accumulator the product is added to.
    """
    if len(op.operands) not in (2, 3) or op.type is None or len(op.type.shape) != 2:
        raise EmitError(f"op '{op.name}': mma takes a, b[, c] and gives a rank-2 tile")
    a, b = (graph.operand_type(o) for o in op.operands[:2])
    if a is None or b is None or len(a.shape) != 2 or len(b.shape) != 2:
        raise EmitError(f"op '{op.name}': mma operands must be rank-2 tiles")
    if why := mma_mismatch(graph, op):
        raise EmitError(f"op '{op.name}': {why}")
    m, n = op.type.shape
    k, a_kmajor, kmajor = operand_majors(graph, op)
    _check_dtypes(op, a, b, kmajor, a_kmajor)
    return MmaShape(m, n, k, kmajor, a.dtype, len(op.operands) == 3, a_kmajor,
                    b.dtype if b.dtype != a.dtype else "",
                    op.type.dtype if op.type.dtype != MMA_INPUTS[a.dtype].acc else "")


def _check_dtypes(op: Op, a: TensorType, b: TensorType, b_kmajor: bool, a_kmajor: bool) -> None:
    """a and b of one dtype of MMA_INPUTS (or of two fp8 ones; f32 ones are TF32 products), the result in its
    accumulator dtype (or a narrow one the tensor core takes: f16 of f16 inputs); an 8-bit or f32 operand
    K-major (a stored M x K, b stored N x K: a @ b^T)."""
    mixed_fp8 = a.dtype in FP8 and b.dtype in FP8
    if (a.dtype != b.dtype and not mixed_fp8) or a.dtype not in MMA_INPUTS:
        raise EmitError(Diagnostic(
            f"op '{op.name}': emit-cuda's mma takes a and b of one dtype of "
            f"{', '.join(d + (' (TF32)' if d == 'f32' else '') for d in MMA_INPUTS)}, or of "
            f"two fp8 ones (got {a.dtype}, {b.dtype})", op.span, "convert one operand to the other's dtype first"))
    kind = MMA_INPUTS[a.dtype]
    if op.type.dtype != kind.acc and op.type.dtype not in kind.narrow:
        hint = ("make the mma's result f32; a carry can still be written out in f16 with {output = f16}"
                if kind.acc == "f32" else f"make the mma's result {kind.acc}")
        raise EmitError(Diagnostic(f"op '{op.name}': emit-cuda's mma accumulates in {kind.acc} "
                                   f"(the result is {op.type.dtype}) for {a.dtype} inputs", op.span, hint))
    if not kind.transposable and not (a_kmajor and b_kmajor):
        which = "a" if not a_kmajor else "b"
        raise EmitError(Diagnostic(
            f"op '{op.name}': the tensor core reads {a.dtype} operands K-major only, and {which} is "
            f"{'K x M' if which == 'a' else 'K x N'}", op.span,
            "store the operand with K as its last dimension in global memory (a: M x K, b: N x K, "
            "{transpose_b = true} where b is square), or type its load so with {transposed = true}, and the "
            "binding copies the caller's tensor transposed (`twill import` does for a Triton kernel): TMA "
            "copies a tile as it lies, where Triton's own copy to shared memory may transpose it"))


def rastered(model: "KernelModel") -> bool:
    """Whether the grid's order matters for L2: some streamed tile follows the output rows and
    another the columns, so CTAs that run together can share both. Attention streams K and V,
    which follow neither (V's columns are the whole head dimension): it keeps blockIdx order."""
    streamed = [t for t in model.tensors if t.kind == "load"]
    return any(t.axes[0] == "m" for t in streamed) and any(t.axes[1] == "n" for t in streamed)
