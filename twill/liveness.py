"""The model's semantics of roles, lifetimes, registers and memory, in plain Python.

These definitions are shared by `verify` (which enumerates them) and documented next to the
SMT encoding in `encoding.py` (which states them as constraints); keep the two in step.

- An op is *busy* on its role for ``busy(t)`` cycles from its start: one issue cycle if it is
  async (or its `hold`, where the machine gives one: a wgmma holds its warpgroup until the
  tensor core has taken its instructions), else its latency (at least 1).
- A register result of op v lives on v's role until the latest same-role consumer has finished
  reading it, ``start(c) + distance*I + holds(c)``, and at least ``cycles(v)`` from its start. An
  op holds its register operands while it is busy, an mma until the tensor core has read them
  (its latency): see `holds`. The result occupies registers from ``start(v)``, except when it is
  written in place: when a same-role register operand at least as large dies at v (v is its last
  reader), v's result takes that operand's registers as it consumes them, and counts only from
  ``start(v) + holds(v)`` (the softmax's exp2 turning S into P, an accumulating mma): see
  `in_place_operands`. A result read by another role is staged through shared memory from
  ``start(v)`` until the latest cross-role consumer's start.
- @smem and @tmem results live from ``start(v)`` until their last consumer, of any role, has
  its operand: an mma until it completes (the tensor core reads its operands as it runs), any
  other op until its start (it reads the whole tile into its registers, which count against its
  role while it runs): see `memory_holds`. They count against their space; written in place of a
  dying operand of their space at least as large (an accumulating tcgen05.mma), they count from
  their op's end, as registers do. A streaming load instead reserves ``depth`` slots of its tile
  for the whole loop, and loop-invariant inputs are always resident.
- A register value read by an op of another role (other than an mma, which reads its operands
  from shared memory) is loaded into the reading role's registers while that op executes,
  ``[start(c), start(c) + cycles(c))``: see `imports`; except a value no mma reads that the
  reading role reads with one op alone, which streams through it (`streamed_with`).
- A @tmem value read by an op other than an mma (softmax reading S, a row sum of P, a store) is
  brought into that op's registers while it runs, the same interval: ``tcgen05.ld`` gives each
  thread of a warpgroup one lane, so a tile of C 32-bit columns costs C registers per thread
  (its footprint / 512), except that an elementwise update from tensor memory to tensor memory
  (the rescale of O) streams 32 columns at a time: see `tmem_reads`, `read_bytes`. An elementwise
  reader's result of the tile's shape, no larger than the read, is written in place of the read's
  registers and counts from its op's end: see `in_place_read`. Two such
  reads cannot overlap on a role whose budget does not hold both (one warpgroup cannot hold two
  128-column S tiles at once).
- A loop-invariant input held in registers (an `input` without @smem or @tmem) occupies the
  registers of every role that reads it, for the whole loop.
- An op other than an mma that computes on a register tile keeps `limits.register_scratch`
  registers of temporaries on its role while it runs: see `scratch`.
- Registers per thread of a value on a role of w warps: ``ceil(register_bytes / (4 * 32 * w))``,
  where a vector's register bytes are those of its fragment, replication included
  (`registers.register_bytes`: an f32[64] row statistic takes 2 registers a thread on sm_90a).
"""
from __future__ import annotations

import math

from . import vocab
from .problem import Dep, Problem, Task
# The register file's rule lives in registers.py; encoding.py reads it from here.
from .registers import launched_warpgroups, register_file, register_pool  # noqa: F401
from .schedule import Role, Schedule


def tensor_core(t: Task) -> bool:
    """Does t read its memory operands in place and hold them until it completes (an mma: the
    table's `tensor_core` fact, twill.vocab)?"""
    d = vocab.lookup(t.opcode)
    return d is not None and d.tensor_core


def busy(t: Task) -> int:
    return max(t.hold, 1) if t.is_async else max(t.cycles, 1)


def holds(t: Task) -> int:
    """How long op t holds its register operands from its start: an mma until the tensor core has
    read them (a wgmma's A fragment and accumulator stay allocated until it completes), any other
    op while it keeps its role busy."""
    return max(t.cycles, 1) if tensor_core(t) else busy(t)


