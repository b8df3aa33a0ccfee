"""`twill explain`'s sentences: one item of an unsat core, (family, detail) as `encoding.FAMILIES`
names it, said in the graph's terms (its ops, units, limits), by one function per family."""
from __future__ import annotations

from .joint import EXTRA_COPIES
from .liveness import busy, imports, read_bytes, regs_per_thread, tmem_reads
from .problem import Problem


def _edge(p: Problem, src: str, dst: str):
    return next((d for d in p.deps if d.src == src and d.dst == dst), None)


def _register_values(p: Problem):
    return [t for t in p.tasks if t.space == "reg" and t.bytes > 0]


def message(p: Problem, ii: int, lmax: int, family: str, detail: str) -> str:
    """One sentence in the graph's terms for a (family, detail) item of `encoding.FAMILIES`: the
    family's function in `SENTENCES`, or the item itself where it has none for that detail."""
    sentence = SENTENCES.get(family)
    text = sentence(p, ii, lmax, detail) if sentence else None
    return text if text is not None else f"{family}: {detail}"


def _say_completion(p: Problem, ii: int, lmax: int, detail: str) -> str | None:
    """An op within the schedule length."""
    T = p.task
    return (f"op {detail} ({T[detail].cycles} units) must start and finish within the schedule length, "
            f"at most L = {lmax} (stage 1's copies of I = {ii}, plus {EXTRA_COPIES})")


def _say_dependence(p: Problem, ii: int, lmax: int, detail: str) -> str | None:
    """An edge's latency (and the cross-role delay), or --no-cross-role."""
    if detail.startswith("no_handoff:"):
        src, dst = detail[len("no_handoff:"):].split("->")
        return (f"ops {src} and {dst} must run on the same role: {src} is a register tile that {dst} reads "
                "from registers, and this machine hands no such tile between roles (communication.tile_handoff)")
    if detail.startswith("no_cross:"):
        src, dst = detail[len("no_cross:"):].split("->")
        return f"ops {src} and {dst} must run on the same role (--no-cross-role)"
    src, dst = detail.split("->")
    d = _edge(p, src, dst)
    it = "the same iteration" if d.distance == 0 else f"iteration i+{d.distance}"
    return (f"edge {src} -> {dst}: {dst} of {it} starts at least {d.latency} units after {src} of iteration i, "
            f"plus a cross-role delay of {p.cross} units if they run on different roles")


def _say_capacity(p: Problem, ii: int, lmax: int, detail: str) -> str | None:
    """A unit's capacity modulo I."""
    T = p.task
    if "@" in detail:
        unit, op = detail.split("@")
        op, _, others = op.partition(":")
        if others:  # one clause: not all of these occupy the unit at op's start
            return (f"unit {unit} (capacity {p.cap[unit]}): at the start of {op}, {' and '.join(others.split(','))} "
                    f"do not all occupy it too")
        return (f"unit {unit} (capacity {p.cap[unit]}): at the start of {op}, at most {p.cap[unit]} ops "
                f"may occupy it")
    unit, ops = detail.split(":")
    names = ops.split(",")
    occ = " + ".join(str(T[o].occupancy) for o in names)
    if len(names) == 1:
        return f"unit {unit}: op {ops} occupies it {T[ops].occupancy} units, more than I = {ii}"
    return (f"unit {unit} (capacity {p.cap[unit]}): {' and '.join(names)} occupy it {occ} units of "
            f"every I = {ii}, so they must not overlap modulo I")


def _say_roles(p: Problem, ii: int, lmax: int, detail: str) -> str | None:
    """Role slots, warps, --group pins, warpgroup issue."""
    lim = p.limits
    wg = p.limits.warp_group
    if detail == "warps":
        return f"the warps of all roles must fit the limit of {lim.warps} warps (a warpgroup is {wg})"
    if detail == "order":
        return "role slots are numbered in order of first use (symmetry breaking; loses no schedule)"
    if detail.startswith("slot:"):
        return f"op {detail[5:]} runs on exactly one role"
    if detail.startswith("group:"):
        a, b = detail[len("group:"):].split(",")
        return f"ops {a} and {b} are pinned to one role (--group)"
    if detail.startswith("apart:"):
        a, b = detail[len("apart:"):].split(",")
        return f"ops {a} and {b} are in different --group groups, so on different roles"
    if detail.startswith("warpgroup:"):
        op, w = detail[len("warpgroup:"):].split("@")
        return f"op {op} issues as a warpgroup: if it is on role slot {w}, that role is a warpgroup of {wg} warps"
    return None


