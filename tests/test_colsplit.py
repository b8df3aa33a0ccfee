"""A row loop's columns split over the grid (twill/emit/colsplit.py; docs/emit-cuda.md, "A row loop split over
the grid"): which carries are folds, the splits the binding chooses, the split kernels' indices, and the
sequence binding's combine of the partials, evaluated in numpy (no GPU): each loop's launch is replaced by a
numpy evaluation of its graph over each split's columns alone, as the kernel's CTAs compute them."""
from __future__ import annotations

import importlib.util
import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import nvcc, nvcc_compile
from twill.emit.binding_runtime import choose_uneven
from twill.emit.colsplit import COMBINE, ColumnSplit, Fold, choose_splits, column_graph, plan
from twill.sequence import Sequence
from twill.tir import parse_tir
from twill.ttgir.sequence import import_sequence
from twill_cli.main import main

DATA = Path(__file__).parent / "data" / "ttgir"
GOLDEN = Path(__file__).parent / "golden" / "colsplit"


def _seq(batch: str, name: str):
    found, _ = import_sequence((DATA / batch / "t36/prepipe" / f"{name}_sm90.ttgir").read_text(), name)
    return found if isinstance(found, Sequence) else Sequence(found.kernel, ("L0",), (found,))


# kernel -> each loop's folds ((kind, carries), ...), or the start of why it is not split
EXPECTED = {
    ("heldout7", "softmax_fused"): [(("max", ("row_minus_max",)),), (("sum", ("denominator",)),), ()],
    ("heldout7", "softmax_3pass"): [(("max", ("mx",)),), (("sum", ("den",)),), ()],
    ("heldout7", "softmax_online"): [(("online", ("m", "d")),), ()],
    ("heldout7", "rmsnorm_fwd"): [(("sum", ("acc",)),), ()],
    ("heldout7", "l2norm_rows"): [(("sum", ("ss",)),), ()],
    # an epilogue reads the carries (the mean from the sum, the log of the online pair's): combined in the kernel
    ("heldout7", "layernorm_fwd"): [("fixup", (("sum", ("_mean",)),)), ("fixup", (("sum", ("_var",)),)), ()],
    ("heldout7", "logsumexp_rows"): [("fixup", (("online", ("m", "s")),))],
    ("heldout8", "softmax_row"): [(("max", ("row_minus_max",)),), (("sum", ("denominator",)),), ()],
    ("heldout8", "swiglu_fwd"): [()],
    ("heldout8", "vector_add"): ["the graph has a grid line of its own"],
}


@pytest.mark.parametrize("batch, name", list(EXPECTED))
def test_the_row_sequences_folds_are_recognized(batch, name):
    """Every loop of the imported row kernels: its carries' folds (max, sum, the online pair), no carry (a
    store pass: it splits as it is), combined in the kernel where the epilogue reads them ("fixup"), or why it
    is not split (a flat map)."""
    for graph, want in zip(_seq(batch, name).graphs, EXPECTED[(batch, name)], strict=True):
        got = plan(graph)
        if isinstance(want, str):
            assert not got and got.why_not.startswith(want), got
            assert column_graph(graph) is None
        else:
            fixup = bool(want) and want[0] == "fixup"
            folds = want[1] if fixup else want
            assert got == ColumnSplit(tuple(Fold(k, c) for k, c in folds), fixup=fixup), got
            assert column_graph(graph).split == "twill_split_cols"


HEAD = """kernel k
argument X = x
argument Y
{carries}
loop {{
  x = load : f16[64,128] @smem
{body}
}}
"""


