"""Halving: a kernel whose warpgroups each compute one row part of a tall tile (a grown GEMM's two
128-row tiles sharing B, `twill import --grow-rows`; any GEMM split into parts) runs its first part
alone in each CTA where the first parts' tiles alone fit the SMs at once.

Grown, a GEMM has half as many CTAs: where the problem has fewer 128-row tiles than the card has
SMs, half of them idle and the kernel took up to 1.9x as long as the graph as imported (an H100,
docs/ttgir-import.md, "Growing"). So `launch()` halves where one part's tiles fit the SMs in one
wave (`p.halve < 0`; 1 always, 0 never): every part is placed at the first part's rows (step = one
part's rows, offset 0, the grid over one part's tiles), and the parts after the first idle
(`Args::idle_parts`, bit i for part i):

- an idle part's warpgroup returns at once, the producer issues none of the loads only it reads,
  every ring it shares with the first part counts the first part's arrivals alone (its init, in
  thread 0, reads `idle_parts`), and the ping-pong's turns stop (the first part has the tensor core
  to itself). Loading an idle part's tiles past the tensor's rows instead (TMA fills zeros and
  reads nothing from memory), with its waits and releases running, cost as much as computing it:
  a 1024 x 2048 GEMM 27.1 us against 14.6 as imported (the SM takes the zeros in as it takes data).

A kernel halves where each warpgroup role runs only mmas (of loads and its own carries), its
outputs and its row loads are parts of one index of the binding's stacked tensors (STEM0, STEM1,
... : binding.py), and the parts after the first have warpgroups of their own; on sm_90a, without
tile copies, a causal loop or a grid split."""
from __future__ import annotations

def role_parts(r) -> dict[str, int]:
    """role name -> the part it computes, for a kernel that halves (see the module doc); else {}."""
    from .binding import stacked
    m = r.m
    if m.target.tensor_memory or m.tile_copies > 1 or m.graph.split or r.causal.masks:
        return {}
    stacks = stacked(m)
    part_of = {t.value: stacks[t.name][1] for t in m.tensors if t.name in stacks}
    out: dict[str, int] = {}
    for role in m.roles:
        if not role.is_warpgroup:
            continue
        if any(m.ops[op].opcode != "mma" for op in role.ops):
            return {}
        seen = set()
        for op in role.ops:
            for operand in m.ops[op].operands:
                value, _ = m.resolve(operand)
                load = value in m.ops and m.is_load(value)
                if value not in m.ops or (not load and m.values[value].role != role.name):
                    return {}  # an input, or another role's value: the parts are not independent
                if load and value in part_of:
                    seen.add(part_of[value])
        written = [t for t in m.tensors if t.kind in ("output", "store") and r.p.storing_role(t) == role.name]
        if not written or any(t.value not in part_of for t in written):
            return {}
        seen |= {part_of[t.value] for t in written}
        if len(seen) != 1:
            return {}
        out[role.name] = seen.pop()
    parts = sorted(set(out.values()))
    if len(parts) < 2 or parts != list(range(len(parts))) or len({R for *_, R in _stacked(r)}) != 1:
        return {}  # (parts of different heights would not share one tiling of the rows)
    return out


def load_part(r, parts: dict[str, int], load: str) -> int:
    """The part whose warpgroup alone reads `load` (0: the first's, or several parts')."""
    readers = {u.role for u in r.m.uses.get(load, ())}
    found = {parts.get(role, 0) for role in readers}
    return found.pop() if len(found) == 1 else 0


def unless_idle(parts: dict[str, int], part: int) -> str:
    """The condition a load's issue adds where only an idle part reads it: none is issued then."""
    return f" && !((args.idle_parts >> {part}) & 1)" if parts and part else ""


def role_lines(r, parts: dict[str, int], role: str) -> list[str]:
    """A part after the first returns at once while it idles: its loads are not issued, and the
    rings it shares count no arrival of it (kernel.py, `_counts`)."""
    i = parts.get(role, 0)
    if not i:
        return []
    return [f"if ((args.idle_parts >> {i}) & 1) return;  // part {i} idles in a halved launch (halves.py)"]


def _stacked(r) -> list[tuple[str, int, int, int]]:
    """(placement field, part index, parts, part rows) of every tensor stacked along M."""
    from .binding import stack_dim, stacked
    from .model import DIM_LABELS
    m = r.m
    stacks = stacked(m)
    count: dict[str, int] = {}
    for stem, i in stacks.values():
        count[stem] = max(count.get(stem, 0), i + 1)
    out = []
    for t in m.tensors:
        d = stack_dim(t)
        if t.name in stacks and d is not None:
            stem, i = stacks[t.name]
            out.append((f"{t.name}_{DIM_LABELS[d]}", i, count[stem], t.tile[d]))
    return out


def problem_lines(r) -> list[str]:
    if not r.parts:
        return []
    return ["int halve = -1;  // the first row part alone per CTA, the others idle (halves.py): 1 always, 0 never, "
            "-1 where one part's tiles fit the SMs at once"]


def launch_head(r) -> list[str]:
    """launch()'s first lines: its Problem, and where the kernel halves, `halve()` (which rewrites a
    copy, module doc) before it."""
    if not r.parts:
        return ["inline cudaError_t launch(const Problem& p, cudaStream_t stream = 0) {"]
    stacked = _stacked(r)
    parts = max(n for _, _, n, _ in stacked)
    rows = stacked[0][3]
    standard = " && ".join(f"p.{f}_step == {n * R} && p.{f}_offset == {i * R}" for f, i, n, R in stacked)
    extent = ("p.m_extent > 0 ? p.m_extent : " if "m" in r.partial else "") + f"p.tiles_m * {parts * rows}"
    lines = [
        "// Halving (halves.py): where one part's tiles fit the SMs at once (p.halve < 0; 1 always, 0 never),",
        f"// every CTA computes one {rows}-row part, the first, on the first part's rows, and the others idle:",
        f"// p rewritten so, and the parts that idle (Args::idle_parts), or 0 where p stays as it is.",
        "inline int halve(Problem& p, int sms) {",
        f"  if (p.halve == 0 || !({standard})) return 0;",
        f"  const int rows = {extent}, tiles_m = (rows + {rows - 1}) / {rows};",
        "  if (p.halve < 0 && static_cast<long long>(tiles_m) * p.tiles_n * p.batch > sms) return 0;",
        "  p.tiles_m = tiles_m;",
    ]
    if "m" in r.partial:
        lines.append(f"  p.m_extent = rows % {rows} ? rows : 0;")
    for f, i, n, R in stacked:
        lines.append(f"  p.{f}_step = {R};  p.{f}_offset = 0;")
    lines += [f"  return {((1 << parts) - 1) & ~1};", "}", "",
              "inline cudaError_t launch(const Problem& given, cudaStream_t stream = 0) {",
              "  Problem p = given;",
              "  int halve_sms = 0, halve_device = 0;  // the SMs, asked only where halve() needs them",
              "  if (p.halve < 0 && (cudaGetDevice(&halve_device) != cudaSuccess || sm_count(halve_device, &halve_sms) != cudaSuccess))",
              "    halve_sms = 0;",
              "  const int idle_parts = halve(p, halve_sms);"]
    return lines
