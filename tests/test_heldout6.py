"""The sixth held-out batch (bench/heldout/kernels6.py, dumped by `bench/heldout/gen.py --module kernels6`
with Triton 3.9 and 3.6, before and after the pipeliner, sm_90 and sm_100: tests/data/ttgir/heldout6):
the FlashAttention-2 backward dK/dV kernel, attention with dropout (tl.rand), attention with a loaded
boolean mask, a GEMM accumulating in fp16, a batched GEMM whose B is broadcast over the batch, a GEMM
storing C transposed, LayerNorm in two loops, a cross-entropy forward, a fused-MoE GEMM, a GPTQ-style
int4 GEMM.

- every form of a kernel imports to the graph of its first form, or is refused with a located error
  naming the construct (`REFUSED`), never a traceback;
- the silent-wrong imports the batch showed, each now refused at its line, with its near miss that
  still imports;
- the dump that imports goes import -> solve -> verify -> emit-cuda -> nvcc with no spill.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from conftest import nvcc, nvcc_compile, refused_at_its_line
from twill.emit import emit_cuda
from twill.errors import InputError
from twill.knobs import Product
from twill.machine import load_machine
from twill.pipeline import SolveOptions, solve
from twill.tir import print_tir
from twill.ttgir import import_ttgir, load_ttgir
from twill.verify import verify

DATA = Path(__file__).parent / "data" / "ttgir" / "heldout6"
CORPUS = Path(__file__).parent / "data" / "ttgir" / "corpus"
FORMS = ("t39/prepipe", "t39/after", "t36/prepipe", "t36/after")
NAMES = sorted(p.stem for p in (DATA / "t36" / "prepipe").glob("*.ttgir"))

DIVISION = "integer division of the tile's indices"
# kernel -> (a regex of the TTGIR op the import stops at, a regex of what the message says): every form
REFUSED = {
    # P^T = exp2(K Q^T * qk_scale - M[None, :]) with M loaded per query block in the loop: the graph's
    # exp2 would scale M too (it imported as `exp2 qkT, m`; the kernel's `// BLOCK_M` bound is refused
    # as well, but the scale is met first)
    "attn_bwd_dkdv": (r"arith\.subf", "no row maximum of the scores"),
    # (attn_dropout imports since session 39: keep = tl.rand(seed, offsets) > p, the `rand` of the scores' tile,
    # tests/test_rand.py; its sm_100 forms after the pipeliner are FORM_REFUSED)
    # (attn_bool_mask imports since session 38: `select ne mk, qk {scalar = -1000000}`; its sm_100 forms after the
    # pipeliner are FORM_REFUSED)
    # tl.dot(a, b, acc, out_dtype=tl.float16) on sm_100: tcgen05's f16 D lies unpacked in tensor memory
    # (its sm_90 dumps import since session 38: wgmma's f16 accumulators)
    "gemm_fp16_acc_sm100": (r"tc_gen5_mma", "in tensor memory"),
    # (gemm_store_ct, C + offs_n[None, :] * stride_cn + offs_m[:, None], imports since session 38: the
    # carry's {column_major = true} output)
    # two column loops one after the other
    "layernorm_2loop": (r"scf\.for", "2 tile loops one after the other"),
    # (cross_entropy_fwd imports since session 32: the online pair, then the target's logit an epilogue
    # `gather x, TARGET`, docs/ttgir-import.md section 8; tests/test_gather.py)
    # A's rows through sorted_token_ids, B's expert through expert_ids
    "fused_moe": (r"tt\.load|async_copy_global_to_local", "computed from a value loaded from memory"),
    # QW + (offs_k // 2) * stride_qk: two K rows per byte (the pipeliner's copy before the loop too)
    "gemm_gptq_int4": (r"tt\.load|async_copy_global_to_local", DIVISION),
}

# (dump, form) -> (a regex of the TTGIR op the import stops at, a regex of what the message says): one form's refusal
FORM_REFUSED = {
    # tl.where(mask != 0, qk, -1e6): sm_100's pipeliner peels the first block's softmax before the loop, and the
    # running max then starts from it
    **{("attn_bool_mask_sm100", f"{t}/after"): (r"scf\.for", "starts from a value computed before the loop")
       for t in ("t39", "t36")},
    # attention with dropout: sm_100's pipeliner peels the first block's P V before the loop, from a P the peeled
    # draw dropped; the accumulator then starts from it (the draw itself is read: tests/test_rand.py)
    **{("attn_dropout_sm100", f"{t}/after"): (r"ttng\.tmem_alloc", "starts from a value computed before the loop")
       for t in ("t39", "t36")},
}


def _key(name: str) -> str:
    return name.rsplit("_sm", 1)[0]


def _read(form: str, name: str) -> str:
    return (DATA / form / f"{name}.ttgir").read_text()


def _refused_at(text: str, path: str, match: str) -> str:
    """The TTGIR line an import of `text` stops at, with a message matching `match`."""
    with pytest.raises(InputError, match=match) as err:
        import_ttgir(text, path)
    return text.splitlines()[err.value.diagnostics[0].span.line - 1]


def test_the_batch_is_all_there():
    assert len(NAMES) == 20
    for name in NAMES:
        assert all((DATA / f / f"{name}.ttgir").exists() for f in FORMS), name


@pytest.mark.parametrize("name", NAMES)
def test_every_form_imports_to_one_graph_or_is_refused_at_its_line(name):
    first = None
    for form in FORMS:
        path = DATA / form / f"{name}.ttgir"
        refused = FORM_REFUSED.get((name, form)) or REFUSED.get(name, REFUSED.get(_key(name)))
        if refused is not None:
            refused_at_its_line(path, *refused)
            continue
        graph, notes = load_ttgir(path)
        assert not [n for n in notes if "no epilogue" in n.message or "folded away" in n.message]
        text = print_tir(graph)
        first = first or text
        assert text == first, form


def _store_ct(arch: str = "sm90", form: str = "t36/prepipe"):
    return load_ttgir(DATA / form / f"gemm_store_ct_{arch}.ttgir", split_rows="auto")[0]


def test_a_transposed_store_of_the_accumulator_is_its_column_major_output():
    """gemm_store_ct writes C^T (`C + offs_n[None, :] * stride_cn + offs_m[:, None]`, C [N, M]): once the
    plain GEMM's graph (C taken as [M, N]), then an error at the store; now the carry's
    `{output = bf16, column_major = true}` in every form. Its near miss, the same GEMM storing row-major
    (bmm_bcast_b), has no such attribute."""
    for form in FORMS:
        for arch in ("sm90", "sm100"):
            g = _store_ct(arch, form)
            assert g.carries and all(c.column_major and c.output_dtype == "bf16" for c in g.carries), (form, arch)
            assert dict(g.arguments)["C"] == "acc"
    g, _ = load_ttgir(DATA / "t39/prepipe/bmm_bcast_b_sm90.ttgir")
    assert [op.opcode for op in g.ops] == ["load", "load", "mma"] and not any(c.column_major for c in g.carries)


def test_a_transposed_store_of_a_value_computed_after_the_loop_is_still_an_error():
    """Only a carry (or it converted) is written transposed: C^T of acc * 2 stays the error at the store."""
    text = _read("t36/prepipe", "gemm_store_ct_sm90")
    trunc = re.search(r"(%\w+) = arith\.truncf (%acc_\w+#0) : tensor<128x128xf32, #mma> to", text)
    doubled = text.replace(trunc.group(0), f"%dbl = arith.addf {trunc.group(2)}, {trunc.group(2)} : "
                           "tensor<128x128xf32, #mma> loc(#loc35)\n    " + trunc.group(0).replace(trunc.group(2), "%dbl"))
    line = _refused_at(doubled, "ct.ttgir", r"writes its tile transposed.*only a carry")
    assert "tt.store" in line


def test_the_transposed_store_computes_the_kernels_formula():
    """The graph run in numpy (each part's mma from 0 over K) and emit-cuda's store written out in
    Python: tensor C is the argument's layout [N, M] (tile [128, 64] per part, axes (n, m)), each part's
    tile origin (tile.n * 128, tile.m * 128 + 64 * part) and element (r, c) of the value at
    dst[c * ld + r], ld = M (frag_to_global_t): C is (A @ B)^T, as the kernel's reference, on a 2 x 3 grid
    with the last tiles partial (the _clip form: rows < M - m0, columns < N - n0)."""
    import numpy as np
    from twill.emit import build_model
    g = _store_ct()
    model = build_model(solve(g, load_machine("h200"), SolveOptions(time_limit=20)), load_machine("h200"))
    outs = [t for t in model.tensors if t.kind == "output"]
    assert [(t.tile, t.axes, t.column_major) for t in outs] == [((128, 64), ("n", "m"), True)] * 2
    rng = np.random.default_rng(66)
    M, N, K, bk = 200, 300, 256, 64
    a, b = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    C = np.full(N * M, np.nan)
    loads = [op for op in g.ops if op.opcode == "load"]
    for tm in range(-(-M // 128)):
        for tn in range(-(-N // 128)):
            ap = np.zeros((128, K)); bp = np.zeros((K, 128))  # TMA's zero fill past the ends
            ap[:min(128, M - tm * 128)] = a[tm * 128:tm * 128 + 128]
            bp[:, :min(128, N - tn * 128)] = b[:, tn * 128:tn * 128 + 128]
            env = {c.name: np.zeros(c.type.shape) for c in g.carries}
            for k in range(0, K, bk):
                it = dict(env)
                it[loads[0].name], it[loads[1].name] = ap[:64, k:k + bk], ap[64:, k:k + bk]
                it[loads[2].name] = bp[k:k + bk]
                for op in (o for o in g.ops if o.opcode == "mma"):
                    x, y, c = (it[o.name] for o in op.operands)
                    it[op.name] = x @ y + c
                env.update({carry: it[src] for carry, src in g.yields})
            for part, carry in enumerate(c.name for c in g.carries):
                r0, c0 = tn * 128, tm * 128 + 64 * part  # the transposed tensor's tile origin (stores._origin)
                dst = r0 * M + c0
                for r in range(64):
                    for c in range(128):
                        if r < M - c0 and c < N - r0:  # frag_to_global_t_clip's guard
                            C[dst + c * M + r] = env[carry][r, c]
    assert np.allclose(C.reshape(N, M), (a @ b).T)


def test_the_transposed_output_binds_c_as_n_by_m(tmp_path):
    """The binding takes the user's C as [N, M] (the kernel's `ct = torch.empty((N, M))`), its row pitch M,
    and refuses C as [M, N] (M != N), which the plain GEMM's binding took."""
    from twill.emit import build_model
    from twill.emit.binding import binding_files
    machine = load_machine("h200")
    model = build_model(solve(_store_ct(), machine, SolveOptions(time_limit=20)), machine)
    for path, text in binding_files(model, str(tmp_path / "ct.cu")).items():
        Path(path).write_text(text)
    spec = importlib.util.spec_from_file_location("ct", tmp_path / "ct.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    M = mod.Meta
    a, b = M((512, 1024), "bfloat16", "cuda:0", True, 0), M((1024, 768), "bfloat16", "cuda:0", True, 0)
    c = next(x for x in mod.SPEC["args"] if x["name"] == "C")
    assert c["output"] and c["dims"] == [["n", 128], ["m", 128]]
    got = mod.resolve(mod.SPEC, {"A": a, "B": b, "C": M((768, 512), "bfloat16", "cuda:0", True, 0)})
    assert (got["tiles_m"], got["tiles_n"]) == (4, 6)
    names = [x["name"] for x in mod.SPEC["args"]]
    assert got["layouts"][names.index("C")][:2] == ("as is", 512)
    with pytest.raises(Exception, match="N = 512"):
        mod.resolve(mod.SPEC, {"A": a, "B": b, "C": M((512, 768), "bfloat16", "cuda:0", True, 0)})


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
def test_the_transposed_store_compiles_clean_for_sm90(tmp_path):
    """The one nvcc build of the transposed store in CI: frag_to_global_t (and _clip) in the epilogue, no
    spill, no serialized wgmma."""
    machine = load_machine("h200")
    cu = emit_cuda(solve(_store_ct(), machine, SolveOptions(time_limit=20)), machine)
    assert cu.count("twill::frag_to_global_t(dst, f, row0,") == 2 and "frag_to_global_t_clip(dst" in cu
    src = tmp_path / "ct.cu"
    src.write_text(cu)
    rc, err = nvcc_compile(src, ["-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v"])
    assert rc == 0, err[-2000:]
    assert {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)} <= {0}, err[-2000:]
    assert not re.search(r"C75\d\d|serialized", err), err[-2000:]


