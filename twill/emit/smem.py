"""Shared memory of an emitted kernel: what `Smem` holds and how much, and the output staging.

A mixin of `Program` (it reads the program's channels, scratch tiles and model): the loop-invariant
inputs, the rings of the channels, the scratch tiles of mmas whose register A operand the tensor
core cannot read, and the staging of output tiles stored by TMA. `smem_bytes` counts `Smem`
exactly (the kernel `static_assert`s it); rings are shortened, output tiles fall back to the
threads' own stores, and the inputs keep one copy when the machine's shared memory is short.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from . import anypitch, epilogue, scalar_atomic
from .model import EmitError, dtype_bytes, ident
from .ops import TMA_DTYPE


@dataclass(frozen=True)
class Staging:
    """Shared memory a role writes an output tile into for TMA to store (`cp.async.bulk.tensor`):
    `slots` buffers of one 128-byte column block of the tile's `rows` rows each; the tile has
    `blocks` of them. With a slot per block the tile goes out at once; with two, block by block,
    one being written while the last one is stored."""

    tensor: str
    role: str
    rows: int
    blocks: int
    slots: int

    @property
    def bytes(self) -> int:
        return self.slots * self.rows * 128


def _kib(n: int) -> int:
    """n rounded up to whole KiB (the alignment of every tile in `Smem`)."""
    return -(-n // 1024) * 1024


class SharedMemory:
    """`Program`'s shared-memory plan (see the module docstring)."""

    def _scratch(self, operand: int = 0) -> tuple[str, ...]:
        """mmas whose first operand is a register value of their own role that the tensor core
        cannot read from registers (any on sm_100a; a transposed one on sm_90a): staged in a
        shared-memory tile before the mma. With `operand` 1: mmas whose b is such a value (a
        dequantized weight tile), which the tensor core reads from shared memory on either target."""
        m = self.model
        out = []
        for name, shape in m.mma_shape.items():
            a = m.resolve(m.ops[name].operands[operand])[0]
            v = m.values.get(a)
            if v is None or v.kind != "result" or m.is_load(a) or self.in_tmem(a) or v.role != m.op_role[name]:
                continue
            if operand == 1 or not m.target.a_from_registers or v.type.space != "smem" and not shape.a_kmajor:
                out.append(name)
        return tuple(out)

    def scratch_array(self, name: str, operand: int) -> str:
        """The scratch array (`scratch_X` for a, `scratchb_X` for b) mma `name` reads its staged
        operand from. On sm_90a, mmas of one role that stage the same value share the first one's
        array, and the role writes it once per instance (roles.py): split or grown row parts reading
        one dequantized B tile wrote it, and drained the tensor core, once per part. On a target
        whose mmas are commit-tracked (sm_100a), each mma keeps its own (its `done` barrier)."""
        mmas = self.scratch if operand == 0 else self.scratch_b
        first = name
        if not self.model.target.mma_commit:
            value = self.model.resolve(self.model.ops[name].operands[operand])[0]
            first = next(x for x in mmas if self.model.resolve(self.model.ops[x].operands[operand])[0] == value)
        return f"{'scratch' if operand == 0 else 'scratchb'}_{ident(first)}"

    def scratch_tiles(self) -> dict[str, tuple[str, int]]:
        """Each scratch array (scratch_array) -> (the first mma staging into it, the operand)."""
        out: dict[str, tuple[str, int]] = {}
        for operand, mmas in ((0, self.scratch), (1, self.scratch_b)):
            for name in mmas:
                out.setdefault(self.scratch_array(name, operand), (name, operand))
        return out

    def smem_bytes(self) -> int:
        """Bytes of the kernel's `Smem`: its tiles (each 1024-byte aligned, so padded to 1 KiB),
        the hand-off tiles of the end of the loop, and its mbarriers, rounded up to 1 KiB."""
        m = self.model
        arrays = [self.input_copies * v.type.bytes for v in m.values.values()
                  if v.kind == "input" and v.type.space == "smem"]
        arrays += [c.depth * self._slot_bytes(c) for c in self.channels.values() if c.kind in ("tma", "tile", "stage")]
        arrays += [m.values[m.resolve(m.ops[name].operands[i])[0]].type.bytes for name, i in self.scratch_tiles().values()]
        arrays += [s.bytes * m.tile_copies for s in self.staging.values()]  # each tile copy its own
        handoffs = self.handoffs
        rest = sum(m.values[v].type.bytes for v in handoffs)
        rest += 16 * sum(c.depth for c in self.channels.values()) + 16 * self.input_copies
        # an mbarrier per scratch tile, per hand-off (and its 16-byte alignment), per output that
        # may come from tensor memory; the tensor-memory base address
        rest += 8 * (len(set(self.scratch + self.scratch_b)) + 3 * len(handoffs) + len(m.tensors)) + 8
        rest += scalar_atomic.smem_bytes(m)
        return sum(_kib(n) for n in arrays) + _kib(rest)

    def slot_elements(self, chan) -> int:
        """A ring slot's elements: its value's; a TMA load's tensor tile (a strided view loads a wider row), or
        at any pitch the rows of a wider box (anypitch.py). cuda.py's Smem declares each slot with this."""
        m = self.model
        t = m.tensor.get(ident(chan.value)) if chan.kind == "tma" else None
        if t is None:
            return m.values[chan.value].type.elements
        return anypitch.slot_elements(t) if anypitch.eligible(m, t) else t.tile[0] * t.tile[1]

    def _slot_bytes(self, chan) -> int:
        return self.slot_elements(chan) * dtype_bytes(self.model.values[chan.value].type.dtype)

    def smem_limit(self) -> int:
        """What `Smem` may take: the machine's shared memory less the 1 KiB the kernel may skip to
        align it."""
        return self.model.machine.limits.smem_bytes - 1024

    def _extras_limit(self) -> int:
        """What `Smem` may take with its optional parts (output staging, a second copy of the
        inputs; before them, as `__init__` calls it): no more than keeps the most CTAs per SM that
        the registers and the rest of `Smem` allow (occupancy.py), else `smem_limit`."""
        from .occupancy import register_ctas, smem_share
        base = self.smem_bytes()
        for k in range(register_ctas(self.model), 1, -1):
            if base <= smem_share(self.model, k):
                return smem_share(self.model, k)
        return self.smem_limit()

    def input_bytes(self) -> int:
        m = self.model
        return sum(v.type.bytes for v in m.values.values() if v.kind == "input" and v.type.space == "smem")

    def _input_copies(self) -> int:
        """Two buffers of the loop-invariant shared-memory inputs when they fit, so that a CTA
        computing several tiles loads the next tile's while its last tile still reads its own."""
        if not self.input_bytes():
            return 1
        self.input_copies = 2
        fits = self.smem_bytes() <= self.smem_extras
        self.input_copies = 1
        return 2 if fits else 1

    def final_role(self, t) -> str:
        """The role that writes output tensor t after the loop."""
        m = self.model
        norms = dict(m.normalizers)
        carry = m.carry_of(t.value)
        if self.in_tmem(t.value):
            if carry in norms:
                return m.values[m.carry_source[norms[carry]]].role
            readers = [u.role for u in m.uses.get(t.value, ()) if m.role[u.role].is_warpgroup]
            groups = [r.name for r in m.roles if r.is_warpgroup]
            if not (readers or groups):
                raise EmitError(f"no warpgroup role can read '{t.value}' out of tensor memory")
            return (readers or groups)[0]
        return m.values[t.value].role

    def storing_role(self, t) -> str:
        """The role that writes global tensor t (an output after the loop, or a store op's)."""
        if t.kind == "output":
            return self.final_role(t)
        from .model import ident
        return next(role for op, role in self.model.op_role.items() if ident(op) == t.name)

    def final_values(self, t) -> list[str]:
        """The values output tensor t is made of after the loop: its carry's last value, and the
        last running sum it is divided by (an online-softmax accumulator)."""
        m = self.model
        ep = epilogue.final_values(m, t)  # an output the epilogue writes: the carries its ops read
        if ep is not None:
            return ep
        norms = dict(m.normalizers)
        carry = m.carry_of(t.value)
        return [t.value] + ([m.carry_source[norms[carry]]] if carry in norms else [])

    @cached_property
    def handoffs(self) -> dict[str, tuple[str, list[str]]]:
        """Register values an output needs whose last instance lives on another role than the one
        writing the output: value -> (the role holding it, the roles reading it). The holder stages
        it in shared memory after its loop and arrives on an mbarrier the readers wait on."""
        m, found = self.model, {}
        for t in m.tensors:
            if t.kind != "output":
                continue
            writer = self.final_role(t)
            for value in self.final_values(t):
                holder = m.values[value].role
                if self.in_tmem(value) or holder == writer:
                    continue
                if not m.role[holder].is_warpgroup or not m.role[writer].is_warpgroup:
                    raise EmitError(f"the last '{value}' is on role {holder}, but role {writer} writes the output "
                                    f"it belongs to, and only warpgroup roles hand values over after the loop")
                readers = found.setdefault(value, (holder, []))[1]
                if writer not in readers:
                    readers.append(writer)
        return found

    def _staging(self) -> dict[str, Staging]:
        """Output tiles that go to global memory through shared memory and TMA, rather than by
        each thread's stores: a 2-d tile written by a one-warpgroup role, in the shared memory
        the rings leave. First the whole tile of a store in the loop and two column blocks of an
        output, then an output's whole tile where it fits. TMA writes whole 128-byte lines,
        asynchronously: the role goes on while its tile is stored."""
        m = self.model
        wanted = []
        for t in m.tensors:
            if t.kind not in ("output", "store") or t.rank != 2 or t.dtype not in TMA_DTYPE or t.column_major:
                continue  # (a column-major output: each thread writes its elements transposed, stores.py)
            role = m.role[self.storing_role(t)]
            rows, line = t.tile[0], t.tile[1] * dtype_bytes(t.dtype)
            if role.is_warpgroup and role.warpgroups == 1 and rows <= 256 and line % 128 == 0:
                wanted.append(Staging(t.name, role.name, rows, line // 128, line // 128))
        # A store in the loop runs every iteration: the whole tile; an output once per tile.
        for fewest in (True, False):
            for st in wanted:
                once = m.tensor[st.tensor].kind == "output"
                slots = 2 if fewest and once and st.blocks % 2 == 0 else st.blocks
                before = self.staging
                self.staging = {**before, st.tensor: replace(st, slots=slots)}
                if self.smem_bytes() > self.smem_extras:
                    self.staging = before
        return {st.tensor: self.staging[st.tensor] for st in wanted if st.tensor in self.staging}

    def _fit_smem(self) -> str:
        """Shared memory the model did not count (register values staged for another role or for
        the tensor core) can overflow it: then rings lose slots, the biggest first, down to one;
        a ring freed late by a wgmma skips the depths at which it would deadlock and keeps at least
        Channel.least (Program._late_release)."""
        m = self.model
        cut = []
        while self.smem_bytes() > self.smem_limit():
            deep = [c for c in self.channels.values() if c.kind in ("tma", "tile", "stage") and c.depth > c.least]
            if not deep:
                raise EmitError(f"the kernel needs {self.smem_bytes()} bytes of shared memory even with every "
                                f"ring as shallow as it may be; machine {m.machine.name} has {m.machine.limits.smem_bytes}")
            c = max(deep, key=lambda c: (c.depth * m.values[c.value].type.bytes, c.value))
            depth = c.depth - 1
            while depth > c.least and self.ring_deadlocks(c.value, c.consumers, depth):
                depth -= 1
            self.channels[c.value] = replace(c, depth=depth)
            cut.append(c.value)
        if not cut:
            return ""
        return ("rings shortened to fit shared memory: " +
                ", ".join(f"{v} to {self.channels[v].depth}" for v in dict.fromkeys(cut)))
