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
emit-cuda writes into the file and `launch` enforces) rather than compute something else.
"""
from __future__ import annotations

from dataclasses import dataclass

MAX_LIKE = ("rowmax", "exp2")  # readers (of operand 0) for which an absent element is -inf


@dataclass(frozen=True)
class Ragged:
    step: int  # elements of the loop axis one iteration covers (0: no loaded tile runs along it)
    masks: tuple[tuple[str, str, int], ...]  # (op, value, dim): before op, value's elements past the extent become -inf
    why_not: str  # "" when a partial last tile is supported, else the reason

    @property
    def mask_at(self) -> dict[str, tuple[str, int]]:
        return {op: (value, dim) for op, value, dim in self.masks}


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
    order = {op.name: i for i, op in enumerate(model.graph.ops)}
    masks = []
    for value in sorted(model.uses):
        info = model.values.get(value)
        if info is None:
            continue
        dims = [d for d in range(len(info.type.shape)) if axis(value, d) == "loop"]
        readers = [u for u in model.uses[value] if model.ops[u.op].opcode in MAX_LIKE and u.index == 0]
        if not dims or not readers:
            continue
        first = min(readers, key=lambda u: (model.sched[u.op].start, order[u.op]))
        reader = f"{model.ops[first.op].opcode} {first.op}"

        def refuse(why: str) -> Ragged:
            return Ragged(step, (), f"{reader} reads {value}, which runs along the loop, {why}")
        if info.kind == "input" or model.is_load(value):
            return refuse("straight from memory: the zero fill past the extent would take part")
        others = sorted({u.op for u in model.uses[value]} - {u.op for u in readers})
        if others:
            return refuse(f"and so does {others[0]}, for which an absent element is not -inf")
        if any(u.distance for u in model.uses[value]):
            return refuse("in a later iteration")
        if info.type.space != "reg" or len(info.type.shape) != 2 or len(dims) != 1 or not model.target.register_fragments:
            return refuse("not as a register fragment of sm_90a, which is all the mask is emitted for")
        if any(u.role != info.role for u in readers):
            return refuse("in another role than the one computing it")
        masks.append((first.op, value, dims[0]))
    return Ragged(step, tuple(sorted(masks)), "")


# -- causal loops --------------------------------------------------------------------------------
#
# `y = causal_mask x` (x a register tile whose rows are queries, along the grid's m axis, and whose
# columns are keys, along the loop) keeps x's element (r, c) where key k0 + c is at or before
# query q0 + r and makes it -inf where the key comes later: q0 is the first row in memory of the
# query tile that x's rows follow (the mma's A operand: q, or q0 / q1 of FA3's sub-tiles, at
# tile.m * rows_step + rows_offset), k0 = iteration * step. A loop with a causal mask runs, per
# query tile, over the keys up to the tile's last query row only (`causal_iters`): later keys are
# masked for every row, and Triton's two causal loops (ttgir/merge.py) stop there too. A tile
# with fewer such iterations than the pipeline's stages runs kStages: the extra ones are masked
# whole, which is sound because every reader of the mask is one for which -inf is an absent
# element (rowmax, exp2: the same rule as the partial tile's mask above).

MASK_OPCODE = "causal_mask"


def causal_iters(iters: int, stages: int, step: int, rows_end: int) -> int:
    """Iterations of one query tile whose rows end (one past the last) at `rows_end`: the key
    blocks up to that row, at least the pipeline's `stages`, at most the loop's `iters`."""
    return min(iters, max(stages, -(-rows_end // step)))


def causal_keeps(query: int, key: int) -> bool:
    """The mask's element rule: a key is kept at or before its query."""
    return key <= query


@dataclass(frozen=True)
class Causal:
    masks: tuple[tuple[str, str], ...]  # (causal_mask op, the query tensor its rows are)
    why_not: str  # "" when the kernel can be emitted, else the reason

    @property
    def rows_of(self) -> dict[str, str]:
        return dict(self.masks)

    @property
    def queries(self) -> tuple[str, ...]:
        return tuple(sorted({t for _, t in self.masks}))


