"""Options and helpers shared by several commands."""
from __future__ import annotations

import click

from twill import MAX_COUNT

class Seconds(click.ParamType):
    """A time limit: a finite number of seconds above 0 (click's FloatRange lets nan and inf by)."""

    name = "seconds"

    def convert(self, value, param, ctx):
        import math
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"'{value}' is not a number of seconds", param, ctx)
        if not (math.isfinite(seconds) and 0 < seconds <= 1e7):
            self.fail(f"{value} is not a time limit: give seconds above 0 (at most 1e7), or leave it out", param, ctx)
        return seconds


def _nonempty(ctx, param, value):
    if value == "":
        raise click.BadParameter("give a bundled name (h100, h200, b200) or a .yaml path", ctx, param)
    return value


gpu_option = click.option("--gpu", "gpu", metavar="NAME|PATH", default=None, callback=_nonempty,
                          help="machine description: a bundled name (h100, h200, b200) or a .yaml path")


def _groups(ctx, param, value):
    for g in value:
        if not [n for n in g.split(",") if n.strip()]:
            raise click.BadParameter(f"'{g}' names no op: write --group OP,OP,...", ctx, param)
    return value


def need_gpu(gpu: str | None, what: str):
    from twill.errors import InputError
    if gpu is None:
        raise InputError(f"{what} needs --gpu NAME (h100, h200, b200) or --gpu PATH.yaml")
    return load_machine(gpu)


_MACHINES: dict = {}


def load_machine(name_or_path: str):
    """twill.machine.load_machine, remembered per file (its path and a hash of its bytes) within
    one process: parsing a description takes a tenth of a second, and a process that runs many
    commands (a test, a notebook) reads the same few. A Machine is frozen, so sharing it is safe."""
    import hashlib
    import os

    from twill.machine import bundled_specs, load_machine as load
    as_path = "/" in name_or_path or name_or_path.endswith((".yaml", ".yml")) or os.path.exists(name_or_path)
    path = name_or_path if as_path else bundled_specs().get(name_or_path, name_or_path)  # load's own rule
    try:
        with open(path, "rb") as f:
            key = (name_or_path, os.path.realpath(path), hashlib.sha256(f.read()).hexdigest())
    except (OSError, ValueError):
        return load(name_or_path)  # let it say what is wrong
    if key not in _MACHINES:
        if len(_MACHINES) > 16:
            _MACHINES.clear()
        _MACHINES[key] = load(name_or_path)
    return _MACHINES[key]


def solve_options(**kw):
    from twill.pipeline import SolveOptions
    return SolveOptions(**{k: v for k, v in kw.items() if v is not None})


# The largest count an integer option takes (twill.MAX_COUNT): --warps 2^63 reached CP-SAT as a bound it cannot
# hold (a TypeError traceback, fuzz42).


def count(least: int, most: int = MAX_COUNT) -> click.IntRange:
    return click.IntRange(least, most)


# The flags that change the scheduling model, shared by every command that solves a graph.
MODEL_FLAGS = (
    click.option("--normalize-bound", type=count(1), default=300, show_default=True,
                 help="U: the largest sum of normalized costs"),
    click.option("--max-ii", type=count(1), help="give up above this initiation interval (exit 1)"),
    click.option("--warps", type=count(1), help="override the machine's warp limit"),
    click.option("--registers", type=click.IntRange(24, 255), help="reduced per-thread register ceiling"),
    click.option("--register-reserve", type=click.IntRange(0, 255),
                 help="per-thread registers a role holds outside its tiles [default: the machine's limits.register_reserve]"),
    click.option("--no-cross-role", "no_cross", is_flag=True,
                 help="forbid producer and consumer on different roles"),
    click.option("--depth", type=count(1), help="ring-buffer depth of streaming loads"),
    click.option("--group", "groups", multiple=True, metavar="OP,OP,...", callback=_groups,
                 help="pin these ops to one role (repeat: each group gets its own role), to test a strategy"),
    click.option("--loop", type=count(0), help="for a .ttgir input: which loop to import"),
    click.option("--split-rows", type=count(1), default=1,
                 help="sub-tile: the rows of the loop's mma tiles as N independent parts (N = 2: FA3's halves)"),
    click.option("-q", "--quiet", is_flag=True, help="no progress on stderr"),
)


