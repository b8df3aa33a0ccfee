"""Machine descriptions: loading, validation and the per-op cost model.

A description is YAML (contract section 2). Every key is validated against `SCHEMA`: a missing,
misspelt or wrongly typed key is an `InputError` naming the file, the line and the key path
(``limits.warps``), with a suggestion for misspellings. `--gpu NAME` finds the bundled
`specs/NAME.yaml`; a path works too.
"""
from __future__ import annotations

import difflib
import math
import importlib.util
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from . import MAX_COUNT
from .errors import Diagnostic, InputError, Span, did_you_mean
from .expr import Expr, ExprError, parse_expr

# key -> (type, required, default). Types: int, float, str, bool, "expr", dict (nested schema).
LIMITS = {
    "warps": (int, True, None),
    "warp_group": (int, True, None),
    "registers_per_thread": (int, True, None),
    "registers_per_sm": (int, True, None),
    "smem_bytes": (int, True, None),
    "tmem_bytes": (int, False, 0),
    # Extensions (ours): registers each thread keeps for indices and addresses, the least a
    # role may ask `setmaxnreg` for, and the granule register budgets come in.
    "register_reserve": (int, False, 8),
    # Registers per thread the code of an op other than an mma keeps while it computes on a
    # register tile (its temporaries: twill.liveness.scratch): ours, measured against ptxas.
    "register_scratch": (int, False, 0),
    "min_registers": (int, False, 24),
    "register_granule": (int, False, 8),
}
OP_FIELDS = {
    "unit": (str, True, None),
    "cycles": ("expr", False, None),  # required unless `latency` gives it (_check_ops)
    "latency": ("latency", False, None),
    "occupancy": ("expr", False, None),
    "issue": (str, False, "warp_group"),
    "async": (bool, False, False),
    "variable_latency": (bool, False, False),
    # Ours: how long an async op keeps the role that issues it busy (default: one issue cycle).
    # A Hopper wgmma holds its warpgroup until the tensor core has taken its instructions.
    "hold": ("expr", False, None),
    "source": (str, False, None),
}
TOP = {
    "name": (str, True, None),
    "arch": (str, True, None),
    "clock_ghz": (float, True, None),
    "source": (str, True, None),
    "limits": (LIMITS, True, None),
    "units": ("units", True, None),
    "communication": ({"cross_warp_cycles": (float, True, None), "tile_handoff": (bool, False, True),
                       "source": (str, False, None)}, True, None),
    "ops": ("ops", True, None),
    "streaming_depth": (int, False, 2),
    "sources": (dict, False, None),
    "rates": ("rates", False, None),
    "calibration": (dict, False, None),  # twill calibrate's record of its measurements (docs/calibrate.md)
}
ISSUE_KINDS = ("warp", "warp_group")
# An op's latency as an interval (ours): `latency: {min: 500, typical: 800, max: 5000}`, each a
# number or an expression. The solver schedules for `typical` (it is the op's `cycles`); the
# schedule reports how much of the way to `max` it can absorb (twill/slack.py).
LATENCY = {"min": ("expr", True, None), "typical": ("expr", True, None), "max": ("expr", True, None),
           "source": (str, False, None)}
BOUNDS = ("min", "typical", "max")
# The least value of each numeric key (a clock of 0, a warpgroup of no warps or a register granule
# of 0 describe no machine; the solver divides by some of them).
MINIMUM = {
    **{f"limits.{key}": 1 for key in LIMITS}, "limits.tmem_bytes": 0, "limits.register_reserve": 0,
    "limits.register_scratch": 0,
    "clock_ghz": 1e-3, "communication.cross_warp_cycles": 0, "streaming_depth": 1,
}