@pytest.mark.parametrize("carries, body, why", [
    # a carry read by another op of the loop (a running max stored each iteration)
    ("carry m : f32[64] = -inf", "  m_new = rowmax x, m : f32[64]\n  y = exp2 x, m_new : f32[64,128]\n"
     "  s = rowsum y : f32[64]\n  yield m = m_new", "read by y"),
    # a sum starting at 1: each split's partial would count it
    ("carry s : f32[64] = 1", "  s_new = rowsum x, s : f32[64]\n  yield s = s_new", "starts at 1"),
    # a sum rescaled by something other than exp2(m, m') of a running max
    ("carry s : f32[64] = 0\ncarry t : f32[64] = 0", "  s_new = rowsum x, s, t : f32[64]\n  t_new = rowsum x, t : f32[64]\n"
     "  yield s = s_new, t = t_new", "rescales by t"),
    # a carry updated by an elementwise op, not a reduction's fold
    ("carry s : f32[64] = 0", "  r = rowsum x : f32[64]\n  s_new = mul r, s : f32[64]\n  yield s = s_new",
     "is not a fold"),
    # a fold of a value that reads the carry itself
    ("carry m : f32[64] = -inf", "  y = exp2 x, m : f32[64,128]\n  m_new = rowmax y, m : f32[64]\n  yield m = m_new",
     "reduces a value that reads a carry"),
])
def test_a_carry_that_is_not_a_fold_is_not_split(carries, body, why):
    got = plan(parse_tir(HEAD.format(carries=carries, body=body), "k.tir"))
    assert not got and why in got.why_not, got.why_not


def test_an_mma_loop_is_not_split():
    graph = parse_tir((Path(__file__).parent.parent / "examples" / "attention_fwd_simple.tir").read_text(), "a.tir")
    assert "mma" in plan(graph).why_not


@pytest.mark.parametrize("tiles, iters, stages, sms, want", [
    (16, 40, 3, 132, 8),    # 1000 rows x 5120: 16 x 8 = 128 CTAs of 5 iterations
    (16, 6, 2, 132, 3),     # 1000 x 768 fp32: 6 iterations, 3 splits of 2
    (16, 6, 4, 132, 1),     # ... but a pipeline of 4 stages needs 4 iterations a split
    (64, 40, 3, 132, 2),    # 4096 rows: 64 x 2 = 128
    (16, 250, 3, 132, 5),   # 1000 x 32000: 250 iterations divide by 2, 5, 10, ...: 16 x 8 > 132 is not whole
    (66, 40, 3, 132, 2),    # 66 x 2 = 132, one wave exactly
    (67, 40, 3, 132, 1),    # more than half the SMs: a second wave costs what the split saves
    (16, 7, 2, 132, 1),     # 7 iterations: no split divides them
    (1, 1, 1, 132, 1),
])
def test_the_binding_chooses_the_splits(tiles, iters, stages, sms, want):
    assert choose_splits(tiles, iters, stages, sms) == want


@pytest.mark.parametrize("tiles, iters, stages, sms, want", [
    (16, 40, 3, 132, (8, 5)),     # 1000 x 5000: 40 tiles of 128, the last partial: 7 splits of 5, a last of 5
    (16, 251, 3, 132, (8, 32)),   # 1000 x 32008: 7 of 32, a last of 27
    (16, 393, 3, 132, (8, 50)),   # 1000 x 50257 (GPT-2's vocabulary): 7 of 50, a last of 43
    (16, 10, 4, 132, (2, 5)),     # 3 splits would leave the last 2 iterations, short of 4 stages
    (64, 40, 3, 132, (2, 20)),
    (67, 40, 3, 132, (1, 40)),    # more than half the SMs
    (16, 5, 3, 132, (1, 5)),      # no two splits of 3 iterations fit in 5
])
def test_a_partial_last_tile_splits_unevenly(tiles, iters, stages, sms, want):
    s, q = choose_uneven(tiles, iters, stages, sms)
    assert (s, q) == want
    assert s == 1 or (tiles * s <= sms and iters - (s - 1) * q >= max(stages, 2) and (s - 1) * q < iters)


# -- the sequence binding, run with each loop's launch evaluated in numpy -----------------------------------

def _op(op, env):
    from test_heldout7 import _op as evaluate
    return evaluate(op, env)


