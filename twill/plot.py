"""Pictures of a schedule: a Gantt chart of the unrolled program, as SVG or PNG.

Two steps, so that tests can check what a picture says without looking at pixels:

- `chart_data(schedule) -> Chart` is pure data (frozen dataclasses): one lane per warp role and one
  per functional unit; one bar per (op, iteration) of the unrolled program on its role lane and on
  its unit lane, spanning `start(op) + i*I` to that plus the op's cycles (at least 1, as
  `Schedule.instances()` counts it); the prologue / steady state / epilogue of `Schedule.phases`; a
  marker at every multiple of I; and the dependence edges of the embedded graph between the
  instances they connect.
- `render(chart, path)` draws it with matplotlib (a dependency of the default install)
  on an Agg canvas with a fixed size and resolution, a fixed SVG hash salt and no dates, so the same
  schedule always gives the same bytes. matplotlib is imported only here, never by `import twill`.
"""
from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import Diagnostic, InputError
from .fileio import write_atomic
from .schedule import Schedule

# -- the data behind the chart ---------------------------------------------------------------------


@dataclass(frozen=True)
class Lane:
    """A row of the chart: a warp role or a functional unit. `rows` sub-rows hold overlapping bars."""

    key: str  # "role:NAME" or "unit:NAME"
    kind: str  # "role" | "unit"
    name: str
    label: str
    rows: int = 1


@dataclass(frozen=True)
class Bar:
    """One op instance on one lane: iteration `iteration` of `op`, over [start, end)."""

    op: str
    opcode: str  # the colour key: ops are coloured by kind
    iteration: int
    lane: str  # a Lane.key
    start: int
    end: int
    row: int = 0  # sub-row within the lane (bars of one sub-row never overlap)
    is_async: bool = False


@dataclass(frozen=True)
class Phase:
    name: str  # "prologue" | "steady" | "epilogue"
    start: int
    end: int  # half-open; may be empty (end <= start)


@dataclass(frozen=True)
class Arrow:
    """A dependence between two instances: `dst` of `dst_iteration` reads `src` of `src_iteration`."""

    src: str
    src_iteration: int
    dst: str
    dst_iteration: int
    distance: int
    src_lane: str
    dst_lane: str
    x0: int  # where the producer instance ends
    x1: int  # where the consumer instance starts
    carry: str | None = None


@dataclass(frozen=True)
class Chart:
    kernel: str
    machine: str
    arch: str
    stage: str
    ii: int
    length: int  # L: the span of one iteration
    program_length: int  # the span of the unrolled program
    copies: int
    optimal: bool
    unit_cycles: float  # machine cycles per normalized unit
    lanes: tuple[Lane, ...]
    bars: tuple[Bar, ...]
    phases: tuple[Phase, ...]
    markers: tuple[int, ...]  # multiples of I across the program
    arrows: tuple[Arrow, ...]
    kinds: tuple[str, ...]  # opcodes, in order of first appearance

    @property
    def title(self) -> str:
        proof = "optimal" if self.optimal else "not proven optimal"
        what = "joint schedule" if self.stage == "joint" else "modulo schedule (--swp-only: no warp roles)"
        return (f"{self.kernel} on {self.machine} ({self.arch}): I = {self.ii}, L = {self.length}, {proof}; "
                f"{what}, {self.copies} overlapped iteration{'s' if self.copies != 1 else ''}")


# Units in the order a reader follows the data: memory, tensor core, special functions, ALUs.
UNIT_ORDER = ("tma", "tmem", "tensor", "sfu", "alu")


