"""Options and helpers shared by several commands."""
from __future__ import annotations

import click

gpu_option = click.option("--gpu", "gpu", metavar="NAME|PATH", default=None,
                          help="machine description: a bundled name (h100, h200, b200) or a .yaml path")


def need_gpu(gpu: str | None, what: str):
    from twill.errors import InputError
    from twill.machine import load_machine
    if gpu is None:
        raise InputError(f"{what} needs --gpu NAME (h100, h200, b200) or --gpu PATH.yaml")
    return load_machine(gpu)


def solve_options(**kw):
    from twill.pipeline import SolveOptions
    return SolveOptions(**{k: v for k, v in kw.items() if v is not None})


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
