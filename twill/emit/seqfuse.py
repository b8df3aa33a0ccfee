"""One kernel for loops in sequence over the same row tiles (docs/emit-cuda.md, "One kernel for loops over the same
row tiles").

A sequence whose loops all walk one grid of row tiles (LayerNorm's mean, variance and normalize loops; a
softmax's max, sum and normalize) runs, where `plan` allows it, as one kernel K.fused.cu: a CTA takes a row
tile (or, persistent, several in turn) and runs loop 1's roles on it, then loop 2's, ... with a CTA-wide
barrier between the loops. Each loop keeps its own solved schedule: its role functions, rings, mbarriers,
Args and tensor maps are the ones its own kernel K.LOOP.cu has (its namespace is emitted unchanged into the
one file); only the dispatch is new. The CTA has the most warpgroups any loop needs; in loop k warpgroup w runs
what loop k's kernel runs on it, at loop k's `setmaxnreg` budget for it (raised where the registers allow:
PATH_FLOOR, `_grown`), and a warpgroup loop k does not use idles at the floor, so every loop's budgets must fit
the registers the CTA is launched with. The loops' Smem lie side by side (their mbarriers are initialized once and
never reused for another loop).

The hand-over stays where the loops' kernels put it: the earlier loop's out_CARRY in global memory, which the
later loop's load role reads back by TMA (an L2 hit: the CTA wrote those rows a moment before). Between the
loops every thread fences its generic-proxy writes against the async proxy (`fence.proxy.async.global`), then
`bar.sync 0` with every thread of the CTA (each from its own warpgroup's path). Where a later loop re-reads the
same input rows, it re-reads them (L2-hot).

Refused (`FusePlan.why_not`; the sequence then runs one kernel per loop, as before): loops on tensor memory,
causal trip counts, halved row parts, tile copies, a grid of columns (tiles_n), rows of different tile sizes,
an mma loop whose wgmma width depends on the threads it was launched with, budgets or shared memory that do
not fit one CTA. At the call, K.py uses the one kernel by default only where no loop is split by columns (a
loop that splits ran faster alone on the H200: its grid is wider), and on request (fused=True, each loop one split).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ..registers import launch_registers
from .binding import entry_problem, entry_struct
from .host import host_launcher, launch_holes
from .kernel import SHARED_SMEM
from .lines import Lines
from .model import ident
from .template import fill

# A warpgroup's least budget in the one kernel, where the registers allow: its path also keeps the tile loop's
# state (t, round, a ring position per loop) across the loops. LayerNorm's load warp at its own 24: 8-16 bytes
# spilled; at 32 and above none (nvcc 12, sm_90a).
PATH_FLOOR = 40

WHY_FUSED = ("one kernel: every loop walks the same row tiles, so a CTA runs each loop's roles on its tile in "
             "turn, a CTA-wide barrier between the loops")


@dataclass(frozen=True)
class FusePlan:
    """Whether and how a sequence's loops run as one kernel."""

    why_not: str = ""  # "" where they do; else why each loop keeps its own kernel
    threads: int = 0  # the one CTA's threads: the most warpgroups of any loop
    launch: int = 0  # registers per thread the CTA is launched with
    budgets: tuple[tuple[int, ...], ...] = ()  # per loop, per warpgroup: its setmaxnreg budget (idle: the floor)
    persistent: bool = False  # every loop's kernel may loop over tiles, so the one kernel may
    masks: bool = False  # some loop masks a partial last tile (kernel<..., true>)


def _rows(r) -> set[int]:
    """The row-tile sizes of a loop's tensors that move with the grid's rows."""
    return {t.tile[d] for t in r.m.tensors for d, label in t.placed_dims() if t.axes[d] == "m"}


def _refusal(r) -> str:
    """Why loop `r` (a Renderer) cannot run inside a sequence's one kernel, or ""."""
    m = r.m
    if m.target.tensor_memory or not m.target.shared_smem:
        return "its target keeps accumulators in tensor memory, which a loop's kernel allocates for itself"
    if r.causal.masks:
        return "its tiles run their own (causal) trip counts"
    if r.parts or m.tile_copies > 1:
        return "its kernel halves its row parts or copies its computing warpgroup over tiles"
    if any(t.axes[d] == "n" for t in m.tensors for d, _ in t.placed_dims()):
        return "its grid walks columns too (tiles_n): the loops' tiles need not be one CTA's rows"
    if r.split and not _column(r):
        return "its loop is split over the grid, not by columns"
    return ""


