"""A partial last tile along a grid axis (twill/emit/partial.py): M or N that is not a multiple of the
tile. Which kernels take one (no op reduces along the axis; not the causal query axis), what the
emitted file and the binding say, and that the clipped stores and reads compile for sm_90a and sm_100a.
The numbers themselves are checked on a GPU (tests/test_gpu.py, bench/heldout/run.py)."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from conftest import nvcc, nvcc_compile
from twill.emit import build_model, emit_cuda
from twill.emit.cuda import Renderer
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.tir import load_tir, parse_tir

HERE = Path(__file__).parent
ROOT = HERE.parent
GOLDEN = HERE / "golden"


def _schedule(path_or_text, gpu: str):
    graph = load_tir(path_or_text) if isinstance(path_or_text, Path) else parse_tir(path_or_text, "p.tir")
    machine = load_machine(gpu)
    return solve(graph, machine, SolveOptions()), machine


def _partial(path_or_text, gpu: str = "h100") -> dict[str, str]:
    s, machine = _schedule(path_or_text, gpu)
    return Renderer(build_model(s, machine)).partial


def test_a_gemm_takes_a_partial_last_tile_along_both_axes():
    assert _partial(ROOT / "examples" / "gemm_hopper.tir") == {"m": "", "n": ""}


def _stored_partial(path: Path, gpu: str) -> dict[str, str]:
    """As _partial, from the examples' schedule stored in tests/data (the same solve; CI's time)."""
    from twill.schedule import Schedule
    return Renderer(build_model(Schedule.from_json(path.read_text()), load_machine(gpu))).partial


def test_attention_takes_partial_query_tiles_but_not_when_causal():
    assert _stored_partial(HERE / "data" / "emit" / "attention_fwd_hopper.h100.json", "h100")["m"] == ""
    why = _stored_partial(HERE / "data" / "causal" / "attention_fwd_causal_hopper.h200.json", "h200")["m"]
    assert "causal" in why


def test_a_row_sum_across_n_in_the_epilogue_refuses_a_partial_n():
    """gemm_ep's epilogue writes rowsums = rowsum y: padded columns would enter the sums."""
    why = _partial(HERE / "data" / "epilogue" / "gemm_ep.tir")
    assert why["m"] == ""
    assert re.fullmatch(r"op 'rs' reduces along N, so padded elements would enter its result", why["n"]), why["n"]


def _module(name: str, directory: Path):
    spec = importlib.util.spec_from_file_location("binding_" + re.sub(r"\W", "_", name), directory / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _meta(mod, shape):
    return mod.Meta(tuple(shape), "float16", "cuda:0", True, 1 << 20)


def test_the_binding_takes_a_ragged_m_and_n_and_sizes_outputs_to_them():
    mod = _module("gemm_hopper.h100", GOLDEN / "emit")
    assert mod.SPEC["partial"] == {"m": "", "n": ""}
    plan = mod.resolve(mod.SPEC, {"a": _meta(mod, (1000, 512)), "b": _meta(mod, (512, 1096))})
    assert (plan["tiles_m"], plan["tiles_n"], plan["m_extent"], plan["n_extent"]) == (8, 5, 1000, 1096)
    assert plan["shapes"]["acc"] == (1000, 1096)
    whole = mod.resolve(mod.SPEC, {"a": _meta(mod, (1024, 512)), "b": _meta(mod, (512, 1280))})
    assert (whole["m_extent"], whole["n_extent"]) == (0, 0)
    with pytest.raises(mod.ArgumentError, match=r"^acc: gives M = 1024, but a gives M = 1000$"):
        mod.resolve(mod.SPEC, {"a": _meta(mod, (1000, 512)), "b": _meta(mod, (512, 1096)),
                               "acc": _meta(mod, (1024, 1096))})


def test_the_binding_of_a_causal_kernel_refuses_a_ragged_m_with_the_reason():
    mod = _module("attention_fwd_causal_hopper.h200", GOLDEN / "causal")
    assert "causal" in mod.SPEC["partial"]["m"]
    q = (2, 1000, 128)
    with pytest.raises(mod.ArgumentError, match=r"M = 1000 is not a positive multiple of 128 .*no partial last "
                                                r"tile: .*causal"):
        mod.resolve(mod.SPEC, {"q": _meta(mod, q), "k": _meta(mod, q), "v": _meta(mod, q)})


def test_a_contraction_along_the_grid_refuses_it():
    """The backward's grid walks key tiles, and dQ = dS K contracts over the keys: padded keys would
    enter dQ (their K rows are zeros, but dS past the end is not known to be finite), so the binding
    refuses a partial key tile and says why."""
    mod = _module("attention_bwd_hopper.h100", GOLDEN / "emit")
    assert mod.SPEC["partial"]["m"] == "op 'dq' reduces along M, so padded elements would enter its result"
    q, k = (4, 1024, 128), (4, 500, 128)
    given = {"k": _meta(mod, k), "v": _meta(mod, k), "q": _meta(mod, q), "do": _meta(mod, q),
             "lse": mod.Meta((4, 1024), "float32", "cuda:0", True, 1 << 20),
             "dlt": mod.Meta((4, 1024), "float32", "cuda:0", True, 1 << 20)}
    with pytest.raises(mod.ArgumentError, match=r"^k: M = 500 is not a positive multiple of 128 .*op 'dq' reduces"):
        mod.resolve(mod.SPEC, given)


def test_launch_refuses_an_extent_outside_the_last_tile():
    src = (GOLDEN / "emit" / "gemm_hopper.h100.cu").read_text()
    assert "constexpr bool kPartialM = true;" in src and "constexpr bool kPartialN = true;" in src
    assert ("if (p.m_extent != 0 && (p.m_extent <= (p.tiles_m - 1) * p.a0_rows_step || p.m_extent > p.tiles_m * "
            "p.a0_rows_step)) return cudaErrorInvalidValue;") in src
    # every tensor map along M is encoded with the caller's extent
    assert src.count("twill::grid_extent(p.m_extent, p.tiles_m,") >= 4


# -- the clipped stores and reads ----------------------------------------------------------------------

CLIPPED = [  # (graph, gpu): kernels whose own stores or register reads follow a partial tile
    # (the attention goldens' row vectors, frag_to_buffer_clip, compile in tests/test_emit.py)
    ("tests/data/tir/gemm_k16n32.tir", "h100"),  # the threads' stores of a 2-CTA GEMM (frag_to_global_clip)
    ("tests/data/epilogue/gemm_ep.tir", "h100"),  # per-row scale and rowsums along M (Rows)
    ("tests/data/epilogue/gemm_ep.tir", "b200"),
]


@pytest.mark.slow
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found")
@pytest.mark.parametrize("graph, gpu", CLIPPED)
def test_clipped_stores_and_reads_compile(graph, gpu, tmp_path):
    s, machine = _schedule(ROOT / graph, gpu)
    src = emit_cuda(s, machine)
    body = src[src.index("// ---- kernel parameters"):]
    assert re.search(r"twill::(frag_to_global|frag_add_global|frag_to_buffer|global_to_frag)_clip\(", body)
    path = tmp_path / "k.cu"
    path.write_text(src)
    arch = machine.arch
    rc, err = nvcc_compile(path, ["-std=c++17", f"-gencode=arch=compute_{arch[3:]},code={arch}", "-Xptxas", "-v"])
    assert rc == 0, err[-3000:]
    assert not re.search(r"[1-9]\d* bytes spill (stores|loads)", err), err[-2000:]
