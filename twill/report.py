"""Human-readable renderings of a schedule for the terminal (rich), plus JSON and YAML.

The table shows each op's start, stage, unit and role; then the steady state as a compact
timeline, one lane per functional unit and one per role, `WIDTH` characters for the I cycles.
A joint schedule (one with warp roles) adds a Gantt chart of the steady state per role, the way
the FA3/FA4 papers draw their pipelines: each op a labelled bar at its place in the window of I
cycles, `name(i-k)` for an op of the iteration k before the newest one. Swp-only output is unchanged.
"""
from __future__ import annotations

import io

from .schedule import Schedule

WIDTH = 64
SYMBOLS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def render(schedule: Schedule, fmt: str) -> str:
    if fmt == "json":
        return schedule.to_json()
    if fmt == "yaml":
        import yaml
        return yaml.safe_dump(schedule.to_dict(), sort_keys=False)
    return render_table(schedule)


def _symbols(s: Schedule) -> dict[str, str]:
    """The one-character name of each op in the timelines, by its position in the graph."""
    return {o.name: SYMBOLS[i % len(SYMBOLS)] for i, o in enumerate(s.ops)}


def _lanes(s: Schedule, key) -> dict[str, list[str]]:
    """lane -> list of WIDTH cells (op symbol or '.') over the steady state [0, I)."""
    width = min(WIDTH, s.ii)
    sym = _symbols(s)
    lanes: dict[str, list[str]] = {}
    for o in s.ops:
        lane = key(o)
        if lane is None:
            continue
        cells = lanes.setdefault(lane, ["."] * width)
        span = max(o.occupancy if key is _unit else (1 if o.is_async else o.cycles), 1)
        for c in range(min(span, s.ii)):
            cells[((o.start + c) % s.ii) * width // s.ii] = sym[o.name]
    return lanes


def _unit(o):
    return o.unit


def _role(o):
    return o.role


def render_table(s: Schedule) -> str:
    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    console = Console(file=buf, width=120, color_system=None, force_terminal=False)
    proof = "optimal (I-1 proven infeasible)" if s.optimal else "NOT proven optimal"
    if not s.length_optimal:
        proof += "; L not proven minimal (time limit)"
    elif not s.complete:
        proof += "; the time limit cut the search short (not proven)"
    console.print(f"kernel {s.kernel} on {s.machine} ({s.arch}): I = {s.ii}, L = {s.length}, {proof}")
    bounds = dict(s.bounds)
    if bounds:
        console.print(f"bounds: ResMII = {bounds.get('res_mii')}, RecMII = {bounds.get('rec_mii')}, "
                      f"SWP bound I = {bounds.get('swp_ii')}; 1 unit = {s.scale.unit_cycles:.3g} machine cycles")
    table = Table(title=None, show_edge=False)
    for col in ("sym", "op", "opcode", "unit", "cycles", "start", "stage") + (("role",) if s.roles else ()):
        table.add_column(col, justify="right" if col in ("cycles", "start", "stage") else "left")
    sym = _symbols(s)
    for o in sorted(s.ops, key=lambda o: (o.start, o.name)):
        row = [sym[o.name], o.name, o.opcode, o.unit, str(o.cycles), str(o.start),
               str(s.stage_of(o))]
        table.add_row(*(row + ([o.role or "-"] if s.roles else [])))
    console.print(table)
    console.print(f"steady state, I = {s.ii} cycles ({min(WIDTH, s.ii)} columns):")
    for title, key in (("unit", _unit),) + ((("role", _role),) if s.roles else ()):
        lanes = _lanes(s, key)
        pad = max(len(k) for k in lanes) if lanes else 4
        for lane in sorted(lanes):
            console.print(f"  {title} {lane:<{pad}} |{''.join(lanes[lane])}|")
    if s.roles:
        for line in role_gantt(s):
            console.print(line, soft_wrap=True)
        roles = Table(show_edge=False)
        for col in ("role", "warps", "registers", "ops"):
            roles.add_column(col)
        for r in s.roles:
            roles.add_row(r.name, str(r.warps), str(r.registers), ", ".join(r.ops))
        console.print(roles)
    if s.buffers:
        console.print("buffers: " + ", ".join(f"{b.value} x{b.depth} ({b.bytes} B @{b.space})" for b in s.buffers))
    for line in slack_lines(s):
        console.print(line, soft_wrap=True)
    return buf.getvalue()


def slack_lines(s: Schedule) -> list[str]:
    """The ops with a latency interval: scheduled at typical, how much later they may land."""
    if not s.latency_slack:
        return []
    out = ["latency intervals (scheduled at typical; slack: how much later it may complete before "
           "the steady state stalls):"]
    for x in s.latency_slack:
        head = f"  {x.op}: min {x.min:g}, typical {x.typical:g}, max {x.max:g} cycles; "
        if x.slack is None:
            out.append(head + "nothing waits for it")
            continue
        margin = x.margin_at_max
        at_max = (f"fits at max, {margin:g} cycles to spare" if margin >= 0
                  else f"at max the steady state stalls {-margin:g} cycles")
        out.append(head + f"slack {x.slack_cycles:g} cycles ({x.slack:g} units): {at_max}")
    return out


# -- the per-role Gantt chart of the steady state ----------------------------------------------------

GANTT_WIDTH = 96
KIND_STYLES = {"load": "blue", "store": "cyan", "mma": "green", "exp2": "red", "rowmax": "magenta",
               "rowsum": "yellow", "rescale": "dark_orange", "convert": "bright_black"}


def role_gantt(s: Schedule) -> list:
    """Lines (rich Text) of the steady state per role: a ruler, then each role's sub-rows of bars.

    An op of stage k occupies its role from start mod I for its cycles (wrapping past I); ops that
    overlap on one role (an async op in flight under another) go to separate sub-rows."""
    from rich.text import Text

    ii = s.ii
    width = ii * (GANTT_WIDTH // ii) if ii <= GANTT_WIDTH else GANTT_WIDTH

    def col(t: int) -> int:
        return t * width // ii

    pad = max(len(f"role {r}") for r in _role_order(s))
    lines = [Text(f"steady state per role, I = {ii} cycles ({width} columns); "
                  "name(i-k): the op of the iteration k before the newest")]
    ruler = [" "] * (width + 1)
    for q in range(5):
        t = ii * q // 4
        label = str(t)
        at = min(col(t), width + 1 - len(label))
        ruler[at:at + len(label)] = label
    lines.append(Text(" " * (pad + 3) + "".join(ruler).rstrip()))
    for role in _role_order(s):
        rows: list[list[str]] = []
        styles: list[list[str | None]] = []
        for o in sorted((o for o in s.ops if o.role == role), key=lambda o: (o.start % ii, o.name)):
            cells = _cells(o.start % ii, max(o.cycles, 1), ii, col, width)
            row = next((r for r, used in enumerate(rows) if all(used[c] == "." for c in cells)), None)
            if row is None:
                rows.append(["."] * width)
                styles.append([None] * width)
                row = len(rows) - 1
            stage = s.stage_of(o)
            label = o.name if stage == 0 else f"{o.name}(i-{stage})"
            text = _bar_text(label, len(cells))
            for c, ch in zip(cells, text):
                rows[row][c] = ch
                styles[row][c] = KIND_STYLES.get(o.opcode, "cyan")
        for r, (cells, style) in enumerate(zip(rows or [["."] * width], styles or [[None] * width])):
            line = Text(f"  {('role ' + role) if r == 0 else '':<{pad}} |")
            for ch, st in zip(cells, style):
                line.append(ch, style=st or "")
            line.append("|")
            lines.append(line)
    return lines


def _bar_text(label: str, n: int) -> str:
    """`[label===]` in n columns; the label is cut when the bar is short."""
    if n >= 3:
        return ("[" + label + "=" * n)[:n - 1] + "]"
    return (label + "=")[:n]


def _role_order(s: Schedule) -> list[str]:
    named = [r.name for r in s.roles]
    return list(dict.fromkeys(named + [o.role for o in s.ops if o.role]))


def _cells(start: int, cycles: int, ii: int, col, width: int) -> list[int]:
    """The columns an op covers in the window of I cycles, in time order from its start, wrapping."""
    span = min(cycles, ii)
    first, last = col(start), col(start + span)
    cells = [c % width for c in range(first, max(last, first + 1))]
    return list(dict.fromkeys(cells))[:width]
