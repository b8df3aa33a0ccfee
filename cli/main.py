"""`twill`: thin click commands over the library. Data goes to stdout, progress to stderr.

Every error a user can cause is a `TwillError`, rendered once here with its exit code; solver
libraries are imported inside the commands, so `twill --help` stays fast.
"""
from __future__ import annotations

import signal
import sys

import click

from twill.errors import TwillError


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is so that every `finally` runs (the scratch folder)."""


def _on_sigterm(signum, frame):
    raise Terminated()


INTERRUPTED = "interrupted: no file was written"  # (entry.py says it too, before this module is imported)


class TwillGroup(click.Group):
    def make_context(self, *args, **kwargs):
        """The group's arguments parsed; an interrupt meanwhile exits 130 as in a command's run (click
        itself would say "Aborted!" and exit 1)."""
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            click.echo(INTERRUPTED, err=True)
            sys.exit(130)

    def invoke(self, ctx):
        previous = None
        try:  # (an interrupt while twill.fileio is imported, on a busy machine, is caught too)
            from twill.fileio import scratch
            previous = _catch_sigterm()
            with scratch():
                result = super().invoke(ctx)
                _flush_stdout()
                return result
        except TwillError as exc:
            _flush_stdout(quiet=True)
            click.echo(exc.render(), err=True)
            ctx.exit(exc.exit_code)
        except Terminated:
            click.echo("terminated: no file was written", err=True)
            ctx.exit(143)
        except KeyboardInterrupt:
            click.echo(INTERRUPTED, err=True)
            ctx.exit(130)
        except OSError as exc:  # stdout on a full disk or a closed pipe
            _discard_stdout()
            click.echo(f"error: cannot write the output: {exc.strerror or exc}", err=True)
            ctx.exit(2)
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)


def _catch_sigterm():
    """SIGTERM becomes `Terminated` while a command runs (main thread only; else left alone)."""
    import threading
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _on_sigterm)


def _flush_stdout(quiet: bool = False) -> None:
    """Flush stdout now, so that a write that fails (ENOSPC on /dev/full) is an error here and not
    a traceback as the interpreter exits."""
    try:
        sys.stdout.flush()
    except OSError:
        if not quiet:
            raise
        _discard_stdout()


def _discard_stdout() -> None:
    """After a failed write: point stdout at /dev/null so the exit's own flush stays quiet."""
    import os
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):
        pass  # not a real file (click's test runner): nothing is flushed at exit


@click.group(cls=TwillGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="twill-sched", prog_name="twill")
def main():
    """Optimal software pipelining and warp specialization for Tensor Core GPUs."""


def _register():
    from . import solve  # noqa: F401  (commands register themselves on `main`)
    for name in ("explain", "emit", "importer", "plot", "calibrate"):
        try:
            __import__(f"{__package__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.{name}":
                raise


_register()

if __name__ == "__main__":
    sys.exit(main())
