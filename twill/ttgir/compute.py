"""Matrix multiplies, reductions, scans and the merged loops' causal mask."""
from __future__ import annotations

from . import argreduce, indices
from .generic import generic
from .opnames import ADD_COMBINERS, MAX_COMBINERS, MIN_COMBINERS, MUL_COMBINERS, int_attr
from .parser import MOp
from .scalars import _loop_lower, _result_tile, view
from . import ksplit
from .state import Lowering
from .values import SCALAR, TOKEN, Buf, Const, Scalar, Tile, Token


def _layout(lw: Lowering, a: object, b: object) -> tuple[tuple[str, object], ...]:
    """`transpose_a` / `transpose_b` of an mma whose operand is square, where the shapes cannot tell
    emit-cuda which way it lies in memory: the dot reads a as M x K and b as K x N, so an operand
    seen through a transpose (K in Q K^T, loaded as keys x D; a column-major load) lies the other way.
    A non-square operand's .tir type, its layout in memory, already says so."""
    return layout_attrs(*((lw.type_of(v.ref).shape, v.flip) if isinstance(v, Tile) else None for v in (a, b)))


def layout_attrs(a, b) -> tuple[tuple[str, object], ...]:
    """The rule of `_layout` for operands given as (shape, flip), or None for a non-tile."""
    attrs = []
    for key, val, default in (("transpose_a", a, None), ("transpose_b", b, False)):
        if val is None:
            continue
        shape, flip = val
        if len(shape) == 2 and shape[0] == shape[1] and (flip or default is not None):
            attrs.append((key, flip))
    return tuple(attrs)


def dot(lw: Lowering, op: MOp) -> None:
    """``tt.dot`` / ``ttng.warp_group_dot a, b, c``: an mma; a constant accumulator (zero) is dropped."""
    vals = [lw.read(v) for v in lw.operands(op)]
    ins, outs = lw.signature(op)
    if len(vals) < 3 or not outs:
        raise lw.src.error(f"'{op.name}' needs operands a, b, c and a result type", op.head)
    _refuse_f32_precision(lw, op, vals[:2])
    _refuse_narrow_accumulator(lw, op, vals[:2], outs[0])
    half = ksplit.half_of(lw, op.operands()[0][0])
    if half is not None:  # one of the two dots Triton's pipeliner split a dot into along K
        ksplit.dot(lw, op, half, lambda a, b, acc: lw.node("mma", op, [a, b, acc], lw.tile_type(outs[0], op),
                                                           attrs=_layout(lw, a, b)))
        return
    _check_dot_shapes(lw, op, vals[0], vals[1], outs[0].shape)
    lw.bind(op, lw.node("mma", op, vals[:3], lw.tile_type(outs[0], op), attrs=_layout(lw, vals[0], vals[1])))


def scaled_dot(lw: Lowering, op: MOp) -> None:
    """``tt.dot_scaled`` / ``ttng.tc_gen5_mma_scaled``: a block-scaled dot (mxfp8, mxfp4, nvfp4: A and B each
    scaled by one factor per block of K elements), which the graph's mma, with no scale operands, cannot
    express: an error at the dot, never a loop whose accumulator nothing computes."""
    raise lw.src.error(
        f"'{op.name}' is a block-scaled dot (`tl.dot_scaled`: A and B multiplied by one scale factor a block of K "
        "elements): twill's mma has no scale operands, so it is not imported", op.head,
        "a dot of unscaled fp8/fp16/bf16 operands imports (scales per row or column applied after the loop too)")


def bit_view(lw: Lowering, op: MOp) -> None:
    """``tt.bitcast`` / ``arith.bitcast``: a view where it keeps the value (pointers, a tile of the same element
    type, integers of one width: Philox's rounds); a tile whose bits it reads as another number (integers as
    floats, the e8m0 scale upcast of `tl.dot_scaled` on sm_90, `x.to(tl.float16, bitcast=True)`; f16 as bf16)
    is another value, which the graph has no op for: an error there, never a view that passes the old
    numbers on as if they were the new ones."""
    ins, outs = lw.signature(op)
    if ins and outs and ins[0].is_tile and outs[0].is_tile and ins[0].elem != outs[0].elem \
            and (_is_float(ins[0].elem) or _is_float(outs[0].elem)):
        raise lw.src.error(
            f"'{op.name}' reads the bits of a {ins[0].elem} tile as {outs[0].elem} (a bit reinterpretation, "
            "not a conversion: `tl.dot_scaled`'s e8m0 scales on sm_90, `.to(..., bitcast=True)`), which no op of "
            "the graph expresses: not imported", op.head)
    view(lw, op)