def chart_data(schedule: Schedule) -> Chart:
    """The chart of `schedule` as plain data (see the module docstring)."""
    s = schedule
    order = {op.name: i for i, op in enumerate(s.ops)}
    by_name = s.by_name
    lanes = _lanes(s)
    placed = []  # (lane key, op, iteration, start, end)
    for inst in s.instances():
        op = by_name[inst["op"]]
        for key in _lane_keys(op):
            placed.append((key, op, inst["iteration"], inst["start"], inst["end"]))
    rows = _sub_rows(placed, order)
    bars = tuple(
        Bar(op.name, op.opcode, i, key, start, end, rows[(key, op.name, i)], op.is_async)
        for key, op, i, start, end in placed
    )
    lanes = tuple(Lane(ln.key, ln.kind, ln.name, ln.label,
                       1 + max((b.row for b in bars if b.lane == ln.key), default=0)) for ln in lanes)
    kinds = tuple(dict.fromkeys(op.opcode for op in sorted(s.ops, key=lambda o: (o.start, order[o.name]))))
    phases = tuple(Phase(name, a, b) for name, (a, b) in s.phases.items())
    end = max(s.program_length, s.copies * s.ii)
    markers = tuple(range(0, end + 1, s.ii))
    return Chart(
        kernel=s.kernel, machine=s.machine, arch=s.arch, stage=s.stage, ii=s.ii, length=s.length,
        program_length=s.program_length, copies=s.copies, optimal=s.optimal, unit_cycles=s.scale.unit_cycles,
        lanes=lanes, bars=bars, phases=phases, markers=markers, arrows=_arrows(s), kinds=kinds,
    )


def _lanes(s: Schedule) -> list[Lane]:
    roles = {r.name: r for r in s.roles}
    role_names = list(roles) + [op.role for op in s.ops if op.role and op.role not in roles]
    out = []
    for name in dict.fromkeys(role_names):
        r = roles.get(name)
        detail = f"\n{r.warps} warp{'s' if r.warps != 1 else ''}, {r.registers} regs" if r else ""
        out.append(Lane(f"role:{name}", "role", name, f"role {name}{detail}"))
    used = dict.fromkeys(op.unit for op in s.ops)
    units = [u for u in UNIT_ORDER if u in used] + [u for u in used if u not in UNIT_ORDER]
    out += [Lane(f"unit:{u}", "unit", u, f"unit {u}") for u in units]
    return out


def _lane_keys(op) -> list[str]:
    return ([f"role:{op.role}"] if op.role else []) + [f"unit:{op.unit}"]


def _sub_rows(placed, order: dict[str, int]) -> dict[tuple[str, str, int], int]:
    """Greedy interval colouring per lane: each bar takes the first sub-row free at its start."""
    rows: dict[tuple[str, str, int], int] = {}
    free_at: dict[str, list[int]] = {}
    for key, op, i, start, end in sorted(placed, key=lambda p: (p[0], p[3], order[p[1].name], p[2])):
        ends = free_at.setdefault(key, [])
        row = next((r for r, e in enumerate(ends) if e <= start), len(ends))
        if row == len(ends):
            ends.append(end)
        else:
            ends[row] = end
        rows[(key, op.name, i)] = row
    return rows


def _arrows(s: Schedule) -> tuple[Arrow, ...]:
    """Every dependence edge of the embedded graph between two instances of the unrolled program."""
    if not s.graph_tir:
        return ()
    from .tir import parse_tir
    graph = parse_tir(s.graph_tir, f"<graph of {s.kernel}>")
    ops = s.by_name
    out = []
    for e in graph.edges:
        if e.src not in ops or e.dst not in ops:
            continue
        src, dst = ops[e.src], ops[e.dst]
        lane = "role" if src.role and dst.role else "unit"
        for j in range(e.distance, s.copies):
            i = j - e.distance
            out.append(Arrow(
                e.src, i, e.dst, j, e.distance,
                f"{lane}:{src.role if lane == 'role' else src.unit}",
                f"{lane}:{dst.role if lane == 'role' else dst.unit}",
                src.start + i * s.ii + max(src.cycles, 1), dst.start + j * s.ii, e.carry,
            ))
    return tuple(sorted(out, key=lambda a: (a.x1, a.dst_iteration, a.dst, a.src)))


