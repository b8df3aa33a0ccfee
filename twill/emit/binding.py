"""What a PyTorch user imports to call an emitted kernel (`twill emit-cuda ... -o K.cu --binding torch`).

Beside `K.cu` it writes two files, each a pure function of the schedule and the machine:

- `K_entry.cu`: `#include "K.cu"` and an `extern "C" int twill_launch(const void*)` reading one
  packed block (`twill_args`: plain sizes, the device, the stream, one pointer and one batch group
  per user tensor, the epilogue's scalars), which fills the kernel's `Problem` (the sub-tiles' row
  steps and offsets are constants here) and calls `launch` on that device. It needs no torch
  headers: nvcc alone builds it.
- `K.py`: a function named after the kernel, taking torch tensors named after the graph's inputs
  and outputs in the layouts their users hold them (one Q [*batch, M, 128], not the graph's halves
  q0 and q1), checking dtypes, devices and shapes with an `ArgumentError` that names the argument,
  taking a strided tensor as it lies where TMA reads it (its row and batch strides passed to the
  Problem) and staging it into rows padded to 16 bytes where TMA cannot (binding_runtime._layout), building `K_entry.cu` with nvcc into a cache keyed by the content (first call), and
  launching it through ctypes on torch's current stream. A kind of call checked once (the same
  shapes, dtypes, devices, strides and alignment) is not resolved again (`call`'s fast path). The checks and the mapping of shapes to
  the Problem are `binding_runtime.py`, copied into the module verbatim: plain Python, testable
  without torch.

The user tensors (`arguments`): every global tensor of the kernel model, inputs first (the graph's
inputs and loads, in its order), then outputs (its stores, then its carries). Sub-tiles become one
tensor: tensors named STEM0, STEM1, ... (or STEM_0, ...; the names `twill.split.split_rows` gives)
of one kind, dtype, tile and axes, whose rows follow the grid's M axis, are the consecutive row
blocks of each tile of one tensor STEM (step = parts x the tile's rows, offset = i x the tile's
rows), unless STEM already names something in the graph. An output is named after its carry (acc,
not out_acc), a store after the value it stores.
"""
from __future__ import annotations

import keyword
import pprint
import re
from dataclasses import dataclass, replace
from pathlib import Path

from . import anypitch, epilogue, partial, rand, scalar_atomic
from .batch_groups import field_of as group_field_of, period_field, periodic, shareable, unbatched
from .binding_runtime import COLUMN_ARG
from .colsplit import fixed_up, is_column
from .descale import has_scale
from .fixup import spec as fixup_spec
from .model import DIM_LABELS, EmitError, dtype_bytes, ident, rastered

TORCH_DTYPE = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "tf32": "float32", "f64": "float64",
               "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2", "i64": "int64", "i32": "int32", "i16": "int16",
               "i8": "int8"}
# The generated function's own keywords (_KEYWORD_DOC): a tensor of one of these names gets an underscore.
KEYWORDS = ("exp2_scale", "out_scale", "persistent", "raster_group", "iters", "stream")
RUNTIME = Path(__file__).with_name("binding_runtime.py")


@dataclass(frozen=True)
class Part:
    """One Problem pointer behind a user tensor: placed at `offset` in steps of `step` along `label`
    ("" for a tensor that is one Problem pointer, at the launcher's default placement)."""

    field: str
    value: str  # the graph value it carries
    label: str = ""
    step: int = 0
    offset: int = 0


@dataclass(frozen=True)
class Argument:
    name: str  # the Python name
    output: bool
    dtype: str  # the graph's dtype
    dims: tuple[tuple[str, int], ...]  # per dimension past the batch: (axis, elements per tile along it)
    per_iteration: bool  # one tile per loop iteration: a dimension I before `dims`
    tma: bool  # read or written through tensor maps alone: taken with a row pitch (binding_runtime._layout)
    zero: bool  # CTAs add into it: zeroed before the launch
    parts: tuple[Part, ...]
    shared: bool = False  # may hold one batch entry per group of the others' (batch_groups: GQA)
    source: str = ""  # the graph's name for it (an input, a load, a carry or epilogue output, a store op)
    iter_div: int = 1  # a per-iteration tile's row is the iteration over this: ceil(I / iter_div) rows
    per_batch: bool = False  # one value per batch entry, broadcast over leading batch dimensions (batch_groups)
    splits: bool = False  # an output of a split kernel (grid split): a leading dimension of splits before the batch
    column_major: bool = False  # also taken as the transpose's view, [*batch, L, N] with .mT contiguous (an input)
    any_pitch: tuple[int, ...] = ()  # a load that takes rows at any pitch (anypitch.py): its tile's rows and box
    # width W; the binding passes a negative row stride instead of staging
    atomic: str = ""  # an atomic output's kind (scalar_atomic.py): one f32 the caller initializes, updated in place
    # a load's {transposed = true} (ttgir/kmajor.py): `dims` are the caller's tensor's, the transpose of the
    # kernel's tile; the kernel reads its .mT, as it lies where that is K-major, else a copy (binding_runtime._layout)
    transposed: bool = False
    # every member {batch = none} (batch_groups.unbatched): one tensor for every batch entry, taken with no batch
    # dimensions (or leading 1s); real ones are refused (binding_runtime._unbatched)
    unbatched: bool = False

    def spec(self) -> dict:
        return {"name": self.name, "output": self.output, "dtype": TORCH_DTYPE[self.dtype],
                "esize": dtype_bytes(self.dtype), "dims": [list(d) for d in self.dims],
                "per_iteration": self.per_iteration, "tma": self.tma, "zero": self.zero, "shared": self.shared,
                **({"iter_div": self.iter_div} if self.iter_div > 1 else {}),
                **({"per_batch": True} if self.per_batch else {}), **({"splits": True} if self.splits else {}),
                **({"column_major": True} if self.column_major else {}),
                **({"transposed": True} if self.transposed else {}),
                **({"unbatched": True} if self.unbatched else {}),
                **({"any_pitch": list(self.any_pitch)} if self.any_pitch else {})}