def memory_holds(t: Task) -> int:
    """How long op t keeps a shared- or tensor-memory operand from its start: an mma until the
    tensor core has read it (it completes); any other op reads the whole tile into its registers
    as it starts (the registers then count against its role while it runs, see `tmem_reads`)."""
    return max(t.cycles, 1) if tensor_core(t) else 0


def in_place_operands(p: Problem, v: str) -> list[Dep]:
    """In-edges of v from values of v's space at least as large as v's result (ring slots of
    streaming loads excepted): when one of them dies at v (on v's role, for registers), v's result
    is written into its registers or its shared- or tensor-memory tile. An mma writes only into
    its accumulator (operand 2): its A and B operands are read while its result is written."""
    t = p.task[v]
    if t.bytes == 0 or t.streaming:
        return []
    return [d for d in p.deps if d.dst == v and p.task[d.src].space == t.space
            and not p.task[d.src].streaming and p.task[d.src].bytes >= t.bytes
            and (not tensor_core(t) or d.operand == vocab.lookup(t.opcode).accumulator)]


def regs_per_thread(nbytes: int, warps: int) -> int:
    return math.ceil(nbytes / (4 * 32 * warps))


def always_blocking(p: Problem) -> set[str]:
    """Ops that block whatever the roles: an async producer, or a @tmem read into registers."""
    out = {d.dst for d in p.deps if p.task[d.src].is_async}
    return out | {t.name for t in p.tasks if t.reads_tmem and not tensor_core(t)}


def blocking_ops(s: Schedule, p: Problem) -> set[str]:
    """Ops with a blocking in-edge: `always_blocking`, or a producer on another role."""
    ops = s.by_name
    return always_blocking(p) | {d.dst for d in p.deps if ops[d.src].role != ops[d.dst].role}


def imports(p: Problem) -> list[tuple[str, str]]:
    """(value, reader) pairs whose value must be loaded into the reader's registers when the two
    run on different roles: register values read by ops other than mma."""
    out = []
    for d in p.deps:
        src, dst = p.task[d.src], p.task[d.dst]
        if src.space == "reg" and src.bytes > 0 and not tensor_core(dst) and (d.src, d.dst) not in out:
            out.append((d.src, d.dst))
    return out


def streamed_with(p: Problem, v: str, c: str) -> list[str] | None:
    """For a pair (v, c) of `imports`: None where c holds v whatever the roles (an mma reads v too,
    so emit-cuda stages v as the mma's operand tile and c copies it into a fragment first); else
    the other ops other than mma that read v. emit-cuda hands a value no mma reads over as a staged
    tile that its readers read in place, and ptxas streams it through an op that is its role's
    only reader of it (the held-out attn_exp's exponential reads S so: none of S in its role's
    registers), but keeps it in registers for a role with two readers of it (the shared-memory
    loads of both read once: attention_fwd_simple's rowmax and exp2 on one role spilled 1 KB
    where S was counted as streamed). So c holds v unless none of these runs on c's role.
    A measured ptxas correction like `scratch`, and on with it: where the machine's
    `register_scratch` is 0 every such read is counted whole (None), since streaming without the
    scratch let the solver pick schedules that spill (docs/model-fidelity.md)."""
    if p.limits.register_scratch == 0 or any(tensor_core(p.task[d.dst]) for d in p.deps if d.src == v):
        return None
    return sorted({d.dst for d in p.deps if d.src == v and d.dst != c and not tensor_core(p.task[d.dst])})


TMEM_CHUNK_BYTES = 128 * 32 * 4  # 32 columns of all 128 lanes


def tmem_reads(p: Problem) -> list[tuple[str, str]]:
    """(value, reader) pairs: a @tmem value that an op other than an mma reads into registers
    (tcgen05.ld: each thread of a warpgroup one lane, i.e. one row, so a tile of C 32-bit columns
    takes C registers per thread, its footprint / (128 * 4)), held while the reader runs."""
    out = []
    for d in p.deps:
        if p.task[d.src].space == "tmem" and not tensor_core(p.task[d.dst]) and (d.src, d.dst) not in out:
            out.append((d.src, d.dst))
    return out