def test_a_select_of_a_loaded_mask_with_a_constant_side_is_the_selects_scalar():
    """`tl.where(mk != 0, qk, -1e6)` of a loaded [N, N] mask: the node listed its tiles only
    (`select qk_arith_cmpi, qk_mul`, the -1e6 gone, which twill solve then refused at the .tir's
    line); the import then stopped at the select. Now the select holds its constant side as its
    {scalar = V} and its condition is the table's `ne` of the loaded mask; a numpy evaluation of the
    three ops is the kernel's `where`. (The index mask against -inf of one-loop causal attention,
    batch 5, is still the `causal_mask` node.)"""
    import numpy as np
    for form in FORMS:
        g, _ = load_ttgir(DATA / form / "attn_bool_mask_sm90.ttgir")
        ops = {op.name: op for op in g.ops}
        sel = next(op for op in g.ops if op.opcode == "select")
        assert sel.attr("scalar") == -1000000 and len(sel.operands) == 2, form
        cond = ops[sel.operands[0].name]
        assert (cond.opcode, cond.attr("scalar"), ops[cond.operands[0].name].type.dtype) == ("ne", 0, "i8"), form
        assert [op.opcode for op in g.ops if op.name in (r.name for r in ops["m_ij"].operands)] == ["select"], form
    rng = np.random.default_rng(0)
    qk, mk = rng.standard_normal((128, 64)).astype(np.float32), rng.integers(-2, 3, (128, 64)).astype(np.int8)
    c = (mk != cond.attr("scalar")).astype(np.float32)  # ne: 1 where it holds
    got = np.where(c != 0, qk, np.float32(sel.attr("scalar")))  # select cond, a {scalar = b}
    assert np.array_equal(got, np.where(mk != 0, qk, np.float32(-1.0e6)))
    g, _ = load_ttgir(DATA.parent / "heldout5" / "t39" / "prepipe" / "attn_causal_oneloop_sm90.ttgir")
    assert any(op.opcode == "causal_mask" for op in g.ops)


