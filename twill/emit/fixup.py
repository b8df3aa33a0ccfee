"""A column split's fixup: the carries combined in the kernel, where the epilogue reads them (colsplit.py).

A row loop split by columns (a cross-entropy's online (m, l) over the vocabulary) leaves each split with its
columns' partial carries; its epilogue (the loss from the row's m and l) needs the row's. So, after the loop,
the role that writes the outputs (Program.final_role, one for all of them):

1. writes its partial carries to the scratch `twill_partials`, laid out [row tile][split][carry][rows]
   (a row tile being (batch entry, tile.n, tile.m); the carries those of colsplit.plan's folds, in order);
2. arrives, one warp at a time, on the counter of its rows in `twill_arrivals` (a warp's rows are its own
   in both fragment layouts: 16 or 32 consecutive rows of its warpgroup's; slot row0 / 16 + warp of the
   tile's ROWS / 16): `twill::split_arrive` fences the warp's writes, adds 1 and tells the warp whether it
   was the last of the S splits, resetting the counter to 0 for the next launch;
3. the last warp reads the S partials of its rows (from L2: other SMs wrote them) and combines them in
   split order, as binding_runtime.COMBINE does after a kernel (the same result whichever split arrived
   last: deterministic), then runs the epilogue and writes the outputs at the batch entry
   (splits.batch_of), the other splits' warps skipping both.

The binding allocates the scratch per call and keeps the counters zeroed between launches (the last arrival
resets them); one split (splits = 1) writes, reads and waits on nothing. Refused (EmitError: the loop then
runs unsplit, emit.emitted) where the outputs are written by more than one role or through shared memory
(a TMA store's staging needs the whole warpgroup), or an online pair's sum is read without its max.
"""
from __future__ import annotations

from .colsplit import fixed_up, plan
from .lines import Lines
from .model import EmitError


def fold_carries(graph) -> list[tuple[str, str]]:
    """(carry, its fold's kind) of every carry the fixup combines, in the scratch's order."""
    return [(c, f.kind) for f in plan(graph).folds for c in f.carries]


def rows(model) -> int:
    """The rows of the carries' row vectors (the row tile's)."""
    return model.values[model.carry_source[fold_carries(model.graph)[0][0]]].type.shape[0]


def spec(model) -> dict:
    """What the binding needs to size the scratch: the row tile's rows and the carries combined."""
    return {"fixup": {"rows": rows(model), "carries": len(fold_carries(model.graph))}} if fixed_up(model.graph) else {}


def check(renderer, outputs_by_role: dict[str, list]) -> None:
    """Refuse what the fixup does not emit (see the module docstring)."""
    m, p = renderer.m, renderer.p
    if not outputs_by_role:
        raise EmitError("column split fixup: the kernel writes no output")
    if len(outputs_by_role) > 1:
        raise EmitError("column split fixup: the outputs are written by roles " + ", ".join(sorted(outputs_by_role))
                        + ", each of which would combine the carries")
    staged = [t.name for ts in outputs_by_role.values() for t in ts if t.name in p.staging]
    if staged:
        raise EmitError(f"column split fixup: output {staged[0]} is stored through shared memory, which the "
                        "warps of the last split would store without the others")
    for c, _ in fold_carries(m.graph):
        if len(m.values[m.carry_source[c]].type.shape) != 1:
            raise EmitError(f"column split fixup: carry {c} is no row vector")


def arg_lines(model) -> list[str]:
    if not fixed_up(model.graph):
        return []
    return ["float* twill_partials;  // each split's partial carries [row tile][split][carry][rows] (fixup.py)",
            "int* twill_arrivals;  // a counter per warp's rows of a row tile, 0 between launches"]


def problem_lines(model) -> list[str]:
    if not fixed_up(model.graph):
        return []
    return ["float* twill_partials = nullptr;  // splits > 1: the splits' partial carries, "
            f"batch * tiles_n * tiles_m * splits * {len(fold_carries(model.graph))} * {rows(model)} floats (fixup.py)",
            f"int* twill_arrivals = nullptr;  // splits > 1: batch * tiles_n * tiles_m * {rows(model) // 16} counters, "
            "zero (each launch leaves them zero)"]