def _say_variable_latency(p: Problem, ii: int, lmax: int, detail: str) -> str | None:
    """Variable- and fixed-latency ops on different roles."""
    a, b = detail.split(",")
    return f"variable-latency op {a} cannot share a role with fixed-latency op {b}"


def _say_registers(p: Problem, ii: int, lmax: int, detail: str) -> str | None:
    """Register budgets and the register file."""
    lim = p.limits
    T = p.task
    wg = p.limits.warp_group
    if detail == "per_sm":
        return (f"the register budgets of all roles, each warpgroup whole (one-warp roles share one at "
                f"the largest of their budgets), must fit the registers the CTA is launched with "
                f"({lim.registers_per_sm} per SM, in equal shares per thread)")
    if detail.startswith("budget["):
        w = detail[len("budget["):-1]
        return (f"role slot {w}'s budget lies between {lim.min_registers} and {lim.registers_per_thread} "
                f"registers per thread, in granules of {lim.register_granule}")
    u, _, w = detail.partition("@")  # the joint stage checks u on its own role (no slot in the detail)
    # "x:reads" / "x:input": checked at x's start (where it reads another role's value or a
    # register input), not where a value of x's own begins
    u, _, suffix = u.partition(":")
    reads_check = suffix in ("reads", "input")
    w = w or f"of {u}"
    values = _register_values(p)
    others = [t for t in values if t.name != u]
    own = T[u]
    parts = ", ".join(f"{t.name} {regs_per_thread(t.register_bytes, wg)}" for t in others)
    where = (f"at the start of {u}" if reads_check or own not in values else
             f"where {u}'s registers begin (its start, or its end when it is written in place of an operand)")
    text = f"registers on role slot {w} {where}: the reserve {lim.register_reserve}"
    if own in values:
        text += (f" + {u} {regs_per_thread(own.register_bytes, wg)} on a warpgroup ({regs_per_thread(own.register_bytes, 1)} "
                 f"on one warp)")
    reads = ", ".join(f"{v} by {c} {regs_per_thread(read_bytes(p, v, c), wg)}" for v, c in tmem_reads(p))
    if reads:
        text += f" + tensor-memory values read into registers by that role's ops running then ({reads})"
    loads = ", ".join(f"{v} by {c} {regs_per_thread(T[v].register_bytes, wg)}" for v, c in imports(p) if v != c)
    if loads:
        text += f" + register values its ops running then load from another role ({loads})"
    inputs = ", ".join(f"{v} {regs_per_thread(nbytes, wg)}" for v, nbytes, _ in p.register_inputs)
    if inputs:
        text += f" + the register inputs its ops read, held the whole loop ({inputs})"
    return (text + f" + every other register value live then on that role"
            f"{' (' + parts + ' per thread on a warpgroup)' if parts else ''} must fit its budget, "
            f"at most {lim.registers_per_thread} per thread")


def _say_memory(p: Problem, ii: int, lmax: int, detail: str) -> str | None:
    """Shared and tensor memory."""
    lim = p.limits
    space, rest = detail.split(":" if ":" in detail else "@", 1)
    limit = lim.smem_bytes if space == "smem" else lim.tmem_bytes
    rings = ", ".join(f"{t.name} {t.bytes} B x depth {t.depth}" for t in p.tasks
                      if t.streaming and t.space == space)
    fixed = dict(p.invariant_bytes).get(space, 0)
    base = (f"loop-invariant inputs {fixed} B" + (f", streaming rings {rings}" if rings else ""))
    if rest == "resident":
        return f"@{space}: {base} alone exceed {limit} bytes"
    return (f"@{space} at the start of {rest}: {base}, plus every @{space} value (and register value "
            f"staged for another role) live then, must fit {limit} bytes")


def _say_blocking(p: Problem, ii: int, lmax: int, detail: str) -> str | None:
    """An op that waits on a barrier, on a role shared with a busy op."""
    T = p.task
    v, u = detail.split("|")
    return (f"op {v} waits on a barrier (async or cross-role producer, or a tensor-memory read), so on a "
            f"role shared with {u} it cannot start while {u} is busy ({busy(T[u])} units of every I = {ii})")


# family -> its sentence for one item (None: no sentence for that detail)
SENTENCES = {
    "completion": _say_completion,
    "dependence": _say_dependence,
    "capacity": _say_capacity,
    "roles": _say_roles,
    "variable_latency": _say_variable_latency,
    "registers": _say_registers,
    "memory": _say_memory,
    "blocking": _say_blocking,
}