def py_name(name: str, taken: set[str]) -> str:
    """A Python identifier for a graph name, not a keyword, a binding keyword or one in `taken`."""
    out = re.sub(r"\W", "_", name)
    out = out if re.match(r"[A-Za-z_]", out) else f"v_{out}"
    while keyword.iskeyword(out) or out in KEYWORDS or out in taken:
        out += "_"
    return out


def _user_name(model, t) -> str:
    """The graph's name for a global tensor: the carry of an output, the value of the rest."""
    if t.kind == "output":  # a carry's, or an epilogue's new output
        return epilogue.output_name(t.name, model.graph)
    return t.value


def stack_dim(t) -> int | None:
    """The dimension of `t` along the grid's M axis, where sub-tiles stack."""
    return next((d for d, _ in t.placed_dims() if t.axes[d] == "m"), None)


PART = re.compile(r"(.+?)_?(\d+)")  # STEM0, STEM_1: a part's name, as split_rows gives it


def _stacks(model, names) -> dict[str, tuple[str, int]]:
    """tensor name -> (stem, index) for the tensors that are parts of one user tensor: parts named
    STEM0 .. STEM{p-1} (p >= 2) of one kind, dtype, tile and axes with a dimension along the grid's
    M axis, where STEM names nothing in the graph."""
    graph = model.graph
    taken = {v.name for v in graph.inputs + graph.carries} | {op.name for op in graph.ops}
    cands: dict[tuple, list] = {}
    for name, t in names:
        found = PART.fullmatch(name)
        if found and stack_dim(t) is not None:
            key = (found[1], t.kind, t.dtype, t.tile, t.axes, t.per_iteration, t.rank)
            cands.setdefault(key, []).append((int(found[2]), t.name))
    out = {}
    for key, members in cands.items():
        if key[0] not in taken and len(members) > 1 and sorted(i for i, _ in members) == list(range(len(members))):
            out.update({t: (key[0], i) for i, t in members})
            taken.add(key[0])
    return out


def stacked(model) -> dict[str, tuple[str, int]]:
    """tensor name -> (stem, index) of the kernel's tensors that are parts of one user tensor."""
    return _stacks(model, [(_user_name(model, t), t) for t in model.tensors])


def _groups(model) -> list[tuple[str, list]]:
    """(graph name, tensors in part order) per user tensor, in the order of their first member."""
    names = [(_user_name(model, t), t) for t in model.tensors]
    stacks = _stacks(model, names)
    out, by_stem = [], {}
    for name, t in names:
        stem, _ = stacks.get(t.name, (None, 0))
        if stem is None:
            out.append((name, [t]))
        elif stem in by_stem:
            by_stem[stem].append(t)
        else:
            by_stem[stem] = [t]
            out.append((stem, by_stem[stem]))
    for members in by_stem.values():
        members.sort(key=lambda t: stacks[t.name][1])
    return _views(model, out)


def _views(model, groups: list[tuple[str, list]]) -> list[tuple[str, list]]:
    """The groups of loads one imported argument feeds (`argument SCALES = s_even, s_odd`: views of
    one tensor) as one user tensor, its members in the argument's order; they must be read alike."""
    views: dict[str, list[str]] = {}
    for first, target, view in _further_targets(model.graph):
        if view:  # else an output written over an input (in_place)
            views.setdefault(first, [first]).append(target)
    owner = {t: head for head, ts in views.items() for t in ts}
    by_name = {name: members for name, members in groups}
    out = []
    for name, members in groups:
        if name not in owner:
            out.append((name, members))
        elif owner[name] == name:
            merged = [t for v in views[name] for t in by_name.get(v, [])]
            keys = {(t.kind, t.dtype, t.tile, t.axes, t.per_iteration, t.rank, t.iter_div) for t in merged}
            if len(keys) != 1:
                raise EmitError(f"argument feeding {', '.join(views[name])}: its views are read as tiles of different "
                                "shapes, dtypes or placements, which one tensor cannot give")
            out.append((name, merged))
    return out


def _further_targets(graph) -> list[tuple[str, str, bool]]:
    """(the argument's first target, a further one, whether it is a view: a load of the loop) for each
    `argument X = first, further` (graph.also_fed): views of one tensor, or an output written over an
    input (in_place)."""
    first = {n: t for n, t in graph.arguments if t is not None}
    loads = {op.name for op in graph.ops if op.opcode == "load"}
    return [(first[arg], target, target in loads) for arg, target in graph.also_fed]


def in_place(graph, args) -> dict[str, str]:
    """Output -> the input it is written over, by their Python names: an imported argument that feeds
    an input and an output (`argument C = C, acc`: addmm reads C and stores C + A @ B to it). The
    binding passes the input's tensor as the output where the caller gives none, as the kernel would."""
    by_source = {a.source: a for a in args}
    out = {}
    for first, target, view in _further_targets(graph):
        src, dst = by_source.get(first), by_source.get(target)
        if not view and src is not None and dst is not None and dst.output and not src.output:
            out[dst.name] = src.name
    return out


