"""The host side of an emitted kernel: tensor maps, launch configuration, and a test `main`.

`launch(problem, stream)` encodes one TMA tensor map per loaded tensor with
`cuTensorMapEncodeTiled` (reached through `cudaGetDriverEntryPointByVersion`, so no -lcuda is
needed), raises the kernel's dynamic shared-memory limit and launches one CTA per output tile.
What a call's host time need not repeat is kept (cuda_runtime/host.tpl): each thread's last 16
tensor maps, keyed by all of their encoding's arguments; the shared-memory limit, raised once per
kernel variant and device; each device's SM count.
Everything sits behind `#ifndef TWILL_NO_HOST`; `-DTWILL_MAIN` adds a `main` that runs the kernel on
random data and prints a checksum and the time.
"""
from __future__ import annotations

from . import anypitch, batch_groups, descale, epilogue, fixup, gather, halves, partial, rand, scalar_atomic, splits
from .model import DIM_LABELS, dtype_bytes, plain_box, rastered, swizzle_bytes
from .ops import TMA_DTYPE, ctype
from .template import fill


def _extent(m, t, dim: int) -> str:
    axis, size, step = t.axes[dim], t.tile[dim], f"p.{t.name}_{DIM_LABELS[dim]}_step"
    if axis in partial.GRID_AXES:  # the caller's extent, else whole tiles
        return partial.extent(axis, f"p.tiles_{axis}", step)
    return {"loop": splits.scale_loop(m, f"loop_elements(p, {size})")}.get(axis, f"uint64_t({size})")


def _dims(m, t) -> tuple[str, str, str]:
    rows = "uint64_t(1)" if t.rank == 1 else _extent(m, t, 0)
    cols = _extent(m, t, 1)
    iters = "loop_iters(p)" if t.iter_div == 1 else f"((loop_iters(p) + {t.iter_div - 1}) / {t.iter_div})"
    batch = (f"static_cast<uint64_t>({iters})" if t.per_iteration and batch_groups.unbatched(t)
             else f"static_cast<uint64_t>(p.batch) * {iters}" if t.per_iteration
             else batch_groups.map_batch(t, splits.scale_batch(m, t, "static_cast<uint64_t>(p.batch)")))
    return rows, cols, batch


def host_launcher(r) -> str:
    """The host side (cuda_runtime/host.tpl): the Problem a caller fills, its checks, the tensor
    maps, the launch, each tensor's element count and the test main."""
    m = r.m
    every = list(m.tensors)
    maps = r.tma_tensors()
    h = launch_holes(r)
    return fill("host.tpl", ns=r.ns, problem_fields=_problem_fields(r, every), loop_iters=h["loop_iters"],
                extent_check=h["extent_check"], checks=h["checks"], args=h["args"],
                launch_args=", ".join([f"tm_{t.name}" for t in maps] + ["args"]), persistent_grid=_grid(r.m),
                launch_head=halves.launch_head(r),
                elements=[f"inline size_t elements_{t.name}(const Problem& p) {{ return static_cast<size_t>("
                          f"{' * '.join(_dims(m, t))}); }}" for t in every],
                main=_main(r, r.ns, every)) + "\n"


def launch_holes(r) -> dict:
    """launch()'s holes that turn a Problem into the kernel's Args and tensor maps: the loop's iterations, the
    check of its extent, the pointers' and placements' checks with the maps' encoding, the Args' fields (read by
    host.tpl and by a sequence's one kernel, seqfuse.py)."""
    m = r.m
    every = list(m.tensors)
    loop_iters = ("return p.loop_extent > 0 ? (p.loop_extent + kLoopStep - 1) / kLoopStep : p.iters;" if m.ragged.step
                  else "return p.iters;  // no loaded tile runs along the loop: loop_extent has no meaning here")
    extent_check = ("if (p.loop_extent < 0 || (p.loop_extent % kLoopStep != 0 && !kRagged))" if m.ragged.step
                    else "if (p.loop_extent != 0)")
    return dict(loop_iters=loop_iters, extent_check=extent_check, checks=_checks(r, every, r.tma_tensors()),
                args=_args(r, every))


def _grid(m) -> str:
    """The persistent grid: as many CTAs as the SMs hold at once (occupancy.py), at most a tile each."""
    if m.ctas_per_sm == 1:
        return "grid = sms < grid ? sms : grid;  // one CTA per SM (the kernel's shared memory allows no second)"
    return ("grid = sms * kCtasPerSm < grid ? sms * kCtasPerSm : grid;  // kCtasPerSm CTAs per SM (occupancy.py)")


