"""`Renderer`'s kernel: the `__global__` function of cuda_runtime/kernel.tpl filled in (its tensor
maps, the mbarriers' initial counts, tensor memory where the target has it) and the dispatch of
each warpgroup to its role's function, with its `setmaxnreg` budget and, on a persistent grid, a
loop over the CTA's tiles."""
from __future__ import annotations

import re

from . import splits
from .lines import Lines
from .model import ident
from .template import fill
from .windows import Channel

# How the kernel finds `Smem` in the dynamic shared memory (the holes smem and smem_check of
# kernel.tpl, by Target.shared_smem); the emitted comment says why.
SHARED_SMEM = dict(
    smem=["// Smem at the start of the dynamic shared memory, which the declaration aligns to 1024 bytes (the",
          "// 128-byte swizzle's period; thread 0 checks it below). Through the array itself, not its address",
          "// as an integer rounded up, the compiler keeps the address space: every access through sm is an",
          "// ld.shared / st.shared at a constant offset, where the integer round trip made them generic.",
          "extern __shared__ __align__(1024) unsigned char smem_raw[];",
          "Smem& sm = *reinterpret_cast<Smem*>(smem_raw);"],
    smem_check=["if (twill::smem_addr(smem_raw) % 1024 != 0) __trap();  // Smem's tiles need the alignment"])
INTEGER_SMEM = dict(
    smem=["extern __shared__ unsigned char smem_raw[];",
          "Smem& sm = *reinterpret_cast<Smem*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));"],
    smem_check=[])


def _tiles(role_fn: str, persistent: bool, trips: str, copy: int = 0, copies: int = 1, turn: int = 0,
           hidden: bool = False, tile_args: bool = False) -> str:
    """A role's call for each of its CTA's tiles (see twill::tile_of): the one tile of the block
    index, or (kernel<true>, where the kernel allows it) a loop over several. Each tile's ring
    positions continue the last one's (`tile.pos`: the iterations of the CTA's earlier tiles,
    modulo kPhasePeriod, where every ring's slot and parity repeat), so a tile may run any number
    of iterations, `trips` (a C expression of `twill_tile`: args.iters, or a causal tile's own).
    Tile copy `copy` of `copies` (copies.py) takes every copies-th tile, after the copy before
    has passed its ring waits (named barrier `turn`), and counts the positions of the tiles it
    skips; on a grid of one tile per CTA, copy 0 alone computes it.

    `hidden`: the one tile's ring position (0) goes through an empty asm. Knowing it, nvcc folds it
    into every ring slot of the unrolled steady loop and may keep what it derives live across the
    loop (the held-out attn_d64's consumer: 255 registers and 296 bytes spilled in kernel<false>,
    211 and none hidden), but elsewhere the constant compiles better (the golden k192 attention's
    kernel<false, true>: clean, 56 bytes spilled hidden): the ptxas loop chooses.

    `tile_args`: each tile's roles (and its tile_at and trip count) read the kernel's Args through a
    pointer that goes through an empty asm once per tile (`twill_args`; the parameter is
    __grid_constant__, so taking its address copies nothing). Knowing the parameters the same on every
    tile, nvcc loads every one the tile loop reads before the loop, and ptxas then holds them in
    registers across it: the store's pointers and offsets, the tile order's divisors, each live through
    the main loop where the one-tile kernel reads them from the constant bank where it uses them. On
    the FA3 causal forward (h200 schedule, two wgmmas in flight per consumer at 240 registers) that was
    what serialized kernel<true>'s wgmmas (C7512); per tile it compiles clean. The price: a parameter
    read in the main loop is a load there (the exp2 scale, the mask's row base)."""
    one = f"{role_fn}(sm, tm, args, n, tile_at(args, blockIdx.x, 0));"
    if hidden:
        one = (f"{{ twill::TileIdx twill_one = tile_at(args, blockIdx.x, 0);  asm volatile(\"\" : \"+r\"(twill_one.pos));  "
               f"{role_fn}(sm, tm, args, n, twill_one); }}")
    if copies > 1 and not persistent:  # one tile per CTA: copy 0 computes it
        return one if copy == 0 else "(void)0;  // a tile copy: this kernel computes one tile per CTA"
    if not persistent:
        return one
    a = "twill_args" if tile_args else "args"
    call = f"{role_fn}(sm, tm, {a}, twill_n, twill_tile);"
    if copies > 1:
        turn_sync = f"if (round > 0) twill::named_sync({turn}, {128 * copies});  "
        call = f"if (round % {copies} == {copy}) {{ twill_tile.pos = twill_pos;  {turn_sync}{call} }}"
    else:
        call = f"twill_tile.pos = twill_pos;  {call}"
    fresh = ("const Args* twill_ap = &args;  asm volatile(\"\" : \"+l\"(twill_ap));  const Args& twill_args = *twill_ap;  "
             if tile_args else "")
    trips = re.sub(r"\bargs\b", a, trips)
    loop = (f"if constexpr (kTiles) {{ int twill_pos = 0;  for (int t = blockIdx.x, round = 0; t < args.tiles; "
            f"t += static_cast<int>(gridDim.x), ++round) {{ {fresh}twill::TileIdx twill_tile = tile_at({a}, t, round);  "
            f"const int twill_n = {trips};  {call}  twill_pos = (twill_pos + twill_n) % kPhasePeriod; }} }} else")
    if copies > 1:
        return loop + (f" {{ {one} }}" if copy == 0 else " {}")
    return f"{loop} {one}"