def _column(r) -> bool:
    from .colsplit import is_column
    return is_column(r.m.graph)


def plan(loops: list[tuple[str, object]]) -> FusePlan:
    """The one kernel of `loops` ((name, Renderer) in order), or why not (FusePlan.why_not)."""
    if len(loops) < 2:
        return FusePlan("a single loop")
    for name, r in loops:
        why = _refusal(r)
        if why:
            return FusePlan(f"loop {name}: {why}")
    rows = set().union(*(_rows(r) for _, r in loops))
    if len(rows) != 1:
        return FusePlan(f"the loops' row tiles differ ({', '.join(map(str, sorted(rows))) or 'none'} rows)")
    lim = loops[0][1].m.machine.limits
    threads = max(r.m.threads for _, r in loops)
    launch = launch_registers(lim, threads)
    for name, r in loops:
        if r.m.mma and r.m.launch_registers != launch:
            return FusePlan(f"loop {name}: its wgmmas were sized for {r.m.launch_registers} registers at launch, "
                            f"the one kernel of {threads} threads has {launch}")
    budgets = []
    for name, r in loops:
        own = [g.registers for g in r.m.warpgroups]
        b = tuple(own + [lim.min_registers] * (threads // 128 - len(own)))
        raised = tuple(max(x, PATH_FLOOR) for x in b)
        b = _grown(raised if 128 * sum(raised) <= threads * launch else b, threads * launch, launch)
        if 128 * sum(b) > threads * launch:
            return FusePlan(f"loop {name}: its budgets ({', '.join(map(str, b))} per warpgroup) exceed the "
                            f"{threads * launch} registers a CTA of {threads} threads is launched with")
        budgets.append(b)
    # (no KiB of alignment slack as a loop's own launch adds: the declaration aligns Smem, which the kernel checks)
    smem = sum(r.p.smem_bytes() for _, r in loops)
    if smem > lim.smem_bytes:
        return FusePlan(f"the loops' shared memory side by side ({smem} bytes) exceeds smem_bytes ({lim.smem_bytes})")
    return FusePlan("", threads, launch, tuple(budgets), all(r.persistent() for _, r in loops),
                    any(r.masked_roles for _, r in loops))


def compiled(fp: FusePlan, text: str, arch: str) -> FusePlan:
    """`fp` as ptxas finds its one kernel `text`: refused (why_not) where it spills or serializes a wgmma. Each
    loop's own kernel was checked by emit-cuda's ptxas loop; the one kernel's warpgroups run every loop's code on
    one path and ptxas compiles that path at no more than 255 registers, whatever the budgets (softmax_online's
    spilled 32 bytes at 256 and 256, where its loops' kernels spill none). Unchanged where nvcc is absent."""
    from ..ptxas import compile_kernel, find_nvcc
    if fp.why_not or find_nvcc() is None:
        return fp
    report = compile_kernel(text, arch)
    if report.clean:
        return fp
    return replace(fp, why_not=f"ptxas on the one kernel: {report.summary()} (each loop's own kernel runs instead)")


def _grown(budgets: tuple[int, ...], pool: int, launch: int) -> tuple[int, ...]:
    """The budgets with the registers the CTA is launched with and no warpgroup takes given to the largest, up to
    the launch count (no setmaxnreg at all there): the one kernel's paths keep the tile loop's state too, and
    softmax_fused's computing warpgroup at its own 248 spilled 40 bytes in the one kernel, 8 at 256."""
    b = list(budgets)
    spare = pool - 128 * sum(b)
    for w in sorted(range(len(b)), key=lambda i: -b[i]):
        add = min(spare // 128 // 8 * 8, launch - b[w])
        if add > 0:
            b[w] += add
            spare -= 128 * add
    return tuple(b)


def fused_path(kernel_path: str) -> str:
    """K.cu -> K.fused.cu, where the sequence's one kernel is written."""
    path = Path(kernel_path)
    stem = path.name[:-3] if path.name.endswith(".cu") else path.name
    return str(path.with_name(f"{stem}.fused.cu"))


def fused_ns(kernel: str) -> str:
    return f"twill_{ident(kernel)}_fused"


# ---- the kernel file ------------------------------------------------------------------------------

def fused_source(kernel: str, loops: list[tuple[str, object]], fp: FusePlan) -> str:
    """K.fused.cu: the runtime (the union of the loops' parts), each loop's namespace as its own kernel file has
    it, and the one kernel with its launch."""
    out = Lines()
    first = loops[0][1]
    out(f"// Generated by `twill emit-cuda` from the schedules of the {len(loops)} loops in sequence of kernel "
        f"'{kernel}' ({first.m.arch}). Regenerate rather than edit.",
        f"// The loops ({', '.join(n for n, _ in loops)}) run as {WHY_FUSED} (twill/emit/seqfuse.py); each loop's "
        "roles, rings and budgets are its own schedule's.",
        f"// The CTA: {fp.threads} threads, launched with {fp.launch} registers each; per loop, each warpgroup's "
        "setmaxnreg budget:")
    for (name, r), b in zip(loops, fp.budgets):
        roles = "; ".join(f"{x.name} {x.warps} warp(s) from warp {x.first_warp}" for x in r.m.roles)
        out(f"//   {name}: {', '.join(map(str, b))}  ({roles})")
    out(f"// Build: nvcc -std=c++17 -gencode=arch=compute_{first.m.arch[3:]},code={first.m.arch} -c FILE.cu")
    body, parts = None, []
    for _, r in loops:
        b, w = r.runtime_parts()
        body = body or b
        if len(b) > len(body):  # the vocabulary's part (needs_extension): the loop that needs it has the longer body
            body = b
        parts += [x for x in w if x not in parts]
    runtime = body + ("\n".join(parts) + "\n" if parts else "") + "}  // namespace twill\n"
    out.out.extend(runtime.lstrip("\n").rstrip("\n").split("\n"))
    out("")
    for _, r in loops:
        r.device(out)
    out(f"namespace {fused_ns(kernel)} {{")
    out("")
    _smem(out, loops, fp)
    _kernel(out, loops, fp)
    out(f"}}  // namespace {fused_ns(kernel)}")
    out("")
    out("#ifndef TWILL_NO_HOST")
    for _, r in loops:  # each loop's own host side: its Problem, tensor maps (their cache) and launch
        text = host_launcher(r)
        text = text.split("#ifndef TWILL_NO_HOST\n", 1)[1].split("#ifdef TWILL_MAIN", 1)[0]  # (no test main)
        out.out.extend(text.rstrip("\n").split("\n"))
        out("")
        out.out.extend(_prepare(r).rstrip("\n").split("\n"))
        out("")
    _launch(out, kernel, loops, fp)
    out("#endif  // TWILL_NO_HOST")
    return out.text()


def _prepare(r) -> str:
    h = launch_holes(r)
    maps = [f"maps[{i}] = tm_{t.name};" for i, t in enumerate(r.tma_tensors())]
    splits = (["if (p.splits != 1) return cudaErrorInvalidValue;  // the one kernel runs each loop as one split"]
              if r.split else [])
    return fill("prepare.tpl", ns=r.ns, extent_check=h["extent_check"], splits=splits, checks=h["checks"],
                args=h["args"], maps=maps)


def _smem(out: Lines, loops, fp: FusePlan) -> None:
    out(f"constexpr int kThreads = {fp.threads};  // the most warpgroups of any loop",
        "",
        "// ---- shared memory: each loop's Smem, side by side (each starts on 1024 bytes: its tiles' alignment) ----",
        "struct Smem {")
    for name, r in loops:
        out(f"  {r.ns}::Smem {name};")
    out("};",
        f"static_assert(sizeof(Smem) <= {loops[0][1].m.machine.limits.smem_bytes}, \"the loops' shared memory "
        "side by side exceeds the machine's smem_bytes\");",
        "")


def _params(loops) -> list[str]:
    return [f"const __grid_constant__ CUtensorMap tm_{name}_{t.name}" for name, r in loops for t in r.tma_tensors()] \
        + [f"const {r.ns}::Args args_{name}" for name, r in loops]


def _transition(have: int, want: int) -> list[str]:
    if have == want:
        return []
    return [f"twill::setmaxnreg_{'inc' if want > have else 'dec'}<{want}>();  // this loop's budget of the warpgroup"]


def _loop_calls(r, w: int) -> list[str]:
    """What loop r's kernel runs on warpgroup w (nothing where its roles have fewer warpgroups)."""
    call = lambda fn: f"{fn}(sm, tm, args, n, tile);"  # noqa: E731
    for g in r.m.warpgroups:
        role = r.m.role[g.roles[0]]
        span = role.warpgroups if role.is_warpgroup else 1
        if g.index <= w < g.index + span:
            return r.warpgroup_calls(g, call)
    return []


def _warpgroup_path(w: int, loops, fp: FusePlan) -> list[str]:
    """Warpgroup w's whole path through the kernel: for each row tile, each loop's budget, role calls and the
    barrier after it. Each warpgroup has its own path, not one path branching per loop, because ptxas allocates
    the code after a setmaxnreg within its budget up to the next one: a tile loop shared by every warpgroup
    compiled the computing roles within the producer's 24 registers (3 KB of spills in LayerNorm's kernel)."""
    out = Lines()
    have = fp.launch
    if fp.persistent:  # each round of the tile loop starts at the last loop's budget
        out(*_transition(have, fp.budgets[-1][w]))
        have = fp.budgets[-1][w]
        out(*[f"int twill_pos_{name} = 0;  // loop {name}'s ring position (TileIdx::pos), modulo its kPhasePeriod"
              for name, _ in loops],
            "for (int t = blockIdx.x, round = 0; "
            f"t < (kTiles ? args_{loops[0][0]}.tiles : static_cast<int>(blockIdx.x) + 1); "
            "t += static_cast<int>(gridDim.x), ++round) {")
    else:
        out("{  // one row tile per CTA (a loop's kernel cannot loop over tiles)",
            "  const int t = blockIdx.x, round = 0;")
    out.depth += 1
    for (name, r), budgets in zip(loops, fp.budgets):
        calls = _loop_calls(r, w)
        out(f"{{  // loop {name}" + ("" if calls else ": idle"))
        out.depth += 1
        out(*_transition(have, budgets[w]))
        have = budgets[w]
        if calls:
            out(f"using namespace {r.ns};  // its role functions, tile_at, split_iters, kPhasePeriod",
                f"{r.ns}::Smem& sm = fsm.{name};",
                f"const {r.ns}::Maps& tm = tm_{name};",
                f"const {r.ns}::Args& args = args_{name};",
                "twill::TileIdx tile = tile_at(args, t, round);",
                *(["tile.pos = twill_pos_{name};".replace("{name}", name)] if fp.persistent else []),
                f"const int n = {r._trips('tile')};",
                *calls)
            if fp.persistent:
                out(f"twill_pos_{name} = (twill_pos_{name} + n) % kPhasePeriod;")
        out.depth -= 1
        out("}",
            "// its writes (a hand-over the next loop reads back by TMA) seen by the async proxy, every role done",
            "asm volatile(\"fence.proxy.async.global;\" ::: \"memory\");",
            "twill::named_sync(0, kThreads);  // bar.sync 0: every warp of the CTA, from its own warpgroup's path")
    out.depth -= 1
    out("}")
    return out.out


def _kernel(out: Lines, loops, fp: FusePlan) -> None:
    out("// ---- the kernel: each warpgroup runs, for each row tile, each loop's roles on it in order; "
        "kernel<true, ...>",
        "// loops over several row tiles (each loop's ring positions continuing its own), kernel<..., true> masks",
        "// a partial last tile in the loops whose roles mask one.",
        "template <bool kTiles, bool kTail>",
        f"__global__ void __launch_bounds__(kThreads, 1) kernel({', '.join(_params(loops))}) {{")
    out.depth += 1
    out(*SHARED_SMEM["smem"][:-1],
        "Smem& fsm = *reinterpret_cast<Smem*>(smem_raw);")
    for name, r in loops:
        maps = r.tma_tensors()
        out(f"{r.ns}::Maps tm_{name};",
            *([f"tm_{name}.{t.name} = &tm_{name}_{t.name};" for t in maps] or [f"tm_{name}.unused = 0;"]))
    out("if (threadIdx.x == 0) {")
    out.depth += 1
    out(*SHARED_SMEM["smem_check"])
    for name, r in loops:
        out(f"{{  // loop {name}'s mbarriers", f"  {r.ns}::Smem& sm = fsm.{name};")
        out.depth += 1
        out(*["sm.ring_{}.init({}, {});".format(chan.ident, *r._counts(chan)) for chan in r.p.channels.values()],
            f"for (int c = 0; c < {r.ns}::kInputCopies; ++c) {{",
            "  twill::mbar_init(&sm.inputs_ready[c], 1);",
            f"  twill::mbar_init(&sm.inputs_free[c], {r.input_reader_warps()});  // one arrival per reading warp",
            "}",
            *r._barrier_inits())
        out.depth -= 1
        out("}")
    out("twill::mbar_fence_init();",
        *[f"twill::tma_prefetch(&tm_{name}_{t.name});" for name, r in loops for t in r.tma_tensors()])
    out.depth -= 1
    out("}",
        "__syncthreads();",
        "const int warpgroup = threadIdx.x / 128;",
        "const int warp = (threadIdx.x / 32) % 4;",
        "(void)warp;")
    runs = []  # consecutive warpgroups of the same path: one branch
    for w in range(fp.threads // 128):
        path = _warpgroup_path(w, loops, fp)
        if runs and runs[-1][2] == path:
            runs[-1][1] = w + 1
        else:
            runs.append([w, w + 1, path])
    for k, (lo, hi, path) in enumerate(runs):
        cond = f"warpgroup == {lo}" if hi == lo + 1 else f"warpgroup >= {lo} && warpgroup < {hi}"
        out(f"if ({cond}) {{" if k == 0 else "} else {" if k == len(runs) - 1 else f"}} else if ({cond}) {{")
        out.depth += 1
        out(*path)
        out.depth -= 1
    out("}")
    out.depth -= 1
    out("}", "")


def _launch(out: Lines, kernel: str, loops, fp: FusePlan) -> None:
    first = loops[0][0]
    ns0 = loops[0][1].ns
    out(f"namespace {fused_ns(kernel)} {{",
        "",
        "static std::atomic<uint64_t> smem_raised[4];  // per kernel variant: the devices whose limit launch() raised",
        "",
        "// Every loop's Problem as its own launch() takes it; the loops must walk one grid of row tiles.",
        "inline cudaError_t launch(" + ", ".join(f"const {r.ns}::Problem& p_{name}" for name, r in loops)
        + ", cudaStream_t stream = 0) {")
    out.depth += 1
    out("cudaError_t err = cudaSuccess;")
    for name, r in loops:
        out(f"{r.ns}::Args args_{name};",
            f"CUtensorMap maps_{name}[{max(1, len(r.tma_tensors()))}];",
            f"bool tiles_{name} = false, tail_{name} = false;",
            f"if ((err = {r.ns}::fused_prepare(p_{name}, args_{name}, maps_{name}, &tiles_{name}, &tail_{name})) != "
            "cudaSuccess) return err;")
    for name, _ in loops[1:]:
        out(f"if (args_{name}.tiles != args_{first}.tiles || args_{name}.tiles_m != args_{first}.tiles_m || "
            f"args_{name}.tiles_n != args_{first}.tiles_n)",
            f"  return cudaErrorInvalidValue;  // loop {name} walks other tiles than loop {first}")
    names = [n for n, _ in loops]
    tiles = " || ".join(f"tiles_{n}" for n in names) if fp.persistent else "false"
    tail = " || ".join(f"tail_{n}" for n in names) if fp.masks else "false"
    out(f"const bool tiles = {tiles};  // {'a loop would loop over tiles' if fp.persistent else 'some loop cannot'}",
        f"const bool tail = {tail};  // {'a loop masks its partial last tile' if fp.masks else 'no loop masks one'}")
    variants = {(a, b): f"kernel<{'true' if a else 'false'}, {'true' if b else 'false'}>"
                for a in ((False, True) if fp.persistent else (False,))
                for b in ((False, True) if fp.masks else (False,))}
    pick = lambda a: (f"(tail ? {variants[(a, True)]} : {variants[(a, False)]})" if fp.masks  # noqa: E731
                      else variants[(a, False)])
    out(f"auto* entry = tiles ? {pick(True)} : {pick(False)};" if fp.persistent else f"auto* entry = {pick(False)};",
        "const size_t smem = sizeof(Smem);  // (aligned to 1024 bytes by its declaration: the kernel traps otherwise)",
        "int device = 0;",
        "if ((err = cudaGetDevice(&device)) != cudaSuccess) return err;",
        f"err = {ns0}::once_per_device(smem_raised[(tiles ? 2 : 0) + (tail ? 1 : 0)], device, [&](int) {{",
        "  return cudaFuncSetAttribute(entry, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));",
        "});",
        "if (err != cudaSuccess) return err;",
        f"int grid = args_{first}.tiles;",
        "if (tiles) {",
        "  int sms = 0;",
        f"  if ((err = {ns0}::sm_count(device, &sms)) != cudaSuccess) return err;",
        "  grid = sms < grid ? sms : grid;  // one CTA per SM",
        "}")
    args = [f"maps_{name}[{i}]" for name, r in loops for i, _ in enumerate(r.tma_tensors())] \
        + [f"args_{name}" for name, _ in loops]
    out(f"entry<<<grid, kThreads, smem, stream>>>({', '.join(args)});",
        "err = cudaGetLastError();",
        "if (err != cudaSuccess)  // a context made anew (cudaDeviceReset) lost the limit: raise it on the next call",
        "  for (auto& r : smem_raised) r.fetch_and(~(uint64_t(1) << (device & 63)), std::memory_order_relaxed);",
        "return err;")
    out.depth -= 1
    out("}", "", f"}}  // namespace {fused_ns(kernel)}")


# ---- the C entry point ----------------------------------------------------------------------------

def fused_entry(kernel: str, kernel_file: str, loops: list[tuple[str, object]]) -> str:
    """K.fused_entry.cu: `twill_launch(block_L0, block_L1, ...)`, each block what that loop's binding packs for its
    own entry (binding.entry_struct), read into the loop's Problem as its entry reads it."""
    lines = [
        f"// The C entry point of {kernel_file}, the one kernel of {kernel}'s loops in sequence, for its binding",
        "// (K.py), written by `twill emit-cuda --binding torch`: one block per loop, packed by that loop's binding.",
        f"#include \"{kernel_file}\"",
        "#include <string.h>",
        "",
    ]
    for name, r in loops:
        lines += entry_struct(r, f"twill_args_{name}") + [""]
    sizes = " : ".join(f"loop == {k} ? static_cast<int>(sizeof(twill_args_{name}))"
                       for k, (name, _) in enumerate(loops))
    lines += [f"extern \"C\" int twill_args_bytes(int loop) {{ return {sizes} : 0; }}", ""]
    packed = ", ".join(f"const void* packed_{name}" for name, _ in loops)
    lines.append(f"extern \"C\" int twill_launch({packed}) {{")
    for name, r in loops:
        lines += [f"  {r.ns}::Problem p_{name};",
                  "  {",
                  f"    twill_args_{name} a;",
                  f"    memcpy(&a, packed_{name}, sizeof a);",
                  f"    {r.ns}::Problem& p = p_{name};",
                  *["  " + x for x in entry_problem(r)],
                  "  }"]
    first = loops[0][0]
    lines += [
        f"  twill_args_{first} a;  // the device and stream: the first loop's (one stream, one device for all)",
        f"  memcpy(&a, packed_{first}, sizeof a);",
        "  int current = 0;",
        "  cudaError_t err = cudaGetDevice(&current);",
        "  if (err != cudaSuccess) return static_cast<int>(err);",
        "  const int device = static_cast<int>(a.device);",
        "  if (current != device && (err = cudaSetDevice(device)) != cudaSuccess) return static_cast<int>(err);",
        f"  err = {fused_ns(kernel)}::launch({', '.join(f'p_{n}' for n, _ in loops)}, "
        "static_cast<cudaStream_t>(a.stream));",
        "  if (current != device) cudaSetDevice(current);",
        "  return static_cast<int>(err);",
        "}",
        "",
        "extern \"C\" const char* twill_error_string(int err) {",
        "  return cudaGetErrorString(static_cast<cudaError_t>(err));",
        "}",
    ]
    return "\n".join(lines) + "\n"
