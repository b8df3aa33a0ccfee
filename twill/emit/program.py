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

from .bitmasks import held_as_bits
from .buffers import RegisterBuffers
from .model import EmitError, KernelModel
from .pingpong import PingPong
from .rings import Rings
from .smem import SharedMemory, Staging
from .streams import StreamDepth
from .tmem import TensorMemory
from .waits import Waits
from .windows import Window


class Program(RegisterBuffers, Rings, SharedMemory, StreamDepth, TensorMemory, Waits, PingPong):
    """The windows, buffers, channels and synchronisation of every role, one part per mixin:
    register buffers (buffers.py), channels (rings.py), shared and tensor memory (smem.py,
    tmem.py), the load rings' depth (streams.py), waits and releases (waits.py), ping-pong
    (pingpong.py).

    Not pure data while it is built: `__init__` runs the planning steps in order, each reading
    what the earlier ones set and some refining it (the register aliases drop buffers, `_fit_smem`
    shortens channels, `_deepen_streams` deepens the load rings (load_rings "latency" only), `_tmem_plan`
    narrows channels, `_pingpong` marks the role programs' turns, `_waits_and_releases` fills their
    tables). Once `__init__` returns nothing changes it: the
    renderer and the role bodies only read it, and rebinding an attribute raises."""

    def __init__(self, model: KernelModel):
        self.model = model
        self.S = model.stages
        self.order = _issue_early(model, _window_order(model))
        self.copies = self._copies()
        self.alias = self._aliases()
        self.bits = held_as_bits(model)  # comparisons held as bits (bitmasks.py)
        masked = self._masked_in_place()
        self.alias.update(masked)
        self.row_sums = self._row_sums()
        self.shared_regs = {**self._shared_registers(), **masked}
        self.alias.update(self.shared_regs)
        for x in self.alias:
            self.copies.pop(x, None)
        self.copies = self._fewer_copies_of_code()
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
        self.smem_extras = self._extras_limit()
        self.staging = self._staging()
        self.input_copies = self._input_copies()
        self.stream_note = self._deepen_streams()
        self.tmem_after: dict[str, tuple[str, int]] = {}  # value -> (value whose columns it reuses, k)
        self.tmem_shared: set[str] = set()  # values whose reader frees their columns right after reading
        self.tmem = self._tmem_plan()
        self.programs = {r.name: self._role_program(r.name) for r in model.roles}
        self.pingpong = self._pingpong()
        for prog in self.programs.values():
            self._waits_and_releases(prog)
        self._built = True

    def __setattr__(self, name, value):
        if getattr(self, "_built", False):
            raise AttributeError(f"Program.{name}: a Program is read-only once built")
        super().__setattr__(name, value)

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
    moving them up lengthened register lives, and the FA3 backward lost its register sharing.

    Nor does it move past an op of its role that computes another wgmma's accumulator (`acc1_r =
    rescale acc1, alpha1` feeding `acc1_n = mma p1, v, acc1_r`, computed in acc1_n's registers):
    that op would then write an accumulator while this wgmma is in flight, and where the value
    it writes is carried around the loop's back edge ptxas serializes every wgmma of the kernel
    (C7515; the held-out attn_exp, two accumulators in one role, issued acc_new0 before the
    rescale of acc1). FA3 rescales O with no wgmma of its own in flight, as this order does."""
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

    def accumulates(op: str) -> bool:  # an accumulating mma of op's role reads op as its accumulator
        return m.target.async_register_mma and m.ops[op].opcode != "mma" and any(
            u.index == 2 and u.distance == 0 and m.ops[u.op].opcode == "mma" and m.op_role[u.op] == m.op_role[op]
            for u in m.uses.get(op, ()))

    out = list(order)
    for name in [o for o in order if m.ops[o].opcode == "mma" and len(m.ops[o].operands) == 3]:
        i = out.index(name)
        needs, mine = within.get(name, set()), touches(name)
        while i > 0:
            prev = out[i - 1]
            if m.ops[prev].opcode == "mma" or prev in needs or (m.op_role[prev] == m.op_role[name] and
                                                                (touches(prev) & mine or accumulates(prev))):
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