def causal(model) -> Causal:
    """The causal masks of `model`'s loop and the query tensor each one's rows follow."""
    from .tensors import value_axis
    ops = [op for op in model.graph.ops if op.opcode == MASK_OPCODE]
    if not ops:
        return Causal((), "")
    axis = value_axis(model.graph, model.mma_shape)
    masks = []
    for op in ops:
        def refuse(why: str) -> Causal:
            return Causal((), f"causal_mask {op.name} {why}")
        space = "tmem" if model.target.tensor_memory else "reg"  # S is masked where it lies
        if len(op.operands) != 1 or op.type is None or len(op.type.shape) != 2 or op.type.space != space:
            return refuse(f"takes one 2-d tile and makes one in {'tensor memory' if space == 'tmem' else 'registers'}")
        value, dist = model.resolve(op.operands[0])
        if dist:
            return refuse("reads a tile of an earlier iteration")
        if (axis(op.name, 0), axis(op.name, 1)) != ("m", "loop"):
            return refuse("masks a tile whose rows are not the grid's query rows and whose columns are not the loop's keys")
        readers = model.uses.get(op.name, ())
        if not readers or any(model.ops[u.op].opcode not in MAX_LIKE or u.index != 0 or u.distance for u in readers):
            return refuse("is read by an op for which -inf is not an absent element (only rowmax and exp2 may read it)")
        query = _query_tensor(model, value)
        if query is None:
            return refuse(f"masks {value}, whose rows follow no query tile loaded along the grid's rows")
        masks.append((op.name, query))
    if model.ragged.step <= 0:
        return Causal((), "causal_mask needs a loaded tile along the loop (the key blocks)")
    return Causal(tuple(sorted(masks)), "")


L2_STREAM_BYTES = 24 << 20  # of the L2 (50 MiB on the H100, 60 on the H200) for the tiles in flight's streams


def causal_code(model, plan: Causal) -> list[str]:
    """The device code of a causal loop's grid: `tile_at`, the tiles' order, and `causal_iters`, a
    tile's trip count (one CTA per tile, whose blocks start in the order of their index).

    The order: the query tiles with the most key blocks (the last rows) first, so the short tiles
    fill the grid's end, within groups of batch entries (heads) whose streamed tiles (K and V of
    the whole loop: iters x kStreamBytes each) fit `L2_STREAM_BYTES` together. The CTAs in flight
    then read the K and V of a few heads, which stay in L2 for the other query tiles of those
    heads; numbering every head's tile m before any head's m - 1 put a different head on each SM
    and made every CTA stream its K and V from DRAM (ncu: 80% memory throughput, docs/gpu-results.md)."""
    ends = [f"tile.m * args.{q}_rows_step + args.{q}_rows_offset + {model.tensor[q].tile[0]}" for q in plan.queries]
    stream = sum(t.tile_bytes for t in model.tensors if t.kind == "load" and "loop" in t.axes)
    return [
        f"constexpr long long kStreamBytes = {stream};  // bytes of the tiles loaded along the loop, per iteration",
        f"constexpr long long kL2StreamBytes = {L2_STREAM_BYTES};  // of L2 for the streams of the tiles in flight",
        "",
        "// The CTA's round-th tile, number t: the last query rows, whose loops are longest, first, within",
        "// groups of g columns x batch entries whose streamed tiles share L2 (ragged.causal_code).",
        "__device__ __forceinline__ twill::TileIdx tile_at(const Args& args, int t, int round) {",
        "  const int per_m = args.tiles / args.tiles_m;  // tiles of one query row block: columns x batch",
        "  const long long per = static_cast<long long>(args.iters) * kStreamBytes;  // one column's streams",
        "  const int g = static_cast<int>(max(1LL, min(static_cast<long long>(per_m), kL2StreamBytes / max(per, 1LL))));",
        "  const int group = t / (g * args.tiles_m), in = t - group * g * args.tiles_m;",
        "  const int size = min(g, per_m - group * g);  // the last group may be smaller",
        "  const int r = group * g + in % size;",
        "  return twill::TileIdx{args.tiles_m - 1 - in / size, r % args.tiles_n, r / args.tiles_n, round,",
        "                       t + static_cast<int>(gridDim.x) >= args.tiles};",
        "}",
        "",
        "// A causal loop's iterations for one query tile: its key blocks up to its last query row,",
        "// at least kStages (the extra ones are masked whole), at most iters (ragged.causal_iters).",
        "__device__ __forceinline__ int causal_iters(const Args& args, const twill::TileIdx& tile) {",
        *[f"  int end = {e};" if i == 0 else f"  end = max(end, {e});" for i, e in enumerate(ends)],
        "  return min(args.iters, max(kStages, (end + kLoopStep - 1) / kLoopStep));",
        "}",
        "",
    ]


def _query_tensor(model, value: str) -> str | None:
    """The input or load whose rows `value`'s rows are: up operand 0 (an mma's A) to a tensor."""
    for _ in range(16):
        for t in model.tensors:
            if t.value == value and t.kind in ("input", "load") and t.axes[0] == "m" and t.rank == 2:
                return t.name
        info = model.values.get(value)
        if info is None or info.producer is None or not model.ops[info.producer].operands:
            return None
        value, _ = model.resolve(model.ops[info.producer].operands[0])
    return None