def model_flags(command):
    """Decorate a command with MODEL_FLAGS; it receives them as keyword arguments."""
    for flag in reversed(MODEL_FLAGS):
        command = flag(command)
    return command


def options_from_flags(flags: dict, **more):
    """SolveOptions (the model options, twill/options.py, and the run's own) from the MODEL_FLAGS
    values, plus any command-specific fields in `more`."""
    return solve_options(normalize_bound=flags["normalize_bound"], max_ii=flags["max_ii"], warps=flags["warps"],
                         registers=flags["registers"],
                         register_reserve=flags["register_reserve"], cross_role=not flags["no_cross"], depth=flags["depth"],
                         groups=tuple(tuple(n.strip() for n in g.split(",") if n.strip()) for g in flags["groups"])
                         or None, **more)


def progress_printer(quiet: bool):
    """Progress lines on stderr (rich status when stderr is a terminal)."""
    import time

    from rich.console import Console
    console = Console(stderr=True)
    t0 = time.perf_counter()

    def report(stage: str, info: dict) -> None:
        if quiet:
            return
        detail = " ".join(f"{k}={v}" for k, v in info.items())
        console.print(f"[dim]{time.perf_counter() - t0:7.2f}s[/dim] {stage} {detail}", highlight=False)

    return report


def checked_schedule(source: str, gpu: str | None):
    """A schedule file and the machine it is for, checked before emit-cuda or plot use it: its
    fields sound (fileio.load_schedule), its digests those of its own graph, options and machine,
    and `twill.verify` accepting it for its graph on that machine. Anything edited is refused
    with the field named. A file older than the graph and options digests has only those two
    checks skipped: it is still verified."""
    from twill.fileio import load_schedule
    schedule = load_schedule(source)
    machine = machine_for(schedule, gpu, source)
    check_file(schedule, machine, source)
    return schedule, machine


def machine_for(schedule, gpu: str | None, source: str | None = None):
    """The machine a schedule file was solved for: the bundled spec it names, or --gpu PATH; its
    arch and (where the file records it) its digest must match. `source` (the file) starts each message."""
    from twill.errors import Diagnostic, InputError
    from twill.machine import bundled_specs
    at = f"'{source}': " if source else ""
    if gpu is None:
        if schedule.machine not in bundled_specs():
            raise InputError(Diagnostic(at + f"the schedule was solved for machine '{schedule.machine}', which is not "
                                        f"a bundled spec ({', '.join(sorted(bundled_specs()))})",
                                        hint="pass the machine description it was solved with: --gpu PATH.yaml"))
        machine = load_machine(schedule.machine)
        if schedule.arch and schedule.arch != machine.arch:
            raise InputError(Diagnostic(at + f"the schedule says arch {schedule.arch}, but {schedule.machine} is "
                                        f"{machine.arch}", hint="solve it again for the machine you mean"))
        if schedule.machine_digest and schedule.machine_digest != machine.digest:
            raise InputError(Diagnostic(at + f"the schedule's 'machine_digest' says it was solved with a machine "
                                        f"description named '{schedule.machine}' that is not the bundled "
                                        f"{schedule.machine} (its limits, units or op costs differ)",
                                        hint="pass the machine description it was solved with: --gpu PATH.yaml"))
        return machine
    machine = load_machine(gpu)
    if schedule.arch and machine.arch != schedule.arch:
        raise InputError(Diagnostic(at + f"the schedule was solved for {schedule.machine} ({schedule.arch}) but --gpu "
                                    f"{gpu} is {machine.arch}", hint="drop --gpu, or solve again for this machine"))
    if schedule.machine_digest and schedule.machine_digest != machine.digest:
        raise InputError(Diagnostic(at + f"the schedule's 'machine_digest' is not that of --gpu {gpu}: it was solved "
                                    "with another description (its limits, units or op costs differ)",
                                    hint="pass the machine description it was solved with, or solve it again"))
    return machine