def arguments(renderer) -> tuple[Argument, ...]:
    """The user tensors of a kernel (see the module doc), inputs first."""
    m = renderer.m
    tma = {t.name for t in renderer.tma_tensors()}
    grid = renderer.grid_axes()
    taken: set[str] = set()
    inputs, outputs = [], []
    for name, members in _groups(m):
        t = members[0]
        if t.dtype not in TORCH_DTYPE:
            raise EmitError(f"tensor {t.name}: no torch dtype for {t.dtype}, so no binding")
        d = stack_dim(t) if len(members) > 1 and t.col_stride == 1 else None
        if len(members) > 1 and t.col_stride > 1:  # views of one tensor: each part reads all of it
            parts = tuple(Part(x.name, x.value) for x in members)
        elif d is None:
            parts = (Part(t.name, t.value),)
        else:
            label, rows = DIM_LABELS[d], t.tile[d]
            parts = tuple(Part(x.name, x.value, label, rows * len(members), rows * i) for i, x in enumerate(members))
        sizes = [rows * len(members) if dim == d else t.tile[dim] for dim in range(2)]
        first = 2 - t.rank
        if t.kind in ("input", "load") and t.rank == 2 and t.tile[0] == 1 and t.axes[0] == "fixed":
            # a row: [N] (a bias the epilogue reads), [L] (a per-key bias along the loop) or, one per
            # iteration, [I, N] (a scale per group of K), as its users hold it, without the tile's 1
            first = 1
        dims = tuple((t.axes[dim], sizes[dim]) for dim in range(first, 2))
        output = t.kind in ("output", "store")
        transposed = not output and t.transposed
        if transposed and (len(dims) != 2 or t.per_iteration or len(members) > 1):
            raise EmitError(f"tensor {t.name}: a load typed as its argument's transpose ({{transposed = true}}) is "
                            "bound for a whole 2-d tile moving along the loop, not a row, per-iteration tile or part")
        dims = dims[::-1] if transposed else dims  # the caller's tensor: the transpose of the kernel's tile
        source = next((op.name for op in m.graph.ops if ident(op.name) == t.name), name) if t.kind == "store" else name
        arg = Argument(py_name(name, taken), output, t.dtype, dims, t.per_iteration,
                       all(x.name in tma for x in members),
                       t.kind == "store" and not grid <= set(t.axes), parts, all(map(shareable, members)), source,
                       t.iter_div, all(map(periodic, members)),
                       output and bool(m.graph.split) and "loop" not in t.axes and not fixed_up(m.graph),
                       not output and t.column_major,
                       (t.tile[0], anypitch.width(t)) if len(members) == 1 and anypitch.eligible(m, t) else (),
                       transposed=transposed, unbatched=not output and all(map(unbatched, members)))
        taken.add(arg.name)
        (outputs if output else inputs).append(arg)
    return _as_imported(m.graph, tuple(inputs + scalar_atomic.binding_args(m) + outputs))


def _as_imported(graph, args: tuple[Argument, ...]) -> tuple[Argument, ...]:
    """An imported kernel's tensors named after the arguments that feed them (`argument` lines)."""
    fed = {target: name for name, target in graph.arguments if target is not None}
    if not fed:
        return args
    taken: set[str] = set()
    renamed = [replace(a, name=py_name(fed[a.source], taken)) if a.source in fed else a for a in args]
    names = [a.name for a in renamed]
    out = []
    for i, a in enumerate(renamed):  # an unmapped tensor keeps its graph name, made unique
        rest = set(names[:i]) | set(names[i + 1:])
        out.append(a if a.source in fed else replace(a, name=py_name(a.name, rest | {x.name for x in out})))
    return tuple(out)


@dataclass(frozen=True)
class Parameter:
    """One parameter of the generated function: a tensor (`arg`), a scalar (`scalar`: the epilogue
    scalar it sets), or an argument of the imported kernel that maps to nothing (taken, not read)."""

    name: str
    arg: Argument | None = None
    scalar: str | None = None


def parameters(renderer) -> tuple[Parameter, ...]:
    """The function's positional parameters: an imported kernel's arguments in its order (those
    that feed nothing too), else the graph's inputs, then its scalars; then its outputs."""
    g = renderer.m.graph
    args = arguments(renderer)
    scalars = [v.name for v in epilogue.launch_scalars(g)]
    if not g.arguments:
        return (tuple(Parameter(a.name, a) for a in args if not a.output)
                + tuple(Parameter(py_name(s, {a.name for a in args}), scalar=s) for s in scalars)
                + tuple(Parameter(a.name, a) for a in args if a.output))
    by_source = {a.source: a for a in args}
    out, taken = [], {a.name for a in args}
    for n, t in g.arguments:
        a = by_source.get(t)
        out.append(Parameter(a.name if a is not None else py_name(n, taken), a, t if t in scalars else None))
        taken.add(out[-1].name)
    listed = {p.arg.source for p in out if p.arg is not None}
    return tuple(out) + tuple(Parameter(a.name, a) for a in args if a.source not in listed)


def fold_outputs(renderer) -> list | None:
    """A column-split loop's folds as [kind, [its carries' outputs]] (colsplit.plan), [] for none or a loop not
    split; None where a fold's carry has no output (its partials could not be combined)."""
    from .colsplit import is_column, plan as fold_plan
    g = renderer.m.graph
    if not is_column(g):
        return []
    by_source = {a.source: a.name for a in arguments(renderer) if a.output}
    folds = [[f.kind, [by_source.get(c) for c in f.carries]] for f in fold_plan(g).folds]
    return None if any(None in outs for _, outs in folds) else folds