@dataclass(frozen=True)
class OpSpec:
    unit: str
    cycles: Expr
    occupancy: Expr | None = None
    issue: str = "warp_group"
    is_async: bool = False
    variable_latency: bool = False
    # (min, typical, max) when the description gives `latency`; then `cycles` is `typical`. Not
    # in the repr, so a description without intervals keeps its digest (Machine.digest adds them).
    latency: tuple[Expr, Expr, Expr] | None = field(default=None, repr=False)
    # cycles an async op keeps its issuing role busy (None: one issue cycle). Not in the repr, so a
    # description without it keeps its digest (Machine.digest adds it).
    hold: Expr | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Limits:
    warps: int
    warp_group: int
    registers_per_thread: int
    registers_per_sm: int
    smem_bytes: int
    tmem_bytes: int = 0
    register_reserve: int = 8
    register_scratch: int = 0
    min_registers: int = 24
    register_granule: int = 8


@dataclass(frozen=True)
class Machine:
    name: str
    arch: str
    clock_ghz: float
    limits: Limits
    units: tuple[tuple[str, int], ...]
    cross_warp_cycles: float
    ops: tuple[tuple[str, OpSpec], ...]
    streaming_depth: int = 2
    source: str = ""
    file: str = field(default="<machine>", compare=False)
    rates: tuple[tuple[str, float], ...] = ()  # rate class -> elements per cycle (twill.vocab)
    # may a 2-d register tile go to another role's op that reads it from registers (through shared
    # memory)? (`communication.tile_handoff`; problem.pinned_edges)
    tile_handoff: bool = True

    @property
    def digest(self) -> str:
        """A short hash of everything that shapes a schedule or a kernel (not the file it came
        from, nor its `source` notes): a schedule records it, so emit-cuda can tell a user's spec
        that reuses a bundled name from the bundled spec."""
        import hashlib
        model = (self.name, self.arch, self.clock_ghz, self.limits, self.units, self.cross_warp_cycles,
                 self.ops, self.streaming_depth) + ((self.rates,) if self.rates else ()) \
            + (() if self.tile_handoff else (("tile_handoff", False),))
        intervals = tuple((name, op.latency) for name, op in self.ops if op.latency is not None)
        model += (intervals,) if intervals else ()
        holds = tuple((name, op.hold) for name, op in self.ops if op.hold is not None)
        model += (("hold",) + holds,) if holds else ()
        return hashlib.sha256(repr(model).encode()).hexdigest()[:16]

    @property
    def unit_caps(self) -> dict[str, int]:
        return dict(self.units)

    @property
    def op_specs(self) -> dict[str, OpSpec]:
        return dict(self.ops)

    @property
    def rate_of(self) -> dict[str, float]:
        return dict(self.rates)

    def restricted(self, warps: int | None = None, registers: int | None = None,
                   depth: int | None = None, reserve: int | None = None) -> "Machine":
        """This machine under a solve's model options: fewer warps, a reduced per-thread register
        budget, another default ring depth, another register reserve (the registers a role holds
        outside its tiles; emit-cuda's ptxas loop raises it). None keeps the machine's own value."""
        limits = self.limits
        if warps is not None:
            limits = replace(limits, warps=warps)
        if registers is not None:
            limits = replace(limits, registers_per_thread=registers)
        if reserve is not None:
            limits = replace(limits, register_reserve=reserve)
        return replace(self, limits=limits, streaming_depth=depth or self.streaming_depth)


# -- locating keys in the YAML source ----------------------------------------------------------

def _compose(text: str, file: str):
    try:
        return yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        span = _span(file, text, mark) if mark else Span(file, 1, 1)
        raise InputError(Diagnostic(f"invalid YAML: {getattr(exc, 'problem', exc)}", span)) from None


def _span(file: str, text: str, mark) -> Span:
    lines = text.splitlines()
    line = lines[mark.line] if mark.line < len(lines) else ""
    return Span(file, mark.line + 1, mark.column + 1, line)


_UNREADABLE = object()  # a node YAML composes but cannot construct (`alu: =`: the tag of `=` has no constructor)


