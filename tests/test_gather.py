"""The epilogue's `gather x, index` (docs/formats.md, "The epilogue"; docs/ttgir-import.md section 8, "The
target's logit"): a cross-entropy's `x_t = tl.load(logits_row + tl.load(TARGET + row))` after its online
logsumexp loop, one element a row of the tensor the loop's load walks at a column loaded per row.

- every form of kernels7.py's xent_scalar and kernels6.py's cross_entropy_fwd imports to `gather x, TARGET`;
- evaluated in numpy (test_heldout7._evaluate), the imported graphs compute lse - x[t] (and lse) on 128 x 400
  logits (a partial last column tile), and a gather of the next column does not;
- near misses are refused at their TTGIR line: arithmetic on the loaded index, a gather in the loop;
- the `.tir` checks: x a load of the loop, index i32/i64 [M], the result x's dtype [M];
- emitted: the Args carry x's pointer and row length, each thread `twill::gather_rows` its rows; the binding
  takes the Triton kernel's (LOGITS, TARGET, LOSS, stride_row, V) and refuses an int64 TARGET; sm_90a compiles
  with no spill (the one compile here).
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from conftest import emitted_and_built, nvcc
from twill.errors import InputError
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.tir import parse_tir, print_tir
from twill.ttgir.sequence import import_sequence

DATA = Path(__file__).parent / "data" / "ttgir"
FORMS = ("t39/prepipe", "t39/after", "t36/prepipe", "t36/after")
KERNELS = (("heldout7", "xent_scalar"), ("heldout6", "cross_entropy_fwd"))


def _import(path: Path, text: str | None = None):
    found, _ = import_sequence(path.read_text() if text is None else text, str(path))
    return found


@pytest.mark.parametrize("batch,name", KERNELS)
def test_every_form_imports_the_target_logit_as_a_gather(batch, name):
    for form in FORMS:
        for arch, rows in (("sm90", 64), ("sm100", 128)):  # sm_100: 128-row tiles (rowprog.TILES)
            text = print_tir(_import(DATA / batch / form / f"{name}_{arch}.ttgir"))
            assert f"input TARGET : i32[{rows}]" in text, (form, arch)
            assert re.search(rf"x_t\s+= gather x, TARGET\s+: bf16\[{rows}\]", text), (form, arch)
            assert re.search(r"argument LOGITS\s+= x\n", text) and re.search(r"argument TARGET\s+= TARGET", text)


def test_the_imported_cross_entropies_compute_lse_minus_the_target_logit():
    import numpy as np
    from test_heldout7 import _evaluate
    rng = np.random.default_rng(32)
    x = rng.standard_normal((128, 400)) * 2
    t = rng.integers(0, 400, 128)
    lse = np.log(np.exp(x - x.max(1, keepdims=True)).sum(1)) + x.max(1)
    want = lse - x[np.arange(128), t]
    numbers = {"V": 400, "exp2_scale": 1.4426950408889634}
    for form in FORMS:
        got = _evaluate(_import(DATA / "heldout7" / form / "xent_scalar_sm90.ttgir"), {"LOGITS": x, "TARGET": t}, numbers)
        assert np.allclose(got["LOSS"], want, rtol=1e-9, atol=1e-12), form
        got = _evaluate(_import(DATA / "heldout6" / form / "cross_entropy_fwd_sm100.ttgir"),
                        {"LOGITS": x, "TARGET": t}, numbers)
        assert np.allclose(got["LOSS"], want, rtol=1e-9, atol=1e-12), form
        assert np.allclose(got["LSE"], lse, rtol=1e-9, atol=1e-12), form
    # the evaluator reads the gathered column: the next column's logit is another loss
    got = _evaluate(_import(DATA / "heldout7/t39/prepipe/xent_scalar_sm90.ttgir"), {"LOGITS": x, "TARGET": (t + 1) % 400},
                    numbers)
    assert not np.allclose(got["LOSS"], want, rtol=1e-3)


XENT = DATA / "heldout7/t39/prepipe/xent_scalar_sm90.ttgir"


def _refused(text: str, op: str, match: str) -> None:
    with pytest.raises(InputError, match=match) as err:
        _import(XENT, text)
    line = text.splitlines()[err.value.diagnostics[0].span.line - 1]
    assert op in line, line


def test_near_misses_are_refused_at_their_line():
    base = XENT.read_text()
    # the index doubled: x[t + t] is no loaded index as it is
    doubled = base.replace("%x_t = tt.addptr %logits_row_3, %t_7 :",
                           "%t_d = arith.addi %t_7, %t_7 : i32 loc(#loc60)\n    %x_t = tt.addptr %logits_row_3, %t_d :")
    assert doubled != base
    _refused(doubled, "%x_t_8 = tt.load", "not a loaded index as it is")
    # the gather in the loop (Liger's `tl.load(X_ptr + y)` read per column tile): refused at its addptr
    lines = base.splitlines()
    start = next(i for i, s in enumerate(lines) if "%t = tt.addptr %TARGET" in s)
    block = lines[start:start + 5]
    assert "arith.extf %x_t_8" in block[-1]
    # (a copy: the block's values are the loop body's own, and the use after the loop still reads the
    # block after it; moved, that use would read a value of the loop's region, which the parser refuses)
    y = next(i for i, s in enumerate(lines) if "scf.yield %m_new_17, %d_25" in s)
    inloop = "\n".join(lines[:y] + block + lines[y:])
    _refused(inloop, "%x_t = tt.addptr", "after the column loop only")


HEAD = """kernel g
input T : {idx}[64]
carry m : f32[64] = -inf {{output = none}}
loop {{
  x  = load : bf16[64,128] @smem
  xc = convert x : f32[64,128]
  mn = rowmax xc, m : f32[64]
  yield m = mn
}}
epilogue {{
  xt = gather {src}, T : {res}
  y  = convert xt : f32[64]
  output out = y
}}
"""


def test_the_tir_gather_is_checked():
    g = parse_tir(HEAD.format(idx="i32", src="x", res="bf16[64]"))
    assert [op.opcode for op in g.epilogue.ops] == ["gather", "convert"]
    assert "xt = gather x, T : bf16[64]" in print_tir(g)
    parse_tir(HEAD.format(idx="i64", src="x", res="bf16[64]"))
    for idx, src, res, match in (("i32", "xc", "bf16[64]", "a gather reads the tensor of a load of the loop"),
                                 ("i32", "m", "bf16[64]", "a gather reads the tensor of a load of the loop"),
                                 ("f32", "x", "bf16[64]", "one i32 or i64 column a row"),
                                 ("i32", "x", "f32[64]", r"gives bf16\[64\]")):
        with pytest.raises(InputError, match=match) as err:
            parse_tir(HEAD.format(idx=idx, src=src, res=res))
        assert err.value.diagnostics[0].span.line == 11, (idx, src, res)


def test_a_gather_in_the_loop_is_refused_at_its_line():
    text = HEAD.format(idx="i32", src="x", res="bf16[64]").replace("  yield m = mn", "  g  = gather x, T : bf16[64]\n  yield m = mn")
    with pytest.raises(InputError, match="gather runs in the epilogue only") as err:
        parse_tir(text)
    assert err.value.diagnostics[0].span.line == 8


def _binding(tmp_path, gpu: str):
    from twill.emit import build_model, emit_cuda
    from twill.emit.binding import binding_files
    machine = load_machine(gpu)
    graph = _import(DATA / f"heldout7/t36/prepipe/xent_scalar_{'sm100' if gpu == 'b200' else 'sm90'}.ttgir")
    schedule = solve(graph, machine, SolveOptions(time_limit=10))
    files = binding_files(build_model(schedule, machine), str(tmp_path / f"xent_{gpu}.cu"))
    for path, text in files.items():
        Path(path).write_text(text)
    spec = importlib.util.spec_from_file_location(f"xent_{gpu}", tmp_path / f"xent_{gpu}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return schedule, machine, mod, emit_cuda(schedule, machine)


@pytest.mark.parametrize("gpu", ["h200", "b200"])
def test_the_binding_takes_the_triton_arguments_and_gathers_per_row(tmp_path, gpu):
    _, _, mod, cu = _binding(tmp_path, gpu)
    assert "int x_cols;" in cu and "const __nv_bfloat16* x;" in cu and "args.x = p.x;" in cu
    assert re.search(r"twill::gather_rows\(x_t_ep, TARGET_ep, args\.x \+", cu)
    # the gather indexes with the strides x's tensor map is encoded with (a row pitch), checks the index against V
    assert re.search(r"gather_rows\(x_t_ep, TARGET_ep, args\.x \+ static_cast<size_t>\([^;]*\) \* args\.x_bs \+ "
                     r"static_cast<size_t>\([^;]*\) \* args\.x_rs, [^;]*, args\.x_cols, args\.x_rs, ", cu)
    assert "args.x_rs = x_rs;  args.x_bs = x_bs;" in cu
    import inspect
    assert list(inspect.signature(mod.xent_scalar_kernel).parameters)[:5] == ["LOGITS", "TARGET", "LOSS", "stride_row", "V"]
    M = mod.Meta
    plan = mod.resolve(mod.SPEC, {"LOGITS": M((1000, 32000), "bfloat16", "cuda:0", True, 0),
                                  "TARGET": M((1000,), "int32", "cuda:0", True, 0), "LOSS": None}, sizes={"V": 32000})
    assert plan["loop_extent"] == 32000
    # GPT-2's vocabulary: bf16 rows of 100514 bytes, staged into rows of 50264 (the gather reads them with that pitch)
    plan = mod.resolve(mod.SPEC, {"LOGITS": M((1000, 50257), "bfloat16", "cuda:0", True, 0),
                                  "TARGET": M((1000,), "int32", "cuda:0", True, 0), "LOSS": None}, sizes={"V": 50257})
    assert plan["loop_extent"] == 50257 and plan["layouts"][1] == ("stage", 50264, 50264, 1000 * 50264)
    with pytest.raises(mod.ArgumentError, match="TARGET: expected torch.int32"):
        mod.resolve(mod.SPEC, {"LOGITS": M((1000, 32000), "bfloat16", "cuda:0", True, 0),
                               "TARGET": M((1000,), "int64", "cuda:0", True, 0), "LOSS": None})


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
def test_the_gather_compiles_clean_sm90(tmp_path):
    schedule, machine, _, _ = _binding(tmp_path, "h200")
    _, rc, err = emitted_and_built(schedule, machine, tmp_path / "xent.cu")
    assert rc == 0, err[-2000:]
    assert {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)} <= {0}, err[-2000:]


@pytest.mark.extended
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
def test_the_gathers_binding_builds_with_its_strides(tmp_path):
    """The binding's own build (nvcc -shared: host side, entry and kernel) of the cross-entropy, whose gather reads
    the logits with their map's row pitch."""
    _, _, mod, cu = _binding(tmp_path, "h200")
    (tmp_path / "xent_h200.cu").write_text(cu)
    so = mod.build_library(str(tmp_path / "cache"))
    assert mod.spills(Path(so + ".log").read_text()) == []
