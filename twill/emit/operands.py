"""`RoleBody`'s operands: where each operand of an op is read (its own registers, a ring slot,
tensor memory, a loop-invariant input), with the waits that make it ready; and the hand-over of
its results to other roles, and the release of the slots it read."""
from __future__ import annotations

from .lines import Lines, ring_pos, ring_slot
from .model import EmitError, ident, local
from .ops import TMEM_STREAMED, Arg, ctype, fragment_type, view_type
from .windows import Inst, Window


class Operands:
    """`RoleBody`'s operands (see the module docstring)."""

    def _operand(self, out: Lines, w: Window, pos: int, opname: str, index: int, operand, stage: int) -> Arg:
        m, p = self.m, self.p
        value, d = m.resolve(operand)
        inst = w.inst(stage, d)
        v = m.values.get(value)
        if v is None:
            raise EmitError(f"op '{opname}' reads '{operand.name}', which is neither a value nor an input")
        t = v.type
        if v.kind == "input":
            if t.space == "smem":
                return Arg(value, t, "smem", f"sm.in_{ident(value)}[ib]")
            return Arg(value, t, "reg", local(value), invariant=True)
        carry = m.carry_of(value) if d > 0 else None
        chan = p.channels.get(value)
        if p.in_tmem(value):
            return self._tmem_operand(out, w, opname, index, value, t, inst, carry, chan)
        if v.role == self.role.name and not m.is_load(value):
            return self._own_operand(out, w, pos, opname, index, value, d, stage, inst)
        if chan is None:
            raise EmitError(f"op '{opname}' on role {self.role.name} reads '{value}' of role {v.role} with no channel")
        if carry is not None and inst.base != "n" and (not inst.base and inst.off < 0):
            return Arg(value, t, "init", self._init(carry))
        return self._channel_operand(out, opname, index, value, inst, carry, chan)

    def _own_operand(self, out: Lines, w: Window, pos: int, opname: str, index: int, value: str, d: int,
                     stage: int, inst: Inst) -> Arg:
        """A value of this role's own registers: complete it first where an async op writes it."""
        m, p = self.m, self.p
        t = m.values[value].type
        site = (w.key, pos, value)
        if site in self.prog.waits and not p.in_place(opname, index, value, d) and \
                (value, str(inst)) not in self.complete:
            k = self.prog.waits[site]
            if self.waited is None or self.waited > k:
                out(f"twill::wgmma_wait<{k}>();  // {value}[{inst}] is complete")
                self._retire(k)
            out(f"twill::fence_frag({local(p.storage(value))}[{p.buffer(value, w, stage, d)}]);")
            self.complete.add((value, str(inst)))
        if p.row_sums.get(value) == opname and index == 0:  # summed by the exp2 that made it
            return Arg(value, t, "reg", f"twill::presum({local(value)}_sums[{p.buffer(value, w, stage, d)}])")
        return Arg(value, t, "reg", f"{local(p.storage(value))}[{p.buffer(value, w, stage, d)}]")

    def _channel_operand(self, out: Lines, opname: str, index: int, value: str, inst: Inst, carry, chan) -> Arg:
        """A value another role (or a load) hands over through a ring: wait until its slot is full,
        then read it in place, or into registers where the instance may not exist yet."""
        m = self.m
        t = m.values[value].type
        ring = f"sm.ring_{chan.ident}"
        key = (value, str(inst))
        if chan.kind == "tma" or chan.kind == "tile":
            if key not in self.acquired:
                self.acquired.add(key)
                out(f"{ring}.wait_full({ring_pos(inst)});  // {value}[{inst}] has landed")
            arr = "ld" if chan.kind == "tma" else "tile"
            return Arg(value, t, "smem", f"sm.{arr}_{chan.ident}[{ring_slot(inst, chan.depth)}]")
        if chan.kind == "stage":
            buf = f"sm.stage_{chan.ident}[{ring_slot(inst, chan.depth)}]"
            tmp = f"{local(value)}_{local(opname)}_{index}"
            guard = self._may_be_negative(inst)
            if chan.copied:  # into registers as the op starts, the slot freed at once (Channel.copied)
                return self._copied_operand(out, value, t, inst, chan, buf, tmp, carry if guard else None)
            if not guard:  # read in place; the slot is freed after this role's last reader
                if key not in self.acquired:
                    self.acquired.add(key)
                    out(f"{ring}.wait_full({ring_pos(inst)});  // {value}[{inst}] is staged")
                out(f"const {view_type(m, t, self.groups)} {tmp}{{{buf}, {self.row0(t.shape[0])}}};")
                return Arg(value, t, "reg", tmp, view=True)
            out(f"{fragment_type(m, t, self.groups)} {tmp};")
            out(f"if ({inst} >= 0) {{")
            out.depth += 1
            out(f"{ring}.wait_full({ring_pos(inst)});",
                f"twill::buffer_to_frag({tmp}, {buf}, {self.row0(t.shape[0])}, {t.shape[1] if len(t.shape) > 1 else 0});")
            out.depth -= 1
            out("} else {")
            out(f"  twill::fill({tmp}, {self._init(carry) if carry else '0.f'});")
            out("}")
            return Arg(value, t, "reg", tmp)
        raise EmitError(f"channel kind {chan.kind} of '{value}' is not supported on {m.arch}")

    def _copied_operand(self, out: Lines, value: str, t, inst: Inst, chan, buf: str, tmp: str, carry) -> Arg:
        """A staged value read once by this role (Channel.copied): wait for its slot, copy the tile
        into registers and free the slot before the op computes, so that the producer may stage the
        next instance while this one is in use (the schedule's overlap; _release then frees nothing).
        With `carry`, an instance before the first is the carry's initial value."""
        m = self.m
        ring = f"sm.ring_{chan.ident}"
        out(f"{fragment_type(m, t, self.groups)} {tmp};")
        if carry is not None:
            out(f"if ({inst} >= 0) {{")
            out.depth += 1
        out(f"{ring}.wait_full({ring_pos(inst)});  // {value}[{inst}] is staged",
            f"twill::buffer_to_frag({tmp}, {buf}, {self.row0(t.shape[0])}, {t.shape[1] if len(t.shape) > 1 else 0});",
            f"{ring}.release_by_warp({ring_pos(inst)});  // {value}[{inst}] is in registers: its slot is free")
        if carry is not None:
            out.depth -= 1
            out("} else {")
            out(f"  twill::fill({tmp}, {self._init(carry)});")
            out("}")
        return Arg(value, t, "reg", tmp)

    def _may_be_negative(self, inst: Inst) -> bool:
        """In the steady loop j >= S-1, so j + off < 0 only when off < -(S-1); n >= S."""
        return inst.base == "j" and inst.off < -(self.p.S - 1)

    def _tmem_operand(self, out: Lines, w: Window, opname: str, index: int, value: str, t, inst: Inst,
                      carry, chan) -> Arg:
        """A tensor-memory operand (sm_100a): wait for the commit (or the writers' arrival) that
        makes the instance ready, then hand the address to an mma, or read the tile into registers
        for any other op. A carry's instance -1 is its initial value."""
        m, p = self.m, self.p
        is_mma = m.ops[opname].opcode == "mma"
        own_mma = m.values[value].role == self.role.name and is_mma
        addr = self.r.tmem_addr(value, inst)
        if carry is not None and not inst.base and inst.off < 0:
            return Arg(value, t, "init", self._init(carry))
        waits = chan is not None and self.role.name in chan.consumers and not own_mma
        guard = carry is not None and self._may_be_negative(inst)
        streams = (m.ops[opname].opcode in TMEM_STREAMED and index == 0 and p.in_tmem(opname) and
                   len(t.shape) == 2 and t.dtype == "f32")
        if is_mma or streams:
            if waits and (value, str(inst)) not in self.acquired:
                self.acquired.add((value, str(inst)))
                wait = f"sm.ring_{chan.ident}.wait_full({ring_pos(inst)});  // {value}[{inst}] is in tensor memory"
                out(f"if ({inst} >= 0) {wait}" if guard else wait)
            if streams:
                out("twill::tmem_fence_after();")
            return Arg(value, t, "tmem", addr, f"{inst} >= 0" if guard else "",
                       self._init(carry) if carry is not None else "")
        cached = self.loaded.get((value, str(inst)))
        if cached is not None:  # already read out of tensor memory in this window
            return Arg(value, t, "reg", cached)
        tmp = f"{local(value)}_{local(opname)}_{index}"
        self.loaded[(value, str(inst))] = tmp
        out(f"{fragment_type(m, t, self.groups)} {tmp};")
        if guard:
            out(f"if ({inst} >= 0) {{")
            out.depth += 1
        if waits:
            out(f"sm.ring_{chan.ident}.wait_full({ring_pos(inst)});  // {value}[{inst}] is in tensor memory",
                "twill::tmem_fence_after();")
        out(f"twill::tmem_to_frag({tmp}, {addr});")
        if value in p.tmem_shared:  # its columns are another value's next: free them at once
            out("twill::tmem_fence_before();",
                f"sm.ring_{chan.ident}.release_by_warp({ring_pos(inst)});  // {value}[{inst}] is read: its columns are free")
        if guard:
            out.depth -= 1
            out("} else {")
            out(f"  twill::fill({tmp}, {self._init(carry)});")
            out("}")
        return Arg(value, t, "reg", tmp)

    def _publish(self, out: Lines, w: Window, name: str, it: Inst) -> None:
        """Hand a result to other roles: wait for the slot, write it, fence, arrive on full."""
        m, p = self.m, self.p
        chan = p.channels.get(name)
        if chan is None or chan.producer != self.role.name or chan.kind == "tma":
            return
        t = m.values[name].type
        ring = f"sm.ring_{chan.ident}"
        if chan.kind == "tmem":
            if m.ops[name].opcode != "mma":  # written by tcgen05.st (waited for): announce it
                out("twill::tmem_fence_before();", f"{ring}.arrive_full({ring_pos(it)});  // {name}[{it}] is in tensor memory")
            return
        buf = f"{local(p.storage(name))}[{p.buffer(name, w, m.stage(name), 0)}]"
        slot = ring_slot(it, chan.depth)
        if m.target.async_register_mma and m.ops[name].opcode == "mma":  # an async result: complete it first
            out(f"twill::wgmma_wait<0>();  // {name}[{it}] is complete", f"twill::fence_frag({buf});")
            self._retire(0)
        if chan.kind == "stage" and name in self.r.published:  # masked before another role's rowmax / exp2
            self._mask_past(out, name, self.r.published[name], buf, t, it)
        out(f"{ring}.wait_empty({ring_pos(it)});  // hand {name}[{it}] to {', '.join(chan.consumers)}")
        if chan.kind == "stage":
            out(f"twill::frag_to_buffer(sm.stage_{chan.ident}[{slot}], {buf}, {self.row0(t.shape[0])}, "
                f"{t.shape[1] if len(t.shape) > 1 else 0});")
        elif chan.kind == "tile":
            rows, cols = t.shape
            out(f"twill::frag_to_tile<{ctype(t.dtype)}, {rows}, {cols}>(sm.tile_{chan.ident}[{slot}], {buf}, "
                f"{self.row0(rows)});",
                "twill::fence_async_smem();  // visible to the tensor core")
        out(f"{ring}.arrive_full({ring_pos(it)});")

    def _release(self, out: Lines, w: Window, item) -> None:
        chan, last, shift, wait = item
        m = self.m
        stage = m.stage(last.op)
        inst = Inst(w.base, w.j0 - shift - stage - last.distance)
        guard = inst.base == "j" and inst.off < -(self.p.S - 1)
        ring = f"sm.ring_{chan.ident}"
        if wait is not None and wait != "commit" and (self.waited is None or self.waited > wait):
            out(f"twill::wgmma_wait<{wait}>();  // the wgmmas before the last one are done")
            self._retire(wait)
        if wait == "commit":  # the mma's issuing thread already committed to the empty barrier
            return
        if chan.copied:  # freed where it was copied into registers (_copied_operand)
            return
        if not inst.base and inst.off < 0:  # an instance before the first (a carry's initial value, read
            return                          # as a constant) never entered the ring: nothing to release
        if chan.kind == "tmem":
            out("twill::tmem_fence_before();")
        line = f"{ring}.release_by_warp({ring_pos(inst)});  // release {chan.value}[{inst}]"
        out(f"if ({inst} >= 0) {line}" if guard else line)
