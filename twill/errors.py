"""One error hierarchy for everything a user can get wrong, rendered once at the CLI.

Every error that concerns a place in a file carries a `Span`; `render()` prints it the way
compilers do (``FILE:LINE:COL: error: MESSAGE``, the source line, a caret) so editors can jump
to it. Errors are collected where it helps (a parser reports every problem of a file at once) and
raised together as one `TwillError` with several `Diagnostic`s.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from enum import Enum


def did_you_mean(name: str, choices) -> str | None:
    """A hint naming the closest of `choices` to a misspelt `name`, or None."""
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f"did you mean '{close[0]}'?" if close else None


@dataclass(frozen=True)
class Span:
    """A place in a source file: 1-based line and column, the line's text, and a length."""

    file: str
    line: int
    col: int
    text: str = ""
    length: int = 1

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Diagnostic:
    message: str
    span: Span | None = None
    hint: str | None = None
    severity: str = "error"

    def render(self) -> str:
        where = f"{self.span}: " if self.span else ""
        lines = [f"{where}{self.severity}: {self.message}"]
        if self.span and self.span.text:
            lines.append(f"  {self.span.text.rstrip()}")
            lines.append("  " + " " * (self.span.col - 1) + "^" + "~" * max(0, self.span.length - 1))
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)


class TwillError(Exception):
    """Base of every error twill reports to a user. `exit_code` follows the contract."""

    exit_code = 2

    def __init__(self, *diagnostics: Diagnostic | str):
        self.diagnostics = tuple(d if isinstance(d, Diagnostic) else Diagnostic(d) for d in diagnostics)
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(d.render() for d in self.diagnostics)


class InputError(TwillError):
    """Bad input or usage: a file that does not parse, a machine key that is wrong (exit 2)."""


class EmitError(InputError):
    """A schedule that emit-cuda cannot turn into a kernel (exit 2, with the reason)."""


class NoScheduleError(TwillError):
    """The problem has no schedule under the given limits (exit 1)."""

    exit_code = 1


class TimeLimitReached(TwillError):
    """The search stopped at --time-limit; `schedule` is the best one found (not proven), or None (exit 3)."""

    exit_code = 3

    def __init__(self, schedule, message: str):
        self.schedule = schedule
        super().__init__(message)


class Status(Enum):
    """What one solver check answered, whichever solver (SCIP, CBC, Yices, z3) ran it. Each backend maps its
    own answers onto these by a table; a Ctrl-C is never a status (it stays a KeyboardInterrupt)."""

    SAT = "sat"          # a solution exists (and the check holds one)
    UNSAT = "unsat"      # proven: none exists
    TIMEOUT = "timeout"  # the deadline came first: nothing is known

    def __str__(self) -> str:
        return self.value


@dataclass
class ErrorCollector:
    """Gathers diagnostics so a whole file's problems are reported at once."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def error(self, message: str, span: Span | None = None, hint: str | None = None) -> None:
        self.diagnostics.append(Diagnostic(message, span, hint))

    def raise_if_any(self, kind: type[TwillError] = InputError) -> None:
        if self.diagnostics:
            raise kind(*self.diagnostics)