def launch_lines(model) -> list[str]:
    if not fixed_up(model.graph):
        return []
    return ["if (p.splits > 1 && (p.twill_partials == nullptr || p.twill_arrivals == nullptr))",
            "  return cudaErrorInvalidValue;  // the splits combine their carries through these (fixup.py)"]


def copy_lines(model) -> list[str]:
    if not fixed_up(model.graph):
        return []
    return ["args.twill_partials = p.twill_partials;", "args.twill_arrivals = p.twill_arrivals;"]


def emit(body, out: Lines, finals: dict[str, str]) -> str:
    """The fixup's code after the loop (steps 1-3 of the module docstring), in the role writing the outputs;
    returns the condition the epilogue and the stores run under."""
    m = body.m
    folds, k, n = plan(m.graph).folds, len(fold_carries(m.graph)), rows(m)
    fins = {c: finals.get(m.carry_source[c]) for f in folds for c in f.carries}
    row0 = body.row0(n)
    at = {}  # carry -> its place among a split's partials
    for f in folds:
        if len({fins[c] is None for c in f.carries}) > 1:
            raise EmitError(f"column split fixup: the online pair ({', '.join(f.carries)}) is not read whole")
        at.update((c, len(at)) for c in f.carries)

    def part(c: str, s: str) -> str:
        return f"twill_part + ({s} * {k} + {at[c]}) * {n}"

    out("// ---- the column split's fixup (fixup.py): the splits' partial carries combined by the last to arrive ----",
        "bool twill_last = true;")
    with out.block("if (args.splits > 1)"):
        out("const size_t twill_tile = (static_cast<size_t>(tile.b % args.batch) * args.tiles_n + tile.n) * args.tiles_m "
            "+ tile.m;  // the row tile",
            f"float* twill_part = args.twill_partials + twill_tile * args.splits * {k * n};")
        for c in at:
            if fins[c] is not None:
                out(f"twill::frag_to_buffer({part(c, 'tile.b / args.batch')}, {fins[c]}, {row0}, 0);  "
                    f"// carry {c}: this split's")
        out(f"twill_last = twill::split_arrive(args.twill_arrivals + twill_tile * {n // 16} + ({row0}) / 16 + "
            "(threadIdx.x / 32) % 4, args.splits);")
        with out.block("if (twill_last)"):
            for f in folds:
                if fins[f.carries[0]] is None:
                    continue
                if f.kind == "online":
                    mc, lc = f.carries
                    mf, lf = fins[mc], fins[lc]
                    out(f"// the online pair ({mc}, {lc}): m = max_s m_s, l = sum_s l_s * exp2((m_s - m) * exp2_scale)",
                        f"twill::partial_to_frag({mf}, {part(mc, '0')}, {row0});")
                    with out.block("for (int s = 1; s < args.splits; ++s)"):
                        out(f"decltype({mf}) twill_m;", f"twill::partial_to_frag(twill_m, {part(mc, 's')}, {row0});",
                            f"twill::fold_max({mf}, twill_m);")
                    out(f"twill::fill({lf}, 0.f);")
                    with out.block("for (int s = 0; s < args.splits; ++s)"):
                        out(f"decltype({mf}) twill_m;", f"decltype({lf}) twill_l;",
                            f"twill::partial_to_frag(twill_m, {part(mc, 's')}, {row0});",
                            f"twill::partial_to_frag(twill_l, {part(lc, 's')}, {row0});",
                            f"twill::fold_rescaled({lf}, twill_l, twill_m, {mf}, args.exp2_scale);")
                    continue
                (c,) = f.carries
                out(f"twill::partial_to_frag({fins[c]}, {part(c, '0')}, {row0});  // carry {c}: the {f.kind} of the "
                    "splits'")
                with out.block("for (int s = 1; s < args.splits; ++s)"):
                    out(f"decltype({fins[c]}) twill_x;", f"twill::partial_to_frag(twill_x, {part(c, 's')}, {row0});",
                        f"twill::fold_{f.kind}({fins[c]}, twill_x);")
    return "twill_last"


def runtime_part(model) -> list[str]:
    """The fixup's runtime header (twill::split_arrive, partial_to_frag, the folds), in kernels that have one."""
    if not fixed_up(model.graph):
        return []
    from .runtime import _part
    return [(_part("fixup.cuh") + _part(f"fixup_{model.target.runtime.split('.')[0]}.cuh")).lstrip("\n")]
