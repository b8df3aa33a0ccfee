"""The rand op's emitter (twill/vocab.py; its counter: twill/counter.py): Triton's Philox stream, element by element
of a register tile, in the runtime's `twill::op_rand<ROUNDS>(out, seed, row, col, base, row0)`
(cuda_runtime/philox.cuh, the per-target fragment walk in rand_sm90.cuh / rand_sm100.cuh, in the kernels that draw).

Element (r, c) of the tile draws the counter `row * (g0 + r) + col * (l0 + c) + batch * b + base` (mod 2^32):

- g0, the first row in memory of the tile's rows along the grid (the tied tensor's placement, tensors.grid_origin,
  as a position's); l0 = iteration * kLoopStep, the first element of its columns along the loop;
- b, the batch entry (`tile.b`);
- each coefficient in C++ (counter.cxx): an i32 prologue scalar is `args.NAME`, `extent` the loop's whole extent
  `(args.iters - 1) * kLoopStep + args.loop_tail`;
- in a flat map (`grid flat`) `args.flat_first` too: the element the launch starts at, which the binding's launch of
  a flat map's last elements (one padded row, binding_runtime._flat_tail) sets, so that each element keeps its
  index's counter;
- the seed, an i64 prologue scalar, `args.NAME` (Triton's uint64 seed).

The rows are the grid's and the columns the loop's: a tile the other way round, a grid split (whose loop and batch
indices are a split's), a rand of i32 (tl.randint: a fragment of integers) are refused, located, with the reason.
"""
from __future__ import annotations

from .. import counter
from ..errors import Diagnostic
from .model import EmitError, ident

FLAT_FIRST = "flat_first"  # Args, Problem: a flat map's first element of the launch (binding_runtime._flat_tail)
EXTENT = "((args.iters - 1) * kLoopStep + args.loop_tail)"  # the loop's whole extent, in elements


def draws(graph) -> list:
    return [op for op in graph.ops if op.opcode == "rand"]


def runtime_part(model) -> list[str]:
    """philox.cuh and the target's op_rand, in a kernel that draws (else nothing: other kernels keep their text)."""
    from .runtime import _part
    if not draws(model.graph):
        return []
    return [(_part("philox.cuh") + _part(f"rand_{model.target.runtime.split('.')[0]}.cuh")).lstrip("\n")]


def flat_first(graph) -> bool:
    """Whether the kernel takes Args::flat_first: a flat map that draws."""
    return bool(graph.flat) and bool(draws(graph))


def arg_fields(model) -> list[str]:
    return ([f"unsigned {FLAT_FIRST};  // the flat map's element this launch starts at (mod 2^32: the rand counters')"]
            if flat_first(model.graph) else [])


def problem_fields(model) -> list[str]:
    return ([f"  long long {FLAT_FIRST} = 0;  // the flat map's element this launch starts at: its rand counters "
             "count from there (the binding's launch of its last elements, one padded row)"]
            if flat_first(model.graph) else [])


def copy_fields(model) -> list[str]:
    return [f"  args.{FLAT_FIRST} = static_cast<unsigned>(p.{FLAT_FIRST});"] if flat_first(model.graph) else []


def emit_rand(call) -> list[str]:
    from .epilogue import launch_scalars
    from .ragged import causal
    from .splits import first
    from .tensors import grid_origin, value_axis
    op, m = call.op, call.model

    def refuse(why: str, hint: str) -> EmitError:
        return EmitError(Diagnostic(f"op '{op.name}': {why}", op.span, hint))
    if call.out is None or call.out.where != "reg" or len(call.out.type.shape) != 2:
        raise refuse("emit-cuda draws a rand into a register tile of rank 2", "give the rand a result in registers (@reg)")
    if call.out.type.dtype != "f32":
        raise refuse(f"a rand of {call.out.type.dtype} (tl.randint: the Philox words' bits) is not emitted; f32 "
                     "(tl.rand) is", "draw f32 (tl.rand) and compare it")
    if m.graph.split:
        raise refuse("a rand in a kernel whose loop is split over the grid (grid split): its counter's loop and batch "
                     "indices are a split's", "import the kernel without the split")
    scalars = {v.name: v.type.dtype for v in launch_scalars(m.graph)}
    seed = op.attr("seed")
    if scalars.get(seed) != "i64":
        raise refuse(f"its seed '{seed}' is not an i64 prologue scalar (`scalar {seed} : i64`)",
                     "declare the seed in the prologue as an i64 scalar: the launch gives it")
    for key in counter.TERMS:
        for name in counter.names(op.attr(key, 0)):
            if name != counter.EXTENT and scalars.get(name) != "i32":
                raise refuse(f"its {key} coefficient reads '{name}', which is no i32 prologue scalar",
                             f"declare `scalar {name} : i32` in the prologue, or use extent (the loop's whole extent)")
    axis = value_axis(m.graph, m.mma_shape)
    axes = [axis(op.name, d) for d in range(2)]
    if axes[1] != "loop" or axes[0] not in ("m", "fixed"):
        raise refuse(f"its tile's dimensions run along {axes[0]} and {axes[1]}: a rand's rows are the grid's and its "
                     "columns the loop's", "draw the tile whose rows the grid walks and whose columns run along the loop")

    if axes[0] == "fixed" and op.attr("row", 0):
        # the import's counter is row * (the tile's first row along the grid + r): rows that do not follow the
        # grid have no first row to put there, and 0 would hand every row tile the same numbers
        raise refuse("its rows do not follow the grid's, but its counter has a row term (the row tile's first row "
                     "along the grid)", "draw the tile whose rows the grid walks")

    def coef(key: str) -> str:
        return counter.cxx(op.attr(key, 0), lambda n: EXTENT if n == counter.EXTENT else f"args.{ident(n)}")
    row, col, batch, base = (coef(k) for k in counter.TERMS)
    origin = grid_origin(m.graph, m.mma_shape, m.tensors, op.name, 0) if axes[0] == "m" else "0"  # "fixed": no row term
    if origin is None:
        raise refuse("its rows follow the grid's, but no input or loaded tile tied to them through the ops places them",
                     "a rand's row term is the first row of its tile along the grid, which a load's placement gives")
    start = "causal_first(args, tile) + " if causal(m).starts else first(m)
    l0 = f"(({start}{call.iteration or '0'}) * kLoopStep)"
    terms = [f"{row} * static_cast<uint32_t>({origin})", f"{col} * static_cast<uint32_t>{l0}"]
    terms += [f"{batch} * static_cast<uint32_t>(tile.b)"] if op.attr("batch", 0) else []
    terms += [base] if op.attr("base", 0) else []
    terms += [f"args.{FLAT_FIRST}"] if flat_first(m.graph) else []
    rounds = int(op.attr("rounds", 10))
    return [f"twill::op_rand<{rounds}>({call.out.expr}, static_cast<unsigned long long>(args.{ident(seed)}), {row}, "
            f"{col}, {' + '.join(terms)}, {call.row0});"]
