"""Parse and print a `.tir` file of several loops in sequence (twill.sequence; docs/formats.md,
"Loops in sequence").

    file    := "kernel" NAME  section+
    section := decl*  [prologue]  "loop" NAME "{"  op*  [yield]  "}"  [epilogue]
    decl    := ... | "input" NAME ":" type "=" LOOP "." CARRY        (a hand-over)

A section is a one-loop file without its `kernel` line: every statement keeps its meaning and its
checks (twill.tir parses each section, with the file's line numbers). A section ends at its loop's
closing `}`, or at its epilogue's; the next statement starts the next one. A file whose loops have
no names is a one-loop file (twill.tir), read as before.
"""
from __future__ import annotations

from dataclasses import replace

from .errors import Diagnostic, ErrorCollector, InputError, Span
from .fileio import read_text
from .sequence import Handover, Sequence, check, loop_kernel
from .tir import parse_tir, print_tir
from .tir_text import Line


def is_sequence(text: str) -> bool:
    """Does the file name its loops (`loop NAME {`)? Such a file is a sequence, even of one loop."""
    for number, source in enumerate(text.split("\n"), 1):
        toks = Line("", number, source).tokens
        if len(toks) >= 3 and toks[0].text == "loop" and toks[1].kind == "name" and toks[2].text == "{":
            return True
    return False


class _Section:
    def __init__(self, first: int):
        self.first, self.last = first, first
        self.name, self.name_tok, self.loop_line = None, None, None


def _sections(lines: list[str], file: str, errors: ErrorCollector) -> tuple[str, int, list[_Section]]:
    """The kernel's name, its line, and the sections' line ranges and loop names."""
    kernel, kernel_line, sections, state, cur = "", 0, [], "start", None
    for number, source in enumerate(lines, 1):
        line = Line(file, number, source)
        toks = line.tokens
        if not toks:
            continue
        texts = [t.text for t in toks]
        if state == "start":  # the one-loop parser reports a bad first line, in the first section
            kernel_line, state = number, "decl"
            kernel = texts[1] if len(texts) >= 2 and texts[0] == "kernel" else ""
            continue
        if state == "after" and texts[0] == "epilogue":
            state, cur.last = "epilogue", number
            continue
        if state in ("after", "done"):  # the next statement starts the next section
            state, cur = "decl", None
        if cur is None:
            cur = _Section(number)
            sections.append(cur)
        cur.last = number
        if state == "decl" and texts[0] == "loop" and texts[1:2] != ["="]:
            state, cur.loop_line = "loop", number
            if len(toks) >= 3 and toks[1].kind == "name" and texts[2] == "{":
                cur.name, cur.name_tok = texts[1], toks[1]
            else:
                errors.error("a loop of a kernel of several loops needs a name: 'loop NAME {'",
                             line.span(toks[1] if len(toks) > 1 else toks[0]),
                             "name every loop (the hand-overs name them: 'input h : ... = NAME.CARRY')")
        elif state == "loop" and texts == ["}"]:
            state = "after"
        elif state == "epilogue" and texts == ["}"]:
            state = "done"
    return kernel, kernel_line, sections


def _handover(line: Line, loop: str, errors: ErrorCollector) -> tuple[Handover | None, int | None]:
    """The hand-over of an `input NAME : type = LOOP.CARRY` line, and the column its `=` is at."""
    toks = line.tokens
    if not toks or toks[0].text != "input":
        return None, None
    eq = next((k for k, t in enumerate(toks) if t.text == "="), None)
    if eq is None:
        return None, None
    src = toks[eq + 1] if eq + 1 < len(toks) else None
    parts = src.text.split(".") if src is not None and src.kind == "name" else []
    if len(parts) != 2 or not all(parts) or eq + 2 != len(toks) or len(toks) < 2:
        errors.error("expected 'LOOP.CARRY' after '=' (the earlier loop's carry this input is)",
                     line.span(src) if src is not None else line.span())
        return None, toks[eq].col
    return Handover(loop, toks[1].text, parts[0], parts[1], line.span(src)), toks[eq].col


def parse_sequence(text: str, file: str = "<string>") -> Sequence:
    """Parse a `.tir` of named loops; raise one `InputError` listing every problem found."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    lines = lines[:-1] if lines and lines[-1] == "" else lines
    errors = ErrorCollector()
    kernel, kernel_line, sections = _sections(lines, file, errors)
    names, graphs, handovers = [], [], []
    for sec in sections:
        if sec.loop_line is None:
            first = Line(file, sec.first, lines[sec.first - 1])
            errors.error("statements after the last loop that no 'loop NAME {' follows", first.span(first.tokens[0]),
                         "each section ends with its loop (and its epilogue)")
            continue
        if sec.name is None:
            continue  # reported
        own = [""] * len(lines)
        if kernel_line:
            own[kernel_line - 1] = lines[kernel_line - 1]
        name = sec.name
        for number in range(sec.first, sec.last + 1):
            source = lines[number - 1]
            line = Line(file, number, source)
            if number == sec.loop_line and sec.name is not None:
                tok = sec.name_tok
                source = source[:tok.col - 1] + " " * len(tok.text) + source[tok.col - 1 + len(tok.text):]
            else:
                h, col = _handover(line, name, errors)
                if col is not None:
                    source = source[:col - 1]
                if h is not None:
                    handovers.append(h)
            own[number - 1] = source
        if name in names:
            errors.error(f"loop '{name}' is named twice", Line(file, sec.loop_line, lines[sec.loop_line - 1]).span(sec.name_tok))
            continue
        try:
            graph = parse_tir("\n".join(own) + "\n", file)
        except InputError as e:
            errors.diagnostics.extend(_original(d, lines) for d in e.diagnostics)
            continue
        names.append(name)
        graphs.append(replace(graph, kernel=loop_kernel(kernel, name)))
    if not errors.diagnostics:
        check(Sequence(kernel, tuple(names), tuple(graphs), tuple(handovers), file), errors)
    errors.raise_if_any()
    return Sequence(kernel, tuple(names), tuple(graphs), tuple(handovers), file)


def _original(d: Diagnostic, lines: list[str]) -> Diagnostic:
    """A diagnostic of a section with its line's own text (the loop's name, the hand-over shown)."""
    s = d.span
    if s is None or not 1 <= s.line <= len(lines):
        return d
    return replace(d, span=Span(s.file, s.line, s.col, lines[s.line - 1], s.length))


def load_sequence(path) -> Sequence:
    file = str(path)
    return parse_sequence(read_text(file, ".tir file"), file)


def print_sequence(seq: Sequence) -> str:
    """Canonical text: `parse_sequence(print_sequence(s)) == s`. Each loop as `print_tir` writes a
    one-loop file, without the `kernel` line, its loop named, its hand-overs after their inputs."""
    out = [f"kernel {seq.kernel}"]
    for name, graph in zip(seq.names, seq.graphs):
        into = {h.input: h for h in seq.handovers_into(name)}
        out.append("")
        for text in print_tir(graph).split("\n")[1:-1]:
            toks = text.split()
            if text == "loop {":
                text = f"loop {name} {{"
            elif len(toks) >= 2 and toks[0] == "input" and toks[1] in into:
                text += f" = {into[toks[1]].text}"
            out.append(text)
    return "\n".join(out) + "\n"