def _is_float(elem: str) -> bool:
    return elem.startswith(("f", "bf", "tf"))


# Triton's InputPrecision (`tl.dot(..., input_precision=...)`), as its attribute prints it: a number in an
# attribute dictionary (`{inputPrecision = 0 : i32}` on ttng.warp_group_dot), a name in tt.dot's own syntax
# (`inputPrecision = tf32`). Left out, it is the default, IEEE (MLIR does not print a default value).
INPUT_PRECISIONS = {"0": "tf32", "1": "tf32x3", "2": "ieee"}


def input_precision(op: MOp) -> str:
    """The dot's input precision: "tf32", "tf32x3", "ieee" (absent: the attribute's default), or another
    name as written. ``ttng.tc_gen5_mma`` has no such attribute: Triton makes one of a TF32 dot only."""
    if op.name == "ttng.tc_gen5_mma":
        return "tf32"
    toks = op.tokens
    for i in range(len(toks) - 2):
        if toks[i].is_("inputPrecision") and toks[i + 1].is_("="):
            text = toks[i + 2].text
            return INPUT_PRECISIONS.get(text, text.lower())
    return "ieee"


def _refuse_f32_precision(lw: Lowering, op: MOp, operands) -> None:
    """A dot of f32 operands is imported where it is TF32 on the tensor core (`tl.dot(...,
    input_precision="tf32")`, Triton's default for fp32 inputs; the graph's mma of f32 operands, which
    emit-cuda issues as wgmma .tf32 / tcgen05.mma kind::tf32). Another precision is refused at the dot:
    "ieee" is a CUDA-core fp32 product, "tf32x3" three TF32 products of the operands split in two (Triton
    decomposes it), neither of which the graph's mma computes."""
    f32 = [which for which, v in zip("ab", operands) if isinstance(v, Tile) and lw.type_of(v.ref).dtype == "f32"]
    if not f32:
        return
    precision = input_precision(op)
    if precision == "tf32":
        return
    what = {"ieee": "an IEEE fp32 product on the CUDA cores (input_precision=\"ieee\"; also what a dot that "
                    "prints no inputPrecision attribute computes)",
            "tf32x3": "three TF32 products of the operands split into high and low parts "
                      "(input_precision=\"tf32x3\")"}.get(precision, f"input precision '{precision}'")
    raise lw.src.error(
        f"'{op.name}' multiplies f32 operands ({f32[0]} is f32) in {what}: twill's mma of f32 operands is one "
        "TF32 product on the tensor core, another precision, so the dot is not imported", op.head,
        "use input_precision=\"tf32\" (Triton's default for fp32 tl.dot), or cast the operands to bf16/fp16 "
        "before the dot")


def _refuse_narrow_accumulator(lw: Lowering, op: MOp, operands, out, tmem: bool = False) -> None:
    """A dot that accumulates in another dtype than the tensor core's accumulators of its operands
    (`MmaInputs.acc`, or one of its `narrow` ones: `tl.dot(a, b, acc, out_dtype=tl.float16)` of f16
    operands is wgmma's f16 accumulator, imported as `mma ... : f16[M, N]`): an f16 accumulator of bf16
    or fp8 products, say, would be computed in another precision, so the import refuses it at the dot.
    In tensor memory (`tmem`: tcgen05.mma, sm_100a) every narrow accumulator is refused: a 16-bit D lies
    one value in each 32-bit column, unpacked (PTX ISA 9.7.16.10.4.1), where the graph's footprint of an
    f16 @tmem tile counts two values a column (a packed P) and emit-cuda's tensor-memory reads take f32."""
    from ..mma import MMA_INPUTS
    a = operands[0]
    dtype = lw.type_of(a.ref).dtype if isinstance(a, Tile) else None
    kind = MMA_INPUTS.get(dtype)
    got = lw.tile_type(out, op).dtype
    if kind is not None and got != kind.acc and tmem:
        raise lw.src.error(
            f"'{op.name}' accumulates {dtype} products in {got} in tensor memory (`out_dtype=tl.float16` on "
            f"sm_100): a {got} tcgen05 accumulator lies one value a 32-bit column, which twill's tensor-memory "
            f"tiles and emit-cuda's reads of them do not take; on sm_90 (wgmma) an f16 accumulator imports",
            op.head, f"accumulate in {kind.acc} (tl.zeros(..., tl.float32), no out_dtype) and convert the result "
            "after the loop")
    if kind is not None and got != kind.acc and got not in kind.narrow:
        raise lw.src.error(
            f"'{op.name}' accumulates {dtype} products in {got} (`out_dtype=tl.{'float16' if got == 'f16' else got}`): "
            f"twill's mma accumulates {dtype} in {kind.acc} and would round only once, at the end", op.head,
            f"accumulate in {kind.acc} (tl.zeros(..., tl.float32), no out_dtype) and convert the result after the loop")


