"""A loop extent that is not a multiple of the tile: what the last, partial tile needs.

`Problem::loop_extent` lets a caller run the loop over any number of elements (keys, a GEMM's K):
the loop then takes ceil(extent / step) iterations and the last tile is partial. TMA fills the
rows past the end of a tensor with zeros, which is already right wherever they are summed: a
contraction (mma) or a rowsum adds nothing for them. A maximum or an exponential is not: a zero
key would take part in a row's maximum, and exp2 of it is not 0. So each register value that runs
along the loop and is read by rowmax or exp2 is masked in place on the last iteration before its
first such reader: its elements past the extent become -inf, which rowmax skips and exp2 turns
into 0 (FlashAttention's key mask). That is sound only where every reader of the value treats an
absent element as -inf; anywhere else the kernel refuses a partial tile (`Ragged.why_not`, which
emit-cuda writes into the file and `launch` enforces) rather than compute something else. A loop
without an mma takes a partial tile where the fill reaches reductions along the loop only as their
identity, and anything else only clipped stores (`zero_fill_refusal`, `tail_refusal`). A `tail_mask`
(Triton's `tl.where(cols < N, v, 0)` of a computed v) sets its value's elements past the extent to its
fill where it is computed, on the partial last tile only (`Ragged.tails`). A load whose kernel fills
with -inf (`{fill = -inf}`, Triton's `other=-inf`) is masked before its rowmax and exp2 (its conversion to
f32 in registers; or, where they read the tile straight from shared memory, each reader's register copy of it,
`_filled_read`: the line after the copy, `OpCall.read_masks`), needs nothing where the fill reaches only clipped
stores, and takes whole tiles only elsewhere.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..band import Band, from_attrs
from .epilogue import launch_scalars
from .model import ident

MAX_LIKE = ("rowmax", "exp2")  # readers (of operand 0) for which an absent element is -inf


@dataclass(frozen=True)
class Ragged:
    step: int  # elements of the loop axis one iteration covers (0: no loaded tile runs along it)
    masks: tuple[tuple[str, str, int], ...]  # (op, value, dim): before op, value's elements past the extent become -inf
    why_not: str  # "" when a partial last tile is supported, else the reason
    # (value, dim): masked by the role computing it before it is handed to another role's rowmax / exp2
    published: tuple[tuple[str, int], ...] = ()
    # (tail_mask op, dim, fill): its result's elements past the extent become fill where it is computed
    tails: tuple[tuple[str, int, float], ...] = ()

    @property
    def mask_at(self) -> dict[str, tuple[str, int]]:
        return {op: (value, dim) for op, value, dim in self.masks}

    @property
    def publish_at(self) -> dict[str, int]:
        return dict(self.published)

    @property
    def tail_at(self) -> dict[str, tuple[int, float]]:
        return {op: (dim, fill) for op, dim, fill in self.tails}


def plan(model) -> Ragged:
    """How `model`'s kernel handles a partial last tile (a pure function of the model)."""
    from .tensors import value_axis
    axis = value_axis(model.graph, model.mma_shape)
    steps = sorted({t.tile[d] for t in model.tensors if t.kind == "load" for d in range(2) if t.axes[d] == "loop"})
    if not steps:
        return Ragged(0, (), "no loaded tile runs along the loop")
    if len(steps) > 1:
        return Ragged(0, (), f"the loaded tiles cover {' and '.join(map(str, steps))} elements of the loop each")
    step = steps[0]
    filled = [op for op in model.graph.ops if op.opcode == "load" and op.attr("fill", 0) != 0]
    for op in filled:  # other=-inf (ttgir/memory.loop_tail_fill): TMA's zero fill is not the kernel's, so the
        why = _filled_to_max_like(model, op)  # value must reach only rowmax / exp2, masked to -inf before them,
        if why and (reader := tail_refusal(model, axis, [(op.name, None)])):  # or no reduction along the loop at all
            return Ragged(step, (), f"load {op.name} fills the elements past the loop's extent with "
                                    f"{op.attr('fill')}, and TMA fills them with 0: whole tiles only ({why}; {reader})")
    if not any(op.opcode == "mma" for op in model.graph.ops):  # a row statistic's pass (tensors.py)
        why = zero_fill_refusal(model, axis, skip={op.name for op in filled})
        if why:
            return Ragged(step, (), why)
    tails = []
    for op in model.graph.ops:
        if op.opcode != TAIL_OPCODE:
            continue
        dims = [d for d in range(len(op.type.shape)) if axis(op.name, d) == "loop"]
        if len(dims) != 1 or op.type.space != "reg" or len(op.type.shape) != 2 or op.type.dtype != "f32":
            return Ragged(step, (), f"tail_mask {op.name} masks a value that is not an f32 register tile with one "
                                    "dimension along the loop, which is all its mask is emitted for")
        tails.append((op.name, dims[0], float(op.attr("fill"))))
    order = {op.name: i for i, op in enumerate(model.graph.ops)}

    def earliest(uses):
        return min(uses, key=lambda u: (model.sched[u.op].start, order[u.op]))
    masks, published = [], []
    for value in sorted(model.uses):
        info = model.values.get(value)
        if info is None:
            continue
        dims = [d for d in range(len(info.type.shape)) if axis(value, d) == "loop"]
        readers = [u for u in model.uses[value] if model.ops[u.op].opcode in MAX_LIKE and u.index == 0]
        made = model.ops.get(value)  # a tail_mask's result holds its fill past the extent (`tails`)
        held = float(made.attr("fill")) if made is not None and made.opcode == TAIL_OPCODE else None
        if not dims or not readers or not tail_refusal(model, axis, [(value, held)]):
            continue  # (a value whose elements past the extent reach only clipped stores needs no mask)
        first = earliest(readers)
        reader = f"{model.ops[first.op].opcode} {first.op}"

        def refuse(why: str) -> Ragged:
            return Ragged(step, (), f"{reader} reads {value}, which runs along the loop, {why}")
        if model.is_load(value) and _filled_read(model, value):
            # a tile loaded with {fill = -inf}, read from shared memory by rowmax / exp2 alone: each reader
            # copies it into registers (ops._registers), and that copy is masked (`masks`: one per reader)
            masks.extend((u.op, value, dims[0]) for u in readers)
            continue
        if info.kind == "input" or model.is_load(value):
            return refuse("straight from memory: the zero fill past the extent would take part")
        others = sorted({u.op for u in model.uses[value]} - {u.op for u in readers})
        if others:
            return refuse(f"and so does {others[0]}, for which an absent element is not -inf")
        if any(u.distance for u in model.uses[value]):
            return refuse("in a later iteration")
        if info.type.space != "reg" or len(info.type.shape) != 2 or len(dims) != 1 or not _register_tiles(model):
            return refuse("not as a register fragment of sm_90a, which is all the mask is emitted for")
        # a reader in another role reads the copy handed to it (registers through shared memory, in
        # place): the role computing the value masks it before the hand-over; its own first reader
        # masks it where it reads it (the same elements again: -inf stays -inf)
        own = [u for u in readers if u.role == info.role]
        if len(own) < len(readers):
            published.append((value, dims[0]))
        if own:
            masks.append((earliest(own).op, value, dims[0]))
    return Ragged(step, tuple(sorted(masks)), "", tuple(sorted(published)), tuple(sorted(tails)))