def _problem_fields(r, every) -> list[str]:
    """Problem's epilogue scalars, pointers, raster group and tile placements."""
    lines = [x[2:] for x in epilogue.problem_fields(r.m) + scalar_atomic.problem_fields(r.m) + rand.problem_fields(r.m)]
    lines += partial.problem_lines(r.partial)
    for t in every:
        const = "const " if t.kind in ("input", "load") else ""
        lines.append(f"{const}{ctype(t.dtype)}* {t.name} = nullptr;  // {t.kind} {t.value}: {r.shape_doc(t)}")
    if rastered(r.m):
        lines.append("int raster_group = 16;  // output tile rows the CTAs walk together (L2 reuse; 0: row-fastest order)")
    for t in every:
        for d, label in t.placed_dims():
            lines.append(f"int {t.name}_{label}_step = {t.tile[d]}, {t.name}_{label}_offset = 0;")
    for t in r.tma_tensors():  # a row pitch (host.tpl's encode): 0 keeps the contiguous layout
        lines.append(f"int64_t {t.name}_row_stride = 0, {t.name}_batch_stride = 0;  // elements between rows, "
                     "batch entries (0: contiguous)")
    lines += batch_groups.problem_lines(every) + splits.problem_lines(r.m) + fixup.problem_lines(r.m)
    lines += halves.problem_lines(r)
    return lines + ([descale.PROBLEM_LINE] if descale.has_scale(r.m) else [])


def _checks(r, every, maps) -> list[str]:
    """launch's checks of the pointers and placements, then one tensor map per TMA tensor."""
    lines = []
    for t in every:
        lines.append(f"if (p.{t.name} == nullptr) return cudaErrorInvalidValue;")
        for d, label in t.placed_dims():
            lines.append(f"if (p.{t.name}_{label}_offset < 0 || p.{t.name}_{label}_offset + {t.tile[d]} > "
                         f"p.{t.name}_{label}_step) return cudaErrorInvalidValue;")
    lines += scalar_atomic.launch_checks(r.m)
    lines += batch_groups.launch_lines(every) + splits.launch_lines(r.m) + fixup.launch_lines(r.m)
    lines += partial.launch_checks(r.partial, every)
    for t in maps:
        rows, cols, batch = _dims(r.m, t)
        esize = dtype_bytes(t.dtype)
        sw = swizzle_bytes(t.tile[-1] * esize, t.tile[0])
        n = t.name
        encode_2d = (f"encode(&tm_{t.name}, {TMA_DTYPE[t.dtype]}, {esize}, p.{t.name}, {rows}, {cols}, {batch}, {n}_rs, "
                     f"{n}_bs, " + (f"{min(t.tile[0], 256)}, {sw // esize}, {sw})" if not plain_box(t)
                                    else f"1, {t.tile[1]}, 16)"))
        if anypitch.eligible(r.m, t):  # a row stride < 0: rows at any pitch, by bulk copies (no map)
            lines += anypitch.map_lines(t, rows, cols, batch, TMA_DTYPE[t.dtype], esize, encode_2d)
            continue
        lines += [
            f"if (p.{n}_row_stride < 0 || p.{n}_batch_stride < 0) return cudaErrorInvalidValue;",
            f"const uint64_t {n}_rs = p.{n}_row_stride > 0 ? static_cast<uint64_t>(p.{n}_row_stride) : {cols};",
            f"const uint64_t {n}_bs = p.{n}_batch_stride > 0 ? static_cast<uint64_t>(p.{n}_batch_stride) : "
            f"{rows} * {n}_rs;",
            f"CUtensorMap tm_{t.name};",
            f"if (!{encode_2d})",
            "  return cudaErrorInvalidValue;",
        ]
    return lines


def _args(r, every) -> list[str]:
    """The kernel's Args from the Problem: raster group, pointers, placements."""
    lines = [x[2:] for x in epilogue.copy_fields(r.m) + scalar_atomic.copy_fields(r.m) + rand.copy_fields(r.m)]
    lines += gather.copy_lines(r.m)
    lines += ["args.raster_group = p.raster_group;"] if rastered(r.m) else []
    lines += [f"args.{partial.FIELD[ax]} = p.{partial.FIELD[ax]};" for ax in partial.GRID_AXES if ax in r.partial]
    lines += [f"args.{t.name} = p.{t.name};" for t in r.pointer_tensors()]
    lines += anypitch.copy_lines(r.m, lambda t: _dims(r.m, t)[0])
    for t in every:
        for _, label in t.placed_dims():
            lines.append(f"args.{t.name}_{label}_step = p.{t.name}_{label}_step;")
            lines.append(f"args.{t.name}_{label}_offset = p.{t.name}_{label}_offset;")
    lines += batch_groups.copy_lines(every) + splits.copy_lines(r.m) + fixup.copy_lines(r.m)
    lines += ["args.idle_parts = idle_parts;"] if r.parts else []
    return lines + (["args.out_scale = p.out_scale;"] if descale.has_scale(r.m) else [])


def _main(r, ns: str, tensors) -> list[str]:
    """The test main (cuda_runtime/main.tpl): random inputs, the timed launches, the checksums."""
    inputs = [f"p.{t.name} = twill_random_tensor<{ctype(t.dtype)}>({ns}::elements_{t.name}(p), {i + 1}u);"
              for i, t in enumerate(tensors)] + scalar_atomic.main_inputs(r.m)
    checksums = [f"printf(\"checksum {t.name}: %.6e\\n\", twill_checksum(p.{t.name}, {ns}::elements_{t.name}(p)));"
                 for t in tensors if t.kind in ("output", "store")] + scalar_atomic.main_checksums(r.m)
    text = fill("main.tpl", ns=ns, iters=str(max(8, r.m.stages)), inputs=inputs, checksums=checksums)
    return text.rstrip("\n").split("\n")
