"""`twill`: thin click commands over the library. Data goes to stdout, progress to stderr.

Every error a user can cause is a `TwillError`, rendered once here with its exit code; solver
libraries are imported inside the commands, so `twill --help` stays fast.
"""
from __future__ import annotations

import sys

import click

from twill.errors import TwillError


class TwillGroup(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except TwillError as exc:
            click.echo(exc.render(), err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted: no file was written", err=True)
            ctx.exit(130)


@click.group(cls=TwillGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="twill-sched", prog_name="twill")
def main():
    """Optimal software pipelining and warp specialization for Tensor Core GPUs."""


def _register():
    from . import solve  # noqa: F401  (commands register themselves on `main`)
    for name in ("explain", "emit", "importer", "plot"):
        try:
            __import__(f"{__package__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.{name}":
                raise


_register()

if __name__ == "__main__":
    sys.exit(main())