def _bool_mask(form: str = "t36/prepipe"):
    return load_ttgir(DATA / form / "attn_bool_mask_sm90.ttgir", split_rows="auto")[0]


def test_the_scale_under_the_select_moves_past_it_into_the_exp2():
    """`qk = tl.dot(q, k) * qk_scale; tl.where(mk != 0, qk, -1e6)`: the select sat between the scale and the exp2,
    so the scale stayed two `mul` ops (and the split-rows graph 26 loop ops). The scale now moves past the select,
    select(c, x * s, K) == select(c, x, K / s) * s, and folds into exp2_scale: the plain attention's graph plus the
    mask's load, `ne` and `select qk_ne, qk {scalar = -1000000, divided_by = exp2_scale}` (K / exp2_scale). In
    numpy: the tile side is unchanged bit for bit, the constant side fl(fl(K / s) * s) within an ulp of K (K itself
    for s a power of two), and the softmax computed from the folded graph the kernel's to f32 rounding, its masked
    elements 0 as the kernel's."""
    import numpy as np
    for form in FORMS:
        g = _bool_mask(form)
        assert dict(g.knobs)["exp2_scale"].same(Product(1.44269502, (("sm_scale", 1),))), form
        assert not [op for op in g.ops if op.opcode == "mul"], form
        sels = [op for op in g.ops if op.opcode == "select"]
        assert len(sels) == 2 and all(dict(op.attrs) == {"scalar": -1000000, "divided_by": "exp2_scale"} for op in sels)
        ops = {op.name: op for op in g.ops}
        assert all(ops[op.operands[1].name].opcode == "mma" for op in sels), form
        assert len(g.ops) == 22, form
    assert "knob exp2_scale = sm_scale * 1.44269502" in print_tir(_bool_mask())
    rng = np.random.default_rng(21)
    f = np.float32
    x = (rng.standard_normal((64, 64)) * 8).astype(f)
    c = rng.random((64, 64)) < 0.7
    c[:, 0] = True
    k = f(-1.0e6)
    for s in (f(0.125 * 1.44269504), f(1.44269504 / 8.0 ** 0.5), f(0.5)):
        kernel = np.where(c, x * s, k)  # tl.where(c, x * s, K)
        moved = np.where(c, x, k / s) * s  # select(c, x, K / s) * s
        assert np.array_equal(kernel[c], moved[c])
        assert np.all(np.abs(moved[~c] - k) <= np.abs(np.spacing(k)))
        if s == f(0.5):
            assert np.array_equal(kernel, moved)
        m = kernel.max(1)  # the kernel's softmax, exp2(qk * s - m)
        p_kernel = np.exp2(kernel - m[:, None])
        sel = np.where(c, x, k / s)  # the graph's: exp2((sel - rowmax(sel)) * exp2_scale)
        p_graph = np.exp2((sel - sel.max(1)[:, None]) * s)
        assert np.allclose(p_graph, p_kernel, rtol=1e-5, atol=0) and np.all(p_graph[~c] == 0) and np.all(p_kernel[~c] == 0)


