"""A load's view of its argument (twill/ttgir/addresses.py): a column stride and offset, and a row
that advances once per D iterations. W4A16 reads its scales and zero points with a stride of 2 from
one argument each (`SCALES + 2 * rj`, `+ 1`), a row per GROUP_K / BLOCK_K = 2 iterations; the graph
says so, the emitted kernel loads the whole row and reads every second element, and the binding
takes the Triton kernel's own SCALES [K / GROUP_K, N]."""
from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path

import pytest

from conftest import nvcc, nvcc_compile
from twill.emit import build_model, emit_cuda
from twill.emit.binding import binding_files
from twill.errors import InputError
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.split import split_rows
from twill.tir import parse_tir, print_tir
from twill.ttgir import import_ttgir, load_ttgir

DATA = Path(__file__).parent / "data" / "ttgir"
FORMS = ["corpus/prepipe/gemm_w4a16_sm90.ttgir", "corpus/after/gemm_w4a16_sm90.ttgir",
         "corpus/prepipe/gemm_w4a16_sm100.ttgir", "corpus/after/gemm_w4a16_sm100.ttgir",
         "triton36/prepipe/gemm_w4a16_sm90.ttgir", "triton36/after/gemm_w4a16_sm90.ttgir"]
BASE = DATA / "triton36" / "prepipe" / "gemm_w4a16_sm90.ttgir"


def _loads(g) -> dict:
    return {op.name: dict(op.attrs) for op in g.ops if op.opcode == "load"}


@pytest.mark.parametrize("path", FORMS)
def test_w4a16_reads_even_and_odd_columns_of_one_argument(path):
    g, _ = load_ttgir(DATA / path)
    loads = _loads(g)
    for even, odd in (("s_even", "s_odd"), ("z_even", "z_odd")):
        assert loads[even] == {"col_stride": 2, "col_offset": 0, "iter_div": 2}
        assert loads[odd] == {"col_stride": 2, "col_offset": 1, "iter_div": 2}
    assert not loads["packed"] and not [v for k, v in loads.items() if k.startswith("a") and v]
    assert dict(g.arguments)["SCALES"] == "s_even" and dict(g.arguments)["ZEROS"] == "z_even"
    assert g.also_fed == (("SCALES", "s_odd"), ("ZEROS", "z_odd"))
    text = print_tir(g)
    assert "argument SCALES = s_even, s_odd\n" in text and "argument ZEROS  = z_even, z_odd\n" in text
    assert parse_tir(text, "w.tir") == g


def _variant(**subs) -> str:
    text = BASE.read_text()
    for old, new in subs.items():
        assert old in text
        text = text.replace(old, new)
    return text


STRIDE = "%cst_2 = arith.constant dense<2> : tensor<64xi32"
OFFSET = "%cst_1 = arith.constant dense<1> : tensor<64xi32"
GROUP = "%g = arith.divsi %acc_odd_63, %c128_i32"


def test_the_stride_offset_and_group_are_read_not_assumed():
    text = _variant(**{STRIDE: STRIDE.replace("<2>", "<4>"), OFFSET: OFFSET.replace("<1>", "<3>"),
                       GROUP: GROUP.replace("%c128_i32", "%c256_i32"),
                       "%c128_i32 = arith.constant 128 : i32": "%c128_i32 = arith.constant 128 : i32\n"
                                                                 "    %c256_i32 = arith.constant 256 : i32"})
    g, _ = import_ttgir(text, "w4.ttgir")
    loads = _loads(g)
    assert loads["s_even"] == {"col_stride": 4, "col_offset": 0, "iter_div": 4}
    assert loads["z_odd"] == {"col_stride": 4, "col_offset": 3, "iter_div": 4}


def test_a_group_that_is_no_whole_number_of_iterations_is_an_error_at_the_load():
    text = _variant(**{GROUP: GROUP.replace("%c128_i32", "%c96_i32"),
                       "%c128_i32 = arith.constant 128 : i32": "%c128_i32 = arith.constant 128 : i32\n"
                                                                 "    %c96_i32 = arith.constant 96 : i32"})
    with pytest.raises(InputError) as err:
        import_ttgir(text, "w4.ttgir")
    d = err.value.diagnostics[0]
    assert "divided by 96, which is no whole number of iterations of step 64" in d.message
    assert text.split("\n")[d.span.line - 1].lstrip().startswith("%s_even_71 = tt.load")


def test_an_argument_feeds_several_graph_names_only_as_loads():
    g, _ = load_ttgir(BASE)
    text = print_tir(g).replace("argument SCALES = s_even, s_odd", "argument SCALES = s_even, w_even")
    with pytest.raises(InputError, match="feeds 'w_even' as well: an argument feeds several graph names only where"):
        parse_tir(text, "w.tir")
    text = print_tir(g).replace("argument ZEROS  = z_even, z_odd", "argument ZEROS  = z_even, s_odd")
    with pytest.raises(InputError, match="'s_odd' is fed by both 'SCALES' and 'ZEROS'"):
        parse_tir(text, "w.tir")


