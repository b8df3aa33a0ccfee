"""The calibrated machine YAML: the base spec's keys and layout, the measured values in, a `#`
comment on every line saying where its numbers come from, and a `calibration:` section.

Every line that holds a number ends in a comment: `measured DATE on CARD: WHAT (spread)` for a
measured value, `from BASE: ITS OWN COMMENT` for one taken from the base spec. The text depends only
on its inputs (the raw measurements carry their own date), so the same raw file gives the same bytes.
"""
from __future__ import annotations

import json
import re
import textwrap

import yaml

from .derive import Measured, Records
from .stats import num, spread

OP_FIELD_ORDER = ("unit", "cycles", "latency", "occupancy", "hold", "issue", "async", "variable_latency", "source")
LATENCY_ORDER = ("min", "typical", "max")
PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
FORMAT = "twill-calibration/1"


def base_comments(text: str) -> dict[str, str]:
    """The `#` comment of each line of a block-style YAML file, by the key path of the line
    (`limits.warps`, `ops.exp2`): indentation gives the nesting."""
    out, stack = {}, []
    for line in text.splitlines():
        m = re.match(r"^( *)([A-Za-z_][A-Za-z0-9_]*):(.*)$", line)
        if not m:
            continue
        depth = len(m.group(1)) // 2
        stack[depth:] = [m.group(2)]
        rest = m.group(3)
        if "#" in rest and not rest.strip().startswith(("'", '"')):
            out[".".join(stack)] = rest.split("#", 1)[1].strip()
    return out


def scalar(v) -> str:
    """One YAML scalar: true/false, integers, numbers to 6 significant digits, names plain,
    anything else double-quoted."""
    if isinstance(v, dict):
        return flow(v, LATENCY_ORDER)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() else f"{v:.6g}"
    s = str(v)
    return s if PLAIN.match(s) and s not in ("true", "false", "null", "yes", "no", "on", "off") else json.dumps(s)


def flow(d: dict, order=None) -> str:
    keys = [k for k in (order or ()) if k in d] + [k for k in d if k not in (order or ())]
    return "{" + ", ".join(f"{k}: {scalar(d[k])}" for k in keys) + "}"


def apply(base: dict, measured) -> tuple[dict, tuple[Measured, ...]]:
    """The base spec's data with the measured values in; the values that found a key. An op's
    fields are set only where the base describes that op."""
    data = json.loads(json.dumps(base))
    used = []
    for m in measured:
        parts = m.path.split(".")
        if parts[0] == "ops" and parts[1] not in data.get("ops", {}):
            continue
        node = data
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = m.value
        if parts[0] == "ops" and parts[-1] == "latency":
            node.pop("cycles", None)  # an interval gives the op's latency (its typical is the cycles)
        used.append(m)
    return data, tuple(used)


class Writer:
    """Lines with their comments, the comments aligned in a column."""

    def __init__(self):
        self.rows: list[tuple[str, str]] = []

    def add(self, body: str, comment: str = "") -> None:
        self.rows.append((body, comment))

    def text(self) -> str:
        width = max([len(b) for b, c in self.rows if c and len(b) < 64] + [0]) + 2
        out = []
        for body, comment in self.rows:
            out.append(f"{body.ljust(max(width, len(body) + 2))}# {comment}" if comment else body)
        return "\n".join(line.rstrip() for line in out) + "\n"


