"""A grid axis of splits (`grid split = ARG`, twill/tir_grid.py): split-KV attention's key loop
divided over the grid, each split's partial results in its own entry of the outputs.

The graph is one split's loop. The emitted kernel runs `Problem::splits` splits of every batch
entry: the CTAs' batch index `tile.b` runs over splits x batch, split s = tile.b / batch of batch
entry tile.b % batch. So

- every input and loaded tensor is read at batch entry `tile.b % args.batch` (then GQA's group,
  batch_groups.py), its own [batch][rows][cols];
- every output and store is written at entry `tile.b` of [splits * batch][rows][cols]: the
  leading splits dimension of Triton's `O_PART[splits, B*H, N, D]`, whose rows (split * num_bh + bh)
  * N are the same memory;
- the loop runs `iters` iterations (ARG / kLoopStep: the Problem's loop_extent is ARG, one split's
  elements) from iteration `split_first = s * iters` of the whole extent: every index along the loop
  (the loads' rows, a position's or mask's key) is that plus the local iteration, as the causal
  backward's `causal_first` is. The tensors along the loop are `splits * iters` tiles long.

A split's last tile must be whole (`launch` refuses a loop_extent that is not a multiple of
kLoopStep where splits > 1): TMA would read the next split's keys where it fills zeros at the end.
A causal mask, a per-iteration tensor or a store along the loop with a split is refused (`why_not`).
"""
from __future__ import annotations

# A role's locals, computed once per tile (role_lines): a division at each TMA load cost the load
# warp's 24 registers a spill (batch_groups.py says the same of GQA's group), and here the consumers'
# too (8 to 24 bytes on the H200's schedule until they were locals)
FIRST = "twill_split_first + "  # the loop's first iteration of a tile's split, before a local one
ENTRY = "twill_split_b"  # the batch entry an input is read at
TAIL = "twill_loop_tail"  # a column split's: the elements of its last tile inside the loop (the last split's alone)


def why_not(model, causal_masks: bool) -> str:
    """Why the graph's split cannot be emitted ("" where it can, or where it has none)."""
    if not model.graph.split:
        return ""
    if causal_masks:
        return "grid split: a causal loop's per-tile trip count with a split of the loop is not emitted"
    for t in model.tensors:
        if t.per_iteration:
            return f"grid split: tensor {t.name} holds one tile per iteration, which a split of the loop does not place"
        if t.kind in ("output", "store", "input") and "loop" in t.axes and not along_columns(model, t):
            return (f"grid split: {t.kind} {t.name} runs along the loop and is read or written without TMA, which a "
                    "split of the loop does not place")
    return ""


def first(model) -> str:
    """The prefix of a local iteration that makes it an index along the loop's whole extent."""
    return FIRST if model.graph.split else ""


def along_columns(model, t) -> bool:
    """Whether t is a store along the loop of a column split (colsplit.py): each split writes its own
    columns of the batch entry's tile, at the loop's whole-extent index, not an entry of its own."""
    from .colsplit import is_column
    return t.kind == "store" and "loop" in t.axes and is_column(model.graph)


def reads_split(t) -> bool:
    """Whether tensor t is read per batch entry (an input or load: tile.b % batch), not written per
    split and batch entry (an output or store: tile.b)."""
    return t.kind in ("input", "load")


def batch_of(t, split: bool, fixed_up: bool = False) -> str:
    """The C++ expression of the batch entry tensor t's tile is at (before GQA's group). `fixed_up`: a column
    split whose outputs the last split writes once, at the batch entry (fixup.py)."""
    # (a store along the loop under a split is a column split's, along_columns: why_not refuses any other)
    along = t.kind == "store" and "loop" in t.axes
    once = fixed_up and t.kind == "output"
    return ENTRY if split and (reads_split(t) or along or once) else "tile.b"


def role_lines(model) -> list[str]:
    """Every role's locals of the split (see FIRST): its tile's first iteration and batch entry."""
    if not model.graph.split:
        return []
    return [f"const int twill_split_first = split_first(args, tile);  // the split's first iteration (splits.py)",
            "(void)twill_split_first;",
            f"const int {ENTRY} = tile.b % args.batch;  // the batch entry the inputs are read at", f"(void){ENTRY};",
            *([f"const int {TAIL} = tile.b / args.batch == args.splits - 1 ? args.loop_tail : kLoopStep;  "
               "// the partial last tile is the last split's", f"(void){TAIL};"] if _column(model) else [])]


def loop_tail(model) -> str:
    """The C++ expression of the elements of a tile's last iteration inside the loop's extent: the split's own
    (TAIL: only the last split of a column split ends in the partial tile), else args.loop_tail."""
    return TAIL if _column(model) else "args.loop_tail"


def trips(model, tile: str) -> str | None:
    """The iterations of `tile` for a column split (its last split may run fewer: uneven splits), else None."""
    return f"split_iters(args, {tile})" if _column(model) else None


def _column(model) -> bool:
    from .colsplit import is_column
    return is_column(model.graph)


def args_lines(model) -> list[str]:
    return ((["int batch;  // batch entries of one split (tile.b: split * batch + entry, splits.py)"]
             if model.graph.split else [])
            + (["int splits;  // Problem::splits", "int last_iters;  // the last split's iterations (uneven splits: "
                "Problem::loop_whole)"] if _column(model) else []))