# -- drawing ------------------------------------------------------------------------------------------

# Colours by op kind (opcode): memory blues, tensor core green, exponentials red, reductions and
# elementwise ALU work in purples, browns and oranges. Unknown opcodes take the spare colours in order.
KIND_COLOURS = {
    "load": "#4c78a8", "store": "#72b7b2", "mma": "#54a24b", "exp2": "#e45756",
    "rowmax": "#b279a2", "rowsum": "#9d755d", "rescale": "#f58518", "convert": "#eeca3b",
    "mul": "#ff9da6", "add": "#d6a5c9", "sub": "#bab0ac", "max": "#8cd17d", "select": "#79706e",
}
SPARE_COLOURS = ("#17becf", "#bcbd22", "#393b79", "#843c39", "#7b4173", "#637939", "#8c6d31", "#9edae5")
FORMATS = ("svg", "png")
WIDTH_IN, DPI = 15.0, 110
ROW_IN = 0.34  # height of one sub-row
TOP_IN, BOTTOM_IN = 0.62, 0.8  # title and phase names; ticks, axis label and legend
SALT = "twill"


def colours(chart: Chart) -> dict[str, str]:
    """opcode -> colour; spare colours go to unknown opcodes in order of first appearance."""
    spare = iter(SPARE_COLOURS * (1 + len(chart.kinds) // len(SPARE_COLOURS)))
    return {k: KIND_COLOURS[k] if k in KIND_COLOURS else next(spare) for k in chart.kinds}


def _matplotlib():
    try:
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise InputError(Diagnostic(
            "plotting needs matplotlib, which is not installed",
            hint="reinstall twill (pip install twill-sched): matplotlib is one of its dependencies")) from None
    return matplotlib, Figure, FigureCanvasAgg


def render_bytes(chart: Chart, fmt: str, arrows: bool = False) -> bytes:
    """The picture as SVG or PNG bytes; the same chart always gives the same bytes."""
    if fmt not in FORMATS:
        raise InputError(f"cannot draw a '.{fmt}' file: use .svg or .png")
    matplotlib, Figure, FigureCanvasAgg = _matplotlib()
    with matplotlib.rc_context({"svg.hashsalt": SALT, "svg.fonttype": "path", "font.family": "DejaVu Sans",
                                "font.size": 8, "path.simplify": False}):
        fig = _figure(chart, Figure, arrows)
        FigureCanvasAgg(fig)
        buf = io.BytesIO()
        metadata = {"Date": None, "Creator": "twill plot"} if fmt == "svg" else {"Software": "twill plot"}
        fig.savefig(buf, format=fmt, dpi=DPI, metadata=metadata)
    return buf.getvalue()


def render(chart: Chart, path: str | os.PathLike, arrows: bool = False) -> None:
    """Write the chart to `path` (.svg or .png by its suffix), atomically."""
    path = Path(path)
    data = render_bytes(chart, path.suffix.lower().lstrip("."), arrows)
    write_atomic(path, data)


def _layout(chart: Chart) -> dict[str, tuple[float, float]]:
    """lane key -> (top y, height) in sub-row units, top to bottom; a gap between roles and units."""
    out, y, previous = {}, 0.0, None
    for lane in chart.lanes:
        if previous is not None and lane.kind != previous:
            y += 0.6
        out[lane.key] = (y, lane.rows + 0.3)
        y += lane.rows + 0.3
        previous = lane.kind
    return out


LEGEND_COLUMNS = 9


def _figure(chart: Chart, Figure, arrows: bool):
    """The whole picture: a fixed width, a height that grows with the lanes and the legend."""
    layout = _layout(chart)
    total = max((top + h for top, h in layout.values()), default=1.0)
    handles = _legend_handles(chart)
    bottom = BOTTOM_IN + 0.2 * ((len(handles) - 1) // LEGEND_COLUMNS)
    height = TOP_IN + bottom + total * ROW_IN
    fig = Figure(figsize=(WIDTH_IN, height), dpi=DPI)
    ax = fig.add_axes((0.1, bottom / height, 0.88, total * ROW_IN / height))
    span = _span(chart)
    ax.set_xlim(0, span)
    ax.set_ylim(total, 0)
    _draw_time(ax, chart)
    _draw_lanes(ax, chart, layout)
    _draw_bars(ax, chart, layout, span)
    if arrows:
        _draw_arrows(ax, chart, layout)
    fig.suptitle(chart.title, fontsize=10, y=1 - 0.12 / height, va="top")
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), LEGEND_COLUMNS), fontsize=8,
               frameon=False, bbox_to_anchor=(0.54, 0.0))
    return fig