def render(base_text: str, base_label: str, measured, raw: dict, name: str, raw_label: str | None = None) -> str:
    """The calibrated spec's text. `raw` is the raw document (twill.calibrate.raw_document)."""
    base = yaml.safe_load(base_text)
    comments = base_comments(base_text)
    data, used = apply(base, measured)
    data["name"] = name
    data["arch"] = raw["arch"]
    by_path = {}
    for m in used:
        by_path.setdefault(m.path, []).append(m)
    stamp = f"measured {raw['date'][:10]} on {raw['card']}"

    def why(path: str, prefixes=None) -> str:
        ms = [m for p in (prefixes or [path]) for m in by_path.get(p, [])]
        if ms:
            return f"{stamp}: " + "; ".join(dict.fromkeys(m.note for m in ms))
        return f"from {base_label}: {comments.get(path, 'no comment there')}"

    w = Writer()
    w.add(f"# {name}: calibrated by `twill calibrate` on {raw['card']} ({raw['date']}); base {base_label}.")
    w.add("# Every number's comment says whether it was measured (with the spread) or taken from the base.")
    for key, value in data.items():
        if key in ("calibration",):
            continue
        if key == "source":
            text = (f"twill calibrate on {raw['card']} (compute capability {raw['compute_capability']}), "
                    f"{raw['date']}, nvcc {raw['nvcc']}: microbenchmarks of twill.calibrate "
                    f"({', '.join(sorted(raw['results']))}); values not measured are from {base_label}, "
                    f"whose source reads: {base.get('source', '')}")
            w.add("source: >-")
            for line in textwrap.wrap(text, 100):
                w.add("  " + line)
        elif key == "ops":
            w.add("ops:")
            pad = max(len(op) for op in value) + 1
            for op, fields in value.items():
                paths = [f"ops.{op}.{f}" for f in fields]
                w.add(f"  {(op + ':').ljust(pad + 1)} {flow(fields, OP_FIELD_ORDER)}",
                      why(f"ops.{op}", paths) if any(p in by_path for p in paths) else why(f"ops.{op}"))
        elif isinstance(value, dict):
            w.add(f"{key}:", comments.get(key, ""))
            for k, v in value.items():
                if isinstance(v, dict):
                    w.add(f"  {k}: {flow(v)}", why(f"{key}.{k}"))
                else:
                    w.add(f"  {k}: {scalar(v)}", why(f"{key}.{k}") if _numeric(v) else "")
        else:
            w.add(f"{key}: {scalar(value)}", why(key) if _numeric(value) else "")
    _calibration(w, raw, base_label, used, data, raw_label)
    return w.text()


def _numeric(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _leaf_paths(data: dict, prefix: str = ""):
    for k, v in data.items():
        path = f"{prefix}{k}"
        if k in ("source", "name", "arch", "calibration", "sources"):
            continue
        if isinstance(v, dict) and not (prefix.startswith("ops.")):
            yield from _leaf_paths(v, path + ".")
        else:
            yield path


def _calibration(w: Writer, raw: dict, base_label: str, used, data: dict, raw_label) -> None:
    """The `calibration:` section: when, where, what was measured and from which record."""
    measured = sorted({m.path for m in used})
    op_fields = {p.rsplit(".", 1)[0] for p in measured if p.startswith("ops.")}
    from_base = [p for p in _leaf_paths(data) if p not in measured and p not in op_fields]
    w.add("calibration:", "twill calibrate: what was measured, when, on which card (docs/calibrate.md)")
    w.add(f"  format: {FORMAT}")
    w.add(f"  date: {json.dumps(raw['date'])}")
    w.add(f"  card: {json.dumps(raw['card'])}")
    w.add(f"  compute_capability: {json.dumps(raw['compute_capability'])}")
    w.add(f"  driver: {json.dumps(str(raw['driver']))}")
    w.add(f"  nvcc: {json.dumps(raw['nvcc'])}")
    w.add(f"  base: {json.dumps(base_label)}")
    if raw_label:
        w.add(f"  raw: {json.dumps(raw_label)}")
    w.add(f"  compile_checked: [{', '.join(raw.get('compile_checked', []))}]")
    w.add("  measured:")
    for p in measured:
        w.add(f"    - {p}")
    w.add("  from_base:")
    for p in from_base:
        w.add(f"    - {p}")
    w.add("  records:")
    for bench, rec in Records(raw["results"]).all():
        if not rec["samples"]:
            continue
        s = spread(rec["samples"])
        fields = {"bench": bench, "name": rec["name"], **rec["params"], "unit": rec["unit"],
                  "min": float(num(s.min)), "median": float(num(s.median)), "p99": float(num(s.p99)),
                  "max": float(num(s.max)), "samples": s.n}
        w.add(f"    - {flow(fields)}", f"measured by the {bench} microbenchmark")