def spec(renderer, kernel_file: str, entry: str, combine: bool = True) -> dict:
    """What the runtime needs to know of a kernel, as plain data. `combine`: the call combines the partials
    of a column split's folds (a kernel alone; a sequence's K.py combines its loops')."""
    folds = fold_outputs(renderer) if combine else []
    m = renderer.m
    return {"kernel": py_name(m.schedule.kernel, set()), "arch": m.arch, "kernel_file": kernel_file, "entry": entry,
            "stages": m.stages, "loop_step": m.ragged.step, "ctas_per_sm": m.ctas_per_sm,
            "ragged": bool(m.ragged.step) and not renderer.ragged_refusal,
            "ragged_why": renderer.ragged_refusal, "axes": sorted(renderer.grid_axes()),
            "partial": dict(sorted(renderer.partial.items())),
            "args": [a.spec() for a in arguments(renderer)], **_scalar_spec(renderer),
            **({"split": _split_param(renderer)} if m.graph.split else {}),
            **({"rows": m.graph.tile_rows} if m.graph.tile_rows else {}), **_extent_spec(renderer),
            **({"flat": _size_params(renderer)[m.graph.flat]} if m.graph.flat else {}),
            **({"folds": folds} if folds else {}), **fixup_spec(m)}


def _size_params(renderer) -> dict[str, str]:
    """The imported kernel's arguments that are extents (`argument K {extent = loop}`): argument ->
    the function's parameter, in the kernel's order."""
    g = renderer.m.graph
    named = {n for n, _ in g.extents} | ({g.flat} if g.flat else set())
    return {n: p.name for (n, _), p in zip(g.arguments, parameters(renderer)) if n in named}


def _extent_spec(renderer) -> dict:
    """{"extents": [[parameter, axis]], "loop_extent": N}: what the runtime checks the size arguments
    and the tensors' extents against (binding_runtime._check_sizes); {} where the graph records none."""
    g = renderer.m.graph
    params = _size_params(renderer)
    out = {"extents": [[params[n], axis] for n, axis in g.extents]} if g.extents else {}
    return {**out, **({"loop_extent": g.loop_extent} if g.loop_extent is not None else {})}


def _split_param(renderer) -> str:
    """The parameter of the function that gives a split kernel's elements per split (`grid split = ARG`)."""
    return next(p.name for (n, _), p in zip(renderer.m.graph.arguments, parameters(renderer)) if n == renderer.m.graph.split)


def _scalar_spec(renderer) -> dict:
    """The epilogue's scalars, in the entry point's order: {"scalars": [{name, type}]} (none: {})."""
    params = {p.scalar: p.name for p in parameters(renderer) if p.scalar is not None}
    scalars = [{"name": params[v.name], "type": SCALAR_TYPES.get(v.type.dtype, "float")}
               for v in epilogue.launch_scalars(renderer.m.graph)]
    return ({"scalars": scalars} if scalars else {}) | ({"flat_first": True} if rand.flat_first(renderer.m.graph) else {})


# a launch scalar's dtype -> what the binding takes (binding_runtime.check_scalars): a Python float, a Python int, a
# Python int of 64 bits (a rand's seed: passed as its two's complement bits, not through a double)
SCALAR_TYPES = {"f32": "float", "i32": "int", "i64": "int64"}


# ---- the C entry point ---------------------------------------------------------------------------

def entry_source(renderer, kernel_file: str, module: str) -> str:
    """K_entry.cu: the extern "C" entry point over the kernel file's `launch`."""
    ns = renderer.ns
    lines = [
        f"// The C entry point of {kernel_file} for its PyTorch binding {module}, written by",
        "// `twill emit-cuda --binding torch`: plain sizes and one pointer per user tensor (in the binding's",
        "// order), no torch headers. Build: nvcc -std=c++17 -gencode=arch=compute_XX,code=sm_XX -shared",
        "// -Xcompiler -fPIC THIS_FILE (the binding does, on its first call).",
        f"#include \"{kernel_file}\"",
        "#include <string.h>",
        "",
        "// What the binding passes: one block its runtime packs with struct (args_format: every field 8 bytes,",
        "// in this order), read here by a copy. One argument, not fourteen: ctypes converts each argument of",
        "// a call, and fourteen cost ~5 us of the call's host time.",
        *entry_struct(renderer, "twill_args"),
        "",
        "extern \"C\" int twill_args_bytes() { return static_cast<int>(sizeof(twill_args)); }",
        "",
        "extern \"C\" int twill_launch(const void* packed) {",
        "  twill_args a;",
        "  memcpy(&a, packed, sizeof a);",
        f"  {ns}::Problem p;",
        *entry_problem(renderer),
        "  int current = 0;",
        "  cudaError_t err = cudaGetDevice(&current);",
        "  if (err != cudaSuccess) return static_cast<int>(err);",
        "  const int device = static_cast<int>(a.device);",
        "  if (current != device && (err = cudaSetDevice(device)) != cudaSuccess) return static_cast<int>(err);",
        f"  err = {ns}::launch(p, static_cast<cudaStream_t>(a.stream));",
        "  if (current != device) cudaSetDevice(current);",
        "  return static_cast<int>(err);",
        "}",
        "",
        "extern \"C\" const char* twill_error_string(int err) {",
        "  return cudaGetErrorString(static_cast<cudaError_t>(err));",
        "}",
    ]
    return "\n".join(lines) + "\n"