def _run_loop(graph, arrays: dict, inputs: dict, lo: int, hi: int, cols: int = 128):
    """The loop of `graph` over columns lo .. hi of the [M, N] arrays (whole tiles but the array's end): its
    carries' final values and its stores (columns lo .. hi)."""
    feeds = {t: a for a, t in graph.arguments if t is not None}
    m, n = next(a.shape for a in arrays.values() if a.ndim == 2)
    env = dict(inputs)
    env.update({f"knob {k}": np.float64(v.coef) for k, v in graph.knobs})
    env.update({c.name: np.full(m, float(c.init)) for c in graph.carries})
    stores = {}
    for j in range(lo, hi, cols):
        it = dict(env)
        for op in graph.ops:
            if op.opcode == "load":
                tile = arrays[feeds[op.name]][:, j:j + cols].astype(np.float64)
                fill = np.full((m, cols - tile.shape[1]), float(op.attr("fill", None) or 0))
                it[op.name] = np.concatenate([tile, fill], axis=1)
            elif op.opcode == "tail_mask":
                it[op.name] = np.array(it[op.operands[0].name])
                it[op.name][:, n - j:] = float(op.attr("fill"))
            elif op.opcode == "store":
                stores.setdefault(feeds[op.name], np.zeros((m, n)))[:, j:j + cols] = it[op.operands[0].name][:, :n - j]
            else:
                it[op.name] = _op(op, it)
        for carry, src in graph.yields:
            env[carry] = it[src]
    return {c.name: env[c.name] for c in graph.carries}, stores


