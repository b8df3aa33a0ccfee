"""Inputs shared by groups of batch entries: grouped-query attention (GQA, MQA) at launch time.

Every tensor is `[batch][rows][cols]`, and CTA tile b reads batch entry b of it. An input with no
dimension along the grid's rows (axis m: attention's K and V, which every query tile of a head
reads, or a GEMM's B) may instead hold one entry per *group* of `NAME_batch_group` consecutive
batch entries: tile b reads its entry b / group. With the batch
flattened from [B, H] (b = i * H + h), K and V of shape [B, H / g] then serve query heads
h = j * g .. j * g + g - 1 from their head j: GQA with g query heads per K/V head (g = H: MQA).

The group is a runtime field of `Problem` (default 1, every entry its own), checked by `launch`
(batch a multiple of it), so one kernel file serves every grouping; the binding reads it off the
shapes (K's last batch dimension dividing Q's). An output is never grouped: its tiles would be
written by several CTAs.

Inputs of one value per batch entry (`T[1]`: an ALiBi slope per head) may also be *broadcast* over
the leading batch dimensions, as NumPy broadcasts: a slope tensor [H] under Q [B, H] holds one entry
per head, and tile b reads entry (b / group) % `NAME_batch_period` (the Problem's period, default 0:
no wrap, every entry its own). The binding reads it off the shapes (the tensor's batch dimensions a
suffix of the others'): Triton's `tl.load(SLOPES + off_bh % H)`.

An input or load of `{batch = none}` (the Triton kernel's address reads no batch program id:
ttgir/unbatched.py; an attention mask [N, N] under Q [B, H, N, D]) is *one* tensor for every batch
entry, whatever its axes (it may run along the grid's rows, as the mask does): every tile reads its
entry 0, its tensor map has one batch entry, and it has no group (the binding takes it with no batch
dimensions, or leading 1s, and refuses real ones: the kernel would read only the first).
"""
from __future__ import annotations

from .splits import batch_of


def shareable(t) -> bool:
    """Whether tensor `t` may be shared by groups of batch entries (the rule above)."""
    return t.kind in ("input", "load") and "m" not in t.axes and not t.per_iteration and not unbatched(t)


def unbatched(t) -> bool:
    """Whether tensor `t` is one tensor for every batch entry (`{batch = none}`, the rule above)."""
    return t.kind in ("input", "load") and t.unbatched


def periodic(t) -> bool:
    """Whether tensor `t` holds one value per batch entry, which may wrap (the rule above)."""
    return shareable(t) and t.kind == "input" and t.rank == 1 and t.tile == (1, 1)


def period_field(tensor: str) -> str:
    return f"{tensor}_batch_period"


def field(t) -> str:
    """The Problem / Args field holding t's group."""
    return field_of(t.name)


def field_of(tensor: str) -> str:
    """The group field of the tensor named `tensor`."""
    return f"{tensor}_batch_group"


def batch_index(t, split: bool = False, fixed_up: bool = False) -> str:
    """The batch entry of `t` that the role's tile reads: `tile.b` (`tile.b % args.batch` for an
    input under a grid split, splits.py), or the role's local of `role_lines` (the quotient computed
    once per tile: a division at each TMA load kept the load warp's 24 registers busy enough to spill)."""
    if unbatched(t):
        return "0"
    return f"twill_b_{t.name}" if shareable(t) else batch_of(t, split, fixed_up)


def role_lines(tensors, role_ops, split: bool = False) -> list[str]:
    """A role's locals of the batch entries it reads of the shared tensors it loads (every input's
    too: whichever role brings the tile's inputs in)."""
    out = []
    for t in tensors:
        if shareable(t) and (t.kind == "input" or t.value in role_ops):
            b = batch_of(t, split)
            if periodic(t):
                out.append(f"const int twill_b_{t.name} = {b} / args.{field(t)} % args.{period_field(t.name)};  "
                           f"// the entry of {t.value} it reads (GQA; one per head: wrapped)")
            else:
                out.append(f"const int twill_b_{t.name} = {b} / args.{field(t)};  // the entry of {t.value} it reads (GQA)")
            out.append(f"(void)twill_b_{t.name};")
    return out


def args_lines(tensors) -> list[str]:
    """The Args fields of the kernel (device side)."""
    out = []
    for t in tensors:
        if shareable(t):
            out.append(f"int {field(t)};  // consecutive batch entries sharing one of {t.value} (GQA; 1: none)")
        if periodic(t):
            out.append(f"int {period_field(t.name)};  // entries of {t.value}: tile b reads b / group % this")
    return out


def problem_lines(tensors) -> list[str]:
    """The Problem fields (host side), with what they mean."""
    out = []
    for t in tensors:
        if shareable(t):
            out.append(f"int {field(t)} = 1;  // consecutive batch entries reading one entry of {t.value}: tile b reads "
                       f"b / this (GQA: query heads per K/V head)")
        if periodic(t):
            out.append(f"int {period_field(t.name)} = 0;  // entries of {t.value} (0: batch / group, every entry its "
                       f"own): tile b reads (b / group) % this (one value per head under [B, H] batches)")
    return out


def launch_lines(tensors) -> list[str]:
    """`launch`'s checks of the groups and their copies into Args."""
    out = []
    for t in tensors:
        if shareable(t):
            f = field(t)
            out.append(f"if (p.{f} < 1 || p.batch % p.{f} != 0) return cudaErrorInvalidValue;")
        if periodic(t):
            f = period_field(t.name)
            out.append(f"if (p.{f} < 0 || (p.{f} > 0 && (p.batch / p.{field(t)}) % p.{f} != 0)) return cudaErrorInvalidValue;")
    return out


def copy_lines(tensors) -> list[str]:
    out = []
    for t in tensors:
        if shareable(t):
            out.append(f"args.{field(t)} = p.{field(t)};")
        if periodic(t):
            f = period_field(t.name)
            out.append(f"args.{f} = p.{f} > 0 ? p.{f} : p.batch / p.{field(t)};")
    return out


def map_batch(t, batch: str) -> str:
    """The batch extent of t's tensor map: the problem's batch, divided by t's group."""
    if unbatched(t):
        return "uint64_t(1)"
    if periodic(t):
        return f"static_cast<uint64_t>(p.{period_field(t.name)} > 0 ? p.{period_field(t.name)} : p.batch / p.{field(t)})"
    return f"{batch} / static_cast<uint64_t>(p.{field(t)})" if shareable(t) else batch
