"""The rings of an emitted kernel, run as a protocol on the CPU (a test helper, no product code).

`ring_deadlock(text, n)` reads every role function of an emitted .cu, runs its generated control
flow for one tile of n iterations in Python (the steady loop, `switch (n - j)`, guards, the
`for (int i = ...)` loops that free slots still held) and collects its ring operations in order:
wait_full / wait_empty / arrive_full / expect_full / release_by_warp, and on sm_100a the
`umma_commit` to a ring's full or empty barrier (the instance it names is in the comment the
emitter writes beside it). Then the roles run against each other, each moving on while its next
operation can complete: wait_full(i) once instance i was filled, wait_empty(i) once every reader
freed instance i - depth. It returns the operations the roles are stuck at ({} when all finish).

It simulates one tile, the CTA's last (`tile.last`, `tile.round == 0`), and only mbarrier rings:
named barriers (ping-pong turns), wgmma waits and tensor-memory barriers that are not rings are
not seen, so {} is not a proof that a kernel cannot hang.

`ring_tiles(text, ns)` runs a persistent CTA instead: tiles of ns[0], ns[1], ... iterations in a
row, each role's ring positions continuing at `tile.pos` (the earlier tiles' iterations modulo
kPhasePeriod, as kernel.py's tile loop keeps it), against mbarriers as the hardware has them: a
slot's full and empty barrier count completed phases, and a wait passes when the phase of its
parity is the last one completed (`try_wait.parity`). Besides a deadlock it reports every wait that
passes on another position's phase and every release of a slot's wrong occupant.
"""
from __future__ import annotations

import re

RING = re.compile(r"sm\.ring_(\w+)\.(wait_full|wait_empty|arrive_full|release_by_warp|expect_full)\(([^;]*?)(?:, \d+)?\);")
# tcgen05.commit to a ring barrier; the instance is named in the emitter's comment
UMMA = re.compile(r"umma_commit\(&sm\.ring_(\w+)\.(full|empty)\[[^;]*\]\);\s*//\s*(?:frees )?\w+\[([^\]]+)\]")
FOR_I = re.compile(r"for \(int i = (.*?); i < (.*?); \+\+i\) (.*)$")


def _role_bodies(text: str) -> dict[str, str]:
    out = {}
    for m in re.finditer(r"__device__ __forceinline__ void role_(\w+)\(.*?\) \{\n", text):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out[m.group(1)] = text[m.end():i - 1]
    return out


def _c(expr: str, env: dict) -> int:
    """A C expression of ints (j, it, n, i, the tile's last/round/pos) evaluated in Python."""
    expr = expr.replace("tile.last", "last").replace("tile.round", "round").replace("tile.pos", "pos")
    expr = re.sub(r"!(?!=)", " not ", expr.replace("&&", " and ").replace("||", " or ").replace("/", "//"))
    return eval(expr, {"__builtins__": {}}, dict({"last": True, "round": 0, "pos": 0}, **env))  # noqa: S307


def _blocks(lines: list[str], i: int = 0) -> tuple[list, int]:
    """The role's statements as a tree: ("stmt", text) and ("block", head, children)."""
    items = []
    while i < len(lines):
        line = lines[i]
        if not line or line.startswith("#"):
            i += 1
        elif line.startswith("}"):
            return items, i + 1
        elif line.endswith("{"):
            sub, i = _blocks(lines, i + 1)
            items.append(("block", line[:-1].strip(), sub))
        else:
            items.append(("stmt", line))
            i += 1
    return items, i


def _line(raw: str) -> str:
    """One source line without its comment; a umma_commit to a ring becomes the ring operation."""
    m = UMMA.search(raw)
    if m:
        kind = {"full": "arrive_full", "empty": "release_by_warp"}[m.group(2)]
        return f"sm.ring_{m.group(1)}.{kind}({m.group(3)});"
    return re.sub(r"//.*$", "", raw).strip()