def store_lines(model, t) -> list[str]:
    """A column split's store along the loop: the role's locals (role_lines) its origin reads, in its store
    function (which takes the tile, not the role's locals)."""
    from .colsplit import fixed_up
    if fixed_up(model.graph) and t.kind == "output":
        return [f"const int {ENTRY} = tile.b % args.batch;  // the batch entry the last split writes (fixup.py)"]
    if not along_columns(model, t):
        return []
    return ["const int twill_split_first = split_first(args, tile);  // the split's first iteration (splits.py)",
            f"const int {ENTRY} = tile.b % args.batch;  // the batch entry the split's columns are written at"]


def whole_columns(t) -> str:
    """The row pitch, in elements, of a column split's store along the loop written without TMA (stores.py): the
    loop's whole extent, every split's iterations (the last split's own, args.last_iters) times the tile's
    columns. (Such a store has no partial last tile: the kernel is not ragged, kRagged.)"""
    return f"((args.splits - 1) * args.iters + args.last_iters) * {t.tile[1]}"


def device_lines(model) -> list[str]:
    if not model.graph.split:
        return []
    return [
        "// The first iteration of tile's split along the loop's whole extent: split tile.b / batch runs",
        f"// iterations split * iters .. (split + 1) * iters - 1 (grid split = {model.graph.split}, splits.py).",
        "__device__ __forceinline__ int split_first(const Args& args, const twill::TileIdx& tile) {",
        "  return tile.b / args.batch * args.iters;",
        "}",
        "",
    ] + ([
        "// The iterations of tile's split: the last split's own where the splits are uneven (Problem::loop_whole: the",
        "// last split ends at the loop's extent, its last tile maybe partial), else args.iters.",
        "__device__ __forceinline__ int split_iters(const Args& args, const twill::TileIdx& tile) {",
        "  return tile.b / args.batch == args.splits - 1 ? args.last_iters : args.iters;",
        "}",
        "",
    ] if _column(model) else [])


def problem_lines(model) -> list[str]:
    if not model.graph.split:
        return []
    return [f"int splits = 1;  // splits of the loop (grid split = {model.graph.split}): loop_extent is one split's "
            "elements, the outputs [splits * batch][rows][cols]"] + (
        ["int64_t loop_whole = 0;  // uneven splits: the loop's whole extent, the last split's elements what the others "
         "leave (at least kStages tiles, its last maybe partial); 0: splits x loop_extent"] if _column(model) else [])


def launch_lines(model) -> list[str]:
    if not model.graph.split:
        return []
    lines = ["if (p.splits < 1 || (p.splits > 1 && loop_elements(p, kLoopStep) % kLoopStep != 0))",
             "  return cudaErrorInvalidValue;  // a split's last tile would read the next split's first elements"]
    if _column(model):  # the last split what the others leave: more than nothing, at most one split
        lines += ["if (p.loop_whole < 0 || (p.loop_whole > 0 && (p.splits < 2 || p.loop_whole <= (p.splits - 1) * "
                  "static_cast<int64_t>(loop_elements(p, kLoopStep)) || p.loop_whole > p.splits * "
                  "static_cast<int64_t>(loop_elements(p, kLoopStep)))))",
                  "  return cudaErrorInvalidValue;  // uneven splits: the last split's elements must be 1 .. loop_extent"]
    return lines


def copy_lines(model) -> list[str]:
    if not model.graph.split:
        return []
    lines = ["args.batch = p.batch;", "args.tiles *= p.splits;  // the CTAs' batch index runs over splits x batch"]
    if _column(model):
        lines += ["args.splits = p.splits;", "args.last_iters = iters;",
                  "if (p.loop_whole > 0) {  // uneven splits: the last one's iterations and partial tile",
                  "  const int64_t last = p.loop_whole - (p.splits - 1) * static_cast<int64_t>(loop_elements(p, kLoopStep));",
                  "  args.last_iters = static_cast<int>((last + kLoopStep - 1) / kLoopStep);",
                  "  if (args.last_iters < kStages) return cudaErrorInvalidValue;  // its pipeline needs kStages",
                  "  args.loop_tail = static_cast<int>(last - static_cast<int64_t>(args.last_iters - 1) * kLoopStep);",
                  "}"]
    return lines


def scale_loop(model, extent: str) -> str:
    """A tensor's extent along the loop: every split's elements (a column split's whole extent, where uneven)."""
    if not model.graph.split:
        return extent
    every = f"{extent} * static_cast<uint64_t>(p.splits)"
    return f"(p.loop_whole > 0 ? static_cast<uint64_t>(p.loop_whole) : {every})" if _column(model) else every


def scale_batch(model, t, batch: str) -> str:
    """A tensor's batch extent: splits x batch for an output or store (not a column split's store along
    the loop: every split writes its columns of one entry)."""
    from .colsplit import fixed_up
    per_split = (model.graph.split and not reads_split(t) and not along_columns(model, t)
                 and not (fixed_up(model.graph) and t.kind == "output"))
    return f"{batch} * static_cast<uint64_t>(p.splits)" if per_split else batch
