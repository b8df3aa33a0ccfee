"""TF32: Triton's tl.dot of fp32 tiles (input_precision="tf32", its default) imported, solved, emitted as wgmma
m64nNk8 .tf32 (sm_90a) and tcgen05.mma kind::tf32 (sm_100a), compiled; and an operand the tensor core reads
K-major only (TF32, fp8, int8) that the kernel loads MN-major, typed K-major with `{transposed = true}`
(twill/ttgir/kmajor.py), whose binding hands the kernel the caller's tensor's transpose, copied only where it
does not lie K-major (binding_runtime._layout; plain Python here, no torch, no GPU).

The held-out kernel is bench/heldout/kernels3.py's gemm_tf32 (A [M, K], B [K, N] row-major, fp32 C), its dumps
tests/data/ttgir/heldout3; its GPU check is bench/triton_notes/s39/tf32/run.sh.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from conftest import nvcc, nvcc_compile
from test_binding_cache import DType, Tensor
from twill.costs import bind
from twill.emit import build_model, emit_cuda
from twill.emit.binding import binding_files
from twill.errors import InputError
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.tir import parse_tir, print_tir
from twill.ttgir import load_ttgir
from twill.ttgir.kmajor import kmajor_loads
from twill.verify import verify

ROOT = Path(__file__).resolve().parent.parent
HELDOUT3 = ROOT / "tests" / "data" / "ttgir" / "heldout3"
# (form, dump, machine): one compile a target
DUMPS = {"sm_90a": ("t36/prepipe", "gemm_tf32_sm90", "h200"), "sm_100a": ("t39/after", "gemm_tf32_sm100", "b200")}
# what each target's kernel must issue: the instruction, its runtime call, a K step of 8 f32 (32 bytes of a row)
INSTRUCTIONS = {
    "sm_90a": ("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {", "twill::wgmma_m64n128k8_ss_f32(",
               "twill::desc_kmajor<float, 128, 32>(acc_new0_db, 0, 8 * kk)"),
    "sm_100a": ("tcgen05.mma.cta_group::1.kind::tf32 [%0], %1, %2, %3, p;", "twill::umma_ss_tf32(sm.tmem_base, ",
                "twill::desc_kmajor<float, 128, 32>(sm.ld_b[(tile.pos + j) % 2], 0, 8 * kk), "
                "twill::umma_idesc_tf32<128, 128>()"),
}


def _solved(arch: str):
    form, name, gpu = DUMPS[arch]
    machine = load_machine(gpu)
    graph, _ = load_ttgir(HELDOUT3 / form / f"{name}.ttgir", split_rows="auto")
    schedule = solve(graph, machine, SolveOptions())
    return graph, machine, schedule


@pytest.mark.parametrize("arch", sorted(DUMPS))
def test_a_tf32_gemm_solves_emits_its_instructions_and_compiles_clean(arch, tmp_path):
    graph, machine, schedule = _solved(arch)
    assert schedule.stage == "joint" and schedule.optimal and schedule.complete
    assert verify(schedule, graph, machine) == []
    cu = emit_cuda(schedule, machine)
    for text in INSTRUCTIONS[arch]:
        assert text in cu, text
    # the tiles: f32 [*, 32] (128-byte rows, the 128-byte swizzle), B's map over its [N, K] transpose
    assert cu.count("CU_TENSOR_MAP_DATA_TYPE_FLOAT32") >= 3 and "cuda_fp8.h" not in cu
    if arch == "sm_100a":  # kind::tf32's descriptor: D F32 (1 << 4), A and B TF32 (2 << 7, 2 << 10), K-major
        assert "return (1u << 4) | (2u << 7) | (2u << 10) | (static_cast<uint32_t>(N >> 3) << 17) |" in cu
    else:
        assert "tf32_sm100" not in cu and "kind::tf32" not in cu
    if nvcc() is None:
        pytest.skip("nvcc not found (PATH, /usr/local/cuda/bin)")
    src = tmp_path / "tf32.cu"
    src.write_text(cu)
    rc, err = nvcc_compile(src, ["-std=c++17", f"-gencode=arch=compute_{arch[3:]},code={arch}", "-Xptxas", "-v"])
    assert rc == 0, err[-2000:]
    assert {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)} <= {0}, err[-2000:]
    assert "C7515" not in err and "serialized" not in err, err[-2000:]


# -- costs: the machine files' rate, per FLOP half the f16 one ------------------------------------------------

def _gemm(dtype: str, k: int) -> str:
    return (f"kernel g\ncarry acc : f32[128,128] = 0\nloop {{\n  a = load : {dtype}[128,{k}] @smem\n"
            f"  b = load : {dtype}[128,{k}] @smem\n  acc_n = mma a, b, acc : f32[128,128]\n  yield acc = acc_n\n}}\n")


@pytest.mark.parametrize("gpu", ["h100", "h200", "b200", "h200-calibrated"])
def test_an_f32_mma_parses_and_costs_twice_an_f16_one_of_its_shape(gpu):
    """TF32's dense rate is half f16's (H100/H200 SXM 494 vs 989 TFLOP/s, B200 1.1 vs 2.25 PFLOP/s): the machine
    files' `2*M*N*K*bits/16 / rate` with bits 32."""
    machine = load_machine(gpu)
    cost = {d: next(c for c in bind(parse_tir(_gemm(d, 32)), machine) if c.opcode == "mma") for d in ("f16", "f32")}
    assert cost["f32"].occupancy == pytest.approx(2 * cost["f16"].occupancy)


