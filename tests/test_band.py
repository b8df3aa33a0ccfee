"""A band of keys around each query in one loop (sliding-window attention; ttgir/band.py): the
import's `causal_mask {upper, lower, lower_by, arg}` checked against the TTGIR's own semantics (a
small numpy interpreter of the select's condition), the emitted mask's C++ (`twill::mask_band`, run
on the host over the wgmma accumulator layout of every thread of a warpgroup) against the band's
rule, each tile's key blocks against the keys its rows keep, and the held-out kernel end to end."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from twill.emit import ragged
from twill.errors import InputError
from twill.ttgir import import_ttgir
from twill.band import Band, from_attrs

ROOT = Path(__file__).resolve().parents[1]
DUMPS = ROOT / "tests" / "data" / "ttgir" / "heldout3"
FORMS = [(v, f, a) for v in ("t39", "t36") for f in ("prepipe", "after") for a in ("sm90", "sm100")]


def _dump(ver, form, arch, name="attn_window"):
    return DUMPS / ver / form / f"{name}_{arch}.ttgir"


def _mask_op(graph):
    ops = [op for op in graph.ops if op.opcode == "causal_mask"]
    assert len(ops) == 1
    return ops[0]


@pytest.mark.parametrize("ver,form,arch", FORMS)
def test_window_imports_as_a_band(ver, form, arch):
    path = _dump(ver, form, arch)
    g, _ = import_ttgir(path.read_text(), str(path))
    op = _mask_op(g)
    assert from_attrs(op.attrs) == Band(upper=0, lower=1, lower_by=-1, arg="WINDOW")
    assert [v.name for v in g.prologue.scalars] == ["WINDOW"]
    assert [v.type.dtype for v in g.prologue.scalars] == ["i32"]


# -- the band against the TTGIR's semantics ----------------------------------------------------------

def _interpret(defs, args, name, env):
    """The value of integer/boolean tensor `name` (numpy), from the TTGIR ops that compute it."""
    if name in env:
        return env[name]
    op = defs[name]
    ins = [n for n, _ in op.operands()]
    vals = [_interpret(defs, args, n, env) for n in ins]
    from twill.ttgir.opnames import int_attr
    if op.name == "tt.make_range":
        out = np.arange(int_attr(op, "start"), int_attr(op, "end"))
    elif op.name == "arith.constant":
        from twill.ttgir.addresses import int_constant
        out = np.int64(int_constant(op))
    elif op.name == "tt.get_program_id":
        out = np.int64(env["pid_x"])
    elif op.name in ("tt.splat", "ttg.convert_layout", "arith.extsi", "arith.trunci"):
        out = vals[0]
    elif op.name == "tt.expand_dims":
        out = np.expand_dims(vals[0], int_attr(op, "axis"))
    elif op.name == "tt.broadcast":
        out = vals[0]  # numpy broadcasts at the comparison
    elif op.name in ("arith.addi", "arith.subi", "arith.muli", "arith.andi"):
        f = {"arith.addi": np.add, "arith.subi": np.subtract, "arith.muli": np.multiply,
             "arith.andi": np.logical_and}[op.name]
        out = f(vals[0], vals[1])
    elif op.name == "arith.cmpi":
        pred = op.tokens[0].text.rstrip(",")
        f = {"sle": np.less_equal, "slt": np.less, "sge": np.greater_equal, "sgt": np.greater}[pred]
        out = f(vals[0], vals[1])
    else:
        raise AssertionError(f"the test's interpreter has no {op.name}")
    env[name] = out
    return out


@pytest.mark.parametrize("arch", ["sm90", "sm100"])
def test_band_computes_the_ttgir_mask(arch):
    """At sample program ids, iterations and windows, the TTGIR's `keep` (evaluated op by op) is the
    imported band's rule at every element (r, c): key iv + c, query pid * 128 + r."""
    from twill.ttgir.addresses import Addresses
    from twill.ttgir.parser import parse_module
    from twill.ttgir.types import TypeReader
    path = _dump("t39", "prepipe", arch)
    text = path.read_text()
    band = from_attrs(_mask_op(import_ttgir(text, str(path))[0]).attrs)
    module = parse_module(text, str(path))
    func = module.functions()[0]
    addr = Addresses(func, TypeReader(module.source, module.aliases))
    select = next(op for op in addr.defs.values() if op.name == "arith.select" and "keep" in op.operands()[0][0])
    loop_iv = next(iter(addr.loops))
    checked = 0
    for pid in (0, 1, 3, 7):
        for it in range(0, 8):
            for w in (16, 64, 100, 256):
                iv = it * 64
                env = {"pid_x": pid, loop_iv: np.int64(iv), "WINDOW": np.int64(w)}
                keep = np.broadcast_to(_interpret(addr.defs, addr.args, select.operands()[0][0], env), (128, 64))
                r, c = np.meshgrid(np.arange(128), np.arange(64), indexing="ij")
                want = np.vectorize(lambda rr, cc: band.keeps(iv + cc, pid * 128 + rr, w))(r, c)
                assert (keep == want).all(), (pid, it, w)
                checked += 1
    assert checked == 4 * 8 * 4


