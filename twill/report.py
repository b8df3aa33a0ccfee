"""Human-readable renderings of a schedule for the terminal (rich), plus JSON and YAML.

The table shows each op's start, stage, unit and role; then the steady state as a compact
timeline, one lane per functional unit and one per role, `WIDTH` characters for the I cycles.
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


def _lanes(s: Schedule, key) -> dict[str, list[str]]:
    """lane -> list of WIDTH cells (op symbol or '.') over the steady state [0, I)."""
    width = min(WIDTH, s.ii)
    sym = {o.name: SYMBOLS[i % len(SYMBOLS)] for i, o in enumerate(s.ops)}
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
    console.print(f"kernel {s.kernel} on {s.machine} ({s.arch}): I = {s.ii}, L = {s.length}, {proof}")
    bounds = dict(s.bounds)
    if bounds:
        console.print(f"bounds: ResMII = {bounds.get('res_mii')}, RecMII = {bounds.get('rec_mii')}, "
                      f"SWP bound I = {bounds.get('swp_ii')}; 1 unit = {s.scale.unit_cycles:.3g} machine cycles")
    table = Table(title=None, show_edge=False)
    for col in ("sym", "op", "opcode", "unit", "cycles", "start", "stage") + (("role",) if s.roles else ()):
        table.add_column(col, justify="right" if col in ("cycles", "start", "stage") else "left")
    for i, o in enumerate(sorted(s.ops, key=lambda o: (o.start, o.name))):
        idx = [x.name for x in s.ops].index(o.name)
        row = [SYMBOLS[idx % len(SYMBOLS)], o.name, o.opcode, o.unit, str(o.cycles), str(o.start),
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
        roles = Table(show_edge=False)
        for col in ("role", "warps", "registers", "ops"):
            roles.add_column(col)
        for r in s.roles:
            roles.add_row(r.name, str(r.warps), str(r.registers), ", ".join(r.ops))
        console.print(roles)
    if s.buffers:
        console.print("buffers: " + ", ".join(f"{b.value} x{b.depth} ({b.bytes} B @{b.space})" for b in s.buffers))
    return buf.getvalue()