@pytest.mark.extended  # (CI's time: 12 s; its import, the scale folded and the bits are checked without nvcc)
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
def test_the_bool_mask_attention_solves_emits_and_compiles_for_sm90(tmp_path):
    """import (split rows, as bench/heldout/run.py) -> the joint solve, proven optimal -> emit-cuda -> nvcc sm_90a:
    the select's constant side is K / exp2_scale, no serialized wgmma; the `ne` tiles, read only as the selects'
    conditions, are held as bits (one register a thread, emit/bitmasks.py). (ptxas still spills 4 bytes at the
    kernel's 168-register launch cap, and not for the comparison: with no comparison or select at all in the .cu,
    the mask's ring alone, it spills the same 4 bytes.)"""
    machine = load_machine("h100")
    sol = solve(_bool_mask(), machine, SolveOptions(time_limit=60))
    assert sol.optimal
    cu = emit_cuda(sol, machine)
    assert "(-1000000.0f / args.exp2_scale)" in cu
    assert "twill::Bits<1, 64> qk_ne0[1];" in cu and "twill::Bits<1, 64> qk_ne1[1];" in cu
    src = tmp_path / "bm.cu"
    src.write_text(cu)
    rc, err = nvcc_compile(src, ["-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v"])
    assert rc == 0, err[-2000:]
    assert not re.search(r"C75\d\d|serialized", err), err[-2000:]
    assert {int(n) for n in re.findall(r"(\d+) bytes spill stores", err)} <= {0, 4}, err[-2000:]


