"""One warp role's device function: its register buffers, then its windows in schedule order
(prologue, steady state, epilogue), each op's code from the opcode tables in ops.py, and the
synchronisation Program planned: ring waits and releases, wgmma waits, ping-pong turns, tensor
memory hand-offs, and after the loop the carries' last values to global memory.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING

from ..ir import TensorType
from . import anypitch, batch_groups, halves, prologue, splits
from .after_loop import AfterLoop
from .bitmasks import bits_type
from .lines import Lines, ring_pos, ring_slot
from .model import EmitError, dtype_bytes, ident, local, plain_box, swizzle_bytes
from .operands import Operands
from .ops import TMEM_STREAMED, Arg, OpCall, ctype, emitter, exp2_code, fragment_type
from .tensorcore import TensorCoreSync
from .windows import Inst, Window

if TYPE_CHECKING:
    from .cuda import Renderer


class RoleBody(Operands, TensorCoreSync, AfterLoop):
    """One role's device function: its register buffers, then its windows in schedule order; its
    operands (operands.py), its tensor-core synchronisation (tensorcore.py) and what it does after
    the loop (after_loop.py) are mixins. It writes as it goes: `waited`, `issued`, `complete` and
    `acquired` follow the wgmma groups and ring slots of the code written so far."""

    def __init__(self, r: Renderer, role: str):
        self.r, self.m, self.p = r, r.m, r.p
        self.role = self.m.role[role]
        self.prog = self.p.programs[role]
        self.groups = max(1, self.role.warpgroups)
        self.case = None  # while _program writes `case r` after the steady loop: r (n - j == r there)

    # -- values ------------------------------------------------------------------------------------
    def registers(self) -> list[str]:
        """Register values this role produces (results of its ops that live in registers)."""
        m = self.m
        out = []
        for op in m.graph.ops:
            if m.op_role[op.name] != self.role.name or not op.has_result or op.type is None:
                continue
            if m.is_load(op.name) or self.p.in_tmem(op.name) or op.name in self.p.alias:
                continue
            out.append(op.name)
        return out

    def row0(self, rows: int) -> str:
        if not self.role.is_warpgroup or self.groups == 1:
            return "0"
        return f"wgi * {rows // self.groups}"

    def emit(self, out: Lines) -> None:
        m, role = self.m, self.role
        out(f"// ---- role {role.name}: {role.warps} warp(s), {role.registers} registers; "
            f"ops {', '.join(role.ops)} ----")
        if role.name in self.r.masked_roles:
            out("template <bool kTail>  // the loop's last tile is partial: mask it (ragged.py)")
        out(f"__device__ __forceinline__ void role_{role.ident}(Smem& sm, const Maps& tm, const Args& args, const int n, "
            f"const twill::TileIdx& tile) {{")
        out.depth += 1
        out("(void)sm;", "(void)tm;", "(void)args;", "(void)tile;")
        out(*splits.role_lines(m))
        out(*halves.role_lines(self.r, self.r.parts, role.name))
        out(*batch_groups.role_lines(m.tensors, set(role.ops), bool(m.graph.split)))
        if role.is_warpgroup:
            first = role.first_warp // 4
            if m.tile_copies > 1:  # each tile copy is the role's one warpgroup (copies.py)
                out("const int wgi = 0;  // warpgroup within the role (each tile copy is one)", "(void)wgi;")
            else:
                out(f"const int wgi = static_cast<int>(threadIdx.x / 128) - {first};  // warpgroup within the role",
                    "(void)wgi;")
        else:
            out("const int lane = threadIdx.x % 32;", "(void)lane;")
        regs = self.registers()
        if regs:
            out("// register values: one buffer per instance alive at once (instance i in buffer i % copies)")
        for name in regs:
            t = m.values[name].type
            c = self.p.copies.get(name, 1)
            ftype = bits_type(t, self.groups) if name in self.p.bits else fragment_type(m, t, self.groups)
            out(f"{ftype} {local(name)}[{c}];  // {name}: {t}" + (" as bits" if name in self.p.bits else ""))
            if name in self.p.row_sums:
                rows = TensorType("f32", (t.shape[0],))
                out(f"{fragment_type(m, rows, self.groups)} {local(name)}_sums[{c}];  // {name}'s row sums, "
                    f"for {self.p.row_sums[name]}")
        for name in regs:
            carry = m.carry_of(name)
            if carry is not None:
                out(f"for (int c = 0; c < {self.p.copies.get(name, 1)}; ++c) "
                    f"twill::fill({local(name)}[c], {self._init(carry)});  // carry {carry} starts at "
                    f"{m.carry_init[carry]}")
        self._inputs(out)
        roles = self.p.pingpong
        # The turns alternate across the CTA's tiles as within one: the first turn of a tile is
        # given by the last hand-over of the tile before.
        if roles and self.role.name == roles[-1]:
            out(f"if (tile.round == 0{self._turning()}) twill::named_arrive({self.r.bars['turn:' + roles[0]]}, "
                f"{self.turn_threads(roles[0])});  // ping-pong: {roles[0]} takes the first turn on the tensor core")
        self._program(out)
        if m.tile_copies > 1 and role.is_warpgroup:
            out(f"if (!tile.last) twill::named_arrive({self.r.bars['copies']}, {128 * m.tile_copies});  "
                "// this tile's ring waits are done: the next tile's copy may wait (copies.py)")
        if roles and self.role.name == roles[0]:
            out(f"if (tile.last{self._turning()}) twill::named_sync({self.r.bars['turn:' + roles[0]]}, "
                f"{self.turn_threads(roles[0])});  "
                f"// ping-pong: absorb {roles[-1]}'s last hand-over")
        self._finalize(out)
        if self.r.reads_smem_inputs(self.role):
            out("twill::warp_arrive(&sm.inputs_free[tile.round % kInputCopies]);  "
                "// this role is done with the tile's inputs")
        out.depth -= 1
        out("}")
        out("")

    def _init(self, carry: str) -> str:
        init = self.m.carry_init[carry]
        return {"-inf": "-INFINITY", "inf": "INFINITY", "zero": "0.f"}.get(init, f"{float(init)!r}f")

    def _inputs(self, out: Lines) -> None:
        """Loop-invariant inputs: shared-memory ones arrive once by TMA (issued by the loader role);
        register ones are read from global memory by every role that uses them."""
        m = self.m
        smem_inputs = self.r.smem_inputs()
        reads_smem = self.r.reads_smem_inputs(self.role)
        loader = self._input_loader()
        if smem_inputs and (loader == self.role.name or reads_smem):
            out("const int ib = tile.round % kInputCopies;  // this tile's buffer of the inputs")
        if smem_inputs and loader == self.role.name:
            total = sum(t.tile_bytes for t in smem_inputs)
            cond = "lane == 0" if not self.role.is_warpgroup else "threadIdx.x % 128 == 0 && wgi == 0"
            with out.block(f"if ({cond})"):
                out("if (tile.round >= kInputCopies) twill::mbar_wait(&sm.inputs_free[ib], "
                    "((tile.round / kInputCopies) & 1) ^ 1);  // the buffer's last tile is done with it",
                    f"twill::mbar_arrive_expect_tx(&sm.inputs_ready[ib], {total});")
                for t in smem_inputs:
                    self._tma_boxes(out, t, f"sm.in_{t.name}[ib]", "&sm.inputs_ready[ib]", "0")
        reads = {m.resolve(o)[0] for op in self.role.ops for o in m.ops[op].operands}
        if reads_smem:
            out("twill::mbar_wait(&sm.inputs_ready[ib], (tile.round / kInputCopies) & 1);  // the tile's loop-invariant inputs")
        for t in m.tensors:
            if t.kind == "input" and m.values[t.value].type.space != "smem" and t.value in reads:
                vt = m.values[t.value].type
                out(f"{fragment_type(m, vt, self.groups)} {local(t.value)};")
                if vt.shape in ((1,), (1, 1)):  # one value per batch entry (a head's ALiBi slope): a float
                    _, _, batch = self.r._origin(t, "0")
                    out(f"{local(t.value)} = twill::to_float<{ctype(vt.dtype)}>(args.{t.name}[{batch}]);  "
                        f"// {t.value}: one value per batch entry")
                    continue
                self.r.read_input(out, local(t.value), t, self.row0(vt.shape[0]))
        prologue.emit(self, out, reads)

    def _input_loader(self) -> str:
        m = self.m
        for r in m.roles:
            if any(m.is_load(o) for o in r.ops):
                return r.name
        return m.roles[0].name

    def _tma_boxes(self, out: Lines, t, dst: str, bar: str, it: str) -> None:
        """TMA loads of one tile: one box per swizzle block of columns (128, 64 or 32 bytes, as
        the tensor core reads them; 16, unswizzled, for narrower rows or fewer than a swizzle
        atom's 8) and per 256 rows; a row vector (lse, a row statistic) or a one-row tile (a bias
        or a scale per column) in one plain box, since a swizzle would permute its bytes past the
        first 128 (they start a new swizzle row) and its ring slots are not 1024-byte aligned."""
        esize = dtype_bytes(t.dtype)
        rows, cols = t.tile
        if plain_box(t):
            if cols > 256 or (cols * esize) % 16:
                raise EmitError(f"row vector '{t.value}' of {cols} {t.dtype}: one TMA box takes up to 256 elements "
                                f"of a multiple of 16 bytes")
            row0, col0, batch = self.r._origin(t, it)
            out(f"twill::tma_load({dst}, tm.{t.name}, {bar}, {col0}, {row0}, {batch});")
            return
        if (cols * esize) % 16:
            raise EmitError(f"tile of '{t.value}' is {cols} {t.dtype} wide: a TMA box's rows are a multiple of 16 bytes")
        sw = swizzle_bytes(cols * esize, rows)
        block = sw // esize
        box_rows = min(rows, 256)
        row0, col0, batch = self.r._origin(t, it)
        for cb in range(cols // block):
            for rb in range(0, rows, box_rows):
                off = cb * rows * sw + rb * sw
                ptr = f"reinterpret_cast<char*>({dst}) + {off}" if off else dst
                out(f"twill::tma_load({ptr}, tm.{t.name}, {bar}, {col0} + {cb * block}, {row0} + {rb}, {batch});"
                    if (cb or rb) else f"twill::tma_load({ptr}, tm.{t.name}, {bar}, {col0}, {row0}, {batch});")

    def _pinned_carries(self) -> list[str]:
        """Carried wgmma accumulators (register fragments) whose mma the prologue does not issue.
        Their constant start value is pinned before the steady loop: otherwise the compiler writes
        it on each path into the loop and around it (the loop may run zero times for all it
        knows), and ptxas, finding those writes laid out between a wgmma still in flight at the
        loop's exit and its wait, serializes every wgmma of the kernel (C7515)."""
        m = self.m
        return [name for name in self.registers()
                if m.carry_of(name) is not None and m.ops[name].opcode == "mma"
                and m.stage(name) == self.p.S - 1
                and fragment_type(m, m.values[name].type, self.groups).startswith(("twill::Frag<", "twill::FragS32<"))]

    # -- the windows -------------------------------------------------------------------------------
    def _program(self, out: Lines) -> None:
        m, p, S, U = self.m, self.p, self.p.S, self.p.U
        if S > 1:
            out("// ---- prologue: the first iterations enter the pipeline ----")
            for k in range(S - 1):
                self._window(out, p.window(self.role.name, ("prologue", k)))
        pinned = self._pinned_carries()
        if pinned and S > 1 and m.target.async_register_mma and any(
                m.ops[o].opcode == "mma" and len(m.ops[o].operands) == 3
                for o in p.window_ops(self.role.name, ("prologue", S - 2))):
            # The pin defines the accumulator's registers: made while an accumulating wgmma of the
            # prologue's last window is in flight, ptxas serialized every wgmma of the kernel
            # (C7515: the held-out attn_exp, two accumulators in one role). A fresh result in
            # flight there (FA3's S) compiles clean, and is not waited for.
            out("twill::wgmma_wait<0>();  // the prologue's wgmmas, before the start values are pinned")
        for name in pinned:
            out(f"for (int c = 0; c < {p.copies.get(name, 1)}; ++c) twill::fence_frag({local(name)}[c]);  "
                f"// {name}'s start value, in its registers before the loop")
        out("// ---- steady state: every op, each on its own iteration ----")
        out(f"int j = {S - 1};")
        if U == 1:
            with out.block("for (; j < n; ++j)"):
                self._window(out, p.window(self.role.name, ("steady", 0), 0))
            self._epilogue(out, 0)
        else:
            with out.block(f"for (; j + {U} <= n; j += {U})"):
                for u in range(U):
                    self._window(out, p.window(self.role.name, ("steady", 0), u))
            out("switch (n - j) {  // the last steady windows and the epilogue, at their buffer phase")
            for r in range(U):
                out(f"  case {r}: {{")
                out.depth += 2
                self.case = r
                for u in range(r):
                    self._window(out, p.window(self.role.name, ("steady", 0), u))
                self.case = None
                self._epilogue(out, r)
                out("break;")
                out.depth -= 2
                out("  }")
            out("  default:", "    break;", "}")

    def _epilogue(self, out: Lines, r: int) -> None:
        if self.p.S > 1:
            out("// ---- epilogue: the last iterations leave the pipeline ----")
            for e in range(self.p.S - 1):
                self._window(out, self.p.window(self.role.name, ("epilogue", e), r=r))

    def _window(self, out: Lines, w: Window) -> None:
        m = self.m
        label = {"prologue": f"prologue window {w.index} (J = {w.j0})", "steady": f"steady window J = {Inst('j', w.j0)}",
                 "epilogue": f"epilogue window {w.index} (J = {Inst('n', w.j0)})"}[w.kind]
        desc = ", ".join(f"{o}[{w.inst(m.stage(o))}]" for o in w.ops)
        out(f"{{  // {label}: {desc or 'nothing for this role'}")
        out.depth += 1
        self.acquired: set = set()
        self.loaded: dict = {}  # (value, instance) -> register copy read out of tensor memory
        self.scratched: dict = {}  # scratch array -> the instance this window wrote there (sm_90a)
        self.waited = None
        self.issued: list = []  # (value, instance) of this window's wgmma groups, in commit order
        self.complete: set = set()
        self.older_retired = False  # every wgmma group of the earlier windows is complete
        if w.key in self.prog.start_wait:
            out("twill::wgmma_wait<0>();  // the wgmmas of earlier windows whose results this window reads")
            self.waited = 0
            self.older_retired = True
            self._fence_async_results(out, boundary=True)
        for item in self.prog.releases_at_start.get(w.key, []):
            self._release(out, w, item)
        if w.key in self.prog.turn_close:
            roles = self.p.pingpong
            nxt = roles[(roles.index(self.role.name) + 1) % len(roles)]
            out(f"{self._turning(True)}twill::named_arrive({self.r.bars['turn:' + nxt]}, {self.turn_threads(nxt)});  "
                f"// {nxt}'s turn (ours ended with the last window)")
        for pos, op in enumerate(w.ops):
            self._op(out, w, pos, op)
        out.depth -= 1
        out("}")

    def _op(self, out: Lines, w: Window, pos: int, name: str) -> None:
        m, r = self.m, self.r
        stage = m.stage(name)
        it = w.inst(stage)
        begin, end = self.prog.turns.get((w.key, pos), (False, False))
        if begin:
            out(f"{self._turning(True)}twill::named_sync({r.bars['turn:' + self.role.name]}, "
                f"{self.turn_threads(self.role.name)});  // our turn on the tensor core")
        if m.is_load(name):
            self._load(out, w, name, it)
        else:
            self._compute(out, w, pos, name, it)
        if end:  # the turn ends before a release's wait for older wgmmas: the next role issues meanwhile
            roles = self.p.pingpong
            nxt = roles[(roles.index(self.role.name) + 1) % len(roles)]
            out(f"{self._turning(True)}twill::named_arrive({r.bars['turn:' + nxt]}, {self.turn_threads(nxt)});  "
                f"// {nxt}'s turn")
        for item in self.prog.releases_after.get((w.key, pos), []):
            self._release(out, w, item)

    def _turning(self, alone: bool = False) -> str:
        """The condition under which the ping-pong's turns run: always, but in a kernel that halves,
        not while a part idles (halves.py: the first part then has the tensor core to itself)."""
        if not self.r.parts:
            return ""
        return "if (!args.idle_parts) " if alone else " && !args.idle_parts"

    def turn_threads(self, role: str) -> int:
        """Threads meeting at `role`'s turn barrier: its own, and those of the role before it."""
        roles = self.p.pingpong
        prev = roles[(roles.index(role) - 1) % len(roles)]
        return self.m.role[role].threads + self.m.role[prev].threads

    def _load(self, out: Lines, w: Window, name: str, it: Inst) -> None:
        m = self.m
        chan = self.p.channels[name]
        t = m.tensor[ident(name)]
        ring = f"sm.ring_{chan.ident}"
        cond = "lane == 0" if not self.role.is_warpgroup else "threadIdx.x % 128 == 0 && wgi == 0"
        cond += halves.unless_idle(self.r.parts, halves.load_part(self.r, self.r.parts, name))
        with out.block(f"if ({cond})"):
            slot = ring_slot("it", chan.depth)
            out(f"const int it = {it};  // load {name} of iteration it into the slot of ring position {ring_pos('it')}",
                f"{ring}.wait_empty({ring_pos('it')});")
            dst, bar = f"sm.ld_{chan.ident}[{slot}]", f"&{ring}.full[{slot}]"
            any_pitch = anypitch.eligible(m, t)
            if any_pitch:  # rows at any pitch where the launch chose them (bulk_rows arrives itself)
                cond, call = anypitch.load_lines(t, dst, bar, *self.r._origin(t, "it"))
                out(f"if ({cond}) {call}")
            with out.block("else") if any_pitch else nullcontext():
                out(f"{ring}.expect_full({ring_pos('it')}, {t.tile_bytes});")
                self._tma_boxes(out, t, dst, bar, "it")

    def _compute(self, out: Lines, w: Window, pos: int, name: str, it: Inst) -> None:
        m = self.m
        op = m.ops[name]
        stage = m.stage(name)
        k = self.prog.hazards.get((w.key, pos))
        if (w.key, pos) in self.prog.older_hazards and self.older_retired:
            k = None  # the earlier windows' wgmmas are retired already
        if k is not None and (self.waited is None or self.waited > k):
            out(f"twill::wgmma_wait<{k}>();  // no wgmma still uses the registers {name} overwrites")
            self._retire(k)
            self._fence_async_results(out)
        args = []
        for i, operand in enumerate(op.operands):
            args.append(self._operand(out, w, pos, name, i, operand, stage))
        if (w.key, pos) in self.prog.carried and self.waited != 0:
            # an accumulator computed in its wgmma's registers whose value enters the loop's header:
            # with a wgmma in flight, ptxas serializes every wgmma (C7515; waits.py, _carried_into_loop)
            out(f"twill::wgmma_wait<0>();  // no wgmma in flight where {name}, carried into the loop, is computed")
            self._retire(0)
            self._fence_async_results(out)
        read_masks = self._mask(out, name, args, it)
        staged = self._scratch_operands(out, name, args, str(it))
        res, tmem_out = self._result(out, w, name, it, args)
        acc = self._umma_accumulate(name, it, args) if m.target.mma_commit and op.opcode == "mma" else "1"
        call = OpCall(m, op, self.role.name, res, tuple(args), self.row0(op.type.shape[0] if op.type else 64),
                      self.groups, str(it), acc, read_masks)
        if name in self.p.row_sums:
            code = exp2_code(call, f"{local(name)}_sums[{self.p.buffer(name, w, stage, 0)}]")
        else:
            code = emitter(m, op.opcode)(call)
        out(f"// {name} = {op.opcode} {', '.join(str(o) for o in op.operands)} (iteration {it})")
        if op.opcode == "store":
            if not self.role.is_warpgroup:
                raise EmitError(f"op '{name}': a store of register tiles runs on a warpgroup role, not {self.role.name}")
        if any("\n" in c for c in code):
            raise AssertionError("emitters return single lines")
        if any(line not in code for _, line in read_masks):  # (an emitter that reads it other than by _registers)
            raise EmitError(f"op '{name}': {op.opcode} reads its operand from shared memory other than into a register "
                            "tile, where a partial last tile is masked (ragged.py)")
        if m.target.mma_commit and op.opcode == "mma":
            self._umma_block(out, w, pos, name, it, args, code, staged)
        elif len(code) > 1 or op.opcode == "mma":
            with out.block(""):
                out(*code)
        else:
            out(*code)
        if name in self.r.tails:  # tail_mask: its elements past the extent become its fill
            if res is None or res.where != "reg":
                raise EmitError(f"op '{name}': tail_mask is emitted for a register tile only")
            dim, fill = self.r.tails[name]
            self._mask_past(out, name, dim, res.expr, res.type, it, fill)
        if tmem_out is not None:
            out(f"twill::frag_to_tmem({self.r.tmem_addr(name, it)}, {tmem_out});")
        if op.opcode == "mma":
            self.waited = None
            self.issued.append((name, str(it)))
        self._publish(out, w, name, it)

    def _scratch_operands(self, out: Lines, name: str, args: list, it: str) -> list:
        """The register operands of mma `name` (of iteration `it`) that the tensor core reads from
        a scratch tile: written there now (sm_90a; not again where an earlier mma of this window
        staged the same instance in the same array), or returned as (scratch array, operand) for
        the mma's own block to write (a commit-tracked mma). `args` then name the tile."""
        m = self.m
        staged = []  # (scratch array, register operand) the tensor core reads from memory
        for i, scratch in enumerate((self.p.scratch, self.p.scratch_b)):
            if name not in scratch or len(args) <= i or args[i].where != "reg":
                continue
            st = args[i]  # the role stages it in a tile
            arr = self.p.scratch_array(name, i)
            args[i] = Arg(st.value, st.type, "smem", f"sm.{arr}")
            if m.target.mma_commit:
                staged.append((f"sm.{arr}", st))
                continue
            if self.scratched.get(arr) == (st.value, it):
                out(f"// {st.value} of iteration {it} is in {arr} already")
                continue
            self.scratched[arr] = (st.value, it)
            t = st.type
            out(f"twill::wgmma_wait<0>();  // the last wgmma reading {arr} is done",
                f"twill::frag_to_tile<{ctype(t.dtype)}, {t.shape[0]}, {t.shape[1]}>(sm.{arr}, "
                f"{st.expr}, {self.row0(t.shape[0])});",
                "twill::fence_async_smem();",
                f"twill::named_sync({self.r.role_bar(self.role)}, {self.role.threads});  "
                f"// the whole tile is written")
            self._retire(0)
        return staged

    def _result(self, out: Lines, w: Window, name: str, it: Inst, args: list):
        """(where op `name` writes its result, the register fragment it writes first where the
        result then goes to tensor memory, or None)."""
        m = self.m
        op, stage = m.ops[name], m.stage(name)
        res, tmem_out = None, None
        if op.has_result and op.type is not None:
            streamed = op.opcode in TMEM_STREAMED and args and args[0].where in ("tmem", "init")
            if self.p.in_tmem(name) and (op.opcode == "mma" or streamed):
                res = Arg(name, op.type, "tmem", self.r.tmem_addr(name, it))
            elif self.p.in_tmem(name):  # computed in registers, then stored to tensor memory
                tmem_out = f"{local(name)}_out"
                out(f"{fragment_type(m, op.type, self.groups)} {tmem_out};")
                res = Arg(name, op.type, "reg", tmem_out)
            else:
                b = self.p.buffer(name, w, stage, 0)
                res = Arg(name, op.type, "reg", f"{local(self.p.storage(name))}[{b}]")
                if name in self.p.shared_regs:
                    out(f"// {name} takes the registers of {self.p.alias[name]}, which no longer needs them")
                elif name in self.p.alias:
                    out(f"// {name} is computed in the registers of {self.p.alias[name]}, which accumulates it in place")
        return res, tmem_out

    def _mask(self, out: Lines, name: str, args, it: Inst) -> None:
        """Before the first rowmax / exp2 of a value along the loop, on iteration n - 1: where
        its tile is partial, its elements past the loop's extent become -inf in place. Only in
        the role's kTail instance, which launch() runs for a partial last tile alone, so that a
        loop of whole tiles runs the code it ran before masks existed: their code moves ptxas's
        register allocation (one form spilled 56 bytes in the 192-key FA3 kernel). (Run after
        the loop instead, the last steady windows doubled the code after the loop, and ptxas
        serialized the wgmmas of the 128- and 192-key kernels.)"""
        if name not in self.r.masks:
            return ()
        value, dim = self.r.masks[name]
        a = args[0]
        if a.where == "smem" and self.m.is_load(value):  # a loaded tile filled with -inf (ragged._filled_read):
            # masked in the register copy the op reads it into (ops._registers, its temporary `arg0`), after
            # the copy and before the op computes: the returned line, which the emitter places there
            line = self._mask_line(value, dim, f"{local(name)}_arg0", a.type, it)  # (OpCall.temp("arg0"))
            return ((0, line),) if line else ()
        if a.where != "reg" or a.view:
            raise EmitError(f"op '{name}' reads {value} from {a.where}: a partial tile is masked in registers only")
        self._mask_past(out, value, dim, a.expr, a.type, it)
        return ()

    def _mask_past(self, out: Lines, value: str, dim: int, expr: str, t, it: Inst, fill: float | None = None) -> None:
        """`value`'s instance `it` in the registers `expr`: where it is iteration n - 1 of a partial
        last tile, its elements past the loop's extent become -inf (before its first reader in this
        role, `_mask`, or before it is handed to another role, `Operands._publish`)."""
        line = self._mask_line(value, dim, expr, t, it, fill)
        if line:
            out(line)

    def _mask_line(self, value: str, dim: int, expr: str, t, it: Inst, fill: float | None = None) -> str:
        """`_mask_past`'s line, or "" where instance `it` is never iteration n - 1."""
        # Where this instance is iteration n - 1: never in the prologue (n >= kStages); at n + off
        # in the epilogue; at n - r + off in `case r` after the loop; in the loop (j <= n - kUnroll)
        # only in its last window, and there only on the loop's last pass, tested at run time.
        if it.base == "":
            return ""
        if it.base == "n" or self.case is not None:
            if it.off != (-1 if it.base == "n" else self.case - 1):
                return ""
            last = ""
        elif it.off == self.p.U - 1:
            last = f"({it}) == n - 1 && "
        else:
            return ""
        # (kernel<..., true> runs only for a partial tile, but without the test of loop_tail ptxas
        # spilled 4 bytes in the 192-key kernel's)
        what = "are absent" if fill is None else f"are {fill:g} (tail_mask)"
        if fill is None and self.m.target.register_fragments:  # -inf before a rowmax / exp2
            call = f"twill::mask_past<{dim}>({expr}, {self.row0(t.shape[0])}, {splits.loop_tail(self.m)})"
        else:  # a tail_mask's fill, or sm_100a's rows of a thread (tail_*.cuh)
            call = (f"twill::mask_tail<{dim}>({expr}, {self.row0(t.shape[0])}, {splits.loop_tail(self.m)}, "
                    f"{_fill_literal(float('-inf') if fill is None else fill)})")
        return (f"if constexpr (kTail) if ({last}{splits.loop_tail(self.m)} < kLoopStep) {call};  "
                f"// a partial last tile: {value}'s {('rows', 'columns')[dim]} past the loop's extent {what}")


def _fill_literal(value: float) -> str:
    """A C++ float of a tail_mask's fill."""
    if value != value:
        return "NAN"
    if value in (float("inf"), float("-inf")):
        return ("-" if value < 0 else "") + "INFINITY"
    return f"{float(value)!r}f".replace("e+", "e")