def read_bytes(p: Problem, v: str, reader: str) -> int:
    """What holding value v costs its reader's role in registers (bytes of the whole role) while
    the reader runs, for the pairs of `imports` and `tmem_reads`: the whole value, except that an
    elementwise update from tensor memory to tensor memory of the same footprint (the rescale of
    O) streams through registers 32 columns at a time, as emit-cuda's code does."""
    value, op = p.task[v], p.task[reader]
    if value.space == "tmem" and op.space == "tmem" and op.bytes == value.bytes:
        return min(value.bytes, TMEM_CHUNK_BYTES)
    return value.register_bytes if value.space == "reg" else value.bytes


def in_place_read(p: Problem, v: str) -> bool:
    """Is v's register result written in place of a @tmem tile its op reads into registers (`tmem_reads`)? An op
    other than an mma of the tile's shape (elementwise) whose read takes at least v's registers: emit-cuda reads the
    tile whole into a fragment (`tmem_to_frag`) and computes v element by element from it, and ptxas writes each
    element of v into registers of the fragment it has finished reading (the stored attention_bwd_blackwell: dS =
    (dP - delta) * P, dP's 128 registers read out of tensor memory, P's 64 and dS's 64 beside them compile with no
    spill in a 248-register budget). The read's registers die at v's end whatever the roles, so v counts from its
    end (`holds`), as a result written over a dying register operand does (`in_place_operands`)."""
    t = p.task[v]
    if t.space != "reg" or t.bytes == 0 or tensor_core(t):
        return False
    return any(read_bytes(p, u, v) >= t.register_bytes for u in t.tmem_elementwise)


def written_in_place(p: Problem, v: str) -> bool:
    """May v's result be written in place (`in_place_operands`, `in_place_read`): it then begins at its op's end."""
    return bool(in_place_operands(p, v)) or in_place_read(p, v)


def live_intervals(s: Schedule, p: Problem) -> dict[str, tuple[int, int, int, int]]:
    """value -> (start, end on its own role, end of its shared-memory staging or 0, the cycle from
    which its registers count: its start, or the end of its op when written in place)."""
    start = {o.name: o.start for o in s.ops}
    role = {o.name: o.role for o in s.ops}
    out = {}
    for t in p.tasks:
        if t.bytes == 0:
            continue
        same = [start[t.name] + max(t.cycles, 1)]
        cross = []
        for d in p.deps:
            if d.src == t.name:
                at = start[d.dst] + d.distance * s.ii
                if t.space != "reg":
                    same.append(at + memory_holds(p.task[d.dst]))
                elif role[d.dst] != role[t.name]:
                    cross.append(at)
                else:
                    same.append(at + holds(p.task[d.dst]))
        out[t.name] = [start[t.name], max(same), max(cross) if cross else 0, start[t.name]]
    for t in p.tasks:
        hold = holds(t) if t.space == "reg" else memory_holds(t)
        for d in in_place_operands(p, t.name):
            done = start[t.name] + d.distance * s.ii + hold
            here = t.space != "reg" or role[d.src] == role[t.name]
            if here and d.src in out and out[d.src][1] <= done:
                out[t.name][3] = start[t.name] + hold
        if t.name in out and in_place_read(p, t.name):
            out[t.name][3] = start[t.name] + hold
    return {k: tuple(v) for k, v in out.items()}


def scratch(p: Problem) -> list[tuple[str, int]]:
    """(op, registers per thread) for ops that keep temporaries while they run: an op other than
    an mma computing on a register tile (an exponential, a row reduction, a rescale, a mask, a
    store of a tile) holds the machine's `register_scratch` on its role over ``[start, start +
    cycles)``, as ptxas's code for it does (its unrolled elementwise code keeps values in flight;
    measured: docs/model-fidelity.md). Counted like a value it reads from another role."""
    return [(t.name, t.scratch) for t in p.tasks if t.scratch > 0]