class _Validator:
    def __init__(self, file: str, text: str):
        self.file, self.text, self.errors = file, text, []

    def load(self, node, path: str):
        """The node's value, or _UNREADABLE with an error at it."""
        try:
            return yaml.safe_load(yaml.serialize(node))
        except yaml.YAMLError as exc:
            self.error(node, f"'{path}': YAML cannot read this value ({getattr(exc, 'problem', None) or exc})",
                       "quote it if it is text, or write a number")
            return _UNREADABLE

    def error(self, node, message: str, hint: str | None = None) -> None:
        self.errors.append(Diagnostic(message, _span(self.file, self.text, node.start_mark), hint))

    def scalar(self, node, kind, path: str):
        if not isinstance(node, yaml.ScalarNode):
            self.error(node, f"'{path}' must be {_kind_name(kind)}")
            return None
        value = self.load(node, path)
        if value is _UNREADABLE:
            return None
        if kind == "expr":
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                self.error(node, f"'{path}' must be a number or an arithmetic expression")
                return None
            if isinstance(value, (int, float)) and value < 0:
                self.error(node, f"'{path}' must be at least 0, not {value!r}")
                return None
            try:
                return parse_expr(value)
            except ExprError as exc:
                span = _span(self.file, self.text, node.start_mark)
                col = span.col + exc.col - 1 + (1 if node.style in ("'", '"') else 0)
                self.errors.append(Diagnostic(f"'{path}': {exc}", Span(self.file, span.line, col, span.text)))
                return None
        ok = {int: lambda v: isinstance(v, int) and not isinstance(v, bool),
              float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
              bool: lambda v: isinstance(v, bool), str: lambda v: isinstance(v, str)}[kind](value)
        if not ok:
            self.error(node, f"'{path}' must be {_kind_name(kind)}, not {value!r}")
            return None
        low = MINIMUM.get(path)
        if low is not None and value < low:
            self.error(node, f"'{path}' must be at least {low}, not {value!r}")
            return None
        if kind is int and value > MAX_COUNT:
            self.error(node, f"'{path}' is {value}, more than the limit of {MAX_COUNT} (twill.MAX_COUNT)",
                       "no GPU comes near: the solvers hold counts in 64-bit arithmetic, and products of these "
                       "overflow it")
            return None
        return float(value) if kind is float else value

    def mapping(self, node, schema: dict, path: str) -> dict | None:
        if not isinstance(node, yaml.MappingNode):
            self.error(node, f"'{path or 'the file'}' must be a mapping of keys")
            return None
        out, seen, suggested = {}, set(), set()
        for key_node, value_node in node.value:
            key = key_node.value
            full = f"{path}.{key}" if path else key
            if key not in schema:
                close = difflib.get_close_matches(key, list(schema), n=1)
                hint = f"did you mean '{close[0]}'?" if close else f"allowed keys: {', '.join(schema)}"
                self.error(key_node, f"unknown key '{full}'", hint)
                suggested.update(close)
                continue
            if key in seen:
                self.error(key_node, f"duplicate key '{full}'")
            seen.add(key)
            out[key] = self.value(value_node, schema[key][0], full)
        for key, (_, required, default) in schema.items():
            if key not in seen:
                if required and key not in suggested:  # a misspelling already points at it
                    full = f"{path}.{key}" if path else key
                    self.error(node, f"missing required key '{full}'")
                elif default is not None:
                    out[key] = default
        return out

    def value(self, node, kind, path: str):
        if isinstance(kind, dict):
            return self.mapping(node, kind, path)
        if kind == "units":
            return self.table(node, path, lambda n, p: self.positive(n, p))
        if kind == "ops":
            return self.table(node, path, lambda n, p: self.mapping(n, OP_FIELDS, p))
        if kind == "rates":
            return self.rates(node, path)
        if kind == "latency":
            return self.latency(node, path)
        if kind is dict:
            value = self.load(node, path) if isinstance(node, yaml.MappingNode) else None
            return None if value is _UNREADABLE else value
        return self.scalar(node, kind, path)

    def table(self, node, path: str, item):
        if not isinstance(node, yaml.MappingNode):
            self.error(node, f"'{path}' must be a mapping")
            return {}
        return {k.value: item(v, f"{path}.{k.value}") for k, v in node.value}

    def rates(self, node, path: str) -> dict:
        """rates: {CLASS: elements per cycle}, CLASS one of twill.vocab.RATE_CLASSES (or `source`)."""
        from .vocab import RATE_CLASSES
        if not isinstance(node, yaml.MappingNode):
            self.error(node, f"'{path}' must be a mapping of rate classes")
            return {}
        out = {}
        for k, v in node.value:
            if k.value == "source":
                self.scalar(v, str, f"{path}.source")
            elif k.value not in RATE_CLASSES:
                close = difflib.get_close_matches(k.value, RATE_CLASSES, n=1)
                self.error(k, f"unknown key '{path}.{k.value}'",
                           f"did you mean '{close[0]}'?" if close else f"rate classes: {', '.join(RATE_CLASSES)}")
            else:
                value = self.scalar(v, float, f"{path}.{k.value}")
                if value is not None and value <= 0:
                    self.error(v, f"'{path}.{k.value}' must be more than 0, not {value:g}")
                elif value is not None:
                    out[k.value] = value
        return out

    def latency(self, node, path: str):
        """{min, typical, max}: each a latency; where they are numbers, min <= typical <= max."""
        bounds = self.mapping(node, LATENCY, path)
        if not bounds or any(bounds.get(b) is None for b in BOUNDS):
            return None
        values = {b: _constant(bounds[b]) for b in BOUNDS}
        for low, high in (("min", "typical"), ("typical", "max")):
            if values[low] is not None and values[high] is not None and values[high] < values[low]:
                self.error(node, f"'{path}.{high}' is {values[high]:g}, less than '{path}.{low}' ({values[low]:g})",
                           "an interval runs min <= typical <= max")
                return None
        return tuple(bounds[b] for b in BOUNDS)

    def positive(self, node, path: str):
        value = self.scalar(node, int, path)
        if value is not None and value < 1:
            self.error(node, f"'{path}' must be at least 1")
        return value