# A loop without an mma (a row statistic's pass over X [M, L]): what the elements past the extent hold
# is followed from the loads (TMA's zero fill) through the ops that read them (`tail_refusal`). They may
# hold anything where they reach only elementwise ops and clipped stores (TMA drops the elements past the
# tensor's end); a reduction along the loop must see its identity there (0 for a sum, -inf for a max).
# Ops that keep a 0 (sum(x) and sum(x * x) of a padded row are the row's own) and `tail_mask` (the
# kernel's `tl.where(cols < N, v, 0)`, computed on the partial last tile: LayerNorm's x - mean) give
# that; anything else (x - mean summed, exp, max) would compute with the padding, and the kernel refuses
# a partial last tile.
ZERO_KEEPING = ("convert", "mul", "rescale", "neg", "abs", "rowsum", "reduce_sum")  # f(0, y) = 0, y finite
ZERO_SAFE_SINKS = ("store",)  # TMA drops the elements past the tensor's end
TAIL_OPCODE = "tail_mask"
IDENTITY = {"rowsum": 0.0, "reduce_sum": 0.0, "rowmax": float("-inf"), "reduce_max": float("-inf"),
            "reduce_min": float("inf"), "reduce_prod": 1.0,  # reductions along the loop: what an absent element must be
            # (tl.argmax: a -inf past the extent is never the row's largest but where every element is -inf, and
            # then the smaller index, one inside, wins the tie)
            "rowargmax": float("-inf"), "rowargmin": float("inf")}
