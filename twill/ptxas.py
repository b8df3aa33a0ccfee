"""What ptxas says about an emitted kernel: compile it with nvcc, read `-Xptxas -v`, and say which
warp role a spill or a serialized wgmma belongs to.

- `find_nvcc()`: `$NVCC` (a path; set but empty: no nvcc), else `nvcc` on PATH, else
  `$CUDA_HOME/bin/nvcc`; None without one. nvcc is optional: twill never needs it to solve or emit.
- `compile_kernel(text, arch)`: `nvcc -std=c++17 -gencode=arch=compute_XXa,code=sm_XXa -Xptxas -v
  -cubin` on the text (the device code only: the host code is parsed, which instantiates the kernels,
  but not compiled). The report is a function of the text, the flags and the toolchain (nvcc's real
  path and its `--version`), so it is cached under that SHA-256 in `cache_dir()/ptxas`
  (`$TWILL_CACHE_DIR/ptxas`, default `~/.cache/twill/ptxas`): an unchanged kernel is compiled once.
- `parse(log, rc)`: the report as frozen data: per entry function (each instance
  `kernel<kTiles, kTail>` of the emitted template) its registers at launch, stack, spill stores and
  loads, barriers, and the performance advisories ptxas gives for it (C7515 and its kin: "wgmma
  serialized"), plus every other ptxas warning.
- `attribute(text, arch, roles)`: the register count ptxas reports is one number per entry (what the
  CTA is launched with: `setmaxnreg` moves registers between warpgroups afterwards), and spills and
  advisories are per entry too. To say which role they belong to, the kernel is compiled once more
  per role with every other role's call left out of the dispatch (`probe_source`): that probe holds
  the role's code alone, under the same `setmaxnreg` budget, so a spill or a serialization in it is
  that role's. Probes run only when the whole kernel shows one, and are cached like any compile.
- `role_registers(text, arch, ident)`: what ptxas gives a role's code alone: the probe with its
  `setmaxnreg` and the kernel's launch bounds taken out, so that `Used N registers` is what that
  code takes (at most 255), not what the CTA is launched with. The one per-role count ptxas gives;
  `attribute` reads it for each offending role.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

FORMAT = 1  # of a cache entry


@dataclass(frozen=True)
class Advisory:
    """A ptxas message with a code, e.g. C7515 (wgmma serialized); `function` is the mangled entry
    it names, or None."""

    code: str
    text: str
    function: str | None = None

    @property
    def serializes(self) -> bool:
        """A wgmma pipeline ptxas gave up on: it waits for every wgmma before the next."""
        return "serialized" in self.text


@dataclass(frozen=True)
class EntryReport:
    """One entry function: `Function properties` and `Used N registers` of ptxas -v."""

    name: str  # mangled
    arch: str
    registers: int = 0
    stack_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    barriers: int = 0
    advisories: tuple[Advisory, ...] = ()

    @property
    def instance(self) -> str:
        """`kernel<false, true>` for the emitted template's instances, else the mangled name."""
        m = re.search(r"6kernelI((?:Lb[01]E)+)E", self.name)
        if not m:
            return self.name
        flags = ["true" if b == "1" else "false" for b in re.findall(r"Lb([01])E", m.group(1))]
        return f"kernel<{', '.join(flags)}>"

    @property
    def spill_bytes(self) -> int:
        return max(self.spill_stores, self.spill_loads)

    @property
    def serialized(self) -> bool:
        return any(a.serializes for a in self.advisories)

    @property
    def clean(self) -> bool:
        return self.spill_bytes == 0 and not self.serialized


@dataclass(frozen=True)
class PtxasReport:
    """What nvcc and ptxas said about one source: the exit status, each entry function, every
    coded advisory and warning, and the tail of the log when the build failed."""

    rc: int
    entries: tuple[EntryReport, ...] = ()
    advisories: tuple[Advisory, ...] = ()
    errors: str = ""
    log: str = field(default="", repr=False, compare=False)  # what nvcc printed

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def spill_bytes(self) -> int:
        return max((e.spill_bytes for e in self.entries), default=0)

    @property
    def serialized(self) -> bool:
        return any(e.serialized for e in self.entries)

    @property
    def clean(self) -> bool:
        return self.ok and all(e.clean for e in self.entries)

    def summary(self) -> str:
        """One line: registers at launch, and each instance's spills and serializations."""
        if not self.ok:
            return f"nvcc failed (exit {self.rc})"
        if not self.entries:
            return "no entry function compiled"
        regs = sorted({e.registers for e in self.entries})
        parts = [f"{'/'.join(map(str, regs))} registers at launch"]
        bad = [e for e in self.entries if not e.clean]
        for e in bad:
            what = []
            if e.spill_bytes:
                what.append(f"{e.spill_stores} bytes spill stores, {e.spill_loads} loads")
            codes = sorted({a.code for a in e.advisories if a.serializes})
            if codes:
                what.append(f"wgmma serialized ({', '.join(codes)})")
            parts.append(f"{e.instance}: {'; '.join(what)}")
        if not bad:
            parts.append("no spills, no serialized wgmma")
        return ", ".join(parts)


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?")
_CODED = re.compile(r"ptxas (?:info|warning)\s*: \((C\d+)\) (.*?)(?: (?:in|for) the function '([^']+)')?\s*$")


