"""`twill emit-cuda --binding torch`: the generated binding (twill/emit/binding.py) without a GPU.

The golden K.py and K_entry.cu beside each golden kernel (tests/golden/emit) are what
tests/test_gpu.py and bench/gpu_bench.py run on the GPU; here: they are what emit-cuda writes
today, their argument mapping and shape checks (plain Python, no torch), and their entry point
compiling with nvcc (-shared -fPIC) for sm_90a and sm_100a.
"""
from __future__ import annotations

import ctypes
import importlib.util
import inspect
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from twill.emit import build_model
from twill.emit.binding import binding_files
from twill.machine import load_machine
from twill.schedule import Schedule
from twill_cli.main import main

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "emit"
GOLDEN = ROOT / "tests" / "golden" / "emit"

# the fixtures whose bindings are golden: those tests/test_gpu.py and the bench run, and the
# Blackwell forward (compiled, not run: no B200 here)
BINDINGS = ("gemm_hopper.h100", "gemm_3x64.h100", "gemm_bf16.h100", "gemm_k16n32.h100", "gemm_k32n16.h100",
            "attention_fwd_hopper.h100", "attention_fwd_hopper.h200", "attention_fwd_hopper_k192.h100",
            "attention_fwd_d64.h100", "attention_bwd_hopper.h100", "attention_fwd_blackwell.b200",
            "triton_matmul_sm90.h100", "triton_attn_fwd_tma_sm90.h100", "triton39_mm_acol.h100",
            "triton39_mm_bcol.h100", "gemm_fp8_e4m3.h100", "triton_gemm_fp8_sm90.h100", "gemm_i8.h100",
            "attention_fwd_fp8_hopper.h200", "heldout_biased_softmax.h200", "heldout_attn_exp.h200")


def schedule(name: str, edit=None) -> Schedule:
    data = json.loads((DATA / f"{name}.json").read_text())
    if edit:
        data["graph"] = edit(data["graph"])
    return Schedule.from_json(json.dumps(data))


def files(name: str, directory: Path = GOLDEN, edit=None) -> dict[str, str]:
    s = schedule(name, edit)
    return binding_files(build_model(s, load_machine(s.machine)), str(directory / f"{name}.cu"))