class _Tensor:
    """A stand-in torch tensor holding a numpy array (the binding's checks read shape, dtype, device)."""

    def __init__(self, a, dtype="float32"):
        self.a, self.dtype, self.device = np.asarray(a), dtype, "cuda:0"
        self.shape = self.a.shape

    def is_contiguous(self):
        return True

    def stride(self):  # dense, in elements (the binding's describe() reads it for the row pitch)
        return tuple(int(x) // self.a.itemsize for x in self.a.strides) if self.a.ndim else ()

    def data_ptr(self):
        return 0


def _fake_torch(sms: int):
    fake = types.ModuleType("torch")
    fake.Tensor = _Tensor
    fake.device = lambda name: name
    fake.cuda = types.SimpleNamespace(get_device_properties=lambda d: types.SimpleNamespace(multi_processor_count=sms))
    # the combine's calls (colsplit.COMBINE), on the stand-in's arrays
    unwrap = lambda x: x.a if isinstance(x, _Tensor) else x  # noqa: E731
    for name in ("amax", "amin", "sum", "exp2"):
        setattr(fake, name, lambda x, *a, _f=getattr(np, name): _Tensor(_f(unwrap(x), *a)))
    return fake


def _arith(cls):
    for op in ("add", "sub", "mul", "truediv"):
        setattr(cls, f"__{op}__", lambda s, o, _o=op: _Tensor(getattr(s.a, f"__{_o}__")(o.a if isinstance(o, _Tensor) else o)))
        setattr(cls, f"__r{op}__", lambda s, o, _o=op: _Tensor(getattr(s.a, f"__r{_o}__")(o)))


_arith(_Tensor)


def _emitted(tmp_path, batch: str, name: str):
    """import -> solve -> emit-cuda --binding torch of a row kernel (h200, no ptxas loop): K.py's module."""
    tir, cu = tmp_path / f"{name}.tir", tmp_path / f"{name}.cu"
    for argv in (["import", str(DATA / batch / "t36/prepipe" / f"{name}_sm90.ttgir"), "-o", str(tir)],
                 ["emit-cuda", str(tir), "--gpu", "h200", "-o", str(cu), "--binding", "torch", "--no-ptxas-loop",
                  "--time-limit", "20"]):
        r = CliRunner().invoke(main, argv)
        assert r.exit_code == 0, r.output
    spec = importlib.util.spec_from_file_location(f"{name}_seq", tmp_path / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run_in_numpy(seq_mod, seq, x, monkeypatch, sms=132, combine=None, dtype="float16"):
    """Run K.py on x, each loop's launch (`call`) evaluated in numpy split by split: (its result, the
    splits each loop ran)."""
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(sms))
    if combine is not None:
        monkeypatch.setattr(seq_mod, "COMBINE", combine)
    ran = {}
    for (loop, file, _, _), graph in zip(seq_mod.LOOPS, seq.graphs):
        mod = seq_mod._module(file)
        names = [a for a in mod.SPEC["args"]]

        def launch(spec, here, tensors, *, _loop=loop, _graph=graph, _names=names, _mod=mod, **kw):
            plan = _mod.resolve(spec, {k: (None if v is None else _mod.describe(v)) for k, v in tensors.items()},
                                None, kw.get("split"))
            e, s = plan["loop_extent"], plan["splits"]
            whole = plan["whole"] or e * s  # (uneven splits: the last takes what the others leave)
            ran[_loop] = s
            arrays = {k: v.a for k, v in tensors.items() if v is not None and v.a.ndim == 2}
            inputs = {g.name: tensors[g.name].a for g in _graph.inputs if g.name in tensors}
            parts, stored = [], {}
            for i in range(s):  # split i: its columns alone, from the carries' initial values
                finals, stores = _run_loop(_graph, arrays, inputs, i * e, min((i + 1) * e, whole))
                parts.append(finals)
                for k, v in stores.items():
                    stored[k] = stored.get(k, 0) + v
            out = [_Tensor(np.stack([p[a["name"]] for p in parts])) if a["name"] in parts[0] else _Tensor(stored[a["name"]])
                   for a in _names if a["output"]]  # a carry's partials [S, M] (its binding's name), or a store
            return tuple(out) if len(out) > 1 else out[0]
        monkeypatch.setattr(mod, "call", launch)
    got = seq_mod.run(_Tensor(x, dtype))
    return got.a, ran


def _softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@pytest.mark.parametrize("name", ["softmax_online", "softmax_fused"])
def test_the_sequence_binding_splits_the_columns_and_combines_the_partials(tmp_path, monkeypatch, name):
    """K.py on 1000 x 5120 (16 row tiles on 132 SMs): each split loop runs S splits (choose_splits), writes
    [S, M] partials, and K.py folds them (the online pair rescaled by its exp2_scale) before handing them
    over: the result is the softmax (fp64, 1e-9). On 1000 x 5000 (a partial last column tile: 40 iterations of
    128) the splits are uneven (choose_uneven: 7 of 5 iterations and a last of 5, the partial tile its own); the
    last loop, the normalization, has no carry and runs 2 CTAs an SM (occupancy.default_limit), so its wave is
    264 CTAs: 9 splits of 4 iterations and a last of 4."""
    seq_mod = _emitted(tmp_path, "heldout7", name)
    seq = _seq("heldout7", name)
    x = np.random.default_rng(5).standard_normal((1000, 5120)) * 3
    dtype = {"softmax_online": "float16", "softmax_fused": "float32"}[name]
    got, ran = _run_in_numpy(seq_mod, seq, x, monkeypatch, dtype=dtype)
    assert np.allclose(got, _softmax(x), rtol=1e-9, atol=1e-12)
    assert all(ran[loop] > 1 for loop in seq.names), ran
    x = np.random.default_rng(6).standard_normal((1000, 5000)) * 3
    got, ran = _run_in_numpy(seq_mod, seq, x, monkeypatch, dtype=dtype)
    last = seq.names[-1]
    assert np.allclose(got, _softmax(x), rtol=1e-9, atol=1e-12), ran
    assert ran[last] == 10 and all(ran[loop] == 8 for loop in seq.names if loop != last), ran


def test_a_second_call_of_the_same_kind_is_not_planned_again(tmp_path, monkeypatch):
    """K.py plans its loops (every loop's resolve, the splits) once per kind of the user's tensors (what the
    checks read of them): the same shapes again take the splits it kept; new shapes are planned."""
    seq_mod = _emitted(tmp_path, "heldout7", "softmax_online")
    seq = _seq("heldout7", "softmax_online")
    x = np.random.default_rng(7).standard_normal((1000, 5120))
    got, ran = _run_in_numpy(seq_mod, seq, x, monkeypatch)
    planned = []
    monkeypatch.setattr(seq_mod, "plans", lambda user, _p=seq_mod.plans: planned.append(1) or _p(user))
    again, ran_again = _run_in_numpy(seq_mod, seq, x, monkeypatch)
    assert planned == [] and ran_again == ran and np.array_equal(again, got)
    _run_in_numpy(seq_mod, seq, x[:, :4096], monkeypatch)
    assert planned == [1]


def test_the_online_pairs_partials_combined_as_plain_folds_are_not_the_softmax(tmp_path, monkeypatch):
    """The check above can fail: the online pair's partials combined without the rescale (l = sum_s l_s, each
    split's sum relative to its own max) is not the softmax."""
    seq_mod = _emitted(tmp_path, "heldout7", "softmax_online")
    x = np.random.default_rng(5).standard_normal((1000, 5120)) * 3
    wrong = {"online": lambda xp, scale, m, l: (xp.amax(m, 0), xp.sum(l, 0))}
    got, ran = _run_in_numpy(seq_mod, _seq("heldout7", "softmax_online"), x, monkeypatch, combine=wrong)
    assert ran["L0"] > 1 and not np.allclose(got, _softmax(x), rtol=1e-3)


def test_combine_table_is_the_folds_maths():
    """colsplit.COMBINE on numpy: max, min, sum of the partials; the online pair's (m, l) of split halves is
    the pair of the whole row."""
    rng = np.random.default_rng(3)
    p = rng.standard_normal((4, 10))
    for kind, want in (("max", p.max(0)), ("min", p.min(0)), ("sum", p.sum(0))):
        assert np.array_equal(eval(COMBINE[kind])(np, 1.0, p)[0], want)  # noqa: S307 (our own table's text)
    x, scale = rng.standard_normal((10, 256)) * 4, 1 / np.log(2)
    halves = [x[:, :100], x[:, 100:]]
    m = np.stack([h.max(1) for h in halves])
    l = np.stack([np.exp2((h - h.max(1, keepdims=True)) * scale).sum(1) for h in halves])
    mx, lx = eval(COMBINE["online"])(np, scale, m, l)  # noqa: S307
    assert np.allclose(mx, x.max(1)) and np.allclose(lx, np.exp(x - x.max(1, keepdims=True)).sum(1), rtol=1e-12)


# -- the emitted kernels: goldens, and nvcc with no spill ---------------------------------------------------

def _emit_files(tmp_path, name: str, gpu: str) -> Path:
    arch = "sm100" if gpu == "b200" else "sm90"
    tir, cu = tmp_path / f"{name}.tir", tmp_path / f"{name}_{arch}.{gpu}.cu"
    for argv in (["import", str(DATA / "heldout7/t36/prepipe" / f"{name}_{arch}.ttgir"), "-o", str(tir)],
                 ["emit-cuda", str(tir), "--gpu", gpu, "-o", str(cu), "--no-ptxas-loop", "--time-limit", "20"]
                 + (["--binding", "torch"] if gpu == "h200" else [])):
        r = CliRunner().invoke(main, argv)
        assert r.exit_code == 0, r.output
    return cu


@pytest.mark.parametrize("gpu", ["h200", "b200"])
def test_the_split_kernels_match_golden(tmp_path, golden, gpu):
    """softmax_online's two loops, each split by columns: L0 (the online pair) loads at the split's first
    iteration plus its own and writes its partials at entry tile.b of [S * batch][rows]; L1 (a store along the
    loop) reads the combined pair at the batch entry and stores at the split's columns of that entry, its
    tensor maps every split's columns long; K.py's SPLITS and COMBINE (h200, with the binding)."""
    _emit_files(tmp_path, "softmax_online", gpu)
    for f in sorted(tmp_path.glob("softmax_online_*.L*.cu")) + sorted(tmp_path.glob("softmax_online_*.py")):
        golden(f"colsplit/{f.name}", f.read_text())
    l0, l1 = (f.read_text() for f in sorted(tmp_path.glob("softmax_online_*.L[01].cu")))
    cols = 128 if gpu == "h200" else 64  # the sm_100 dump's column tile (rowprog.TILES: 128 x 64 on sm_100)
    assert f"(twill_split_first + it) * {cols}" in l0 and "grid split = twill_split_cols" in l0
    assert re.search(r"static_cast<uint64_t>\(p\.batch\) \* static_cast<uint64_t>\(p\.splits\)", l0)  # partials
    if gpu == "h200":
        assert re.search(r"c0 = \(twill_split_first \+ it\) \* 128, b = twill_split_b;", l1)  # the store's columns
        k = (tmp_path / "softmax_online_sm90.h200.py").read_text()
        assert "'L0': ('twill_split_cols', " in k and "(('online', ('m', 'd')),)" in k


@pytest.mark.slow
@pytest.mark.extended
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found")
@pytest.mark.parametrize("gpu", ["h200", "b200"])
def test_the_split_kernels_compile_without_spills(tmp_path, monkeypatch, gpu):
    """nvcc -Xptxas -v on both split loops of softmax_online, as emit-cuda writes them with its ptxas loop (the
    loop compiled, solved again with the registers ptxas counted where they differ: on sm_100a the goldens
    above, written without it, spill 600 bytes, split or not): no spill, no serialized wgmma."""
    monkeypatch.setenv("TWILL_PTXAS_LOOP", "1")
    arch = "sm_90a" if gpu == "h200" else "sm_100a"
    tag = "sm100" if gpu == "b200" else "sm90"
    tir, cu = tmp_path / "so.tir", tmp_path / "so.cu"
    for argv in (["import", str(DATA / "heldout7/t36/prepipe" / f"softmax_online_{tag}.ttgir"), "-o", str(tir)],
                 ["emit-cuda", str(tir), "--gpu", gpu, "-o", str(cu), "--time-limit", "30"]):
        r = CliRunner().invoke(main, argv)
        assert r.exit_code == 0, r.output
    for loop in ("L0", "L1"):
        src = tmp_path / f"so.{loop}.cu"
        assert "grid split = twill_split_cols" in src.read_text()
        rc, err = nvcc_compile(src, ["-std=c++17", f"-gencode=arch=compute_{arch[3:]},code={arch}", "-Xptxas", "-v"])
        assert rc == 0, err
        spills = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)]
        assert spills and not any(spills) and "C75" not in err, (loop, err[-3000:])


