"""`RoleBody` after the loop: the ring slots still held are freed, the carries' last values go to
global memory (normalized where the graph divides them at the end), and values handed to another
role after the loop are passed on."""
from __future__ import annotations

from . import colsplit, descale, epilogue, fixup, scalar_atomic
from .lines import Lines
from .model import ident, local
from .ops import fragment_type
from .windows import Inst


class AfterLoop:
    """`RoleBody` after the loop (see the module docstring)."""

    # -- after the loop ------------------------------------------------------------------------------
    def _release_tail(self, out: Lines) -> None:
        """Free the ring slots the loop leaves held (Program.held_at_end), so that a CTA's next
        tile finds every ring empty."""
        if not self.r.persistent():
            return
        for chan in self.p.channels.values():
            if self.role.name not in chan.consumers or not chan.empty:
                continue
            held = self.p.held_at_end(self.role.name, chan)
            if held:
                out(f"if (!tile.last) for (int i = n - {held}; i < n; ++i) sm.ring_{chan.ident}.release_by_warp(tile.pos + i);  "
                    f"// {chan.value}'s slots still held: empty for the next tile")

    def _finalize(self, out: Lines) -> None:
        """Each carry's last value goes to its output tensor (divided by its running sum, for an
        online-softmax accumulator). A register value is written by the role holding it; a
        tensor-memory one by the role holding its normalizer (or one that reads it), once the
        mma role's final commit says the last mma is done. A last value that the writing role does
        not hold (a running sum on another role) is staged in shared memory by its role first."""
        m, p, r = self.m, self.p, self.r
        for value in r.tmem_finals():
            if m.values[value].role == self.role.name and m.ops[value].opcode == "mma":
                out(f"if ({self.elect()}) twill::umma_commit(&sm.final_{ident(value)});  "
                    f"// every mma of this role, the last {value} too, is done")
        outputs = [t for t in m.tensors if t.kind == "output" and self.p.final_role(t) == self.role.name]
        hopper_mma = m.target.async_register_mma and any(m.ops[o].opcode == "mma" for o in self.role.ops)
        if not outputs:
            if hopper_mma:
                out("twill::wgmma_wait<0>();")
            self._release_tail(out)
            self._hand_over(out)
            return
        out("// ---- after the loop: the carries' last values (iteration n - 1) to global memory ----")
        if hopper_mma:
            out("twill::wgmma_wait<0>();")
        self._release_tail(out)
        self._hand_over(out)
        finals = {}
        for value in dict.fromkeys(v for t in outputs for v in self.p.final_values(t)):
            vt = m.values[value].type
            fin = f"{local(value)}_final"
            finals[value] = fin
            ftype = fragment_type(m, vt, self.groups)
            if self._streamed_final(value, outputs, ftype):
                out(f"{ftype.replace('twill::TRow<', 'twill::TmemTile<', 1)} {fin}{{{r.tmem_addr(value, Inst('n', -1))}}};  "
                    "// stored 32 columns at a time from tensor memory",
                    f"twill::mbar_wait(&sm.final_{ident(value)}, tile.round & 1);", "twill::tmem_fence_after();")
                continue
            out(f"{ftype} {fin};")
            if p.in_tmem(value):
                out(f"twill::mbar_wait(&sm.final_{ident(value)}, tile.round & 1);", "twill::tmem_fence_after();",
                    f"twill::tmem_to_frag({fin}, {r.tmem_addr(value, Inst('n', -1))});")
            elif m.values[value].role != self.role.name:  # staged by its role (see _hand_over)
                out(f"twill::mbar_wait(&sm.final_{ident(value)}, tile.round & 1);  "
                    f"// {m.values[value].role} staged the last {value}",
                    f"twill::buffer_to_frag({fin}, sm.last_{ident(value)}, {self.row0(vt.shape[0])}, "
                    f"{vt.shape[1] if len(vt.shape) > 1 else 0});")
            else:
                self._last(out, value, fin)
        scaled = descale.epilogue_scaled(m)
        for value in (v for v in finals if v in scaled):  # before the epilogue's ops read it
            out(descale.finalize_line(finals[value]))
        if colsplit.fixed_up(m.graph):  # the splits' carries combined: the epilogue and stores by the last alone
            with out.block(f"if ({fixup.emit(self, out, finals)})"):
                self._write(out, outputs, finals)
            return
        self._write(out, outputs, finals)

    def _write(self, out: Lines, outputs, finals: dict[str, str]) -> None:
        """The epilogue's values, then every output's store, from the carries' last values `finals`."""
        m = self.m
        norms = dict(m.normalizers)
        ep = epilogue.Finalizer(self, finals)  # the epilogue's values, before any output is written
        written = {t.name: ep.compute(out, t) for t in outputs}
        for t in outputs:
            if written[t.name] is not None:
                vt = m.values[t.value].type
                out(f"store_{t.name}(sm, tm, args, tile, {written[t.name]}, n - 1, {self.row0(vt.shape[0])}, n);  "
                    "// the epilogue's output")
                continue
            carry = m.carry_of(t.value)
            fin = finals[t.value]
            if carry in norms:
                out(f"twill::op_normalize({fin}, {finals[m.carry_source[norms[carry]]]});  "
                    f"// {carry} / {norms[carry]}: the softmax denominator")
            if t.name in descale.scaled_outputs(m):
                out(descale.finalize_line(fin))
            vt = m.values[t.value].type
            out(f"store_{t.name}(sm, tm, args, tile, {fin}, n - 1, {self.row0(vt.shape[0])}, n);  // carry {carry}")
        scalar_atomic.emit(self, out, ep, finals)  # each atomic output's one update of the tile

    def _streamed_final(self, value: str, outputs, ftype: str) -> bool:
        """A tensor-memory f32 value that is only stored, by TMA from shared memory: no epilogue, no
        normalizer or descale reads it. Its store reads it out 32 columns at a time (TmemTile), not
        into a whole register row first (the model counts no registers after the loop: a 128 x 256
        accumulator would be 256 per thread, beyond any setmaxnreg budget)."""
        m, p = self.m, self.p
        if not p.in_tmem(value) or not ftype.startswith("twill::TRow<") or m.graph.epilogue:
            return False
        mine = [t for t in outputs if value in self.p.final_values(t)]
        if any(t.value != value or t.name not in p.staging for t in mine):
            return False
        norms = dict(m.normalizers)
        if any(m.carry_source.get(n) == value for n in norms.values()) or m.carry_of(value) in norms:
            return False
        return not (value in descale.epilogue_scaled(m) or any(t.name in descale.scaled_outputs(m) for t in mine))

    def _last(self, out: Lines, value: str, fin: str) -> None:
        """fin = this role's register copy of the last instance (iteration n - 1) of value."""
        store = local(self.p.storage(value))
        c = self.p.copies.get(self.p.storage(value), 1)
        if c == 1:
            out(f"{fin} = {store}[0];")
            return
        with out.block(f"switch ((n - 1) % {c})"):
            for k in range(c):
                out(f"case {k}: {fin} = {store}[{k}]; break;")
            out("default: break;")

    def _hand_over(self, out: Lines) -> None:
        """Stage the last instances of this role's values that another role's output needs, and
        arrive on their mbarriers (see Program.handoffs)."""
        m = self.m
        for value, (holder, readers) in self.p.handoffs.items():
            if holder != self.role.name:
                continue
            vt = m.values[value].type
            fin = f"{local(value)}_last"
            with out.block(""):
                out(f"{fragment_type(m, vt, self.groups)} {fin};")
                self._last(out, value, fin)
                out(f"twill::frag_to_buffer(sm.last_{ident(value)}, {fin}, {self.row0(vt.shape[0])}, "
                    f"{vt.shape[1] if len(vt.shape) > 1 else 0});",
                    f"twill::mbar_arrive(&sm.final_{ident(value)});  // the last {value}, for {', '.join(readers)}")