def check_file(schedule, machine, source: str) -> None:
    """A schedule read from a file must still be one `twill.verify` accepts for its own graph on
    `machine` (a hand-edited start time, role or budget is caught here, not in the CUDA), and its
    graph and options must be the ones its digests name."""
    from twill.errors import Diagnostic, InputError
    from twill.options import ModelOptions
    from twill.schedule import graph_digest
    from twill.tir import parse_tir
    from twill.verify import verify

    if not schedule.graph_tir:
        raise InputError(Diagnostic(f"'{source}' holds no graph ('graph' is empty)",
                                    hint="solve it again with twill solve GRAPH --gpu NAME -o FILE"))
    again = f"solve it again: twill solve GRAPH --gpu {machine.name} -o {source}"
    if schedule.graph_digest and schedule.graph_digest != graph_digest(schedule.graph_tir):
        raise InputError(Diagnostic(f"'{source}': 'graph' was edited (it no longer matches 'graph_digest')",
                                    hint=again))
    options = ModelOptions.from_recorded(schedule.options, schedule.stage)
    if schedule.options_digest and schedule.options_digest != options.digest():
        raise InputError(Diagnostic(f"'{source}': 'options' was edited (it no longer matches 'options_digest')",
                                    hint=again))
    try:
        graph = parse_tir(schedule.graph_tir, f"{source} (its 'graph')")
    except InputError as exc:  # lines within the 'graph' text; then what to do
        raise InputError(*exc.diagnostics, Diagnostic(f"'{source}': its 'graph' is not a graph twill reads",
                                                      hint=again)) from None
    try:
        bad = verify(schedule, graph, machine)
    except (KeyError, IndexError, TypeError, ValueError, ArithmeticError) as exc:  # a field the checks above
        raise InputError(Diagnostic(f"'{source}' does not fit its own graph: {type(exc).__name__}: {exc}",  # miss
                                    hint=again)) from None
    if bad:
        more = f" ({len(bad) - 3} more)" if len(bad) > 3 else ""
        raise InputError(*(Diagnostic(f"'{source}' fails verification against its graph and {machine.name}: {v}")
                           for v in bad[:3]),
                         Diagnostic(f"{len(bad)} violation(s){more}: the file was edited, or solved by another "
                                    "version of twill", hint=again))


INNER_GRAPH = "<graph of "  # the file name the library gives a schedule's own 'graph' text when it parses it


def at_ops(exc, graph, source: str):
    """`exc` with its places made the user's: a message about "op 'NAME'" that has no place, or one in the
    schedule's own re-printed graph text, put at NAME's line in `graph`'s file (a graph read from `source`);
    without `graph` (`source` is a schedule), a place in its 'graph' text is said to be in `source`'s 'graph'.
    A message with no place and no op (the kernel's shared memory, say) starts with `source`."""
    import re
    from dataclasses import replace

    from twill.errors import Diagnostic
    spans = {op.name: op.span for op in graph.ops if getattr(op, "span", None)} if graph is not None else {}
    diagnostics = []
    for d in exc.diagnostics:
        m = re.match(r"op '([^']+)'", d.message)
        inner = d.span is not None and d.span.file.startswith(INNER_GRAPH)
        if (d.span is None or inner) and m and m.group(1) in spans:
            d = Diagnostic(d.message, spans[m.group(1)], d.hint, d.severity)
        elif inner and graph is None:
            d = Diagnostic(d.message, replace(d.span, file=f"{source} (its 'graph')"), d.hint, d.severity)
        elif d.span is None and source not in d.message:  # about the whole kernel: the file it came from
            d = Diagnostic(f"{source}: {d.message}", None, d.hint, d.severity)
        diagnostics.append(d)
    return type(exc)(*diagnostics)


