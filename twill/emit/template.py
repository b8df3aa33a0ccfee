"""The static C++ of an emitted file, in templates under cuda_runtime/ (*.tpl), filled by `fill`.

A template is the C++ as it is emitted, with holes named `{{key}}`:

- a line that is only a hole (after its indentation) takes a list of lines: each is written with
  that indentation (an empty line stays empty), and an empty list removes the line;
- a hole inside a line takes a string.

Every hole must be given a value and every value must have a hole, so a template and its caller
cannot drift apart silently. No logic lives in a template: what varies is computed in Python.
"""
from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

_HOLE = re.compile(r"\{\{(\w+)\}\}")
_LINE_HOLE = re.compile(r"( *)\{\{(\w+)\}\}")


@cache
def template(name: str) -> str:
    """The text of cuda_runtime/`name`."""
    return files(__package__).joinpath("cuda_runtime", name).read_text(encoding="utf-8")


def fill(name: str, **values: str | list[str]) -> str:
    """Template `name` with its holes filled (see the module docstring)."""
    out: list[str] = []
    used: set[str] = set()

    def value(key: str, kind: type):
        if key not in values or not isinstance(values[key], kind):
            raise KeyError(f"template {name}: hole {{{{{key}}}}} needs a {kind.__name__} value")
        used.add(key)
        return values[key]

    for line in template(name).split("\n"):
        whole = _LINE_HOLE.fullmatch(line)
        if whole and isinstance(values.get(whole[2]), list):
            out.extend(whole[1] + x if x else "" for x in value(whole[2], list))
            continue
        out.append(_HOLE.sub(lambda hole: value(hole[1], str), line))
    unused = set(values) - used
    if unused:
        raise KeyError(f"template {name} has no hole for {', '.join(sorted(unused))}")
    return "\n".join(out)
