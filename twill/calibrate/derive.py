"""Raw samples -> the machine file's numbers. Each rule in RULES reads the benches' records and
returns `Measured` values: a key path of the spec, its value (a number or a cycle expression), and
the measurement it came from, with its spread. Keys no rule gives keep the base spec's value.

The rules, in the model's terms (docs/calibrate.md has the reasoning):
- `clock_ghz`: clock64 cycles over %globaltimer nanoseconds with every SM busy (median).
- `limits.smem_bytes`, `limits.registers_per_sm`: the runtime's opt-in shared memory per block and
  registers per SM.
- `communication.cross_warp_cycles`: half an mbarrier round trip between two warpgroups (a word
  through shared memory, the consumer's 128 threads waiting), median.
- tile ops (`exp2`, `rowmax`, `rowsum`, `rescale`, and the one-FP32-instruction ops `mul`, `add`,
  `sub`, `max`, `select` as rescale): `cycles` is `elements / R1` with R1 = 8192 elements of a
  64 x 128 fragment over one warpgroup's median cycles; `occupancy` is `elements / R2` with R2 =
  two warpgroups' 2 x 8192 elements over their median cycles, written where it differs from R1 by
  more than 5%.
- `convert`: two results per F2F.F16X2 at its measured rate per SM.
- `mma`: `occupancy` = 2*M*N*K*bits/16 / F, F the highest FLOP per cycle per SM of an f16
  m64n256k16 chain (one or two warpgroups issuing); `bits` is the width of a's dtype: an 8-bit
  m64nNk32 (f8, i8) takes an f16 m64nNk16's time, twice the FLOP per cycle, which the note records
  from the 8-bit chains; `cycles` adds the fixed latency L0 = one m64n128k16's latency minus its
  issue interval, the wait a chain of wgmmas pays once.
- `mma.hold`: how long the issuing warpgroup stays busy: the occupancy less Q instructions, Q =
  CHAIN - (cycles from the first instruction to the commit's return) / (cycles per instruction) of
  an f16 m64n128k16 chain, one warpgroup: the instructions the tensor core queues while the
  warpgroup moves on (one m64nNk16 is 2048*N FLOP).
- `rowmax`: the generic rule of a row reduction, elements / FMNMX's rate (twill.vocab's `reduce`
  class), for latency and occupancy alike.
- `load.latency`: min / typical / max (LOAD_BOUNDS): one load alone from L2 (min); every SM
  streaming 4 loads from L2, median (typical: the kernels reread their tiles from L2); every SM
  streaming from HBM, 99th percentile (max); each a line in `bytes` through the [N, 128] f16
  tiles' records (_fit). Its occupancy stays 0 (the TMA engine's bandwidth is not modelled).
- `rates`: alu = FFMA, sfu = MUFU.EX2, convert = 2 x F2F.F16X2, bit = the lower of LOP3 and SHL,
  reduce = FMNMX, each in results per cycle per SM (median).
"""
from __future__ import annotations

from dataclasses import dataclass

from .stats import Spread, num, spread

FRAGMENT = 64 * 128  # elements of the 64 x 128 tile the tile rules read


@dataclass(frozen=True)
class Measured:
    path: str  # key path in the spec: clock_ghz, ops.exp2.cycles, rates.alu
    value: object  # a number, or a cycle expression (str)
    note: str  # the measurement: bench, what, spread


class Records:
    """The benches' records, found by bench, record name and parameters."""

    def __init__(self, results: dict):
        self.results = results

    def device(self) -> dict:
        return self.results["device"]

    def find(self, bench: str, name: str, **params) -> Spread | None:
        for rec in self.results.get(bench, {}).get("records", []):
            if rec["name"] == name and all(rec["params"].get(k) == v for k, v in params.items()):
                return spread(rec["samples"]) if rec["samples"] else None
        return None

    def all(self):
        """(bench, record) for every record, in the order the benches wrote them."""
        for bench in sorted(self.results):
            for rec in self.results[bench].get("records", []):
                yield bench, rec


def _clock(r: Records):
    s = spread(r.device()["clock_ghz"])
    return [Measured("clock_ghz", round(s.median, 3), f"SM clock under load, clock64 / %globaltimer: {s.text('GHz')}")]