def _draw_time(ax, chart: Chart) -> None:
    """Prologue and epilogue shaded, the steady state left white, a dashed line at every k*I."""
    for ph in chart.phases:
        if ph.end <= ph.start:
            continue
        if ph.name != "steady":
            ax.axvspan(ph.start, ph.end, color="#d9d9d9", alpha=0.55, lw=0, zorder=0)
        label = "steady state" if ph.name == "steady" else ph.name
        ax.text((ph.start + ph.end) / 2, -0.15, label, ha="center", va="bottom", fontsize=9,
                fontweight="bold" if ph.name == "steady" else "normal", color="#333333")
    for x in chart.markers:
        ax.axvline(x, color="#555555", lw=0.7, ls=(0, (4, 3)), zorder=1)
    ax.set_xticks(list(chart.markers))
    ax.set_xticklabels([_marker_label(k, x) for k, x in enumerate(chart.markers)])
    ax.tick_params(axis="x", labelsize=8)
    ax.set_xlabel(f"time in normalized units (1 unit = {chart.unit_cycles:.3g} machine cycles); "
                  f"dashed lines every I = {chart.ii}", fontsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _draw_lanes(ax, chart: Chart, layout) -> None:
    """Lane labels on the left, thin separators, a faint tint under the role lanes."""
    ax.set_yticks([top + h / 2 for top, h in (layout[ln.key] for ln in chart.lanes)])
    ax.set_yticklabels([ln.label for ln in chart.lanes], fontsize=8)
    ax.tick_params(axis="y", length=0)
    for ln in chart.lanes:
        top, h = layout[ln.key]
        ax.axhline(top + h, color="#bbbbbb", lw=0.5, zorder=1)
        if ln.kind == "role":
            ax.axhspan(top, top + h, color="#eef3fa", lw=0, zorder=-1)


def _draw_bars(ax, chart: Chart, layout, span: float) -> None:
    """Bars coloured by kind, labelled "name[iteration]" inside when it fits, else beside."""
    from matplotlib.patches import Rectangle

    colour = colours(chart)
    min_width, pad = span * MIN_BAR, span * 0.002
    places = label_places(chart)
    for b, (side, size) in zip(chart.bars, places):
        y = layout[b.lane][0] + 0.15 + b.row
        w = max(b.end - b.start, min_width)
        faded = b.is_async and b.lane.startswith("role:")  # issued by the role, running elsewhere
        ax.add_patch(Rectangle((b.start, y + 0.08), w, 0.84, facecolor=colour[b.opcode],
                               alpha=0.45 if faded else 1.0, edgecolor="#333333", lw=0.5,
                               hatch="////" if faded else None, zorder=2))
        label = f"{b.op}[{b.iteration}]"
        if side == "in":
            ax.text(b.start + w / 2, y + 0.5, label, ha="center", va="center", fontsize=size, zorder=3,
                    color="white" if _dark(colour[b.opcode]) and not faded else "black")
        elif side == "right":
            ax.text(b.start + w + pad, y + 0.5, label, ha="left", va="center", fontsize=size, zorder=3)
        elif side == "left":
            ax.text(b.start - pad, y + 0.5, label, ha="right", va="center", fontsize=size, zorder=3)


def _draw_arrows(ax, chart: Chart, layout) -> None:
    """Each dependence from the end of the producer instance to the start of the consumer's."""
    row = {(b.op, b.iteration, b.lane): b.row for b in chart.bars}
    for a in chart.arrows:
        y0 = layout[a.src_lane][0] + 0.65 + row[(a.src, a.src_iteration, a.src_lane)]
        y1 = layout[a.dst_lane][0] + 0.65 + row[(a.dst, a.dst_iteration, a.dst_lane)]
        ax.annotate("", xy=(a.x1, y1), xytext=(a.x0, y0), zorder=4,
                    arrowprops={"arrowstyle": "-|>", "color": "#222222", "lw": 0.7, "alpha": 0.8,
                                "shrinkA": 0, "shrinkB": 0,
                                "connectionstyle": "arc3,rad=0.15" if y0 != y1 else "arc3,rad=-0.35"})


def _legend_handles(chart: Chart) -> list:
    from matplotlib.patches import Patch

    colour = colours(chart)
    handles = [Patch(facecolor=colour[k], edgecolor="#333333", lw=0.5, label=k) for k in chart.kinds]
    handles.append(Patch(facecolor="#d9d9d9", alpha=0.55, label="prologue / epilogue"))
    if any(b.is_async and b.lane.startswith("role:") for b in chart.bars):
        handles.append(Patch(facecolor="white", edgecolor="#333333", hatch="////", lw=0.5,
                             label="async: issued by the role, in flight"))
    return handles


LABEL_PT, SIDE_LABEL_PT = 7.5, 6.5


MIN_BAR = 0.004  # the narrowest bar drawn, as a fraction of the time axis


def _span(chart: Chart) -> int:
    return max(chart.program_length, chart.markers[-1] if chart.markers else 1, 1)


def label_places(chart: Chart) -> list[tuple[str, float]]:
    """For each bar: where its label goes ("in", "right", "left" or "none") and at what size.

    A label goes inside its bar when it fits, else in the free space right or left of the bar on
    the same sub-row (a text width is estimated as 0.6 em per character of DejaVu Sans)."""
    span = _span(chart)
    units_per_inch, min_width = span / (WIDTH_IN * 0.88), span * MIN_BAR

    def width(text: str, pt: float) -> float:
        return (len(text) * pt * 0.6 + 4) / 72 * units_per_inch

    rows: dict[tuple[str, int], list[int]] = {}
    for k, b in enumerate(chart.bars):
        rows.setdefault((b.lane, b.row), []).append(k)
    out: list[tuple[str, float]] = [("none", 0.0)] * len(chart.bars)
    limit = max(chart.program_length, chart.markers[-1])
    for row in rows.values():
        row.sort(key=lambda k: chart.bars[k].start)
        free = 0.0  # where the previous bar, or the label right of it, ends
        for n, k in enumerate(row):
            b = chart.bars[k]
            label, w = f"{b.op}[{b.iteration}]", max(b.end - b.start, min_width)
            right = chart.bars[row[n + 1]].start if n + 1 < len(row) else limit
            side = width(label, SIDE_LABEL_PT)
            if width(label, LABEL_PT) < w:
                out[k] = ("in", LABEL_PT)
            elif side < right - (b.start + w):
                out[k] = ("right", SIDE_LABEL_PT)
                free = b.start + w + side
                continue
            elif side < b.start - free:
                out[k] = ("left", SIDE_LABEL_PT)
            free = max(free, b.start + w)
    return out


def _marker_label(k: int, x: int) -> str:
    return "0" if k == 0 else f"{'' if k == 1 else k}I = {x}"


def _dark(hex_colour: str) -> bool:
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return 0.299 * r + 0.587 * g + 0.114 * b < 140
