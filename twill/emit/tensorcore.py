"""`RoleBody`'s tensor-core synchronisation: wgmma groups retired and their register buffers
pinned (sm_90a), and a commit-tracked mma's block (tcgen05: its scratch tiles, its one issuing
thread, its commits)."""
from __future__ import annotations

from .lines import Lines, ring_pos, ring_slot
from .model import EmitError, ident, local
from .ops import ctype
from .windows import Inst, Window


class TensorCoreSync:
    """`RoleBody`'s tensor-core synchronisation (see the module docstring)."""

    def _crosses_window(self, op: str) -> bool:
        """Whether the result of mma `op` may still be in flight when a window ends: a reader on
        this role (or the next iteration, through a carry) reads it in a later window."""
        m, pos = self.m, {o: i for i, o in enumerate(self.p.order)}
        for use in m.uses.get(op, ()):
            if use.role != self.role.name:
                continue
            later = m.stage(use.op) + use.distance - m.stage(op)
            if later > 0 or (later == 0 and pos[use.op] <= pos[op]):
                return True
        return m.carry_of(op) is not None or not any(u.role == self.role.name for u in m.uses.get(op, ()))

    def _fence_async_results(self, out: Lines, boundary: bool = False) -> None:
        """After a wait: pin every register buffer a wgmma of this role writes or reads. At a
        window's start, only those of wgmmas that can be in flight across the window boundary:
        pinning a dead buffer would keep its registers allocated."""
        m = self.m
        if not m.target.async_register_mma:
            return
        names = set()
        for op in self.role.ops:
            if m.ops[op].opcode == "mma" and (not boundary or self._crosses_window(op)):
                names.add(op)
                a = m.resolve(m.ops[op].operands[0])[0]
                if a in self.p.copies and m.values[a].role == self.role.name:
                    names.add(a)
        arrays = dict.fromkeys(self.p.storage(n) for n in sorted(names, key=lambda n: self.p.order.index(n)))
        for name in arrays:
            for b in range(self.p.copies.get(name, 1)):
                out(f"twill::fence_frag({local(name)}[{b}]);")

    def elect(self) -> str:
        """The one thread that issues TMA and tcgen05 work for this role."""
        return "lane == 0" if not self.role.is_warpgroup else "threadIdx.x % 128 == 0 && wgi == 0"

    def _umma_block(self, out: Lines, w: Window, pos: int, name: str, it: Inst, args, code, staged) -> None:
        """tcgen05.mma: ordered after this role's tensor-memory and shared-memory writes, issued by
        one thread, then committed to the mbarriers its readers and the freed slots wait on."""
        m = self.m
        s = m.mma_shape[name]
        c = args[2] if s.accumulate else None
        with out.block(""):
            if c is not None and c.where == "reg":
                if not self.role.is_warpgroup:
                    raise EmitError(f"op '{name}': its accumulator '{c.value}' is in registers of a 1-warp role; "
                                    f"declare it @tmem")
                out(f"twill::frag_to_tmem({self.r.tmem_addr(name, it)}, {c.expr});  // the accumulator to tensor memory")
            if staged:
                self._umma_scratch(out, name, it, staged)
            if self.role.is_warpgroup:
                out("twill::tmem_fence_before();",
                    f"twill::named_sync({self.r.role_bar(self.role)}, {self.role.threads});  "
                    f"// the role's own tensor-memory and shared-memory traffic comes first",
                    "twill::tmem_fence_after();")
            with out.block(f"if ({self.elect()})"):
                self._umma_issue(out, w, pos, name, it, code, bool(staged))

    def _umma_scratch(self, out: Lines, name: str, it: Inst, staged) -> None:
        """A commit-tracked mma's register operands to their scratch tiles, once the previous
        instance of the mma has read them."""
        for _, st in staged:
            if not self.role.is_warpgroup:
                raise EmitError(f"op '{name}': operand '{st.value}' is in registers of a 1-warp role")
        done = f"sm.done_{ident(name)}"
        if it.base:
            out(f"if ({it} >= 1) twill::mbar_wait(&{done}, static_cast<uint32_t>(({it}) - 1) & 1u);  "
                f"// the previous {name} has read the scratch tile")
        elif it.off >= 1:
            out(f"twill::mbar_wait(&{done}, {(it.off - 1) & 1}u);  // the previous {name} has read the scratch tile")
        for tile, st in staged:
            t = st.type
            out(f"twill::frag_to_tile<{ctype(t.dtype)}, {t.shape[0]}, {t.shape[1]}>({tile}, "
                f"{st.expr}, {self.row0(t.shape[0])});")
        out("twill::fence_async_smem();")

    def _umma_accumulate(self, name: str, it: Inst, args) -> str:
        """The accumulate flag of tcgen05.mma `name`'s first k step where it reads an accumulator:
        1; `kk > 0` where the accumulator is a carry's initial value (which must be 0: the first
        step then overwrites tensor memory); and where the carry's previous instance may not
        exist (iteration it - 1 < 0), `kk > 0` unless it does."""
        m = self.m
        c = args[2] if m.mma_shape[name].accumulate else None
        if c is not None and c.where == "init":
            if c.expr not in ("0.0f", "0.f"):
                raise EmitError(f"op '{name}': a tensor-memory accumulator must start at 0 (got {c.expr})")
            return "kk > 0"
        if c is not None and c.where == "tmem" and self._may_be_negative(it.shift(1)) and \
                m.carry_of(c.value) is not None:
            return f"kk > 0 || ({it.shift(1)}) >= 0"
        return "1"

    def _umma_issue(self, out: Lines, w: Window, pos: int, name: str, it: Inst, code, staged: bool) -> None:
        """The issuing thread's part of `_umma_block`: wait for the result's region, issue, and
        commit to the mbarriers of its readers, its scratch tiles and the slots it frees."""
        m, p = self.m, self.p
        chan = p.channels.get(name)
        if chan is not None and chan.empty:
            out(f"sm.ring_{chan.ident}.wait_empty({ring_pos(it)});  // the readers are done with this region")
        if name in p.tmem_after:  # the columns are shared: their last occupant must be freed
            prev, k = p.tmem_after[name]
            q = Inst(it.base, it.off + k + 1)
            line = (f"sm.ring_{ident(prev)}.wait_empty({ring_pos(q)});  // {prev}[{Inst(it.base, it.off + k)}], "
                    f"which these columns held before, is freed")
            if q.base:
                out(f"if ({q} >= 1) {line}")
            elif q.off >= 1:
                out(line)
        out("twill::tmem_fence_after();")
        out(*code)
        if chan is not None:
            out(f"twill::umma_commit(&sm.ring_{chan.ident}.full[{ring_slot(it, chan.depth)}]);  "
                f"// {name}[{it}] is ready when the mma is")
        if staged:
            out(f"twill::umma_commit(&sm.done_{ident(name)});")
        for chan2, last, shift, how in self.prog.releases_after.get((w.key, pos), []):
            if how == "commit":
                inst = Inst(w.base, w.j0 - shift - m.stage(last.op) - last.distance)
                out(f"twill::umma_commit(&sm.ring_{chan2.ident}.empty[{ring_slot(inst, chan2.depth)}]);  "
                    f"// frees {chan2.value}[{inst}] once read")

    def _retire(self, k: int) -> None:
        """After wgmma_wait<k>: all but the newest k groups of this window are complete."""
        self.waited = k
        if k <= len(self.issued):  # the newest k groups are this window's: the older ones are done
            self.older_retired = True
        for g in self.issued[:max(0, len(self.issued) - k)]:
            self.complete.add(g)