def test_band_refuses_a_loop_that_skips_kept_keys(tmp_path):
    """The loop's bounds are checked against the band: a loop that starts a block late (its lower
    bound plus BLOCK_N) skips keys the mask keeps, an error at the select."""
    path = _dump("t39", "prepipe", "sm90")
    text = path.read_text()
    old = "%lo_29 = arith.muli %lo_28, %c64_i32 : i32"
    assert old in text
    bad = text.replace(old, old + "\n    %lo_late = arith.addi %lo_29, %c64_i32 : i32").replace(
        "scf.for %start_n = %lo_29 to", "scf.for %start_n = %lo_late to")
    with pytest.raises(InputError) as err:
        import_ttgir(bad, str(path))
    assert "does not visit every key it keeps" in str(err.value)


def test_every_form_gives_the_prepipe_graph():
    """After the pipeliner on sm_100 the loop computes S and its mask a block ahead (the mask reads
    iv + 64 + c): read against its peeled copy (the key from the loop's lower bound) it is the same
    band, and every form of an arch imports to one graph."""
    from twill.tir import print_tir
    for arch in ("sm90", "sm100"):
        texts = {print_tir(import_ttgir(_dump(v, f, arch).read_text(), "x.ttgir")[0])
                 for v in ("t39", "t36") for f in ("prepipe", "after")}
        assert len(texts) == 1, arch


def test_a_mask_ahead_with_no_peeled_copy_is_refused():
    """A loop whose mask would be covered only if it were computed a block ahead, with no peeled copy
    to say so (the prepipe loop started a block late), is an error at the select (depipe.py)."""
    path = _dump("t39", "prepipe", "sm90")
    text = path.read_text()
    old = "%lo_29 = arith.muli %lo_28, %c64_i32 : i32"
    bad = text.replace(old, old + "\n    %lo_late = arith.addi %lo_29, %c64_i32 : i32").replace(
        "scf.for %start_n = %lo_29 to", "scf.for %start_n = %lo_late to").replace(
        "%hi_31 = arith.muli %hi_30, %c128_i32 : i32",
        "%hi_32 = arith.muli %hi_30, %c128_i32 : i32\n    %hi_31 = arith.addi %hi_32, %c64_i32 : i32")
    assert bad.count("lo_late") == 2
    with pytest.raises(InputError) as err:
        import_ttgir(bad, str(path))
    assert "does not visit every key it keeps" in str(err.value)
    assert err.value.diagnostics[0].span.line == text.splitlines().index(
        next(x for x in text.splitlines() if "arith.select %keep_63" in x)) + 3


