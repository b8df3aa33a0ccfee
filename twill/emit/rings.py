"""`Program`'s channels between roles: a ring of slots per value that crosses roles (or a load),
its depth (deep enough for the schedule, and for a late wgmma release not to deadlock), and which
instances each reader frees over a loop (what the ring check in the tests walks)."""
from __future__ import annotations

import math

from .model import EmitError
from .windows import Channel


class Rings:
    """`Program`'s channels (see the module docstring)."""

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
            copied = kind == "stage" and all(self._read_once(name, role) for role in readers)
            out[name] = Channel(name, v.role, tuple(readers), depth, kind, empty=not chain, least=least, copied=copied)
        return out

    def _read_once(self, name: str, role: str) -> bool:
        """Does `role` read `name` with one operand of one op, and no mma (which reads shared memory)?"""
        m = self.model
        reads = [(u.op, u.index) for u in m.uses.get(name, ()) if u.role == role]
        return len(reads) == 1 and m.ops[reads[0][0]].opcode != "mma"

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