# -- a kernel whose only loop has no carry: the binding splits its columns itself ------------------------------

_ALONE = {}  # (batch, name) -> _alone's answer: emitted once per worker (the parametrized tests share it)


def _alone(tmp_path, batch: str, name: str):
    """import -> solve -> emit-cuda --binding torch of a one-loop kernel (h200, no ptxas loop): (its .cu text,
    its binding's module)."""
    if (batch, name) not in _ALONE:
        mod = _emitted(tmp_path, batch, name)
        _ALONE[batch, name] = (tmp_path / f"{name}.cu").read_text(), mod
    return _ALONE[batch, name]


@pytest.mark.parametrize("rows, cols, sms, want", [
    # the kernel runs 2 CTAs an SM (no carry, no mma: occupancy.default_limit), so a wave is 2 x the SMs
    (4096, 4096, 132, 4),   # 64 row tiles, 64 column tiles: four splits fill 256 of the 264 CTAs
    (1024, 4096, 132, 16),  # 16 row tiles: sixteen splits (each 4 iterations)
    (1024, 4096, 8, 1),     # the row tiles fill the wave already
    (1000, 1000, 132, 4),   # a partial last column tile (16 iterations of 64): uneven, 3 splits of 4 and a last
    (16384, 4096, 132, 1),  # 256 row tiles: a second wave would cost what a split saves
])
def test_a_kernel_whose_only_loop_has_no_carry_splits_its_own_columns(tmp_path, monkeypatch, rows, cols, sms, want):
    """bias + GELU over a 2-D grid of blocks (batch 10) imports as one column loop with no carry: emit-cuda
    writes it split by columns (each split stores its own columns; nothing to combine), and its binding, not
    given twill_split_cols, picks the splits at the call from the row tiles, the iterations and the device's
    SMs (choose_splits); the loop extent the launch gets is one split's."""
    text, mod = _alone(tmp_path, "heldout10", "bias_gelu")
    assert "grid split = twill_split_cols" in text and "(twill_split_first + it) * 64" in text
    assert "twill_split_cols: None, or a Python int" in mod.bias_gelu_kernel.__doc__  # optional: picked at the call
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(sms))
    monkeypatch.setattr(mod, "_SMS", {})
    x, b = _Tensor(np.zeros((rows, cols)), "float16"), _Tensor(np.zeros(cols), "float16")
    run = mod._prepare(mod.SPEC, {"X": x, "B": b, "Y": None}, None, _Tensor, str)
    plan = run.plan
    whole = plan["loop_extent"] * want != cols  # uneven: the launch passes the whole extent
    assert plan["splits"] == want and (plan["loop_extent"] * want == cols or plan["whole"] == cols), plan
    assert run.tail == (want, cols if whole else 0) and plan["shapes"]["Y"] == (rows, cols)