def _constant(e: Expr) -> float | None:
    """The value of an expression that names no shape (None when it does)."""
    if e.names:
        return None
    try:
        return e({})
    except (ExprError, ZeroDivisionError):
        return None


def _kind_name(kind) -> str:
    return {int: "an integer", float: "a number", bool: "a boolean (true/false)", str: "a string",
            "expr": "a number or an expression"}.get(kind, "a mapping")


MAX_NESTING = 64  # a machine description nests a few levels (ops: NAME: {field: value}); YAML past this is refused


def parse_machine(text: str, file: str = "<machine>") -> Machine:
    try:
        return _parse_machine(text, file)
    except RecursionError:  # nesting deeper than Python's stack, wherever the YAML reader or validator met it
        raise InputError(Diagnostic(f"invalid YAML: nested more than {MAX_NESTING} deep", _deepest(text, file),
                                    "a machine description nests a few levels: ops: NAME: {field: value}")) from None


def _deepest(text: str, file: str) -> Span:
    """Where `text` first nests past MAX_NESTING levels ([ and { of flow style, or block indentation)."""
    depth = 0
    for n, line in enumerate(text.splitlines(), 1):
        indent = len(line) - len(line.lstrip(" "))
        if line.strip() and indent > 2 * MAX_NESTING:
            return Span(file, n, indent + 1, line[:200])
        for col, ch in enumerate(line, 1):
            depth += {"[": 1, "{": 1, "]": -1, "}": -1}.get(ch, 0)
            if depth > MAX_NESTING:
                return Span(file, n, col, line[:200])
    return Span(file, 1, 1)