def _ceil_bound(text: str) -> str:
    """dK/dV's loop `range(0, N_CTX // BLOCK_M)` made `range(0, tl.cdiv(N_CTX, BLOCK_M))`."""
    out = re.sub(r"arith\.divsi %N_CTX, %c64_i32", "arith.ceildivsi %N_CTX, %c64_i32", text, count=1)
    assert out != text
    return out


def test_a_logsumexp_loaded_in_the_loop_is_an_error_at_the_subtraction():
    """dK/dV recomputes P^T = exp2(K Q^T * qk_scale - M[None, :]) with M (the forward's base-2
    logsumexp, in the kernel's scaled units) loaded per query block. With the loop bound written
    with cdiv the import gave `pT = exp2 qkT, m` and `exp2_scale = sm_scale * 1.44`: emit-cuda
    computes exp2((qkT - m) * exp2_scale), scaling M too (a wrong P, compiled clean). Now the error at
    the subtraction. The near miss: dQ's `lse2` loaded BEFORE the loop is divided by exp2_scale in the
    prologue and imports (corpus attn_bwd_dq)."""
    for form in FORMS:
        for arch in ("sm90", "sm100"):
            text = _ceil_bound(_read(form, f"attn_bwd_dkdv_{arch}"))
            line = _refused_at(text, "dkdv.ttgir", "subtracts a value that is no row maximum of the scores")
            assert "arith.subf" in line, (form, arch, line)
    for form in ("prepipe", "after"):
        g, _ = load_ttgir(CORPUS / form / "attn_bwd_dq_sm100.ttgir")
        pro = [(op.opcode, [o.name for o in op.operands]) for op in g.prologue.ops]
        assert ("div", ["lse2", "exp2_scale"]) in pro, form


