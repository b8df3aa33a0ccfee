"""Runs the emitted kernels on a GPU through their generated bindings, at small sizes.

Each kernel is a golden file (tests/golden/emit/FIXTURE.cu) called through the binding beside it
(FIXTURE.py, `twill emit-cuda --binding torch`; tests/test_binding.py keeps both golden): torch
tensors in, torch tensors out, no hand-written shim. Skipped unless torch, triton, nvcc and a CUDA
GPU of compute capability 9.0 (Hopper) are present; the full benchmark is
`python3 bench/gpu_bench.py --out DIR` (docs/gpu-results.md). The bindings' libraries are built
once for the session (in $TWILL_CACHE_DIR/bindings as it was when the tests started, so that
`bench/gpu_bench.py --build-only` can build them beforehand, in parallel; else in a temporary
folder).
"""
import importlib.util
import math
import os
import shutil
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden", "emit")
OUTER_CACHE = os.environ.get("TWILL_CACHE_DIR")  # before the per-test schedule cache replaces it
LOG2E = 1.4426950408889634

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0)
    or not (shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc")),
    reason="needs a Hopper (sm_90) CUDA GPU, torch and nvcc")


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory):
    return OUTER_CACHE or str(tmp_path_factory.mktemp("bindings"))


@pytest.fixture(autouse=True)
def shared_builds(private_schedule_cache, build_cache, monkeypatch):
    """Every test's bindings share one build folder: each library is compiled once."""
    monkeypatch.setenv("TWILL_CACHE_DIR", build_cache)


