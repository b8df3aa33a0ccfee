"""`twill calibrate --out specs/NAME.yaml`: a machine description measured on this machine's GPU."""
from __future__ import annotations

import click

from .main import main


@main.command()
@click.option("--out", "out", type=click.Path(dir_okay=False), required=True,
              help="the machine description to write (atomic)")
@click.option("--base", metavar="NAME|PATH", default=None,
              help="the spec whose values stand where nothing is measured [default: h200 on sm_90a, b200 on sm_100a]")
@click.option("--name", default=None, help="the spec's name [default: the --out file's stem]")
@click.option("--raw", "raw_out", type=click.Path(dir_okay=False), help="also write the raw samples (JSON) here")
@click.option("--from-raw", "from_raw", type=click.Path(dir_okay=False),
              help="derive the spec from raw samples written earlier by --raw (no GPU needed)")
@click.option("--only", multiple=True, metavar="BENCH",
              help="run only this microbenchmark (repeatable; device always runs): device alu tile wgmma tma sync tcgen05")
@click.option("--build-dir", type=click.Path(file_okay=False), help="build the microbenchmarks here [default: a scratch folder]")
@click.option("--nvcc", default=None, metavar="PATH", help="the nvcc to build with [default: $NVCC, the PATH's, /usr/local/cuda/bin/nvcc]")
@click.option("-q", "--quiet", is_flag=True, help="no progress on stderr")
def calibrate(out, base, name, raw_out, from_raw, only, build_dir, nvcc, quiet):
    """Measure this machine's GPU with twill's microbenchmarks (TMA, wgmma, MUFU and ALU, mbarriers,
    named barriers, setmaxnreg) and write a machine description whose every number says where it
    came from. Without a GPU the benches are compile-checked and the command exits 4."""
    from pathlib import Path

    from twill.calibrate.calibrate import BASE_FOR_ARCH, load_raw, measure, raw_text, spec_text
    from twill.errors import InputError
    from twill.fileio import scratch, write_atomic
    from twill.machine import bundled_specs

    def progress(msg: str) -> None:
        if not quiet:
            click.echo(msg, err=True)

    if from_raw and (only or build_dir or nvcc):
        raise InputError("--from-raw derives from recorded samples: --only, --build-dir and --nvcc do not apply")
    from twill.fileio import writable_folder
    for path in (out, raw_out):  # said before the benches run (minutes on a GPU), not after
        if path:
            writable_folder(path)
    if base is not None:
        _base_path(base, bundled_specs())
    if from_raw:
        raw = load_raw(from_raw)
    else:
        with scratch() as folder:
            raw = measure(Path(build_dir or Path(folder) / "calibrate"), nvcc, only, progress)
        if raw_out:
            write_atomic(raw_out, raw_text(raw))
            progress(f"wrote {raw_out}: the raw samples")
    base = base or BASE_FOR_ARCH.get(raw["arch"], "h200")
    path = _base_path(base, bundled_specs())
    from twill.machine import load_machine
    load_machine(str(path))  # a base spec that does not load is reported as such
    label = base if "/" not in base and not base.endswith((".yaml", ".yml")) else str(path)
    text = spec_text(raw, path.read_text(encoding="utf-8"), label, name or Path(out).stem,
                     raw_out or from_raw)
    write_atomic(out, text)
    click.echo(f"wrote {out}: {raw['card']}, {raw['date']}, base {label}", err=True)
    from twill.calibrate.build import CalibrationError
    from twill.calibrate.run import failed
    if failed(raw["results"]):
        raise CalibrationError(f"the spec was written, but these microbenchmarks failed and their values are the base's: "
                               f"{', '.join(failed(raw['results']))} (their errors are in the raw file)")


def _base_path(base: str, specs: dict):
    """The file of --base NAME|PATH; an InputError when there is none."""
    from pathlib import Path

    from twill.errors import InputError
    path = Path(base) if ("/" in base or base.endswith((".yaml", ".yml"))) else specs.get(base)
    if path is None or not path.is_file():
        raise InputError(f"--base {base}: no such spec (bundled: {', '.join(sorted(specs))}, or a .yaml path)")
    return path