def module(name: str, directory: Path = GOLDEN):
    ident = re.sub(r"\W", "_", name)
    spec = importlib.util.spec_from_file_location(f"binding_{ident}", directory / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def meta(mod, shape, dtype="float16", device="cuda:0", contiguous=True, ptr=1 << 20):
    return mod.Meta(tuple(shape), dtype, device, contiguous, ptr)


def arguments(mod) -> list[str]:
    return [p.name for p in inspect.signature(mod.run).parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD]


def outputs(mod) -> list[str]:
    return [a["name"] for a in mod.SPEC["args"] if a["output"]]


# -- the generated files ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", BINDINGS)
def test_binding_matches_golden(name, golden):
    for path, text in files(name).items():
        golden(f"emit/{Path(path).name}", text)


def test_binding_is_deterministic_and_names_its_kernel_file(tmp_path):
    a, b = files("attention_fwd_hopper.h100", tmp_path), files("attention_fwd_hopper.h100", tmp_path)
    assert a == b
    entry = a[str(tmp_path / "attention_fwd_hopper.h100_entry.cu")]
    assert '#include "attention_fwd_hopper.h100.cu"' in entry  # beside it, whatever the folder
    assert str(tmp_path) not in "".join(a.values())  # no absolute path: the files can move together


def test_the_module_imports_without_torch():
    """The generated module imports no torch at import time (CI has none); calling it would."""
    text = (GOLDEN / "gemm_hopper.h100.py").read_text()
    assert not re.search(r"^import torch|^from torch", text, re.M)
    mod = module("gemm_hopper.h100")
    assert mod.SPEC["kernel"] == "gemm_hopper" and mod.run is mod.gemm_hopper


# -- argument mapping: sub-tiles become the user's one tensor --------------------------------------------

@pytest.mark.parametrize("name", sorted(p.stem for p in DATA.glob("*.json")))
def test_every_global_tensor_is_behind_exactly_one_argument(name):
    """For every stored schedule: each Problem pointer of the kernel is set from exactly one user
    tensor, the parts of one tensor tile it without overlap (offsets 0, rows, 2 rows, ... of a
    step of parts x rows), and the module is valid Python."""
    from twill.emit.binding import arguments
    from twill.emit.cuda import Renderer
    s = schedule(name)
    r = Renderer(build_model(s, load_machine(s.machine)))
    args = arguments(r)
    fields = [p.field for a in args for p in a.parts]
    assert sorted(fields) == sorted(t.name for t in r.m.tensors)
    for a in args:
        if len(a.parts) > 1:
            rows = a.parts[1].offset
            assert [p.offset for p in a.parts] == [rows * i for i in range(len(a.parts))]
            assert {p.step for p in a.parts} == {rows * len(a.parts)}
    assert len({a.name for a in args}) == len(args)
    for path, text in files(name).items():
        if path.endswith(".py"):
            compile(text, path, "exec")


def test_fa3_halves_are_one_q_and_one_output_each():
    """q0/q1 (the 64-row halves of each 128-row tile) are one Q [*batch, M, 128]; acc0/acc1, m0/m1
    and l0/l1 one O, m and l; the entry point places the halves by step 128 and offsets 0, 64."""
    mod = module("attention_fwd_hopper.h100")
    assert arguments(mod) == ["q", "k", "v"]
    assert outputs(mod) == ["m", "l", "acc"]
    entry = (GOLDEN / "attention_fwd_hopper.h100_entry.cu").read_text()
    for field, label in (("q", "rows"), ("out_acc", "rows"), ("out_m", "cols"), ("out_l", "cols")):
        assert f"p.{field}0_{label}_step = 128;" in entry and f"p.{field}1_{label}_offset = 64;" in entry
    plan = mod.resolve(mod.SPEC, {n: meta(mod, (2, 3, 512 if n == "q" else 777, 128)) for n in ("q", "k", "v")})
    assert (plan["tiles_m"], plan["tiles_n"], plan["batch"], plan["loop_extent"], plan["iters"]) == (4, 1, 6, 777, 7)
    assert plan["shapes"]["acc"] == (2, 3, 512, 128) and plan["shapes"]["m"] == (2, 3, 512)


def test_three_parts_stack_by_a_step_of_three():
    mod = module("gemm_3x64.h100")
    assert arguments(mod) == ["a", "b"] and outputs(mod) == ["acc"]
    entry = (GOLDEN / "gemm_3x64.h100_entry.cu").read_text()
    assert "p.a2_rows_step = 192;" in entry and "p.a2_rows_offset = 128;" in entry
    plan = mod.resolve(mod.SPEC, {"a": meta(mod, (384, 640)), "b": meta(mod, (640, 512))})
    assert (plan["tiles_m"], plan["tiles_n"], plan["iters"]) == (2, 2, 10)
    assert (plan["m_extent"], plan["n_extent"]) == (0, 0)  # whole tiles
    # M = 256 ends inside the second 192-row tile: two tiles, the last partial, and acc is 256 rows
    plan = mod.resolve(mod.SPEC, {"a": meta(mod, (256, 640)), "b": meta(mod, (640, 504))})
    assert (plan["tiles_m"], plan["tiles_n"], plan["m_extent"], plan["n_extent"]) == (2, 2, 256, 504)
    assert plan["shapes"]["acc"] == (256, 504)
    with pytest.raises(mod.ArgumentError, match=r"a: M = 0 is not a positive multiple of 192"):
        mod.resolve(mod.SPEC, {"a": meta(mod, (0, 640)), "b": meta(mod, (640, 512))})


def test_parts_that_are_not_numbered_in_a_row_stay_apart():
    """q0 and q2 are not the parts of one Q (no q1): each is its own argument, one tile per CTA."""
    mod_files = files("attention_fwd_hopper.h100", edit=lambda g: re.sub(r"\bq1\b", "q2", g))
    text = next(t for p, t in mod_files.items() if p.endswith(".py"))
    assert "def attention_fwd_hopper(q0, q2, k, v, *, m=None, l=None, acc=None," in text


def test_parts_whose_stem_names_a_value_stay_apart():
    """q0, q1 renamed k0, k1: the stem k is the graph's K load, so they are not one tensor k."""
    out = files("attention_fwd_hopper.h100", edit=lambda g: re.sub(r"\bq([01])\b", r"k\1", g))
    text = next(t for p, t in out.items() if p.endswith(".py"))
    assert "def attention_fwd_hopper(k0, k1, k, v, *," in text


def test_names_that_python_or_the_binding_reserve_get_an_underscore():
    """Parts named lambda0, lambda1 become `lambda_` (a Python keyword); stream0, stream1 `stream_`
    (the binding's own keyword)."""
    for stem, arg in (("lambda", "lambda_"), ("stream", "stream_")):
        out = files("attention_fwd_hopper.h100", edit=lambda g: re.sub(r"\bq([01])\b", stem + r"\1", g))
        text = next(t for p, t in out.items() if p.endswith(".py"))
        assert f"def attention_fwd_hopper({arg}, k, v, *," in text
        compile(text, "binding.py", "exec")  # valid Python


def test_imported_triton_kernels_take_the_graphs_names():
    """The importer records no Triton argument names in the graph, so an imported kernel's
    arguments are its .tir values: the matmul's a, b -> acc, the attention's q, k, v -> m_i, l_i, acc;
    a column-major A is taken as it lies in memory (K x M: [L, M])."""
    mm = module("triton_matmul_sm90.h100")
    assert arguments(mm) == ["a", "b"] and outputs(mm) == ["acc"]
    attn = module("triton_attn_fwd_tma_sm90.h100")
    assert arguments(attn) == ["q", "k", "v"] and outputs(attn) == ["m_i", "l_i", "acc"]
    acol = module("triton39_mm_acol.h100")
    assert acol.layout(acol.SPEC["args"][0]) == "[*batch, L, M]"


def test_a_store_the_ctas_add_into_is_zeroed():
    mod = module("attention_bwd_hopper.h100")
    assert arguments(mod) == ["k", "v", "q", "do", "lse", "dlt"] and outputs(mod) == ["dq", "dk", "dv"]
    zero = {a["name"]: a["zero"] for a in mod.SPEC["args"]}
    assert zero["dq"] and not zero["dk"] and not zero["dv"]


# -- shape, dtype, device and layout checks ---------------------------------------------------------------

def fa3(mod, **change):
    given = {"q": meta(mod, (4, 512, 128)), "k": meta(mod, (4, 1024, 128)), "v": meta(mod, (4, 1024, 128))}
    given.update({k: (v if v is None or isinstance(v, mod.Meta) else meta(mod, v)) for k, v in change.items()})
    return mod.resolve(mod.SPEC, given)


@pytest.mark.parametrize("change, message", [
    (dict(q=("cpu", "float32")), r"^q: expected torch\.float16 on a CUDA device, got torch\.float32 on cpu$"),
    (dict(v="cuda:1"), r"^v: on cuda:1, but the other tensors are on cuda:0$"),
    (dict(q=(4, 500, 128), acc=(4, 512, 128)), r"^acc: gives M = 512, but q gives M = 500$"),
    (dict(q=(4, 512, 64)), r"^q: expected shape \[\*batch, M, 128\], got \[4, 512, 64\]"),
    (dict(k=(2, 2, 1024, 128)), r"^k: batch dimensions \[2, 2\] differ from q's \[4\]"),
    (dict(v=(4, 1000, 128)), r"^v: gives L = 1000, but k gives L = 1024$"),
    (dict(k=(4, 100, 128), v=(4, 100, 128)), r"^v: the loop runs 1 iteration\(s\); this kernel's pipeline needs "
                                             r"at least 2 \(L >= 129\)$"),
    (dict(v=None), r"^v: missing \(torch\.float16 \[\*batch, L, N\]\)$"),
    (dict(acc=(4, 256, 128)), r"^acc: gives M = 256, but q gives M = 512$"),
])
def test_bad_arguments_are_named(change, message):
    mod = module("attention_fwd_hopper.h100")
    base = {"q": (4, 512, 128), "k": (4, 1024, 128), "v": (4, 1024, 128), "acc": None}
    kinds = {"acc": "float16"}
    out = {}
    for name, how in change.items():
        shape = base[name] or (4, 512, 128)
        if how is None:
            out[name] = None
        elif how == "cuda:1":
            out[name] = meta(mod, shape, device="cuda:1")
        elif isinstance(how[0], str):
            out[name] = meta(mod, shape, device=how[0], dtype=how[1])
        else:
            out[name] = meta(mod, how, dtype=kinds.get(name, "float16"))
    with pytest.raises(mod.ArgumentError, match=message):
        fa3(mod, **out)


def test_a_partial_last_tile_where_the_kernel_takes_none_is_refused():
    """Where the kernel refuses a partial last tile (kRagged false, for the reason its file gives),
    a loop extent off the tile is refused before any launch, with that reason."""
    refusing = [n for n in BINDINGS if not module(n).SPEC["ragged"] and module(n).SPEC["loop_step"]]
    assert refusing, "no golden binding refuses a partial tile"
    mod = module(refusing[0])
    ins = [a for a in mod.SPEC["args"] if not a["output"]]
    step = mod.SPEC["loop_step"]
    given = {}
    for a in ins:
        shape = [step * 8 + 1 if ax == "loop" else size for ax, size in a["dims"]]
        given[a["name"]] = meta(mod, shape, dtype=a["dtype"])
    with pytest.raises(mod.ArgumentError, match=f"is not a multiple of {step}, and this kernel takes no partial last "
                                                f"tile \\({re.escape(mod.SPEC['ragged_why'])}\\)"):
        mod.resolve(mod.SPEC, given)


def test_tma_rows_off_16_byte_multiples_are_staged():
    """The backward's lse [*batch, L] is read by TMA: 777 f32 rows are 3108 bytes, not a multiple of 16: staged
    into rows of 780 (tests/test_pitch.py has the rest)."""
    mod = module("attention_bwd_hopper.h100")
    shapes = {"k": (2, 256, 128), "v": (2, 256, 128), "q": (2, 777, 128), "do": (2, 777, 128), "lse": (2, 777),
              "dlt": (2, 777)}
    given = {n: meta(mod, s, dtype="float32" if n in ("lse", "dlt") else "float16") for n, s in shapes.items()}
    assert mod.resolve(mod.SPEC, given)["layouts"][4] == ("stage", 780, 780, 780)
    ok = {n: meta(mod, tuple(776 if i == 1 and n not in ("k", "v") else d for i, d in enumerate(m.shape)),
                  dtype=m.dtype) for n, m in given.items()}
    plan = mod.resolve(mod.SPEC, ok)
    assert (plan["tiles_m"], plan["loop_extent"], plan["iters"]) == (2, 776, 13)
    assert plan["shapes"]["dq"] == (2, 776, 128) and plan["shapes"]["dk"] == (2, 256, 128)


# -- the command line -----------------------------------------------------------------------------------

def test_cli_writes_the_binding_beside_the_kernel(tmp_path):
    out = tmp_path / "gemm.cu"
    result = CliRunner().invoke(main, ["emit-cuda", str(DATA / "gemm_hopper.h100.json"), "-o", str(out),
                                       "--binding", "torch"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gemm.cu", "gemm.py", "gemm_entry.cu"]
    assert '#include "gemm.cu"' in (tmp_path / "gemm_entry.cu").read_text()
    again = CliRunner().invoke(main, ["emit-cuda", str(DATA / "gemm_hopper.h100.json"), "-o", str(out),
                                      "--binding", "torch"])
    assert again.output.count("unchanged") == 3


def test_cli_binding_needs_an_output_file():
    result = CliRunner().invoke(main, ["emit-cuda", str(DATA / "gemm_hopper.h100.json"), "--binding", "torch"])
    assert result.exit_code == 2 and "needs -o K.cu" in result.output


# -- nvcc ------------------------------------------------------------------------------------------------

def nvcc() -> str | None:
    return next((c for c in (shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc")
                 if c and os.path.exists(c)), None)


needs_nvcc = pytest.mark.skipif(nvcc() is None, reason="nvcc not found")


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("name", ["gemm_k16n32.h100",  # (sm_100a: 12 s of CI; test_fixup builds one there)
                                  pytest.param("attention_fwd_blackwell.b200", marks=pytest.mark.extended)])
def test_entry_builds_into_a_library_cached_by_content(name, tmp_path):
    """The binding's own build (nvcc -shared -Xcompiler -fPIC, sm_90a or sm_100a) gives a library
    that loads without a GPU and exports the entry point; a second build is the cached one, and a
    changed kernel file is built afresh."""
    for path, text in files(name, tmp_path).items():
        Path(path).write_text(text)
    shutil.copy(GOLDEN / f"{name}.cu", tmp_path / f"{name}.cu")
    mod = module(name, tmp_path)
    cache = tmp_path / "cache"
    so = mod.build_library(str(cache))
    assert mod.spills(Path(so + ".log").read_text()) == []
    lib = ctypes.CDLL(so)
    lib.twill_error_string.restype = ctypes.c_char_p
    assert lib.twill_error_string(1).decode() == "invalid argument"  # cudaErrorInvalidValue
    assert hasattr(lib, "twill_launch")
    assert mod.build_library(str(cache)) == so  # cached: no second nvcc run
    with open(tmp_path / f"{name}.cu", "a") as f:
        f.write("// changed\n")
    assert mod.build_library(str(cache)) != so


def test_a_loop_no_input_runs_along_takes_iters(tmp_path):
    """fig1 loads nothing: its loop count is the `iters` keyword, which the function then takes."""
    for path, text in files("fig1.h100", tmp_path).items():
        Path(path).write_text(text)
    mod = module("fig1.h100", tmp_path)
    assert "iters" in inspect.signature(mod.run).parameters
    given = {n: meta(mod, (3, 128, 64) if n == "q" else (3, 64, 64)) for n in ("q", "k", "v")}
    with pytest.raises(mod.ArgumentError, match=r"^fig1: no argument gives the loop's extent: pass iters=$"):
        mod.resolve(mod.SPEC, given)
    plan = mod.resolve(mod.SPEC, given, iters=8)
    assert (plan["tiles_m"], plan["tiles_n"], plan["iters"], plan["loop_extent"], plan["batch"]) == (2, 1, 8, 0, 3)
    assert plan["shapes"]["o"] == (3, 128, 64)


# -- knobs the graph computes from the kernel's arguments (twill.knobs) -------------------------------------

LOG2E = 1.4426950408889634


def _with_scale_knob(text: str) -> str:
    """heldout_biased_softmax's graph as an import of a kernel with a softmax scale argument records it."""
    return text.replace("argument N_CTX\n", "argument N_CTX\nargument sm_scale\n"
                                            f"knob exp2_scale = sm_scale * {LOG2E!r}\n")


def knob_module(tmp_path):
    for path, text in files("heldout_biased_softmax.h200", tmp_path, edit=_with_scale_knob).items():
        Path(path).write_text(text)
    return module("heldout_biased_softmax.h200", tmp_path)


def test_a_knob_is_computed_from_the_kernels_own_arguments(tmp_path, monkeypatch):
    """`knob exp2_scale = sm_scale * log2 e`: the binding takes sm_scale where the Triton kernel does
    and passes exp2_scale = sm_scale * log2 e to the launch; an explicit exp2_scale overrides it;
    without either the call is refused, naming the argument."""
    mod = knob_module(tmp_path)
    assert arguments(mod) == ["Q", "K", "V", "BIAS", "O", "N_CTX", "sm_scale"]
    assert inspect.signature(mod.run).parameters["exp2_scale"].default is None
    seen = []
    monkeypatch.setattr(mod, "call", lambda spec, here, tensors, **kw: seen.append(kw))
    mod.run("q", "k", "v", "bias", None, 1000, 0.125)
    mod.run("q", "k", "v", "bias", None, 1000, 0.125, exp2_scale=3.0)
    mod.run("q", "k", "v", "bias", sm_scale=0.5)
    assert [kw["exp2_scale"] for kw in seen] == [0.125 * LOG2E, 3.0, 0.5 * LOG2E]
    with pytest.raises(mod.ArgumentError, match=r"^sm_scale: the kernel's exp2_scale is sm_scale \* 1\.44"):
        mod.run("q", "k", "v", "bias")
    assert mod.run("q", "k", "v", "bias", exp2_scale=2.0) is None and seen[-1]["exp2_scale"] == 2.0
    text = (tmp_path / "heldout_biased_softmax.h200.py").read_text()
    assert "sm_scale: a Python float (the Triton kernel's argument, read by exp2_scale = sm_scale * " in text


def test_a_graph_without_a_knob_line_keeps_the_keyword_at_one():
    """A hand-written graph (no `knob` line): exp2_scale is the caller's keyword, 1.0 by default."""
    mod = module("attention_fwd_hopper.h100")
    assert inspect.signature(mod.run).parameters["exp2_scale"].default == 1.0
