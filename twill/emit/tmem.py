"""Tensor memory of an emitted sm_100a kernel: which values live there and in which columns.

A mixin of `Program`: every mma result and every value declared @tmem lives in tensor memory;
values written in place share their columns, values whose lifetimes never overlap (modulo I) may
take turns in one region, and rings fall back to one region when 512 columns do not hold them.
"""
from __future__ import annotations

from dataclasses import replace

from .model import EmitError


class TensorMemory:
    """`Program`'s tensor-memory plan (see the module docstring)."""

    def in_tmem(self, name: str) -> bool:
        """On sm_100a every mma result lives in tensor memory, and so does a value declared @tmem."""
        m = self.model
        v = m.values.get(name)
        if not m.target.tensor_memory or v is None or v.kind != "result" or m.is_load(name):
            return False
        return m.ops[name].opcode == "mma" or v.type.space == "tmem"

    def writes_in_place(self, op: str, index: int) -> bool:
        """`op` overwrites the tensor memory of its operand `index`: an mma accumulating into it,
        or an elementwise op on a tensor-memory tile whose result lives there too."""
        m = self.model
        if not m.target.tensor_memory or not self.in_tmem(op):
            return False
        value = m.resolve(m.ops[op].operands[index])[0]
        if not self.in_tmem(value):
            return False
        if m.ops[op].opcode == "mma":
            return index == 2
        return index == 0 and m.values[value].type.shape == m.values[op].type.shape

    def _tmem_plan(self) -> dict[str, tuple[int, int, int]]:
        """value -> (first column, columns per instance, instances): tensor memory for sm_100a.

        A value written in place over another shares its columns (an accumulator chain is one
        region); other values get `depth` regions, the depth of their channel. When the regions do
        not fit the 512 columns, every ring falls back to one region (the producer then waits)."""
        m = self.model
        names = [op.name for op in m.graph.ops if self.in_tmem(op.name)]
        if not names:
            return {}
        root = {n: n for n in names}

        def find(x):
            while root[x] != x:
                x = root[x]
            return x
        for n in names:
            for i in range(len(m.ops[n].operands)):
                if self.writes_in_place(n, i):
                    src = m.resolve(m.ops[n].operands[i])[0]
                    root[find(n)] = find(src)

        def width(n):
            t = m.values[n].type
            cols = t.shape[-1] if len(t.shape) > 1 else 1
            return cols // 2 if t.dtype in ("f16", "bf16") else cols
        roots = list(dict.fromkeys(find(n) for n in names))
        members = {r: [x for x in names if find(x) == r] for r in roots}

        def columns(r):
            cols = max(width(x) for x in members[r])
            return max(32, 1 << (cols - 1).bit_length())
        for fallback in (False, True, "alias"):
            groups = self._tmem_share(roots, members, columns) if fallback == "alias" else [[r] for r in roots]
            plan, col = {}, 0
            for group in groups:
                r = group[0]
                chained = len(members[r]) > 1
                depth = 1 if (chained or fallback) else max(self.channels[x].depth if x in self.channels else 1
                                                          for x in members[r])
                cols = max(columns(x) for x in group)
                col = -(-col // cols) * cols
                for x in group:
                    plan[x] = (col, cols, depth)
                col += cols * depth
            if col <= 512:
                break
        else:
            raise EmitError(f"the tensor-memory values need {col} columns even where values whose lifetimes do not "
                            f"overlap share them; a CTA has 512")
        if fallback:
            self.channels = {k: (replace(c, depth=1) if c.kind == "tmem" else c)
                             for k, c in self.channels.items()}
        if fallback == "alias":
            self._tmem_successions(groups)
        return {n: plan[find(n)] for n in names}

    def _tmem_life(self, value: str) -> tuple[int, int]:
        """When an instance (iteration 0) of a tensor-memory value occupies its columns, as the
        model has it: from its mma's issue until its reader starts (and reads it into registers)."""
        m = self.model
        sched, ii = m.sched, m.schedule.ii
        return sched[value].start, max(sched[u.op].start + u.distance * ii for u in m.uses[value])

    def _tmem_sharable(self, value: str) -> bool:
        """A value may take turns with others in its columns: one mma's result, read once, into
        registers (the reader frees the columns as soon as it has read them), within I."""
        m = self.model
        uses = m.uses.get(value, ())
        if m.ops[value].opcode != "mma" or value not in self.channels or len(uses) != 1:
            return False
        begin, end = self._tmem_life(value)
        return m.ops[uses[0].op].opcode != "mma" and end - begin <= m.schedule.ii

    def _tmem_share(self, roots, members, columns) -> list[list[str]]:
        """Regions of tensor memory: values whose lifetimes never overlap (modulo I) take turns in
        one region, the widest first, first fit; the rest (accumulator chains) keep their own."""
        ii = self.model.schedule.ii

        def overlap(a, b):
            """Lifetimes meet modulo I. On one role a value must end strictly before the next is
            written: the role would otherwise wait, before its read, for the read to be done."""
            (a0, a1), (b0, b1) = self._tmem_life(a), self._tmem_life(b)
            same = int(self.model.values[a].role == self.model.values[b].role)
            return any(a0 < b1 + same + k * ii and b0 + k * ii < a1 + same for k in range(-3, 4))
        groups: list[list[str]] = []
        for r in sorted(roots, key=lambda r: (-columns(r), roots.index(r))):
            sharable = len(members[r]) == 1 and self._tmem_sharable(r)
            for g in groups:
                if sharable and all(len(members[x]) == 1 and self._tmem_sharable(x) and not overlap(r, x) for x in g):
                    g.append(r)
                    break
            else:
                groups.append([r])
        return groups

    def _tmem_successions(self, groups) -> None:
        """In a shared region each value's mma waits for the previous occupant to be freed: its
        readers then release it (Ring::empty), and tmem_after names the occupant and iteration."""
        ii = self.model.schedule.ii
        for g in groups:
            if len(g) < 2:
                continue
            for x in g:
                c = self.channels[x]
                self.channels[x] = replace(c, depth=1, empty=True)
                self.tmem_shared.add(x)
            for x in g:
                start = self._tmem_life(x)[0]
                # the occupant instance that ends last before x's iteration 0 is written (x's own
                # previous one is waited for anyway: Ring::wait_empty)
                best = max((self._tmem_life(y)[1] + k * ii, y, k) for y in g for k in range(-3, 4)
                           if self._tmem_life(y)[1] + k * ii <= start and (y, k) != (x, 0))
                if best[1] != x:
                    self.tmem_after[x] = (best[1], best[2])