def _bench():
    spec = importlib.util.spec_from_file_location("gpu_bench", os.path.join(ROOT, "bench", "gpu_bench.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def binding(fixture, clean=True):
    """A golden kernel's binding, its library built (and ptxas's report free of spills)."""
    mod, spills = _bench().build_binding(fixture, GOLDEN)
    assert not clean or spills == [], spills
    return mod


def nan(*shape, dtype=torch.float16):
    return torch.full(shape, float("nan"), device="cuda", dtype=dtype)


def test_emitted_gemm_matches_torch():
    g = _bench()
    r = g.run_gemm(g.TwillGemm(binding("gemm_hopper.h100")), 512, do_time=False)
    assert r.get("twill_error") is None, r
    assert r["nan_count"] == 0 and r["rel_err"] < 1e-2, r


def test_emitted_attention_matches_torch():
    g = _bench()
    r = g.run_attention(g.TwillAttention(binding("attention_fwd_hopper.h100")), 1, 2, 512, do_time=False)
    assert r.get("twill_error") is None, r
    assert r["nan_count"] == 0 and r["rel_err"] < 1e-2, r


def test_binding_takes_users_layouts_and_allocates_outputs():
    """Q, K, V as [B, H, N, D] (two batch dimensions), the outputs allocated by the binding and
    returned as a named tuple; a wrong dtype is refused by name before any launch."""
    g = _bench()
    mod = binding("attention_fwd_hopper.h100")
    B, H, N, D = 2, 3, 640, 128
    torch.manual_seed(5)
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    out = mod.run(q, k, v, exp2_scale=LOG2E / math.sqrt(D))
    torch.cuda.synchronize()
    assert out.acc.shape == (B, H, N, D) and out.m.shape == (B, H, N)
    ref = g.reference_attention(q.view(B * H, N, D), k.view(B * H, N, D), v.view(B * H, N, D), 1 / math.sqrt(D), B * H)
    assert g.rel_err(out.acc.view(B * H, N, D), ref) < 1e-2
    with pytest.raises(mod.ArgumentError, match=r"^k: expected torch\.float16 on a CUDA device, got torch\.float32"):
        mod.run(q, k.float(), v)


def test_repeated_calls_take_the_fast_path_and_stay_right():
    """Calls of one kind (shapes, dtypes, device) reuse the checked plan, the encoded tensor maps
    (while the pointers and sizes are the same) and the raised shared-memory limit: results stay
    right when the pointers, then the sizes change, on another stream too; a tensor of a cached
    shape that fails a check is still refused by name (binding_runtime.call, host.tpl); strided views
    and rows off 16 bytes run right (a row pitch, or staged: binding_runtime._layout)."""
    g = _bench()
    mod = binding("gemm_hopper.h100")
    torch.manual_seed(11)

    def check(M, N, K, stream=None):
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        ref = torch.matmul(a.float(), b.float())
        for _ in range(3):  # the same tensors: the second and third calls find every map cached
            c = mod.run(a, b, stream=stream)
            (stream or torch.cuda.current_stream()).synchronize()
            assert int(torch.isnan(c).sum()) == 0 and g.rel_err(c.float(), ref) < 1e-2

    check(384, 512, 640)
    check(384, 512, 640)  # new pointers, the same sizes
    check(256, 512, 640)  # fewer rows: another plan and other maps
    check(384, 512, 1024)  # a longer loop
    check(384, 512, 640, stream=torch.cuda.Stream())
    runs = len(mod._LAUNCHES)
    a = torch.randn(384, 640, device="cuda", dtype=torch.float16)
    b = torch.randn(640, 512, device="cuda", dtype=torch.float16)
    with pytest.raises(mod.ArgumentError, match=r"^b: expected torch\.float16 on a CUDA device, got torch\.float32"):
        mod.run(a, b.float())
    assert len(mod._LAUNCHES) == runs  # nothing refused was kept
    # layouts TMA cannot read are staged (copied into rows padded to 16 bytes), not refused: a start 8 bytes in,
    # a transpose; a view of a wider tensor is taken as it lies (its row stride passed); K = 781 and N = 1001
    # (rows of 1562 and 2002 bytes) staged, the output returned as the view [:, :1001] of padded rows
    odd = torch.randn(384 * 640 + 4, device="cuda", dtype=torch.float16)[4:].view(384, 640)
    bt = torch.randn(512, 640, device="cuda", dtype=torch.float16).t()
    wide = torch.randn(384, 1024, device="cuda", dtype=torch.float16)[:, :640]
    for x, y in ((odd, b), (a, bt), (wide, b), (wide, bt)):
        c = mod.run(x, y)
        torch.cuda.synchronize()
        assert g.rel_err(c.float(), torch.matmul(x.float(), y.float())) < 1e-2
    x = torch.randn(384, 781, device="cuda", dtype=torch.float16)
    y = torch.randn(781, 1001, device="cuda", dtype=torch.float16)
    c = mod.run(x, y)
    given = torch.full((384, 1001), float("nan"), device="cuda", dtype=torch.float16)
    assert mod.run(x, y, acc=given) is given
    torch.cuda.synchronize()
    ref = torch.matmul(x.float(), y.float())
    assert c.shape == (384, 1001) and c.stride() == (1008, 1) and g.rel_err(c.float(), ref) < 1e-2
    assert g.rel_err(given.float(), ref) < 1e-2


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_a_call_runs_on_its_tensors_device_and_leaves_the_current_one():
    g = _bench()
    mod = binding("gemm_hopper.h100")
    a = torch.randn(256, 640, device="cuda:1", dtype=torch.float16)
    b = torch.randn(640, 512, device="cuda:1", dtype=torch.float16)
    assert torch.cuda.current_device() == 0
    c = mod.run(a, b)
    torch.cuda.synchronize(1)
    assert torch.cuda.current_device() == 0 and c.device == a.device
    assert g.rel_err(c.float(), torch.matmul(a.float(), b.float())) < 1e-2


def test_emitted_kernels_persistent_match_torch(monkeypatch):
    """More tiles than SMs: one CTA per SM loops over tiles (the rings continue from tile to tile)."""
    monkeypatch.setenv("TWILL_PERSISTENT", "1")  # passed by the bench's adapters
    g = _bench()
    r = g.run_gemm(g.TwillGemm(binding("gemm_hopper.h100")), 4096, do_time=False)  # 512 tiles, 64 iterations each
    assert r.get("twill_error") is None and r["nan_count"] == 0 and r["rel_err"] < 1e-2, r
    attn = g.TwillAttention(binding("attention_fwd_hopper.h100"))
    r = g.run_attention(attn, 2, 8, 2048, do_time=False)  # 256 tiles, 16 iterations each
    assert r.get("twill_error") is None and r["nan_count"] == 0 and r["rel_err"] < 1e-2, r


@pytest.mark.parametrize("persistent", ["0", "1"])
def test_emitted_attention_backward_matches_torch(monkeypatch, persistent):
    """The FA3-style backward (a CTA per key tile; dQ added by every key tile's CTA)."""
    monkeypatch.setenv("TWILL_PERSISTENT", persistent)
    g = _bench()
    r = g.run_attention_bwd(g.TwillAttentionBwd(binding("attention_bwd_hopper.h100")), 1, 4, 1024, do_time=False)
    assert r.get("twill_error") is None and r["nan_count"] == 0 and r["rel_err"] < 1e-2, r


def _gemm(fixture, M, N, K, dtype=torch.float16, seed=0, a_cols=False, b_cols=False, **knobs):
    """C = A B through a GEMM binding (A, B as the kernel reads them: transposed where column-major)."""
    g = _bench()
    mod = binding(fixture)
    torch.manual_seed(seed)
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    [out] = [x for x in mod.SPEC["args"] if x["output"]]
    c = nan(M, N, dtype=getattr(torch, out["dtype"]))
    a_mem = a.t().contiguous() if a_cols else a  # the bytes the kernel reads: K x M when column-major
    b_mem = b.t().contiguous() if b_cols else b
    assert mod.run(a_mem, b_mem, **{out["name"]: c}, **knobs) is c
    torch.cuda.synchronize()
    assert int(torch.isnan(c).sum()) == 0
    assert g.rel_err(c.float(), torch.matmul(a.float(), b.float())) < 1e-2


@pytest.mark.parametrize("k, n", [(16, 32), (32, 16)])
def test_tiles_narrower_than_128_bytes_match_torch(k, n):
    """GEMM tiles whose rows are 32 or 64 bytes (tests/data/tir/gemm_k16n32.tir, gemm_k32n16.tir)
    go through TMA and wgmma with a 32- or 64-byte swizzle, K-major (a) and N-major (b)."""
    _gemm("gemm_k%dn%d.h100" % (k, n), 64 * 3, n * 2, k * 8, seed=k * n)


def test_bf16_gemm_matches_torch():
    """tests/data/tir/gemm_bf16.tir: bf16 A and B through TMA's bf16 tensor maps and wgmma .bf16,
    C written as bf16."""
    _gemm("gemm_bf16.h100", 64 * 5, 128 * 3, 64 * 12, dtype=torch.bfloat16, seed=16)


@pytest.mark.parametrize("persistent", [0, 1])
def test_wgmmas_split_for_the_launch_cap_match_torch(persistent):
    """tests/data/tir/gemm_3x64.tir with its three consumers pinned: 512 threads, so emit-cuda issues
    each m64n256 as two m64n128 wgmmas; the binding stacks the three 64-row parts of each 192-row tile
    of one A and one C."""
    _gemm("gemm_3x64.h100", 192 * 5, 256 * 3, 64 * 10, seed=31, persistent=persistent)


def test_triton_attention_imported_from_ttgir_matches_torch():
    """Triton's attention forward (tests/data/ttgir/attn_fwd_tma_sm90.ttgir), through `twill
    import`, the solver and emit-cuda: a 128-row Q tile per CTA, O written normalized (f16, as
    Triton truncates it); its binding's arguments are the graph's names (q, k, v -> m_i, l_i, acc)."""
    g = _bench()
    mod = binding("triton_attn_fwd_tma_sm90.h100")
    BH, N, D = 4, 1024, 128
    torch.manual_seed(7)
    q, k, v = (torch.randn(BH, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    o, m, l = nan(BH, N, D), nan(BH, N, dtype=torch.float32), nan(BH, N, dtype=torch.float32)
    mod.run(q, k, v, acc=o, m_i=m, l_i=l, exp2_scale=LOG2E / math.sqrt(D))
    torch.cuda.synchronize()
    assert int(torch.isnan(o).sum() + torch.isnan(m).sum() + torch.isnan(l).sum()) == 0
    assert g.rel_err(o[:2], g.reference_attention(q, k, v, 1 / math.sqrt(D), 2)) < 1e-2


@pytest.mark.parametrize("keys", [512, 1024])
def test_per_key_bias_from_a_held_out_kernel_matches_torch(keys):
    """A hand-written Triton-style kernel (tests/data/ttgir/heldout/biased_softmax_gemm_sm90.ttgir):
    its scores get a per-key f32 bias, a [1, 64] tile per iteration. Loaded with a 128-byte swizzle,
    its second 32 columns (and every odd ring slot) were permuted (0.24 off); a one-row tile is one
    plain box now. Its schedule (tests/golden/emit/heldout_biased_softmax.h200.cu) hands the scores
    between two warpgroups; BIAS binds as [*batch, L], as the Triton kernel's users hold it."""
    mod = binding("heldout_biased_softmax.h200", clean=False)
    torch.manual_seed(3)
    B, M, D = 2, 256, 64
    q = (torch.randn(B, M, D, device="cuda") * 0.5).half()
    k = (torch.randn(B, keys, D, device="cuda") * 0.5).half()
    v = torch.randn(B, keys, D, device="cuda").half()
    bias = torch.randn(B, keys, device="cuda")
    o = mod.run(q, k, v, bias, None, keys).O.float()
    s = (q.float() @ k.float().transpose(1, 2)) * 0.125 + bias[:, None, :]
    w = torch.exp2(s - s.max(-1, keepdim=True).values)
    ref = (w @ v.float()) / w.sum(-1, keepdim=True)
    assert not torch.isnan(o).any()
    assert ((o - ref).norm() / ref.norm()).item() < 1e-2


def test_triton_matmul_imported_from_ttgir_matches_torch():
    """Triton's matmul (tests/data/ttgir/matmul_sm90.ttgir) through import, solve and emit-cuda; C
    in f16, which Triton truncates it to after the loop."""
    _gemm("triton_matmul_sm90.h100", 512, 384, 1024, seed=11)


@pytest.mark.parametrize("fixture, a_cols, b_cols", [("triton39_mm_acol.h100", True, False),
                                                     ("triton39_mm_bcol.h100", False, True)])
def test_triton_matmul_with_a_column_major_operand_matches_torch(fixture, a_cols, b_cols):
    """Triton 3.9 matmuls whose A (or B) is column-major in memory (tests/data/ttgir/triton39/): the
    import types it as it lies there, K x M (N x K), and the binding takes it so."""
    _gemm(fixture, 384, 256, 640, seed=23, a_cols=a_cols, b_cols=b_cols)


@pytest.mark.parametrize("sm_scale", [0.125, 0.3])
def test_imported_attention_called_with_the_triton_launchs_arguments_only(sm_scale):
    """A held-out attention written with tl.exp(s * sm_scale - m) (bench/heldout/kernels.py attn_exp;
    tests/data/ttgir/heldout2/t36/prepipe/attn_exp_sm90.ttgir, imported, solved for h200): its binding
    called with exactly what the Triton launch passes its kernel (Q, K, V, O, two strides, N_CTX,
    sm_scale) and no exp2_scale: the graph's `knob exp2_scale = sm_scale * log2 e` computes it. Two
    scales, so that a binding that ignored sm_scale fails one."""
    mod = binding("heldout_attn_exp.h200", clean=False)
    torch.manual_seed(5)
    B, H, N, D = 2, 4, 1024, 64
    q, k, v = (torch.randn(B, H, N, D, device="cuda").half() for _ in range(3))
    o = nan(B, H, N, D)
    mod.run(q, k, v, o, q.stride(1), q.stride(2), N, sm_scale)
    torch.cuda.synchronize()
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    ref = torch.softmax(s, -1) @ v.float()
    assert int(torch.isnan(o).sum()) == 0
    assert ((o.float() - ref).norm() / ref.norm()).item() < 1e-2


def _fa3_forward(mod, q, k, v, **knobs):
    """Run an FA3-graph binding on q [BH][Nq][D] and k, v [BH][keys][D] (any number of keys): (O, m,
    l, scale), their NaN fill checked to be overwritten."""
    BH, Nq, D = q.shape
    o, m, l = nan(BH, Nq, D), nan(BH, Nq, dtype=torch.float32), nan(BH, Nq, dtype=torch.float32)
    scale = 1 / math.sqrt(D)
    mod.run(q, k, v, acc=o, m=m, l=l, exp2_scale=scale * LOG2E, **knobs)
    torch.cuda.synchronize()
    assert int(torch.isnan(o).sum() + torch.isnan(m).sum() + torch.isnan(l).sum()) == 0
    return o, m, l, scale


@pytest.mark.parametrize("persistent", [0, 1])
def test_attention_with_head_dimension_64_matches_torch(persistent):
    """tests/data/tir/attention_fwd_d64.tir (the FA3 graph with D = 64), whose schedule is FA3's
    intra-warpgroup overlap with P in two buffers, on both grids."""
    g = _bench()
    BH, N, D = 8, 1024, 64
    torch.manual_seed(64)
    q, k, v = (torch.randn(BH, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    o, _, _, scale = _fa3_forward(binding("attention_fwd_d64.h100"), q, k, v, persistent=persistent)
    assert g.rel_err(o[:2], g.reference_attention(q, k, v, scale, 2)) < 1e-2


@pytest.mark.parametrize("fixture", ["attention_fwd_hopper.h100", "attention_fwd_hopper.h200",
                                     "attention_fwd_hopper_k192.h100"])
@pytest.mark.parametrize("keys", [777, 1000, 1088, 1152])
def test_attention_with_a_partial_last_key_tile_matches_torch(fixture, keys):
    """A number of keys that is not a multiple of the key tile (128 or 192; the h200 schedule holds
    P in two buffers): the binding passes it as Problem::loop_extent. TMA fills the missing rows of
    K and V with zeros and the last S tile's columns past the end are masked to -inf before rowmax
    and exp2; without the mask, exp2 of their zero scores would be summed into l and every output
    row would be too small. 1152 is 6 whole 192-key tiles."""
    g = _bench()
    BH, Nq, D = 4, 512, 128
    torch.manual_seed(keys)
    q = torch.randn(BH, Nq, D, device="cuda", dtype=torch.float16)
    k, v = (torch.randn(BH, keys, D, device="cuda", dtype=torch.float16) for _ in range(2))
    o, m, l, scale = _fa3_forward(binding(fixture), q, k, v)
    assert g.rel_err(o, g.reference_attention(q, k, v, scale, BH)) < 1e-2
    s = q.float() @ k.float().transpose(1, 2)  # m is the raw scores' maximum; l sums exp2((s - m) * c)
    assert g.rel_err(m, s.amax(-1)) < 1e-3  # the running maximum saw only the real keys
    c = scale * LOG2E
    assert g.rel_err(l, torch.exp2((s - s.amax(-1, keepdim=True)) * c).sum(-1)) < 1e-2


def test_gemm_with_a_partial_last_k_tile_matches_torch():
    """A GEMM whose K (1000) is not a multiple of its 64-wide K step: the zero fill past the end
    adds nothing to the accumulators, so no mask is needed (kRagged, no mask_past)."""
    _gemm("gemm_hopper.h100", 256, 512, 1000, seed=1000)


def test_attention_backward_with_a_partial_last_query_tile_matches_torch():
    """The backward loops over 64-row query tiles: with 1000 queries its last tile is partial.
    Q, dO, lse and dlt past the end arrive as zeros and S's rows past the end are masked to -inf
    before P = exp2(S - lse) (a mask along the rows, mask_past<0>), so P, dS and every
    gradient's share of those rows are 0, and dQ's TMA reduction is clipped at the extent. (Here
    the zero fill of dO and dlt alone would already zero those shares: the same kernel without
    the mask also passed on the H200. The forward test above is the one the mask decides.)"""
    g = _bench()
    mod = binding("attention_bwd_hopper.h100")
    BH, Nq, Nk, D = 4, 1000, 512, 128
    torch.manual_seed(Nq)
    q, d_o = (torch.randn(BH, Nq, D, device="cuda", dtype=torch.float16) for _ in range(2))
    k, v = (torch.randn(BH, Nk, D, device="cuda", dtype=torch.float16) for _ in range(2))
    lse, dlt, dq_r, dk_r, dv_r = g.reference_attention_bwd(q, k, v, d_o, BH)
    dq = nan(BH, Nq, D, dtype=torch.float32)  # the binding zeroes it: every key tile's CTA adds its share
    dk, dv = (nan(BH, Nk, D, dtype=g.out_dtype(mod)) for _ in range(2))
    mod.run(k, v, q, d_o, lse.contiguous(), dlt.contiguous(), dq=dq, dk=dk, dv=dv, exp2_scale=LOG2E / math.sqrt(D))
    torch.cuda.synchronize()
    assert int(torch.isnan(dq).sum() + torch.isnan(dk).sum() + torch.isnan(dv).sum()) == 0
    for got, ref in ((dq, dq_r), (dk, dk_r), (dv, dv_r)):
        assert g.rel_err(got, ref) < 1e-2


# -- a partial last tile along the grid's axes (twill/emit/partial.py) --------------------------------

def _inside(shape, dtype=torch.float16, tail=4096):
    """A NaN-filled contiguous tensor of `shape` at the start of a larger buffer, and the buffer: the
    tail past it must still be NaN after the kernel ran (nothing written past the extents)."""
    n = math.prod(shape)
    buf = torch.full((n + tail,), float("nan"), device="cuda", dtype=dtype)
    return buf[:n].view(shape), buf[n:]


@pytest.mark.parametrize("fixture, M, N, K", [
    ("gemm_hopper.h100", 1000, 1096, 1000),  # TMA stores, 128 x 256 tiles: 8 x 5 tiles, both edges partial
    ("gemm_k16n32.h100", 187, 56, 128),  # the threads' own stores (frag_to_global_clip), 64 x 32 tiles
])
def test_gemm_with_partial_last_row_and_column_tiles_matches_torch(fixture, M, N, K):
    g = _bench()
    mod = binding(fixture)
    torch.manual_seed(M + N)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    [out] = [x for x in mod.SPEC["args"] if x["output"]]
    c, tail = _inside((M, N), dtype=getattr(torch, out["dtype"]))
    assert mod.run(a, b, **{out["name"]: c}) is c
    torch.cuda.synchronize()
    assert int(torch.isnan(c).sum()) == 0 and bool(torch.isnan(tail).all())
    assert g.rel_err(c.float(), torch.matmul(a.float(), b.float())) < 1e-2


def test_attention_with_a_partial_last_query_tile_matches_torch():
    """1000 queries in 128-row tiles: the last tile's rows past the end read zeros (TMA), compute a
    softmax of their own, and are written nowhere (O through TMA, m and l by frag_to_buffer_clip)."""
    g = _bench()
    mod = binding("attention_fwd_hopper.h100")
    BH, Nq, keys, D = 4, 1000, 1024, 128
    torch.manual_seed(Nq)
    q = torch.randn(BH, Nq, D, device="cuda", dtype=torch.float16)
    k, v = (torch.randn(BH, keys, D, device="cuda", dtype=torch.float16) for _ in range(2))
    (o, o_tail), (m, m_tail), (l, l_tail) = (_inside((BH, Nq, D)), _inside((BH, Nq), torch.float32),
                                             _inside((BH, Nq), torch.float32))
    scale = 1 / math.sqrt(D)
    mod.run(q, k, v, acc=o, m=m, l=l, exp2_scale=scale * LOG2E)
    torch.cuda.synchronize()
    assert int(torch.isnan(o).sum() + torch.isnan(m).sum() + torch.isnan(l).sum()) == 0
    assert all(bool(torch.isnan(t).all()) for t in (o_tail, m_tail, l_tail))
    assert g.rel_err(o, g.reference_attention(q, k, v, scale, BH)) < 1e-2
    assert g.rel_err(m, (q.float() @ k.float().transpose(1, 2)).amax(-1)) < 1e-3


# -- 8-bit mma inputs (tests/data/tir/gemm_fp8_e4m3.tir, gemm_i8.tir; the corpus fp8 GEMM) --------

@pytest.mark.parametrize("fixture, n, out_dtype, scaled", [
    ("gemm_fp8_e4m3.h100", 256, torch.bfloat16, False),  # two 64-row halves of each 128-row tile
    # Triton's fp8 GEMM as imported, under its own argument names: C = (A B^T) * SCALE_A * SCALE_B
    ("triton_gemm_fp8_sm90.h100", 128, torch.float16, True),
])
def test_fp8_gemm_matches_torch(fixture, n, out_dtype, scaled):
    """e4m3 A [M, K] and B [N, K] (both K-major) through TMA as bytes and wgmma m64nNk32 .e4m3 into
    f32: C = A B^T, written as bf16 or f16, against torch's float32 product of the same fp8 values
    (times the imported kernel's per-tensor scales, which its epilogue multiplies by)."""
    mod = binding(fixture)
    tiles_m, tiles_n, iters = 3, 2, 6
    torch.manual_seed(8)
    a = torch.randn(128 * tiles_m, 128 * iters, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n * tiles_n, 128 * iters, device="cuda").to(torch.float8_e4m3fn)
    c = nan(128 * tiles_m, n * tiles_n, dtype=out_dtype)
    want = torch.matmul(a.float(), b.float().t())
    if scaled:
        sa, sb = (torch.tensor([x], device="cuda") for x in (0.5, 0.25))
        mod.run(A=a, B=b, C=c, SCALE_A=sa, SCALE_B=sb)
        want = want * 0.125
    else:
        mod.run(a, b, acc=c)
    torch.cuda.synchronize()
    assert int(torch.isnan(c).sum()) == 0
    assert _bench().rel_err(c.float(), want) < 1e-2


def test_int8_gemm_is_exact():
    """s8 A [M, K] and B [N, K] through wgmma m64n128k32 .s32.s8.s8: C = A B^T in int32, exactly
    (K = 3072 of values up to 127 in magnitude: sums past 2^24, which a float would round)."""
    mod = binding("gemm_i8.h100")
    tiles_m, tiles_n, iters = 2, 3, 24
    torch.manual_seed(9)
    a = torch.randint(-128, 128, (128 * tiles_m, 128 * iters), device="cuda", dtype=torch.int8)
    b = torch.randint(-128, 128, (128 * tiles_n, 128 * iters), device="cuda", dtype=torch.int8)
    a[:, :] = torch.where(a.abs() < 100, a, torch.full_like(a, 127))  # some rows of large sums
    c = torch.full((128 * tiles_m, 128 * tiles_n), -2 ** 31, device="cuda", dtype=torch.int32)
    mod.run(a, b, acc=c)
    torch.cuda.synchronize()
    want = (a.double() @ b.double().t()).to(torch.int64)
    assert torch.equal(c.to(torch.int64), want)


# -- grouped-query attention (twill/emit/batch_groups.py) ----------------------------------------

@pytest.mark.parametrize("group", [1, 4, 8])
def test_grouped_query_attention_matches_torch(group):
    """Q [B, Hq, N, D] over K, V [B, Hkv, N, D] with Hq = group x Hkv (8: MQA here): the binding
    reads the group off the heads and query head h reads K/V head h // group."""
    g = _bench()
    B, Hq, N, D = 2, 8, 512, 128
    torch.manual_seed(group)
    q = torch.randn(B, Hq, N, D, device="cuda", dtype=torch.float16)
    k, v = (torch.randn(B, Hq // group, N, D, device="cuda", dtype=torch.float16) for _ in range(2))
    mod = binding("attention_fwd_hopper.h200")
    o = nan(B, Hq, N, D)
    scale = 1 / math.sqrt(D)
    mod.run(q, k, v, acc=o, exp2_scale=scale * LOG2E)
    torch.cuda.synchronize()
    kk, vv = (x.repeat_interleave(group, dim=1).reshape(B * Hq, N, D) for x in (k, v))
    want = g.reference_attention(q.reshape(B * Hq, N, D), kk, vv, scale, B * Hq)
    assert g.rel_err(o.reshape(B * Hq, N, D), want) < 1e-2


# -- FP8 attention (examples/attention_fwd_fp8_hopper.tir) ----------------------------------------

def _fp8(x):
    """x as e4m3 with a per-tensor descale factor s (x ~ x8 * s, amax at 448)."""
    s = float(x.abs().amax()) / 448.0
    return (x / s).to(torch.float8_e4m3fn), s


def test_fp8_attention_matches_torch():
    """e4m3 Q, K and V^T (keys contiguous) with per-tensor descales: exp2_scale carries Q's and K's,
    out_scale V's. Against the float32 attention of the same e4m3 values (P's rounding to e4m3
    costs about 2%), and tighter against that attention with P rounded to e4m3 as the kernel does
    (a wrong shuffle into the A fragment would pair keys with other keys' V rows)."""
    g = _bench()
    BH, N, D = 4, 1024, 128
    torch.manual_seed(88)
    (q8, sq), (k8, sk), (v8, sv) = (_fp8(torch.randn(BH, N, D, device="cuda")) for _ in range(3))
    mod = binding("attention_fwd_fp8_hopper.h200")
    scale = 1 / math.sqrt(D)
    o = nan(BH, N, D)
    mod.run(q8, k8, v8.transpose(1, 2).contiguous(), acc=o, exp2_scale=scale * LOG2E * sq * sk, out_scale=sv)
    torch.cuda.synchronize()
    assert int(torch.isnan(o).sum()) == 0
    q, k, v = q8.float() * sq, k8.float() * sk, v8.float() * sv
    assert g.rel_err(o, g.reference_attention(q, k, v, scale, BH)) < 5e-2
    assert g.rel_err(o, _fp8_online_softmax(q, k, v, scale)) < 1e-2


def _fp8_online_softmax(q, k, v, scale, block=128):
    """The kernel's arithmetic in float32: per 128-key block, P = exp(s - running max) rounded to
    e4m3 for P V, the row sums of the unrounded P."""
    m = torch.full(q.shape[:-1] + (1,), -float("inf"), device=q.device)
    acc, l = torch.zeros_like(q), torch.zeros_like(m)
    for j in range(0, k.shape[1], block):
        s = (q @ k[:, j:j + block].transpose(1, 2)) * scale
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p, alpha = torch.exp(s - m_new), torch.exp(m - m_new)
        acc = acc * alpha + p.to(torch.float8_e4m3fn).float() @ v[:, j:j + block]
        l, m = l * alpha + p.sum(-1, keepdim=True), m_new
    return acc / l


# -- FlashAttention's backward (bench/attention_features.py, flash_backward) -----------------------

def test_flashattention_backward_from_the_forward_matches_autograd():
    """twill's forward gives O, m, l; FlashAttention's steps around its main kernel (lse, Delta,
    Q and dQ scaled by 1/sqrt(D)) feed examples/attention_bwd_hopper.tir's kernel, whose CTAs add
    dQ across key blocks: dQ, dK, dV against float32 autograd of softmax(Q K^T / sqrt(D)) V."""
    g = _bench()
    feats = g.features()
    B, H, N, D = 1, 4, 512, 128
    torch.manual_seed(5)
    q, k, v, d_o = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(4))
    scale = 1 / math.sqrt(D)
    out = binding("attention_fwd_hopper.h200").run(q, k, v, exp2_scale=scale * LOG2E)
    grads = feats.flash_backward(binding("attention_bwd_hopper.h100"), q, k, v, out.acc, out.m, out.l, d_o, scale)
    torch.cuda.synchronize()
    for got, want in zip(grads, feats.reference_backward(q, k, v, d_o, scale, H)):
        assert g.rel_err(got[0], want) < 1e-2


# gemm_chain's second loop (two register-A wgmmas on one warpgroup) was wrong from its second iteration
# until session 33: ptxas gave the loop-invariant A fragment h's registers to the convert (sm90.cuh,
# remake_frag; docs/triton-results.md, session 33).
@pytest.mark.parametrize("fixture, size", [("gemm_chain_sm90.h200", dict(M=256, K1=192, N2=320)),
                                           ("attn_two_pass_sm90.h200", dict(N=256, N_KV=192)),
                                           ("row_var_sm90.h200", dict(M=256, N=4096))])
def test_loops_in_sequence_match_torch(fixture, size):
    """A kernel of two loops in sequence (tests/golden/seq: bench/seq/kernels.py imported, each loop
    solved for the H200, emitted as its own kernel, the binding K.py running them in order and handing
    the first loop's carries to the second): against the fp32 reference, beside Triton's own kernel."""
    spec = importlib.util.spec_from_file_location("seq_gpu_check", os.path.join(ROOT, "bench", "seq", "gpu_check.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    r = mod.check(fixture, size)
    assert r["finite"] and r["twill_rel_err"] < 1e-2, r


# -- loops in sequence as one kernel (emit/seqfuse.py) -----------------------------------------------------

SEQFUSE = os.path.join(ROOT, "tests", "golden", "seqfuse")  # tests/test_seqfuse.py keeps them golden


@pytest.mark.parametrize("rows, cols", [(1000, 1000), (4096, 1024), (256, 4096), (1000, 781)])
def test_layernorms_one_kernel_matches_torch(rows, cols):
    """The held-out LayerNorm's three loops (batch 7) as one kernel: mean, rstd and y against torch in fp32, the
    one kernel (fused=True, each loop one split), the loops one kernel each (fused=False, each loop's own column
    split where its row tiles leave SMs idle) and the default (fused=None, no fallback's warning) alike; a partial
    last row tile (1000) and column tile (1000; 781, whose f16 rows of 1562 bytes are staged for TMA: fused=True
    then runs the loops one kernel each, NotDeferred, before any launch). Session 36's H100 run failed here: the
    one kernel's blocks asked for the loops' own splits, which its entry refuses (cudaErrorInvalidValue)."""
    mod = _bench().load_binding("layernorm_fwd_sm90.h200", SEQFUSE)
    assert mod.FUSED is not None and _spills_of(mod)[-1] == []  # the one kernel's library (built last)
    g = torch.Generator(device="cuda").manual_seed(rows + cols)
    x = (torch.randn(rows, cols, device="cuda", generator=g) + 0.5).to(torch.float16)
    w = torch.randn(cols, device="cuda", generator=g)
    b = torch.randn(cols, device="cuda", generator=g)
    mean, rstd, y = mod.run(N=cols, X=x, eps=1e-5, W=w, B=b, fused=True)
    xf = x.float()
    want_mean, want_rstd = xf.mean(-1), 1 / torch.sqrt(xf.var(-1, unbiased=False) + 1e-5)
    want_y = (xf - want_mean[:, None]) * want_rstd[:, None] * w + b
    for got, want in ((mean, want_mean), (rstd, want_rstd), (y.float(), want_y)):
        assert torch.isfinite(got).all() and ((got - want).norm() / want.norm()).item() < 1e-2
    again = mod.run(N=cols, X=x, eps=1e-5, W=w, B=b, fused=True)
    assert all(torch.equal(a, c) for a, c in zip(again, (mean, rstd, y)))
    with warnings.catch_warnings():  # the default (the one kernel for short rows) with no fallback's warning
        warnings.simplefilter("error")
        default = mod.run(N=cols, X=x, eps=1e-5, W=w, B=b)
    assert all(((a.float() - c.float()).norm() / c.float().norm()).item() < 1e-3 for a, c in zip(default, (mean, rstd, y)))
    apart = mod.run(N=cols, X=x, eps=1e-5, W=w, B=b, fused=False)
    assert all(((a.float() - c.float()).norm() / c.float().norm()).item() < 1e-3 for a, c in zip(apart, (mean, rstd, y)))


def _spills_of(mod):
    """ptxas's spill lines of each library a sequence's binding builds (its loops', then the one kernel's)."""
    out = []
    for so in mod.build_library():
        with open(so + ".log") as f:
            out.append(mod._module(mod.LOOPS[0][1]).spills(f.read()))
    return out


# -- a row loop split by columns whose epilogue reads its carries (emit/fixup.py) ---------------------------

FIXUP = os.path.join(ROOT, "tests", "golden", "fixup")  # tests/test_fixup.py keeps them golden


@pytest.mark.parametrize("rows, vocab", [(1000, 32000), (1000, 32008), (4096, 32000), (64, 1024)])
def test_the_column_split_cross_entropy_matches_torch(rows, vocab):
    """cross_entropy_fwd (held-out batch 6) split by columns, its splits' (m, l) combined in the kernel by the last
    to arrive, which computes LOSS = lse - x[target] and LSE: even splits (32000: 250 tiles of 128), uneven ones
    (32008: the last split takes the partial tile), the rows filling the SMs (4096) and one split (64 x 1024);
    twice, bit for bit (the combine runs in split order whichever split comes last)."""
    mod, spills = _bench().build_binding("cross_entropy_fwd_sm90.h200", FIXUP)
    assert spills == []
    g = torch.Generator(device="cuda").manual_seed(rows + vocab)
    x = (torch.randn(rows, vocab, device="cuda", generator=g) * 4).to(torch.bfloat16)
    t = torch.randint(0, vocab, (rows,), device="cuda", generator=g).to(torch.int32)
    loss, lse = mod.run(x, t, None, None, x.stride(0), vocab)
    want_lse = torch.logsumexp(x.float(), 1)
    want = want_lse - x.float().gather(1, t.long()[:, None])[:, 0]
    assert ((lse - want_lse).norm() / want_lse.norm()).item() < 1e-5
    assert ((loss - want).norm() / want.norm()).item() < 1e-5
    again = mod.run(x, t, None, None, x.stride(0), vocab)
    assert torch.equal(again[0], loss) and torch.equal(again[1], lse)


# -- persistent grids with any loop count (ring positions continue across a CTA's tiles) -------------

PERSIST = os.path.join(ROOT, "bench", "persist")  # the --tile-copies GEMM and its plain twin (bench/persist_bench.py)


@pytest.mark.parametrize("K", [64 * 17, 64 * 9, 1096])
@pytest.mark.parametrize("persistent", [0, 1])
def test_persistent_gemm_with_any_loop_count_matches_torch(K, persistent):
    """256 tiles of 128 x 256 over the SMs: 17 and 9 K steps (no multiple of kPhasePeriod = 8: the
    launcher ran such loops one CTA per tile before), and K = 1096 (18 steps, the last partial)."""
    _gemm("gemm_hopper.h100", 128 * 16, 256 * 16, K, seed=K + persistent, persistent=persistent)


@pytest.mark.parametrize("fixture", ["gemm_halves.h100", "gemm_halves_copies.h100"])
@pytest.mark.parametrize("K", [64 * 17, 1096])
def test_tile_copies_with_any_loop_count_match_torch(fixture, K):
    """bench/persist's GEMM (two 64-row halves, one computing warpgroup) with --tile-copies: two
    warpgroups take a persistent CTA's tiles in turn, at 17 K steps and at a partial 18th."""
    g = _bench()
    mod, spills = g.build_binding(fixture, PERSIST)
    assert spills == [], spills
    torch.manual_seed(K)
    a = torch.randn(128 * 24, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, 128 * 24, device="cuda", dtype=torch.float16)
    for persistent in (1, 0):
        c = mod.halves(a, b, acc=nan(128 * 24, 128 * 24), persistent=persistent)
        torch.cuda.synchronize()
        assert int(torch.isnan(c).sum()) == 0, persistent
        assert g.rel_err(c.float(), torch.matmul(a.float(), b.float())) < 1e-2, persistent