def _check_dot_shapes(lw: Lowering, op: MOp, a: object, b: object, result: tuple[int, ...]) -> None:
    """A dot makes an M x N tile of an M x K and a K x N operand (each as the dot sees it)."""
    if len(result) != 2:
        raise lw.src.error(f"'{op.name}' must make a 2-D tile (M x N), not one of shape "
                           f"{'x'.join(map(str, result)) or 'scalar'}", op.head)
    seen = [(lw.type_of(v.ref).shape[::-1] if v.flip else lw.type_of(v.ref).shape) if isinstance(v, Tile) else None
            for v in (a, b)]
    if seen[0] is not None and len(seen[0]) == 2 and seen[0][0] != result[0]:
        raise lw.src.error(f"'{op.name}' makes {result[0]} rows from an operand a of {seen[0][0]} rows", op.head)
    if seen[1] is not None and len(seen[1]) == 2 and seen[1][1] != result[1]:
        raise lw.src.error(f"'{op.name}' makes {result[1]} columns from an operand b of {seen[1][1]} columns",
                           op.head)
    # fewer than 64 rows (GQA decode's query heads): padded to the tensor core's M after the import
    # (twill.split.pad_rows, `grid rows = M`)


def dot_wait(lw: Lowering, op: MOp) -> None:
    """``ttng.warp_group_dot_wait %a, %b {pendings = 0}``: its results are its operands, waited for."""
    vals = [v for v in lw.operands(op) if not isinstance(v, Token)]
    for name, val in zip(op.results, vals):
        lw.env[name] = val


def tc_gen5_mma(lw: Lowering, op: MOp) -> None:
    """``ttng.tc_gen5_mma a, b, d[tok], useD, pred``: d (tensor memory) = a*b (+ d when useD)."""
    vals = lw.operands(op)
    memories = [v for v in vals if isinstance(v, (Tile, Buf))]
    flags = [v for v in vals if isinstance(v, (Const, Scalar))]
    if len(memories) < 3 or not isinstance(memories[2], Buf):
        generic(lw, op)
        return
    a, b, d = lw.read(memories[0]), lw.read(memories[1]), memories[2]
    _refuse_f32_precision(lw, op, (a, b))
    _refuse_narrow_accumulator(lw, op, (a, b), lw.buffers[d.index][1], tmem=True)
    use_d = flags[0] if flags else Const(True)
    acc = Const(0.0) if use_d == Const(False) else lw.read(d)  # d is overwritten: as if it held 0
    name, mtype, _ = lw.buffers[d.index]
    ssa = op.results[0] if op.results else name
    lw.content[d.index] = lw.node("mma", op, [a, b, acc], lw.tile_type(mtype, op, "tmem"), ssa, _layout(lw, a, b))
    lw.bind(op, TOKEN)



def reduce(lw: Lowering, op: MOp) -> None:
    """``tt.reduce`` over the last axis with a max combiner is a rowmax, with an add one a rowsum
    (a rank-2 tile to one value per row, the legacy ops); any other axis, a min combiner, or a
    reduction to a scalar is ``reduce_max`` / ``reduce_sum`` / ``reduce_min {axis = A}``. A scalar
    result is written as a one-element tile (``f32[1]``)."""
    vals = lw.operands(op)
    ins, outs = lw.signature(op)
    combiner = _combiner(op)
    axis = int_attr(op, "axis")
    if not any(isinstance(v, Tile) for v in vals):
        lw.bind(op, SCALAR)
        return
    if len(vals) == 2 and len(op.results) == 2 and argreduce.kind(op) is not None:
        _arg_reduce(lw, op, vals, ins, outs, axis)
        return
    if combiner is None or len(vals) != 1 or not ins or not outs or axis is None:
        why = "combiner is not a single max, min or add" if combiner is None else \
            "it reduces several tensors" if len(vals) != 1 else "its axis or types cannot be read"
        generic(lw, op, why)
        return
    rank = len(ins[0].shape)
    if combiner in ("max", "add") and rank == 2 and axis == rank - 1:
        lw.bind(op, lw.node({"max": "rowmax", "add": "rowsum"}[combiner], op, vals, lw.tile_type(outs[0], op)))
        return
    lw.bind(op, lw.node("reduce", op, vals, _result_tile(lw, outs[0], op), attrs=(("axis", axis),),
                        opcode=f"reduce_{REDUCED.get(combiner, combiner)}"))


