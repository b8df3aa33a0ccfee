"""What the emitted kernel is made of, read off a schedule: roles, values, tiles and global tensors.

`build_model(schedule, machine)` returns a frozen `KernelModel`; nothing here writes CUDA text. It
decides, in the graph's own terms:

- the warp roles: the schedule's (joint stage) or, for a `--swp-only` schedule, a default warp
  specialization (a producer warp for the loads, one consumer role for everything else);
- where each role's warps sit (1-warp roles share a padded warpgroup, since `setmaxnreg` acts on a
  whole warpgroup) and the register budget each warpgroup asks for;
- the layout of every mma operand (`b` stored N x K, "K-major", or K x N, "MN-major");
- which global tensor every input, load, output carry and store reads or writes, and along which
  grid axis each tile dimension moves (`m`: blockIdx.x, `n`: blockIdx.y, `loop`: the loop counter,
  `fixed`: the whole extent is one tile).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property

from ..costs import mma_mismatch
from ..errors import Diagnostic, InputError
from ..ir import Graph, Op, TensorType
from ..machine import Machine
from ..schedule import Schedule

LOAD_OPCODES = ("load",)


class EmitError(InputError):
    """A schedule that emit-cuda cannot turn into a kernel (exit 2, with the reason)."""


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
    b batch c c0 cb exp2_scale f i ib inputs_free inputs_ready iters kk leader loop_tail mb nc r0 raster_group row0 t
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


@dataclass(frozen=True)
class MmaInputs:
    """What the tensor core does with one input dtype (PTX ISA, wgmma.mma_async and tcgen05.mma).

    k: the K of one instruction (32 bytes of each operand row: m64nNk16 for 16-bit inputs, k32 for
    8-bit); acc: the accumulator dtype; ptx: the wgmma type name; kind: tcgen05.mma's .kind;
    code: the a/b format field of its instruction descriptor; transposable: whether an operand may
    be MN-major (wgmma transposes only f16 and bf16 operands, so 8-bit ones are K-major, both of
    them read from shared memory); n_step: the N of a wgmma in steps of this many (and 8, 16 or 24).
    """

    k: int
    acc: str
    ptx: str
    kind: str
    code: int
    transposable: bool
    n_step: int = 8

    def wgmma_n_ok(self, n: int) -> bool:
        return 8 <= n <= 256 and (n % self.n_step == 0 or n in (8, 16, 24))


MMA_INPUTS = {
    "f16": MmaInputs(16, "f32", "f16", "f16", 0, True),
    "bf16": MmaInputs(16, "f32", "bf16", "f16", 1, True),
    "f8e4m3": MmaInputs(32, "f32", "e4m3", "f8f6f4", 0, False),
    "f8e5m2": MmaInputs(32, "f32", "e5m2", "f8f6f4", 1, False),
    "i8": MmaInputs(32, "i32", "s8", "i8", 1, False, n_step=16),  # signed 8-bit; N = 8, 16, 24, 32, 48, ...
}


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

    @property
    def tile_bytes(self) -> int:
        return self.tile[0] * self.tile[1] * dtype_bytes(self.dtype)

    def placed_dims(self) -> list[tuple[int, str]]:
        """The dimensions that move with the grid, as (index, "rows" | "cols"). Each has a runtime
        placement: the tile of CTA b starts at b * step + offset (by default step = the tile's size
        and offset = 0, a tensor of its own; sub-tiles of one tensor share it with a larger step)."""
        first = 1 if self.rank == 1 else 0
        return [(d, DIM_LABELS[d]) for d in range(first, 2) if self.axes[d] in ("m", "n")]


def dtype_bytes(dtype: str) -> int:
    from ..ir import DTYPE_BITS
    return max(1, DTYPE_BITS[dtype] // 8)


def swizzle_bytes(line: int) -> int:
    """The swizzle of a shared-memory tile whose rows are `line` bytes: the widest of 128, 64 and
    32 bytes that divides a row, or 16 (none). The runtime's `Tile` computes the same."""
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
    arch: str  # "sm_90a" | "sm_100a"
    roles: tuple[RoleInfo, ...]
    warpgroups: tuple[WarpGroup, ...]
    default_roles: bool  # derived here (swp-only schedule) rather than read from the schedule
    role_of: tuple[tuple[str, str], ...]  # op -> role
    tensors: tuple[GlobalTensor, ...]
    mma: tuple[tuple[str, MmaShape], ...]
    stages: int
    normalizers: tuple[tuple[str, str], ...]  # carry -> carry that divides it at the end (online softmax)

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

    def wgmma_n(self, shape: MmaShape) -> int:
        """The N of each wgmma instruction an mma of `shape` is issued as. ptxas compiles one
        instruction within the registers a thread is launched with, whatever setmaxnreg gives its
        warpgroup later: an m64n256 (128 accumulator registers) in a CTA of 512 threads (128 each)
        is a fatal C7602. Such an N is halved, each half a wgmma into its half of the fragment."""
        cap = min(255, launch_registers(self.threads))
        n, step = shape.n, 8 if shape.b_kmajor else 64  # an N-major B is addressed in 64-column blocks
        while (n // 2 + WGMMA_REGISTERS > cap and n % 2 == 0 and (n // 2) % step == 0
               and shape.inputs.wgmma_n_ok(n // 2)):
            n //= 2
        return n

    @property
    def blackwell(self) -> bool:
        return self.arch.startswith("sm_100")

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


# -- building the model ------------------------------------------------------------------------

def build_model(schedule: Schedule, machine: Machine, graph: Graph | None = None) -> KernelModel:
    if graph is None:
        from ..tir import parse_tir
        if not schedule.graph_tir:
            raise EmitError("the schedule file holds no graph ('graph' is empty): solve it again with twill solve")
        graph = parse_tir(schedule.graph_tir, f"<graph of {schedule.kernel}>")
    arch = schedule.arch or machine.arch
    if not (arch.startswith("sm_90") or arch.startswith("sm_100")):
        raise EmitError(f"emit-cuda targets sm_90a (Hopper) and sm_100a (Blackwell); machine "
                        f"'{schedule.machine}' is {arch or 'of no known arch'}")
    missing = [op.name for op in graph.ops if op.name not in schedule.by_name]
    if missing:
        raise EmitError(f"the schedule does not place op(s) {', '.join(missing)} of its own graph")
    mma = {op.name: mma_shape(graph, op) for op in graph.ops if op.opcode == "mma"}
    roles, default = _roles(schedule, graph, machine, arch, mma)
    role_of = {op: r.name for r in roles for op in r.ops}
    roles, groups = _place(roles, machine)
    stages = 1 + max(op.start // schedule.ii for op in schedule.ops)
    tensors = _tensors(graph, mma)
    model = KernelModel(schedule=schedule, graph=graph, machine=machine, arch=arch, roles=roles,
                        warpgroups=groups, default_roles=default,
                        role_of=tuple(sorted(role_of.items())), tensors=tensors,
                        mma=tuple(sorted(mma.items())), stages=stages, normalizers=())
    from dataclasses import replace
    return replace(model, normalizers=_normalizers(model))


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
    _check_dtypes(op, a, b, kmajor, a_kmajor)
    return MmaShape(m, n, k, kmajor, a.dtype, len(op.operands) == 3, a_kmajor,
                    b.dtype if b.dtype != a.dtype else "")


FP8 = ("f8e4m3", "f8e5m2")  # the dtypes whose mmas take a and b of either (wgmma .e4m3.e5m2, kind::f8f6f4)


def _check_dtypes(op: Op, a: TensorType, b: TensorType, b_kmajor: bool, a_kmajor: bool) -> None:
    """a and b of one dtype of MMA_INPUTS (or of two fp8 ones), the result in its accumulator
    dtype; an 8-bit operand K-major (a stored M x K, b stored N x K: a @ b^T)."""
    mixed_fp8 = a.dtype in FP8 and b.dtype in FP8
    if (a.dtype != b.dtype and not mixed_fp8) or a.dtype not in MMA_INPUTS:
        raise EmitError(Diagnostic(
            f"op '{op.name}': emit-cuda's mma takes a and b of one dtype of {', '.join(MMA_INPUTS)}, or of "
            f"two fp8 ones (got {a.dtype}, {b.dtype})", op.span, "convert one operand to the other's dtype first"))
    kind = MMA_INPUTS[a.dtype]
    if op.type.dtype != kind.acc:
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
            "{transpose_b = true} where b is square): TMA copies a tile as it lies, where Triton's own "
            "copy to shared memory may transpose it"))


def _roles(schedule: Schedule, graph: Graph, machine: Machine, arch: str,
           mma: dict[str, MmaShape]) -> tuple[tuple[RoleInfo, ...], bool]:
    if schedule.roles:
        roles = tuple(RoleInfo(r.name, r.warps, r.registers, tuple(r.ops)) for r in schedule.roles)
        placed = [op for r in roles for op in r.ops]
        unplaced = [op.name for op in graph.ops if op.name not in placed]
        if unplaced:
            raise EmitError(f"op(s) {', '.join(unplaced)} belong to no role of the schedule")
        for r in roles:
            if r.warps != 1 and r.warps % 4:
                raise EmitError(f"role '{r.name}' has {r.warps} warps: a role is one warp or whole warpgroups")
            for op in r.ops:
                if graph.by_name[op].opcode == "mma" and arch.startswith("sm_90") and not r.is_warpgroup:
                    raise EmitError(f"op '{op}' is a wgmma but role '{r.name}' is not a warpgroup")
        return _reads_out_tmem(roles, graph, arch), False
    return _default_roles(schedule, graph, machine, arch, mma), True


def _reads_out_tmem(roles: tuple[RoleInfo, ...], graph: Graph, arch: str) -> tuple[RoleInfo, ...]:
    """On sm_100a an accumulator carried in tensor memory is read out after the loop by a whole
    warpgroup (tcgen05.ld: each warp reads its own quarter of the 128 lanes). Where the schedule
    has only 1-warp roles (a one-warp MMA role and a load warp), the role whose mma yields that
    carry is emitted as a warpgroup: its first thread still issues the MMAs."""
    if not arch.startswith("sm_100") or any(r.is_warpgroup for r in roles):
        return roles
    yielded = {src for _, src in graph.yields}
    holder = next((r.name for r in roles for op in r.ops
                   if op in yielded and graph.by_name[op].opcode == "mma"), None)
    return tuple(RoleInfo(r.name, 4, r.registers, r.ops) if r.name == holder else r for r in roles)


def _default_roles(schedule: Schedule, graph: Graph, machine: Machine, arch: str,
                   mma: dict[str, MmaShape]) -> tuple[RoleInfo, ...]:
    """Warp specialization for a schedule without roles: loads on a producer warp, the rest on one
    consumer role of as many warpgroups as its register tiles need (each takes a slice of rows)."""
    limits = machine.limits
    loads = tuple(op.name for op in graph.ops if op.opcode in LOAD_OPCODES)
    rest = tuple(op.name for op in graph.ops if op.opcode not in LOAD_OPCODES)
    producer_regs = _granule_down(max(limits.min_registers, 24), limits.register_granule)
    roles = []
    if loads:
        roles.append(RoleInfo("producer", 1, producer_regs, loads))
    if rest:
        free = limits.registers_per_sm - (128 * producer_regs if loads else 0)
        need = _register_estimate(graph, rest, limits.register_reserve)
        groups = 1
        rows = _common_rows(graph, rest)
        while (not arch.startswith("sm_100") and need / groups > 224 and rows % (64 * (groups + 1)) == 0
               and 4 * (groups + 1) + (4 if loads else 0) <= max(limits.warps, 4)):
            groups += 1
        budget = min(_granule_down(free // (128 * groups), limits.register_granule),
                     _granule_down(limits.registers_per_thread, limits.register_granule))
        roles.append(RoleInfo("consumer", 4 * groups, budget, rest))
    return tuple(roles)


def _granule_down(x: int, granule: int) -> int:
    return max(granule, (x // granule) * granule)


def _common_rows(graph: Graph, ops: tuple[str, ...]) -> int:
    rows = [graph.by_name[o].type.shape[0] for o in ops
            if graph.by_name[o].type is not None and graph.by_name[o].type.space == "reg"]
    return math.gcd(*rows) if rows else 64


def _register_estimate(graph: Graph, ops: tuple[str, ...], reserve: int) -> float:
    """Registers per thread of one warpgroup holding every register result of `ops` at once."""
    total = sum(graph.by_name[o].type.bytes for o in ops
                if graph.by_name[o].type is not None and graph.by_name[o].type.space == "reg")
    return total / (128 * 4) + reserve


def _place(roles: tuple[RoleInfo, ...], machine: Machine) -> tuple[tuple[RoleInfo, ...], tuple[WarpGroup, ...]]:
    """1-warp roles first, four to a warpgroup; then each warpgroup role on its own warpgroups."""
    small = [r for r in roles if not r.is_warpgroup]
    big = [r for r in roles if r.is_warpgroup]
    placed: list[RoleInfo] = []
    groups: list[WarpGroup] = []
    for g in range(0, len(small), 4):
        members = small[g:g + 4]
        for i, r in enumerate(members):
            placed.append(RoleInfo(r.name, r.warps, r.registers, r.ops, first_warp=4 * len(groups) + i))
        groups.append(WarpGroup(len(groups), tuple(r.name for r in members), max(r.registers for r in members),
                                small=True))
    for r in big:
        placed.append(RoleInfo(r.name, r.warps, r.registers, r.ops, first_warp=4 * len(groups)))
        for _ in range(r.warpgroups):
            groups.append(WarpGroup(len(groups), (r.name,), r.registers))
    order = {r.name: i for i, r in enumerate(roles)}
    placed.sort(key=lambda r: order[r.name])
    groups = _fit_registers(groups, machine)
    if 128 * len(groups) > 1024:
        raise EmitError(f"the roles need {len(groups)} warpgroups ({128 * len(groups)} threads): more than a CTA holds")
    return tuple(placed), tuple(groups)


def launch_registers(threads: int) -> int:
    """Registers per thread a CTA of `threads` threads starts with under __launch_bounds__(threads, 1):
    the register file divided evenly, in steps of 8, at most 256 (255 usable)."""
    return min(256, (65536 // threads) // 8 * 8)


def _fit_registers(groups: list[WarpGroup], machine: Machine) -> list[WarpGroup]:
    """setmaxnreg moves registers between the warpgroups of a CTA but never beyond what the CTA
    was launched with (threads x launch_registers): a warpgroup asking for more than the others
    gave back blocks forever. So budgets must sum to at most that pool. 1-warp roles (a TMA or MMA
    issuer) pay for a whole warpgroup, so those warpgroups give up registers first (down to the
    machine's minimum); then the largest budgets give up 8 at a time. The emitted file says so."""
    lim = machine.limits
    granule = lim.register_granule
    pool = 128 * len(groups) * launch_registers(128 * len(groups))
    budgets = [g.registers for g in groups]
    small = [i for i, g in enumerate(groups) if len(g.roles) > 1 or _is_small(g)]
    for i in small:
        while 128 * sum(budgets) > pool and budgets[i] - granule >= lim.min_registers:
            budgets[i] -= granule
    while 128 * sum(budgets) > pool:
        i = max(range(len(budgets)), key=lambda k: (budgets[k], -k))
        if budgets[i] - granule < lim.min_registers:
            raise EmitError(f"the warpgroups' register budgets ({', '.join(map(str, budgets))}) cannot fit the "
                            f"{pool} registers a CTA of {128 * len(groups)} threads is launched with")
        budgets[i] -= granule
    return [WarpGroup(g.index, g.roles, b, g.small) for g, b in zip(groups, budgets)]


def _is_small(g: WarpGroup) -> bool:
    return g.small


# -- global tensors: which grid axis each tile dimension follows --------------------------------

class _Classes:
    """Union-find over tile dimensions (value, dim)."""

    def __init__(self):
        self.parent: dict[tuple[str, int], tuple[str, int]] = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b):
        self.parent[self.find(a)] = self.find(b)


def _dim_classes(graph: Graph, mma: dict[str, MmaShape]) -> _Classes:
    cls = _Classes()
    values = graph.values
    carry_src = dict(graph.yields)

    def key(operand_name: str, dim: int):
        # A carry and the result it yields are one value as far as shapes go.
        return (carry_src.get(operand_name, operand_name) if operand_name in values and
                values[operand_name].kind == "carry" else operand_name, dim)

    for op in graph.ops:
        if op.type is None or op.opcode in LOAD_OPCODES:
            continue
        names = [o.name for o in op.operands]
        types = [graph.operand_type(o) for o in op.operands]
        rank = len(op.type.shape)
        if op.opcode == "mma":
            s = mma[op.name]
            a, b = names[0], names[1]
            cls.union(key(a, 0 if s.a_kmajor else 1), (op.name, 0))
            cls.union(key(a, 1 if s.a_kmajor else 0), key(b, 1 if s.b_kmajor else 0))
            cls.union(key(b, 0 if s.b_kmajor else 1), (op.name, 1))
            if len(names) > 2:
                cls.union(key(names[2], 0), (op.name, 0))
                cls.union(key(names[2], 1), (op.name, 1))
            continue
        for name, t in zip(names, types):
            if t is None:
                continue
            if rank == 1 and len(t.shape) >= 1:  # a row reduction or a row vector op
                cls.union(key(name, 0), (op.name, 0))
            elif len(t.shape) == rank and t.shape == op.type.shape:
                for d in range(rank):
                    cls.union(key(name, d), (op.name, d))
            elif len(t.shape) == 1 and rank == 2 and t.shape[0] == op.type.shape[0]:
                cls.union(key(name, 0), (op.name, 0))  # a per-row operand broadcast along columns
    from . import epilogue  # (imports this module)
    epilogue.unify(graph, cls.union, key)
    return cls


def value_axis(graph: Graph, mma: dict[str, MmaShape]):
    """axis(value, dim): which axis ("loop", "m", "n" or "fixed") dimension dim of a graph value runs along."""
    cls = _dim_classes(graph, mma)
    carry_src = dict(graph.yields)
    # The loop runs along the K of accumulating mmas (a GEMM's K; attention's keys forward, its
    # queries backward); in a loop without one, along the N of the others.
    loop_classes = set()
    for op in graph.ops:
        if op.opcode == "mma" and mma[op.name].accumulate:
            a = op.operands[0].name
            loop_classes.add(cls.find((a, 1 if mma[op.name].a_kmajor else 0)))
    if not loop_classes:
        loop_classes = {cls.find((op.name, 1)) for op in graph.ops if op.opcode == "mma"}
    # Grid axes follow the output carries: rows along blockIdx.x, columns along blockIdx.y.
    m_classes, n_classes = set(), set()
    for carry in graph.carries:
        src = carry_src.get(carry.name)
        if src is None:
            continue
        shape = carry.type.shape
        if len(shape) >= 1 and cls.find((src, 0)) not in loop_classes:
            m_classes.add(cls.find((src, 0)))
        if len(shape) >= 2 and cls.find((src, 1)) not in loop_classes:
            n_classes.add(cls.find((src, 1)))

    def axis(value: str, dim: int) -> str:
        c = cls.find((value, dim))
        return "loop" if c in loop_classes else "m" if c in m_classes else "n" if c in n_classes else "fixed"

    return axis


def _tensors(graph: Graph, mma: dict[str, MmaShape]) -> tuple[GlobalTensor, ...]:
    from . import epilogue  # (imports this module)
    axis = value_axis(graph, mma)
    carry_src = dict(graph.yields)
    out = []

    def add(name, value, kind, t: TensorType, per_iteration_ok: bool, dtype: str | None = None):
        if len(t.shape) not in (1, 2):
            raise EmitError(f"value '{value}' is rank {len(t.shape)}: emit-cuda moves rank-1 and rank-2 tiles")
        if len(t.shape) == 1:
            tile, axes = (1, t.shape[0]), ("fixed", axis(value, 0))
        else:
            tile, axes = (t.shape[0], t.shape[1]), (axis(value, 0), axis(value, 1))
        if kind == "input":
            axes = tuple("fixed" if a == "loop" else a for a in axes)  # invariant: the whole extent
        per_iter = per_iteration_ok and "loop" not in axes
        out.append(GlobalTensor(ident(name), value, kind, dtype or t.dtype, tile, axes, per_iter, len(t.shape)))

    for v in graph.inputs:
        add(v.name, v.name, "input", v.type, False)
    for op in graph.ops:
        if op.opcode in LOAD_OPCODES and op.type is not None:
            add(op.name, op.name, "load", op.type, True)
    for op in graph.ops:
        if op.opcode == "store" and op.operands:
            t = graph.operand_type(op.operands[0])
            if t is not None:
                add(f"{op.name}", op.operands[0].name, "store", t, True)
    for carry in graph.carries:
        src = carry_src.get(carry.name)
        if src is not None:
            add(f"out_{carry.name}", src, "output", carry.type, False, epilogue.output_dtype(graph, carry))
    for name, src, t in epilogue.extra_outputs(graph):  # an epilogue's new outputs, placed as their carry's
        add(name, src, "output", t, False)
    return tuple(out)


def _normalizers(model: KernelModel) -> tuple[tuple[str, str], ...]:
    """Online softmax: a carry updated through `rescale acc, alpha` whose partner carry is a
    `rowsum ..., l, alpha` of the same alpha is divided by that sum when it is written out."""
    graph = model.graph
    out = []
    rowsums = {}
    for carry, src in graph.yields:
        op = graph.by_name.get(src)
        if op is not None and op.opcode == "rowsum" and len(op.operands) == 3:
            rowsums[op.operands[2].name] = carry
    for carry, src in graph.yields:
        seen, todo = set(), [src]
        while todo:  # walk back through the accumulator chain of this iteration
            name = todo.pop()
            op = graph.by_name.get(name)
            if op is None or name in seen:
                continue
            seen.add(name)
            if op.opcode == "rescale" and len(op.operands) == 2 and op.operands[1].name in rowsums:
                out.append((carry, rowsums[op.operands[1].name]))
                break
            if op.opcode == "mma" and len(op.operands) == 3:
                todo.append(op.operands[2].name)
            elif op.opcode == "rescale" and op.operands:
                todo.append(op.operands[0].name)
    return tuple(sorted(set(out)))


def rastered(model: "KernelModel") -> bool:
    """Whether the grid's order matters for L2: some streamed tile follows the output rows and
    another the columns, so CTAs that run together can share both. Attention streams K and V,
    which follow neither (V's columns are the whole head dimension): it keeps blockIdx order."""
    streamed = [t for t in model.tensors if t.kind == "load"]
    return any(t.axes[0] == "m" for t in streamed) and any(t.axes[1] == "n" for t in streamed)