def test_a_kernel_whose_only_loop_folds_combines_its_splits_in_its_binding(tmp_path, monkeypatch):
    """KL divergence summed per row (batch 10's kldiv_rows: one loop, its carry a row sum stored as the output,
    no epilogue) is emitted split by columns; its binding, the kernel alone, records the fold (spec["folds"]),
    picks the splits at the call (1024 x 32000 f32: 16 row tiles, 250 column tiles of 128: S = 5 on 132 SMs, the
    most that divide 250 within a wave), allocates the [S, 1024] partials itself even where the caller passes
    the [1024] output, and sums them into the caller's tensor; an output of another shape is refused before any
    launch."""
    text, mod = _alone(tmp_path, "heldout10", "kldiv_rows")
    assert "grid split = twill_split_cols" in text
    assert mod.SPEC["folds"] == [["sum", ["loss_ptr"]]], mod.SPEC.get("folds")
    assert "loss_ptr: torch.float32 [*batch, M]" in mod.kldiv_rows_kernel.__doc__
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(132))
    monkeypatch.setattr(mod, "_SMS", {})
    y, gt = (_Tensor(np.zeros((1024, 32000))) for _ in range(2))
    run = mod._prepare(mod.SPEC, {"y_ptr": y, "gt_ptr": gt, "loss_ptr": None}, None, _Tensor, str)
    assert run.plan["splits"] == 5 and run.plan["shapes"]["loss_ptr"] == (5, 1024), run.plan
    parts = np.random.default_rng(2).standard_normal((5, 1024))
    user = _Tensor(np.zeros(1024))
    user.copy_ = lambda t: np.copyto(user.a, t.a)
    values = [y, gt, _Tensor(parts)]
    mod._combine(mod.SPEC, run, values, {"loss_ptr": user}, 1.0, sys.modules["torch"])
    assert values[2] is user and np.allclose(user.a, parts.sum(0), rtol=1e-12)
    run = run._replace(device="cuda:0")
    with pytest.raises(mod.ArgumentError, match=r"loss_ptr: expected a float32 tensor of shape \[1024\]"):
        mod._check_folded(mod.SPEC, run, "loss_ptr", _Tensor(np.zeros((5, 1024))))
    mod._check_folded(mod.SPEC, run, "loss_ptr", _Tensor(np.zeros(1024)))


