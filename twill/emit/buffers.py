"""`Program`'s register buffers: how many rotating buffers each register value needs (modulo
variable expansion), and where values share registers (an accumulator computed in place, a masked
tile in its operand's registers, fused row sums, values that never live at once)."""
from __future__ import annotations

import math

from .model import EmitError
from .windows import Window


IN_PLACE_MASKS = ("causal_mask", "tail_mask")  # y = OP x: masked in x's registers where x's one reader is y


class RegisterBuffers:
    """`Program`'s register buffers (see the module docstring)."""

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
            if t.dtype not in ("f16", "bf16", "f8e4m3", "f8e5m2") or t.space != "reg":
                continue
            for u in m.uses.get(op.name, ()):
                if (m.ops[u.op].opcode == "rowsum" and u.index == 0 and u.distance == 0 and
                        u.role == m.op_role[op.name]):
                    out[op.name] = u.op
                    break
        return out

    def _masked_in_place(self) -> dict[str, str]:
        """y -> x for `y = causal_mask x` (or tail_mask) where x's one use is y, on x's role, of the same iteration
        and type (sm_90a): y is masked in x's registers, as the partial tile's mask is, instead of
        64 more per thread for FA3's S. x's buffers then cover y's readers too (its copies grow to
        the instance count from x's write to y's last read)."""
        m, out = self.model, {}
        pos = {o: i for i, o in enumerate(self.order)}
        for op in m.graph.ops:
            if op.opcode not in IN_PLACE_MASKS or not m.target.register_fragments or len(op.operands) != 1:
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
                    if x in out or m.values[x].type != m.values[y].type or (x in self.bits) != (y in self.bits):
                        continue  # x lives in another value's registers itself, or is another type (or held as bits)
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

    def _fewer_copies_of_code(self) -> dict[str, int]:
        """The copies with some row vectors given more buffers, where that makes the unroll factor
        (the least common multiple of the copies) smaller: each unrolled copy of the steady state
        brings its own exit (an epilogue per residue), so the role's code, and ptxas's time on it,
        grows with the factor (split-KV attention's alpha[3] and m_new[2] unrolled 6 times: about 45 s
        of ptxas per compile on this machine, each of emit-cuda's ptxas loop's compiles). A buffer is
        added only to a rank-1 value (a row vector: a few registers per thread), only where the
        role's budget still holds them, and the smallest factor that needs no other value padded
        is taken; more buffers than instances alive at once are always sound (instance i lives in
        buffer i % copies)."""
        copies = dict(self.copies)
        if not copies:
            return copies
        m = self.model
        best = math.lcm(*copies.values())
        for unroll in range(max(copies.values()), best):
            padded = {}
            for v, c in copies.items():
                if unroll % c == 0:
                    padded[v] = c
                    continue
                if len(m.values[v].type.shape) != 1:
                    break
                padded[v] = next(d for d in range(c, unroll + 1) if unroll % d == 0)
            else:
                roles = {m.values[v].role for v in padded if padded[v] != copies[v]}
                if all(self._registers(r, padded, [v for v in padded if m.values[v].role == r.name])
                       <= r.registers for r in m.roles if r.name in roles):
                    return padded
        return copies

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
