"""Runs the emitted GEMM and attention kernels on a GPU through bench/gpu_bench.py, at small sizes.

Skipped unless torch, triton, nvcc and a CUDA GPU of compute capability 9.0 (Hopper) are present;
the full benchmark is `python3 bench/gpu_bench.py --out DIR` (docs/gpu-results.md).
"""
import importlib.util
import os
import shutil

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0)
    or not (shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc")),
    reason="needs a Hopper (sm_90) CUDA GPU, torch and nvcc")


def _bench():
    spec = importlib.util.spec_from_file_location("gpu_bench", os.path.join(ROOT, "bench", "gpu_bench.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_emitted_gemm_matches_torch(tmp_path):
    g = _bench()
    lib, spills = g.build("gemm", str(tmp_path))
    assert spills == []
    r = g.run_gemm(g.TwillGemm(lib), 512, do_time=False)
    assert r.get("twill_error") is None, r
    assert r["nan_count"] == 0 and r["rel_err"] < 1e-2, r


def test_emitted_attention_matches_torch(tmp_path):
    g = _bench()
    lib, spills = g.build("attention", str(tmp_path))
    assert spills == []
    r = g.run_attention(g.TwillAttention(lib), 1, 2, 512, do_time=False)
    assert r.get("twill_error") is None, r
    assert r["nan_count"] == 0 and r["rel_err"] < 1e-2, r


def test_emitted_kernels_persistent_match_torch(tmp_path, monkeypatch):
    """More tiles than SMs: one CTA per SM loops over tiles (the rings continue from tile to tile)."""
    monkeypatch.setenv("TWILL_PERSISTENT", "1")  # read by the shim at each launch
    g = _bench()
    gemm = g.TwillGemm(g.build("gemm", str(tmp_path))[0])
    r = g.run_gemm(gemm, 4096, do_time=False)  # 512 tiles, 64 iterations each
    assert r.get("twill_error") is None and r["nan_count"] == 0 and r["rel_err"] < 1e-2, r
    attn = g.TwillAttention(g.build("attention", str(tmp_path))[0])
    r = g.run_attention(attn, 2, 8, 2048, do_time=False)  # 256 tiles, 16 iterations each
    assert r.get("twill_error") is None and r["nan_count"] == 0 and r["rel_err"] < 1e-2, r


@pytest.mark.parametrize("persistent", ["0", "1"])
def test_emitted_attention_backward_matches_torch(tmp_path, monkeypatch, persistent):
    """The FA3-style backward (a CTA per key tile; dQ added by every key tile's CTA)."""
    monkeypatch.setenv("TWILL_PERSISTENT", persistent)
    g = _bench()
    lib, spills = g.build("attention_bwd", str(tmp_path))
    r = g.run_attention_bwd(g.TwillAttentionBwd(lib), 1, 4, 1024, do_time=False)
    assert r.get("twill_error") is None and r["nan_count"] == 0 and r["rel_err"] < 1e-2, r



GEMM_SHIM = r"""
extern "C" int gemm_launch(int tiles_m, int tiles_n, int iters, const void* a, const void* b, void* c) {
  NS::Problem p;  // a one-accumulator GEMM graph (a, b, acc), whatever its element types
  p.tiles_m = tiles_m; p.tiles_n = tiles_n; p.iters = iters;
  p.a = static_cast<decltype(p.a)>(a); p.b = static_cast<decltype(p.b)>(b); p.out_acc = static_cast<decltype(p.out_acc)>(c);
  return static_cast<int>(NS::launch(p));
}
"""


@pytest.mark.parametrize("k, n", [(16, 32), (32, 16)])
def test_tiles_narrower_than_128_bytes_match_torch(tmp_path, k, n):
    """GEMM tiles whose rows are 32 or 64 bytes (tests/data/tir/gemm_k16n32.tir, gemm_k32n16.tir)
    go through TMA and wgmma with a 32- or 64-byte swizzle, K-major (a) and N-major (b): the
    golden emitted file, compiled unmodified, matches torch."""
    import ctypes
    g = _bench()
    lib = _golden_lib(tmp_path, "gemm_k%dn%d.h100" % (k, n), "twill_gemm_k%dn%d" % (k, n), GEMM_SHIM)
    tiles_m, tiles_n, iters = 3, 2, 8
    torch.manual_seed(k * n)
    a = torch.randn(64 * tiles_m, k * iters, device="cuda", dtype=torch.float16)
    b = torch.randn(k * iters, n * tiles_n, device="cuda", dtype=torch.float16)
    c = torch.full((64 * tiles_m, n * tiles_n), float("nan"), device="cuda", dtype=torch.float16)
    assert lib.gemm_launch(tiles_m, tiles_n, iters, ctypes.c_void_p(a.data_ptr()), ctypes.c_void_p(b.data_ptr()),
                             ctypes.c_void_p(c.data_ptr())) == 0
    torch.cuda.synchronize()
    assert int(torch.isnan(c).sum()) == 0
    assert g.rel_err(c, torch.matmul(a.float(), b.float())) < 1e-2


def test_bf16_gemm_matches_torch(tmp_path):
    """tests/data/tir/gemm_bf16.tir: bf16 A and B through TMA's bf16 tensor maps and wgmma .bf16,
    C written as bf16 (the golden file, compiled unmodified)."""
    import ctypes
    g = _bench()
    lib = _golden_lib(tmp_path, "gemm_bf16.h100", "twill_gemm_bf16", GEMM_SHIM)
    tiles_m, tiles_n, iters = 5, 3, 12
    torch.manual_seed(16)
    a = torch.randn(64 * tiles_m, 64 * iters, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(64 * iters, 128 * tiles_n, device="cuda", dtype=torch.bfloat16)
    c = torch.full((64 * tiles_m, 128 * tiles_n), float("nan"), device="cuda", dtype=torch.bfloat16)
    assert lib.gemm_launch(tiles_m, tiles_n, iters, *(ctypes.c_void_p(t.data_ptr()) for t in (a, b, c))) == 0
    torch.cuda.synchronize()
    assert int(torch.isnan(c).sum()) == 0
    assert g.rel_err(c.float(), torch.matmul(a.float(), b.float())) < 1e-2


@pytest.mark.parametrize("persistent", ["0", "1"])
def test_wgmmas_split_for_the_launch_cap_match_torch(tmp_path, monkeypatch, persistent):
    """tests/data/tir/gemm_3x64.tir with its three consumers pinned: 512 threads, so emit-cuda issues
    each m64n256 as two m64n128 wgmmas into the halves of the accumulator fragment."""
    import ctypes
    monkeypatch.setenv("TWILL_PERSISTENT", persistent)
    g = _bench()
    lib = _golden_lib(tmp_path, "gemm_3x64.h100", "twill_gemm_3x64", r"""
extern "C" int gemm_launch(int tiles_m, int tiles_n, int iters, const void* a, const void* b, void* c) {
  NS::Problem p;  // the three 64-row parts of each 192-row tile of one A and one C
  p.tiles_m = tiles_m; p.tiles_n = tiles_n; p.iters = iters;
  p.persistent = getenv("TWILL_PERSISTENT") ? atoi(getenv("TWILL_PERSISTENT")) : -1;
  p.a0 = p.a1 = p.a2 = static_cast<const __half*>(a); p.b = static_cast<const __half*>(b);
  p.a0_rows_step = p.a1_rows_step = p.a2_rows_step = 192; p.a1_rows_offset = 64; p.a2_rows_offset = 128;
  p.out_acc0 = p.out_acc1 = p.out_acc2 = static_cast<__half*>(c);
  p.out_acc0_rows_step = p.out_acc1_rows_step = p.out_acc2_rows_step = 192;
  p.out_acc1_rows_offset = 64; p.out_acc2_rows_offset = 128;
  return static_cast<int>(NS::launch(p));
}
""")
    tiles_m, tiles_n, iters = 5, 3, 10
    torch.manual_seed(31)
    a = torch.randn(192 * tiles_m, 64 * iters, device="cuda", dtype=torch.float16)
    b = torch.randn(64 * iters, 256 * tiles_n, device="cuda", dtype=torch.float16)
    c = torch.full((192 * tiles_m, 256 * tiles_n), float("nan"), device="cuda", dtype=torch.float16)
    assert lib.gemm_launch(tiles_m, tiles_n, iters, *(ctypes.c_void_p(t.data_ptr()) for t in (a, b, c))) == 0
    torch.cuda.synchronize()
    assert int(torch.isnan(c).sum()) == 0
    assert g.rel_err(c.float(), torch.matmul(a.float(), b.float())) < 1e-2


def _golden_lib(tmp_path, fixture, namespace, shim):
    """A golden emitted file (tests/golden/emit), compiled unmodified with a small extern "C" shim."""
    src = os.path.join(ROOT, "tests", "golden", "emit", fixture + ".cu")
    return _bench().build_shim(src, namespace, shim, str(tmp_path), fixture)[0]


def _fa3_forward(lib, q, k, v):
    """Run a kernel built with gpu_bench's FA3 shim on q [BH][Nq][D] and k, v [BH][keys][D] (the
    keys passed as the loop's extent): (O, m, l, scale), their NaN fill checked to be overwritten."""
    import ctypes
    import math
    BH, Nq, D = q.shape
    o = torch.full((BH, Nq, D), float("nan"), device="cuda", dtype=torch.float16)
    m, l = (torch.full((BH, Nq), float("nan"), device="cuda") for _ in range(2))
    scale = 1 / math.sqrt(D)
    p = [ctypes.c_void_p(t.data_ptr()) for t in (q, k, v, o, m, l)]
    assert lib.twill_bench_launch(Nq // 128, k.shape[1], BH, ctypes.c_float(scale * 1.4426950408889634), *p, None) == 0
    torch.cuda.synchronize()
    assert int(torch.isnan(o).sum() + torch.isnan(m).sum() + torch.isnan(l).sum()) == 0
    return o, m, l, scale


def test_triton_attention_imported_from_ttgir_matches_torch(tmp_path):
    """Triton's attention forward (tests/data/ttgir/attn_fwd_tma_sm90.ttgir), through `twill
    import`, the solver and emit-cuda (the golden triton_attn_fwd_tma_sm90.h100.cu): a 128-row Q
    tile per CTA, O written normalized."""
    import ctypes
    import math
    g = _bench()
    lib = _golden_lib(tmp_path, "triton_attn_fwd_tma_sm90.h100", "twill_attn_fwd_desc", r"""
extern "C" int launch(int tiles, int iters, int batch, float scale, const void* q, const void* k, const void* v,
                      void* o, void* m, void* l) {
  NS::Problem p;
  p.tiles_m = tiles; p.iters = iters; p.batch = batch; p.exp2_scale = scale;
  p.q = static_cast<const __half*>(q); p.k = static_cast<const __half*>(k); p.v = static_cast<const __half*>(v);
  p.out_acc = static_cast<decltype(p.out_acc)>(o); p.out_m_i = static_cast<float*>(m); p.out_l_i = static_cast<float*>(l);
  return static_cast<int>(NS::launch(p));
}
""")
    BH, N, D = 4, 1024, 128
    torch.manual_seed(7)
    q, k, v = (torch.randn(BH, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.full((BH, N, D), float("nan"), device="cuda", dtype=torch.float16)  # O truncated to f16, as Triton's
    m, l = (torch.full((BH, N), float("nan"), device="cuda") for _ in range(2))
    scale = 1 / math.sqrt(D)
    p = [ctypes.c_void_p(t.data_ptr()) for t in (q, k, v, o, m, l)]
    assert lib.launch(N // 128, N // 128, BH, ctypes.c_float(scale * 1.4426950408889634), *p) == 0
    torch.cuda.synchronize()
    assert int(torch.isnan(o).sum() + torch.isnan(m).sum() + torch.isnan(l).sum()) == 0
    assert g.rel_err(o[:2], g.reference_attention(q, k, v, scale, 2)) < 1e-2


def test_triton_matmul_imported_from_ttgir_matches_torch(tmp_path):
    """Triton's matmul (tests/data/ttgir/matmul_sm90.ttgir) through import, solve and emit-cuda; C
    in f16, which Triton truncates it to after the loop."""
    import ctypes
    g = _bench()
    lib = _golden_lib(tmp_path, "triton_matmul_sm90.h100", "twill_matmul", GEMM_SHIM)
    M, N, K = 512, 384, 1024
    torch.manual_seed(11)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    assert lib.gemm_launch(M // 128, N // 128, K // 64, *(ctypes.c_void_p(t.data_ptr()) for t in (a, b, c))) == 0
    torch.cuda.synchronize()
    assert int(torch.isnan(c).sum()) == 0
    assert g.rel_err(c.float(), torch.matmul(a.float(), b.float())) < 1e-2


@pytest.mark.parametrize("fixture, namespace, a_cols, b_cols", [
    ("triton39_mm_acol.h100", "twill_matmul_acol", True, False),
    ("triton39_mm_bcol.h100", "twill_matmul_bcol", False, True)])
def test_triton_matmul_with_a_column_major_operand_matches_torch(tmp_path, fixture, namespace, a_cols, b_cols):
    """Triton 3.9 matmuls whose A (or B) is column-major in memory (tests/data/ttgir/triton39/): the
    import types it as it lies there, K x M (N x K), and the kernel reads it transposed."""
    import ctypes
    g = _bench()
    lib = _golden_lib(tmp_path, fixture, namespace, GEMM_SHIM)
    M, N, K = 384, 256, 640
    torch.manual_seed(23)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    a_mem = a.t().contiguous() if a_cols else a  # the bytes the kernel reads: K x M when column-major
    b_mem = b.t().contiguous() if b_cols else b
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    assert lib.gemm_launch(M // 128, N // 128, K // 64, *(ctypes.c_void_p(t.data_ptr()) for t in (a_mem, b_mem, c))) == 0
    torch.cuda.synchronize()
    assert int(torch.isnan(c).sum()) == 0
    assert g.rel_err(c.float(), torch.matmul(a.float(), b.float())) < 1e-2


@pytest.mark.parametrize("persistent", ["0", "1"])
def test_attention_with_head_dimension_64_matches_torch(tmp_path, monkeypatch, persistent):
    """tests/data/tir/attention_fwd_d64.tir (the FA3 graph with D = 64), whose schedule is FA3's
    intra-warpgroup overlap with P in two buffers, which the D = 128 example does not use: the
    golden file, with bench/gpu_bench.py's FA3 shim, matches torch on both grids."""
    monkeypatch.setenv("TWILL_PERSISTENT", persistent)  # read by the shim at each launch
    g = _bench()
    lib = _golden_lib(tmp_path, "attention_fwd_d64.h100", "twill_attention_d64", g.KERNELS["attention"][3])
    BH, N, D = 8, 1024, 64
    torch.manual_seed(64)
    q, k, v = (torch.randn(BH, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    o, _, _, scale = _fa3_forward(lib, q, k, v)
    assert g.rel_err(o[:2], g.reference_attention(q, k, v, scale, 2)) < 1e-2


@pytest.mark.parametrize("fixture, namespace", [("attention_fwd_hopper.h100", "twill_attention_fwd_hopper"),
                                                ("attention_fwd_hopper.h200", "twill_attention_fwd_hopper"),
                                                ("attention_fwd_hopper_k192.h100", "twill_attention_fwd_hopper_k192")])
@pytest.mark.parametrize("keys", [777, 1000, 1088, 1152])
def test_attention_with_a_partial_last_key_tile_matches_torch(tmp_path, fixture, namespace, keys):
    """Problem::loop_extent: a number of keys that is not a multiple of the key tile (128 or 192;
    the h200 schedule holds P in two buffers, FA3's intra-warpgroup overlap).
    TMA fills the missing rows of K and V with zeros and the last S tile's columns past the end
    are masked to -inf before rowmax and exp2; without the mask, exp2 of their zero scores would
    be summed into l and every output row would be too small. 1152 is 6 whole 192-key tiles."""
    g = _bench()
    lib = _golden_lib(tmp_path, fixture, namespace, g.KERNELS["attention"][3])
    BH, Nq, D = 4, 512, 128
    torch.manual_seed(keys)
    q = torch.randn(BH, Nq, D, device="cuda", dtype=torch.float16)
    k, v = (torch.randn(BH, keys, D, device="cuda", dtype=torch.float16) for _ in range(2))
    o, m, l, scale = _fa3_forward(lib, q, k, v)
    assert g.rel_err(o, g.reference_attention(q, k, v, scale, BH)) < 1e-2
    s = q.float() @ k.float().transpose(1, 2)  # m is the raw scores' maximum; l sums exp2((s - m) * c)
    assert g.rel_err(m, s.amax(-1)) < 1e-3  # the running maximum saw only the real keys
    c = scale * 1.4426950408889634
    assert g.rel_err(l, torch.exp2((s - s.amax(-1, keepdim=True)) * c).sum(-1)) < 1e-2


def test_gemm_with_a_partial_last_k_tile_matches_torch(tmp_path):
    """A GEMM whose K (1000) is not a multiple of its 64-wide K step: the zero fill past the end
    adds nothing to the accumulators, so no mask is needed (kRagged, no mask_past)."""
    import ctypes
    g = _bench()
    shim = g.KERNELS["gemm"][3].replace("p.iters = iters;", "p.loop_extent = iters;")
    lib = _golden_lib(tmp_path, "gemm_hopper.h100", "twill_gemm_hopper", shim)
    M, N, K = 256, 512, 1000
    torch.manual_seed(K)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    assert lib.twill_bench_launch(M // 128, N // 256, K, 1, *(ctypes.c_void_p(t.data_ptr()) for t in (a, b, c)),
                                  None) == 0
    torch.cuda.synchronize()
    assert int(torch.isnan(c).sum()) == 0
    assert g.rel_err(c, torch.matmul(a.float(), b.float())) < 1e-2


def test_attention_backward_with_a_partial_last_query_tile_matches_torch(tmp_path):
    """The backward loops over 64-row query tiles: with 1000 queries its last tile is partial.
    Q, dO, lse and dlt past the end arrive as zeros and S's rows past the end are masked to -inf
    before P = exp2(S - lse) (a mask along the rows, mask_past<0>), so P, dS and every
    gradient's share of those rows are 0, and dQ's TMA reduction is clipped at the extent. (Here
    the zero fill of dO and dlt alone would already zero those shares: the same kernel without
    the mask also passed on the H200. The forward test above is the one the mask decides.)"""
    import ctypes
    import math
    g = _bench()
    shim = g.KERNELS["attention_bwd"][3].replace("p.iters = iters;", "p.loop_extent = iters;")
    lib = _golden_lib(tmp_path, "attention_bwd_hopper.h100", "twill_attention_bwd_hopper", shim)
    BH, Nq, Nk, D = 4, 1000, 512, 128
    torch.manual_seed(Nq)
    q, d_o = (torch.randn(BH, Nq, D, device="cuda", dtype=torch.float16) for _ in range(2))
    k, v = (torch.randn(BH, Nk, D, device="cuda", dtype=torch.float16) for _ in range(2))
    lse, dlt, dq_r, dk_r, dv_r = g.reference_attention_bwd(q, k, v, d_o, BH)
    dq = torch.zeros(BH, Nq, D, device="cuda")  # every key tile's CTA adds its share
    dk, dv = (torch.full((BH, Nk, D), float("nan"), device="cuda", dtype=g.out_dtype(lib)) for _ in range(2))
    c = 1.4426950408889634 / math.sqrt(D)
    p = [ctypes.c_void_p(t.data_ptr()) for t in (q, k, v, d_o, lse.contiguous(), dlt.contiguous(), dq, dk, dv)]
    assert lib.twill_bench_launch(Nk // 128, Nq, BH, ctypes.c_float(c), *p, None) == 0
    torch.cuda.synchronize()
    assert int(torch.isnan(dq).sum() + torch.isnan(dk).sum() + torch.isnan(dv).sum()) == 0
    for got, ref in ((dq, dq_r), (dk, dk_r), (dv, dv_r)):
        assert g.rel_err(got, ref) < 1e-2


# -- 8-bit mma inputs (tests/data/tir/gemm_fp8_e4m3.tir, gemm_i8.tir; the corpus fp8 GEMM) --------

FP8_HALVES_SHIM = r"""
extern "C" int gemm_launch(int tiles_m, int tiles_n, int iters, const void* a, const void* b, void* c) {
  NS::Problem p;  // the two 64-row halves of each 128-row tile of one A and one C
  p.tiles_m = tiles_m; p.tiles_n = tiles_n; p.iters = iters;
  p.a0 = p.a1 = static_cast<decltype(p.a0)>(a); p.b = static_cast<decltype(p.b)>(b);
  p.a0_rows_step = p.a1_rows_step = 128; p.a1_rows_offset = 64;
  p.out_acc0 = p.out_acc1 = static_cast<decltype(p.out_acc0)>(c);
  p.out_acc0_rows_step = p.out_acc1_rows_step = 128; p.out_acc1_rows_offset = 64;
  return static_cast<int>(NS::launch(p));
}
"""


@pytest.mark.parametrize("fixture, namespace, shim, n, out_dtype", [
    ("gemm_fp8_e4m3.h100", "twill_gemm_fp8_e4m3", FP8_HALVES_SHIM, 256, "bfloat16"),
    # Triton's fp8 GEMM as imported: its per-tensor scales are not in the graph (scales of 1)
    ("triton_gemm_fp8_sm90.h100", "twill_gemm_fp8_kernel", GEMM_SHIM, 128, "float16"),
])
def test_fp8_gemm_matches_torch(tmp_path, fixture, namespace, shim, n, out_dtype):
    """e4m3 A [M, K] and B [N, K] (both K-major) through TMA as bytes and wgmma m64nNk32 .e4m3 into
    f32: C = A B^T, written as bf16 or f16, against torch's float32 product of the same fp8 values."""
    import ctypes
    g = _bench()
    lib = _golden_lib(tmp_path, fixture, namespace, shim)
    tiles_m, tiles_n, iters = 3, 2, 6
    torch.manual_seed(8)
    a = torch.randn(128 * tiles_m, 128 * iters, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n * tiles_n, 128 * iters, device="cuda").to(torch.float8_e4m3fn)
    c = torch.full((128 * tiles_m, n * tiles_n), float("nan"), device="cuda", dtype=getattr(torch, out_dtype))
    assert lib.gemm_launch(tiles_m, tiles_n, iters, *(ctypes.c_void_p(t.data_ptr()) for t in (a, b, c))) == 0
    torch.cuda.synchronize()
    assert int(torch.isnan(c).sum()) == 0
    assert g.rel_err(c.float(), torch.matmul(a.float(), b.float().t())) < 1e-2


def test_int8_gemm_is_exact(tmp_path):
    """s8 A [M, K] and B [N, K] through wgmma m64n128k32 .s32.s8.s8: C = A B^T in int32, exactly
    (K = 3072 of values up to 127 in magnitude: sums past 2^24, which a float would round)."""
    import ctypes
    lib = _golden_lib(tmp_path, "gemm_i8.h100", "twill_gemm_i8", GEMM_SHIM)
    tiles_m, tiles_n, iters = 2, 3, 24
    torch.manual_seed(9)
    a = torch.randint(-128, 128, (128 * tiles_m, 128 * iters), device="cuda", dtype=torch.int8)
    b = torch.randint(-128, 128, (128 * tiles_n, 128 * iters), device="cuda", dtype=torch.int8)
    a[:, :] = torch.where(a.abs() < 100, a, torch.full_like(a, 127))  # some rows of large sums
    c = torch.full((128 * tiles_m, 128 * tiles_n), -2 ** 31, device="cuda", dtype=torch.int32)
    assert lib.gemm_launch(tiles_m, tiles_n, iters, *(ctypes.c_void_p(t.data_ptr()) for t in (a, b, c))) == 0
    torch.cuda.synchronize()
    want = (a.double() @ b.double().t()).to(torch.int64)
    assert torch.equal(c.to(torch.int64), want)