# forward scans: an element past the extent reaches only the elements after it, themselves past the extent
PREFIX_SCANS = ("cumsum", "cumprod", "cummax", "cummin")
ELEMENTWISE_FAMILIES = ("unary", "binary", "ternary", "convert")
# A maximum along the loop of a value no element of which is below 0 (|x|: a quantization's absmax) takes a 0
# past the extent as well as its identity: the row's maximum is at least 0 where the row has an element
MAXIMA = ("rowmax", "reduce_max")
NONNEGATIVE = ("abs",)


def _tail_after(op, index: int, tail: float | None) -> float | None:
    """What op's result holds past the extent when its operand `index` holds `tail` there (None: not known,
    it depends on the other operands, as x - mean does)."""
    if tail == 0.0 and op.opcode in ZERO_KEEPING:
        return 0.0
    if tail == float("-inf") and op.opcode == "exp2" and index == 0:
        return 0.0  # exp2((x - b) * scale) of -inf, b finite
    if tail is not None and op.opcode == "convert":
        return tail
    return None


def tail_refusal(model, axis, starts) -> str:
    """"" where the elements past the loop's extent of each (value, what it holds there: a number, or None
    where not known) in `starts` reach only ops that are right whatever they hold (elementwise ops and
    clipped stores), `tail_mask` (which replaces them), and reductions along the loop that see their
    identity there; else why not, naming the first op that would read them."""
    from ..vocab import lookup

    def along(value: str) -> bool:
        info = model.values.get(value)
        return info is not None and any(axis(value, d) == "loop" for d in range(len(info.type.shape)))

    todo, seen = list(starts), set()
    while todo:
        value, tail = todo.pop(0)
        if (value, tail) in seen:
            continue
        seen.add((value, tail))
        for u in model.uses.get(value, ()):
            op = model.ops[u.op]
            if u.distance:
                return f"{op.opcode} {u.op} reads {value}, which runs along the loop, in a later iteration"
            if op.opcode in ZERO_SAFE_SINKS:
                continue
            if op.opcode == TAIL_OPCODE:
                todo.append((u.op, float(op.attr("fill"))))
                continue
            family = getattr(lookup(op.opcode), "family", None)
            if along(u.op) and op.opcode in PREFIX_SCANS:
                todo.append((u.op, None))
                continue
            if along(u.op) and (family in ELEMENTWISE_FAMILIES or op.opcode in ("exp2", "rescale")):
                todo.append((u.op, _tail_after(op, u.index, tail)))
                continue
            if not along(u.op) and op.opcode in IDENTITY and u.index == 0 and tail == IDENTITY[op.opcode]:
                continue
            if (not along(u.op) and op.opcode in MAXIMA and u.index == 0 and tail == 0.0
                    and getattr(model.ops.get(value), "opcode", None) in NONNEGATIVE):
                continue  # max |x| of a padded row: its 0s are no larger than any element of the row
            if not along(u.op) and family in ("reduce", "row") and _next_iteration_only(model, u.op):
                continue  # tl.cumprod's carry of the tiles' product: after the last tile, read by no one
            what = "not known" if tail is None else f"{tail}"
            return (f"{op.opcode} {u.op} reads {value}, which runs along the loop, and its elements past the "
                    f"extent ({what} there) would take part (the reductions along the loop need 0 for a sum, "
                    f"-inf for a max there: ops that keep a 0 ({', '.join(ZERO_KEEPING)}) or a tail_mask, "
                    "Triton's tl.where(cols < N, v, 0), give it)")
    return ""