def _fp16_acc(form: str = "t36/prepipe"):
    return load_ttgir(DATA / form / "gemm_fp16_acc_sm90.ttgir", split_rows="auto")[0]


def test_an_f16_accumulator_imports_on_sm90_and_is_refused_in_tensor_memory():
    """`tl.dot(a, b, acc, out_dtype=tl.float16)`: on sm_90 the accumulator stays f16 in the graph (the carry and
    the mma's result f16, which emit-cuda issues as wgmma's .f16.f16.f16); on sm_100 the import stops at the
    tcgen05 mma (a 16-bit D is one value a 32-bit tensor-memory column, which the graph's @tmem footprint and
    emit-cuda's reads do not take). Its f32 near miss is every other GEMM here."""
    g = _fp16_acc()
    assert [(op.opcode, op.type.dtype) for op in g.ops] == [("load", "f16")] * 3 + [("mma", "f16")] * 2
    assert {c.type.dtype for c in g.carries} == {"f16"} and all(c.init in (0, 0.0, "0") for c in g.carries)
    for form in FORMS:
        line = _refused_at(_read(form, "gemm_fp16_acc_sm100"), "acc.ttgir", "in tensor memory")
        assert "ttng.tc_gen5_mma" in line, form


def test_the_f16_accumulating_graph_computes_the_kernels_formula():
    """The import's graph run in numpy (the carry from 0, each iteration's mma rounded to its result's f16, the
    carry stored as it is) is the kernel's loop, acc = f16(acc + A_k @ B_k) per 64-wide K block, exactly; both
    are A @ B to f16 accumulation's error (128 x 128 x 512)."""
    import numpy as np
    g, _ = load_ttgir(DATA / "t36/prepipe/gemm_fp16_acc_sm90.ttgir")
    rng = np.random.default_rng(64)
    a = (rng.standard_normal((128, 512)) * 0.5).astype(np.float16)
    b = (rng.standard_normal((512, 128)) * 0.5).astype(np.float16)
    feeds = dict(g.arguments)
    env = {c.name: np.zeros(c.type.shape, np.float16) for c in g.carries}
    assert feeds["C"] in env and [c.type.dtype for c in g.carries] == ["f16"]
    bk = 64
    for k in range(0, 512, bk):
        it = dict(env)
        it[feeds["A"]], it[feeds["B"]] = a[:, k:k + bk], b[k:k + bk]
        for op in g.ops:
            if op.opcode == "mma":
                x, y, c = (it[o.name] for o in op.operands)
                assert op.type.dtype == "f16"
                it[op.name] = (x.astype(np.float64) @ y.astype(np.float64) + c).astype(np.float16)
            else:
                assert op.opcode == "load" and op.name in (feeds["A"], feeds["B"])
        env.update({carry: it[src] for carry, src in g.yields})
    got = env[feeds["C"]].astype(np.float64)
    want = np.zeros((128, 128), np.float16)
    for k in range(0, 512, bk):  # the kernel's formula
        want = (a[:, k:k + bk].astype(np.float64) @ b[k:k + bk].astype(np.float64) + want).astype(np.float16)
    assert np.array_equal(got, want.astype(np.float64))
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert np.allclose(got, exact, rtol=0, atol=8 * 2.0 ** -10 * np.abs(exact).max())