def ring_events(body: str, n: int, tile: dict | None = None) -> list[tuple[str, str, int]]:
    """The ring operations one role's code performs over a tile of n iterations, in order (the
    tile's last/round/pos from `tile`, else the CTA's only tile)."""
    lines = [_line(line) for line in body.split("\n")]
    env, events = dict(tile or {}, n=n), []

    class Break(Exception):
        pass

    def stmt(line: str) -> None:
        if line == "break;":
            raise Break
        m = re.match(r"(?:const )?int (j|it) = (.*);", line)
        if m:
            env[m.group(1)] = _c(m.group(2), env)
            return
        if not RING.search(line):
            return
        m = re.match(r"if (?:constexpr )?\((.*?)\) (.*)$", line)
        while m:  # guards, innermost last
            if not _c(m.group(1), env):
                return
            line = m.group(2)
            m = re.match(r"if (?:constexpr )?\((.*?)\) (.*)$", line)
        m = FOR_I.match(line)
        if m:
            for i in range(_c(m.group(1), env), _c(m.group(2), env)):
                events.extend((e.group(2), e.group(1), _c(e.group(3), dict(env, i=i)))
                              for e in RING.finditer(m.group(3)))
            return
        events.extend((e.group(2), e.group(1), _c(e.group(3), env)) for e in RING.finditer(line))

    def run(items) -> None:
        for item in items:
            if item[0] == "stmt":
                stmt(item[1])
                continue
            _, head, sub = item
            loop = re.match(r"for \(; (.*); (?:j \+= (\d+)|\+\+j)\)", head)
            switch = re.match(r"switch \((.*)\)", head)
            guard = re.match(r"if \((j[^)]*)\)$", head)
            if loop:
                while _c(loop.group(1), env):
                    run(sub)
                    env["j"] += int(loop.group(2) or 1)
            elif switch:
                value = _c(switch.group(1), env)
                try:
                    for case in sub:
                        if case[0] == "block" and case[1].startswith("case ") and _c(case[1][5:-1], env) == value:
                            run(case[2])
                except Break:
                    pass
            elif guard:
                if _c(guard.group(1), env):
                    run(sub)
            elif not head.startswith("for (int "):  # (a loop over register blocks holds no ring operation)
                run(sub)
    run(_blocks(lines)[0])
    return events


def negative_positions(text: str, n: int) -> list[tuple]:
    """The ring operations of n iterations that name a position before the first: in C++ its slot
    (-1 % DEPTH = -1) is outside the ring's barriers (a release of instance -1 arrived on another
    ring's barrier in held-out attn_kvlen's kernel, and it died with a launch failure)."""
    return [(role, ev) for role, body in _role_bodies(text).items() for ev in ring_events(body, n) if ev[2] < 0]


def ring_deadlock(text: str, n: int) -> dict:
    """Every role's ring operations for n iterations run against each other: the operation each
    stuck role waits at ({} when every role finishes). A sequence's one kernel: each loop's (`loop_texts`)."""
    loops = loop_texts(text)
    if len(loops) > 1:
        return {f"loop {k}: {role}": at for k, loop in enumerate(loops) for role, at in ring_deadlock(loop, n).items()}
    depth = {m.group(2): int(m.group(1)) for m in re.finditer(r"Ring<(\d+)> ring_(\w+)", text)}
    events = {role: ring_events(body, n) for role, body in _role_bodies(text).items()}
    readers: dict[str, set] = {}
    for role, evs in events.items():
        for kind, ring, _ in evs:
            if kind == "release_by_warp":
                readers.setdefault(ring, set()).add(role)
    full, freed, at = set(), {}, {role: 0 for role in events}
    moved = True
    while moved:
        moved = False
        for role, evs in events.items():
            while at[role] < len(evs):
                kind, ring, i = evs[at[role]]
                if kind == "wait_full" and (ring, i) not in full:
                    break
                if kind == "wait_empty" and i >= depth[ring] and freed.get((ring, i - depth[ring]), set()) != readers.get(ring, set()):
                    break
                if kind in ("arrive_full", "expect_full"):
                    full.add((ring, i))
                if kind == "release_by_warp":
                    freed.setdefault((ring, i), set()).add(role)
                at[role] += 1
                moved = True
    return {role: events[role][at[role]] for role in events if at[role] < len(events[role])}


def loop_texts(text: str) -> list[str]:
    """The kernel's text, or where it holds several loops' namespaces (a sequence's one kernel, seqfuse.py:
    each loop its own rings, role functions and kPhasePeriod) each loop's, to be checked one by one."""
    blocks: dict[str, str] = {}
    for m in re.finditer(r"^namespace (twill_\w+) \{\n(.*?)^\}  // namespace \1$", text, re.S | re.M):
        blocks[m.group(1)] = blocks.get(m.group(1), "") + m.group(2)
    loops = [b for b in blocks.values() if "constexpr int kPhasePeriod = " in b]
    return loops if len(loops) > 1 else [text]


