"""PyTorch binding of kernel matmul_bcol (triton39_mm_bcol.h100.cu, sm_90a), written by `twill emit-cuda
--binding torch`. Do not edit: emit it again.

    matmul_bcol(a, b) -> acc

The first call builds triton39_mm_bcol.h100_entry.cu (which includes triton39_mm_bcol.h100.cu) with nvcc into $TWILL_CACHE_DIR/bindings
(default ~/.cache/twill/bindings), once per content; torch is imported at call time only.
"""
# ---- the binding's runtime (twill/emit/binding_runtime.py, copied verbatim into each binding) ----
# Plain Python: the argument checks and the mapping to the kernel's Problem need neither torch nor
# a GPU (`resolve` works on `Meta` tuples); torch is touched only by `call`, and nvcc only by `build`.
import collections
import contextlib
import contextvars
import ctypes
import hashlib
import math
import os
import shutil
import struct
import subprocess
import threading

Meta = collections.namedtuple("Meta", "shape dtype device contiguous ptr strides", defaults=(None,))
Meta.__doc__ = ("What the checks read off a tensor: shape (a tuple), dtype ('float16'), device ('cuda:0'), ..., "
                "strides in elements (None: contiguous)")


class ArgumentError(ValueError):
    """An argument the kernel cannot take; the message names it."""


class NotDeferred(Exception):
    """A call that cannot be deferred into a sequence's one kernel: its inputs are staged, or its folds combined,
    around its own launch, or its loop split (the one kernel's fused_prepare takes one split a loop). The
    sequence's binding then runs its loops one kernel each."""


# A sequence's one kernel (twill/emit/seqfuse.py): while its binding (K.py) sets a list here, `call` checks,
# allocates and packs as always but launches nothing: it appends the packed block, which K.py passes, with the
# other loops' blocks, to the one kernel's entry.
DEFERRED = contextvars.ContextVar("twill_deferred", default=None)


# The symbols of the extents a kernel's tensors are made of: the grid's two axes (counted in
# tiles), the loop's extent in elements and its iterations.
SYMBOLS = {"m": "M", "n": "N", "loop": "L", "iters": "I"}


def describe(t):
    """The Meta of a torch tensor (anything with .shape, .dtype, .device, .is_contiguous(), .data_ptr(), .stride())."""
    return Meta(tuple(int(x) for x in t.shape), str(t.dtype).replace("torch.", ""), str(t.device),
                bool(t.is_contiguous()), int(t.data_ptr()), tuple(int(x) for x in t.stride()))


def layout(arg):
    """The shape an argument takes, as text: `[*batch, M, 128]` (`[splits, *batch, M, 128]`: an
    output of a split kernel)."""
    div = arg.get("iter_div", 1)
    dims = (["splits"] * bool(arg.get("splits")) + ["*batch"] * (not arg.get("unbatched"))
            + ([("I" if div == 1 else f"ceil(I/{div})")] if arg["per_iteration"] else []))
    for axis, size in arg["dims"]:
        dims.append(str(size) if axis == "fixed" else SYMBOLS[axis])
    return "[" + ", ".join(dims) + "]"


def _extents(spec, arg):
    """Per dimension of `arg` beyond the batch: (symbol key, size) where the extent is size * the
    symbol's value (for "L", the extent itself; for "fixed", size)."""
    div = arg.get("iter_div", 1)
    out = [("iters" if div == 1 else f"iters/{div}", 1)] if arg["per_iteration"] else []
    for axis, size in arg["dims"]:
        if axis == "loop" and not spec["loop_step"]:
            out.append(("iters", size))  # no loaded tile along the loop: counted in iterations of the tile
        else:
            out.append((axis, 1 if axis == "loop" else size))
    return out


# A tensor of the same bits in the other signedness is taken too: TTGIR's integers are signless
# (Triton's pointer to uint8 is !tt.ptr<i8>), and the kernel's ops say how the bits are read.
SAME_BITS = {"int8": ("uint8",)}


def _check_meta(arg, meta, device):
    name = arg["name"]
    if (meta.dtype != arg["dtype"] and meta.dtype not in SAME_BITS.get(arg["dtype"], ())) \
            or not meta.device.startswith("cuda"):
        raise ArgumentError(f"{name}: expected torch.{arg['dtype']} on a CUDA device, got torch.{meta.dtype} on "
                            f"{meta.device}")
    if device is not None and meta.device != device:
        raise ArgumentError(f"{name}: on {meta.device}, but the other tensors are on {device}")
    # its layout (strides, alignment) is not refused: _layout passes it as it lies or stages it
    rank = len(arg["dims"]) + arg["per_iteration"]
    if len(meta.shape) < rank:
        raise ArgumentError(f"{name}: expected shape {layout(arg)}, got {list(meta.shape)}")


def resolve(spec, given, iters=None, split=None, sizes=None):
    """Check the tensors in `given` ({name: Meta}, every input and any output passed) against the
    kernel and read its Problem off their shapes: a dict with tiles_m, tiles_n, iters, loop_extent,
    batch, batch_shape, device, splits and shapes (every argument's full shape). `split`: a split
    kernel's (spec["split"]) elements per split, the Triton kernel's argument. `sizes`: the imported
    kernel's size arguments as the caller passed them ({name: value}; spec["extents"] says which axis
    each is the extent of), checked against the tensors' extents. Raises ArgumentError."""
    args = {a["name"]: a for a in spec["args"]}
    for a in spec["args"]:
        if a["output"] is False and given.get(a["name"]) is None:
            raise ArgumentError(f"{a['name']}: missing (torch.{a['dtype']} {layout(a)})")
    original = given
    given, held = _row_views(spec, given)
    if spec.get("flat"):
        given, flat_held = _flat_views(spec, given, sizes or {})
    known, who, groups = {}, {}, {}
    batch_shape, batch_of, device = None, None, None
    # The batch dimensions every tensor is checked against: the first one's that holds one entry
    # per tile (not GQA's K and V, which may be shared by groups of batch entries).
    first = [n for n, m in given.items() if m is not None]
    first = next((n for n in first if not args[n].get("shared") and not args[n].get("unbatched")),
                 first[0] if first else None)
    per_batch, splits = [], []
    for name, meta in sorted(given.items(), key=lambda item: item[0] != first):
        if meta is None:
            continue
        arg = args[name]
        _check_meta(arg, meta, device)
        device = meta.device
        if arg.get("per_batch"):  # checked once the others give the batch
            per_batch.append((name, meta))
            continue
        if arg.get("splits"):  # [splits, *batch, ...]: checked once the inputs give the batch
            splits.append((name, meta))
            continue
        dims = _extents(spec, arg)
        batch = tuple(meta.shape[:len(meta.shape) - len(dims)])
        if arg.get("unbatched"):
            _unbatched(arg, batch, meta.shape)
        elif batch_shape is None:
            batch_shape, batch_of = batch, name
        elif arg.get("shared") and batch != batch_shape:
            groups[name] = _group(arg, batch, batch_shape, batch_of, meta.shape)
        elif batch != batch_shape:
            raise ArgumentError(f"{name}: batch dimensions {list(batch)} differ from {batch_of}'s "
                                f"{list(batch_shape)} (shape {layout(arg)})")
        for i, ((key, size), extent) in enumerate(zip(dims, meta.shape[len(batch):])):
            _unify(spec, arg, key, size, extent, known, who, meta.shape, len(batch) + i)
    for name, meta in per_batch:
        groups[name] = _period(args[name], meta.shape, batch_shape or (), batch_of)
    for name, meta in splits:
        _split_output(spec, args[name], meta.shape, batch_shape or (), batch_of, known, who)
    _check_sizes(spec, sizes or {}, known, who)
    if spec.get("split"):
        _split_loop(spec, known, who, split)
    plan = _finish(spec, known, who, batch_shape or (), device, iters)
    plan["groups"] = [groups.get(a["name"], 1) for a in spec["args"]]
    if held:
        plan["shapes"] = _held_shapes(spec, plan["shapes"], held)
    if spec.get("flat"):
        first = next(iter(flat_held.values()))
        plan["shapes"] = {a["name"]: flat_held.get(a["name"], first) for a in spec["args"]}
    plan["layouts"] = [_layout(spec, a, original.get(a["name"]), plan["shapes"][a["name"]]) for a in spec["args"]]
    return plan