def _binding(tmp_path, path=BASE, gpu="h200"):
    machine = load_machine(gpu)
    graph, _ = load_ttgir(path)
    model = build_model(solve(split_rows(graph, 2) if gpu != "b200" else graph, machine, SolveOptions()), machine)
    written = binding_files(model, str(tmp_path / "w4.cu"))
    for p, text in written.items():
        Path(p).write_text(text)
    (tmp_path / "w4.cu").write_text(emit_cuda(model.schedule, machine))
    spec = importlib.util.spec_from_file_location("b_w4", tmp_path / "w4.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, written


def test_the_binding_takes_the_triton_kernels_scales_and_zeros(tmp_path):
    mod, written = _binding(tmp_path)
    params = [p.name for p in inspect.signature(mod.run).parameters.values() if p.kind == p.POSITIONAL_OR_KEYWORD]
    assert params == ["A", "QW", "SCALES", "ZEROS", "C", "M", "N", "K", "stride_am", "stride_qk", "stride_sg",
                      "stride_cm"]
    assert not {"s_odd", "z_odd"} & set(inspect.signature(mod.run).parameters)
    entry = next(t for p, t in written.items() if p.endswith("_entry.cu"))
    k = next(i for i, a in enumerate(mod.SPEC["args"]) if a["name"] == "SCALES")
    assert f"p.s_even = static_cast<decltype(p.s_even)>(a.tensors[{k}]);" in entry
    assert f"p.s_odd = static_cast<decltype(p.s_odd)>(a.tensors[{k}]);" in entry
    M_, N_, K_ = 256, 4096, 4096  # the corpus launch's shapes: uint8 QW [K, N/2], scales [K / 128, N]
    m = lambda shape, dtype="float16": mod.Meta(tuple(shape), dtype, "cuda:0", True, 1 << 20)  # noqa: E731
    given = {"A": m((M_, K_)), "QW": m((K_, N_ // 2), "uint8"), "SCALES": m((K_ // 128, N_)),
             "ZEROS": m((K_ // 128, N_)), "C": None}
    plan = mod.resolve(mod.SPEC, given)
    assert (plan["tiles_m"], plan["tiles_n"], plan["iters"]) == (2, 32, 64)
    assert plan["shapes"]["C"] == (M_, N_) and plan["shapes"]["SCALES"] == (K_ // 128, N_)
    with pytest.raises(mod.ArgumentError, match=r"^ZEROS: 64 rows, but the loop's 64 iterations read ceil\(I/2\) = 32"):
        mod.resolve(mod.SPEC, {**given, "ZEROS": m((K_ // 64, N_))})
    with pytest.raises(mod.ArgumentError, match=r"^QW: expected torch.int8"):
        mod.resolve(mod.SPEC, {**given, "QW": m((K_, N_ // 2), "int16")})


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
@pytest.mark.parametrize("path,gpu", [(BASE, "h200"), (DATA / "corpus" / "prepipe" / "gemm_w4a16_sm100.ttgir", "b200")])
def test_the_strided_loads_compile_as_one_row_box_read_every_second_element(tmp_path, path, gpu):
    mod, written = _binding(tmp_path, path, gpu)
    src = (tmp_path / "w4.cu").read_text()
    assert re.search(r"__half ld_s_odd\[\d+\]\[128\];", src)  # the whole row of both parities
    assert "twill::ColsView<64, __half, 2, 1> w_odd_arg2" in src and "twill::ColsView<64, __half, 2, 0>" in src
    assert "(it) / 2);" in src  # a row per two iterations
    arch = load_machine(gpu).arch
    rc, err = nvcc_compile(tmp_path / "w4_entry.cu", ["-std=c++17", f"-gencode=arch=compute_{arch[3:]},code={arch}",
                                                      "-Xptxas", "-v", "-Xcompiler", "-fPIC"])
    assert rc == 0, err[-2000:]
    assert {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)} <= {0}, err[-2000:]


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
def test_a_dequantized_tile_two_row_parts_read_is_staged_once(tmp_path):
    """Split in two row parts, W4A16's mmas read each dequantized B tile twice (a0 and a1 times
    w_even). Where one role issues both, it writes the tile to shared memory once per iteration,
    into one array, and the second mma reads it there: no second write, no second drain of the
    tensor core before it (roles.py, `_scratch_operands`)."""
    _binding(tmp_path)
    src = (tmp_path / "w4.cu").read_text()
    arrays = re.findall(r"__half (scratchb_\w+)\[\d+\];\s+// B operand of (.*)", src)
    readers = {a: r.split(", ") for a, r in arrays}
    assert sorted(len(r) for r in readers.values()) == [2, 2], arrays  # w_even and w_odd, two mmas each
    for array in readers:
        writes = len(re.findall(rf"frag_to_tile<__half, \d+, \d+>\(sm\.{array},", src))
        reads = len(re.findall(rf"desc_tile<__half, \d+, \d+, false>\(sm\.{array}\)", src))
        assert reads == 2 * writes, (array, writes, reads)
    arch = load_machine("h200").arch
    rc, err = nvcc_compile(tmp_path / "w4_entry.cu", ["-std=c++17", f"-gencode=arch=compute_{arch[3:]},code={arch}",
                                                      "-Xptxas", "-v", "-Xcompiler", "-fPIC"])
    assert rc == 0, err[-2000:]
    assert "wgmma" not in err or "serializ" not in err, err[-2000:]