def _limits(r: Records):
    d = r.device()
    return [Measured("limits.smem_bytes", int(d["smem_per_block_optin"]),
                     "cudaDevAttrMaxSharedMemoryPerBlockOptin (shared memory a CTA may opt into)"),
            Measured("limits.registers_per_sm", int(d["regs_per_sm"]), "cudaDeviceProp.regsPerMultiprocessor")]


def _handoff(r: Records):
    s = r.find("sync", "mbarrier_handoff")
    if s is None:
        return []
    return [Measured("communication.cross_warp_cycles", round(s.median),
                     f"half an mbarrier round trip between two warpgroups (a word through shared memory): {s.text('cycles')}")]


def _tile_rule(op: str, bench_op: str):
    def rule(r: Records):
        one = r.find("tile", "tile_op", op=bench_op, cols=128, warpgroups=1)
        two = r.find("tile", "tile_op", op=bench_op, cols=128, warpgroups=2)
        if one is None:
            return []
        lat = FRAGMENT / one.median
        out = [Measured(f"ops.{op}.cycles", f"elements / {num(lat)}",
                        f"one warpgroup's {bench_op} of a 64 x 128 f32 fragment: {one.text('cycles')}")]
        if two is not None:
            occ = 2 * FRAGMENT / two.median
            if abs(occ - lat) > 0.05 * lat:
                out.append(Measured(f"ops.{op}.occupancy", f"elements / {num(occ)}",
                                    f"two warpgroups' {bench_op} at once, per pair of tiles: {two.text('cycles')}"))
        return out
    return rule


def _convert(r: Records):
    s = r.find("alu", "alu_rate", op="cvt_f16x2")
    if s is None:
        return []
    return [Measured("ops.convert.cycles", f"elements / {num(2 * s.median)}",
                     f"F2F.F16X2, two results each: {s.text('per cycle per SM')}")]


def _mma(r: Records):
    flop = 2 * 64 * 256 * 16
    best, used = 0.0, None
    for wgs in (1, 2):
        s = r.find("wgmma", "wgmma_chain", dtype="f16", n=256, warpgroups=wgs)
        if s is not None and wgs * flop / s.median > best:
            best, used = wgs * flop / s.median, (wgs, s)
    if used is None:
        return []
    f = round(best)
    lat = r.find("wgmma", "wgmma_latency", dtype="f16", n=128)
    issue = r.find("wgmma", "wgmma_chain", dtype="f16", n=128, warpgroups=1)
    occ_note = (f"f16 m64n256k16 chain, {used[0]} warpgroup(s): {used[1].text('cycles per instruction')}: "
                f"{f} FLOP per cycle per SM{_eight_bit(r, used[0], best)}")
    work = "2*M*N*K*bits/16"  # f16-equivalent FLOP: an 8-bit operand does twice the FLOP per cycle
    out = [Measured("ops.mma.occupancy", f"{work} / {f}", occ_note)]
    if lat is not None and issue is not None:
        l0 = max(0, round(lat.median - issue.median))
        out.append(Measured("ops.mma.cycles", f"{work} / {f} + {l0}",
                            f"the occupancy plus L0 = {l0}, one m64n128k16's latency less its issue interval: "
                            f"latency {lat.text('cycles')}, interval {issue.text('cycles')}"))
    held = r.find("wgmma", "wgmma_issue", dtype="f16", n=128, warpgroups=1)
    if held is not None and issue is not None:
        queued = max(0.0, CHAIN - CHAIN * held.median / issue.median)
        out.append(Measured("ops.mma.hold", f"({work} - {num(queued)} * 2048*N) / {f}",
                            f"the issuing warpgroup is held for the occupancy less {num(queued)} queued "
                            f"instructions: a chain of {CHAIN} f16 m64n128k16 issues in {held.text('cycles per instruction')}"))
    return out


CHAIN = 32  # wgmmas per chain in kernels/wgmma.cu


def _eight_bit(r: Records, wgs: int, f16: float) -> str:
    """The note's record of the 8-bit chains (m64n256k32, the warpgroups the f16 rate used): their
    FLOP per cycle per SM as a multiple of the f16 rate, which `bits/16` takes to be 2."""
    out = []
    for dtype in ("f8e4m3", "i8"):
        s = r.find("wgmma", "wgmma_chain", dtype=dtype, n=256, warpgroups=wgs)
        if s is not None:
            out.append(f"{dtype} m64n256k32: {s.text('cycles per instruction')}, "
                       f"{num(wgs * 2 * 64 * 256 * 32 / s.median / f16)} x the f16 rate")
    return ("; " + "; ".join(out) + " (the expression's bits/16)") if out else ""