def test_a_machine_whose_mma_cost_ignores_the_operand_width_says_it_has_none_for_f32():
    machine = load_machine(str(ROOT / "tests" / "data" / "machines" / "h100_latency.yaml"))
    bind(parse_tir(_gemm("f16", 32)), machine)  # its f16 rate
    with pytest.raises(InputError, match=r"op 'acc_n' multiplies f32 operands \(TF32 on the tensor core\), and machine "
                                         r"'h100_latency' costs an mma from its shapes alone .*no cost for 32-bit operands"):
        bind(parse_tir(_gemm("f32", 32)), machine)
    with_cycles = _gemm("f32", 32).replace(": f32[128,128]\n  yield", ": f32[128,128] {cycles = 500}\n  yield")
    assert [c.cycles for c in bind(parse_tir(with_cycles), machine) if c.opcode == "mma"] == [500]


# -- the K-major rewrite (ttgir/kmajor.py) ----------------------------------------------------------------------

GEMM_KN = """kernel g
carry acc : f32[128,128] = 0
loop {
  a = load : DT[128,64] @smem
  b = load : DT[64,128] @smem
  acc_n = mma a, b, acc : f32[128,128]
  yield acc = acc_n
}
"""


@pytest.mark.parametrize("dtype, flipped", [("f32", True), ("f8e4m3", True), ("f16", False), ("bf16", False)])
def test_an_mn_major_b_is_typed_k_major_for_the_dtypes_that_need_it(dtype, flipped):
    g = kmajor_loads(parse_tir(GEMM_KN.replace("DT", dtype)))
    b = g.by_name["b"]
    assert (b.type.shape, b.attr("transposed")) == (((128, 64), True) if flipped else ((64, 128), None))
    assert print_tir(parse_tir(print_tir(g))) == print_tir(g)  # the attribute is written and read back


def test_a_load_also_read_otherwise_is_left_as_it_lies():
    """B also read by an elementwise op (which reads it [K, N]): the rewrite would change what that op reads,
    so the graph stays, and emit-cuda's error says why it cannot read the operand."""
    text = GEMM_KN.replace("DT", "f32").replace("  yield", "  s = mul b, b : f32[64,128]\n  yield")
    g = parse_tir(text)
    assert kmajor_loads(g) is g