def parse(log: str, rc: int = 0) -> PtxasReport:
    """ptxas -v's report (nvcc's stderr) as data. A coded message that names a function belongs to
    that entry; `Function properties` and `Used N registers` follow their `Compiling entry` line."""
    entries: list[dict] = []
    advisories: list[Advisory] = []
    for line in log.splitlines():
        coded = _CODED.search(line)
        if coded:
            advisories.append(Advisory(coded.group(1), coded.group(2).strip(), coded.group(3)))
            continue
        if m := _ENTRY.search(line):
            entries.append({"name": m.group(1), "arch": m.group(2)})
        elif entries and (m := _PROPS.search(line)):
            entries[-1].update(stack_bytes=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        elif entries and (m := _USED.search(line)):
            entries[-1].update(registers=int(m.group(1)), barriers=int(m.group(2) or 0))
    out = tuple(EntryReport(**e, advisories=tuple(a for a in advisories if a.function == e["name"]))
                for e in entries)
    errors = "" if rc == 0 else "\n".join(log.splitlines()[-40:])
    return PtxasReport(rc, out, tuple(advisories), errors, log)


# -- nvcc ------------------------------------------------------------------------------------------

def find_nvcc() -> str | None:
    """$NVCC (set but empty: none), else nvcc on PATH, else $CUDA_HOME/bin/nvcc."""
    if "NVCC" in os.environ:
        given = os.environ["NVCC"]
        return given if given and os.access(given, os.X_OK) else None
    found = shutil.which("nvcc")
    if found:
        return found
    home = os.environ.get("CUDA_HOME")
    if home and os.access(os.path.join(home, "bin", "nvcc"), os.X_OK):
        return os.path.join(home, "bin", "nvcc")
    return None


def nvcc_flags(arch: str) -> list[str]:
    """The flags of every compile: C++17, the arch's 'a' target (wgmma, setmaxnreg, tcgen05 need
    it), ptxas's report."""
    return ["-std=c++17", f"-gencode=arch=compute_{arch[3:]},code={arch}", "-Xptxas", "-v"]


@functools.lru_cache(maxsize=8)
def _toolchain(nvcc: str) -> str:
    try:
        version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        version = ""
    return os.path.realpath(nvcc) + "\n" + version


def cache_dir() -> Path:
    from .cache import cache_dir as base
    return base() / "ptxas"


def compile_kernel(text: str, arch: str, nvcc: str | None = None, cache: bool = True) -> PtxasReport:
    """ptxas's report on `text` built for `arch` (device code only), from the cache when this
    text, these flags and this toolchain were compiled before. Raises FileNotFoundError without nvcc."""
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise FileNotFoundError("nvcc not found")
    flags = nvcc_flags(arch)
    digest = hashlib.sha256(json.dumps([FORMAT, _toolchain(nvcc), flags, text]).encode()).hexdigest()
    entry = cache_dir() / f"{digest}.json"
    if cache and entry.is_file():
        try:
            found = json.loads(entry.read_text())
            return parse(found["log"], found["rc"])
        except (OSError, ValueError, KeyError):
            pass  # a damaged entry: compile again
    with tempfile.TemporaryDirectory(prefix="twill-ptxas-") as tmp:
        src = Path(tmp) / "kernel.cu"
        src.write_text(text)
        try:
            proc = subprocess.run([nvcc, *flags, "-cubin", str(src), "-o", str(Path(tmp) / "kernel.cubin")],
                                  capture_output=True, text=True, cwd=tmp)
            rc, log = proc.returncode, proc.stdout + proc.stderr
        except OSError as exc:
            rc, log = 127, str(exc)
    if cache and rc != 127:
        from .fileio import write_atomic
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(str(entry), json.dumps({"rc": rc, "log": log}))
        except OSError:
            pass  # an unwritable cache only costs time
    return parse(log, rc)


# -- roles -----------------------------------------------------------------------------------------

_CALL = re.compile(r"^(\s*)(.*?)\brole_(\w+)(<[^>()]*>)?\(sm, tm, (?:twill_)?args,.*\);(.*)$")


def role_calls(text: str) -> dict[str, int]:
    """Role ident -> how many dispatch lines of the kernel call it (`role_consumer0<kTail>(sm, tm,
    args, ...)`; the definitions, `void role_X(Smem& sm, ...`, are not calls)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = _CALL.match(line)
        if m and "void role_" not in line:
            out[m.group(3)] = out.get(m.group(3), 0) + 1
    return out


# one call of a role in the dispatch: `role_X<...>(sm, tm, args, n, tile_at(args, blockIdx.x, 0))`, its
# arguments at most one parenthesis deep (a dispatch line may hold two: kernel<true>'s tile loop, then
# the one tile of kernel<false>; the tile loop's passes `twill_args` where it reads Args per tile)
_ONE_CALL = re.compile(r"\brole_(\w+)(<[^<>()]*>)?\(sm, tm, (?:twill_)?args,(?:[^()]|\([^()]*\))*\)")


def probe_source(text: str, keep: str) -> str:
    """The kernel with only role `keep`'s calls left in its dispatch: every other role's call
    becomes `(void)0` (its warpgroup still sets its register budget, walks its tiles and returns)."""
    lines = []
    for line in text.splitlines(keepends=True):
        m = _CALL.match(line.rstrip("\n"))
        if m and "void role_" not in line and m.group(3) != keep:
            line = _ONE_CALL.sub(lambda c: c.group(0) if c.group(1) == keep else "(void)0", line.rstrip("\n"))
            line += f"  // ptxas probe: role_{m.group(3)} left out\n"
        lines.append(line)
    return "".join(lines)


_SETMAXNREG = re.compile(r"^\s*twill::setmaxnreg_(?:inc|dec)<\d+>\(\);.*\n", re.M)
_BOUNDS = re.compile(r"__launch_bounds__\([^()]*\)\s*")


def count_source(text: str, keep: str) -> str:
    """`probe_source(text, keep)` without `setmaxnreg` and launch bounds: ptxas allocates the role's
    code alone what it needs."""
    return _BOUNDS.sub("", _SETMAXNREG.sub("", probe_source(text, keep)))


def role_registers(text: str, arch: str, ident: str, nvcc: str | None = None, cache: bool = True) -> int | None:
    """The registers per thread ptxas gives role `ident`'s code alone (None where it does not compile)."""
    report = compile_kernel(count_source(text, ident), arch, nvcc, cache)
    return max((e.registers for e in report.entries), default=None) if report.ok else None


@dataclass(frozen=True)
class RoleFinding:
    """What the probe of one role found: its `setmaxnreg` budget, the registers the model counts
    for it at its fullest (or None), and its worst instance's spills and serializations."""

    role: str
    budget: int
    model_registers: int | None
    spill_bytes: int = 0
    serialized: bool = False
    codes: tuple[str, ...] = ()
    registers: int | None = None  # ptxas's count of the role's code alone (role_registers)
    ops: tuple[str, ...] = ()  # the schedule's ops of the role
    warps: int = 4

    @property
    def clean(self) -> bool:
        return self.spill_bytes == 0 and not self.serialized


@dataclass(frozen=True)
class Attribution:
    """The whole kernel's report and, when it was not clean, each probed role's finding."""

    report: PtxasReport
    roles: tuple[RoleFinding, ...] = ()
    unattributed: bool = False  # not clean, but no role's probe reproduced it (or no probe was possible)

    @property
    def offending(self) -> tuple[RoleFinding, ...]:
        return tuple(r for r in self.roles if not r.clean)


def finding(role: str, budget: int, model: int | None, report: PtxasReport, registers: int | None = None,
            ops: tuple[str, ...] = (), warps: int = 4) -> RoleFinding:
    codes = tuple(sorted({a.code for e in report.entries for a in e.advisories if a.serializes}))
    return RoleFinding(role, budget, model, report.spill_bytes, report.serialized, codes, registers, ops, warps)


def attribute(text: str, arch: str, roles, nvcc: str | None = None, cache: bool = True) -> Attribution:
    """Compile `text`; if ptxas reports a spill or a serialized wgmma, compile one probe per role
    (`roles`: (ident, name, setmaxnreg budget, model registers or None[, ops, warps])) to say whose
    it is, and for each role whose probe shows it, its code's own register count."""
    report = compile_kernel(text, arch, nvcc, cache)
    if not report.ok or report.clean:
        return Attribution(report)
    calls = role_calls(text)
    found = []
    for ident, name, budget, model, *where in roles:
        if ident not in calls:
            continue
        probe = compile_kernel(probe_source(text, ident), arch, nvcc, cache)
        count = None if probe.clean else role_registers(text, arch, ident, nvcc, cache)
        found.append(finding(name, budget, model, probe, count, *where))
    found = tuple(found)
    return Attribution(report, found, unattributed=all(f.clean for f in found))
