"""Reading inputs and writing outputs safely.

`write_atomic` writes to a temporary file in the target's directory and renames it over the
target, so a failed or interrupted run never leaves a partial file; with `only_if_changed` an
identical file is left untouched (its timestamp too), which keeps `make` from rebuilding.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from .errors import Diagnostic, InputError


def read_text(path: str | Path, what: str = "file") -> str:
    try:
        data = Path(path).read_bytes()
        text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # newlines as open() reads them
        return text[1:] if text.startswith("\ufeff") else text  # a byte-order mark is not content
    except UnicodeDecodeError as exc:  # where the first byte that is not UTF-8 is, as FILE:LINE:COL
        from .errors import Span
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        text, col_shown = _shown_line(data.split(b"\n")[line - 1], col)
        raise InputError(Diagnostic(f"{what} '{path}' is not UTF-8 text: byte 0x{data[exc.start]:02x} cannot be "
                                    "decoded", Span(str(path), line, col, text),
                                    f"save the file as UTF-8 (a binary file is not a {what})")) from None
    except FileNotFoundError:
        raise InputError(Diagnostic(f"{what} '{path}' does not exist")) from None
    except IsADirectoryError:
        raise InputError(Diagnostic(f"{what} '{path}' is a directory")) from None
    except OSError as exc:
        raise InputError(Diagnostic(f"cannot read {what} '{path}': {exc.strerror or exc}")) from None


def _shown_line(raw: bytes, col: int) -> tuple[str, int]:
    """The line to show under an error: printable, and at most 100 characters (a binary file's
    "line" can be thousands of bytes). Returns it and the caret column within it; columns past
    the first 100 are shown from the start of the line without a caret."""
    text = "".join(c if c.isprintable() else "?" for c in raw[:100].decode("utf-8", "replace"))
    return text, col


def write_atomic(path: str | Path, data: str | bytes, only_if_changed: bool = False) -> bool:
    """Write `data` (text, or bytes such as a PNG) to `path` atomically. Returns False when the
    file already held it.

    A symbolic link is written through (its target is replaced, the link stays). A path that is
    neither a file nor a directory (/dev/null, /dev/stdout, a FIFO) is written in place: renaming
    a temporary file over it would replace the device node itself."""
    path = Path(path)
    mode = "wb" if isinstance(data, bytes) else "w"
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.is_dir():
        raise InputError(Diagnostic(f"cannot write '{path}': it is a directory"))
    if path.exists() and not path.is_file():
        try:
            with open(path, mode) as f:
                f.write(data)
        except OSError as exc:
            raise InputError(Diagnostic(f"cannot write '{path}': {exc.strerror or exc}")) from None
        return True
    if only_if_changed and path.is_file():
        try:
            if (path.read_bytes() if mode == "wb" else path.read_text()) == data:
                return False
        except OSError:
            pass
    directory = writable_folder(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:  # no permission, a read-only or pseudo file system (/sys, /proc)
        raise InputError(Diagnostic(f"cannot write '{path}': {exc.strerror or exc}",
                                    hint=f"twill writes a temporary file in '{directory}' and renames it; "
                                         "pick a directory you can write")) from None
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the mode a plain open would
        with os.fdopen(fd, mode) as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as exc:  # the disk filled up, say: the old file stays as it was
        Path(tmp).unlink(missing_ok=True)
        raise InputError(Diagnostic(f"cannot write '{path}': {exc.strerror or exc}")) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def writable_folder(path: str | Path) -> Path:
    """The folder `write_atomic` will write `path` in; an InputError when it is not a folder (checked before a
    command's work, so that a long solve does not end in "cannot write")."""
    path = Path(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.is_dir():
        raise InputError(Diagnostic(f"cannot write '{path}': it is a directory", hint="name a file, not a folder"))
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        above = _file_above(directory)
        where = f"'{above}' is a file, not a directory" if above else f"directory '{directory}' does not exist"
        raise InputError(Diagnostic(f"cannot write '{path}': {where}",
                                    hint="create the folder first, or name a file in a folder that exists"))
    return directory


def _file_above(directory: Path) -> Path | None:
    """The regular file on the way to `directory` (-o FILE/x.json), if any."""
    for p in (directory, *directory.parents):
        if p.is_file():
            return p
    return None


def load_graph(path: str | Path, loop: int | None = None):
    """A `.tir` graph, or a Triton `.ttgir` dump imported on the fly."""
    text = read_text(path, "graph")
    if str(path).endswith((".ttgir", ".mlir")):
        from .ttgir import import_ttgir
        graph, _warnings = import_ttgir(text, str(path), loop=loop)
        return graph
    from .tir import parse_tir
    return parse_tir(text, str(path))


def load_schedule(path: str | Path):
    """Read a `twill-schedule/1` file; anything else is an InputError naming the file (and, for
    JSON that does not parse, the line and column)."""
    import json

    from .errors import Span
    from .schedule import FORMAT, Schedule, edited_fields, problems

    text = read_text(path, "schedule")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        lines = text.splitlines() or [""]
        line = lines[min(exc.lineno, len(lines)) - 1]
        raise InputError(Diagnostic(f"not a JSON file: not valid JSON ({exc.msg})",
                                    Span(str(path), exc.lineno, exc.colno, line))) from None
    except RecursionError:  # nesting deeper than Python's stack: no schedule is shaped so
        raise InputError(Diagnostic(f"'{path}' is not a twill schedule: its JSON nests too deeply")) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise InputError(Diagnostic(f"'{path}' is not a twill schedule (format is {found!r}, expected '{FORMAT}')",
                                    hint=f"write one with: twill solve GRAPH.tir --gpu NAME -o {path}"))
    return schedule_from_data(data, path)


def _where_missing(data, key) -> str:
    """Where in a schedule's JSON the entry that lacks `key` is: ' in 'ops'[3]' (an entry of a list whose other
    entries have it), ' at the top level', or '' where it cannot be told."""
    if isinstance(data, dict) and key not in data and all(not isinstance(v, list) or all(
            not isinstance(e, dict) or key not in e for e in v) for v in data.values()):
        return " at the top level"
    for field, value in (data.items() if isinstance(data, dict) else ()):
        if isinstance(value, list) and any(isinstance(e, dict) and key in e for e in value):
            for i, entry in enumerate(value):
                if isinstance(entry, dict) and key not in entry:
                    return f" in '{field}'[{i}]"
    return ""


def schedule_from_data(data: dict, path) -> "Schedule":
    """A schedule from its parsed JSON, checked as `load_schedule` checks a file (`path` names it)."""
    from .schedule import Schedule, edited_fields, problems
    again = f"write it again with: twill solve GRAPH --gpu NAME -o {path}"
    try:
        schedule = Schedule.from_dict(data)
        wrong = problems(schedule)
    except KeyError as exc:  # a field a schedule cannot do without: say where it is missing
        key = exc.args[0] if exc.args else "?"
        raise InputError(Diagnostic(f"'{path}' is a malformed schedule: field '{key}' is missing"
                                    f"{_where_missing(data, key)}", hint=again)) from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise InputError(Diagnostic(f"'{path}' is a malformed schedule: {type(exc).__name__}: {exc}",
                                    hint=again)) from None
    if wrong:
        raise InputError(*(Diagnostic(f"'{path}' is a malformed schedule: {w}", hint=again) for w in wrong[:5]))
    edited = edited_fields(data)
    if edited:
        raise InputError(Diagnostic(f"'{path}': {', '.join(repr(k) for k in edited)} "
                                    f"{'was' if len(edited) == 1 else 'were'} edited: "
                                    f"{'it no longer matches its' if len(edited) == 1 else 'they no longer match their'}"
                                    " digest in 'field_digests'",
                                    hint=f"a schedule is used as twill solved it: solve again, twill solve GRAPH "
                                         f"--gpu NAME -o {path}"))
    return schedule


# -- the solvers' scratch folder -------------------------------------------------------------------

_SCRATCH: list[str] = []


@contextmanager
def scratch():
    """A private temporary folder for solver files (CBC's model and solution), removed on every
    exit: a return, an error, Ctrl-C, or SIGTERM (the CLI turns it into an exception). A CBC
    process still running then (an interrupt lands while twill waits on it) is ended first, by
    its process id. Nested uses share the outer folder."""
    if _SCRATCH:
        yield _SCRATCH[-1]
        return
    try:
        folder = tempfile.mkdtemp(prefix="twill-")
    except OSError as exc:
        raise InputError(Diagnostic(f"cannot make a scratch folder in '{tempfile.gettempdir()}': "
                                    f"{exc.strerror or exc}", hint="point TMPDIR at a folder you can write")) from None
    _SCRATCH.append(folder)
    try:
        yield folder
    finally:
        _SCRATCH.remove(folder)
        import signal
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})  # a second signal
        try:                                                                         # waits for the cleanup
            end_solver_children()
            shutil.rmtree(folder, ignore_errors=True)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)


def scratch_folder() -> str | None:
    """The folder `scratch()` holds open, or None outside one."""
    return _SCRATCH[-1] if _SCRATCH else None


def end_solver_children(reap: bool = True) -> None:
    """End the CBC processes this process started that are still running (Linux: /proc), and
    with `reap` wait for them (not while PuLP itself waits on one)."""
    import signal
    me = str(os.getpid())
    try:  # the children of each of our threads, where the kernel lists them; else every process
        entries = [p for t in os.listdir("/proc/self/task")
                   for p in Path(f"/proc/self/task/{t}/children").read_text().split()]
    except OSError:
        try:
            entries = os.listdir("/proc")
        except OSError:
            return
    for pid in entries:
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name, rest = stat[stat.find("(") + 1:stat.rfind(")")], stat[stat.rfind(")") + 2:].split()
        if len(rest) > 1 and rest[1] == me and name.lower().startswith("cbc"):
            try:
                os.kill(int(pid), signal.SIGKILL)
                if reap:
                    os.waitpid(int(pid), 0)
            except (OSError, ChildProcessError):
                pass