def distinct_output(source: str, output: str | None) -> None:
    """-o must not name the input (a schedule written over its graph would lose the graph), and its folder
    must exist."""
    import os

    from twill.errors import InputError
    from twill.fileio import writable_folder
    if output and os.path.exists(output) and os.path.exists(source) and os.path.samefile(source, output):
        raise InputError(f"-o {output} is the input file itself: writing there would replace it")
    if output and (os.path.isfile(output) or not os.path.exists(output)):  # (not /dev/null, a FIFO)
        writable_folder(output)  # a missing folder is said before the work, not after it


def graph_of(source: str, flags: dict):
    """The graph of a .tir or .ttgir file, sub-tiled as --split-rows asks."""
    from twill.errors import Diagnostic, InputError
    from twill.fileio import load_graph, read_text
    from twill.split import split_rows
    check_graph_file(source)
    check_loop(source, flags["loop"])
    if source.endswith(".tir"):
        from twill.tir_sequence import is_sequence
        if is_sequence(read_text(source, "graph")):
            raise InputError(Diagnostic(f"'{source}' holds loops in sequence (named loops): this takes one loop",
                                        hint="solve and emit-cuda take the sequence; give explain, plot or "
                                             "--split-rows one section as a file of its own"))
    return split_rows(load_graph(source, flags["loop"]), flags["split_rows"])


# Files a graph argument is sometimes given by mistake: what they are, and where they go instead.
NOT_GRAPHS = {".json": ("a schedule (JSON), not a graph", "solve and explain read a .tir or .ttgir graph; "
                        "emit-cuda and plot read a schedule .json"),
              ".yaml": ("a machine description, not a graph", "pass it as --gpu PATH.yaml, and the graph as GRAPH.tir"),
              ".yml": ("a machine description, not a graph", "pass it as --gpu PATH.yml, and the graph as GRAPH.tir")}


NOT_TTGIR = {".tir": ("a twill graph already, not a Triton TTGIR dump", "solve, explain and emit-cuda read it "
                       "directly; import reads a .ttgir (MLIR) dump"),
             ".json": NOT_GRAPHS[".json"], ".yaml": NOT_GRAPHS[".yaml"], ".yml": NOT_GRAPHS[".yml"]}


def check_graph_file(source: str, table: dict = NOT_GRAPHS) -> None:
    """A schedule or machine file given where a graph goes (or a graph where a TTGIR dump goes: `table`) is
    said to be one, not parsed as what it is not (the .tir parser answers "missing 'kernel NAME' line" at a
    JSON file's first brace)."""
    import os

    from twill.errors import Diagnostic, InputError
    what = table.get(os.path.splitext(source)[1].lower())
    if what:
        raise InputError(Diagnostic(f"'{source}' is {what[0]}", hint=what[1]))


def check_loop(source: str, loop) -> None:
    """--loop picks a loop of a Triton dump; a .tir holds one loop, so there it is a usage error."""
    from twill.errors import InputError
    if loop is not None and not source.endswith((".ttgir", ".mlir")):
        raise InputError(f"--loop {loop} picks a loop of a .ttgir dump, but '{source}' is a .tir graph "
                         "(one loop): leave --loop out")


def graph_or_sequence(source: str, flags: dict):
    """The graph of a .tir or .ttgir file (as `graph_of`), or its loops in sequence: a .tir of named
    loops, or a .ttgir whose tile loops run one after the other (without --loop)."""
    from twill.fileio import read_text
    check_graph_file(source)
    if flags.get("loop") is None and flags.get("split_rows", 1) in (1, None) and source.endswith((".ttgir", ".mlir", ".tir")):
        text = read_text(source, "graph")
        if source.endswith(".tir"):
            from twill.tir_sequence import is_sequence, parse_sequence
            if is_sequence(text):
                return parse_sequence(text, source)
        else:  # one import: the graph of a one-loop kernel is the one graph_of would give
            from twill.ttgir.sequence import import_sequence
            return import_sequence(text, source)[0]
    return graph_of(source, flags)