def entry_struct(renderer, name: str) -> list[str]:
    """The C struct `name` of the block the binding packs (args_format), and its size's static_assert."""
    n = len(arguments(renderer))
    scalars = epilogue.launch_scalars(renderer.m.graph)
    split = int(bool(renderer.m.graph.split)) + int(is_column(renderer.m.graph))  # (a column split: and loop_whole)
    fix = 2 * int(fixed_up(renderer.m.graph))  # the fixup's scratch and counters (fixup.py)
    first = int(rand.flat_first(renderer.m.graph))
    return [
        f"struct {name} {{",
        "  int64_t tiles_m, tiles_n, iters, loop_extent, batch, m_extent, n_extent;",
        "  int64_t persistent, raster_group;",
        "  int64_t device;  // the tensors' CUDA device: made current for the launch, then the caller's again",
        "  double exp2_scale, out_scale;",
        "  void* stream;",
        f"  void* tensors[{n}];  // one per user tensor, in the binding's order",
        f"  int64_t batch_groups[{n}];",
        f"  int64_t row_strides[{n}], batch_strides[{n}];  // elements; 0: contiguous (a TMA tensor's row pitch)",
        *([f"  double scalars[{len(scalars)}];  // the epilogue's scalars"] if scalars else []),
        *(["  int64_t splits;  // splits of the loop (grid split): the outputs' first dimension"] if split else []),
        *(["  int64_t loop_whole;  // uneven column splits: the loop's whole extent (0: splits x loop_extent)"]
          if split == 2 else []),
        *(["  void* fixup[2];  // the splits' partial carries and their counters (fixup.py)"] if fix else []),
        *(["  int64_t flat_first;  // the flat map's element this launch starts at (rand.py)"] if first else []),
        "};",
        f"static_assert(sizeof({name}) == 8 * {13 + 4 * n + len(scalars) + split + fix + first}, \"{name}: 8-byte "
        "fields, no padding\");",
    ]


def entry_problem(renderer) -> list[str]:
    """The lines that fill the kernel's Problem `p` from the packed block `a` (entry_struct)."""
    args = arguments(renderer)
    scalars = epilogue.launch_scalars(renderer.m.graph)
    split = int(bool(renderer.m.graph.split)) + int(is_column(renderer.m.graph))
    fix = 2 * int(fixed_up(renderer.m.graph))
    lines = [
        "  p.tiles_m = static_cast<int>(a.tiles_m);",
        "  p.tiles_n = static_cast<int>(a.tiles_n);",
        "  p.iters = static_cast<int>(a.iters);",
        "  p.loop_extent = static_cast<int>(a.loop_extent);",
        *[f"  p.{partial.FIELD[ax]} = static_cast<int>(a.{partial.FIELD[ax]});" for ax in partial.GRID_AXES
          if ax in renderer.partial],
        "  p.batch = static_cast<int>(a.batch);",
        *(["  p.splits = static_cast<int>(a.splits);"] if split else []),
        *(["  p.loop_whole = a.loop_whole;"] if split == 2 else []),
        *(["  p.twill_partials = static_cast<float*>(a.fixup[0]);",
           "  p.twill_arrivals = static_cast<int*>(a.fixup[1]);"] if fix else []),
        "  p.exp2_scale = static_cast<float>(a.exp2_scale);",
        "  p.persistent = static_cast<int>(a.persistent);",
        *(["  p.out_scale = static_cast<float>(a.out_scale);"] if has_scale(renderer.m) else []),
        *(["  if (a.raster_group >= 0) p.raster_group = static_cast<int>(a.raster_group);"] if rastered(renderer.m)
          else []),
    ]
    lines += [f"  memcpy(&p.{ident(v.name)}, &a.scalars[{i}], 8);  // scalar {v.name}: its 64 bits" if v.type.dtype == "i64"
              else f"  p.{ident(v.name)} = static_cast<{epilogue.scalar_ctype(v.type.dtype)}>(a.scalars[{i}]);  "
              f"// scalar {v.name}" for i, v in enumerate(scalars)]
    lines += ["  p.flat_first = a.flat_first;"] if rand.flat_first(renderer.m.graph) else []
    for i, a in enumerate(args):
        what = ", ".join(x.value for x in a.parts)
        lines.append(f"  // tensors[{i}]: {a.name} ({'output' if a.output else 'input'}; the graph's {what})")
        for x in a.parts:
            lines.append(f"  p.{x.field} = static_cast<decltype(p.{x.field})>(a.tensors[{i}]);")
            if a.tma:
                lines.append(f"  p.{x.field}_row_stride = a.row_strides[{i}];  p.{x.field}_batch_stride = "
                             f"a.batch_strides[{i}];")
            if x.label:
                lines.append(f"  p.{x.field}_{x.label}_step = {x.step};")
                lines.append(f"  p.{x.field}_{x.label}_offset = {x.offset};")
            if a.per_batch:  # its slot is the period: its entries, under the others' batch (batch_groups)
                lines.append(f"  p.{period_field(x.field)} = static_cast<int>(a.batch_groups[{i}]);")
            elif a.shared:
                lines.append(f"  p.{group_field_of(x.field)} = static_cast<int>(a.batch_groups[{i}]);")
    return lines


# ---- the Python module ---------------------------------------------------------------------------