def ring_tiles(text: str, ns: list[int]) -> list[str]:
    """A persistent CTA's tiles of ns[k] iterations each, every role's ring operations run against
    hardware-like mbarriers (see the module docstring): the errors found ([] when every role
    finishes and every wait and release met the position it names). A sequence's one kernel: each
    loop's (`loop_texts`), whose positions continue on their own."""
    loops = loop_texts(text)
    if len(loops) > 1:
        return [e for loop in loops for e in ring_tiles(loop, ns)]
    depth = {m.group(2): int(m.group(1)) for m in re.finditer(r"Ring<(\d+)> ring_(\w+)", text)}
    period = int(re.search(r"constexpr int kPhasePeriod = (\d+);", text).group(1))
    bodies = _role_bodies(text)
    events: dict[str, list] = {role: [] for role in bodies}
    base = 0  # global position of the tile's instance 0
    for k, n in enumerate(ns):
        tile = {"last": k == len(ns) - 1, "round": k, "pos": base % period}
        for role, body in bodies.items():
            # (kind, ring, position the code names, the true position across the CTA's tiles)
            events[role] += [(kind, ring, p, base + p - tile["pos"]) for kind, ring, p in ring_events(body, n, tile)]
        base += n
    readers: dict[str, set] = {}
    for role, evs in events.items():
        for kind, ring, _, _ in evs:
            if kind == "release_by_warp":
                readers.setdefault(ring, set()).add(role)
    done = {key: [0] * d for key, d in depth.items() for key in [("full", key), ("empty", key)]}  # completed phases
    arrived = {key: [set() for _ in range(d)] for key, d in depth.items() for key in [("full", key), ("empty", key)]}
    fills = {ring: [[] for _ in range(d)] for ring, d in depth.items()}  # true positions each full phase held
    errors: list[str] = []
    at = {role: 0 for role in events}
    moved = True
    while moved:
        moved = False
        for role, evs in events.items():
            while at[role] < len(evs):
                kind, ring, p, g = evs[at[role]]
                d = depth[ring]
                slot, parity = p % d, (p // d) & 1
                if slot != g % d:
                    errors.append(f"{role}: {kind} {ring} position {p} is slot {slot}, its instance's is {g % d}")
                if kind == "wait_full":
                    if done["full", ring][slot] & 1 == parity:
                        break  # the phase of this parity has not completed
                    if fills[ring][slot][-1:] != [g]:
                        errors.append(f"{role}: wait_full {ring}[{g}] passed on the phase of {fills[ring][slot][-1:]}")
                elif kind == "wait_empty":
                    if done["empty", ring][slot] & 1 == parity ^ 1:
                        break
                    if done["empty", ring][slot] != g // d:
                        errors.append(f"{role}: wait_empty {ring}[{g}] passed after {done['empty', ring][slot]} "
                                      f"releases of slot {slot}, not {g // d}")
                else:
                    key = ("full", ring) if kind in ("arrive_full", "expect_full") else ("empty", ring)
                    if key[0] == "empty" and done[key][slot] != g // d:
                        errors.append(f"{role}: release {ring}[{g}] in phase {done[key][slot]} of slot {slot}")
                    arrived[key][slot].add(role)
                    if arrived[key][slot] == ({role} if key[0] == "full" else readers[ring]):
                        arrived[key][slot] = set()
                        done[key][slot] += 1
                        if key[0] == "full":
                            fills[ring][slot].append(g)
                at[role] += 1
                moved = True
    errors += [f"{role}: stuck at {events[role][at[role]][:2]} {events[role][at[role]][3]}"
               for role in events if at[role] < len(events[role])]
    return errors


def restart_every_tile(text: str) -> str:
    """The role functions of `text` with every ring restarted at position 0 per tile (how
    kernel<true> ran before ring positions continued across tiles): for checking that
    `ring_tiles` tells the two apart (the device code of the result is not meant to compile)."""
    return text.replace("tile.pos + ", "").replace("tile.pos", "0")