def _parse_machine(text: str, file: str) -> Machine:
    root = _compose(text, file)
    if root is None:
        raise InputError(Diagnostic("the machine description is empty", Span(file, 1, 1)))
    v = _Validator(file, text)
    data = v.mapping(root, TOP, "")
    if data is not None:
        _check_ops(v, root, data)
    if v.errors:
        raise InputError(*v.errors)
    limits = Limits(**data["limits"])
    ops = tuple(
        (name, OpSpec(unit=f["unit"], cycles=f["cycles"] if f.get("cycles") is not None else f["latency"][1],
                      occupancy=f.get("occupancy"), issue=f["issue"], is_async=f["async"],
                      variable_latency=f["variable_latency"], latency=f.get("latency"), hold=f.get("hold")))
        for name, f in sorted(data["ops"].items())
    )
    return Machine(
        name=data["name"], arch=data["arch"], clock_ghz=data["clock_ghz"], limits=limits,
        units=tuple(sorted(data["units"].items())), cross_warp_cycles=data["communication"]["cross_warp_cycles"],
        ops=ops, streaming_depth=data["streaming_depth"], source=data["source"], file=file,
        rates=tuple(sorted((data.get("rates") or {}).items())),
        tile_handoff=data["communication"].get("tile_handoff", True),
    )


def _check_ops(v: _Validator, root, data: dict) -> None:
    """Cross-key checks: every op names a declared unit and a known issue kind."""
    units = set(data.get("units") or {})
    nodes = {k.value: val for k, val in root.value}
    op_nodes = {k.value: val for k, val in nodes["ops"].value} if "ops" in nodes and isinstance(
        nodes["ops"], yaml.MappingNode) else {}
    for name, fields in (data.get("ops") or {}).items():
        if not fields:
            continue
        node = op_nodes[name]
        keys = {k.value for k, _ in node.value} if isinstance(node, yaml.MappingNode) else set()
        if "cycles" not in keys and "latency" not in keys and keys <= set(OP_FIELDS):  # (a misspelling is reported)
            v.error(node, f"missing required key 'ops.{name}.cycles'",
                    f"or give 'ops.{name}.latency: {{min: ..., typical: ..., max: ...}}'")
        elif "cycles" in keys and "latency" in keys:
            v.error(node, f"'ops.{name}.cycles' and 'ops.{name}.latency' both give its latency: keep one "
                          f"(with 'latency', the solver's cycles are its 'typical')")
        if fields.get("unit") and units and fields["unit"] not in units:
            v.error(node, f"'ops.{name}.unit' is '{fields['unit']}', which is not among units "
                          f"({', '.join(sorted(units))})")
        if fields.get("issue") not in ISSUE_KINDS:
            v.error(node, f"'ops.{name}.issue' must be one of {', '.join(ISSUE_KINDS)}")


def bundled_specs() -> dict[str, Path]:
    """Installed, the specs are package data of `twill.specs`; in a checkout, the top-level specs/."""
    try:
        spec = importlib.util.find_spec("twill.specs")
    except ImportError:
        spec = None
    roots = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    for root in roots + [Path(__file__).resolve().parent.parent / "specs"]:
        if not root.is_dir():
            continue
        found = {p.name[:-5]: p for p in sorted(root.iterdir()) if p.name.endswith(".yaml")}
        if found:
            return found
    return {}


def load_machine(name_or_path: str) -> Machine:
    """`h100` finds the bundled spec; anything with a slash or a .yaml suffix is a path."""
    path = Path(name_or_path)
    if not (path.suffix in (".yaml", ".yml") or "/" in name_or_path or path.exists()):
        specs = bundled_specs()
        if name_or_path not in specs:
            hint = did_you_mean(name_or_path, specs) or "give a path to a machine .yaml file"
            raise InputError(Diagnostic(f"unknown GPU '{name_or_path}' (bundled: {', '.join(sorted(specs))})",
                                        hint=hint))
        path = specs[name_or_path]
    try:
        text = path.read_text()
    except UnicodeDecodeError:  # the line and column of the first byte that is not UTF-8
        from .fileio import read_text
        text = read_text(path, "machine description")
    except OSError as exc:
        raise InputError(Diagnostic(f"cannot read machine description '{name_or_path}': {exc.strerror}")) from None
    text = text.removeprefix("\ufeff")  # a byte-order mark is not content
    return parse_machine(text, str(name_or_path) if "/" in name_or_path or path.suffix else str(path))