_SYMBOL_DOC = {"M": "the rows the grid walks (blockIdx.x)",
               "N": "the columns the grid walks (blockIdx.y)",
               "L": "the loop's extent (a GEMM's K, attention's keys)",
               "I": "the loop's iterations (a tile per iteration)"}


def _layout(a: Argument) -> str:
    from .binding_runtime import layout
    return layout(a.spec())


def _arg_doc(a: Argument, partial: dict[str, str], rows: int | None = None, combined: bool = False) -> str:
    from .binding_runtime import SYMBOLS
    grid = [f"{SYMBOLS[ax]} a multiple of {rows}, each {rows} rows one program's, its own batch entry" if ax == "m" and rows
            else f"{SYMBOLS[ax]} {'a multiple' if partial.get(ax) else 'in tiles'} of {size}" for ax, size in a.dims
            if ax in ("m", "n")]
    how = (f" (blocks of {a.parts[1].offset} of each {a.parts[0].step} along M)" if a.parts[-1].label
           else " (views of it: strided loads)")
    parts = ("; the graph's " + ", ".join(x.value for x in a.parts) + how) if len(a.parts) > 1 else ""
    note = "; zeroed first: the CTAs add into it" if a.zero else ""
    note += (f"; ONE element ([1]), which every tile's value updates in place by an atomic {a.atomic}: the caller "
             "initializes it (0 for an amax)") if a.atomic else ""
    note += "; or one per entry of the last batch dimensions ([H] under [B, H])" if a.per_batch else ""
    note += ("; ONE for every batch entry (the kernel's addresses read no batch program id): no batch dimensions, or "
             "leading 1s") if a.unbatched else ""
    if a.column_major:
        d = _layout(a)[1:-1].split(", ")
        note += (f"; or, as the Triton kernel reads it, its column-major view [{', '.join(d[:-2] + d[-2:][::-1])}] "
                 "(.mT of such a tensor, as w.t() of a Linear weight)")
    if a.transposed:
        d = _layout(a)[1:-1].split(", ")
        mt = ", ".join(d[:-2] + d[-2:][::-1])
        note += (f"; the kernel reads it as its transpose .mT [{mt}] (an mma operand K-major, a column sum's rows): "
                 f"where .mT is not contiguous along "
                 f"its last dimension (a row-major [{', '.join(d[-2:])}] tensor) it is copied transposed into a [{mt}] "
                 f"buffer each call (one read and one write of it); .mT of a contiguous [{mt}] tensor (w.t()) is read "
                 "as it lies, no copy")
    where = f" ({', '.join(grid)})" if grid else ""
    layout = _layout(replace(a, splits=False) if combined else a)
    note += "; the splits' partials combined by this function" if combined else ""
    return f"{a.name}: torch.{TORCH_DTYPE[a.dtype]} {layout}{where}{parts}{note}"


# The keywords a binding may take besides its tensors: (name, default, what it does).
_KEYWORD_DOC = (
    ("exp2_scale", "1.0", "exp2 computes exp2((x - b) * exp2_scale): log2(e) / sqrt(D) for attention"),
    ("out_scale", "1.0", "multiplies the outputs of fp8 mmas: their inputs' descale factors (V's for FP8 attention)"),
    ("persistent", "-1", "1: one CTA per SM looping over tiles, 0: a CTA per tile, -1: the launcher's choice"),
    ("raster_group", "-1", "output tile rows the CTAs walk together (-1: the launcher's 16)"),
    ("iters", "None", "the loop's iterations (no input runs along the loop)"),
    ("stream", "None", "a torch.cuda.Stream (default: the current stream of the tensors' device)"),
)


def _keywords(m, ins: list[Argument]) -> list[tuple[str, str, str]]:
    """The keywords this kernel's function takes: exp2_scale where the graph has an exp2,
    raster_group where the grid is rastered, iters where no input runs along the loop. A knob the
    graph computes (`knob exp2_scale = EXPR`, twill.knobs) defaults to None: computed at the call."""
    has = {"exp2_scale": any(op.opcode == "exp2" for op in m.graph.ops), "raster_group": rastered(m),
           "out_scale": has_scale(m),
           "iters": not any(a.per_iteration or any(ax == "loop" for ax, _ in a.dims) for a in ins)}
    knobs = {k: v for k, v in m.graph.knobs if v.names}
    consts = {k: v for k, v in m.graph.knobs if not v.names}  # a number: the keyword's default
    return [(k, "None", f"{doc}; None: {knobs[k].text()}, computed from the kernel's arguments at each call "
                        "(a value given here overrides it)") if k in knobs else
            (k, repr(consts[k].coef), f"{doc}; the imported kernel's") if k in consts else (k, default, doc)
            for k, default, doc in _KEYWORD_DOC if has.get(k, True)]


def _knob_lines(m, params) -> list[str]:
    """The function's lines that compute each knob the graph records (`knob NAME = EXPR`) from the
    caller's arguments where the caller passes none: one multiply per factor at each call."""
    by_arg = {n: p.name for (n, _), p in zip(m.graph.arguments, params)}
    out = []
    for knob, value in ((k, v) for k, v in m.graph.knobs if v.names):
        names = [by_arg[n] for n in value.names]
        given = " and ".join(f"{n} is not None" for n in names)
        expr = value.python(by_arg)
        fallback = f"knob_missing({knob!r}, {value.text()!r}, {names!r})"
        out += [f"    if {knob} is None:  # knob {knob} = {value.text()} (the imported kernel's scale)",
                f"        {knob} = {expr}" + (f" if {given} else {fallback}" if names else "")]
    return out