def test_one_split_is_the_loop_as_alone_and_its_errors_name_the_users_tensors(tmp_path, monkeypatch):
    """add + RMSNorm (batch 10) at 1000 x 5000: its loops take whole column tiles only (no fill proves the
    partial tile's elements harmless), so the call is refused; with one split (what a partial tile gives) the
    loops run as alone, and the refusal names the tensor that gives L, not the splits' own argument, which the
    user never passed."""
    seq_mod = _emitted(tmp_path, "heldout10", "add_rmsnorm")
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(132))
    x, res, w = _Tensor(np.zeros((1000, 5000)), "bfloat16"), _Tensor(np.zeros((1000, 5000)), "bfloat16"), \
        _Tensor(np.zeros(5000), "bfloat16")
    first = seq_mod._module(seq_mod.LOOPS[0][1])
    with pytest.raises(first.ArgumentError) as err:
        seq_mod.run(x, res, 5000, 1e-6, w)
    assert "twill_split_cols" not in str(err.value) and "L = 5000 is not a multiple of" in str(err.value), err.value


# -- a store along the loop written without TMA (its staging does not fit, or its rows are not 128-byte lines) -----

NARROW = """kernel narrow_square
argument x_ptr = x_row
argument y_ptr = store_0
argument stride
extent loop = 4096
loop {
  x_row = load : bf16[64,32] @smem
  x_f   = convert x_row : f32[64,32]
  y     = mul x_f, x_f : bf16[64,32]
  store y
}
"""


