"""A kernel of several loops run one after the other: a sequence of tile-loop graphs.

Each loop is a `Graph` of its own (its own I, L, roles and rings: the solver schedules it alone,
`pipeline.solve` per loop); a later loop reads an earlier loop's *final carries* as loop-invariant
inputs, each such input a `Handover` (the `.tir` line `input h : f16[128,64] @smem = L0.acc1`).
The earlier loop writes the carry out (its `out_CARRY`, in the carry's output dtype) and the later
loop reads it as any input is read: emit-cuda runs one kernel per loop, in order, and the binding
passes the one's output tensor to the next (docs/emit-cuda.md, "Loops in sequence").

    seq = parse_sequence(text, "chain.tir")        # twill.tir_sequence
    seq.graphs[1], seq.handovers_into("L1")
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import Diagnostic, ErrorCollector, Span
from .ir import OUTPUT_DTYPES, Graph


@dataclass(frozen=True)
class Handover:
    """Input `input` of loop `loop` is the final value of carry `carry` of the earlier loop `source`."""

    loop: str
    input: str
    source: str
    carry: str
    span: Span | None = field(default=None, compare=False)  # the `L0.acc1` of the input line

    @property
    def text(self) -> str:
        return f"{self.source}.{self.carry}"


@dataclass(frozen=True)
class Sequence:
    kernel: str
    names: tuple[str, ...]  # the loops, in the order they run
    graphs: tuple[Graph, ...]
    handovers: tuple[Handover, ...] = ()
    file: str = field(default="<sequence>", compare=False)

    def graph(self, name: str) -> Graph:
        return self.graphs[self.names.index(name)]

    def handovers_into(self, name: str) -> tuple[Handover, ...]:
        return tuple(h for h in self.handovers if h.loop == name)

    def handed_carries(self, name: str) -> tuple[str, ...]:
        """The carries of loop `name` that a later loop reads, once each, in carry order."""
        read = {h.carry for h in self.handovers if h.source == name}
        return tuple(c.name for c in self.graph(name).carries if c.name in read)


def loop_kernel(kernel: str, loop: str) -> str:
    """The kernel name of one loop of a sequence (its emitted CUDA kernel, its schedule)."""
    return f"{kernel}_{loop}"


def check(seq: Sequence, errors: ErrorCollector) -> None:
    """The hand-over rules, each a located error: the source is an earlier loop of the sequence,
    the carry one of its carries, the input of the carry's shape and of the dtype the earlier loop
    writes it in (its output dtype), read from memory (no prologue result), and no input fed twice."""
    seen: set[tuple[str, str]] = set()
    for h in seq.handovers:
        at = seq.names.index(h.loop)
        earlier = seq.names[:at]
        if h.source not in earlier:
            where = ("is this loop itself" if h.source == h.loop else
                     "runs after it" if h.source in seq.names else "is not a loop of this kernel")
            errors.error(f"loop '{h.loop}' reads '{h.text}', but loop '{h.source}' {where}: a loop reads only the "
                         "final carries of the loops before it", h.span,
                         f"loops before '{h.loop}': {', '.join(earlier) or 'none'}")
            continue
        src = seq.graph(h.source)
        carry = next((c for c in src.carries if c.name == h.carry), None)
        if carry is None:
            errors.error(f"loop '{h.source}' yields no carry '{h.carry}'", h.span,
                         f"its carries: {', '.join(c.name for c in src.carries) or 'none'}")
            continue
        value = seq.graph(h.loop).values.get(h.input)
        if value is None or value.kind != "input" or value.computed:
            errors.error(f"'{h.input}' of loop '{h.loop}' is handed over but is not an input read from memory",
                         h.span)
            continue
        if (h.loop, h.input) in seen:
            errors.error(f"input '{h.input}' of loop '{h.loop}' is handed over twice", h.span)
        seen.add((h.loop, h.input))
        if value.type.shape != carry.type.shape:
            errors.error(f"input '{h.input}' is {value.type} but carry '{h.text}' is {carry.type}: a hand-over "
                         "keeps the tile's shape", h.span)
        elif value.type.dtype != carry.output_dtype:
            hint = (f"give the carry {{output = {value.type.dtype}}}" if value.type.dtype in OUTPUT_DTYPES
                    else f"hand-overs are written in {', '.join(OUTPUT_DTYPES)}")
            errors.error(f"input '{h.input}' is {value.type.dtype} but loop '{h.source}' writes carry "
                         f"'{h.carry}' as {carry.output_dtype}", h.span, hint)


# -- the schedule of a sequence -----------------------------------------------------------------

SEQUENCE_FORMAT = "twill-sequence/1"


@dataclass(frozen=True)
class SequenceSchedule:
    """One `Schedule` per loop, in order, and the hand-overs between them: a `twill-sequence/1`
    file, {"format", "kernel", "loops": [{"name", "handovers": [{"input", "from"}], "schedule"}]},
    each "schedule" a whole `twill-schedule/1` object (its graph, digests and all)."""

    kernel: str
    names: tuple[str, ...]
    schedules: tuple  # twill.schedule.Schedule per loop
    handovers: tuple[Handover, ...] = ()

    def to_dict(self) -> dict:
        return {"format": SEQUENCE_FORMAT, "kernel": self.kernel, "loops": [
            {"name": n, "handovers": [{"input": h.input, "from": h.text} for h in self.handovers if h.loop == n],
             "schedule": s.to_dict()} for n, s in zip(self.names, self.schedules)]}

    def to_json(self) -> str:
        import json
        return json.dumps(self.to_dict(), indent=2) + "\n"


def solve_sequence(seq: Sequence, machine, options, progress=None) -> SequenceSchedule:
    """Each loop solved as a graph of its own (`pipeline.solve`), in order."""
    from .pipeline import solve
    more = () if progress is None else (progress,)
    return SequenceSchedule(seq.kernel, seq.names, tuple(solve(g, machine, options, *more) for g in seq.graphs),
                            seq.handovers)


def is_sequence_file(path) -> bool:
    """Is `path` a `twill-sequence/1` schedule (its first 200 characters say so)?"""
    try:
        with open(path, encoding="utf-8") as f:
            head = f.read(200)
    except (OSError, UnicodeDecodeError):
        return False
    return SEQUENCE_FORMAT in head


def load_sequence_schedule(path) -> SequenceSchedule:
    """Read a `twill-sequence/1` file: each loop's schedule checked as `fileio.load_schedule` checks a
    file, the hand-overs against the loops' graphs (`check`)."""
    import json

    from .errors import InputError
    from .fileio import read_text, schedule_from_data
    from .tir import parse_tir
    try:
        data = json.loads(read_text(path, "schedule"))
        loops = data["loops"]
        names = tuple(str(x["name"]) for x in loops)
        schedules = tuple(schedule_from_data(x["schedule"], f"{path} (loop {x['name']})") for x in loops)
        handovers = tuple(Handover(str(x["name"]), str(h["input"]), *str(h["from"]).split(".", 1))
                          for x in loops for h in x.get("handovers", []))
        kernel = str(data["kernel"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(Diagnostic(f"'{path}' is a malformed {SEQUENCE_FORMAT} file: {type(exc).__name__}: {exc}")) from None
    graphs = tuple(parse_tir(s.graph_tir, f"<graph of {s.kernel}>") for s in schedules)
    errors = ErrorCollector()
    check(Sequence(kernel, names, graphs, handovers, str(path)), errors)
    errors.raise_if_any()
    return SequenceSchedule(kernel, names, schedules, handovers)
