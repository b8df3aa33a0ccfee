"""Each role's straight-line program, as the schedule lays it out, plus its synchronisation.

The modulo schedule runs op `v` of iteration `i` at `start(v) + i*I`. Cut time into windows of `I`
cycles: window `J` holds, for every op, the instance `J - stage(v)`. With `S` stages there are
S-1 prologue windows (J = 0 .. S-2, the ops with stage <= J), the steady state (J = S-1 .. n-1,
every op) and S-1 epilogue windows (J = n .. n+S-2, the ops with stage > J - n). Inside a window
ops run in the order of their start residue. A role runs the ops it owns, in that order; the
kernel requires n >= S, so every instance a window names exists and no guard is needed.

Register values need as many buffers as instances are alive at once (modulo variable expansion):
the steady loop is unrolled by the least common multiple U of those counts so every buffer index
is a compile-time constant (registers indexed at run time would go to local memory).

A value that crosses roles travels through a `Channel`: a ring of `depth` slots with a full and an
empty mbarrier per slot (phase = (instance / depth) & 1). Loads fill their slot by TMA; register
values are staged through shared memory; tensor-memory values are signalled by `tcgen05.commit`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .model import EmitError, KernelModel
from .smem import SharedMemory, Staging
from .tmem import TensorMemory


@dataclass(frozen=True)
class Inst:
    """An iteration number: `base + off`, base '' (a constant), 'j' (the steady counter) or 'n'."""

    base: str
    off: int

    def shift(self, d: int) -> "Inst":
        return Inst(self.base, self.off - d)

    def __str__(self) -> str:
        if not self.base:
            return str(self.off)
        if self.off == 0:
            return self.base
        return f"{self.base} {'+' if self.off > 0 else '-'} {abs(self.off)}"


@dataclass(frozen=True)
class Window:
    kind: str  # "prologue" | "steady" | "epilogue"
    index: int  # p (prologue), e (epilogue), the unrolled copy u (steady)
    ops: tuple[str, ...]  # this role's ops, in schedule order
    base: str  # '' | 'j' | 'n'
    j0: int  # J = base + j0
    phase: int  # J - (S-1) modulo U (prologue: J itself, negative offsets allowed)

    def inst(self, stage: int, distance: int = 0) -> Inst:
        return Inst(self.base, self.j0 - stage - distance)

    @property
    def key(self) -> tuple[str, int]:
        """Which static window this is (copies of the steady window share it)."""
        return (self.kind, 0 if self.kind == "steady" else self.index)


@dataclass(frozen=True)
class Channel:
    """A value handed from one role to others (or from an async op to its own role on sm_100a)."""

    value: str
    producer: str  # role
    consumers: tuple[str, ...]  # roles
    depth: int
    kind: str  # "tma" (a load) | "stage" (registers via smem) | "tile" (registers -> smem operand tile)
    #            | "tmem" (tensor memory, signalled by tcgen05.commit or by the writing warps)
    empty: bool = True  # False when the dependence chain itself orders reuse (in-place accumulators)
    least: int = 1  # the fewest slots that cannot deadlock (`Program._late_release`): a floor for _fit_smem

    @property
    def ident(self) -> str:
        from .model import ident
        return ident(self.value)


@dataclass
class RoleProgram:
    role: str
    windows: dict[tuple[str, int], tuple[str, ...]]  # static window -> ops
    waits: dict[tuple[tuple[str, int], int, str], int] = field(default_factory=dict)  # (win, pos, value) -> k
    hazards: dict[tuple[tuple[str, int], int], int] = field(default_factory=dict)  # (win, pos) -> k before writing
    start_wait: set = field(default_factory=set)  # windows that first retire every earlier wgmma
    turn_close: set = field(default_factory=set)  # windows that first end a turn begun in the last one
    releases_at_start: dict[tuple[str, int], list] = field(default_factory=dict)  # win -> [(chan, op, d, wait)]
    releases_after: dict[tuple[tuple[str, int], int], list] = field(default_factory=dict)  # (win, pos) -> [...]
    turns: dict[tuple[tuple[str, int], int], tuple[bool, bool]] = field(default_factory=dict)  # begin, end


class Program(SharedMemory, TensorMemory):
    """The windows, buffers, channels and synchronisation of every role. Pure data."""

    def __init__(self, model: KernelModel):
        self.model = model
        self.S = model.stages
        self.order = _issue_early(model, _window_order(model))
        self.copies = self._copies()
        self.alias = self._aliases()
        masked = self._masked_in_place()
        self.alias.update(masked)
        self.row_sums = self._row_sums()
        self.shared_regs = {**self._shared_registers(), **masked}
        self.alias.update(self.shared_regs)
        for x in self.alias:
            self.copies.pop(x, None)
        self.U = math.lcm(*self.copies.values()) if self.copies else 1
        if self.U > 8:
            raise EmitError(f"register values need {self.U} rotating buffers (unroll factor): too many")
        self.channels = self._channels()
        self._no_reads_before_the_first()
        self.scratch = self._scratch()
        self.scratch_b = self._scratch(1)
        self.input_copies = 1
        self.staging: dict[str, Staging] = {}
        self.smem_note = self._fit_smem()
        self.staging = self._staging()
        self.input_copies = self._input_copies()
        self.tmem_after: dict[str, tuple[str, int]] = {}  # value -> (value whose columns it reuses, k)
        self.tmem_shared: set[str] = set()  # values whose reader frees their columns right after reading
        self.tmem = self._tmem_plan()
        self.programs = {r.name: self._role_program(r.name) for r in model.roles}
        self.pingpong = self._pingpong()
        for prog in self.programs.values():
            self._waits_and_releases(prog)

    # -- windows -----------------------------------------------------------------------------
    def static_windows(self, role: str) -> list[tuple[str, int]]:
        S = self.S
        return ([("prologue", p) for p in range(S - 1)] + [("steady", 0)] +
                [("epilogue", e) for e in range(S - 1)])

    def window_ops(self, role: str | None, key: tuple[str, int]) -> tuple[str, ...]:
        kind, idx = key
        m = self.model
        ops = [o for o in self.order if role is None or m.op_role[o] == role]
        if kind == "prologue":
            return tuple(o for o in ops if m.stage(o) <= idx)
        if kind == "epilogue":
            return tuple(o for o in ops if m.stage(o) >= idx + 1)
        return tuple(ops)

    def window(self, role: str, key: tuple[str, int], u: int = 0, r: int = 0) -> Window:
        """A concrete window: steady copy u, or epilogue e after r leftover steady windows."""
        kind, idx = key
        ops = self.window_ops(role, key)
        S, U = self.S, self.U
        if kind == "prologue":
            return Window(kind, idx, ops, "", idx, idx)
        if kind == "steady":
            return Window(kind, u, ops, "j", u, (S - 1 + u) % U if U else 0)
        return Window(kind, idx, ops, "n", idx, (S - 1 + r + idx) % U)

    def _row_sums(self) -> dict[str, str]:
        """exp2 -> rowsum: on sm_90a, an exp2 whose 16-bit register result a rowsum of its role
        reads (the same iteration's) sums the rows in f32 as it computes them (op_exp2_sum), and
        the rowsum uses those sums: no unpacking of the tile, no shuffles, and the unrounded
        exponentials summed, as FA3 does."""
        m = self.model
        if not m.target.register_fragments:
            return {}
        out = {}
        for op in m.graph.ops:
            t = op.type
            if op.opcode != "exp2" or len(op.operands) != 2 or t is None or len(t.shape) != 2:
                continue
            if t.dtype not in ("f16", "bf16") or t.space != "reg":
                continue
            for u in m.uses.get(op.name, ()):
                if (m.ops[u.op].opcode == "rowsum" and u.index == 0 and u.distance == 0 and
                        u.role == m.op_role[op.name]):
                    out[op.name] = u.op
                    break
        return out

    def _masked_in_place(self) -> dict[str, str]:
        """y -> x for `y = causal_mask x` where x's one use is y, on x's role, of the same iteration
        and type (sm_90a): y is masked in x's registers, as the partial tile's mask is, instead of
        64 more per thread for FA3's S. x's buffers then cover y's readers too (its copies grow to
        the instance count from x's write to y's last read)."""
        m, out = self.model, {}
        pos = {o: i for i, o in enumerate(self.order)}
        for op in m.graph.ops:
            if op.opcode != "causal_mask" or not m.target.register_fragments or len(op.operands) != 1:
                continue
            x, d = m.resolve(op.operands[0])
            v = m.values.get(x)
            if (d or v is None or v.type != op.type or len(m.uses.get(x, ())) != 1 or x not in self.copies
                    or op.name not in self.copies or v.role != m.op_role[op.name] or m.carry_of(x) is not None
                    or m.carry_of(op.name) is not None or x in self.alias or x in self.alias.values()):
                continue
            need = self.copies[x] - 1
            for u in m.uses.get(op.name, ()):
                if u.role == v.role:
                    need = max(need, m.stage(u.op) + u.distance - m.stage(x) - (0 if pos[x] < pos[u.op] else 1))
            self.copies[x] = need + 1
            out[op.name] = x
        return out

    def _shared_registers(self) -> dict[str, str]:
        """y -> x: register value y takes x's registers when the role's program never holds both
        (sm_90a). Both keep one buffer, have the same fragment type and are no carry; the span of
        each instance, from the op that writes it (a wgmma's issue) to its last reader on the
        role, never meets the other's in program order, over every loop count the windows allow;
        neither is read by a wgmma from registers (a read that lasts until the wgmma completes).
        In FA3's backward S and dQ take turns this way: 64 registers per thread fewer."""
        m = self.model
        if not m.target.register_fragments:
            return {}
        out: dict[str, str] = {}
        taken = set(self.alias) | set(self.alias.values()) | set(self.row_sums)
        for role in m.roles:
            values = [v for v in self.copies if m.values[v].role == role.name and self.copies[v] == 1 and
                      v not in taken and m.carry_of(v) is None and
                      not any(self.reads_async(u.op, u.index) for u in m.uses.get(v, ()))]
            spans = self._spans(role.name, values)
            for i, y in enumerate(values):
                for x in values[:i]:
                    if x in out or m.values[x].type != m.values[y].type:
                        continue  # x lives in another value's registers itself, or is another type
                    group = [x] + [z for z, t in out.items() if t == x]
                    if all(not (a0 <= b1 and b0 <= a1) for z in group for k in spans[y]
                           for (a0, a1) in spans[y][k] for (b0, b1) in spans[z][k]):
                        out[y] = x
                        break
        return out

    def _spans(self, role: str, values) -> dict[str, dict[int, list[tuple[int, int]]]]:
        """value -> loop count (k steady windows) -> [first, last] positions in the role's program
        of each instance of the value, from its write to its last read on the role."""
        m = self.model
        out: dict[str, dict[int, list[tuple[int, int]]]] = {v: {} for v in values}
        unroll = math.lcm(*self.copies.values()) if self.copies else 1
        for k in range(1, self.S + 2 * unroll + 2):
            where = {(op, inst): i for i, (_, _, op, inst) in enumerate(self.sequence(role, k))}
            for v in values:
                spans = []
                for (op, inst), i in where.items():
                    if op != v:
                        continue
                    reads = [where[(u.op, inst + u.distance)] for u in m.uses.get(v, ())
                             if u.role == role and (u.op, inst + u.distance) in where]
                    spans.append((i, max(reads, default=i)))
                out[v][k] = spans
        return out

    def storage(self, value: str) -> str:
        """The register array holding `value` (itself, or the accumulator it is built in)."""
        return self.alias.get(value, value)

    def _aliases(self) -> dict[str, str]:
        """x -> y when register value x only feeds, as its accumulator, the wgmma y of the same
        iteration on the same role, and y keeps one buffer: x is then computed in y's registers and
        the wgmma accumulates in place (`acc_r = rescale acc, alpha; acc_n = mma p, v, acc_r`
        rescales the accumulator where it lies). Nothing may read y's previous instance after x is
        computed over it."""
        m = self.model
        out = {}
        if not m.target.async_register_mma:
            return out
        for name, v in m.values.items():
            u = self._feeds_accumulator(name)
            if u is None or name not in self.copies or self.copies.get(u.op, 0) != 1 or self.copies[name] != 1:
                continue
            if self._reads_after(v.role, name, u.op):
                continue
            out[name] = u.op
        return out

    def _feeds_accumulator(self, name: str):
        """The use of register value `name` when its one use is as the accumulator of a wgmma of
        the same iteration on its role (the shape `_aliases` computes in place), else None."""
        m = self.model
        v, uses = m.values[name], m.uses.get(name, ())
        if not m.target.async_register_mma or v.kind != "result" or len(uses) != 1:
            return None
        u = uses[0]
        if m.ops[u.op].opcode != "mma" or u.index != 2 or u.distance or u.role != v.role:
            return None
        return u

    def _reads_after(self, role: str, x: str, y: str) -> bool:
        """Does any op read instance i-1 of y after x of iteration i is computed?"""
        m = self.model
        for k in range(1, self.S + 3):
            seq = self.sequence(role, k)
            for i, (_, _, op, inst) in enumerate(seq):
                if op != x:
                    continue
                for _, _, other, oinst in seq[i + 1:]:
                    for operand in m.ops[other].operands:
                        value, d = m.resolve(operand)
                        if value == y and oinst - d == inst - 1:
                            return True
        return False

    def buffer(self, value: str, w: Window, stage: int, distance: int) -> int:
        """Which of the value's register buffers holds the instance `w` names."""
        c = self.copies.get(self.storage(value), 1)
        return (w.phase - stage - distance) % c

    # -- register buffers (modulo variable expansion) ----------------------------------------------
    def _copies(self) -> dict[str, int]:
        """Buffers per register value; the extra ones that keep a wgmma's A operand alive until
        it completes are dropped (waits take their place) on a role whose budget they would burst."""
        full = self._copies_for(extend=True)
        plain = self._copies_for(extend=False)
        m = self.model
        for role in m.roles:
            # (a value computed into its wgmma's accumulator registers takes none of its own)
            mine = [v for v in full if m.values[v].role == role.name and self._feeds_accumulator(v) is None]
            if self._registers(role, full, mine) > role.registers:
                for v in mine:
                    full[v] = plain[v]
        return full

    def spare_registers(self, role) -> float:
        """Registers per thread that a role's budget leaves over its values' buffers and the
        machine's register_reserve, as the model counts them."""
        mine = [v for v in self.copies if self.model.values[v].role == role.name]
        return role.registers - self._registers(role, self.copies, mine)

    def _registers(self, role, copies: dict[str, int], values) -> float:
        m = self.model
        words = sum(copies[v] * m.values[v].type.bytes for v in values) / 4
        return words / max(role.threads, 1) + m.machine.limits.register_reserve

    def _copies_for(self, extend: bool) -> dict[str, int]:
        m = self.model
        pos = {o: i for i, o in enumerate(self.order)}
        out = {}
        for name, v in m.values.items():
            if v.kind != "result" or v.type.space == "smem" or m.is_load(name) or self.in_tmem(name):
                continue
            need = 0
            for use in m.uses.get(name, ()):
                if use.role != v.role:
                    continue
                k = m.stage(use.op) + use.distance - m.stage(name) - (0 if pos[name] < pos[use.op] else 1)
                if k < 0:
                    raise EmitError(f"op '{use.op}' reads '{name}' before the schedule produces it")
                if extend and self.reads_async(use.op, use.index):
                    # A wgmma reads its A operand from registers until it completes: keep the
                    # instance until the reader's latency has passed, as the schedule assumes.
                    sched = m.sched
                    end = sched[use.op].start + use.distance * m.schedule.ii + sched[use.op].cycles
                    k = max(k, -(-(end - sched[name].start) // m.schedule.ii) - 1)
                need = max(need, k)
            if m.carry_of(name) is not None:
                need = max(need, 0)
            out[name] = need + 1
        return out

    # -- channels between roles ----------------------------------------------------------------
    def _channels(self) -> dict[str, Channel]:
        m = self.model
        depth_of = {b.value: b.depth for b in m.schedule.buffers}
        out: dict[str, Channel] = {}
        self.channels = out  # (the ones made so far: _waits_past reads them)
        for name, v in m.values.items():
            if v.kind != "result":
                continue
            uses = m.uses.get(name, ())
            readers = sorted({u.role for u in uses if u.role != v.role or m.is_load(name)})
            if m.is_load(name):
                readers = sorted({u.role for u in uses})
                if not readers:
                    raise EmitError(f"load '{name}' is never read: remove it from the graph (emit-cuda would "
                                    f"have no buffer to load it into)")
                least = self._late_release(name, readers)
                depth = self._late_release(name, readers, max(depth_of.get(name, m.machine.streaming_depth),
                                                              self._span(name, uses), least))
                out[name] = Channel(name, v.role, tuple(readers), depth, "tma", least=least)
                continue
            if m.target.tensor_memory and m.ops[name].opcode == "mma":
                # tcgen05.mma writes tensor memory; readers (its own role too) wait on a commit.
                # (its own later mmas are ordered by the hardware: they need no barrier).
                readers = sorted({u.role for u in uses if not (u.role == v.role and m.ops[u.op].opcode == "mma")})
                if not readers:
                    continue
                cross = [u for u in uses if u.role != v.role]
                chain = bool(cross) and all(self.writes_in_place(u.op, u.index) for u in cross)
                out[name] = Channel(name, v.role, tuple(readers), 1 if chain else self._span(name, uses), "tmem",
                                    empty=bool(cross) and not chain)
                continue
            cross = [u for u in uses if u.role != v.role]
            if not cross:
                continue
            to_mma = any(m.ops[u.op].opcode == "mma" for u in cross)
            kind = "tmem" if self.in_tmem(name) else "tile" if to_mma else "stage"
            chain = kind == "tmem" and all(self.writes_in_place(u.op, u.index) for u in cross)
            readers = sorted({u.role for u in cross})
            least = 1 if chain else self._late_release(name, readers)
            depth = 1 if chain else self._late_release(name, readers, max(self._span(name, cross), least))
            out[name] = Channel(name, v.role, tuple(readers), depth, kind, empty=not chain, least=least)
        return out

    def _no_reads_before_the_first(self) -> None:
        """A load (or a tile staged for another role's mma) read as NAME@D: its first D iterations
        read a tile that no iteration made. A carry has an initial value; these have none, and
        the emitted code would wait for a slot no one fills."""
        m = self.model
        for name, chan in self.channels.items():
            if chan.kind not in ("tma", "tile") or m.carry_of(name) is not None:
                continue
            for u in m.uses.get(name, ()):
                if u.distance > 0:
                    raise EmitError(f"op '{u.op}' reads '{name}@{u.distance}', {'a load' if chan.kind == 'tma' else 'a tile'} "
                                    f"of an earlier iteration: the first {u.distance} iteration(s) have none, and "
                                    f"emit-cuda does not invent one (read it in its own iteration, or make it a carry)")

    def _span(self, name: str, uses) -> int:
        """Slots a ring needs so the producer may run as far ahead as the schedule does."""
        m = self.model
        sched = m.sched
        start = sched[name].start
        last = max((sched[u.op].start + u.distance * m.schedule.ii for u in uses), default=start)
        return max(1, math.floor((last - start) / m.schedule.ii) + 1)

    def _late_release(self, name: str, readers, floor: int = 1) -> int:
        """The fewest slots, `floor` or more, of `name`'s ring that cannot deadlock where a wgmma
        frees them late.

        On sm_90a a wgmma reads its shared-memory operand until it completes, so a role whose last
        read of the value is a wgmma frees instance i only in the window after that read
        (`_waits_and_releases`): in window stage(last) + distance + 1 + i, at its start or after
        its first wgmma. The producer takes that slot again for instance i + depth, in window
        stage(name) + i + depth. It may do so before the release only if the reader, up to the
        release, waits for nothing the producer writes from that point on (`_waits_past`); else
        the two wait for each other. _span counts the wgmma's issue, not its release: the
        imported causal attention solved for the H200 gave P one slot and hung, the producer
        waiting to hand over P[i+1] and the reader, which frees P[i] a window late, waiting for
        the row correction the producer writes after P[i+1]."""
        depth = floor
        while self.ring_deadlocks(name, readers, depth):
            depth += 1
        return depth

    def ring_deadlocks(self, name: str, readers, depth: int) -> bool:
        """Would `depth` slots let a reader's late release (a wgmma's, sm_90a) and the producer
        wait for each other (`_late_release`)?"""
        m = self.model
        if m.target.mma_commit:  # tcgen05.commit frees a slot as its MMA completes
            return False
        for role in readers:
            last = self.last_reader(role, name)
            if m.ops[last.op].opcode == "mma" and \
                    self._waits_past(name, role, m.stage(last.op) + last.distance + 1, depth):
                return True
        return False

    def _waits_past(self, name: str, reader: str, w_free: int, depth: int) -> bool:
        """With `depth` slots, does `reader`, before it frees instance 0 of `name` in window
        w_free, wait for a value the producer writes at or after taking the slot of instance
        `depth` (window stage(name) + depth, at name's place in the window order)? The release
        comes at the window's start when the reader's ops up to its first wgmma wait for the
        slot's next instance (or, with one slot, read the value at all; `_waits_and_releases`),
        else right after that wgmma. The reader waits for the producer where it reads a value
        the producer writes, and where it hands the producer a value of its own: that waits for
        the slot the producer frees after its last read of the value one ring depth earlier."""
        m = self.model
        producer = m.values[name].role
        pos = {o: i for i, o in enumerate(self.order)}
        mine = [o for o in self.order if m.op_role[o] == reader]
        first = next((i for i, o in enumerate(mine) if m.ops[o].opcode == "mma"), None)

        def reads(op):
            return [(x, d) for x, d in (m.resolve(o) for o in m.ops[op].operands) if x in m.values]

        head = [] if first is None else mine[:first + 1]
        at_start = first is None or any(
            x == name and (depth == 1 or w_free - m.stage(op) - d >= depth or i < first)
            for i, op in enumerate(head) for x, d in reads(op))
        taken = (m.stage(name) + depth, pos[name])
        before = [(w_free - 1, op) for op in mine] + ([] if at_start else [(w_free, op) for op in head])
        for w, op in before:
            for x, d in reads(op):
                v = m.values[x]
                if v.kind == "result" and v.role == producer and \
                        (w - m.stage(op) - d + m.stage(x), pos[x]) >= taken:
                    return True
            back = self.channels.get(op)
            if back is not None and back.empty and producer in back.consumers and back.kind != "tma":
                last = self.last_reader(producer, op)
                late = int(m.ops[last.op].opcode == "mma")  # freed in the window after, by its first wgmma
                theirs = [pos[o] for o in self.order if m.op_role[o] == producer and m.ops[o].opcode == "mma"]
                freed = (w - m.stage(op) - back.depth + m.stage(last.op) + last.distance + late,
                         theirs[0] if late else pos[last.op])
                if freed >= taken:
                    return True
        return False

    # -- per-role programs ---------------------------------------------------------------------
    def _role_program(self, role: str) -> RoleProgram:
        return RoleProgram(role, {k: self.window_ops(role, k) for k in self.static_windows(role)})

    def sequence(self, role: str, k: int) -> list[tuple[tuple[str, int], int, str, int]]:
        """The role's ops for n = S-1+k: (window key, position, op, concrete instance)."""
        S = self.S
        out = []
        keys = ([("prologue", p) for p in range(S - 1)] + [("steady", 0)] * k +
                [("epilogue", e) for e in range(S - 1)])
        for w, key in enumerate(keys):
            for pos, op in enumerate(self.window_ops(role, key)):
                out.append((key, pos, op, w - self.model.stage(op)))
        return out

    def _async_results(self, role: str) -> set[str]:
        m = self.model
        if not m.target.async_register_mma:
            return set()
        return {o for o in m.role[role].ops if m.ops[o].opcode == "mma"}

    def _waits_and_releases(self, prog: RoleProgram) -> None:
        """wgmma.wait_group counts before reads of async results, and where ring slots are freed.

        The count at a read is the fewest groups committed after the producer's, over every
        possible history (n from S to S+U+S); a slot read by an async op is released in the next
        window, right after that window's first commit and a wait_group 1 (which covers every
        older group whatever came before), or at its start with a wait_group 0.
        """
        m, role = self.model, prog.role
        asyncs = self._async_results(role)
        for k in range(1, self.S + self.U + 2):
            seq = self.sequence(role, k)
            window = self._window_index(seq)
            where = {(op, inst): i for i, (_, _, op, inst) in enumerate(seq)}
            for i, (key, pos, op, inst) in enumerate(seq):
                for index, operand in enumerate(m.ops[op].operands):
                    value, d = m.resolve(operand)
                    if value not in asyncs or inst - d < 0 or self.in_place(op, index, value, d):
                        continue
                    src = where.get((value, inst - d))
                    if src is None or src > i:
                        continue
                    if window[src] < window[i]:
                        # ptxas cannot follow wait_group counts across the loop's back edge and
                        # would serialize every wgmma: retire earlier windows' groups up front.
                        prog.start_wait.add(key)
                        continue
                    commits = sum(1 for _, _, o, _ in seq[src + 1:i] if o in asyncs)
                    site = (key, pos, value)
                    prog.waits[site] = min(prog.waits.get(site, commits), commits, 7)
                # Write after an async access: a wgmma still reading (A from registers) or writing
                # the buffer this op is about to overwrite must be retired first.
                hazard = self._last_async_access(seq, i, asyncs)
                if hazard is not None:
                    if window[hazard] < window[i]:
                        prog.start_wait.add(key)
                        continue
                    commits = sum(1 for _, _, o, _ in seq[hazard + 1:i] if o in asyncs)
                    prog.hazards[(key, pos)] = min(prog.hazards.get((key, pos), commits), commits, 7)
        # Releases of ring slots read by this role.
        for chan in self.channels.values():
            if role not in chan.consumers or not chan.empty or chan.value in self.tmem_shared:
                continue  # (a shared tensor-memory value is freed where it is read: RoleBody._tmem_operand)
            last = self.last_reader(role, chan.value)
            is_async = m.ops[last.op].opcode == "mma"
            for key, ops in prog.windows.items():
                if last.op not in ops:
                    continue
                pos = ops.index(last.op)
                if not is_async or m.target.mma_commit:  # sm_100a: tcgen05.commit frees the slot once the MMA is done
                    _add(prog.releases_after, (key, pos), (chan, last, 0, "commit" if is_async else None))
                    continue
                for nxt in self._next_windows(key):
                    nops = prog.windows[nxt]
                    if nxt in prog.start_wait:
                        _add(prog.releases_at_start, nxt, (chan, last, 1, 0))
                        continue
                    first_commit = next((i for i, o in enumerate(nops) if o in asyncs), None)
                    # Freed after the next window's first wgmma is issued, unless that window takes
                    # its next slot first: with one slot, the next slot is this one (a wait for a
                    # slot only this release frees), so it is freed at the window's start instead.
                    # (or its first wgmma waits for the slot's next instance: deeper rings too)
                    upto = first_commit if first_commit is None or chan.depth > 1 else first_commit + 1
                    acquires_before = first_commit is None or any(
                        any(m.resolve(o)[0] == chan.value for o in m.ops[op].operands) for op in nops[:upto]) or \
                        self._takes_next(nops[first_commit], chan, last)
                    if not acquires_before:
                        _add(prog.releases_after, (nxt, first_commit), (chan, last, 1, 1))
                    else:
                        _add(prog.releases_at_start, nxt, (chan, last, 1, 0))

    def _takes_next(self, op: str, chan: Channel, last) -> bool:
        """Does `op`, in the window after `last`'s read (which frees instance 0 there, window
        stage(last) + distance + 1), wait for instance `depth` or later, the slot's next occupant?"""
        m = self.model
        w = m.stage(last.op) + last.distance + 1
        return any(x == chan.value and w - m.stage(op) - d >= chan.depth
                   for x, d in (m.resolve(o) for o in m.ops[op].operands))

    def last_reader(self, role: str, value: str):
        """The use of `value` on `role` that comes last in the program: the one that frees its slot."""
        m = self.model
        readers = [u for u in m.uses[value] if u.role == role]
        return max(readers, key=lambda u: (m.stage(u.op) + u.distance, self.order.index(u.op)))

    def held_at_end(self, role: str, chan: Channel) -> int:
        """How many of `chan`'s last instances `role` still holds when its loop ends: the last one
        a wgmma read (freed in the window after its read, and none follows the last occurrence of
        an op of the last stage), and the last `distance` ones, which a reader of an earlier
        iteration's value never reads. A CTA that goes on to another tile frees them first."""
        m = self.model
        last = self.last_reader(role, chan.value)
        deferred = not m.target.mma_commit and m.ops[last.op].opcode == "mma" and m.stage(last.op) == self.S - 1
        return last.distance + int(deferred)

    def released(self, role: str, chan: Channel, n: int) -> list[int]:
        """The instances of `chan` that `role` frees over a loop of n iterations, in order, with
        the ones held at the end: what the emitted code does, for checking that every instance
        0..n-1 is freed exactly once (else a CTA's next tile would wait forever on a full slot)."""
        m, prog = self.model, self.programs[role]
        windows = self._loop_windows(n)
        out = []
        for key, J in windows:
            items = list(prog.releases_at_start.get(key, []))
            for pos in range(len(prog.windows.get(key, ()))):
                items += prog.releases_after.get((key, pos), [])
            for item in items:
                if item[0].value == chan.value:
                    inst = self._freed(item, J)
                    if inst >= 0 or key[0] == "prologue":  # the emitted code guards steady-state ones
                        out.append(inst)
            if chan.value in self.tmem_shared:  # freed by its one reader right after reading it
                use = m.uses[chan.value][0]
                if use.role == role and use.op in prog.windows.get(key, ()):
                    inst = J - m.stage(use.op) - use.distance
                    if 0 <= inst < n:
                        out.append(inst)
        return out + list(range(n - self.held_at_end(role, chan), n))

    def _freed(self, item, J: int) -> int:
        """The instance a release item (channel, last reader, shift, wait) frees in window J."""
        _, last, shift, _ = item
        return J - shift - self.model.stage(last.op) - last.distance

    def _loop_windows(self, n: int) -> list[tuple[tuple[str, int], int]]:
        """(window key, J) of a loop of n iterations, in program order."""
        S = self.S
        return ([(("prologue", k), k) for k in range(S - 1)] + [(("steady", 0), j) for j in range(S - 1, n)] +
                [(("epilogue", e), n + e) for e in range(S - 1)])

    def waits_for_its_own_release(self, role: str, chan: Channel, n: int) -> list[int]:
        """The instances i of `chan` that `role` waits for (full) before it has freed i - depth, the
        slot's previous occupant: the producer cannot refill that slot until every reader frees it,
        so such a wait never ends. Empty for a sound program; walks the windows as `released`."""
        m, prog = self.model, self.programs[role]
        windows = self._loop_windows(n)
        freed: set[int] = set()
        stuck = []

        def free(items, J):
            freed.update(self._freed(item, J) for item in items if item[0].value == chan.value)

        for key, J in windows:
            free(prog.releases_at_start.get(key, []), J)
            for pos, op in enumerate(prog.windows.get(key, ())):
                for operand in m.ops[op].operands:
                    value, d = m.resolve(operand)
                    i = J - m.stage(op) - d
                    if value == chan.value and chan.depth <= i < n and i - chan.depth not in freed:
                        stuck.append(i)
                    if value == chan.value and value in self.tmem_shared:  # freed as soon as it is read
                        freed.add(i)
                free(prog.releases_after.get((key, pos), []), J)
        return stuck

    @staticmethod
    def _window_index(seq) -> list[int]:
        out, w, prev = [], -1, None
        for key, pos, _, _ in seq:
            if prev is None or pos <= prev[1] or key != prev[0]:
                w += 1
            out.append(w)
            prev = (key, pos)
        return out

    def _last_async_access(self, seq, i: int, asyncs: set[str]) -> int | None:
        """The latest earlier async op (in `seq`) that reads or writes the buffer op i writes."""
        m = self.model
        _, _, op, inst = seq[i]
        op = self.storage(op)
        if op not in self.copies or m.is_load(op):
            return None
        c = self.copies[op]
        for h in range(i - 1, -1, -1):
            _, _, other, oinst = seq[h]
            if other not in asyncs:
                continue
            if other == op and (oinst - inst) % c == 0:
                return None if self.in_place(op, 2, op, 1) else h
            for index, operand in enumerate(m.ops[other].operands):
                value, d = m.resolve(operand)
                if value == op and (oinst - d - inst) % c == 0 and self.reads_async(other, index):
                    return h
        return None

    def reads_async(self, op: str, index: int) -> bool:
        """Operand `index` of `op` is read by the tensor core after issue (wgmma's A in registers);
        an accumulator operand that is not updated in place is copied first, synchronously."""
        m = self.model
        return m.target.async_register_mma and m.ops[op].opcode == "mma" and index == 0

    def in_place(self, op: str, index: int, value: str, distance: int) -> bool:
        """An mma accumulating into the very registers of its accumulator operand: wgmmas on one
        accumulator chain in hardware, so it needs no wait for the previous one."""
        m = self.model
        return (m.ops[op].opcode == "mma" and index == 2 and self.copies.get(value, 1) == 1 and
                self.copies.get(op, 1) == 1 and value == op)

    def _next_windows(self, key: tuple[str, int]) -> list[tuple[str, int]]:
        kind, idx = key
        S = self.S
        if kind == "prologue":
            return [("prologue", idx + 1) if idx + 1 < S - 1 else ("steady", 0)]
        if kind == "steady":
            return [("steady", 0)] + ([("epilogue", 0)] if S > 1 else [])
        return [("epilogue", idx + 1)] if idx + 1 < S - 1 else []

    # -- ping-pong between consumer warpgroups ---------------------------------------------------
    def _pingpong(self) -> tuple[str, ...]:
        """Roles that take turns on the tensor core, in turn order (empty: no ping-pong).

        A turn is a maximal run of one role's mmas in program order, across windows. Emitted only
        when two or more warpgroup roles issue wgmma, exchange no data, and their turns alternate
        cyclically with equal counts in every program (n from S to S+2), so the named-barrier
        protocol cannot deadlock. A turn still open at the end of a window that the next window
        may not continue (the steady state before the epilogue) is closed at that window's start.
        """
        m = self.model
        if not m.target.pingpong:
            return ()
        tensor = {o for o in self.order if m.ops[o].opcode == "mma"}
        roles: list[str] = []
        for key in [("prologue", p) for p in range(self.S - 1)] + [("steady", 0)]:
            for o in self.window_ops(None, key):
                if o in tensor and m.op_role[o] not in roles:
                    roles.append(m.op_role[o])
        if len(roles) < 2 or any(not m.role[r].is_warpgroup for r in roles):
            return ()
        for chan in self.channels.values():
            if chan.producer in roles and any(c in roles for c in chan.consumers):
                return ()
        programs = []  # per program (n from S to S+2): its window keys and its mmas in order
        for k in range(1, self.S + 3):
            keys = ([("prologue", p) for p in range(self.S - 1)] + [("steady", 0)] * k +
                    [("epilogue", e) for e in range(self.S - 1)])
            seq = [(w, key, o) for w, key in enumerate(keys) for o in self.window_ops(None, key) if o in tensor]
            runs = [m.op_role[o] for i, (_, _, o) in enumerate(seq)
                    if i == 0 or m.op_role[seq[i - 1][2]] != m.op_role[o]]
            if not runs or len(runs) % len(roles) or any(r != roles[i % len(roles)] for i, r in enumerate(runs)):
                return ()
            programs.append((keys, seq))
        def goes_on(seq, i: int) -> str:
            """How the run of seq[i] goes on after it: the next mma is the same role's
            ("continues"), or another role's, in this window ("ends") or a later one ("crosses")."""
            w, _, o = seq[i]
            nxt = seq[i + 1] if i + 1 < len(seq) else None
            if nxt is not None and m.op_role[nxt[2]] == m.op_role[o]:
                return "continues"
            return "crosses" if nxt is not None and nxt[0] != w else "ends"

        begins: dict = {}
        ends: dict = {}  # over the programs
        for keys, seq in programs:
            for i, (w, key, o) in enumerate(seq):
                begins.setdefault((key, o), set()).add(i == 0 or m.op_role[seq[i - 1][2]] != m.op_role[o])
                ends.setdefault((key, o), set()).add(goes_on(seq, i))
        if any(len(v) > 1 for v in begins.values()):
            return ()
        # A run that ends hands the tensor core over right after its last mma, also where the next
        # run starts in a later window: handing over at the next window's start kept the other
        # warpgroup waiting through all of this window's softmax (FA3's intra-warpgroup overlap at
        # D = 64 ran the two softmaxes one after the other). Only where another program continues
        # the run across that boundary (the steady state before the epilogue) is the turn closed at
        # the next window's start instead, in the programs where it ends there.
        if any("continues" in v and "ends" in v for v in ends.values()):
            return ()
        deferred = {ko for ko, v in ends.items() if "continues" in v}
        closes: dict = {}
        for keys, seq in programs:
            need = {(key, r): False for key in keys for r in roles}
            for i, (w, key, o) in enumerate(seq):
                if (key, o) in deferred and goes_on(seq, i) == "crosses":
                    need[(keys[w + 1], m.op_role[o])] = True
            for kr, flag in need.items():
                closes.setdefault(kr, set()).add(flag)
        if any(len(v) > 1 for v in closes.values()):
            return ()
        for prog in self.programs.values():
            if prog.role not in roles:
                continue
            for key, ops in prog.windows.items():
                for pos, o in enumerate(ops):
                    if o in tensor:
                        prog.turns[(key, pos)] = (True in begins[(key, o)], (key, o) not in deferred)
                if closes.get((key, prog.role)) == {True}:
                    prog.turn_close.add(key)
        return tuple(roles)


def _add(table: dict, key, item) -> None:
    items = table.setdefault(key, [])
    if item not in items:
        items.append(item)


def _issue_early(model: KernelModel, order: tuple[str, ...]) -> tuple[str, ...]:
    """Each accumulating mma (`mma a, b, acc`: its result takes its accumulator's registers, so
    an earlier issue lengthens no register's life) moves up the window order past the ops before
    it that it does not wait for: ops it does not depend on in the window and, of its own role,
    ops that touch none of its values. It stays behind every mma, so the tensor core sees the
    same order and the ping-pong the same turns. An mma is issued asynchronously, and issuing it
    before independent work keeps the tensor core busy during that work. At D = 64 the schedule
    put the row maximum of S(j) between S(j)'s wait and PV(j-1)'s issue, which left the tensor
    core idle while it ran. Now both are issued first and then S alone is waited for, as FA3
    does: 369 -> 421 TFLOP/s on the H200. Fresh results (S = Q K^T) stay where they are:
    moving them up lengthened register lives, and the FA3 backward lost its register sharing."""
    m = model
    within = {}  # op -> ops of its window it depends on directly
    for e in m.graph.edges:
        if m.stage(e.src) - m.stage(e.dst) == e.distance and e.src != e.dst:
            within.setdefault(e.dst, set()).add(e.src)

    carried = dict(m.graph.yields)  # carry -> the value yielded to it: the same registers
    carry_of = {v: c for c, v in carried.items()}

    def touches(op: str) -> set[str]:
        names = {op} | {x.name for x in m.ops[op].operands}
        return names | {carried[n] for n in names if n in carried} | {carry_of[n] for n in names if n in carry_of}

    out = list(order)
    for name in [o for o in order if m.ops[o].opcode == "mma" and len(m.ops[o].operands) == 3]:
        i = out.index(name)
        needs, mine = within.get(name, set()), touches(name)
        while i > 0:
            prev = out[i - 1]
            if m.ops[prev].opcode == "mma" or prev in needs or (m.op_role[prev] == m.op_role[name] and
                                                                touches(prev) & mine):
                break
            out[i - 1], out[i] = name, prev
            i -= 1
    return tuple(out)


def _window_order(model: KernelModel) -> tuple[str, ...]:
    """Ops in order of start residue; ties follow dependences inside the window, then the graph."""
    m = model
    index = {op.name: i for i, op in enumerate(m.graph.ops)}
    names = [op.name for op in m.graph.ops]
    before: dict[str, set[str]] = {n: set() for n in names}
    for e in m.graph.edges:
        if e.src in before and m.stage(e.src) - m.stage(e.dst) == e.distance and e.src != e.dst:
            if m.residue(e.src) == m.residue(e.dst):
                before[e.dst].add(e.src)
    done, out = set(), []
    pending = sorted(names, key=lambda n: (m.residue(n), index[n]))
    while pending:
        for n in pending:
            if before[n] <= done or all(m.residue(b) != m.residue(n) for b in before[n] - done):
                out.append(n)
                done.add(n)
                pending.remove(n)
                break
        else:  # a zero-latency cycle cannot be scheduled; keep the graph order
            out.extend(pending)
            break
    return tuple(out)