@pytest.mark.parametrize("rows, sms, want", [
    (1000, 132, 16),   # 16 row tiles x 16 splits of 8 iterations fill 256 of the 264 CTAs (2 an SM)
    (2048, 132, 8),    # 32 row tiles x 8
    (16384, 132, 1),   # 256 row tiles fill the wave already
])
def test_a_store_along_the_loop_without_tma_splits_by_columns(tmp_path, monkeypatch, rows, sms, want):
    """A no-carry loop whose store is each thread's own (rows of 64 bytes: no TMA staging; swiglu_bwd's two bf16
    stores, whose staging did not fit two CTAs an SM, were refused the split and ran 16 CTAs of 32 iterations at 1000
    rows: 0.08x Triton, session 40) is split by columns: each split writes its own columns at the loop's whole-extent
    index, (split_first + it) x 32, into rows as long as every split's columns, not its own n x 32; the binding picks
    the splits from the row tiles and the SMs as for a TMA store, and the kernel compiles for sm_90a."""
    src = tmp_path / "narrow.tir"
    src.write_text(NARROW)
    cu = tmp_path / "narrow.cu"
    r = CliRunner().invoke(main, ["emit-cuda", str(src), "--gpu", "h200", "-o", str(cu), "--binding", "torch",
                                  "--no-ptxas-loop", "--time-limit", "20"])
    assert r.exit_code == 0, r.output
    text = cu.read_text()
    assert "grid split = twill_split_cols" in text and "twill::frag_to_global(dst, f, row0, c0, ld);" in text
    ld = "((args.splits - 1) * args.iters + args.last_iters) * 32"
    assert f"c0 = (twill_split_first + it) * 32, ld = {ld}," in text
    assert f"static_cast<size_t>(twill_split_b) * static_cast<int>(twill::grid_extent(args.m_extent, args.tiles_m, " \
           f"args.store_0_rows_step)) * {ld};" in text  # the entry's rows are every split's columns long
    spec = importlib.util.spec_from_file_location("narrow_binding", tmp_path / "narrow.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(sms))
    monkeypatch.setattr(mod, "_SMS", {})
    run = mod._prepare(mod.SPEC, {"x_ptr": _Tensor(np.zeros((rows, 4096)), "bfloat16"), "y_ptr": None}, None,
                       _Tensor, str)
    assert run.plan["splits"] == want and run.plan["loop_extent"] * want == 4096, run.plan
    assert run.plan["shapes"]["y_ptr"] == (rows, 4096)
    if nvcc() is not None and rows == 1000:
        rc, err = nvcc_compile(tmp_path / "narrow_entry.cu", ["-std=c++17", "-gencode=arch=compute_90a,code=sm_90a",
                                                              "-Xptxas", "-v", f"-I{tmp_path}"])
        assert rc == 0, err[-2000:]
        assert not any(int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)), err[-2000:]