def instances_live(begin: int, end: int, t: int, ii: int) -> int:
    """How many iterations' copies of a value living [begin, end) are live at steady-state cycle t."""
    return sum(1 for k in range((begin - t) // ii - 1, (end - t) // ii + 2) if begin <= t + k * ii < end)


def live_ring(begin: int, end: int, ii: int):
    """`instances_live(begin, end, t, ii)` at every steady-state cycle t at once (a numpy array of `ii`)."""
    import numpy as np
    out = np.zeros(ii, dtype=np.int64)
    if end <= begin:
        return out
    full, rem = divmod(end - begin, ii)
    out += full
    first = begin % ii
    out[first:first + rem] += 1
    if first + rem > ii:
        out[:first + rem - ii] += 1
    return out


class Profile:
    """Per steady-state cycle t: (amount in use, the labels of what uses it), as a sequence of `ii`
    such pairs, computed by whole arrays (`live_ring`); `used` is the amounts as a numpy array. Each
    item is (a label, its amount per live instance, a ring of live instances, or None: always held);
    a label reads "{label}" alone for an always-held item, else "{label} ({n}x{amount}{unit})"."""

    def __init__(self, ii: int, base: int, items: list, unit: str = ""):
        import numpy as np
        self.ii, self._items, self._unit = ii, items, unit
        self.used = np.full(ii, base, dtype=np.int64)
        self.held = np.zeros(ii, dtype=np.int64)  # how many items are live at each cycle
        for _, amount, ring in items:
            self.used += amount if ring is None else amount * ring
            self.held += 1 if ring is None else (ring > 0)

    def __len__(self) -> int:
        return self.ii

    def __getitem__(self, t: int) -> tuple[int, list[str]]:
        if not 0 <= t < self.ii:
            raise IndexError(t)
        names = [label if ring is None else f"{label} ({int(ring[t])}x{amount}{self._unit})"
                 for label, amount, ring in self._items if ring is None or ring[t]]
        return int(self.used[t]), names

    def __iter__(self):
        return (self[t] for t in range(self.ii))

    def __eq__(self, other) -> bool:  # as the list of (amount, labels) it stands for
        return list(self) == list(other)

    __hash__ = None

    def first_over(self, limit, held: bool = False) -> int | None:
        """The first cycle whose amount is above `limit` (with `held`, where something is live), or None."""
        import numpy as np
        over = np.nonzero((self.used > limit) & (self.held > 0) if held else self.used > limit)[0]
        return int(over[0]) if len(over) else None


def role_register_use(s: Schedule, p: Problem, role: Role) -> Profile:
    """Per steady-state cycle: registers per thread in use on `role`, and by which values."""
    lives = live_intervals(s, p)
    start = {o.name: o.start for o in s.ops}
    role_of = {o.name: o.role for o in s.ops}
    # register inputs an op of this role reads: held at every cycle
    items: list = [(f"{v} (input, {regs_per_thread(nbytes, role.warps)})", regs_per_thread(nbytes, role.warps), None)
                   for v, nbytes, readers in p.register_inputs if any(role_of[c] == role.name for c in readers)]
    for v in role.ops:
        task = p.task[v]
        if v in lives and task.space == "reg":
            items.append((v, regs_per_thread(task.register_bytes, role.warps),
                          live_ring(lives[v][3], lives[v][1], s.ii)))
    for v, c in imports(p) + tmem_reads(p):
        if role_of[c] != role.name or (role_of[v] == role.name and p.task[v].space == "reg"):
            continue
        others = streamed_with(p, v, c) if p.task[v].space == "reg" else None
        if others is not None and not any(role_of[o] == role.name for o in others):
            continue  # read in place by its role's only reader of it
        items.append((f"{v} read by {c}", regs_per_thread(read_bytes(p, v, c), role.warps),
                      live_ring(start[c], start[c] + max(p.task[c].cycles, 1), s.ii)))
    for c, k in scratch(p):
        if role_of[c] == role.name:
            items.append((f"{c} scratch", k, live_ring(start[c], start[c] + max(p.task[c].cycles, 1), s.ii)))
    return Profile(s.ii, p.limits.register_reserve, items)


def memory_use(s: Schedule, p: Problem, space: str) -> Profile:
    """Per steady-state cycle: bytes of `space` in use, and by which values."""
    lives = live_intervals(s, p)
    fixed = dict(p.invariant_bytes).get(space, 0)
    items: list = [(f"{t.name} ({t.bytes * t.depth} B ring)", t.bytes * t.depth, None)
                   for t in p.tasks if t.streaming and t.space == space]
    for t in p.tasks:
        if t.name not in lives or t.streaming:
            continue
        begin, end, staged, counts_from = lives[t.name]
        if t.space == space:
            items.append((t.name, t.bytes, live_ring(counts_from, end, s.ii)))
        elif space == "smem" and staged:
            items.append((t.name, t.bytes, live_ring(begin, staged, s.ii)))
    return Profile(s.ii, fixed, items, " B")