def _rowmax(r: Records):
    s = r.find("alu", "alu_rate", op="fmnmx")
    if s is None:
        return []
    return [Measured("ops.rowmax.cycles", f"elements / {num(s.median)}",
                     f"the generic rule of a row reduction (elements / rates.reduce) at FMNMX's rate: {s.text('per cycle per SM')}")]


def _fit(points) -> str:
    """A latency expression in `bytes` through (bytes, cycles) points: a + bytes / b by least squares,
    or bytes / b through 0 where the line's intercept would be negative (a bandwidth-bound latency)."""
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    a = my - slope * mx
    if n < 2 or slope <= 0:
        return num(my)
    if a < 0:
        return f"bytes / {num(sum(x * x for x, _ in points) / sum(x * y for x, y in points))}"
    return f"{num(a)} + bytes / {num(1 / slope)}"


# load.latency: (bound, TMA mode, footprint, statistic). The kernels stream their tiles from L2 (a
# K/V tile or a GEMM panel is read by many CTAs), with every SM loading and several loads in
# flight: typical; one load alone from L2: min; from HBM, every SM streaming, its 99th percentile: max.
LOAD_BOUNDS = (("min", "idle", "l2", "min"), ("typical", "stream", "l2", "median"), ("max", "stream", "hbm", "p99"))


def _load(r: Records):
    bounds, notes, found = {}, [], {}
    for bound, mode, footprint, stat in LOAD_BOUNDS:
        points = []
        for rows in (64, 128, 256):
            s = r.find("tma", "tma_load_latency", mode=mode, footprint=footprint, rows=rows, cols=128)
            if s is not None:
                points.append((rows * 128 * 2, getattr(s, stat)))
        if not points:
            return []
        found[bound] = points
        notes.append(f"{bound}: the {stat} of {mode} loads from {footprint} (" + ", ".join(
            f"{x // 1024} KB {num(y)}" for x, y in points) + ")")
    bounds["min"], bounds["typical"] = _fit(found["min"]), _fit(found["typical"])
    # max: typical plus what HBM adds, a line through 0 in bytes (so that max >= typical at every size)
    typical = dict(found["typical"])
    extra = [(x, max(0.0, y - typical[x])) for x, y in found["max"] if x in typical]
    bounds["max"] = bounds["typical"] + (" + " + _fit([(0, 0.0)] + extra).replace("0 + ", "", 1)
                                         if extra and any(y for _, y in extra) else "")
    return [Measured("ops.load.latency", bounds, "TMA latency of [N, 128] f16 tiles, fit in bytes: " + "; ".join(notes)),
            # the interval is the latency only: the TMA engine's bandwidth is not a bound the benches
            # can give (the GEMM streams 45 B/clk/SM where 4 loads in flight measure 36 from L2)
            Measured("ops.load.occupancy", 0, "the TMA engine's issue (its bandwidth is not modelled)")]


def _rates(r: Records):
    out = []
    for cls, ops, factor in (("alu", ("ffma",), 1), ("sfu", ("ex2",), 1), ("convert", ("cvt_f16x2",), 2),
                             ("bit", ("lop3", "shl"), 1), ("reduce", ("fmnmx",), 1)):
        found = [(op, r.find("alu", "alu_rate", op=op)) for op in ops]
        found = [(op, s) for op, s in found if s is not None]
        if not found:
            continue
        op, s = min(found, key=lambda x: x[1].median)
        out.append(Measured(f"rates.{cls}", float(num(factor * s.median)),
                            f"{op} results per cycle per SM{' (x2 per instruction)' if factor == 2 else ''}: "
                            f"{s.text()}"))
    return out


RULES = (
    _clock, _limits, _handoff,
    _tile_rule("exp2", "exp2"), _rowmax, _tile_rule("rowsum", "rowsum"),
    _tile_rule("rescale", "rescale"),
    *(_tile_rule(op, "rescale") for op in ("mul", "add", "sub", "max", "select")),
    _convert, _mma, _load, _rates,
)


def derive(results: dict) -> tuple[Measured, ...]:
    """Every value the rules measure, in RULES order."""
    r = Records(results)
    return tuple(m for rule in RULES for m in rule(r))
