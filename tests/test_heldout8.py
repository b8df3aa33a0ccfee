"""The eighth held-out batch (bench/heldout/kernels8.py, dumped by `bench/heldout/gen.py --module kernels8` with
Triton 3.9 and 3.6, before and after the pipeliner, sm_90 and sm_100: tests/data/ttgir/heldout8): one row a program
with NO loop, as Liger-Kernel and the older Triton tutorial write them (the row whole in one masked [BLOCK] tile,
BLOCK = next_power_of_2(n_cols)): Liger's RMSNorm forward (bf16, rstd stored), LayerNorm forward (f16, Mean and
Rstd stored), the older tutorial softmax (fp32, other=-inf), SwiGLU (bf16) and GEGLU with the tanh approximation
(f16), both with `n_cols: tl.constexpr` and no reduction; and the tutorial's vector add, a flat map over elements
(ttgir/flatmap.py: one row a program of a [n / 128, 128] view, `grid flat = n_elements`).

- every form of a kernel imports (as `twill import` does) to the graph or sequence of its first form, or is
  refused with a located error naming why (`REFUSED`), never a traceback;
- a kernel with no loop goes the way of the persistent fused softmax (ttgir/rowwhole.py): a column loop a pass
  of its reductions; the older tutorial softmax imports to the fused softmax's three loops;
- evaluated in numpy, what each imports to computes the kernel's formula (its per-row scalars too);
- the bindings take the Triton kernel's arguments, with the sizes the kernels take or a clear ArgumentError;
- import -> solve -> emit-cuda -> nvcc with no spill (one compile here, the rest `slow`).
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import emitted_and_built, nvcc, refused_at_its_line
from test_heldout7 import _evaluate
from twill.errors import InputError
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.sequence import Sequence
from twill.tir import print_tir
from twill.tir_sequence import print_sequence
from twill.ttgir.sequence import import_sequence

DATA = Path(__file__).parent / "data" / "ttgir" / "heldout8"
FORMS = ("t39/prepipe", "t39/after", "t36/prepipe", "t36/after")
NAMES = sorted(p.stem for p in (DATA / "t36" / "prepipe").glob("*.ttgir"))

# kernel -> (a regex of the TTGIR op the import stops at, a regex of what the message says): every form
REFUSED = {}


def _key(name: str) -> str:
    return name.rsplit("_sm", 1)[0]


def _text(found) -> str:
    return print_sequence(found) if isinstance(found, Sequence) else print_tir(found)


def _import(path: Path, text: str | None = None):
    found, _ = import_sequence(path.read_text() if text is None else text, str(path))
    return found


def test_the_batch_is_all_there():
    assert len(NAMES) == 12
    for name in NAMES:
        assert all((DATA / f / f"{name}.ttgir").exists() for f in FORMS), name


@pytest.mark.parametrize("name", NAMES)
def test_every_form_imports_to_one_graph_or_is_refused_at_its_line(name):
    first = None
    for form in FORMS:
        path = DATA / form / f"{name}.ttgir"
        refused = REFUSED.get(_key(name))
        if refused is not None:
            refused_at_its_line(path, *refused, sequence=True)
            continue
        text = _text(_import(path))
        first = first or text
        assert text == first, form


def _loops(text: str) -> list[str]:
    return re.findall(r"loop L\d \{.*?\n\}", text, re.S)


def test_a_row_with_no_loop_is_a_column_loop_a_pass():
    """RMSNorm: L0 the sum of squares as a [64] row carry over bf16[64,128] tiles, rstd stored by its epilogue
    (`tl.store(RSTD_ptr + row * stride, rstd)`), L1 recomputing rstd in its prologue, the weight row W[cols] a
    [1,128] load, `offset + W` and the store. The older tutorial softmax is the fused softmax's three loops (the
    persistent form, batch 7) loop for loop. SwiGLU and GEGLU: one loop of 64 x 128 tiles, no carry, to the constexpr
    n_cols (`extent loop = 4096`, the all-true mask dropped)."""
    rms = _text(_import(DATA / "t39/prepipe/rms_norm_fwd_sm90.ttgir"))
    assert re.search(r"mean_square_12_new = rowsum mean_square_mul, mean_square : f32\[64\]", rms)
    assert "output RSTD_ptr = rstd_rsqrt" in rms and "argument n_cols   = n_cols {extent = loop}" in rms
    assert re.search(r"W_row\s+= load\s+: bf16\[1,128\] @smem", rms) and re.search(r"add offset, W_row", rms)
    old = _text(_import(DATA / "t36/after/softmax_row_sm100.ttgir"))
    fused = _text(_import(DATA.parent / "heldout7/t36/after/softmax_fused_sm100.ttgir"))
    assert len(_loops(old)) == 3 and _loops(old) == _loops(fused)
    for name in ("swiglu_fwd", "geglu_fwd"):
        g = _import(DATA / f"t39/prepipe/{name}_sm90.ttgir")
        assert not isinstance(g, Sequence) and not g.carries and g.loop_extent == 4096, name
        assert {op.type.shape for op in g.ops if op.opcode == "load"} == {(64, 128)}, name
    sw = print_tir(_import(DATA / "t36/prepipe/swiglu_fwd_sm90.ttgir"))  # Triton 3.6's sigmoid: 1 / (1 + exp(0 - x))
    assert re.search(r"= neg a_row_convert", sw) and re.search(r"= recip c_row_add", sw)


def _x(shape, seed):
    import numpy as np
    return np.random.default_rng(seed).standard_normal(shape)


def test_what_each_imports_to_computes_the_kernels_formula():
    """Evaluated in numpy (column tiles of 128, every row at once, fp64), each import equals its kernel's formula:
    RMSNorm's Y and rstd, LayerNorm's Y, Mean and Rstd, softmax, SwiGLU, GEGLU (tanh approximation)."""
    import numpy as np
    x, w, b = _x((128, 384), 1) + 0.5, 1 + 0.1 * _x(384, 2), 0.1 * _x(384, 3)
    eps, off = 1e-6, 0.25
    got = _evaluate(_import(DATA / "t36/prepipe/rms_norm_fwd_sm90.ttgir"), {"X_ptr": x, "W_ptr": w},
                    {"n_cols": 384, "eps": eps, "offset": off})
    rstd = 1 / np.sqrt((x * x).mean(1) + eps)
    assert np.allclose(got["RSTD_ptr"], rstd, rtol=1e-12)
    assert np.allclose(got["Y_ptr"], x * rstd[:, None] * (off + w), rtol=1e-12, atol=1e-12)
    got = _evaluate(_import(DATA / "t39/after/layer_norm_fwd_sm100.ttgir"), {"X_ptr": x, "W_ptr": w, "B_ptr": b},
                    {"n_cols": 384, "eps": eps})
    mean, rstd = x.mean(1), 1 / np.sqrt(x.var(1) + eps)
    assert np.allclose(got["Mean_ptr"], mean, rtol=1e-12) and np.allclose(got["RSTD_ptr"], rstd, rtol=1e-12)
    assert np.allclose(got["Y_ptr"], (x - mean[:, None]) * rstd[:, None] * w + b, rtol=1e-12, atol=1e-12)
    s = _x((128, 384), 4) * 3
    want = np.exp(s - s.max(1, keepdims=True))
    got = _evaluate(_import(DATA / "t39/prepipe/softmax_row_sm90.ttgir"), {"input_ptr": s}, {"n_cols": 384})
    assert np.allclose(got["output_ptr"], want / want.sum(1, keepdims=True), rtol=1e-12, atol=1e-15)
    a, bb = _x((64, 4096), 5), _x((64, 4096), 6)
    for form in ("t39/prepipe", "t36/prepipe"):  # 3.9's sigmoid 1 / (1 + exp(-x)), 3.6's exp(0 - x)
        got = _evaluate(_import(DATA / form / "swiglu_fwd_sm90.ttgir"), {"a_ptr": a, "b_ptr": bb}, {})
        assert np.allclose(got["c_ptr"], a / (1 + np.exp(-a)) * bb, rtol=1e-12, atol=1e-12), form
    got = _evaluate(_import(DATA / "t36/after/geglu_fwd_sm100.ttgir"), {"a": a, "b": bb}, {})
    gelu = 0.5 * a * (1 + np.tanh(0.7978845608028654 * (a + 0.044715 * a ** 3)))
    assert np.allclose(got["c"], gelu * bb, rtol=1e-6, atol=1e-6)  # (the constants as f32, as Triton prints them)
    assert not np.allclose(got["c"], a / (1 + np.exp(-a)) * bb, rtol=1e-2)  # the check can fail: GEGLU is not SwiGLU


def test_a_flat_map_over_elements_is_a_row_map_of_its_view():
    """The vector add (`pid * BLOCK + arange(BLOCK)`, masked `offs < n_elements`) imports as one row a program of a
    [n / 128, 128] view: one loop of 64 x 128 tiles, `extent loop = 128`, `grid flat = n_elements`; in numpy it is
    x + y. The same kernel with its offsets read other than as an element index (`offs * 2`: a strided read) is
    still refused at its line. The sm_100 dump's view is [n / 64, 64], its tiles 128 x 64 (rowprog.TILES)."""
    import numpy as np
    text = print_tir(_import(DATA / "t39/after/vector_add_sm100.ttgir"))
    assert "grid flat = n_elements" in text and "extent loop = 64" in text and "f32[128,64]" in text
    graph = _import(DATA / "t39/after/vector_add_sm90.ttgir")
    text = print_tir(graph)
    assert "grid flat = n_elements" in text and "extent loop = 128" in text and "f32[64,128]" in text
    x, y = _x((64, 128), 7), _x((64, 128), 8)
    got = _evaluate(graph, {"x_ptr": x, "y_ptr": y}, {})
    assert np.allclose(got["output_ptr"], x + y, rtol=1e-15) and not np.allclose(got["output_ptr"], x - y)
    strided = _edit("vector_add", "%x = tt.splat %x_ptr", "%two = arith.addi %offsets_1, %offsets_1 : tensor<1024xi32, "
                    "#blocked>\n    %x = tt.splat %x_ptr").replace("tt.addptr %x, %offsets_1", "tt.addptr %x, %two")
    _refused_at(strided, "tt.splat %block_start", "the program id indexes elements, not a row")