def _next_iteration_only(model, value: str) -> bool:
    """Whether `value` is read in its own iteration only by ops whose results are read likewise, down to the updates
    of carries whose final value nothing reads ({output = none}, no epilogue op or output reading it): computed on the
    partial last tile, the last iteration, it is read by no one (tl.cumprod's running product of the tiles before
    each, whose update multiplies in the tile's TMA zero fill there). A store, or a carry read after the loop, is a
    reader."""
    g = model.graph
    written = {c.name for c in g.carries if c.written}
    after = {o.name for op in g.epilogue.ops for o in op.operands} | {v for o, v in g.epilogue.outputs} | \
        {o for o, _ in g.epilogue.outputs}
    yielded: dict[str, list[str]] = {}
    for carry, src in g.yields:
        yielded.setdefault(src, []).append(carry)
    todo, seen = [value], set()
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        if any(c in written or c in after for c in yielded.get(v, ())):
            return False
        for u in model.uses.get(v, ()):
            if u.distance:
                continue  # the next iteration's: there is none after the last tile
            if model.ops[u.op].opcode in ZERO_SAFE_SINKS:
                return False
            todo.append(u.op)
    return True


def _filled_to_max_like(model, load) -> str:
    """"" where a load filled with -inf reaches, through conversions each its value's only reader, one
    value whose readers are all rowmax / exp2 (as operand 0), which `plan` masks to -inf past the
    extent before its first reader (the kernel's own fill, as those readers see it); else why not."""
    if load.attr("fill") != float("-inf"):
        return f"a fill of {load.attr('fill')}"
    value = load.name
    while True:
        uses = model.uses.get(value, ())
        if len(uses) == 1 and model.ops[uses[0].op].opcode == "convert" and not uses[0].distance:
            value = uses[0].op
            continue
        break
    if not uses or any(model.ops[u.op].opcode not in MAX_LIKE or u.index != 0 for u in uses):
        return f"{value} is read by other than rowmax and exp2"
    if value == load.name:  # read straight from shared memory: each reader's register copy is masked
        return "" if _filled_read(model, value) else _FILLED_READ_WHY
    info = model.values.get(value)
    if info is None or info.type.space != "reg" or not _register_tiles(model):
        return "the mask is emitted for a register fragment of sm_90a or a register tile of sm_100a in a loop without an mma only"
    return ""


_FILLED_READ_WHY = ("a tile read from shared memory is masked where its reader copies it into registers, a 2-d tile "
                    "with one dimension along the loop, read in the same iteration, on sm_90a or in a loop without "
                    "an mma on sm_100a only")


def _filled_read(model, value: str) -> bool:
    """Whether load `value`, filled with -inf, is read from shared memory by rowmax / exp2 (operand 0, the same
    iteration) alone, each of which copies the tile into a register tile that `plan` masks before it computes:
    a 2-d tile with one dimension along the loop, on a target whose register tiles `twill::mask_past` /
    `mask_tail` mask (`_register_tiles`)."""
    from .tensors import value_axis
    info, load = model.values.get(value), model.ops.get(value)
    uses = model.uses.get(value, ())
    if info is None or load is None or load.attr("fill") != float("-inf") or len(info.type.shape) != 2:
        return False
    axis = value_axis(model.graph, model.mma_shape)
    if sum(axis(value, d) == "loop" for d in range(2)) != 1 or not _register_tiles(model):
        return False
    return bool(uses) and all(model.ops[u.op].opcode in MAX_LIKE and u.index == 0 and not u.distance for u in uses)


def _register_tiles(model) -> bool:
    """Whether the loop's register values are the tiles `twill::mask_past` masks: sm_90a's fragments, or
    sm_100a's rows of a thread in a loop without an mma (no value there lives in tensor memory)."""
    return model.target.register_fragments or not any(op.opcode == "mma" for op in model.graph.ops)


def zero_fill_refusal(model, axis, skip=frozenset()) -> str:
    """"" where the zero fill of every loaded tile along the loop (but `skip`) is right with no mask of
    its own (`tail_refusal`); else why not, naming the first op that would read it."""
    starts = [(t.value, 0.0) for t in model.tensors if t.kind == "load" and "loop" in t.axes and t.value not in skip]
    why = tail_refusal(model, axis, starts)
    return f"the loop has no mma, and {why}" if why else ""