def test_an_f16_accumulator_costs_the_f32_ones_cycles_in_half_the_registers():
    """specs/h200.yaml's mma rate is the operands' (bits = a's width): the f16-accumulating mma of the same shape
    takes the f32 one's cycles (bmm_bcast_b: 64 x 128 x 64 of f16), and its result half the bytes."""
    from twill.costs import bind
    machine = load_machine("h200")
    f32, _ = load_ttgir(DATA / "t36/prepipe/bmm_bcast_b_sm90.ttgir", split_rows="auto")
    f16 = _fp16_acc()
    costs = [{c.name: c for c in bind(g, machine)}["acc_new0"] for g in (f16, f32)]
    assert costs[0].cycles == costs[1].cycles > 0 and costs[0].occupancy == costs[1].occupancy
    assert costs[0].bytes * 2 == costs[1].bytes == 64 * 128 * 4


def test_an_f16_accumulator_is_wgmmas_f16_form_and_not_tcgen05s():
    """emit-cuda issues wgmma.mma_async m64n128k16.f16.f16.f16 into the result's Frag16 words (N / 4 = 32
    registers of two f16, the adjacent columns 2k, 2k + 1 of an f32 fragment's pair k, which the store writes as
    they are); bf16 products accumulated in f16 are refused (wgmma has no such form), and on sm_100a a .tir's f16
    tensor-memory accumulator is refused at its line."""
    from twill.emit.model import EmitError
    from twill.tir import parse_tir
    machine = load_machine("h200")
    cu = emit_cuda(solve(_fp16_acc(), machine, SolveOptions(time_limit=20)), machine)
    assert re.search(r"void wgmma_m64n128k16_ss_f16_accf16\(uint32_t \(&d\)\[32\]", cu)
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f16.f16.f16 {%0," in cu
    assert "twill::Frag16<1, 128, __half> acc_new0[1];" in cu
    assert "twill::wgmma_m64n128k16_ss_f16_accf16<0, 1>(acc_new0[0].x[mb]," in cu
    assert "twill::frag_to_tile<__half, 64, 128>(sm.out_out_acc0[0], f, 0);" in cu
    tir = ("kernel k\ncarry acc : f16[128,128]{space} = 0\nloop {{\n  a = load : {t}[128,64] @smem\n"
           "  b = load : {t}[64,128] @smem\n  c = mma a, b, acc : f16[128,128]{space}\n  yield acc = c\n}}\n")
    with pytest.raises(EmitError, match="accumulates in f32"):
        g = parse_tir(tir.format(t="bf16", space=""), "bf.tir")
        emit_cuda(solve(g, machine, SolveOptions(time_limit=20)), machine)
    b200 = load_machine("b200")
    g = parse_tir(tir.format(t="f16", space=" @tmem"), "tm.tir")
    with pytest.raises(EmitError, match="one value a 32-bit tensor-memory column"):
        emit_cuda(solve(g, b200, SolveOptions(time_limit=20)), b200)


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
def test_the_f16_accumulating_gemm_compiles_clean_for_sm90(tmp_path):
    """The one nvcc build of the f16 accumulator in CI: no spill, no serialized wgmma (C7510/C7515/C7520)."""
    machine = load_machine("h200")
    src = tmp_path / "acc.cu"
    src.write_text(emit_cuda(solve(_fp16_acc(), machine, SolveOptions(time_limit=20)), machine))
    rc, err = nvcc_compile(src, ["-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v"])
    assert rc == 0, err[-2000:]
    assert {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)} <= {0}, err[-2000:]
    assert not re.search(r"C75\d\d|serialized", err), err[-2000:]


def test_dropout_is_refused_naming_the_random_numbers_where_its_rounds_are_not_tritons():
    """Before session 39 every form was refused at an `arith.xori` of the rounds; now they import (tests/test_rand.py)
    and a draw whose rounds are not Triton's (one key constant changed) is refused at its number, naming tl.rand."""
    for form in FORMS:
        text = _read(form, "attn_dropout_sm90")
        edited = re.sub(r"(= arith\.constant )-1879881855( : i32)", r"\g<1>-1879881854\2", text, count=1)
        assert edited != text, form
        line = _refused_at(edited, "drop.ttgir", r"tl\.rand, tl\.randint or tl\.randn")
        assert "arith.mulf" in line, (form, line)


