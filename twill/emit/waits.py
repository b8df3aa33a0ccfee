"""`Program`'s per-role synchronisation: wgmma.wait_group counts before reads of async results
and before overwriting a buffer an async op still uses, and where each role frees its ring slots."""
from __future__ import annotations

from .windows import Channel, RoleProgram


class Waits:
    """`Program`'s waits and releases (see the module docstring)."""

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
        self._async_waits(prog)
        self._ring_releases(prog)

    def _async_waits(self, prog: RoleProgram) -> None:
        """The wait_group counts of `_waits_and_releases`: before each read of an async result and
        before each write over a buffer an async op still reads or writes."""
        m, role = self.model, prog.role
        asyncs = self._async_results(role)
        cross, same = set(), set()  # hazards of an earlier window's wgmma, and of this window's
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
                # Where that wgmma is an earlier window's that reads the buffer as its A operand,
                # the wait comes at the write, not at the window's start: it leaves in flight the
                # groups this window committed before (every earlier window's group is older), and
                # the wgmmas this window issues first need not wait for it. (An accumulator of an
                # earlier window's wgmma, written or read, is still retired at the window's start:
                # waited later, ptxas serialized the FA3 forward's wgmmas, C7514.)
                hazard = self._last_async_access(seq, i, asyncs)
                if hazard is not None:
                    if window[hazard] < window[i] and seq[hazard][2] == self.storage(op):
                        prog.start_wait.add(key)
                        continue
                    older = window[hazard] < window[i]
                    (cross if older else same).add((key, pos))
                    first = window.index(window[i]) if older else hazard + 1
                    commits = sum(1 for _, _, o, _ in seq[first:i] if o in asyncs)
                    prog.hazards[(key, pos)] = min(prog.hazards.get((key, pos), commits), commits, 7)
                if self._carried_into_loop(seq, window, where, i, asyncs):
                    prog.carried.add((key, pos))
        prog.older_hazards.update(cross - same)

    def _carried_into_loop(self, seq, window: list[int], where: dict, i: int, asyncs: set[str]) -> bool:
        """Is op i an accumulator computed in its wgmma's registers (`acc_r = rescale acc, alpha`,
        buffers.py's aliases) whose wgmma is issued in a later window, from a window that enters the
        steady loop's header (the prologue's last window, or the steady window: the back edge)?
        Made while a wgmma is in flight, such a definition of an accumulator's registers reaches
        the loop header inside a wgmma pipeline stage, and ptxas serializes every wgmma of the
        kernel (C7515: the FP8 attention's consumer1 rescaled its accumulator after S(j) was issued,
        at its window's end). It is made after `wgmma_wait<0>` instead (RoleBody._compute, after its
        operands' waits); the same definition with a wgmma in flight inside a window whose wgmma
        reads it compiles clean (consumer0's)."""
        key, _, op, inst = seq[i]
        acc = self.storage(op)
        if op in asyncs or acc == op or acc not in asyncs:
            return False
        if key != ("steady", 0) and key != ("prologue", self.S - 2):
            return False
        reader = where.get((acc, inst))
        return reader is not None and window[reader] > window[i]

    def _ring_releases(self, prog: RoleProgram) -> None:
        """Where `_waits_and_releases` frees the ring slots this role reads."""
        m, role = self.model, prog.role
        asyncs = self._async_results(role)
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

    def _next_windows(self, key: tuple[str, int]) -> list[tuple[str, int]]:
        kind, idx = key
        S = self.S
        if kind == "prologue":
            return [("prologue", idx + 1) if idx + 1 < S - 1 else ("steady", 0)]
        if kind == "steady":
            return [("steady", 0)] + ([("epilogue", 0)] if S > 1 else [])
        return [("epilogue", idx + 1)] if idx + 1 < S - 1 else []


def _add(table: dict, key, item) -> None:
    items = table.setdefault(key, [])
    if item not in items:
        items.append(item)
