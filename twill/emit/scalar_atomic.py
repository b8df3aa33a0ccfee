"""A scalar atomic output (`output AMAX = m {atomic = max}`, ir.Epilogue.atomics): each output tile's one
value m, folded into a global f32 the caller initializes, by ONE atomic per tile of the CTA.

m is `reduce_max {axis = 0}` of `reduce_max {axis = 1}` of a tile (ttgir/scalaratomic.py). The row
reduction is the epilogue's own (op_reduce_max into the role's Rows fragment); here the rows go to one
value: each thread's rows (twill::rows_max: sm_90a's Rows fragment, its quad's rows; sm_100a's TScalR, the
thread's row), the warp's (shuffles), then the role's warps through
shared memory (`sm.red_NAME`, one float per warp, two sets per tile copy so that a tile's writes never
meet the last tile's read) and the role's named barrier; the role's first thread then issues the
atomic: a float max as the integer max of its bits where the sign is clear, the unsigned min where
it is set (twill::atomic_max_float: right for every non-NaN float).

What is emitted is the max of a tile that is `abs` of a carry starting at 0: the rows and columns of a
partial tile past the tensor's edge hold 0 there (TMA fills the operands' absent elements with
zeros), which a max of absolute values ignores. A min or a sum (which the padding would change, and
which the fragments' replicated rows would count more than once), any other tile, a role that is
not a warpgroup and a row-split graph are refused (EmitError), never emitted wrong.
"""
from __future__ import annotations

from .model import EmitError, ident

WARPS = 32  # the most warps a role has (1024 threads): each role's slots in sm.red_NAME
KINDS = ("max",)  # the atomic kinds emitted (min and add are refused: see the docstring)
# the targets (by their runtime header) whose fragments have a rows_max, warp_max and atomic_max_float
HEADERS = {"sm90.cuh": ("scalar_atomic_sm90.cuh", "scalar_atomic.cuh"),
           "sm100.cuh": ("scalar_atomic_sm100.cuh", "scalar_atomic.cuh")}


def atomics(graph) -> tuple:
    return graph.epilogue.atomics


def check(model) -> None:
    """Refuse what is not emitted (build_model calls it)."""
    g = model.graph
    for name, value, kind in atomics(g):
        where = f"output '{name}' {{atomic = {kind}}}"
        if model.target.runtime not in HEADERS:
            raise EmitError(f"{where}: emit-cuda has no scalar atomic output on {model.target.arch} (issue #21)")
        if kind not in KINDS:
            raise EmitError(f"{where}: emit-cuda emits only {{atomic = max}} of a tile of absolute values; a "
                            f"{kind} would count the padding of partial tiles and the rows each thread repeats (issue #21)")
        if g.split:
            raise EmitError(f"{where}: a graph whose rows are split over roles has no scalar atomic output in emit-cuda")
        tile_of(g, name, value)


def tile_of(graph, name: str, value: str) -> tuple[str, str]:
    """(the rows value reduced {axis = 0}, the carry whose abs is reduced {axis = 1}); else EmitError."""
    e, carries = graph.epilogue, {c.name: c for c in graph.carries}
    where = f"output '{name}' {{atomic = max}} of '{value}'"
    top = e.by_name.get(value)
    rows = e.by_name.get(top.operands[0].name) if top is not None and top.operands else None
    absop = e.by_name.get(rows.operands[0].name) if rows is not None and rows.operands else None
    ok = (top is not None and top.opcode == "reduce_max" and int(top.attr("axis")) == 0 and len(top.operands) == 1
          and rows is not None and rows.opcode == "reduce_max" and int(rows.attr("axis")) == 1 and len(rows.operands) == 1
          and absop is not None and absop.opcode == "abs" and absop.operands[0].name in carries)
    carry = carries.get(absop.operands[0].name) if ok else None
    if not ok or carry.init not in (None, "0", "0.0"):
        raise EmitError(f"{where}: emit-cuda emits the max of `reduce_max {{axis = 0}}` of `reduce_max {{axis = 1}}` "
                        "of `abs` of a carry that starts at 0 (a partial tile's padding is 0 then, which the max "
                        "ignores); not this one (issue #21)")
    return rows.name, carry.name


def smem_bytes(model) -> int:
    return 4 * WARPS * 2 * model.tile_copies * len(atomics(model.graph))