def test_a_row_division_outside_the_loop_needs_its_remainder():
    """Batch 5 left a division of the rows before the loop and after it alone (GQA's packed heads
    `r // G` with `r % G`). A division with no remainder beside it (`r // G` alone: two rows of the
    tile read from one row of Q) imported as the plain tile; it is now the error at the load before
    the loop. The pair still imports (every form of the corpus GQA kernel)."""
    for form in ("prepipe", "after"):
        for arch in ("sm90", "sm100"):
            text = (CORPUS / form / f"attn_gqa_fwd_{arch}.ttgir").read_text()
            load_ttgir(CORPUS / form / f"attn_gqa_fwd_{arch}.ttgir")  # the pair: imports
            alone = re.sub(r"= arith\.remsi (%r\w*), (%cst\w*) : tensor<128x", r"= arith.addi \1, \2 : tensor<128x",
                           text, count=1)
            assert alone != text
            line = _refused_at(alone, "gqa.ttgir", "with no remainder `offs % W` beside it")
            assert "tt.load" in line, (form, arch, line)


def test_a_b_broadcast_over_the_batch_is_read_once_for_every_entry(tmp_path):
    """bmm_bcast_b's B + pid_b * stride_bb with stride_bb = 0 at the launch: the graph is the plain
    GEMM (B has no rows axis, so the binding may share it); the binding takes B [K, N] under A
    [4, M, K] as one entry for the whole batch (group 4: tile b reads entry b // 4 = 0), B per batch
    entry [4, K, N] as its own, and a stride-0 view (B.expand(4, K, N), not contiguous) not at all."""
    from twill.emit import build_model
    from twill.emit.binding import binding_files
    machine = load_machine("h200")
    g, _ = load_ttgir(DATA / "t36/prepipe/bmm_bcast_b_sm90.ttgir", split_rows="auto")
    for path, text in binding_files(build_model(solve(g, machine, SolveOptions(time_limit=20)), machine),
                                    str(tmp_path / "bmm.cu")).items():
        Path(path).write_text(text)
    spec = importlib.util.spec_from_file_location("bmm", tmp_path / "bmm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    M = mod.Meta
    a, c = M((4, 512, 1024), "float16", "cuda:0", True, 0), M((4, 512, 1024), "float16", "cuda:0", True, 0)
    shared = mod.resolve(mod.SPEC, {"A": a, "B": M((1024, 1024), "float16", "cuda:0", True, 0), "C": c})
    own = mod.resolve(mod.SPEC, {"A": a, "B": M((4, 1024, 1024), "float16", "cuda:0", True, 0), "C": c})
    names = [x["name"] for x in mod.SPEC["args"]]
    assert shared["groups"][names.index("B")] == 4 and own["groups"][names.index("B")] == 1
    assert shared["batch"] == own["batch"] == 4
    staged = mod.resolve(mod.SPEC, {"A": a, "B": M((4, 1024, 1024), "float16", "cuda:0", False, 0), "C": c})
    assert staged["layouts"][names.index("B")][0] == "stage"  # a layout not known: copied, not refused


COMPILED = ["bmm_bcast_b_sm90", "bmm_bcast_b_sm100", "gemm_fp16_acc_sm90", "gemm_store_ct_sm90", "gemm_store_ct_sm100"]


@pytest.mark.slow
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found (PATH, /usr/local/cuda/bin)")
@pytest.mark.parametrize("name", COMPILED)
@pytest.mark.extended
def test_heldout6_dump_solves_verifies_emits_and_compiles_clean(name, tmp_path):
    machine = load_machine("b200" if name.endswith("sm100") else "h200")
    graph, _ = load_ttgir(DATA / "t36" / "prepipe" / f"{name}.ttgir", split_rows="auto")
    schedule = solve(graph, machine, SolveOptions(time_limit=60))
    assert schedule.complete
    assert verify(schedule, graph, machine) == []
    src = tmp_path / f"{name}.cu"
    src.write_text(emit_cuda(schedule, machine))
    arch = machine.arch
    rc, err = nvcc_compile(src, ["-std=c++17", f"-gencode=arch=compute_{arch[3:]},code={arch}", "-Xptxas", "-v"])
    assert rc == 0, err[-2000:]
    spills = {int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", err)}
    assert spills <= {0}, err[-2000:]
    assert "C7515" not in err and "serialized" not in err, err[-2000:]