# -- causal loops --------------------------------------------------------------------------------
#
# `y = causal_mask x` keeps x's element (r, c) where its key is at or before its query and makes
# it -inf where the key comes later. x is a register tile (tensor memory on sm_100a) whose one
# dimension follows the grid's rows (m) and whose other follows the loop, in one of two
# orientations (`ORIENTATIONS`):
# - the forward (rows m, columns loop): a CTA per query tile, the loop over the keys. Row r is
#   query q0 + r, q0 the first row in memory of the query tile x's rows follow (the mma's A
#   operand: q, or q0 / q1 of FA3's sub-tiles, at tile.m * rows_step + rows_offset); column c is
#   key k0 + c, k0 = iteration * step. The loop runs, per query tile, over the keys up to the
#   tile's last row (`causal_iters`): later keys are masked for every row, and Triton's two
#   causal loops (ttgir/merge.py) stop there too. The query tiles with most key blocks go first.
# - the backward (rows loop, columns m): a CTA per key tile (FlashAttention's dK, dV), the loop
#   over the query tiles. Row r is query q0 + r, q0 = iteration * step; column c is key k0 + c,
#   k0 the first row in memory of the key tile x's columns follow (the mma's B operand, k). The
#   loop runs, per key tile, from the query block holding the tile's first key (`causal_first`:
#   earlier queries keep no key of the tile) to the loop's end: every iteration index along the
#   loop (its loads' and stores' rows, the mask's q0) is offset by that first block. The key
#   tiles with most query blocks (the first ones) go first.
# A tile with fewer iterations than the pipeline's stages runs kStages: the extra ones (past the
# diagonal forward, before it backward) are masked whole, which is sound because every reader of
# the mask is one for which -inf is an absent element (rowmax, exp2: the same rule as the partial
# tile's mask above; backward, P = 0 makes dS = P (dP - Delta) = 0 too).

MASK_OPCODE = "causal_mask"


@dataclass(frozen=True)
class Orientation:
    loop: str  # what the loop runs over: "keys" (its end is per tile) or "queries" (its start is)
    operand: int  # the mma operand of x's producer whose rows are the grid's: 0 (A, queries) or 1 (B, keys)


ORIENTATIONS = {("m", "loop"): Orientation("keys", 0), ("loop", "m"): Orientation("queries", 1)}