def test_band_keeps_a_comparison_it_cannot_say_refused():
    """An `&` with a comparison that is no bound of key - query (cols < 2 * rows) stays an error."""
    path = _dump("t39", "prepipe", "sm90")
    text = path.read_text()
    old = "%keep_62 = arith.cmpi sgt, %keep_60, %keep_39"
    assert old in text
    bad = text.replace(old, "%keep_62 = arith.cmpi sgt, %keep_60, %keep_60")
    with pytest.raises(InputError):
        import_ttgir(bad, str(path))


# -- each tile's key blocks -----------------------------------------------------------------------

@pytest.mark.parametrize("window", [1, 100] + [pytest.param(w, marks=pytest.mark.extended) for w in (16, 64, 128, 256, 1000)])
def test_band_blocks_cover_the_kept_keys(window):
    """band_first / band_iters (the C++ of ragged._band_code): every key a row of the tile keeps is
    in the tile's blocks, there are at least kStages of them, and none past the loop."""
    band = Band(0, 0, 1, -1, "WINDOW")
    rows, step, stages = 128, 64, 3
    iters = 4096 // step
    for m in range(4096 // rows):
        q0 = m * rows
        first_key = max(q0 + band.lower + band.lower_by * window, 0)
        end_key = q0 + rows + band.upper
        first = ragged.band_first(iters, stages, step, first_key, end_key)
        n = ragged.band_iters(iters, stages, step, first_key, end_key)
        assert 0 <= first and first + n <= iters and n >= min(stages, iters)
        kept = [k for r in range(rows) for k in range(0, 4096) if band.keeps(k, q0 + r, window)]
        assert first * step <= min(kept) and max(kept) < (first + n) * step


# -- the emitted mask's C++ on the host -------------------------------------------------------------

HOST = r"""
#include <cmath>
#include <cstdio>
struct Dim3 { unsigned x; };
static Dim3 threadIdx;
#define __device__
#define __forceinline__ inline
namespace twill {
template <int MB, int N>
struct Frag {
  static constexpr int kBlocks = MB, kElems = N / 2;
  float x[MB][N / 2];
};
#include "band.cuh"
}
// the wgmma accumulator layout: element i of block b of thread t (sm90.cuh's fragments)
static int row_of(int t, int b, int i) { return 64 * b + 16 * ((t / 32) % 4) + (t % 32) / 4 + 8 * ((i >> 1) & 1); }
static int col_of(int t, int i) { return 8 * (i >> 2) + 2 * (t % 4) + (i & 1); }
int main() {
  constexpr int MB = 2, N = 64;
  int bad = 0, checked = 0;
  const int windows[] = {1, 16, 37, 64, 256};
  for (int w : windows)
    for (int q0 = 0; q0 <= 512; q0 += 128)
      for (int k0 = 0; k0 <= 640; k0 += 64)
        for (unsigned t = 0; t < 128; ++t) {
          threadIdx.x = t;
          twill::Frag<MB, N> f;
          for (int b = 0; b < MB; ++b) for (int i = 0; i < N / 2; ++i) f.x[b][i] = 1.f;
          const int lo = 1 - w, hi = 0;
          twill::mask_band(f, q0, k0, lo, hi);
          for (int b = 0; b < MB; ++b)
            for (int i = 0; i < N / 2; ++i) {
              const int d = (k0 + col_of(t, i)) - (q0 + row_of(t, b, i));
              const bool keep = d <= hi && d >= lo;
              if ((f.x[b][i] == 1.f) != keep) ++bad;
              ++checked;
            }
        }
  std::printf("%d %d\n", checked, bad);
  return bad != 0;
}
"""


def test_mask_band_cxx_on_the_host(tmp_path):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    src = tmp_path / "band.cpp"
    src.write_text(HOST)
    runtime = ROOT / "twill" / "emit" / "cuda_runtime"
    exe = tmp_path / "band"
    build = subprocess.run([cxx, "-std=c++17", "-w", "-I", str(runtime), str(src), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    checked, bad = map(int, run.stdout.split())
    assert checked == 5 * 5 * 11 * 128 * 2 * 32 and bad == 0, run.stdout