def test_a_square_mn_major_b_gets_transpose_b_true():
    text = (GEMM_KN.replace("DT", "f8e4m3").replace("[128,64]", "[128,128]").replace("[64,128] @smem", "[128,128] @smem")
            .replace(": f32[128,128]\n  yield", ": f32[128,128] {transpose_b = false}\n  yield"))
    g = kmajor_loads(parse_tir(text))
    assert g.by_name["b"].attr("transposed") and g.by_name["acc_n"].attr("transpose_b") is True


def test_the_fp16_dot_of_an_mn_major_b_keeps_its_layout():
    """A 16-bit wgmma reads B MN-major itself (SwiGLU's W1 [K, N]): no copy, no attribute."""
    g, _ = load_ttgir(HELDOUT3 / "t39" / "prepipe" / "swiglu_sm90.ttgir")
    assert not any(op.attr("transposed") for op in g.ops)


# -- the binding: B taken as the Triton kernel takes it, [K, N], read as its transpose --------------------------

@pytest.fixture(scope="module")
def tf32_binding(tmp_path_factory):
    machine = load_machine("h200")
    graph, _ = load_ttgir(HELDOUT3 / "t36" / "prepipe" / "gemm_tf32_sm90.ttgir", split_rows="auto")
    out = tmp_path_factory.mktemp("tf32")
    for path, text in binding_files(build_model(solve(graph, machine, SolveOptions()), machine),
                                    str(out / "k.cu")).items():
        Path(path).write_text(text)
    spec = importlib.util.spec_from_file_location("tf32_binding", out / "k.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _meta(mod, shape, strides=None, ptr=1 << 20):
    return mod.Meta(tuple(shape), "float32", "cuda:0", strides is None, ptr, strides)


M, N, K = 512, 384, 768


def test_the_binding_takes_b_as_the_triton_kernel_does(tf32_binding):
    mod = tf32_binding
    b = next(a for a in mod.SPEC["args"] if a["name"] == "B")
    assert b["dims"] == [["loop", 32], ["n", 128]] and b["transposed"] and b["tma"]
    assert mod.layout(b) == "[*batch, L, N]"
    assert [p.name for p in __import__("inspect").signature(mod.run).parameters.values()][:9] == [
        "A", "B", "C", "M", "N", "K", "stride_am", "stride_bk", "stride_cm"]
    doc = mod.run.__doc__
    assert "B: torch.float32 [*batch, L, N]" in doc and "copied transposed into a [*batch, N, L] buffer each call" in doc


@pytest.mark.parametrize("how, layout", [
    # the Triton kernel's B, [K, N] row-major: its .mT is not K-major, copied into an [N, K] buffer (rows of K)
    ("row-major", ("stage", K, K, N * K)),
    # w.t() of a contiguous [N, K] w: .mT is w, read as it lies
    ("w.t()", ("as is", K, K, N * K)),
    # .mT of a wider [N, 1024] tensor's [:, :K]: rows 1024 apart, read as it lies
    ("a view", ("as is", K, 1024, N * 1024)),
    # rows of K + 1 f32 (not a multiple of 16 bytes): copied
    ("odd pitch", ("stage", K, K, N * K)),
])
def test_the_binding_copies_b_only_where_its_transpose_is_not_k_major(tf32_binding, how, layout):
    mod = tf32_binding
    b = {"row-major": _meta(mod, (K, N)), "w.t()": _meta(mod, (K, N), (1, K)),
         "a view": _meta(mod, (K, N), (1, 1024)), "odd pitch": _meta(mod, (K, N), (1, K + 1))}[how]
    plan = mod.resolve(mod.SPEC, {"A": _meta(mod, (M, K)), "B": b, "C": None})
    assert (plan["tiles_m"], plan["tiles_n"], plan["loop_extent"]) == (M // 128, N // 128, K)
    assert plan["layouts"][1] == layout


def test_prepare_stages_b_transposed_and_passes_the_views_strides(tf32_binding):
    """_prepare's staging entry (position, buffer shape, output, zeroed, columns, transposed): B's .mT copied into
    an [N, K] buffer (call: buf.copy_(B.mT)); w.t() is not staged, its .mT's row stride K goes to the Problem."""
    mod = tf32_binding
    a = Tensor((M, K), dtype="float32")
    run = mod._prepare(mod.SPEC, {"A": a, "B": Tensor((K, N), dtype="float32", ptr=3 << 20), "C": None}, None,
                       Tensor, DType)
    assert run.stage == ((1, (N, K), False, False, K, True),)
    assert run.strides[:3] == (K, K, N) and run.strides[3:5] == (M * K, N * K)
    kept = mod._prepare(mod.SPEC, {"A": a, "B": Tensor((K, N), dtype="float32", contiguous=False, strides=(1, K)),
                                   "C": None}, None, Tensor, DType)
    assert kept.stage == () and kept.strides[:3] == (K, K, N)


@pytest.mark.parametrize("b, message", [
    ((N, K), rf"^B: gives L = {N}, but A gives L = {K}$"),  # w itself, not w.t(): B's first dimension is L
    ((K, N + 128), rf"^C: gives N = {N}, but B gives N = {N + 128}$"),
    ((K,), r"^B: expected shape \[\*batch, L, N\], got \[768\]$"),
])
def test_a_wrong_b_is_named_in_the_shape_the_caller_passes(tf32_binding, b, message):
    mod = tf32_binding
    with pytest.raises(mod.ArgumentError, match=message):
        mod.resolve(mod.SPEC, {"A": _meta(mod, (M, K)), "B": _meta(mod, b), "C": _meta(mod, (M, N))})


def test_kernel_view_is_the_transpose_of_the_given_tensor(tf32_binding):
    mod = tf32_binding
    b = next(a for a in mod.SPEC["args"] if a["name"] == "B")
    seen = mod.kernel_view(b, _meta(mod, (2, K, N)))
    assert (seen.shape, seen.strides, seen.contiguous) == ((2, N, K), (K * N, 1, N), False)
    seen = mod.kernel_view(b, _meta(mod, (2, K, N), (N * K, 1, K)))
    assert (seen.shape, seen.strides, seen.contiguous) == ((2, N, K), (N * K, K, 1), True)
    a = next(x for x in mod.SPEC["args"] if x["name"] == "A")
    assert mod.kernel_view(a, _meta(mod, (M, K))) == _meta(mod, (M, K))


def test_every_staged_buffer_is_held_until_the_launch(tf32_binding):
    """A at an odd pitch, B row-major (its .mT copied) and C at an odd pitch: three staging buffers, each held by
    the caller until the kernel is launched. (call used to keep only the last: a buffer dropped before the launch
    goes back to torch's caching allocator, which gives its memory to the next allocation on the stream, C's
    buffer or a split kernel's scratch, while the kernel is still to read A from it.) Real torch tensors, on the
    CPU: _stage is device-agnostic; the plan is _prepare's for CUDA tensors."""
    torch = pytest.importorskip("torch")
    mod, k = tf32_binding, K + 2  # rows of K + 2 f32: not a multiple of 16 bytes
    given = {"A": Tensor((M, k), dtype="float32"), "B": Tensor((k, N), dtype="float32", ptr=3 << 20),
             "C": Tensor((M, N), dtype="float32", ptr=5 << 20, contiguous=False, strides=(N + 1, 1))}
    run = mod._prepare(mod.SPEC, given, None, Tensor, DType)._replace(device=torch.device("cpu"))
    assert [(i, flip) for i, _, _, _, _, flip in run.stage] == [(0, False), (1, True), (2, False)]
    a, b, c = torch.randn(M, k), torch.randn(k, N), torch.empty(M, N + 1)[:, :N]
    values = [a, b, c]
    ptrs = [x.data_ptr() for x in values]
    held, staged = mod._stage(run, values, ptrs, None, torch)
    assert [x.data_ptr() for x in held] == ptrs and len(set(ptrs)) == 3  # each address a live buffer of its own
    assert torch.equal(held[0][:, :k], a) and torch.equal(held[1][:, :k], b.mT)  # A as is, B's K-major transpose
    assert [(user is c, buf.data_ptr()) for user, buf in staged] == [(True, ptrs[2])]  # C copied back after
