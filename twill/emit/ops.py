"""Per-opcode emitters: one function per opcode and target, found through a table.

Each emitter receives an `OpCall` (the op, its result and operands as C++ expressions, where each
lives) and returns the lines of CUDA C++ that compute it. Register math goes through the fixed
runtime's `twill::op_*` helpers, whose overloads pick the fragment layout; the mma emitters issue
wgmma (sm_90a) or tcgen05.mma (sm_100a). An opcode with no emitter becomes a hook function.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from .. import vocab
from ..errors import Diagnostic
from ..ir import DTYPE_BITS, Op, TensorType
from .model import EmitError, KernelModel, MmaShape, dtype_bytes, ident, local, swizzle_bytes
from . import anypitch

from .fragments import CTYPE, TMA_DTYPE, ctype, fragment_type, vector_kind, view_type  # noqa: F401 (the emitters' types, re-exported)


@dataclass(frozen=True)
class Arg:
    """An operand or result: where it lives and the C++ expression that names it there.

    where: "reg" (a register fragment lvalue), "smem" (a pointer to a swizzled tile), "tmem" (a
    tensor-memory address), "init" (a carry's initial value, a float expression).
    """

    value: str
    type: TensorType
    where: str
    expr: str
    guard: str = ""  # a tensor-memory operand that exists only when this holds (else: `init`)
    init: str = ""
    view: bool = False  # a staged tile read in place from shared memory, not a register fragment
    invariant: bool = False  # registers the loop never redefines (an input held in registers)


@dataclass(frozen=True)
class OpCall:
    model: KernelModel
    op: Op
    role: str
    out: Arg | None
    args: tuple[Arg, ...]
    row0: str  # first row of the tiles this warpgroup holds (of a value with the result's rows)
    groups: int  # warpgroups of the role
    iteration: str = ""  # the loop iteration this instance computes (a C++ expression)
    accumulate: str = "1"  # a tcgen05.mma's accumulate flag at its first k step (RoleBody._umma_accumulate)
    # (operand index, line): after a shared-memory operand is copied into its register temporary, the line that
    # masks that copy's elements past the loop's extent on a partial last tile (a -inf fill: RoleBody._mask)
    read_masks: tuple[tuple[int, str], ...] = ()

    def temp(self, suffix: str) -> str:
        return f"{local(self.op.name)}_{suffix}"


Emitter = Callable[[OpCall], list[str]]


# -- register math shared by both targets --------------------------------------------------------

def _math(helper: str, extra: str = "") -> Emitter:
    """Register math through the runtime's `helper` (the table, twill.vocab, has checked the operands)."""
    def emit(call: OpCall) -> list[str]:
        lines, names = _registers(call)
        args = ", ".join([call.out.expr] + names) + extra
        return lines + [f"twill::{helper}({args});"]
    return emit


def _table_math(d: vocab.OpDef) -> Emitter:
    """A table op's register math: `helper(out, operands...)`; a one-operand binary op's y is its
    `scalar` attribute (without one, the value is unknown: refused at the op rather than guessed); a
    float tile converted to an integer one is truncated toward zero."""
    def emit(call: OpCall) -> list[str]:
        lines, names = _registers(call)
        helper = d.helper
        if d.family in ("binary", "ternary") and len(names) == vocab.scalar_arity(d):
            value = call.op.attr("scalar")
            if value is None:
                op = call.op
                raise EmitError(Diagnostic(
                    f"op '{op.name}': emit-cuda's {op.opcode} takes {len(names) + 1} operands, and this one has "
                    f"{len(names)} and no "
                    f"{{scalar = V}} for its y (a scalar the import folded away)", op.span,
                    "give the op its y: {scalar = V}, or a second operand"))
            names.append(_divided(call.op, _float_literal(value)))
        if d.name == "convert" and call.out.type.dtype in vocab.INTS and call.args[0].type.dtype in vocab.FLOATS:
            helper = "op_convert_trunc"
        return lines + [f"twill::{helper}({', '.join([call.out.expr] + names)});"]
    return emit


DIVISORS = {"exp2_scale": "args.exp2_scale"}  # a select's {divided_by = K}: the kernel argument K is


def _divided(op, literal: str) -> str:
    """The scalar of a loop op, divided by its {divided_by = exp2_scale} (a select's constant side in the units
    of the scores before the scale the exp2 folds in: V / exp2_scale, once per thread after the compiler hoists it)."""
    by = op.attr("divided_by")
    return literal if by is None else f"({literal} / {DIVISORS[by]})"


def _float_literal(value) -> str:
    """A C++ float literal of a number (integers in float, so `x & 15` reads 15.f; inf as INFINITY)."""
    if math.isinf(value):
        return "-INFINITY" if value < 0 else "INFINITY"
    return f"{float(value)!r}f".replace("e+", "e")


def _reduce(d: vocab.OpDef) -> Emitter:
    """reduce_* and cumsum along the last axis of a rank-2 tile (the row layout's reductions), and
    cumsum down a rank-1 tile in shared memory into one value per row (each row summed from it)."""
    def emit(call: OpCall) -> list[str]:
        x = call.args[0].type
        axis = int(call.op.attr("axis")) % len(x.shape)
        if d.family == "reduce" and len(x.shape) == 1 and call.args[0].where == "smem" and len(call.args) == 1:
            kind = ("sum", "max", "min", "prod").index(d.name.split("_")[1])  # a whole vector in shared memory to a scalar
            return [f"twill::reduce_vector<{ctype(x.dtype)}, {x.shape[0]}, {kind}>({call.out.expr}, {call.args[0].expr});"]
        if d.name == "cumsum" and len(x.shape) == 1 and call.args[0].where == "smem" and vector_kind(call.out.type) == "rows":
            a = call.args[0]  # down a vector in shared memory: each row the thread holds, from the vector
            return [f"twill::cumsum_rows<{ctype(x.dtype)}, {x.shape[0]}>({call.out.expr}, {a.expr}, {call.row0});"]
        if axis != len(x.shape) - 1 or len(x.shape) != 2:
            raise EmitError(Diagnostic(
                f"op '{call.op.name}': emit-cuda reduces and scans a rank-2 tile along its last axis only "
                f"(this {call.op.opcode} is along axis {axis} of {x})", call.op.span,
                "transpose the tile so that the axis is the last, or give the op an opcode of its own "
                "(a hook, docs/emit-cuda.md)"))
        return _math(d.helper)(call)
    return emit


def _dequant(call: OpCall) -> list[str]:
    """dequant packed, [zero,] scale: op_dequant<W, BITS, SHIFT> of the packed element width W."""
    lines, names = _registers(call)
    w = DTYPE_BITS[call.args[0].type.dtype]
    bits, shift = int(call.op.attr("bits")), int(call.op.attr("shift", 0))
    return lines + [f"twill::op_dequant<{w}, {bits}, {shift}>({', '.join([call.out.expr] + names)});"]


def _registers(call: OpCall) -> tuple[list[str], list[str]]:
    """Operand expressions for register math: a shared-memory or tensor-memory tile is first read
    into a temporary fragment; a carry's initial value is a float."""
    lines, names = [], []
    for i, a in enumerate(call.args):
        if a.where == "reg":
            names.append(a.expr)
        elif a.where == "init":
            names.append(a.expr)
        elif a.where == "smem" and (vector_kind(a.type) == "cols" or _as_column(a, call)):  # read in place
            tmp = call.temp(f"arg{i}")
            lines.append(f"const twill::ColsView<{a.type.shape[-1]}, {ctype(a.type.dtype)}{_view(call, a)}> "
                         f"{tmp}{{{a.expr}}};")
            names.append(tmp)
        else:
            if _view(call, a):
                raise EmitError(Diagnostic(f"op '{call.op.name}' reads '{a.value}', a strided view of its argument, "
                                           "other than as one value per column (the one way emit-cuda reads a "
                                           "load's col_stride)", call.op.span))
            tmp = call.temp(f"arg{i}")
            lines.append(f"{fragment_type(call.model, a.type, call.groups)} {tmp};")
            lines.extend(read_tile(call.model, a, tmp, call.row0 if _rows(a.type) == _rows(call.out.type) else "0",
                                   call.iteration))
            lines.extend(line for j, line in call.read_masks if j == i)
            names.append(tmp)
    return lines, names


def _view(call: OpCall, a: Arg) -> str:
    """The ColsView template arguments of a load's strided view (`, S, O`), or ""."""
    t = call.model.tensor.get(ident(a.value)) if a.where == "smem" else None
    return f", {t.col_stride}, {t.col_offset}" if t is not None and t.kind == "load" and t.col_stride > 1 else ""


def _as_column(a: Arg, call: OpCall) -> bool:
    """A rank-1 operand of an op whose result is one value per column is read as a column vector
    (twill/vocab.py's broadcasting); emit-cuda reads one from shared memory only."""
    if len(a.type.shape) != 1 or call.out is None or vector_kind(call.out.type) != "cols" or a.type.shape[0] <= 1:
        return False
    if a.where != "smem":
        raise EmitError(Diagnostic(
            f"op '{call.op.name}': a rank-1 {a.type} read as a column vector is read from shared memory "
            "only, and this one is in registers", call.op.span,
            "compute the column form from the tile in shared memory (the importer does: docs/ttgir-import.md)"))
    return True


def _rows(t: TensorType | None) -> int:
    return t.shape[0] if t is not None and t.shape else 0


def read_tile(model: KernelModel, a: Arg, dst: str, row0: str, iteration: str = "") -> list[str]:
    """A tile into registers; a load's rows at any pitch shifted as they are read (anypitch.py)."""
    t = a.type
    if a.where == "tmem":
        return [f"twill::tmem_to_frag({dst}, {a.expr});"]
    rows, cols = (1, t.shape[0]) if vector_kind(t) == "rows" else t.shape
    plain = f"twill::tile_to_frag<{ctype(t.dtype)}, {rows}, {cols}>({dst}, {a.expr}, {row0});"
    g = model.tensor.get(ident(a.value)) if a.where == "smem" else None
    if g is not None and anypitch.eligible(model, g):
        from .colsplit import fixed_up
        return anypitch.read_lines(model, g, a.expr, dst, row0, iteration, bool(model.graph.split),
                                   fixed_up(model.graph), plain)
    return [plain]


def exp2_code(call: OpCall, sums: str | None = None) -> list[str]:
    """exp2; with `sums`, also writes its result's row sums there (Program.row_sums; sm_90a)."""
    lines, names = _registers(call)
    if sums is not None:
        return lines + [f"twill::op_exp2_sum({', '.join([call.out.expr, sums] + names)}, args.exp2_scale);"]
    return lines + [f"twill::op_exp2({', '.join([call.out.expr] + names)}, args.exp2_scale);"]


def _rescale(call: OpCall) -> list[str]:
    """rescale: in registers; or, from tensor memory to tensor memory, 32 columns at a time."""
    x = call.args[0]
    if call.out.where != "tmem" or x.where not in ("tmem", "init"):
        return _math("op_rescale")(call)
    lines, names = _registers(OpCall(call.model, call.op, call.role, call.out, call.args[1:], call.row0, call.groups))
    n = call.out.type.shape[-1]
    if x.where == "init":
        return lines + [f"twill::tmem_rescale_const<{n}>({call.out.expr}, {x.expr}, {names[0]});"]
    stream = f"twill::tmem_rescale<{n}>({call.out.expr}, {x.expr}, {names[0]});"
    if not x.guard:
        return lines + [stream]
    return lines + [f"if ({x.guard}) {stream}",
                    f"else twill::tmem_rescale_const<{n}>({call.out.expr}, {x.init}, {names[0]});"]


def _store(call: OpCall) -> list[str]:
    """store x: the tile goes to its global tensor (one tile per iteration when it has no loop axis),
    through its store function (`Renderer._stores`): the iteration, the role's first row, n."""
    lines, names = _registers(call)
    t = call.model.tensor[ident(call.op.name)]
    return lines + [f"store_{t.name}(sm, tm, args, tile, {names[0]}, {call.iteration}, {call.row0}, n);"]


def _hook(call: OpCall) -> list[str]:
    lines, names = _registers(call)
    args = ([call.out.expr] if call.out is not None else []) + names
    return lines + [f"hook_{ident(call.op.name)}({', '.join(args)});"]


# -- mma -------------------------------------------------------------------------------------------

def _umma_desc(a: Arg, kmajor: bool, row: str, k: str) -> str:
    """tcgen05's descriptor of operand tile `a` at `row`, `k` (sm100.cuh takes the tile's address)."""
    _tile_desc(a, kmajor, "")  # its checks
    return _operand_desc(a, kmajor, a.expr, row, k)


def _tile_desc(a: Arg, kmajor: bool, name: str) -> str:
    """The line that takes the descriptor of operand tile `a` once per wgmma chain, into `name`:
    each wgmma of the chain adds its constant offset to it (desc_kmajor / desc_mnmajor of a
    descriptor), one integer add where the whole descriptor took five (session 28: the dQ
    consumer's loop 372 -> 295 SASS instructions, uniform 162 -> 85)."""
    t = a.type
    T = ctype(t.dtype)
    rows, cols = t.shape
    if swizzle_bytes(cols * dtype_bytes(t.dtype), rows) < 32:
        raise EmitError(f"mma operand '{a.value}' is {rows} x {cols} {t.dtype}: the tensor core reads shared-memory "
                        f"tiles of whole 8-row swizzle atoms whose rows are a multiple of 32 bytes (32-, 64- or "
                        f"128-byte swizzle)")
    return f"const uint64_t {name} = twill::desc_tile<{T}, {rows}, {cols}, {str(kmajor).lower()}>({a.expr});"


def _operand_desc(a: Arg, kmajor: bool, base: str, row: str, k: str) -> str:
    T = ctype(a.type.dtype)
    rows, cols = a.type.shape
    if kmajor:
        return f"twill::desc_kmajor<{T}, {rows}, {cols}>({base}, {row}, {k})"
    return f"twill::desc_mnmajor<{T}, {rows}, {cols}>({base}, {k}, {row})"


def _wgmma(call: OpCall) -> list[str]:
    """wgmma: for each 64-row block of this warpgroup and each k step (16 columns of 16-bit
    inputs, 32 of 8-bit ones, 8 of f32 ones read as TF32: 32 bytes of a row each way), one wgmma.mma_async
    m64nNkK; fence
    before, one commit_group after (the consumer waits)."""
    s: MmaShape = call.model.mma_shape[call.op.name]
    kind = s.inputs
    a, b = call.args[0], call.args[1]
    if not kind.wgmma_n_ok(s.n):
        also = " (or 8, 16, 24)" if kind.n_step != 8 else ""
        raise EmitError(f"op '{call.op.name}': wgmma of {s.dtype} takes N = 8..256 in steps of {kind.n_step}{also} "
                        f"(N = {s.n}); sub-tile it")
    if s.k % kind.k:
        raise EmitError(f"op '{call.op.name}': K = {s.k} is not a multiple of {kind.k}")
    if b.where != "smem":
        raise EmitError(f"op '{call.op.name}': wgmma reads b from shared memory, but '{b.value}' is in {b.where}")
    fp8_regs = a.where == "reg" and a.type.dtype == s.dtype and s.dtype in ("f8e4m3", "f8e5m2")
    if a.where != "smem" and not kind.transposable and not fp8_regs:
        fp8 = " or an fp8 register tile" if s.dtype in ("f8e4m3", "f8e5m2") else ""
        raise EmitError(f"op '{call.op.name}': emit-cuda's wgmma of {s.dtype} reads a from shared memory{fp8}, but "
                        f"'{a.value}' is a {a.type.dtype} tile in {a.where} (the accumulator layout is not the 8-bit "
                        f"A fragment's)")
    mb = s.m // (64 * call.groups)
    lines = _accumulator(call, s)
    form = "ss" if a.where == "smem" else "rs"
    a_expr = a.expr
    if form == "rs":
        if not s.a_kmajor:
            raise EmitError(f"op '{call.op.name}': a transposed first operand must be in shared memory")
        if a.type.dtype != s.dtype:  # an f32 register tile: convert to the input dtype first
            tmp = call.temp("a16")
            lines.append(f"twill::Frag16<{mb}, {s.k}, {ctype(s.dtype)}> {tmp};")
            lines.append(f"twill::op_convert({tmp}, {a.expr});")
            a_expr = tmp
        elif fp8_regs:  # the accumulator layout to the 8-bit A fragment's (mma8_sm90.cuh)
            tmp = call.temp("a8")
            lines.append(f"twill::FragA8<{mb}, {s.k}> {tmp};")
            lines.append(f"twill::frag8_to_a({tmp}, {a.expr});")
            a_expr = tmp
    if not kind.transposable:  # 8-bit: both K-major, no transpose operands
        trans = ""
    else:
        trans = f"<{0 if s.b_kmajor else 1}>" if form == "rs" else f"<{0 if s.a_kmajor else 1}, {0 if s.b_kmajor else 1}>"
    n = call.model.wgmma_n(s)  # s.n, or a part of it where one instruction would not fit the launch cap
    fn = f"twill::wgmma_m64n{n}k{kind.k}_{form}_{s.wrapper}{trans}"
    step = f"{kind.k} * kk"
    da, db = call.temp("da"), call.temp("db")
    if form == "ss":
        lines.append(_tile_desc(a, s.a_kmajor, da))
    lines.append(_tile_desc(b, s.b_kmajor, db))
    a_op = (_operand_desc(a, s.a_kmajor, da, f"{call.row0} + 64 * mb", step) if form == "ss"
            else f"&{a_expr}.x[mb][4 * kk]")
    scale = "1" if s.accumulate else "kk > 0"
    fences = [f"twill::fence_frag({call.out.expr});"] + ([f"twill::fence_frag({a_expr});"] if form == "rs" else [])
    if form == "rs" and a.invariant:  # ptxas would hand its registers to the loop's other values (sm90.cuh)
        fences.insert(0, f"twill::remake_frag({a_expr});")
    lines += fences + ["twill::wgmma_fence();", "#pragma unroll", f"for (int mb = 0; mb < {mb}; ++mb) {{"]
    if n == s.n:
        b_op = _operand_desc(b, s.b_kmajor, db, "0", step)
        lines += ["#pragma unroll", f"  for (int kk = 0; kk < {s.k // kind.k}; ++kk)",
                  f"    {fn}({call.out.expr}.x[mb], {a_op}, {b_op}, {scale});"]
    else:  # N in parts: part nc writes columns [nc*n, (nc+1)*n), which are the fragment's values nc*n/2..
        b_op = _operand_desc(b, s.b_kmajor, db, f"{n} * nc", step)
        elem, per = ("uint32_t", n // 4) if s.acc == "f16" else ("int32_t" if kind.acc == "i32" else "float", n // 2)
        part = f"*reinterpret_cast<{elem}(*)[{per}]>(&{call.out.expr}.x[mb][{per} * nc])"
        lines += ["#pragma unroll", f"  for (int nc = 0; nc < {s.n // n}; ++nc)", "#pragma unroll",
                  f"    for (int kk = 0; kk < {s.k // kind.k}; ++kk)", f"      {fn}({part}, {a_op}, {b_op}, {scale});"]
    lines += ["}", "twill::wgmma_commit();"]
    return lines


def _accumulator(call: OpCall, s: MmaShape) -> list[str]:
    """The lines that put a wgmma's accumulator operand c into the result's registers first."""
    if not s.accumulate:
        return []
    c = call.args[2]
    if c.where == "init":
        return [f"twill::fill({call.out.expr}, {c.expr});"]
    if c.where == "smem":
        return read_tile(call.model, c, call.out.expr, call.row0, call.iteration)
    if c.view:
        return [f"twill::for_each({call.out.expr}, [&](int b, int i) {{ return twill::at<false>({c.expr}, b, i); }});"]
    if c.expr != call.out.expr:
        return [f"{call.out.expr} = {c.expr};"]
    return []


def _umma(call: OpCall) -> list[str]:
    """tcgen05.mma: one thread issues M x N x K steps into tensor memory, M = 128 or 64 and K = 16
    (kind::f16), 32 (8-bit: kind::f8f6f4, kind::i8) or 8 (f32 operands: kind::tf32); the caller elects it, orders it after the
    role's other tensor-memory traffic and commits it to an mbarrier."""
    s: MmaShape = call.model.mma_shape[call.op.name]
    kind = s.inputs
    a, b = call.args[0], call.args[1]
    if s.m not in (64, 128):
        raise EmitError(f"op '{call.op.name}': emit-cuda's tcgen05.mma is M = 128 or 64 (got {s.m}); sub-tile it")
    step = 16 if s.m == 128 else 8
    if s.n > 256 or s.n % step:
        raise EmitError(f"op '{call.op.name}': tcgen05.mma with M = {s.m} takes N = {step}..256 in steps of {step} "
                        f"(N = {s.n})")
    if s.k % kind.k:
        raise EmitError(f"op '{call.op.name}': K = {s.k} is not a multiple of {kind.k}")
    if b.where != "smem":
        raise EmitError(f"op '{call.op.name}': tcgen05.mma reads b from shared memory, but '{b.value}' is in {b.where}")
    if a.where != "smem" and not kind.transposable:
        raise EmitError(f"op '{call.op.name}': emit-cuda's tcgen05.mma of {s.dtype} reads a from shared memory, "
                        f"but '{a.value}' is in {a.where}")
    if s.acc:  # PTX ISA 9.7.16.10.4.1: a 16-bit D takes a whole 32-bit tensor-memory column, unpacked
        raise EmitError(Diagnostic(
            f"op '{call.op.name}': emit-cuda's tcgen05.mma accumulates {s.dtype} in {kind.acc} on sm_100a (the "
            f"result is {s.acc}: an f16 accumulator lies one value a 32-bit tensor-memory column, which its "
            "tensor-memory reads do not take yet)", call.op.span,
            "accumulate in f32 and convert after the loop, or emit for sm_90a (wgmma's f16 accumulators)"))
    idesc, suffix = _umma_idesc(s)
    b_op = _umma_desc(b, s.b_kmajor, "0", f"{kind.k} * kk")
    first = call.accumulate if s.accumulate else "kk > 0"
    if a.where == "tmem" and not s.a_kmajor:
        raise EmitError(f"op '{call.op.name}': a transposed first operand must be in shared memory")
    if a.where == "tmem":  # A packed in tensor memory: 16 values = 8 columns per k step
        issue = f"twill::umma_ts{suffix}({call.out.expr}, {a.expr} + 8 * kk, {b_op}, {idesc}, {first});"
    elif a.where == "smem":
        a_op = _umma_desc(a, s.a_kmajor, "0", f"{kind.k} * kk")
        issue = f"twill::umma_ss{suffix}({call.out.expr}, {a_op}, {b_op}, {idesc}, {first});"
    else:
        raise EmitError(f"op '{call.op.name}': tcgen05.mma reads a from shared or tensor memory")
    return ["#pragma unroll", f"for (int kk = 0; kk < {s.k // kind.k}; ++kk)", f"  {issue}"]


def _umma_idesc(s: MmaShape) -> tuple[str, str]:
    """The instruction descriptor of a tcgen05.mma of shape `s`, and the suffix of the runtime's
    issue function for its kind ('' for kind::f16, `_f8f6f4`, `_i8`, `_tf32`)."""
    kind = s.inputs
    if kind.kind == "tf32":  # tf32_sm100.cuh
        return f"twill::umma_idesc_tf32<{s.m}, {s.n}>()", "_tf32"
    if kind.kind == "f16":
        bf16 = "true" if s.dtype == "bf16" else "false"
        return (f"twill::umma_idesc<{s.m}, {s.n}, {bf16}, {'false' if s.a_kmajor else 'true'}, "
                f"{'false' if s.b_kmajor else 'true'}>()"), ""
    d = 2 if kind.acc == "i32" else 1  # the D format: S32 = 2, F32 = 1
    return f"twill::umma_idesc8<{s.m}, {s.n}, {d}, {kind.code}, {s.b_inputs.code}>()", f"_{kind.kind}"


def _causal_mask(call: OpCall) -> list[str]:
    """causal_mask (ragged.py): keys after their query become -inf, in registers (sm_90a; in tensor
    memory on sm_100a, tmem_mask_causal), in place
    where the result took its operand's registers. Forward, the query rows are those of the query
    tile in memory (its placement in Args), the keys iteration * kLoopStep on; backward (the loop
    over the queries), the queries are (the tile's first iteration + iteration) * kLoopStep on and
    the keys those of the key tile in memory."""
    from .ragged import causal
    a, out = call.args[0], call.out
    plan = causal(call.model)
    tensor = plan.rows_of.get(call.op.name)
    where = "tmem" if call.model.target.tensor_memory else "reg"
    if a.where != where or out is None or out.where != where or tensor is None:
        raise EmitError(f"op '{call.op.name}': causal_mask is emitted on register tiles on sm_90a, on "
                        "tensor-memory tiles on sm_100a")
    grid0 = f"tile.m * args.{tensor}_rows_step + args.{tensor}_rows_offset"
    first = "causal_first(args, tile) + " if plan.starts else ""
    if plan.backward:
        q0, k0 = f"({first}{call.iteration}) * kLoopStep + {call.row0}", grid0
    else:
        q0, k0 = f"{grid0} + {call.row0}", f"({first}{call.iteration}) * kLoopStep"
    band = plan.band
    # a band other than the causal one: key - query within [lo, hi] (ttgir/band.py)
    hi = str(band.upper)
    lo = ("-0x40000000" if band.lower is None else
          f"{band.lower}" + (f" + {band.lower_by} * args.{ident(band.arg)}" if band.lower_by else ""))
    plain = band == type(band)()
    if where == "tmem":
        rows, cols = out.type.shape
        if plain:
            return [f"twill::tmem_mask_causal<{cols}, {rows}>({out.expr}, {a.expr}, {q0}, {k0});"]
        return [f"twill::tmem_mask_band<{cols}, {rows}>({out.expr}, {a.expr}, {q0}, {k0}, {lo}, {hi});"]
    copy = [] if out.expr == a.expr else [f"{out.expr} = {a.expr};"]
    if plain:
        return copy + [f"twill::mask_causal({out.expr}, {q0}, {k0});"]
    return copy + [f"twill::mask_band({out.expr}, {q0}, {k0}, {lo}, {hi});"]


def _tail_mask(call: OpCall) -> list[str]:
    """tail_mask x {fill}: x, in place where the result took its operand's registers (buffers.py); the
    role masks the result past the loop's extent on a partial last tile (roles.py, ragged.py)."""
    a, out = call.args[0], call.out
    if out is None or out.where != "reg" or a.where not in ("reg", "smem"):
        raise EmitError(f"op '{call.op.name}': tail_mask is emitted on register tiles only")
    if a.where == "smem":  # a loaded tile (memory.py: an f32 load filling -inf) read into its registers
        lines = read_tile(call.model, a, out.expr, call.row0, call.iteration)
    else:
        lines = [f"// {out.expr} is {a.expr}: masked in place"] if out.expr == a.expr else \
            [f"twill::op_convert({out.expr}, {a.expr});"]
    if len(call.args) < 2:
        return lines
    return lines + [_row_bound(call)]


def _row_bound(call: OpCall) -> str:
    """tail_mask x, b {offset = K}: every iteration, the elements of columns l0 + c >= b[r] + K become the fill
    (cuda_runtime/tail_sm*.cuh mask_bound), l0 = the tile's first column along the loop."""
    from . import splits
    from .ragged import causal
    b, out, m = call.args[1], call.out, call.model
    if b.where not in ("reg", "init") or len(b.type.shape) != 1:
        raise EmitError(f"op '{call.op.name}': a tail_mask's bound is a per-row vector in registers (a prologue "
                        f"result or a register input), not {b.type} in {b.where}")
    if m.ragged.step <= 0:
        raise EmitError(f"op '{call.op.name}': a tail_mask's bound compares the columns along the loop, and no "
                        "loaded tile runs along it: its step is unknown")
    first = "causal_first(args, tile) + " if causal(m).starts else splits.first(m)
    offset = int(call.op.attr("offset", 0) or 0)
    col0 = f"({first}{call.iteration or '0'}) * kLoopStep" + (f" - ({offset})" if offset else "")
    fill = _float_literal(float(call.op.attr("fill")))
    return f"twill::mask_bound({out.expr}, {b.expr}, {col0}, {fill});  // each row's columns at or past its bound"


def _gather_outside(call: OpCall) -> list[str]:
    """A gather is emitted by the epilogue's Finalizer (gather.py), which reads the load's tensor in global memory."""
    raise EmitError(f"op '{call.op.name}': gather runs in the epilogue only (emit/gather.py)")


# -- the tables ----------------------------------------------------------------------------------

KINDS: dict[str, Callable[[vocab.OpDef], Emitter]] = {  # the table's emitter kinds of register math
    "math": _table_math,
    "reduce": _reduce,
    "dequant": lambda d: _dequant,
    "mask": lambda d: _index_mask,
    "position": lambda d: _position,
    "rand": lambda d: _rand,
    "join": lambda d: _math(d.helper),  # op_join (cuda_runtime/join_sm*.cuh, in kernels with a join: masks.py)
}


def _index_mask(call: OpCall) -> list[str]:
    from .masks import emit_mask  # (masks.py reads this module's operand reader)
    return emit_mask(call)


def _position(call: OpCall) -> list[str]:
    from .masks import emit_position
    return emit_position(call)


def _rand(call: OpCall) -> list[str]:
    from .rand import emit_rand
    return emit_rand(call)
# Every table op of register math, by its kind; those whose code predates the table keep theirs.
COMMON: dict[str, Emitter] = {
    **{d.name: KINDS[d.emit](d) for d in vocab.VOCAB.values() if d.emit in KINDS},
    "exp2": exp2_code,
    "rowmax": _math("op_rowmax"),
    "rowsum": _math("op_rowsum"),
    "rescale": _rescale,
    "store": _store,
    "tail_mask": _tail_mask,
    "gather": _gather_outside,
}


BASE_OPCODES = ("load", "store", "mma", "exp2", "rowmax", "rowsum", "rescale", "convert", "mul", "add", "sub",
                "max")  # those the base runtime (ops.cuh) computes


def needs_extension(model: KernelModel) -> bool:
    """Does the kernel use the runtime's vocabulary extension (vocab*.cuh): an opcode beyond the
    base ones, a float-to-integer conversion, or a column vector?"""
    graph = model.graph
    ops = graph.ops + graph.epilogue.ops + graph.prologue.ops
    types = [v.type for v in graph.values.values()] + [op.type for op in ops if op.type is not None]
    return (any(op.opcode not in BASE_OPCODES and op.opcode in vocab.VOCAB for op in ops)
            or any(vector_kind(t) == "cols" for t in types)
            or any(op.opcode == "convert" and op.type is not None and op.type.dtype in vocab.INTS for op in ops))


# Ops that stream a tensor-memory tile into tensor memory, 32 columns at a time, rather than
# reading it into registers (sm_100a): the correction and the causal mask.
TMEM_STREAMED = ("rescale", "causal_mask")

EMITTERS: dict[str, dict[str, Emitter]] = {
    "sm_90a": {**COMMON, "mma": _wgmma, "causal_mask": _causal_mask},
    "sm_100a": {**COMMON, "mma": _umma, "causal_mask": _causal_mask},
}


def emitter(model: KernelModel, opcode: str) -> Emitter:
    table = EMITTERS[model.target.arch]
    return table.get(opcode, _hook)


def is_known(model: KernelModel, opcode: str) -> bool:
    return opcode in EMITTERS[model.target.arch] or opcode == "load"