class Kernel:
    """`Renderer`'s kernel and its role dispatch (see the module docstring)."""

    # -- the kernel -------------------------------------------------------------------------------
    def _kernel(self, out: Lines) -> None:
        """The kernel (cuda_runtime/kernel.tpl): its tensor maps, the mbarriers' initialization,
        tensor memory where the target has it, and the role dispatch."""
        m = self.m
        maps = self.tma_tensors()
        tmem = m.target.tensor_memory
        alloc = [f"if (threadIdx.x / 32 == 0) twill::tmem_alloc(&sm.tmem_base, {self.tmem_columns()});",
                 "twill::tmem_fence_before();"]
        free = ["twill::tmem_fence_before();", "__syncthreads();", "twill::tmem_fence_after();",
                f"if (threadIdx.x / 32 == 0) twill::tmem_dealloc(sm.tmem_base, {self.tmem_columns()});"]
        dispatch = Lines()
        self._dispatch(dispatch)
        out.out.extend(fill(
            "kernel.tpl",
            params=", ".join([f"const __grid_constant__ CUtensorMap tm_{t.name}" for t in maps]
                             + [f"const {'__grid_constant__ ' if self._tile_args() else ''}Args args"]),
            iters=f"const int n = {self._trips('tile_at(args, blockIdx.x, 0)')};"
                  + (f"  // this {self._blocks()} (kernel<true>: each tile's own)" if self.causal.masks else ""),
            maps=[f"tm.{t.name} = &tm_{t.name};" for t in maps] or ["tm.unused = 0;"],
            rings=["sm.ring_{}.init({}, {});".format(chan.ident, *self._counts(chan)) for chan in self.p.channels.values()],
            input_readers=str(self.input_reader_warps()),
            barriers=self._barrier_inits(),
            prefetch=[f"twill::tma_prefetch(&tm_{t.name});" for t in maps],
            tmem_alloc=alloc if tmem else [], tmem_ready=["twill::tmem_fence_after();"] if tmem else [],
            dispatch=dispatch.out, tmem_free=free if tmem else [],
            ctas_per_sm="1" if self.m.ctas_per_sm == 1 else "kCtasPerSm",
            **(SHARED_SMEM if self.m.target.shared_smem else INTEGER_SMEM)).rstrip("\n").split("\n"))
        out("")

    def _trips(self, tile: str) -> str:
        """The loop's iterations for `tile` (a C expression of a twill::TileIdx): a causal tile's own
        (ragged.causal_iters), else the problem's."""
        return f"causal_iters(args, {tile})" if self.causal.masks else splits.trips(self.m, tile) or "args.iters"

    def _tile_args(self) -> bool:
        """kernel<true>'s roles read Args per tile (`_tiles`): where the model asks for it and there is a kernel<true>."""
        return self.m.tile_args and self.persistent()

    def _blocks(self) -> str:
        """What a causal loop's iterations are, for the kernel's comment."""
        return "key tile's query blocks" if self.causal.backward else "query tile's key blocks"

    def _barrier_inits(self) -> list[str]:
        """The kernel's mbarriers other than the rings' and the inputs': scratch tiles read, the
        last tensor-memory outputs, the values handed over after the loop."""
        m = self.m
        return ([f"twill::mbar_init(&sm.done_{ident(name)}, 1);" for name in self.scratch_mmas()]
                + [f"twill::mbar_init(&sm.final_{ident(value)}, 1);" for value in self.tmem_finals()]
                + [f"twill::mbar_init(&sm.final_{ident(value)}, {m.role[producer].threads});"
                   for value, (producer, _) in self.p.handoffs.items()])

    def _counts(self, chan: Channel) -> tuple[int, int]:
        m = self.m
        producer = m.role[chan.producer]
        if chan.kind == "tma" or (chan.kind == "tmem" and m.ops[chan.value].opcode == "mma"):
            full = 1
        else:
            full = producer.threads
        empty, idle = 0, []
        for r in chan.consumers:
            last = self.p.last_reader(r, chan.value)
            # one arrival per consumer warp (release_by_warp), or the mma's commit
            arrivals = 1 if (m.target.mma_commit and m.ops[last.op].opcode == "mma") else m.role[r].threads // 32
            empty += arrivals
            if self.parts.get(r):  # a part that may idle arrives only while it does not (halves.py)
                idle.append(f" - {arrivals} * ((args.idle_parts >> {self.parts[r]}) & 1)")
        if idle and len(idle) < len(chan.consumers):
            return full, f"{empty}{''.join(idle)}"
        return full, max(empty, 1)

    def role_call(self, role) -> str:
        return f"role_{role.ident}<kTail>" if role.name in self.masked_roles else f"role_{role.ident}"

    def warpgroup_calls(self, g, call) -> list[str]:
        """What warpgroup `g` runs: its warpgroup role's call, or each 1-warp role's on its warp; `call` makes
        the text of a call from the role's function (role_call). A sequence's one kernel reads it too
        (seqfuse.py)."""
        m = self.m
        role = m.role[g.roles[0]]
        if role.is_warpgroup:
            body = [call(self.role_call(role))]
            if any(st.role == role.name for st in self.p.staging.values()):
                body.append("if (threadIdx.x % 128 == 0) twill::bulk_wait_all();  // its TMA stores are done")
            return body
        return [f"{'if' if k == 0 else 'else if'} (warp == {m.role[name].first_warp % 4}) " + call(self.role_call(m.role[name]))
                for k, name in enumerate(g.roles)]

    def _dispatch(self, out: Lines) -> None:
        m = self.m
        budgets = {g.registers for g in m.warpgroups}
        cap = m.launch_registers
        out("const int warpgroup = threadIdx.x / 128;",
            "const int warp = (threadIdx.x / 32) % 4;",
            "(void)warp;")
        groups = list(m.warpgroups)
        branches = []
        i = 0
        while i < len(groups):
            g = groups[i]
            role = m.role[g.roles[0]]
            trips = self._trips("twill_tile")
            if role.is_warpgroup:
                span = role.warpgroups
                cond = (f"warpgroup == {g.index}" if span == 1 else
                        f"warpgroup >= {g.index} && warpgroup < {g.index + span}")
                body = self.warpgroup_calls(g, lambda fn: _tiles(fn, self.persistent(), trips, g.copy, m.tile_copies,
                                                                 self.bars.get("copies", 0), m.hidden_position,
                                                                 self._tile_args()))
                i += span
            else:
                cond = f"warpgroup == {g.index}"
                body = self.warpgroup_calls(g, lambda fn: _tiles(fn, self.persistent(), trips, hidden=m.hidden_position,
                                                                 tile_args=self._tile_args()))
                i += 1
            if len(budgets) > 1:
                fn = "inc" if g.registers > cap else "dec"
                if g.registers != cap:
                    body.insert(0, f"twill::setmaxnreg_{fn}<{g.registers}>();  // register budget of this warpgroup")
            branches.append((cond, body))
        for k, (cond, body) in enumerate(branches):
            head = ("if" if k == 0 else "} else if") + f" ({cond}) {{" if k < len(branches) - 1 or k == 0 else "} else {"
            if len(branches) == 1:
                head = f"if ({cond}) {{"
            out(head)
            out.depth += 1
            out(*body)
            out.depth -= 1
        out("}")