def _sizes_doc(graph, params: dict[str, str]) -> list[str]:
    """The docstring's lines of the size arguments the binding checks, and of a constant loop extent."""
    from .binding_runtime import SYMBOLS
    axes: dict[str, list[str]] = {}
    for n, axis in graph.extents:
        axes.setdefault(params[n], []).append(SYMBOLS[axis])
    lines = [f"{p}: None, or a Python int equal to the tensors' {' and '.join(s)} (checked: the kernel runs over the "
             "tensors' whole extent; slice them to compute over a prefix)" for p, s in axes.items()]
    if graph.flat:
        lines.append(f"{params[graph.flat]}: None, or a Python int equal to the tensors' elements n; every tensor any "
                     f"contiguous shape of n elements (the kernel views each as [n / {graph.loop_extent}, "
                     f"{graph.loop_extent}]; where n is no multiple of {graph.loop_extent}, the last n mod "
                     f"{graph.loop_extent} elements run as one more launch on a zero-padded row)")
    elif graph.loop_extent is not None:
        lines.append(f"L must be {graph.loop_extent}: the Triton kernel's loop runs to this compile-time constant")
    return lines


def _function_doc(m, args, data, keywords, returns, params=(), unread=(), knobbed=(), split=None,
                  sizes=(), over=None) -> list[str]:
    step = data["loop_step"]
    loop = (f"L any number of elements (a partial last tile of {step})" if data["ragged"]
            else f"L a multiple of {step} ({data['ragged_why']})" if step else "")
    used = sorted({s for a in args for s in re.findall(r"\b[MNLI]\b", _layout(a))})
    folded = {n for _, outs in data.get("folds", ()) for n in outs}  # combined by the function
    grid = {"M": data["partial"].get("m"), "N": data["partial"].get("n")}
    extent = {s: ("any number (the last tile may be partial)" if why == "" else f"whole tiles only ({why})")
              for s, why in grid.items() if why is not None}
    return [
        f'    """Run kernel {m.schedule.kernel}. Every tensor is row-major on one CUDA device, with any leading',
        "    batch dimensions, the same for all; an output not passed is allocated. A strided view (x[:, :N]) is",
        "    taken as it lies where TMA reads it (strides of 16-byte multiples), else staged: copied into rows",
        "    padded to 16 bytes (an output written there and copied back; one not passed returned as the view",
        "    [..., :N] of its padded buffer). Shapes:",
        "",
        *[f"    {_arg_doc(a, data['partial'], data.get('rows'), a.name in folded)}" + (f"; not given: written over {over[a.name]} in place, as the Triton "
                                                 "kernel stores it" if a.name in (over or {}) else "") for a in args],
        *[f"    {p.name}: a Python {SCALAR_DOCS.get(_scalar_type(m, p.scalar), 'float')} (the "
          f"{epilogue.scalar_label(m.graph, p.scalar).removesuffix(' scalar')}'s scalar {p.scalar})"
          for p in params if p.scalar is not None],
        *[f"    {p}: a Python float (the Triton kernel's argument, read by {k} = {v.text()})"
          for p, k, v in knobbed],
        *([f"    {split}: a Python int, each split's elements along the loop (L / splits, as the Triton launch "
           "passes it; a multiple of the loop's step): the loop is split over the grid (grid split), every output "
           "has a leading dimension of splits, [splits, *batch, ...] (the batch may be flattened to one dimension)"]
          if split and split != COLUMN_ARG else []),
        *([f"    {split}: None, or a Python int, each split's elements along the loop (a multiple of the loop's "
           "step; the last split takes what the others leave of L, at least the pipeline's stages of tiles): the "
           "loop's columns are split over the grid (twill/emit/colsplit.py). None: "
           + ("the binding picks the splits (the most that divide the column tiles, keep the CTAs within one wave of "
              "the SMs and leave each split a few iterations; where the last column tile is partial, splits of "
              "whole tiles and a last one that takes it)"
              if data.get("folds") or not any(a.splits for a in args) else "one split")
           + ("; the folds' partials are combined here" if data.get("folds") else
              "; a fold's outputs (its carries' partials, combined by the caller) have a leading dimension of splits"
              if any(a.splits for a in args) else "")] if split == COLUMN_ARG else []),
        *[f"    {line}" for line in sizes],
        *([f"    {', '.join(unread)}: arguments of the Triton kernel that the graph does not read (sizes and "
           "strides come from the tensors' shapes)"] if unread else []),
        "",
        *[f"    {s}: {_SYMBOL_DOC[s]}" + (f"; {loop}" if s == "L" and loop else "")
          + (f", {extent[s]}" if s in extent and not (s == "M" and data.get("rows")) else "") for s in used],
        *([f"    grid rows = {data['rows']}: each program computes {data['rows']} rows (the query heads of one KV head), "
           f"its tile padded to the tensor core's {_tile_rows(m)}; a tensor's M rows are viewed as "
           f"[M / {data['rows']}, {data['rows']}] batch entries ([B, H, D] as [B, H / {data['rows']}, "
           f"{data['rows']}, D]), dimensions of 1 in the batch are dropped"] if data.get("rows") else []),
        "",
        *[f"    {k}={default}: {doc}" for k, default, doc in keywords],
        "",
        f"    Returns {returns}. Raises ArgumentError (a ValueError naming the argument) for a tensor the",
        "    kernel cannot take, RuntimeError where nvcc or the launch fails.",
        '    """',
    ]


def _tile_rows(m) -> int:
    return next(op.type.shape[0] for op in m.graph.ops if op.opcode == "mma" and op.type is not None)