def _flat_views(spec, given, sizes):
    """A flat map over elements (`grid flat = n_elements`: the Triton tutorials' vector add) takes its tensors as
    the user holds them, of any shape, contiguous, every one of n elements, and views each as [n / (k C), k C]
    rows (C = spec["loop_extent"], the graph's columns; k `_flat_blocks`: an element maps to itself in any such
    view, and k blocks a row give the loop's pipeline the iterations it needs). n must be a multiple of C here: a
    [rows, C] view of a tensor of n elements has no partial row (a call runs any other n of contiguous tensors in
    two launches first: _flat_tail). The size argument (spec["flat"]), where passed as a Python int, must be n
    (_check_flat_size). Returns the viewed Metas and {name: shape given}."""
    cols, size = spec["loop_extent"], spec["flat"]
    held, count, first = {}, None, None
    for name, meta in given.items():
        if meta is None:
            continue
        n = math.prod(meta.shape)
        if count is None:
            count, first = n, name
        elif n != count:
            raise ArgumentError(f"{name}: {n} elements (shape {list(meta.shape)}), but {first} has {count}: the kernel "
                                "maps every tensor's elements one to one (a flat map over elements)")
        if n < 1:
            raise ArgumentError(f"{name}: no elements (shape {list(meta.shape)}): a flat map needs at least one")
        if n % cols:  # (contiguous tensors of any n run the last n mod C elements as a padded row: _flat_tail)
            raise ArgumentError(f"{name}: {n} elements (shape {list(meta.shape)}), not a multiple of {cols}: the kernel "
                                f"reads its tensors as rows of {cols} elements ([n / {cols}, {cols}]; a flat map over "
                                f"elements), and a call runs the last n mod {cols} as one padded row only where every "
                                f"tensor is contiguous: pass .contiguous() tensors")
        held[name] = tuple(meta.shape)
    row = cols * _flat_blocks(count // cols, cols, spec) if count else cols
    out = {name: None if meta is None else meta._replace(shape=(count // row, row)) for name, meta in given.items()}
    if count is not None:
        _check_flat_size(size, sizes.get(size), first, count)
    return out, held


def _check_flat_size(size, value, first, count):
    """A flat map's size argument `size`, where the caller passes a Python int, must be the tensors' `count`."""
    if isinstance(value, int) and not isinstance(value, bool) and value != count:
        raise ArgumentError(f"{size} = {value}, but {first} has {count} elements: the kernel runs over the tensors' "
                            f"whole extent, where the Triton kernel stops at {size}; pass {size} = {count}, or tensors "
                            f"of {value} elements")


def _flat_need(spec, cols):
    """The blocks of C = `cols` elements a row of a flat map's view needs: the pipeline's stages, in tiles of
    spec["loop_step"] elements (Triton's BLOCK_SIZE may be one tile)."""
    return max(-(-spec["stages"] * (spec["loop_step"] or cols) // cols), 1)


def _flat_blocks(blocks, cols, spec):
    """k, the blocks of C elements one row of a flat map's view holds: the least divisor of the `blocks` that
    gives each row the iterations the loop's pipeline needs (its stages, in tiles of spec["loop_step"] elements;
    Triton's BLOCK_SIZE may be one tile), so that a row is as short as that allows and the rows (CTAs) as many;
    at most 8 times that (a longer row would leave few CTAs: 769 blocks, a prime, stay rows of one), else 1
    (the launch then names the iterations missing)."""
    need = _flat_need(spec, cols)
    return next((k for k in range(need, min(8 * need, blocks) + 1) if blocks % k == 0), 1)


def _row_views(spec, given):
    """A kernel each of whose programs computes spec["rows"] rows of its tensors along the grid's
    rows (`grid rows = 16`: GQA decode's query heads of one KV head, its tile padded to the tensor
    core's 64 rows) takes such a tensor as the user holds it, [*b, R, ...] with R a multiple of the
    rows (q [B, H, D]), and views it as [*b, R / rows, rows, ...] (q [B, H / 16, 16, D]): every `rows`
    rows one batch entry, one partial tile of the kernel. Dimensions of 1 in the batch are dropped
    from every tensor (q [B, 1, H, D] beside k [B, Hkv, N, D]; R / rows = 1 with k [B, 1, N, D]).
    Returns the viewed Metas and {name: (shape given, the index of its rows)} of those viewed."""
    rows = spec.get("rows")
    if not rows:
        return given, {}
    args = {a["name"]: a for a in spec["args"]}
    out, held = {}, {}
    for name, meta in given.items():
        arg = args.get(name)
        dims = _extents(spec, arg) if arg is not None and meta is not None else ()
        lead = len(meta.shape) - len(dims) if dims else -1
        if lead < 0:
            out[name] = meta  # nothing, or too few dimensions (_check_meta says so)
            continue
        keys = [k for k, _ in dims]
        batch = tuple(d for d in meta.shape[:lead] if d != 1)
        held[name] = (tuple(meta.shape), None)
        if "m" not in keys:
            out[name] = meta._replace(shape=batch + tuple(meta.shape[lead:]))
            continue
        at = lead + keys.index("m")
        r = meta.shape[at]
        if r < 1 or r % rows:
            raise ArgumentError(f"{name}: {r} rows (its dimension {at}, shape {list(meta.shape)}) are not a multiple of "
                                f"{rows}: each program of the kernel computes {rows} rows (grid rows = {rows}; GQA "
                                f"decode: the query heads of one KV head), Hq = {rows} x Hkv")
        tiles = (r // rows,) if r > rows else ()
        if keys.index("m"):  # a dimension before the rows (per iteration): batch entries stay outside it
            raise ArgumentError(f"{name}: a tensor with a dimension before its rows in a kernel of {rows}-row "
                                "programs (grid rows) is not taken (not built)")
        out[name] = meta._replace(shape=batch + tiles + (rows,) + tuple(meta.shape[at + 1:]))
        held[name] = (tuple(meta.shape), at)
    return out, held


def _held_shapes(spec, shapes, held):
    """The plan's shapes as the user holds the tensors: those given as given, an output along the
    grid's rows not given in the layout of the first such tensor given (`o` as `q` [B, H, D]), its
    own dimensions after the rows."""
    first = next(v for v in held.values() if v[1] is not None)
    out = dict(shapes)
    for a in spec["args"]:
        if a["name"] in held:
            out[a["name"]] = held[a["name"]][0]
            continue
        if not any(k == "m" for k, _ in _extents(spec, a)):
            continue
        shape, at = first
        tail = len(a["dims"]) + a["per_iteration"] - 1  # the dimensions after the rows
        out[a["name"]] = tuple(shape[:at + 1]) + tuple(shapes[a["name"]][len(shapes[a["name"]]) - tail:])
    return out


# ---- layouts: a row pitch, or a staging copy -------------------------------------------------------
# A tensor the kernel reads or writes through TMA is taken as it lies where its last dimension is
# contiguous, its other dimensions collapse to rows (row_stride elements apart) and batch entries
# (batch_stride apart), both strides are multiples of 16 bytes and its data starts on a 16-byte
# boundary: the strides go to the Problem (NAME_row_stride, NAME_batch_stride), no copy. Any other
# tensor (and any the kernel reads or writes with plain loads and stores, which index it
# contiguously) is staged: an input copied into a buffer whose rows are padded to 16 bytes (plain:
# contiguous), an output written there and copied into the caller's tensor after the launch; one
# extra read and write of the tensor. An output not passed is allocated with that padding and
# returned as the view [..., :N] of its buffer (no copy): a later kernel takes it as it lies.
# A load the kernel reads at any pitch (spec "any_pitch": twill/emit/anypitch.py, a row kernel's input such
# as cross-entropy's 50257 bf16 logits a row) is not staged where its rows are not 16 bytes apart: its row
# stride goes to the kernel negated, and the kernel reads each row with a bulk copy (_any_pitch), no copy.
# An entry of plan["layouts"] is (how, pitch, row_stride, batch_stride): how "as is" (the tensor
# given), "any pitch" (given; row_stride < 0: rows -row_stride elements apart, at any pitch), "stage"
# (a buffer of rows of `pitch` elements) or "alloc" (an output not given, allocated with rows of `pitch`);
# the strides in elements, 0 for a tensor the kernel indexes contiguously.

ANY_PITCH = True  # False: stage every layout a 2-d map cannot read (the path before anypitch.py; timings)


def any_pitch() -> bool:
    """Whether inputs may be read at any pitch: ANY_PITCH, and the environment's TWILL_ANY_PITCH (read at each
    call; 0 stages them, in every binding module at once: a sequence's loops each hold their own copy of this
    runtime, loaded at their first call)."""
    return ANY_PITCH and os.environ.get("TWILL_ANY_PITCH", "1") != "0"


def pitch_of(arg, cols):
    """A TMA tensor's row of `cols` elements padded to 16 bytes, in elements (cols where it is one)."""
    return -(-cols * arg["esize"] // 16) * 16 // arg["esize"] if arg["tma"] else cols


def _pitched(arg, shape, strides):
    """(row_stride, batch_stride) of a tensor of `shape` and `strides` (elements) as the kernel's map
    reads it, [batch][rows][cols]; None where its dimensions do not collapse so (the last not
    contiguous, batch dimensions not evenly strided) or rows would overlap."""
    two = len(arg["dims"]) == 2
    cols = shape[-1]
    if cols > 1 and strides[-1] != 1:
        return None
    rows = shape[-2] if two else 1
    rs = strides[-2] if two and rows > 1 else pitch_of(arg, cols)  # one row: any pitch reads it
    if rows > 1 and rs < cols:
        return None
    lead = [(d, st) for d, st in zip(shape[:len(shape) - 1 - two], strides) if d != 1]
    for (_, outer), (d, inner) in zip(lead, lead[1:]):
        if outer != inner * d:
            return None
    bs = lead[-1][1] if lead else rows * rs
    return (rs, bs) if not lead or bs >= (rows - 1) * rs + cols else None


def kernel_view(arg, meta):
    """The Meta of what the kernel reads of argument `arg` given as `meta`: the tensor itself, or for a
    transposed one (spec "transposed": an mma operand the tensor core reads K-major only, which the Triton
    kernel loads MN-major, B [K, N]: twill/ttgir/kmajor.py) its transpose .mT, its last two dimensions and
    their strides swapped."""
    if meta is None or not arg.get("transposed") or len(meta.shape) < 2:
        return meta
    strides = meta.strides if meta.strides is not None else _dense(meta.shape) if meta.contiguous else None
    shape = tuple(meta.shape[:-2]) + (meta.shape[-1], meta.shape[-2])
    if strides is None:
        return meta._replace(shape=shape, contiguous=False)
    strides = tuple(strides[:-2]) + (strides[-1], strides[-2])
    dense = _dense(shape)
    return meta._replace(shape=shape, strides=strides,
                         contiguous=all(st == ds for d, st, ds in zip(shape, strides, dense) if d != 1))


def _layout(spec, arg, meta, shape):
    """How the kernel takes argument `arg` (its Meta given, or None: an output allocated in the plan's `shape`):
    plan["layouts"]. A given tensor's own shape is read (GQA's K [*B, Hkv, L, D] is not Q's batch); of a
    transposed one (kernel_view), its .mT's: taken as it lies where .mT is K-major as TMA reads it (the w.t()
    of a contiguous [N, K] w), else staged, copied transposed into a buffer of .mT's rows (x.mT.contiguous()
    with its rows padded to 16 bytes)."""
    meta = kernel_view(arg, meta)
    shape = meta.shape if meta is not None else shape
    cols, tma, esize = shape[-1], arg["tma"], arg["esize"]
    if arg["output"] and meta is not None and meta.strides is not None:
        dim = next((i for i, (d, st) in enumerate(zip(shape, meta.strides)) if d > 1 and st == 0), None)
        if dim is not None:
            raise ArgumentError(f"{arg['name']}: an output whose elements overlap (stride 0 along its dimension {dim}, "
                                f"shape {list(shape)}: an expand()) cannot be written; pass a tensor of its own")
    plain = not tma or spec.get("rows") or spec.get("flat")  # indexed contiguously by the kernel
    if plain:
        if meta is None or (meta.contiguous and meta.ptr % 16 == 0):
            return ("as is" if meta is not None else "alloc", cols, 0, 0)
        return ("stage", cols, 0, 0)
    two = len(arg["dims"]) == 2
    pitch, rows = pitch_of(arg, cols), shape[-2] if two else 1
    padded = ("alloc" if meta is None else "stage", pitch, pitch, rows * pitch if two else pitch)
    if meta is None:
        return padded if pitch != cols else ("alloc", cols) + _pitched(arg, shape, _dense(shape))
    strides = meta.strides if meta.strides is not None else _dense(shape) if meta.contiguous else None
    found = strides and _pitched(arg, shape, strides)  # a Meta of unknown strides (not contiguous): staged
    if found is None or meta.ptr % 16 or any(x * esize % 16 for x in found):
        return _any_pitch(arg, meta, shape, found) or padded
    return ("as is", cols) + found


def _any_pitch(arg, meta, shape, found):
    """("any pitch", cols, -row_stride, batch_stride) where the kernel reads input `arg` (its Meta, its strides
    `found` by _pitched) at any pitch: its rows contiguous and evenly strided, its start 16-byte aligned (the
    bulk copies' 16-byte chunks count from it: any_pitch_problems); else None (staged)."""
    if not any_pitch() or not arg.get("any_pitch") or arg["output"] or not found or meta.ptr % 16:
        return None
    rs, bs = found
    if any_pitch_problems(arg, shape, rs, meta.ptr):
        return None
    return ("any pitch", shape[-1], -rs, bs)


def any_pitch_problems(arg, shape, rs, ptr):
    """Why input `arg` (`shape` [*batch, rows, cols], rows rs elements apart, at address `ptr`) cannot be read at
    any pitch (anypitch.py: one bulk copy a row from its 16-byte boundary, 16-byte aligned at both ends): a list
    of sentences, empty where it can."""
    out = []
    if ptr % 16:
        out.append(f"the base address {ptr:#x} is not 16-byte aligned")
    if rs < shape[-1]:
        out.append(f"rows {rs} elements apart, shorter than a row of {shape[-1]}")
    return out


def _dense(shape):
    """The strides of a contiguous tensor of `shape`, in elements."""
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= max(d, 1)
    return tuple(reversed(out))


def _split_output(spec, arg, shape, batch_shape, batch_of, known, who):
    """An output of a split kernel: [splits, *batch, ...] (the batch as the inputs have it, or
    flattened to one dimension, as Triton's O_PART[splits, B*H, N, D]); its splits recorded."""
    name, dims = arg["name"], _extents(spec, arg)
    lead = len(shape) - len(dims)
    batch = tuple(shape[1:lead])
    if lead < 1 or (batch != tuple(batch_shape) and batch != (math.prod(batch_shape),)):
        raise ArgumentError(f"{name}: expected shape [splits, *batch, ...] with the batch {list(batch_shape)} of "
                            f"{batch_of} (or {[math.prod(batch_shape)]}), got {list(shape)}: a split kernel's outputs "
                            f"have a leading dimension of splits ({spec['split']})")
    if "splits" in known and known["splits"] != shape[0]:
        raise ArgumentError(f"{name}: {shape[0]} splits (its first dimension), but {who['splits'][0]} has "
                            f"{known['splits']}")
    known["splits"], who["splits"] = shape[0], (name, 1, shape[0])
    for i, ((key, size), extent) in enumerate(zip(dims, shape[lead:])):
        _unify(spec, arg, key, size, extent, known, who, shape, lead + i)
    arg_shape = known.setdefault("split_shapes", {})
    arg_shape[name] = shape[:lead]


# A row loop split over the grid by columns (twill/emit/colsplit.py): the argument that gives each split's
# elements along the loop (the launch's L / S; no imported kernel's argument has this name), and the fewest
# iterations a split runs besides the pipeline's stages (a split's loads are its only latency cover, and
# each split adds a partial to combine).
COLUMN_ARG = "twill_split_cols"
MIN_SPLIT_ITERS = 2


def choose_splits(tiles, iters, stages, sms):
    """S, the splits of a loop of `iters` iterations over `tiles` row tiles (CTAs) on `sms` SMs: the most
    splits that divide iters (each split whole tiles), run at least max(stages, MIN_SPLIT_ITERS) iterations
    each, and keep the CTAs, tiles * S, within one wave of the SMs; 1 where even two splits would not (the
    tiles fill half the SMs or more: a second wave would cost what the split saves). Deterministic: a
    function of the shapes and the SM count alone. (A sequence's K.py calls its loops' bindings' copy.)"""
    least = max(stages, MIN_SPLIT_ITERS, 1)
    fits = [s for s in range(2, iters // least + 1) if iters % s == 0 and tiles * s <= sms]
    return fits[-1] if fits else 1


# The combine of a fold's S partials [S, *rows] into the row's carries, per fold (twill/emit/colsplit.py): the
# text of a function of the array module `xp` (torch; numpy in the tests: the same calls), the loop's
# exp2_scale and the partials of the fold's carries, returning the row's carries in their order. `call`
# combines a kernel's own folds (spec["folds"]); a sequence's K.py carries the text of its loops' folds.
COMBINE = {
    "max": "lambda xp, scale, p: (xp.amax(p, 0),)",
    "min": "lambda xp, scale, p: (xp.amin(p, 0),)",
    "sum": "lambda xp, scale, p: (xp.sum(p, 0),)",
    # l = sum_s l_s * exp2((m_s - m) * scale), m = max_s m_s (a split of -inf alone: l_s = 0, exp2(-inf) = 0;
    # a row of -inf throughout is nan, as the loop unsplit computes it: exp2(-inf - -inf))
    "online": "lambda xp, scale, m, l: (lambda mx: (mx, xp.sum(l * xp.exp2((m - mx) * scale), 0)))(xp.amax(m, 0))",
}
_COMBINERS = {}


def combiner(kind):
    """COMBINE[kind] as a function (made once)."""
    fn = _COMBINERS.get(kind)
    if fn is None:
        fn = _COMBINERS[kind] = eval(COMBINE[kind])  # noqa: S307 (this module's own table, above)
    return fn


_SMS = {}


def _sm_count(device):
    """The SMs of a torch device (read once per device)."""
    key = str(device)
    if key not in _SMS:
        import torch
        _SMS[key] = torch.cuda.get_device_properties(torch.device(key)).multi_processor_count
    return _SMS[key]


def choose_uneven(tiles, iters, stages, sms):
    """(S, q) for a loop of `iters` iterations whose last tile is partial (each split but the last would end inside
    a tile were the splits even): S - 1 splits of q = ceil(iters / S) iterations and a last of what they leave, the
    most S that keeps tiles x S within one wave and every split at least max(stages, MIN_SPLIT_ITERS) iterations;
    (1, iters) where none does. Deterministic, as choose_splits."""
    least = max(stages, MIN_SPLIT_ITERS, 1)
    best = (1, iters)
    for s in range(2, iters // least + 1):
        q = -(-iters // s)
        if tiles * s > sms:
            break
        if iters - (s - 1) * q >= least:
            best = (s, q)
    return best


def split_elements(spec, plan, stages, sms):
    """Each split's elements for a loop split by columns (the split's argument), from its plan as one split; None
    for one split. Whole tiles: choose_splits; a partial last tile: choose_uneven (the last split shorter). A wave
    is the SMs times the CTAs an SM runs at once (spec["ctas_per_sm"], occupancy.py)."""
    step, tiles = spec["loop_step"], plan["tiles_m"] * plan["tiles_n"] * plan["batch"]
    sms *= spec.get("ctas_per_sm", 1)
    if plan["loop_extent"] == plan["iters"] * step:
        s = choose_splits(tiles, plan["iters"], stages, sms)
        return plan["loop_extent"] // s if s > 1 else None
    s, q = choose_uneven(tiles, plan["iters"], stages, sms)
    return q * step if s > 1 else None


def _own_split(spec, plan, device):
    """Each split's elements for a kernel that splits its own columns (its only loop split by columns:
    spec["split"] is COLUMN_ARG, and its folds' partials, if any, combined by `call`, spec["folds"]) when the
    caller passes none: split_elements of the plan's row tiles, iterations and the device's SMs; None for one
    split."""
    if spec.get("split") != COLUMN_ARG or (any(a.get("splits") for a in spec["args"]) and "folds" not in spec):
        return None
    return split_elements(spec, plan, spec["stages"], _sm_count(device))


def _split_loop(spec, known, who, split):
    """A split kernel's loop: the whole extent L (the inputs') is splits x the split's elements `split`
    (the Triton kernel's argument, spec["split"]), as its launch computes them; splits from the outputs'
    first dimension or L / split. Each split runs split / step iterations: known["loop"] becomes split."""
    arg, step = spec["split"], spec["loop_step"]
    if "loop" not in known:
        raise ArgumentError(f"{spec['kernel']}: no argument gives the loop's extent, which the splits divide")
    total = known["loop"]
    if split is not None and (isinstance(split, bool) or not isinstance(split, int) or split < 1):
        raise ArgumentError(f"{arg}: expected a positive Python int (each split's elements along the loop), got "
                            f"{split!r}")
    if split is None and "splits" not in known and arg == COLUMN_ARG:
        known["splits"] = 1  # a row loop split by columns (COLUMN_ARG), not given: one split (call: _own_split),
        return  # the loop as alone (what it takes, and its errors, named by the tensors that give L)
    if split is None and "splits" not in known:
        raise ArgumentError(f"{arg}: missing, and no output gives the splits: pass {arg} (each split's elements "
                            "along the loop) or the outputs")
    if arg == COLUMN_ARG and split is not None and total % split:
        return _uneven(spec, known, who, split)
    splits = known.get("splits") or (total // split if total % split == 0 else None)
    if splits is None or total % splits:
        raise ArgumentError(f"{arg} = {split} does not divide L = {total} (given by {who['loop'][0]}): the splits "
                            "would leave keys out" if split is not None else
                            f"{who['splits'][0]}: {known['splits']} splits do not divide L = {total} (given by "
                            f"{who['loop'][0]})")
    split = total // splits if split is None else split
    if split * splits != total:
        raise ArgumentError(f"{arg} = {split}, but {who['splits'][0]}'s {splits} splits of L = {total} (given by "
                            f"{who['loop'][0]}) make {total // splits}: the launch passes L / splits")
    if step and split % step and splits > 1:  # (one split is the whole loop: its last tile may be partial)
        raise ArgumentError(f"{arg} = {split} is not a multiple of {step}: each split runs whole tiles of the loop "
                            f"(a partial last tile would read the next split's first elements)")
    known["splits"], known["loop"] = splits, split
    who["loop"] = (f"{arg} = {split}", 1, split)


def _uneven(spec, known, who, split):
    """A column split whose splits do not divide L: S = ceil(L / split) splits of `split` elements (whole tiles), the
    last taking what the others leave (at least the pipeline's stages of iterations; its last tile may be partial,
    as the loop's alone may): known["whole"] is L, which the launch passes (Problem::loop_whole)."""
    arg, step, total = spec["split"], spec["loop_step"], known["loop"]
    splits = -(-total // split)
    if splits == 1:  # one split: the loop as alone
        known["splits"] = 1
        return
    if known.get("splits", splits) != splits:
        raise ArgumentError(f"{arg} = {split}, but {who['splits'][0]} has {known['splits']} splits: L = {total} "
                            f"(given by {who['loop'][0]}) makes {splits} of {split}")
    if step and split % step:
        raise ArgumentError(f"{arg} = {split} is not a multiple of {step}: each split runs whole tiles of the loop "
                            f"(a partial last tile would read the next split's first elements)")
    last = total - (splits - 1) * split
    if step and last % step and not spec["ragged"]:
        raise ArgumentError(f"{who['loop'][0]}: L = {total} is not a multiple of {step}, and this kernel takes no "
                            f"partial last tile ({spec['ragged_why']})")
    if step and -(-last // step) < spec["stages"]:
        raise ArgumentError(f"{arg} = {split}: the last of L = {total}'s {splits} splits would run "
                            f"{-(-last // step)} iteration(s); this kernel's pipeline needs at least {spec['stages']}")
    known["splits"], known["loop"], known["whole"] = splits, split, total
    who["loop"] = (f"{arg} = {split}", 1, split)


def _period(arg, shape, batch_shape, batch_of):
    """The entries of a one-value-per-batch-entry argument (a slope per head): its shape [*own] or
    [*own, 1], `own` the last dimensions of the others' batch (NumPy broadcasting: [H] under
    [B, H]); tile b reads entry b % their product. 0 where it has the whole batch."""
    own = tuple(shape[:-1]) if shape and shape[-1] == 1 else tuple(shape)
    while own and own[0] == 1:  # a leading 1 broadcasts (NumPy)
        own = own[1:]
    if len(own) > len(batch_shape) or tuple(batch_shape[len(batch_shape) - len(own):]) != own:
        raise ArgumentError(f"{arg['name']}: one value per batch entry, shape {list(shape)}, whose dimensions are "
                            f"not the last of {batch_of}'s batch {list(batch_shape)} (as [H] is under [B, H])")
    return 0 if own == tuple(batch_shape) else math.prod(own)


def _unbatched(arg, batch, shape):
    """An argument the kernel reads one of for every batch entry (spec "unbatched": the Triton kernel's address
    reads no batch program id, twill/ttgir/unbatched.py): no batch dimensions, or leading 1s (NumPy); a real batch
    dimension is refused, since the kernel would read its first entry for every one."""
    if any(d != 1 for d in batch):
        name = arg["name"]
        raise ArgumentError(f"{name}: the kernel reads one {name} for every batch entry (the Triton kernel's address of "
                            f"it reads no batch program id), so it takes {name} with no batch dimensions (shape "
                            f"{layout(arg)}, leading 1s allowed), got {list(shape)}, whose batch dimensions "
                            f"{list(batch)} it would not read past the first entry")


def _group(arg, batch, batch_shape, batch_of, shape):
    """How many consecutive batch entries of the others share one of `arg`'s (grouped-query
    attention: K and V [*B, Hkv, ...] under Q [*B, Hq, ...] with Hq % Hkv == 0): the others' last
    batch dimension over its own, every other batch dimension equal. A leading part of the others'
    batch dimensions (a key bias [*B, L] under Q [*B, H, ...], Triton's `KB + (bh // H) * stride`)
    serves all of the rest: H (none, or only 1s: every batch entry reads the one entry)."""
    name = arg["name"]
    batch, batch_shape = tuple(batch), tuple(batch_shape)
    if len(batch) < len(batch_shape) and batch == batch_shape[:len(batch)]:
        return math.prod(batch_shape[len(batch):])  # one entry per leading [*B], each serving the rest
    if len(batch) <= len(batch_shape) and all(d == 1 for d in batch):
        return math.prod(batch_shape)  # one entry (its batch only 1s) for all of them
    if len(batch) != len(batch_shape) or not batch or batch[:-1] != batch_shape[:-1]:
        raise ArgumentError(f"{name}: batch dimensions {list(batch)} differ from {batch_of}'s {list(batch_shape)} "
                            f"other than in the last (heads), where {name} may have fewer, or than by leaving out "
                            f"trailing ones (shape {layout(arg)}, got {list(shape)})")
    own, theirs = batch[-1], batch_shape[-1]
    if own < 1 or theirs % own:
        raise ArgumentError(f"{name}: {own} heads (its last batch dimension, shape {list(shape)}) do not divide "
                            f"{batch_of}'s {theirs}: grouped-query attention needs Hq % Hkv == 0, each head of "
                            f"{name} serving Hq / Hkv consecutive heads of {batch_of}")
    return theirs // own


def _unify(spec, arg, key, size, extent, known, who, shape, dim=None):
    name = arg["name"]
    if key.startswith("iters/"):  # a row per `div` iterations: checked against the iterations in _finish
        known.setdefault("per", []).append((key, extent, name))
        return
    if key == "fixed":
        if extent != size:
            raise ArgumentError(f"{name}: expected shape {layout(arg)}, got {list(shape)} ({extent} where the "
                                f"kernel's tile has {size})")
        return
    what = SYMBOLS[key]
    why = spec.get("partial", {}).get(key) if key in ("m", "n") else None  # "": a partial last tile is taken
    if extent < 1 or (extent % size and why != ""):
        raise ArgumentError(f"{name}: {what} = {extent} is not a positive multiple of {size} (shape {layout(arg)}; "
                            f"the kernel's tile is {size} along it" + (f", and it takes no partial last tile: {why})"
                                                                        if why else ")"))
    value = -(-extent // size)
    if key in known and (known[key] != value or (who[key][1] == size and who[key][2] != extent)):
        raise ArgumentError(f"{name}: gives {what} = {extent}, but {who[key][0]} gives {what} = {who[key][2]}")
    if key in known and who[key][1] != size and (extent % size or who[key][2] % who[key][1]):
        raise ArgumentError(f"{name}: {what} = {extent} in tiles of {size}, but {who[key][0]} has tiles of "
                            f"{who[key][1]} along it ({what} = {who[key][2]}): a partial last tile needs one tile size")
    known[key], who[key] = value, (name, size, extent, dim, len(shape))


# What each axis is, for messages: the loop's extent, the rows or columns the grid walks.
AXIS_WHAT = {"loop": "the loop's extent L", "m": "the rows M the grid walks", "n": "the columns N the grid walks"}


def _check_sizes(spec, sizes, known, who):
    """An imported kernel's size arguments (spec["extents"]: [name, axis]) that the caller passes as
    Python ints must be the tensors' extents along their axes, which the kernel runs over whole (the
    Triton kernel would stop at the argument: its loop's bound, its masks); None is not checked. A loop
    the kernel bounds by a compile-time constant (spec["loop_extent"]) needs tensors of that extent."""
    for name, axis in spec.get("extents", ()):
        value = sizes.get(name)
        if value is None or isinstance(value, bool) or not isinstance(value, int) or axis not in who:
            continue
        tensor, _, extent, dim, rank = who[axis][:5]
        if value == extent:
            continue
        sym = SYMBOLS[axis]
        fix = (f"pass every tensor sliced to {value} along {sym} (e.g. {_sliced(tensor, dim, rank, value)}.contiguous()), "
               f"or {name} = {extent}" if value < extent else f"pass {name} = {extent}, or tensors of {value} along {sym}")
        raise ArgumentError(f"{name} = {value}, but {tensor}'s dimension {dim} ({AXIS_WHAT[axis]}) is {extent}: the "
                            f"kernel runs over the tensors' whole extent, where the Triton kernel stops at {name}; {fix}")
    constant = spec.get("loop_extent")
    if constant is not None and not spec.get("flat") and "loop" in who and who["loop"][2] != constant:
        tensor, _, extent, dim, _ = who["loop"][:5]
        raise ArgumentError(f"{tensor}: L = {extent} (its dimension {dim}), but the kernel's loop runs to the "
                            f"compile-time constant {constant}: pass tensors of {constant} along the loop (or "
                            "compile and import the kernel for this extent)")


def _sized(sizes):
    """What the checks read of `sizes` (a call's size arguments): its Python ints, as a key."""
    return tuple((k, v) for k, v in sorted(sizes.items()) if isinstance(v, int)) if sizes else ()


def _sliced(tensor, dim, rank, value):
    """`A[:, :64]`: tensor `tensor` (of `rank` dimensions) sliced to `value` along dimension `dim`."""
    return f"{tensor}[" + ", ".join([":"] * dim + [f":{value}"]) + "]" if dim is not None and dim < rank else tensor


def _finish(spec, known, who, batch_shape, device, iters):
    step = spec["loop_step"]
    if "loop" in known:
        n = -(-known["loop"] // step)
        if known["loop"] % step and not spec["ragged"]:
            raise ArgumentError(f"{who['loop'][0]}: L = {known['loop']} is not a multiple of {step}, and this kernel "
                                f"takes no partial last tile ({spec['ragged_why']})")
        if known.get("iters", n) != n:
            raise ArgumentError(f"{who['iters'][0]}: has {known['iters']} iterations, but L = {known['loop']} "
                                f"makes {n}")
        known["iters"] = n
    if iters is not None:
        if known.get("iters", iters) != iters:
            raise ArgumentError(f"iters = {iters}, but {who['iters'][0]} makes {known['iters']}")
        known["iters"] = iters
    if "iters" not in known:
        raise ArgumentError(f"{spec['kernel']}: no argument gives the loop's extent: pass iters=")
    for key, extent, name in known.pop("per", []):
        div = int(key.split("/")[1])
        if extent != -(-known["iters"] // div):
            raise ArgumentError(f"{name}: {extent} rows, but the loop's {known['iters']} iterations read "
                                f"ceil(I/{div}) = {-(-known['iters'] // div)} (one per {div} iterations)")
    if known["iters"] < spec["stages"]:
        least = (spec["stages"] - 1) * step + 1 if step else spec["stages"]
        raise ArgumentError(f"{who.get('loop', who.get('iters', ('iters',)))[0]}: the loop runs {known['iters']} "
                            f"iteration(s); this kernel's pipeline needs at least {spec['stages']}"
                            + (f" (L >= {least})" if step else ""))
    for key in ("m", "n"):
        if key in spec["axes"] and key not in known:
            outs = [a["name"] for a in spec["args"] if a["output"] and any(ax == key for ax, _ in a["dims"])]
            raise ArgumentError(f"{spec['kernel']}: no argument gives {SYMBOLS[key]}: pass {' or '.join(outs)}")
    shapes = {}
    for a in spec["args"]:
        shape = [] if a.get("unbatched") else list(batch_shape)
        if a.get("splits"):  # [splits, *batch, ...] as given, else the inputs' batch
            shape = list(known.get("split_shapes", {}).get(a["name"], [known["splits"], *batch_shape]))
        for key, size in _extents(spec, a):
            if key.startswith("iters/"):
                shape.append(-(-known["iters"] // int(key.split("/")[1])) * size)
            elif key in ("m", "n") and who[key][1] == size:  # the extent given (its last tile may be partial)
                shape.append(who[key][2])
            elif key == "loop" and spec.get("split"):  # every split's elements (uneven: the whole extent)
                shape.append(known.get("whole") or known["loop"] * known["splits"])
            else:
                shape.append(size if key == "fixed" else known[key] * size)
        shapes[a["name"]] = tuple(shape)
        if a["tma"] and shape[-1] * a["esize"] % 16 and (spec.get("rows") or spec.get("flat")):
            raise ArgumentError(f"{a['name']}: rows of {shape[-1]} elements are not a multiple of 16 bytes, "
                                f"which TMA needs (a kernel that views its tensors' rows anew takes no row pitch)")
    batch = math.prod(batch_shape)
    # the extents in elements where a last tile is partial (0: whole tiles)
    ends = {k: who[k][2] if k in who and who[k][2] % who[k][1] else 0 for k in ("m", "n")}
    return {"tiles_m": known.get("m", 1), "tiles_n": known.get("n", 1), "iters": known["iters"],
            "m_extent": ends["m"], "n_extent": ends["n"],
            "loop_extent": known.get("loop", 0) if step else 0, "batch": batch, "batch_shape": tuple(batch_shape),
            "device": device, "shapes": shapes, "splits": known.get("splits", 1), "whole": known.get("whole", 0)}


# ---- building the shared library ------------------------------------------------------------------

_LOCK = threading.Lock()
_LIBS = {}


def find_nvcc():
    for c in (os.environ.get("NVCC"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc"):
        if c and os.path.exists(c):
            return c
    raise RuntimeError("twill binding: nvcc not found (set NVCC, or put it on PATH)")


def cache_dir():
    """$TWILL_CACHE_DIR/bindings, else $XDG_CACHE_HOME/twill/bindings (~/.cache/twill/bindings)."""
    base = os.environ.get("TWILL_CACHE_DIR")
    if not base:
        base = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                            "twill")
    return os.path.join(base, "bindings")


def nvcc_flags(spec):
    arch = spec["arch"]
    return ["-std=c++17", f"-gencode=arch=compute_{arch[3:]},code={arch}", "-O3", "-Xptxas", "-v",
            "-shared", "-Xcompiler", "-fPIC"]


def build(spec, here, directory=None):
    """The shared library of the binding in `here` (its kernel .cu and entry .cu), compiled with
    nvcc into `directory` (default cache_dir()) under the digest of both files, the flags and
    nvcc's path: built once, then reused. Returns the library's path; ptxas's report is beside
    it (PATH + '.log')."""
    nvcc = find_nvcc()
    entry = os.path.join(here, spec["entry"])
    digest = hashlib.sha256()
    for part in (spec["kernel_file"], spec["entry"]):
        with open(os.path.join(here, part), "rb") as f:
            digest.update(f.read())
    digest.update(("\0".join(nvcc_flags(spec)) + "\0" + os.path.realpath(nvcc)).encode())
    directory = directory or cache_dir()
    so = os.path.join(directory, f"{spec['kernel']}-{digest.hexdigest()[:20]}.so")
    if os.path.exists(so):
        return so
    os.makedirs(directory, exist_ok=True)
    tmp = f"{so}.{os.getpid()}.{threading.get_ident()}.tmp"
    proc = subprocess.run([nvcc, *nvcc_flags(spec), entry, "-o", tmp], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"twill binding: nvcc failed on {entry}:\n{(proc.stdout + proc.stderr)[-4000:]}")
    with open(so + ".log", "w") as f:
        f.write(proc.stdout + proc.stderr)
    os.replace(tmp, so)
    return so


def args_format(spec):
    """The `struct` format of the block `twill_launch` reads (K_entry.cu's `twill_args`; every field 8
    bytes, so native alignment adds no padding): tiles_m, tiles_n, iters, loop_extent, batch,
    m_extent, n_extent, persistent, raster_group, device; exp2_scale, out_scale; the stream; a pointer
    per tensor; a batch group per tensor; a row stride per tensor, then a batch stride per tensor (in
    elements; 0: contiguous); the epilogue's scalars (a double each, an i64 one's bits an int64: check_scalars);
    a split kernel's splits (a column split's: and its loop's whole extent where the splits are uneven, else 0); a
    fixup's scratch and counters (spec["fixup"], _fixup); a flat map's first element where it draws random
    numbers (spec["flat_first"]: twill/emit/rand.py)."""
    n = len(spec["args"])
    scalars = "".join("q" if s["type"] == "int64" else "d" for s in spec.get("scalars", ()))
    return (f"@10q2dP{n}P{n}q{2 * n}q" + scalars + ("q" if spec.get("split") else "")
            + ("q" if spec.get("split") == COLUMN_ARG else "")
            + ("2P" if spec.get("fixup") else "") + ("q" if spec.get("flat_first") else ""))


def library(spec, here, directory=None):
    """The loaded library (ctypes), built first where needed: once per process and folder."""
    key = (os.path.join(here, spec["entry"]), directory or cache_dir())
    if key in _LIBS:
        return _LIBS[key]
    with _LOCK:
        if key not in _LIBS:
            lib = ctypes.CDLL(build(spec, here, directory))
            lib.twill_args_bytes.restype = ctypes.c_int
            lib.twill_args_bytes.argtypes = []
            if lib.twill_args_bytes() != struct.calcsize(args_format(spec)):
                raise RuntimeError(f"twill binding: {spec['entry']} reads {lib.twill_args_bytes()} bytes of arguments, "
                                   f"the binding packs {struct.calcsize(args_format(spec))}: emit both again")
            # no argtypes: ctypes passes the packed bytes as a char* (argtypes' conversions cost ~5 us a call)
            lib.twill_launch.restype = ctypes.c_int
            lib.twill_error_string.restype = ctypes.c_char_p
            lib.twill_error_string.argtypes = [ctypes.c_int]
            _LIBS[key] = lib
        return _LIBS[key]


def spills(log_text):
    """ptxas's lines that report spilled bytes (none for a clean build)."""
    return [line.strip() for line in log_text.splitlines()
            if "spill" in line and not (" 0 bytes spill stores" in line and " 0 bytes spill loads" in line)]


# ---- the call --------------------------------------------------------------------------------------

def knob_missing(knob, expr, names):
    """A knob the graph computes from the kernel's arguments (`knob exp2_scale = sm_scale * 1.44`), called
    without them and without the knob itself."""
    raise ArgumentError(f"{', '.join(names)}: the kernel's {knob} is {expr}, computed from "
                        f"{'this argument' if len(names) == 1 else 'these arguments'}: pass "
                        f"{'it' if len(names) == 1 else 'them'} (as to the Triton kernel), or {knob}= itself")


def check_scalars(spec, values):
    """The epilogue's scalars (spec["scalars"], in order) as floats, each a Python number of its type; an int64 one
    (a rand's seed) as its 64 bits, a Python int in [-2^63, 2^64) taken as Triton takes a seed (`seed.to(tl.uint64)`:
    a negative one its two's complement); an int one (an i32 of the kernel: a rand's coefficient, a band's window)
    within 32 bits, which the entry point converts to a C++ int (a larger value is one Triton passes as an i64, a
    kernel this one is not)."""
    out = []
    for s, v in zip(spec.get("scalars", ()), values):
        whole = s["type"] in ("int", "int64")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (whole and not isinstance(v, int)):
            raise ArgumentError(f"{s['name']}: expected a Python {'int' if whole else s['type']}, got "
                                + ("nothing" if v is None else type(v).__name__))
        if s["type"] == "int64":
            if not -(1 << 63) <= v < (1 << 64):
                raise ArgumentError(f"{s['name']}: {v} does not fit 64 bits (a seed is taken as Triton's uint64)")
            out.append(v - (1 << 64) if v >= (1 << 63) else v)
            continue
        if s["type"] == "int" and not -(1 << 31) <= v < (1 << 31):
            raise ArgumentError(f"{s['name']}: {v} does not fit 32 bits (the kernel takes it as an i32, as the Triton "
                                "kernel it was imported from did; Triton passes a larger one as an i64)")
        out.append(float(v))
    return out


def call(spec, here, tensors, exp2_scale=1.0, out_scale=1.0, persistent=-1, raster_group=-1, iters=None, stream=None,
         scalars=(), split=None, sizes=None, flat_first=0):
    """Check `tensors` ({name: tensor or None}; None for an output to allocate), `scalars` and `sizes`
    (the imported kernel's size arguments, {name: value}: resolve), launch the kernel on the tensors'
    device and stream, and return the outputs (one tensor, or a named tuple).

    The fast path: what the checks read of the tensors (_key: shapes, dtypes, devices, strides,
    16-byte alignment) finds the _Launch that an earlier call of the same kind checked and prepared;
    anything else (a new kind, a bad argument) goes through _prepare, which checks it all (resolve)."""
    torch = _TORCH or _import_torch()
    if spec.get("flat"):
        tail = _flat_tail(spec, here, tensors, torch, dict(exp2_scale=exp2_scale, out_scale=out_scale,
                          persistent=persistent, raster_group=raster_group, stream=stream, scalars=scalars),
                          sizes or {})
        if tail is not None:
            return tail
    tensors = _column_major_views(spec, tensors)
    folded = {}  # a fold's outputs as given (or None): the kernel writes its partials, combined into these
    if "folds" in spec:
        folded = {n: tensors.get(n) for _, outs in spec["folds"] for n in outs}
        tensors = {**tensors, **dict.fromkeys(folded)}
    deferred = DEFERRED.get()
    # deferred (a sequence's one kernel): one split, never the loop's own (_own_split): the one kernel runs each
    # loop as one split and refuses a block of more (fused_prepare: cudaErrorInvalidValue, H100 session 36)
    key, ptrs = _key(spec, tensors, (iters, split, _sized(sizes), deferred is not None), torch.Tensor)
    run = _LAUNCHES.get(key)
    if run is None:
        run = _prepare(spec, tensors, iters, torch.Tensor, lambda name: getattr(torch, name), split, sizes,
                       own_split=deferred is None)
        lib = library(spec, here)  # after the checks: a bad argument is refused before any build
        run = run._replace(launch=lib.twill_launch, error=lib.twill_error_string)
        if key is not None and tuple(tensors) == run.names:  # a kind checked once; the names in the binding's order
            if len(_LAUNCHES) >= 256:  # many shapes: start again rather than grow without bound
                _LAUNCHES.clear()
            _LAUNCHES[key] = run
        tensors = {n: tensors.get(n) for n in run.names}
        ptrs = [None if t is None else t.data_ptr() for t in tensors.values()]
    extra = check_scalars(spec, scalars) if run.scalars else ()
    if deferred is not None and (run.stage or folded or run.plan["splits"] != 1):
        raise NotDeferred(f"{spec['kernel']}: its tensors are staged, its folds combined around its own launch, or "
                          f"its loop split ({run.plan['splits']} splits; the one kernel runs each loop as one)")
    for name, t in folded.items():
        if t is not None:
            _check_folded(spec, run, name, t)
    values = list(tensors.values())
    for i, shape, dtype, zero, cols in run.allocate:
        t = (torch.zeros if zero else torch.empty)(shape, dtype=dtype, device=run.device)
        values[i] = t if shape[-1] == cols else t[..., :cols]  # rows padded to 16 bytes for TMA: a view
        ptrs[i] = t.data_ptr()
    for i in run.zero:
        values[i].zero_()  # the kernel's CTAs add into it
    held, staged = _stage(run, values, ptrs, stream, torch)  # (held: alive until the launch, below)
    s = _current_stream(run.index) if stream is None else stream.cuda_stream
    fix = _fixup(spec, run, s, stream, torch, held) if "fixup" in spec else ()
    first = (int(flat_first),) if spec.get("flat_first") else ()  # a flat map's first element (_flat_tail)
    block = _block(run, ptrs, s, exp2_scale, out_scale, persistent, raster_group, extra, fix, first)
    if deferred is not None:  # (its outputs allocated: the later loops' calls read them)
        deferred.append(block)
        return values[run.outputs[0]] if run.outputs_type is None else run.outputs_type(*[values[i] for i in run.outputs])
    err = run.launch(block)
    if err != 0:
        raise RuntimeError(f"{spec['kernel']}: launch failed: {run.error(err).decode()} (cudaError {err})")
    del held  # (the launch is in the stream: a block freed now is handed only to work queued after it)
    if staged:  # outputs written into their staging buffers: into the caller's tensors
        with _NO_CONTEXT if stream is None else torch.cuda.stream(stream):
            for user, buf in staged:
                user.copy_(buf)
    if folded:  # each fold's S partials [S, *batch, rows] combined into the row's carries
        with _NO_CONTEXT if stream is None else torch.cuda.stream(stream):
            _combine(spec, run, values, folded, exp2_scale, torch)
    if run.outputs_type is None:
        return values[run.outputs[0]]
    return run.outputs_type(*[values[i] for i in run.outputs])


def _stage(run, values, ptrs, stream, torch):
    """The tensors the kernel reads or writes through a buffer (layouts' "stage": rows TMA takes; a transposed
    input's .mT, K-major: kernel_view), made and filled on the kernel's stream, each buffer's address into `ptrs`.
    Returns (held, staged): every buffer, which the caller holds until the kernel is launched (a buffer dropped
    before then goes back to torch's caching allocator, which hands its memory to the next allocation on the
    stream, a later buffer or the fixup's scratch, while the kernel is still to read it); and the outputs'
    (caller's tensor, buffer's view) pairs, copied back after the launch."""
    held, staged = [], []
    if not run.stage:
        return held, staged
    with _NO_CONTEXT if stream is None else torch.cuda.stream(stream):  # the copies on the kernel's stream
        for i, shape, output, zero, cols, flip in run.stage:
            buf = (torch.zeros if zero else torch.empty)(shape, dtype=values[i].dtype, device=run.device)
            if not output:
                buf[..., :cols].copy_(values[i].mT if flip else values[i])
            else:
                staged.append((values[i], buf[..., :cols]))
            held.append(buf)
            ptrs[i] = buf.data_ptr()
    return held, staged


def _flat_tail(spec, here, tensors, torch, kw, sizes):
    """A flat map over n elements that its rows cannot hold whole: n not a multiple of C = spec["loop_extent"] (98433
    elements, C = 128), or n / C blocks with no divisor that gives a row the iterations the pipeline needs (769
    blocks where a row needs 2: _flat_blocks). With U = C x those blocks, the kernel runs on the first n - r
    elements, r = n mod U, as they lie (views, `call` as for any n), then on the last r copied into one zero-padded
    row of U, whose first r results are copied into the outputs (every element is its own: the padding's results
    are dropped). Outputs not given are allocated whole first. Returns the outputs as `call` does, or None where
    the rows hold n (or the arguments are for `call` to refuse)."""
    cols = spec["loop_extent"]
    args = {a["name"]: a for a in spec["args"]}
    given = [(n, x) for n, x in tensors.items() if x is not None]
    if not given or not all(isinstance(x, torch.Tensor) for _, x in given):
        return None
    count = given[0][1].numel()
    need = _flat_need(spec, cols)
    if count % cols == 0 and (not count or _flat_blocks(count // cols, cols, spec) >= need):
        return None
    cols *= need
    r = count % cols
    if not r or any(x.numel() != count or not x.is_contiguous() for _, x in given):
        return None  # (uneven counts or strided tensors: call's checks name them)
    _check_flat_size(spec["flat"], sizes.get(spec["flat"]), given[0][0], count)
    first = given[0][1]
    full = {n: x if x is not None else torch.empty(first.shape, dtype=getattr(torch, args[n]["dtype"]),
                                                   device=first.device)
            for n, x in tensors.items()}
    head = count - r
    inner = {**sizes, spec["flat"]: None} if spec["flat"] in sizes else sizes  # (each launch's n is not the user's)
    stream = kw["stream"]
    result = None
    if head:
        result = call(spec, here, {n: x.view(-1)[:head] for n, x in full.items()}, sizes=inner, **kw)
    with _NO_CONTEXT if stream is None else torch.cuda.stream(stream):
        padded = {n: torch.zeros(cols, dtype=x.dtype, device=x.device) for n, x in full.items()}
        for n, x in full.items():
            if not args[n]["output"]:
                padded[n][:r].copy_(x.view(-1)[head:])
    last = call(spec, here, padded, sizes=inner, flat_first=head, **kw)  # (a draw's counters: the elements' own)
    with _NO_CONTEXT if stream is None else torch.cuda.stream(stream):
        for n, x in full.items():
            if args[n]["output"]:
                x.view(-1)[head:].copy_(padded[n][:r])
    outs = [full[n] for n in (a["name"] for a in spec["args"] if a["output"])]
    shape = result if result is not None else last
    return outs[0] if not isinstance(shape, tuple) else type(shape)(*outs)


def _check_folded(spec, run, name, t):
    """A fold's output as the caller gives it: the shape of one split's partial, the dtype, the device."""
    arg = next(a for a in spec["args"] if a["name"] == name)
    want = tuple(run.plan["shapes"][name][1:])
    if tuple(t.shape) != want or str(t.dtype).replace("torch.", "") != arg["dtype"] or t.device != run.device:
        raise ArgumentError(f"{name}: expected a {arg['dtype']} tensor of shape {list(want)} on {run.device} (the "
                            f"rows' {name}, combined from the loop's splits), got {str(t.dtype).replace('torch.', '')} "
                            f"{list(t.shape)} on {t.device}")


def _combine(spec, run, values, folded, scale, xp):
    """values[...] of each fold's outputs: its partials combined (COMBINE), copied into the caller's tensor
    where one was given."""
    at = {n: i for i, n in enumerate(run.names)}
    for kind, outs in spec["folds"]:
        rows = combiner(kind)(xp, float(scale), *(values[at[n]] for n in outs))
        for name, row in zip(outs, rows):
            user = folded.get(name)
            if user is not None:
                user.copy_(row)
                row = user
            values[at[name]] = row


def _column_major_views(spec, tensors):
    """An input the Triton kernel reads column-major (`column_major`: a [K, N] view of an [N, K]
    tensor, such as w.t()) may come as that view: where it is not contiguous but its transpose
    .mT is, the kernel reads .mT, the same memory in the layout the checks expect."""
    for a in spec["args"]:
        t = tensors.get(a["name"])
        if a.get("column_major") and t is not None and t.dim() >= 2 and not t.is_contiguous() and t.mT.is_contiguous():
            tensors = {**tensors, a["name"]: t.mT}
    return tensors


_TORCH = None
_current_stream = None


def _import_torch():
    """torch, imported on the first call; and how to read a device's current stream (the raw
    cudaStream_t torch's launchers read; through torch.cuda.current_stream where that is missing)."""
    global _TORCH, _current_stream
    import torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    _current_stream = raw if raw is not None else (lambda index: torch.cuda.current_stream(index).cuda_stream)
    _TORCH = torch
    return torch


# What a call of one kind of arguments needs besides their addresses (made once by _prepare): the
# plan; the packed block's format (pack) and its fields read off the shapes (head: tiles_m ..
# n_extent; groups); the device (index, and the object outputs are allocated on); the outputs to
# allocate ((position, shape, dtype, zeroed)) and those given to zero; the outputs' positions and
# named tuple type (None for one output); the entry point and its error strings; what the block ends
# with (a split kernel's splits: args_format); the tensors' row strides then batch strides (plan's
# layouts); the tensors staged ((position, buffer shape, output, zeroed, columns, transposed): _layout).
_Launch = collections.namedtuple("_Launch", "plan names pack head groups index device allocate zero outputs "
                                            "outputs_type scalars launch error tail strides stage")
_NO_CONTEXT = contextlib.nullcontext()
_LAUNCHES = {}


def _block(run, ptrs, stream, exp2_scale, out_scale, persistent, raster_group, scalars, fix=(), first=()):
    """The bytes twill_launch reads (args_format; K_entry.cu's twill_args, field by field)."""
    return run.pack(*run.head, int(persistent), int(raster_group), run.index, float(exp2_scale), float(out_scale),
                    stream, *ptrs, *run.groups, *run.strides, *scalars, *run.tail, *fix, *first)


_ARRIVALS = {}  # (device index, stream) -> its fixup counters, zero between launches (the last arrival resets them)


def _fixup(spec, run, raw_stream, stream, torch, held):
    """The pointers of a fixup's scratch (each split's partial carries, allocated per call, appended to `held`:
    the caller holds it until the launch, as _stage's buffers) and counters (kept per device and stream, zeroed
    once: each launch leaves them zero) for a split kernel whose epilogue reads its carries (spec["fixup"]:
    twill/emit/fixup.py); null pointers for one split."""
    plan, fix = run.plan, spec["fixup"]
    if plan["splits"] <= 1:
        return 0, 0
    tiles = plan["batch"] * plan["tiles_n"] * plan["tiles_m"]
    key, need = (run.index, raw_stream), tiles * (fix["rows"] // 16)
    with _NO_CONTEXT if stream is None else torch.cuda.stream(stream):
        counters = _ARRIVALS.get(key)
        if counters is None or counters.numel() < need:
            if len(_ARRIVALS) >= 64:  # many streams come and go: start again (each freed in its stream's order)
                _ARRIVALS.clear()
            counters = _ARRIVALS[key] = torch.zeros(need, dtype=torch.int32, device=run.device)
        scratch = torch.empty(tiles * plan["splits"] * fix["carries"] * fix["rows"], dtype=torch.float32,
                              device=run.device)
    held.append(scratch)
    return scratch.data_ptr(), counters.data_ptr()


def _key(spec, tensors, iters, tensor_type):
    """(key, pointers) of a call's tensors ({name: tensor or None}, in the binding's order): the key
    holds what the checks read of each tensor (shape, dtype, device, strides, start % 16), so two
    calls of one key pass or fail the checks alike. (None, None) where an argument is no tensor."""
    key, ptrs = [spec["kernel"], iters, tuple(tensors), any_pitch()], []
    for t in tensors.values():
        if t is None:
            key.append(None)
            ptrs.append(None)
        elif isinstance(t, tensor_type):
            p = t.data_ptr()
            key.append((t.shape, t.dtype, t.device, t.stride(), p & 15))
            ptrs.append(p)
        else:
            return None, None
    return tuple(key), ptrs


def _prepare(spec, tensors, iters, tensor_type, dtype_of, split=None, sizes=None, own_split=True):
    """Check the tensors (resolve, through _plan) and make the _Launch of their kind, its entry
    point not yet filled in. `tensor_type` is torch.Tensor, `dtype_of` gives torch's dtype of a name
    ('float16'). `own_split`: False for a call deferred into a sequence's one kernel, which runs the loop as one
    split where no split is given (not the loop's own choice of splits, _own_split)."""
    for n, t in tensors.items():
        if t is not None and not isinstance(t, tensor_type):
            raise ArgumentError(f"{n}: expected a torch.Tensor, got {type(t).__name__}")
    given = {n: None if t is None else describe(t) for n, t in tensors.items()}
    plan = _plan(spec, given, iters, split, sizes)
    names = tuple(a["name"] for a in spec["args"])
    device = next(t.device for n, t in tensors.items() if t is not None and n in names)
    own = _own_split(spec, plan, device) if split is None and own_split else None
    if own is not None:  # the loop's columns over more CTAs than the row tiles give
        plan = _plan(spec, given, iters, own, sizes)
    lay = plan["layouts"]
    allocate = tuple((i, _padded(plan["shapes"][a["name"]], lay[i][1]), dtype_of(a["dtype"]), a["zero"],
                      plan["shapes"][a["name"]][-1])
                     for i, a in enumerate(spec["args"]) if a["output"] and tensors.get(a["name"]) is None)
    stage = tuple((i, _padded(_kernel_shape(a, tensors[a["name"]].shape), lay[i][1]), a["output"],
                   a["output"] and a["zero"], _kernel_shape(a, tensors[a["name"]].shape)[-1], bool(a.get("transposed")))
                  for i, a in enumerate(spec["args"]) if lay[i][0] == "stage")
    zero = tuple(i for i, a in enumerate(spec["args"])
                 if a["output"] and a["zero"] and tensors.get(a["name"]) is not None and lay[i][0] != "stage")
    outs = tuple(i for i, a in enumerate(spec["args"]) if a["output"])
    kind = None if len(outs) == 1 else _outputs_type(spec["kernel"], tuple(names[i] for i in outs))
    head = tuple(plan[k] for k in ("tiles_m", "tiles_n", "iters", "loop_extent", "batch", "m_extent", "n_extent"))
    tail = () if not spec.get("split") else (plan["splits"], plan["whole"]) if spec["split"] == COLUMN_ARG \
        else (plan["splits"],)  # (args_format: a split kernel's splits; a column split's whole extent too)
    return _Launch(plan, names, struct.Struct(args_format(spec)).pack, head, tuple(plan["groups"]),
                   device.index or 0, device, allocate, zero, outs, kind,
                   bool(spec.get("scalars")), None, None, tail,
                   tuple(x[2] for x in lay) + tuple(x[3] for x in lay), stage)


def _kernel_shape(arg, shape):
    """The shape of what the kernel reads of a tensor of `shape` given for `arg`: its .mT's for a transposed one."""
    shape = tuple(shape)
    return shape[:-2] + (shape[-1], shape[-2]) if arg.get("transposed") and len(shape) >= 2 else shape


def _padded(shape, pitch):
    """A buffer's shape: `shape` with its last dimension `pitch`."""
    return tuple(shape[:-1]) + (pitch,)


# A call's host time is the kernel's launch latency for a short kernel, so what depends only on
# the arguments' shapes is kept: resolve's plan, by each tensor's shape, dtype, device, strides
# and 16-byte alignment (all it reads of a tensor), and the outputs' named tuple type.
_PLANS = {}
_OUTPUT_TYPES = {}


def _plan(spec, given, iters, split=None, sizes=None):
    """resolve(spec, given, iters, split, sizes), from the cache where the same shapes (and sizes) were
    resolved before (the plan returned is shared: read it, do not change it)."""
    key = (spec["kernel"], iters, split, _sized(sizes), any_pitch()) + tuple(
        (n, None) if m is None else (n, m.shape, m.dtype, m.device, m.contiguous, m.strides, m.ptr % 16 == 0)
        for n, m in given.items())
    plan = _PLANS.get(key)
    if plan is None:
        plan = resolve(spec, given, iters, split, sizes)
        if len(_PLANS) >= 256:  # many shapes: start again rather than grow without bound
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


class _Outputs(tuple):
    """A kernel's outputs: a tuple in the arguments' order, each also the attribute of its argument's
    name, as a named tuple's (which refuses names such as Triton's `_mean`)."""

    __slots__ = ()
    _fields: tuple = ()

    def __new__(cls, *values):
        return tuple.__new__(cls, values)

    def __getattr__(self, name):
        if name in type(self)._fields:
            return self[type(self)._fields.index(name)]
        raise AttributeError(f"{type(self).__name__} has no output {name!r}")

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{n}={v!r}' for n, v in zip(self._fields, self))})"

    def _asdict(self):
        return dict(zip(self._fields, self))


def _outputs_type(kernel, names):
    """The tuple type of a kernel's outputs (one class per kernel and names, made once)."""
    found = _OUTPUT_TYPES.get((kernel, names))
    if found is None:
        found = _OUTPUT_TYPES[(kernel, names)] = type(f"{kernel}_outputs", (_Outputs,), {"__slots__": (), "_fields": names})
    return found


SPEC = {'kernel': 'matmul_bcol',
 'arch': 'sm_90a',
 'kernel_file': 'triton39_mm_bcol.h100.cu',
 'entry': 'triton39_mm_bcol.h100_entry.cu',
 'stages': 1,
 'loop_step': 64,
 'ctas_per_sm': 1,
 'ragged': True,
 'ragged_why': '',
 'axes': ['m', 'n'],
 'partial': {'m': '', 'n': ''},
 'args': [{'name': 'a',
           'output': False,
           'dtype': 'float16',
           'esize': 2,
           'dims': [['m', 128], ['loop', 64]],
           'per_iteration': False,
           'tma': True,
           'zero': False,
           'shared': False},
          {'name': 'b',
           'output': False,
           'dtype': 'float16',
           'esize': 2,
           'dims': [['n', 128], ['loop', 64]],
           'per_iteration': False,
           'tma': True,
           'zero': False,
           'shared': True},
          {'name': 'acc',
           'output': True,
           'dtype': 'float16',
           'esize': 2,
           'dims': [['m', 128], ['n', 128]],
           'per_iteration': False,
           'tma': True,
           'zero': False,
           'shared': False}]}
HERE = os.path.dirname(os.path.abspath(__file__))


def matmul_bcol(a, b, *, acc=None, persistent=-1, stream=None):
    """Run kernel matmul_bcol. Every tensor is row-major on one CUDA device, with any leading
    batch dimensions, the same for all; an output not passed is allocated. A strided view (x[:, :N]) is
    taken as it lies where TMA reads it (strides of 16-byte multiples), else staged: copied into rows
    padded to 16 bytes (an output written there and copied back; one not passed returned as the view
    [..., :N] of its padded buffer). Shapes:

    a: torch.float16 [*batch, M, L] (M in tiles of 128)
    b: torch.float16 [*batch, N, L] (N in tiles of 128)
    acc: torch.float16 [*batch, M, N] (M in tiles of 128, N in tiles of 128)

    L: the loop's extent (a GEMM's K, attention's keys); L any number of elements (a partial last tile of 64)
    M: the rows the grid walks (blockIdx.x), any number (the last tile may be partial)
    N: the columns the grid walks (blockIdx.y), any number (the last tile may be partial)

    persistent=-1: 1: one CTA per SM looping over tiles, 0: a CTA per tile, -1: the launcher's choice
    stream=None: a torch.cuda.Stream (default: the current stream of the tensors' device)

    Returns acc. Raises ArgumentError (a ValueError naming the argument) for a tensor the
    kernel cannot take, RuntimeError where nvcc or the launch fails.
    """
    return call(SPEC, HERE, {'a': a, 'b': b, 'acc': acc}, persistent=persistent, stream=stream)


def build_library(directory=None):
    """Build the shared library now (the first call would): its path. ptxas's report is PATH.log."""
    return build(SPEC, HERE, directory)


run = matmul_bcol