def smem_fields(model) -> list[str]:
    copies = 2 * model.tile_copies
    return [f"float red_{ident(name)}[{copies}][{WARPS}];  // output {name} {{atomic = {kind}}}: each warp's value "
            "of the tile, two sets per tile copy" for name, _, kind in atomics(model.graph)]


def arg_fields(model) -> list[str]:
    return [f"float* {ident(name)};  // output {name} {{atomic = {kind}}}: one f32, initialized by the caller"
            for name, _, kind in atomics(model.graph)]


def problem_fields(model) -> list[str]:
    return [f"  float* {ident(name)} = nullptr;  // output {name} {{atomic = {kind}}}: one f32, initialized by the "
            "caller (0 for an amax), which each tile's value updates" for name, _, kind in atomics(model.graph)]


def copy_fields(model) -> list[str]:
    return [f"  args.{ident(name)} = p.{ident(name)};" for name, _, _ in atomics(model.graph)]


def emit(body, out, ep, finals: dict[str, str]) -> None:
    """The role's lines after its outputs' stores: each atomic output of a tile whose carry it holds."""
    m = body.m
    for name, value, kind in atomics(m.graph):
        rows, carry = tile_of(m.graph, name, value)
        if m.carry_source[carry] not in finals:
            continue  # another role holds the carry's last value
        if not body.role.is_warpgroup:
            raise EmitError(f"output '{name}' {{atomic = {kind}}}: role {body.role.name} is not a warpgroup")
        threads = body.role.threads
        arg = ep.arg(out, rows)
        if arg.where != "reg":
            raise EmitError(f"output '{name}' {{atomic = {kind}}}: '{rows}' is no fragment the role holds")
        red = f"sm.red_{ident(name)}[tile.round % {2 * m.tile_copies}]"
        bar = body.r.role_bar(body.role)
        out(f"// output {name} = {value} {{atomic = {kind}}}: the tile's one value, one atomic")
        with out.block(""):
            out(f"const float v = twill::warp_max(twill::rows_max({arg.expr}));  // this warp's rows",
                f"const int lane = threadIdx.x % 32, wi = (threadIdx.x / 32) % {threads // 32};  // the warp in the role",
                f"if (lane == 0) {red}[wi] = v;",
                f"twill::named_sync({bar}, {threads});  // every warp's value is in {red.split('[')[0]}")
            with out.block(f"if (threadIdx.x % {threads} == 0)"):
                out("float t = v;",
                    f"for (int w = 1; w < {threads // 32}; ++w) t = fmaxf(t, {red}[w]);",
                    f"twill::atomic_max_float(args.{ident(name)}, t);  // the only atomic of this tile")


def launch_checks(model) -> list[str]:
    return [f"if (p.{ident(name)} == nullptr) return cudaErrorInvalidValue;  // output {name} {{atomic = {kind}}}"
            for name, _, kind in atomics(model.graph)]


def main_inputs(model) -> list[str]:
    """The smoke test's (main.tpl) scalar of each atomic output: one f32 set to 0 (an amax starts there)."""
    return [f"p.{ident(name)} = twill_random_tensor<float>(1, 1u);  cudaMemset(p.{ident(name)}, 0, sizeof(float));"
            for name, _, _ in atomics(model.graph)]


def main_checksums(model) -> list[str]:
    return [f"printf(\"checksum {ident(name)}: %.6e\\n\", twill_checksum(p.{ident(name)}, 1));"
            for name, _, _ in atomics(model.graph)]


def binding_args(model) -> list:
    """The binding's argument of each atomic output (binding.arguments): a tensor of one f32 element the
    caller passes, initialized (an amax: to 0), which the kernel updates in place; one for every batch entry
    (a batched call, whose tiles would all fold into it, takes no batch dimensions before it: refused)."""
    from .binding import Argument, Part
    return [Argument(name, False, "f32", (("fixed", 1),), False, False, False, (Part(ident(name), name),),
                     source=name, atomic=kind) for name, _, kind in atomics(model.graph)]


def binding_checks(args) -> list[str]:
    """K.py's lines refusing an atomic output's tensor of more than one element (binding.module_source)."""
    return [f"    if {a.name} is not None and {a.name}.numel() != 1:\n"
            f"        raise ArgumentError(f\"{a.name}: one f32 element (the kernel's atomic {a.atomic} of every tile, "
            f"a batch's too), got shape {{list({a.name}.shape)}}\")" for a in args if a.atomic]