def causal_iters(iters: int, stages: int, step: int, rows_end: int) -> int:
    """Iterations of one query tile whose rows end (one past the last) at `rows_end`: the key
    blocks up to that row, at least the pipeline's `stages`, at most the loop's `iters`."""
    return min(iters, max(stages, -(-rows_end // step)))


def causal_first(iters: int, stages: int, step: int, keys_start: int) -> int:
    """The first iteration of one key tile whose first key is `keys_start` (a loop over query
    blocks of `step` rows): the block holding that key's query, earlier if the pipeline's
    `stages` need more iterations, never before 0."""
    return max(0, min(keys_start // step, iters - stages))


def causal_keeps(query: int, key: int) -> bool:
    """The mask's element rule: a key is kept at or before its query."""
    return key <= query


@dataclass(frozen=True)
class Causal:
    masks: tuple[tuple[str, str], ...]  # (causal_mask op, the tensor whose rows are the grid's m dimension of its tile)
    why_not: str  # "" when the kernel can be emitted, else the reason
    loop: str = "keys"  # what the loop runs over (Orientation.loop)
    band: Band = Band()  # the keys each query keeps (ttgir/band.py): the plain causal mask by default

    @property
    def rows_of(self) -> dict[str, str]:
        return dict(self.masks)

    @property
    def queries(self) -> tuple[str, ...]:
        return tuple(sorted({t for _, t in self.masks}))

    @property
    def starts(self) -> bool:
        """Whether the loop's first iteration is per tile (the backward's causal loop; the forward's
        where the band has a lower bound: a sliding window)."""
        return bool(self.masks) and (self.loop == "queries" or self.band.lower is not None)

    @property
    def backward(self) -> bool:
        return bool(self.masks) and self.loop == "queries"


def causal(model) -> Causal:
    """The causal masks of `model`'s loop and the tensor each one's grid dimension follows."""
    from .tensors import value_axis
    ops = [op for op in model.graph.ops if op.opcode == MASK_OPCODE]
    if not ops:
        return Causal((), "")
    axis = value_axis(model.graph, model.mma_shape)
    masks, loops, bands = [], set(), set()
    for op in ops:
        def refuse(why: str) -> Causal:
            return Causal((), f"causal_mask {op.name} {why}")
        space = "tmem" if model.target.tensor_memory else "reg"  # S is masked where it lies
        if len(op.operands) != 1 or op.type is None or len(op.type.shape) != 2 or op.type.space != space:
            return refuse(f"takes one 2-d tile and makes one in {'tensor memory' if space == 'tmem' else 'registers'}")
        value, dist = model.resolve(op.operands[0])
        if dist:
            return refuse("reads a tile of an earlier iteration")
        orient = ORIENTATIONS.get((axis(op.name, 0), axis(op.name, 1)))
        if orient is None:
            return refuse("masks a tile whose rows and columns are not the grid's tile rows and the loop "
                          "(the forward's queries and keys) or the loop and the grid's tile rows (the backward's)")
        if orient.loop == "queries" and space != "reg":
            return refuse("masks a tile whose rows follow the loop, which is emitted on sm_90a's register tiles only")
        readers = model.uses.get(op.name, ())
        if not readers or any(model.ops[u.op].opcode not in MAX_LIKE or u.index != 0 or u.distance for u in readers):
            return refuse("is read by an op for which -inf is not an absent element (only rowmax and exp2 may read it)")
        tensor = _grid_tensor(model, value, orient.operand)
        if tensor is None:
            what = ("query tile loaded along the grid's rows" if orient.operand == 0 else
                    "key tile along the grid's rows (the mma's B operand)")
            return refuse(f"masks {value}, whose {'rows' if orient.operand == 0 else 'columns'} follow no {what}")
        try:
            band = from_attrs(op.attrs)
        except ValueError as exc:
            return refuse(str(exc))
        if band.arg is not None and band.arg not in {v.name for v in launch_scalars(model.graph)}:
            return refuse(f"reads arg = {band.arg}, which is no scalar given at launch (the graph's prologue scalars)")
        if (band.upper_by or band.lower_by) and band.arg is None:
            return refuse("has a bound with a coefficient of an argument (upper_by, lower_by) but no arg")
        if band != Band() and orient.loop == "queries":
            return refuse("masks a band other than the causal one in a loop over the queries, which is not emitted "
                          "(the forward's loop over the keys is)")
        if band.upper_by:
            return refuse("has an upper bound that reads an argument: a query tile's last key block would be given at "
                          "launch, which is not emitted")
        masks.append((op.name, tensor))
        loops.add(orient.loop)
        bands.add(band)
    if model.ragged.step <= 0:
        return Causal((), "causal_mask needs a loaded tile along the loop (the key blocks)")
    if len(loops) > 1:
        return Causal((), "causal_mask: one loop cannot run over the keys for one mask and the queries for another")
    if len(bands) > 1:
        return Causal((), "causal_mask: the masks of one loop keep different bands of keys")
    return Causal(tuple(sorted(masks)), "", loops.pop(), bands.pop())


L2_STREAM_BYTES = 24 << 20  # of the L2 (50 MiB on the H100, 60 on the H200) for the tiles in flight's streams


def causal_code(model, plan: Causal) -> list[str]:
    """The device code of a causal loop's grid: `tile_at`, the tiles' order, and `causal_iters`, a
    tile's trip count (one CTA per tile, whose blocks start in the order of their index), with
    `causal_first`, a tile's first iteration, where the loop runs over the queries.

    The order: the tiles with the most loop iterations first (the last query rows forward, the
    first key rows backward), so the short tiles fill the grid's end, within groups of batch
    entries (heads) whose streamed tiles (those loaded along the whole loop: iters x
    kStreamBytes each) fit `L2_STREAM_BYTES` together. The CTAs in flight then read the streams
    of a few heads, which stay in L2 for the other tiles of those heads; numbering every head's
    tile m before any head's m - 1 put a different head on each SM and made every CTA stream its
    K and V from DRAM (ncu: 80% memory throughput, docs/gpu-results.md)."""
    starts = plan.backward
    stream = sum(t.tile_bytes for t in model.tensors if t.kind == "load" and "loop" in t.axes)
    row = "in / size" if starts else "args.tiles_m - 1 - in / size"
    return [
        f"constexpr long long kStreamBytes = {stream};  // bytes of the tiles loaded along the loop, per iteration",
        f"constexpr long long kL2StreamBytes = {L2_STREAM_BYTES};  // of L2 for the streams of the tiles in flight",
        "",
        "// The CTA's round-th tile, number t: the " + ("first key rows" if starts else "last query rows")
        + ", whose loops are longest, first, within",
        "// groups of g columns x batch entries whose streamed tiles share L2 (ragged.causal_code).",
        "__device__ __forceinline__ twill::TileIdx tile_at(const Args& args, int t, int round) {",
        "  const int per_m = args.tiles / args.tiles_m;  // tiles of one " + ("key" if starts else "query")
        + " row block: columns x batch",
        "  const long long per = static_cast<long long>(args.iters) * kStreamBytes;  // one column's streams",
        "  const int g = static_cast<int>(max(1LL, min(static_cast<long long>(per_m), kL2StreamBytes / max(per, 1LL))));",
        "  const int group = t / (g * args.tiles_m), in = t - group * g * args.tiles_m;",
        "  const int size = min(g, per_m - group * g);  // the last group may be smaller",
        "  const int r = group * g + in % size;",
        f"  return twill::TileIdx{{{row}, r % args.tiles_n, r / args.tiles_n, round,",
        "                       t + static_cast<int>(gridDim.x) >= args.tiles};",
        "}",
        "",
        *(_first_code(model, plan) if starts else _band_code(model, plan) if plan.starts else _end_code(model, plan)),
    ]


def _band_code(model, plan: Causal) -> list[str]:
    """causal_first and causal_iters of a forward band with a lower bound (a sliding window): a
    query tile's key blocks from the one holding its first row's first kept key to the one holding
    its last row's last kept key (ragged.band_first, band_iters)."""
    b = plan.band
    firsts = [f"tile.m * args.{q}_rows_step + args.{q}_rows_offset" for q in plan.queries]
    ends = [f"tile.m * args.{q}_rows_step + args.{q}_rows_offset + {model.tensor[q].tile[0]}" for q in plan.queries]
    low = f"{b.lower}" + (f" + {b.lower_by} * args.{ident(b.arg)}" if b.lower_by else "")
    return [
        f"// A band's key blocks for one query tile: key - query from {low} to {b.upper} (causal_mask",
        "// {upper, lower, lower_by, arg}). The tile's first block holds its first row's first kept key, its",
        "// last its last row's last; at least kStages blocks (the extra ones, earlier, are masked whole),",
        "// within the loop's iters (ragged.band_first, band_iters).",
        "__device__ __forceinline__ int band_end(const Args& args, const twill::TileIdx& tile) {",
        *[f"  int end = {e} + {b.upper};" if i == 0 else f"  end = max(end, {e} + {b.upper});" for i, e in enumerate(ends)],
        "  return min(args.iters, max(0, (end + kLoopStep - 1) / kLoopStep));",
        "}",
        "",
        "__device__ __forceinline__ int causal_first(const Args& args, const twill::TileIdx& tile) {",
        *[f"  int start = {e};" if i == 0 else f"  start = min(start, {e});" for i, e in enumerate(firsts)],
        *[f"  int end = {e} + {b.upper};" if i == 0 else f"  end = max(end, {e} + {b.upper});" for i, e in enumerate(ends)],
        f"  start += {low};  // the first row's first kept key",
        "  // (one expression: the form that cost the sm_100a kernel no spill, where two divisions cost 4 bytes)",
        "  return max(0, min(start, min(end, args.iters * kLoopStep) - kStages * kLoopStep)) / kLoopStep;",
        "}",
        "",
        "__device__ __forceinline__ int causal_iters(const Args& args, const twill::TileIdx& tile) {",
        "  const int first = causal_first(args, tile);",
        "  return min(args.iters - first, max(kStages, band_end(args, tile) - first));",
        "}",
        "",
    ]


def band_first(iters: int, stages: int, step: int, first_key: int, end_key: int) -> int:
    """The first iteration of a query tile whose band keeps keys `first_key` (its first row's first)
    to `end_key` - 1 (its last row's last): the block holding the first, earlier if the pipeline's
    `stages` need more iterations, never before 0 (the C++ of _band_code)."""
    return max(0, min(first_key, min(end_key, iters * step) - stages * step)) // step


def band_end(iters: int, step: int, end_key: int) -> int:
    return min(iters, max(0, -(-end_key // step)))


def band_iters(iters: int, stages: int, step: int, first_key: int, end_key: int) -> int:
    first = band_first(iters, stages, step, first_key, end_key)
    return min(iters - first, max(stages, band_end(iters, step, end_key) - first))


def _end_code(model, plan: Causal) -> list[str]:
    """causal_iters of the forward: a query tile's key blocks up to its last row."""
    up = f" + {plan.band.upper}" if plan.band.upper else ""
    ends = [f"tile.m * args.{q}_rows_step + args.{q}_rows_offset + {model.tensor[q].tile[0]}{up}" for q in plan.queries]
    return [
        "// A causal loop's iterations for one query tile: its key blocks up to its last query row,",
        "// at least kStages (the extra ones are masked whole), at most iters (ragged.causal_iters).",
        "__device__ __forceinline__ int causal_iters(const Args& args, const twill::TileIdx& tile) {",
        *[f"  int end = {e};" if i == 0 else f"  end = max(end, {e});" for i, e in enumerate(ends)],
        "  return min(args.iters, max(kStages, (end + kLoopStep - 1) / kLoopStep));",
        "}",
        "",
    ]


def _first_code(model, plan: Causal) -> list[str]:
    """causal_first and causal_iters of the backward: a key tile's query blocks from the one
    holding its first key to the loop's end."""
    starts = [f"tile.m * args.{k}_rows_step + args.{k}_rows_offset" for k in plan.queries]
    return [
        "// A causal loop's first iteration for one key tile: the query block holding its first key",
        "// (earlier queries keep none of its keys), earlier where kStages needs more iterations (the",
        "// extra ones are masked whole), never before 0 (ragged.causal_first). Every index along the",
        "// loop (loads, stores, the mask's queries) is this tile's first iteration plus the local one.",
        "__device__ __forceinline__ int causal_first(const Args& args, const twill::TileIdx& tile) {",
        *[f"  int start = {e};" if i == 0 else f"  start = min(start, {e});" for i, e in enumerate(starts)],
        "  return max(0, min(start / kLoopStep, args.iters - kStages));",
        "}",
        "",
        "// A causal loop's iterations for one key tile: from its first to the loop's end.",
        "__device__ __forceinline__ int causal_iters(const Args& args, const twill::TileIdx& tile) {",
        "  return args.iters - causal_first(args, tile);",
        "}",
        "",
    ]


def _grid_tensor(model, value: str, operand: int) -> str | None:
    """The input or load whose rows are `value`'s grid dimension: up operand 0 to the mma that
    made it, its operand `operand` (A: rows, B: columns), then up operand 0 to a tensor."""
    through_mma = False
    for _ in range(16):
        for t in model.tensors:
            if t.value == value and t.kind in ("input", "load") and t.axes[0] == "m" and t.rank == 2:
                return t.name
        info = model.values.get(value)
        if info is None or info.producer is None or not model.ops[info.producer].operands:
            return None
        producer = model.ops[info.producer]
        index = operand if producer.opcode == "mma" and not through_mma else 0
        through_mma = through_mma or producer.opcode == "mma"
        if index >= len(producer.operands):
            return None
        value, _ = model.resolve(producer.operands[index])
    return None