SCALAR_DOCS = {"f32": "float", "i32": "int", "i64": "int (64 bits: a seed, as Triton's uint64)"}


def _scalar_type(m, name: str) -> str:
    return next(v.type.dtype for v in epilogue.launch_scalars(m.graph) if v.name == name)


def knob_parameters(renderer) -> list[str]:
    """The function's parameters that the graph's knobs are computed from (`knob exp2_scale = sm_scale *
    1.44...`: sm_scale), in the parameters' order."""
    g = renderer.m.graph
    return [p.name for (n, _), p in zip(g.arguments, parameters(renderer)) if any(n in v.names for _, v in g.knobs)]


def module_source(renderer, kernel_file: str, entry: str, module: str, combine: bool = True) -> str:
    """K.py: the binding (see the module doc); `combine`: spec's."""
    m = renderer.m
    args = arguments(renderer)
    data = spec(renderer, kernel_file, entry, combine)
    runtime = RUNTIME.read_text()
    own = set(re.findall(r"^(?:def |class )?(\w+)", runtime, re.M)) | {"SPEC", "HERE", "run", "build_library"}
    fn = data["kernel"] if data["kernel"] not in own else data["kernel"] + "_kernel"
    ins = [a for a in args if not a.output]
    outs = [a for a in args if a.output]
    keywords = _keywords(m, ins)
    returns = outs[0].name if len(outs) == 1 else f"a named tuple ({', '.join(a.name for a in outs)})"
    params = parameters(renderer)
    imported = bool(m.graph.arguments)
    # the Triton kernel's arguments, in its order; a column split's own (no argument of the kernel's) is a keyword
    listed = [p for p in params if imported and p in params[:len(m.graph.arguments)] and p.name != COLUMN_ARG]
    positional = listed or [p for p in params if p.scalar is not None or (p.arg is not None and not p.arg.output)]
    rest = [p for p in params if p not in positional]
    signature = ", ".join([p.name + ("=None" if imported else "") for p in positional] + ["*"]
                          + [f"{p.name}=None" for p in rest] + [f"{k}={default}" for k, default, _ in keywords])
    over = in_place(m.graph, args)
    tensors = ", ".join(f"{a.name!r}: {a.name}" if a.name not in over else
                        f"{a.name!r}: {over[a.name]} if {a.name} is None else {a.name}" for a in args)
    passed = ", ".join(f"{k}={k}" for k, _, _ in keywords)
    order = {p.scalar: p.name for p in params if p.scalar is not None}
    if order:
        passed += ", scalars=[" + ", ".join(order[v.name] for v in epilogue.launch_scalars(m.graph)) + "]"
    knob_params = set(knob_parameters(renderer))
    split = _split_param(renderer) if m.graph.split else None
    if split:
        passed += f", split={split}"
    sizes = _size_params(renderer)
    if sizes:
        passed += ", sizes={" + ", ".join(f"{p!r}: {p}" for p in sizes.values()) + "}"
    unread = [p.name for p in positional if p.arg is None and p.scalar is None and p.name not in knob_params
              and p.name != split and p.name not in sizes.values()]
    lines = [
        f'"""PyTorch binding of kernel {m.schedule.kernel} ({kernel_file}, {m.arch}), written by `twill emit-cuda',
        '--binding torch`. Do not edit: emit it again.',
        "",
        f"    {fn}({', '.join(p.name for p in positional)}) -> {returns}",
        "",
        f"The first call builds {entry} (which includes {kernel_file}) with nvcc into $TWILL_CACHE_DIR/bindings",
        "(default ~/.cache/twill/bindings), once per content; torch is imported at call time only.",
        '"""',
        runtime.rstrip("\n"),
        "",
        "",
        "SPEC = " + pprint.pformat(data, width=110, sort_dicts=False),
        "HERE = os.path.dirname(os.path.abspath(__file__))",
        "",
        "",
        f"def {fn}({signature}):",
        *_function_doc(m, args, data, keywords, returns, params, unread,
                       [(p.name, k, v) for (n, _), p in zip(m.graph.arguments, params) for k, v in m.graph.knobs
                        if n in v.names], split, _sizes_doc(m.graph, sizes), over),
        *([f"    _ = ({', '.join(unread)},)  # arguments of the imported kernel that feed nothing here: not read"]
          if unread else []),
        *_knob_lines(m, params),
        *scalar_atomic.binding_checks(args),
        f"    return call(SPEC, HERE, {{{tensors}}}, {passed})",
        "",
        "",
        "def build_library(directory=None):",
        '    """Build the shared library now (the first call would): its path. ptxas\'s report is PATH.log."""',
        "    return build(SPEC, HERE, directory)",
        "",
        "",
        f"run = {fn}",
    ]
    return "\n".join(lines) + "\n"


def binding_files(model, kernel_path: str, combine: bool = True) -> dict[str, str]:
    """{path: text} of the binding of `model` whose kernel is written to `kernel_path` (K.cu):
    K.py and K_entry.cu beside it. `combine`: its call combines a column split's folds (False for a loop of a
    sequence, whose K.py does)."""
    from .cuda import Renderer
    path = Path(kernel_path)
    stem = path.name[:-3] if path.name.endswith(".cu") else path.name
    r = Renderer(model)
    entry, module = f"{stem}_entry.cu", f"{stem}.py"
    return {str(path.with_name(module)): module_source(r, path.name, entry, module, combine),
            str(path.with_name(entry)): entry_source(r, path.name, module)}