REDUCED = {"add": "sum", "mul": "prod"}  # a combiner -> the reduce_* opcode it names (the others: their own)
# a forward scan's combiner -> its opcode (tl.cumsum, tl.cumprod; a running max or min: tl.associative_scan's)
SCANNED = {"add": "cumsum", "mul": "cumprod", "max": "cummax", "min": "cummin"}


def _arg_reduce(lw: Lowering, op: MOp, vals, ins, outs, axis) -> None:
    """``tt.reduce`` of a tile's values and their indices by Triton's argmax / argmin combiner (argreduce.py), along
    the last axis of a 2-D tile: the value is ``rowmax x`` (``reduce_min x {axis = 1}``), the index ``rowargmax x,
    index`` (``rowargmin``), the index a `position` of the element's place (its column along the loop: `cols`)."""
    kind = argreduce.kind(op)
    x, index = vals
    if not isinstance(x, Tile) or axis is None or len(ins[0].shape) != 2 or axis != 1 or len(outs) != 2:
        raise lw.src.error(f"'{op.name}' (tl.arg{kind}) of a value and its index is imported along the last axis of a "
                           "2-D tile of values", op.head)
    itype = lw.tile_type(ins[1], op)
    if isinstance(index, indices.Index) and len(index.coefs) == 2:
        attrs = indices.position_attrs(index, itype.shape[0], _loop_lower(lw))
        if isinstance(attrs, str):
            raise lw.src.error(f"'{op.name}' (tl.arg{kind}) reads indices that a `position` cannot say: {attrs}",
                               op.head)
        index = lw.node("position", op, [], itype, ssa=None, attrs=attrs, opcode="position")
    elif not isinstance(index, Tile):
        raise lw.src.error(f"'{op.name}' (tl.arg{kind}) reads indices that are neither a tile nor the element's "
                           "position", op.head)
    vtype, itype_out = lw.tile_type(outs[0], op), lw.tile_type(outs[1], op)
    value = (lw.node("rowmax", op, [x], vtype) if kind == "max" else
             lw.node("reduce", op, [x], vtype, attrs=(("axis", axis),), opcode="reduce_min"))
    which = lw.node("reduce", op, [x, index], itype_out, ssa=op.results[1], opcode=f"rowarg{kind}")
    lw.bind(op, value, which)


def scan(lw: Lowering, op: MOp) -> None:
    """``tt.scan`` forward by one of SCANNED's combiners: ``cumsum`` (``cumprod``, ``cummax``, ``cummin``)
    ``{axis = A}``; other scans are generic."""
    vals = lw.operands(op)
    ins, outs = lw.signature(op)
    axis = int_attr(op, "axis")
    reverse = any(t.is_("reverse") and i + 2 < len(op.tokens) and op.tokens[i + 2].is_("true")
                  for i, t in enumerate(op.tokens))
    if not any(isinstance(v, Tile) for v in vals):
        lw.bind(op, SCALAR)
    elif (kind := SCANNED.get(_combiner(op, "tt.scan.return"))) and len(vals) == 1 and outs and axis is not None \
            and not reverse:
        lw.bind(op, lw.node("scan", op, vals, lw.tile_type(outs[0], op), attrs=(("axis", axis),), opcode=kind))
    else:
        generic(lw, op, "a scan other than a forward sum, product, max or min")



def _combiner(op: MOp, ret_name: str = "tt.reduce.return") -> str | None:
    if len(op.regions) != 1 or len(op.regions[0]) != 1:
        return None
    block = op.regions[0][0]
    args = {name for name, _ in block.args}
    ret = next((o for o in block.ops if o.name == ret_name), None)
    if ret is None or len(block.ops) != 2 or len(args) != 2:
        return None
    comb = block.ops[0]
    if {n for n, _ in comb.operands()} != args or [n for n, _ in ret.operands()] != list(comb.results):
        return None
    return ("max" if comb.name in MAX_COMBINERS else "add" if comb.name in ADD_COMBINERS else
            "min" if comb.name in MIN_COMBINERS else "mul" if comb.name in MUL_COMBINERS else None)



def causal_mask(lw: Lowering, op: MOp) -> None:
    """A select of loops.Merge's causal mask: `causal_mask x` of the tile it keeps."""
    vals = lw.operands(op)
    lw.bind(op, lw.node("causal_mask", op, [vals[1]], lw.type_of(vals[1].ref)))