def _edit(name: str, old: str, new: str, form: str = "t39/prepipe") -> str:
    text = (DATA / form / f"{name}_sm90.ttgir").read_text()
    out = text.replace(old, new, 1)
    assert out != text, old
    return out


def _refused_at(text: str, op: str, match: str) -> None:
    with pytest.raises(InputError, match=match) as err:
        import_sequence(text, "k.ttgir")
    d = err.value.diagnostics[0]
    assert op in text.splitlines()[d.span.line - 1], (d.span.line, d.message)


def test_a_row_with_no_loop_near_misses_are_refused_at_their_line():
    """An atomic in place of the store, a second program id, a constexpr n_cols that is not a multiple of the
    column tile (4000), the all-true mask read as a value, the mask `cols <= n`: each an error at its TTGIR line."""
    _refused_at(_edit("swiglu_fwd", "tt.store %1, %c_row_18, %mask_7 :",
                      "%at = tt.atomic_rmw fadd, acq_rel, gpu, %1, %c_row_18, %mask_7 :"), "tt.atomic_rmw", "atomic")
    _refused_at(_edit("rms_norm_fwd", "%row_idx = tt.get_program_id x : i32 loc(#loc40)",
                      "%row_idx = tt.get_program_id x : i32 loc(#loc40)\n    %head = tt.get_program_id y : i32"),
                "get_program_id y", "one `tt.get_program_id x`")
    _refused_at(_edit("swiglu_fwd", "%mask = arith.constant dense<4096>", "%mask = arith.constant dense<4000>"),
                "arith.cmpi", "not a multiple of the column tile")
    _refused_at(_edit("swiglu_fwd", "%c_row_18 = arith.mulf %c_row_17, %b_row_12",
                      "%sel = arith.select %mask_7, %c_row_17, %b_row_12 : tensor<4096xi1, #blocked>, "
                      "tensor<4096xbf16, #blocked>\n    %c_row_18 = arith.mulf %sel, %b_row_12"),
                "arith.select", "a load's or store's mask alone")
    _refused_at(_edit("softmax_row", "arith.cmpi slt, %col_offsets", "arith.cmpi sle, %col_offsets"), "arith.cmpi",
                "other than `cols < n_cols`")


def test_a_2d_tile_with_no_loop_is_refused_at_its_line():
    """A loop-free kernel of 2-D tiles (a [64, 4096] block, not one row a program) is an error at the op making it,
    no longer "no scf.for loop"."""
    text = (DATA / "t39/prepipe/softmax_row_sm90.ttgir").read_text()
    two = text.replace("%row_idx = tt.get_program_id x : i32 loc(#loc28)",
                       "%row_idx = tt.get_program_id x : i32 loc(#loc28)\n"
                       "    %two = arith.constant dense<0.0> : tensor<64x1024xf32, #blocked> loc(#loc28)", 1)
    assert two != text
    _refused_at(two, "%two = arith.constant", r"of a 2-D \[64, 1024\] tile in a kernel with no loop")


def _binding(tmp_path, dump: str, gpu: str = "h200"):
    """The loop bindings of a dump's import (one per loop of a sequence), each loaded as a module."""
    from twill.emit import build_model
    from twill.emit.binding import binding_files
    machine = load_machine(gpu)
    found = _import(DATA / "t36/prepipe" / dump)
    graphs = found.graphs if isinstance(found, Sequence) else (found,)
    mods = []
    for i, graph in enumerate(graphs):
        model = build_model(solve(graph, machine, SolveOptions(time_limit=60)), machine)
        stem = f"{dump.split('.')[0]}_{i}"
        for path, text in binding_files(model, str(tmp_path / f"{stem}.cu")).items():
            Path(path).write_text(text)
        spec = importlib.util.spec_from_file_location(stem, tmp_path / f"{stem}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mods.append(mod)
    return mods


def test_the_bindings_take_the_kernels_arguments(tmp_path):
    """SwiGLU's binding takes a, b, c [M, 4096] as Triton's a_ptr, b_ptr, c_ptr (M = 1000: a partial last row tile;
    its loop the columns, 64 x 128 tiles) and refuses N = 5000 at the call (n_cols is the kernel's constexpr 4096).
    RMSNorm's first loop takes X [1000, 5000] (a partial column tile: a sum takes the zero fill); the softmax's
    takes 1024, a ragged 1000 (its f32 tile masked in registers) and the tutorial's N = 781 (f32 rows of 3124
    bytes, not the multiple of 16 TMA needs: staged into rows of 784, or a view of such rows taken as it lies)."""
    sw, = _binding(tmp_path, "swiglu_fwd_sm90.ttgir")
    M = sw.Meta
    given = {n: M((1000, 4096), "bfloat16", "cuda:0", True, 0) for n in ("a_ptr", "b_ptr", "c_ptr")}
    plan = sw.resolve(sw.SPEC, given)
    assert (plan["tiles_m"], plan["m_extent"], plan["loop_extent"]) == (16, 1000, 4096)
    with pytest.raises(sw.ArgumentError, match="compile-time constant 4096"):
        sw.resolve(sw.SPEC, {n: M((1000, 5000), "bfloat16", "cuda:0", True, 0) for n in given})
    assert [p for p in __import__("inspect").signature(sw.run).parameters][:4] == ["a_ptr", "b_ptr", "c_ptr", "stride"]
    rms, rms1 = _binding(tmp_path, "rms_norm_fwd_sm90.ttgir")
    given = {"X_ptr": rms.Meta((1000, 5000), "bfloat16", "cuda:0", True, 0)}
    given.update({a["name"]: None for a in rms.SPEC["args"] if a["output"]})
    assert rms.resolve(rms.SPEC, given)["loop_extent"] == 5000
    # its second loop reads W [N], one row for every row tile (Gemma's `offset + W_row`, a scalar plus a row, is no
    # per-row value: session 33 found the binding asking for W [M, N] on the GPU)
    w = next(a for a in rms1.SPEC["args"] if a["name"] == "W_ptr")
    assert [axis for axis, _ in w["dims"]] == ["loop"], w
    given = {"X_ptr": rms1.Meta((1000, 5000), "bfloat16", "cuda:0", True, 0),
             "W_ptr": rms1.Meta((5000,), "bfloat16", "cuda:0", True, 0),
             "mean_square_in": rms1.Meta((1000,), "float32", "cuda:0", True, 0), "Y_ptr": None}
    assert rms1.resolve(rms1.SPEC, given)["tiles_m"] == 16
    sm = _binding(tmp_path, "softmax_row_sm90.ttgir")[0]
    assert sm.resolve(sm.SPEC, {"input_ptr": sm.Meta((1000, 1024), "float32", "cuda:0", True, 0)})["tiles_m"] == 16
    # a ragged N: the f32 tile is masked in registers (its tail_mask); 781 f32 columns are not TMA's 16-byte rows:
    # staged into rows of 784 (binding_runtime._layout), as is a view x[:, :781] of a [4096, 784] tensor not
    assert sm.resolve(sm.SPEC, {"input_ptr": sm.Meta((1000, 1000), "float32", "cuda:0", True, 0)})["loop_extent"] == 1000
    plan = sm.resolve(sm.SPEC, {"input_ptr": sm.Meta((4096, 781), "float32", "cuda:0", True, 0)})
    assert plan["loop_extent"] == 781 and plan["layouts"][0] == ("stage", 784, 784, 4096 * 784)
    plan = sm.resolve(sm.SPEC, {"input_ptr": sm.Meta((4096, 781), "float32", "cuda:0", False, 0, (784, 1))})
    assert plan["layouts"][0] == ("as is", 781, 784, 4096 * 784)


def test_the_vector_add_binding_views_its_1d_tensors_as_rows(tmp_path):
    """The flat map's binding takes the tutorial's x, y [98432] (769 rows of 128: 13 CTAs, the last row tile
    partial), allocates the output as x is held, checks n_elements, and refuses 98433 elements naming the multiple."""
    va, = _binding(tmp_path, "vector_add_sm90.ttgir")
    M = va.Meta
    given = {"x_ptr": M((98432,), "float32", "cuda:0", True, 0), "y_ptr": M((98432,), "float32", "cuda:0", True, 0),
             "output_ptr": None}
    plan = va.resolve(va.SPEC, given, sizes={"n_elements": 98432})
    assert (plan["tiles_m"], plan["m_extent"], plan["loop_extent"]) == (13, 769, 128)
    assert plan["shapes"]["output_ptr"] == (98432,)
    assert va.resolve(va.SPEC, {**given, "x_ptr": M((769, 128), "float32", "cuda:0", True, 0)})["m_extent"] == 769
    with pytest.raises(va.ArgumentError, match="not a multiple of 128"):
        va.resolve(va.SPEC, {n: M((98433,), "float32", "cuda:0", True, 0) for n in ("x_ptr", "y_ptr")})
    with pytest.raises(va.ArgumentError, match="n_elements = 1000, but x_ptr has 98432"):
        va.resolve(va.SPEC, given, sizes={"n_elements": 1000})
    assert [p for p in __import__("inspect").signature(va.run).parameters][:4] == \
        ["x_ptr", "y_ptr", "output_ptr", "n_elements"]


class _Flat:
    """A stand-in torch tensor over a numpy array, with torch's views: view(-1) and slices share the memory."""

    def __init__(self, a, dtype="float32"):
        self.a, self.dtype, self.device, self.shape = a, dtype, "cuda:0", a.shape

    def numel(self):
        return self.a.size

    def is_contiguous(self):
        return self.a.flags.c_contiguous

    def view(self, *shape):
        v = self.a.view().reshape(*shape)
        assert np.shares_memory(v, self.a)
        return _Flat(v, self.dtype)

    def __getitem__(self, s):
        return _Flat(self.a[s], self.dtype)

    def copy_(self, other):
        self.a[...] = other.a


def test_a_flat_map_of_any_length_runs_its_tail_as_one_padded_row(tmp_path, monkeypatch):
    """vector_add over 98433 elements (769 rows of 128 and one more element): the call runs the kernel on the first
    98432 as they lie and on the last one copied into a zero-padded row of 128, each launch a multiple of 128; the
    output, allocated whole, is x + y everywhere; n_elements is checked against the tensors, and tensors that are
    not contiguous are left to the checks that name them."""
    import types
    va, = _binding(tmp_path, "vector_add_sm90.ttgir")
    fake = types.SimpleNamespace(Tensor=_Flat, float32="float32",
                                 empty=lambda shape, dtype, device: _Flat(np.full(shape, np.nan), dtype),
                                 zeros=lambda shape, dtype, device: _Flat(np.zeros(shape), dtype))
    launched = []

    def kernel(spec, here, tensors, sizes=None, **kw):  # the kernel, as numpy: every element its own
        assert all(x.numel() % 128 == 0 for x in tensors.values()) and (sizes or {}).get("n_elements") is None
        launched.append(tensors["x_ptr"].numel())
        tensors["output_ptr"].a[...] = tensors["x_ptr"].a + tensors["y_ptr"].a
        return tensors["output_ptr"]

    monkeypatch.setattr(va, "call", kernel)
    rng = np.random.default_rng(3)
    x, y = _Flat(rng.standard_normal(98433)), _Flat(rng.standard_normal(98433))
    kw = dict(stream=None)
    out = va._flat_tail(va.SPEC, "", {"x_ptr": x, "y_ptr": y, "output_ptr": None}, fake, kw, {"n_elements": 98433})
    assert launched == [98432, 128] and out.shape == (98433,) and np.array_equal(out.a, x.a + y.a)
    given = _Flat(np.zeros(100))  # fewer elements than one row: the padded row alone
    launched.clear()
    va._flat_tail(va.SPEC, "", {"x_ptr": x[:100], "y_ptr": y[:100], "output_ptr": given}, fake, kw, {})
    assert launched == [128] and np.array_equal(given.a, x.a[:100] + y.a[:100])
    with pytest.raises(va.ArgumentError, match="n_elements = 1000, but x_ptr has 98433"):
        va._flat_tail(va.SPEC, "", {"x_ptr": x, "y_ptr": y, "output_ptr": None}, fake, kw, {"n_elements": 1000})
    # a pipeline of two stages needs two blocks a row (erf GELU): 98433 runs as 384 rows of 256 and a padded one, and
    # so does 98432, whose 769 blocks (a prime) no row of 2 to 16 blocks divides
    two = {**va.SPEC, "stages": 2}
    for n in (98433, 98432):
        launched.clear()
        out = va._flat_tail(two, "", {"x_ptr": x[:n], "y_ptr": y[:n], "output_ptr": None}, fake, kw, {})
        assert launched == [98304, 256] and np.array_equal(out.a, x.a[:n] + y.a[:n]), (n, launched)
    assert va._flat_tail(two, "", {"x_ptr": x[:98304], "y_ptr": y[:98304], "output_ptr": None}, fake, kw, {}) is None
    strided = _Flat(rng.standard_normal((98433, 2))[:, 0])
    assert va._flat_tail(va.SPEC, "", {"x_ptr": strided, "y_ptr": y, "output_ptr": None}, fake, kw, {}) is None
    assert va._flat_tail(va.SPEC, "", {"x_ptr": x[:98432], "y_ptr": y[:98432], "output_ptr": None}, fake, kw, {}) is None


# one compile here (SwiGLU on sm_90a, one loop); the others `slow`. swiglu_fwd_sm100 and geglu_fwd_sm100 spilled 32
# and 140 bytes on b200 as 64 x 128 f32 tiles (128 registers a thread on sm_100a); as 128 x 64 tiles (session 40,
# rowprog.TILES) they compile clean. Not here, for CI's time: softmax_row_sm90, whose loops are batch 7's softmax_fused's, loop for loop (checked above;
# test_heldout7 compiles that), and layer_norm_fwd_sm100 (test_heldout7 compiles a LayerNorm's tail-masked loop for
# sm_100a).
COMPILED = ["swiglu_fwd_sm90", "vector_add_sm90", "geglu_fwd_sm90", "rms_norm_fwd_sm90", "layer_norm_fwd_sm90", "rms_norm_fwd_sm100",
            "swiglu_fwd_sm100", "geglu_fwd_sm100"]


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
@pytest.mark.parametrize("name", [pytest.param(n, marks=() if i == 0 else pytest.mark.slow)
                                  for i, n in enumerate(COMPILED)])
@pytest.mark.extended
def test_heldout8_dump_solves_emits_and_compiles_clean(name, tmp_path):
    machine = load_machine("b200" if name.endswith("sm100") else "h200")
    found = _import(DATA / "t36" / "prepipe" / f"{name}.ttgir")
    graphs = found.graphs if isinstance(found, Sequence) else (found,)
    for i, graph in enumerate(graphs):
        schedule = solve(graph, machine, SolveOptions(time_limit=30))
        assert schedule.complete
        _, rc, err = emitted_and_built(schedule, machine, tmp_path / f"{name}.{i}.cu")  # as emit-cuda, its ptxas loop
        assert rc == 0, err[-2000:]
        spills = {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)}
        assert spills <= {0}, err[-2000:]
        assert "C7510" not in err and "C7511" not in err and "serialized" not in err, err[-2000:]
