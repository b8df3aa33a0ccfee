"""The attention features' rows of bench/gpu_bench.py: grouped-query (GQA), causal and FP8 forward.

Each row runs twill's emitted kernel through its generated binding beside FlashAttention-4
(`flash_attn.cute.flash_attn_func`, where the device has it: ../shared/device-notes.md says how
to carry it) and SDPA-cuDNN, in one process, each output checked against a float32 reference on
its first heads (relative L2 error; FP8: the attention of the same e4m3 values). B = 4, Hq = 32,
D = 128 (GQA also 64); TFLOP/s count 4·B·Hq·N²·D, half of it for a causal row (the keys after each query are
not computed).

- GQA: `attention_fwd_hopper.h200` with K, V [B, Hkv, N, D], Hq / Hkv = 4 and 8 (the binding reads
  the group off the shapes; docs/emit-cuda.md, "Grouped-query attention"). FA4 takes Hkv heads
  natively; SDPA with `enable_gqa=True`. The same with D = 64: `attention_fwd_d64.h100`.
- causal: `attention_fwd_causal_hopper.h200` (tests/golden/causal/, its binding beside it), groups
  1 and 4; FA4 `causal=True`, SDPA `is_causal=True`.
- FP8: `attention_fwd_fp8_hopper.h200`, e4m3 Q, K, V with per-tensor descales (Q's and K's in
  exp2_scale, V's in out_scale), V transposed to V^T once before timing (the graph's input `vt`);
  FA4 and SDPA are tried with the same e4m3 tensors, and a baseline that refuses them says so in
  its error column (torch's SDPA has no FP8 path; FA4's Hopper path, as far as measured, neither).
- backward: FlashAttention's, non-causal (`flash_backward`): twill's forward (`attention_fwd_hopper.h200`)
  gives O, m and l; the steps FlashAttention runs around its main kernel are torch's: lse = m / sqrt(D)
  + ln(l) (its logsumexp), Delta = rowsum(dO * O), Q / sqrt(D) (the softmax scale, so that dK = dS^T Q
  comes out scaled) before, dQ / sqrt(D) after (FA's dQ conversion); the main kernel is
  `attention_bwd_hopper.h100` (examples/attention_bwd_hopper.tir: dK and dV per key block, dQ added
  in f32 across key blocks by TMA reductions), fed with c = log2(e). Timed whole, pre and post steps
  included, against FA4's and cuDNN's backward (autograd over their forward, the forward not timed).
- backward, emitted (`emitted_backward`, row attention_bwd_emitted): Delta = rowsum(dO * O) by
  twill's `attention_bwd_delta_hopper.h200` (examples/attention_bwd_delta_hopper.tir) and the softmax
  scale inside `attention_bwd_flash_hopper.h200` (examples/attention_bwd_flash_hopper.tir: unscaled Q,
  exp2_scale = log2(e) / sqrt(D), dK scaled and dK, dV written in f16 by its epilogue); torch keeps
  lse = m + ln(l) sqrt(D) (one value per row) and dQ's conversion (dQ / sqrt(D) to f16), as FA's own.
- backward, causal (`emitted_causal_backward`, row attention_bwd_causal): the same two kernels, the
  main one `attention_bwd_causal_hopper.h200` (examples/attention_bwd_causal_hopper.tir: each key
  tile's loop starts at the query block of its first key, the diagonal blocks masked), from the
  causal forward's O and logsumexp (torch's flash SDPA, not timed); GQA by K and V repeated over
  the group and dK, dV summed over it (timed). FA4 `causal=True`, SDPA `is_causal=True`; TFLOP/s
  count half of the non-causal 10·B·H·N²·D.
"""
import math
import os
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CAUSAL_DIR = os.path.join(ROOT, "tests", "golden", "causal")

# name: (fixture, its folder or None for gpu_bench's kernel dir, causal, fp8, the K/V groups timed, D)
FEATURES = {
    "attention_gqa": ("attention_fwd_hopper.h200", None, False, False, (4, 8), 128),
    "attention_gqa_d64": ("attention_fwd_d64.h100", None, False, False, (4, 8), 64),
    "attention_causal": ("attention_fwd_causal_hopper.h200", CAUSAL_DIR, True, False, (1, 4), 128),
    "attention_fp8": ("attention_fwd_fp8_hopper.h200", None, False, True, (1,), 128),
}
BWD = "attention_bwd_hopper.h100"  # the backward's main kernel (flash_backward)
BWD_DIR = os.path.join(ROOT, "tests", "golden", "attention_bwd")  # the emitted backward's kernels
# Delta, main: the main kernel's h200 schedule (the consumer +32 registers) has no serialized wgmma
# and ran 1.23x the h100 one's TFLOP/s on the H200 (docs/gpu-results.md, session 23)
BWD_EMITTED = ("attention_bwd_delta_hopper.h200", "attention_bwd_flash_hopper.h200")
BWD_CAUSAL = ("attention_bwd_delta_hopper.h200", "attention_bwd_causal_hopper.h200")  # Delta, causal main
LOG2E = 1.4426950408889634
NAMES = (*FEATURES, "attention_bwd_flash", "attention_bwd_emitted", "attention_bwd_causal")  # what --only may name


def _err(e):
    return "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")


def reference(q, k, v, scale, heads, group, causal):
    """float32 softmax(q k^T * scale) v of the first `heads` query heads of batch 0 (q [B, Hq, N, D],
    k and v [B, Hkv, N, D]; query head h reads K/V head h // group)."""
    import torch
    out = []
    for h in range(heads):
        qf, kf, vf = q[0, h].float(), k[0, h // group].float(), v[0, h // group].float()
        o = torch.empty_like(qf)
        for r in range(0, qf.shape[0], 2048):
            s = (qf[r:r + 2048] @ kf.T) * scale
            if causal:
                rows = torch.arange(r, r + s.shape[0], device=s.device)[:, None]
                s = s.masked_fill(torch.arange(s.shape[1], device=s.device)[None, :] > rows, -float("inf"))
            o[r:r + 2048] = torch.softmax(s, dim=-1) @ vf
        out.append(o)
    return torch.stack(out)


def _fp8(x):
    """x as e4m3 and its per-tensor descale factor (amax at e4m3's 448)."""
    import torch
    s = float(x.abs().amax()) / 448.0
    return (x / s).to(torch.float8_e4m3fn), s


def flash_backward(bwd, q, k, v, o, m, l, d_o, scale):
    """FlashAttention's backward from twill's forward (o, m, l): (dq, dk, dv), dq in q's dtype.
    m is the rows' maximum of Q K^T and l their sum of exp2((s - m) * log2(e) * scale)."""
    import torch
    lse = m * scale + torch.log(l)  # logsumexp of the scaled scores, FlashAttention's
    dlt = (d_o.float() * o.float()).sum(-1)  # Delta
    out = bwd.run(k, v, (q * scale).to(q.dtype), d_o, lse, dlt, exp2_scale=LOG2E)
    return (out.dq * scale).to(q.dtype), out.dk, out.dv


def delta(mod, o, d_o):
    """Delta = rowsum(dO * O) [B, H, N] by the emitted kernel: O and dO [B, H, N, D] viewed as
    [rows / (64 I), I, 64, D], I row tiles per CTA (the most of 8, 4, 2 that divides N / 64 and is
    at least the pipeline's stages)."""
    B, H, N, D = o.shape
    tiles = N // 64
    its = next(i for i in (8, 4, 2, 1) if tiles % i == 0 and (i >= mod.SPEC["stages"] or i == 1))
    shape = (B * H * tiles // its, its, 64, D)
    out = mod.run(o.reshape(shape), d_o.reshape(shape))  # the binding returns its one output as is
    return getattr(out, "dlt", out).reshape(B, H, N)


def emitted_backward(dmod, bwd, q, k, v, o, m, l, d_o, scale):
    """FlashAttention's backward by twill's two emitted kernels (module docstring): (dq, dk, dv).
    Grouped (K, V with Hkv of q's Hq heads): the query heads of a group are adjacent, so q, dO,
    lse and Delta viewed as [B, Hkv, group N, ...] give each K/V block the loop over all of its
    group's query rows, and dK, dV come out summed over the group (no change to the kernel)."""
    import torch
    B, Hq, N, D = q.shape
    Hkv = k.shape[1]
    lse = m + torch.log(l) / scale  # the logsumexp in units of the unscaled scores
    rows = (B, Hkv, Hq // Hkv * N)
    out = bwd.run(k, v, q.view(*rows, D), d_o.view(*rows, D), lse.view(rows), delta(dmod, o, d_o).view(rows),
                  scale, exp2_scale=scale * LOG2E)
    return (out.dq * scale).to(q.dtype).view(B, Hq, N, D), out.dk, out.dv


def reference_backward(q, k, v, d_o, scale, heads, group=1, causal=False):
    """float32 autograd of softmax(q k^T * scale) v on the first `heads` query heads of batch 0
    (query head h reads K/V head h // group; heads a multiple of group; causal: a key after its
    query masked): (dq, dk, dv), dk and dv of the first heads // group K/V heads, summed over each
    one's query heads."""
    import torch
    qf = q[0, :heads].float().requires_grad_()
    kf, vf = (t[0, :heads // group].float().requires_grad_() for t in (k, v))
    ke, ve = (t.repeat_interleave(group, dim=0) for t in (kf, vf))
    s = (qf @ ke.transpose(-1, -2)) * scale
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), -float("inf"))
    o = torch.softmax(s, dim=-1) @ ve
    return torch.autograd.grad(o, (qf, kf, vf), d_o[0, :heads].float())


def causal_forward(q, k, v, scale):
    """The causal forward's O (f16) and logsumexp of the scaled scores (f32 [B, Hq, N]), as the
    backward reads them, from torch's flash SDPA (GQA: K and V repeated over the group)."""
    import torch
    group = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(group, dim=1) if group > 1 else t for t in (k, v))
    out = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, True, False, scale=scale)
    return out[0], out[1]


def emitted_causal_backward(dmod, bwd, q, k, v, o, lse, d_o, scale):
    """FlashAttention's causal backward by twill's emitted kernels: Delta, then
    `attention_bwd_causal_hopper.h200` (each key tile's loop starts at its diagonal), from the
    forward's logsumexp `lse` of the scaled scores; (dq, dk, dv). Grouped (K, V with Hkv of q's Hq
    heads): the group's query heads cannot share one loop (each has its own diagonal), so K and V
    are repeated over the group and dK, dV summed over it afterwards (both timed)."""
    B, Hq, N, D = q.shape
    group = Hq // k.shape[1]
    k, v = (t.repeat_interleave(group, dim=1) if group > 1 else t for t in (k, v))
    out = bwd.run(k, v, q, d_o, lse / scale, delta(dmod, o, d_o), scale, exp2_scale=scale * LOG2E)
    dk, dv = out.dk, out.dv
    if group > 1:
        dk, dv = (t.view(B, Hq // group, group, N, D).float().sum(2).to(t.dtype) for t in (dk, dv))
    return (out.dq * scale).to(q.dtype), dk, dv


def run_bwd_row(g, fwd, bwd, B, H, N, D=128, ref_heads=2, do_time=True, dmod=None, group=1, causal=False):
    """FlashAttention's backward: twill (flash_backward, or emitted_backward with the Delta kernel
    `dmod`, then also grouped: H / group K/V heads; causal: emitted_causal_backward from the
    causal forward's O and logsumexp, `fwd` unused), FA4 and cuDNN, checked against float32."""
    import torch
    import torch.nn.functional as F
    variant = "attention_bwd_flash" if dmod is None else "attention_bwd_causal" if causal else "attention_bwd_emitted"
    Hkv = H // group
    res = {"kernel": "attention_feature", "variant": variant, "B": B, "H": H, "Hkv": Hkv, "N": N, "D": D,
           "causal": causal, "fp8": False, "flops": 10.0 * B * H * N * N * D / (2 if causal else 1)}
    torch.manual_seed(N + 7)
    q, d_o = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(2))
    k, v = (torch.randn(B, Hkv, N, D, device="cuda", dtype=torch.float16) for _ in range(2))
    scale = 1.0 / math.sqrt(D)
    ref_heads = max(ref_heads, group) // group * group
    ref = reference_backward(q, k, v, d_o, scale, ref_heads, group, causal)

    def errs(prefix, grads):
        e = [g.rel_err(x[0, :heads], r) for x, r, heads in zip(grads, ref, (ref_heads, ref_heads // group,
                                                                            ref_heads // group))]
        res[prefix + "rel_err"] = max(e)
        res[prefix + "rel_err_dq_dk_dv"] = e
    try:
        if causal:
            o, lse = causal_forward(q, k, v, scale)
        else:
            out = fwd.run(q, k, v, exp2_scale=scale * LOG2E)
        torch.cuda.synchronize()

        def twill():
            if causal:
                return emitted_causal_backward(dmod, bwd, q, k, v, o, lse, d_o, scale)
            if dmod is not None:
                return emitted_backward(dmod, bwd, q, k, v, out.acc, out.m, out.l, d_o, scale)
            return flash_backward(bwd, q, k, v, out.acc, out.m, out.l, d_o, scale)
        grads = twill()
        torch.cuda.synchronize()
        res["nan_count"] = int(sum(int(torch.isnan(x).sum()) for x in grads))
        errs("", grads)
        res["ok"] = res["nan_count"] == 0 and res["rel_err"] < 1e-2
        if do_time:
            res["twill_ms"] = g.bench_ms(twill)
        del grads
    except Exception as e:  # noqa: BLE001
        res["twill_error"], res["ok"] = _err(e), False
        res["trace"] = traceback.format_exc()
    fa4, why = fa4_function()
    if fa4 is None:
        res["fa4_error"] = why
    else:
        try:
            qb, kb, vb = (t.transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v))
            ob = fa4(qb, kb, vb, softmax_scale=scale, causal=causal)
            ob = ob[0] if isinstance(ob, tuple) else ob
            dob = d_o.transpose(1, 2).contiguous()

            def fa4_bwd():
                return torch.autograd.grad(ob, (qb, kb, vb), dob, retain_graph=True)
            errs("fa4_", [x.transpose(1, 2) for x in fa4_bwd()])
            if do_time:
                res["fa4_ms"] = g.bench_ms(fa4_bwd)
        except Exception as e:  # noqa: BLE001
            res["fa4_error"] = _err(e)
    try:
        from torch.nn.attention import sdpa_kernel, SDPBackend
        qc, kc, vc = (t.clone().requires_grad_() for t in (q, k, v))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            oc = F.scaled_dot_product_attention(qc, kc, vc, is_causal=causal, **({"enable_gqa": True} if group > 1 else {}))

        def cudnn_bwd():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return torch.autograd.grad(oc, (qc, kc, vc), d_o, retain_graph=True)
        errs("cudnn_", cudnn_bwd())
        if do_time:
            res["cudnn_ms"] = g.bench_ms(cudnn_bwd)
    except Exception as e:  # noqa: BLE001
        res["cudnn_error"] = _err(e)
    for kk in ("twill", "fa4", "cudnn"):
        if kk + "_ms" in res:
            res[kk + "_tflops"] = g.tflops(res["flops"], res[kk + "_ms"])
    return res


def fa4_function():
    """flash_attn.cute.flash_attn_func, or the reason it is not there."""
    try:
        from flash_attn.cute import flash_attn_func
        return flash_attn_func, None
    except Exception as e:  # noqa: BLE001
        return None, _err(e)


def run_row(g, mod, name, B, Hq, group, N, D=128, causal=False, fp8=False, ref_heads=2, do_time=True):
    """One row: twill, FA4 and SDPA-cuDNN on one problem. `g` is gpu_bench (rel_err, bench_ms, tflops)."""
    import torch
    import torch.nn.functional as F
    Hkv = Hq // group
    res = {"kernel": "attention_feature", "variant": name, "B": B, "H": Hq, "Hkv": Hkv, "N": N, "D": D,
           "causal": causal, "fp8": fp8, "flops": 4.0 * B * Hq * N * N * D / (2 if causal else 1)}
    torch.manual_seed(N + group)
    q, k, v = (torch.randn(B, h, N, D, device="cuda", dtype=torch.float16) for h in (Hq, Hkv, Hkv))
    scale = 1.0 / math.sqrt(D)
    scales = {}
    if fp8:
        (q, scales["q"]), (k, scales["k"]), (v, scales["v"]) = _fp8(q), _fp8(k), _fp8(v)
        ref_in = (q.float() * scales["q"], k.float() * scales["k"], v.float() * scales["v"])
    else:
        ref_in = (q, k, v)
    ref = reference(*ref_in, scale, ref_heads, group, causal)
    o = torch.full((B, Hq, N, D), float("nan"), device="cuda", dtype=torch.float16)
    try:
        if fp8:
            vt = v.transpose(-1, -2).contiguous()  # the graph's input: V^T, keys contiguous (not timed)
            c = scale * LOG2E * scales["q"] * scales["k"]

            def twill():
                return mod.run(q, k, vt, acc=o, exp2_scale=c, out_scale=scales["v"])
        else:
            def twill():
                return mod.run(q, k, v, acc=o, exp2_scale=scale * LOG2E)
        twill()
        torch.cuda.synchronize()
        res["nan_count"] = int(torch.isnan(o).sum())
        res["rel_err"] = g.rel_err(o[0, :ref_heads], ref)
        res["ok"] = res["nan_count"] == 0 and res["rel_err"] < (5e-2 if fp8 else 1e-2)
        if do_time:
            res["twill_ms"] = g.bench_ms(twill)
    except Exception as e:  # noqa: BLE001
        res["twill_error"], res["ok"] = _err(e), False
        res["trace"] = traceback.format_exc()
    fa4, why = fa4_function()
    if fa4 is None:
        res["fa4_error"] = why
    else:
        try:
            qb, kb, vb = (t.transpose(1, 2).contiguous() for t in (q, k, v))  # FA4: [B, N, H, D]
            kw = {"causal": causal, "softmax_scale": scale}
            if fp8:
                kw.update(q_descale=torch.full((B, Hkv), scales["q"], device="cuda"),
                          k_descale=torch.full((B, Hkv), scales["k"], device="cuda"),
                          v_descale=torch.full((B, Hkv), scales["v"], device="cuda"))

            def fa4_call():
                out = fa4(qb, kb, vb, **kw)
                return out[0] if isinstance(out, tuple) else out
            of = fa4_call()
            torch.cuda.synchronize()
            res["fa4_rel_err"] = g.rel_err(of[0, :, :ref_heads].transpose(0, 1), ref)
            if do_time:
                res["fa4_ms"] = g.bench_ms(fa4_call)
            del of
        except Exception as e:  # noqa: BLE001
            res["fa4_error"] = _err(e)
    try:
        from torch.nn.attention import sdpa_kernel, SDPBackend
        kw = {"is_causal": causal}
        if group > 1:
            kw["enable_gqa"] = True

        def cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, **kw)
        oc = cudnn()
        torch.cuda.synchronize()
        res["cudnn_rel_err"] = g.rel_err(oc[0, :ref_heads], ref)
        if do_time:
            res["cudnn_ms"] = g.bench_ms(cudnn)
        del oc
    except Exception as e:  # noqa: BLE001
        res["cudnn_error"] = _err(e)
    for kk in ("twill", "fa4", "cudnn"):
        if kk + "_ms" in res:
            res[kk + "_tflops"] = g.tflops(res["flops"], res[kk + "_ms"])
    return res


def run_all(g, kernel_dir, sizes, only=None):
    """Every feature's rows at the N values `sizes` (each row printed as it is done); `only`: one of NAMES."""
    import json
    import torch
    rows = []
    for name, (fixture, folder, causal, fp8, groups, D) in FEATURES.items():
        if only not in (None, name):
            continue
        try:
            mod, spills = g.build_binding(fixture, folder or kernel_dir)
        except Exception as e:  # noqa: BLE001
            mod, spills = None, ["build failed: " + _err(e)]
        for group in groups:
            for n in sizes:
                if mod is None:
                    r = {"kernel": "attention_feature", "variant": name, "N": n, "Hkv": 32 // group,
                         "twill_error": spills[0], "ok": False}
                else:
                    try:
                        r = run_row(g, mod, name, 4, 32, group, n, D=D, causal=causal, fp8=fp8)
                    except Exception as e:  # noqa: BLE001
                        r = {"kernel": "attention_feature", "variant": name, "N": n, "Hkv": 32 // group,
                             "twill_error": _err(e), "trace": traceback.format_exc(), "ok": False}
                r["spills"] = spills
                print(json.dumps(r), flush=True)
                rows.append(r)
                torch.cuda.empty_cache()
    if only in (None, "attention_bwd_flash"):
        try:
            fwd, _ = g.build_binding(FEATURES["attention_gqa"][0], kernel_dir)
            bwd, spills = g.build_binding(BWD, kernel_dir)
        except Exception as e:  # noqa: BLE001
            fwd, bwd, spills = None, None, ["build failed: " + _err(e)]
        for n in sizes:
            r = (run_bwd_row(g, fwd, bwd, 4, 32, n) if bwd is not None else
                 {"kernel": "attention_feature", "variant": "attention_bwd_flash", "N": n, "twill_error": spills[0],
                  "ok": False})
            r["spills"] = spills
            print(json.dumps(r), flush=True)
            rows.append(r)
            torch.cuda.empty_cache()
    if only in (None, "attention_bwd_emitted"):
        rows += _emitted_bwd_rows(g, kernel_dir, sizes)
    if only in (None, "attention_bwd_causal"):
        rows += _emitted_bwd_rows(g, kernel_dir, sizes, causal=True)
    return rows


def _emitted_bwd_rows(g, kernel_dir, sizes, causal=False):
    """The attention_bwd_emitted rows (emitted_backward), or the attention_bwd_causal ones
    (emitted_causal_backward), each printed as it is done."""
    import json
    import torch
    rows = []
    variant = "attention_bwd_causal" if causal else "attention_bwd_emitted"
    try:
        fwd, _ = (None, None) if causal else g.build_binding(FEATURES["attention_gqa"][0], kernel_dir)
        (dmod, s1), (bwd, s2) = (g.build_binding(f, BWD_DIR) for f in (BWD_CAUSAL if causal else BWD_EMITTED))
        spills = s1 + s2
    except Exception as e:  # noqa: BLE001
        bwd, spills = None, ["build failed: " + _err(e)]
    for group in (1, 4):
        for n in sizes:
            r = (run_bwd_row(g, fwd, bwd, 4, 32, n, dmod=dmod, group=group, causal=causal) if bwd is not None else
                 {"kernel": "attention_feature", "variant": variant, "N": n, "Hkv": 32 // group,
                  "twill_error": spills[0], "ok": False})
            r["spills"] = spills
            print(json.dumps(r), flush=True)
            rows.append(r)
            torch.cuda.empty_cache()
    return rows


def markdown(rows):
    """The features' table (empty without rows)."""
    if not rows:
        return []

    def f(x, fmt="%.1f"):
        return fmt % x if isinstance(x, (int, float)) else "—"
    L = ["", "## Attention features (B=4, Hq=32, D=128 unless the variant says d64; bench/attention_features.py)", "",
         "FA4: `flash_attn.cute.flash_attn_func`; cuDNN: SDPA's cuDNN backend. A causal row's TFLOP/s count half",
         "of 4·B·H·N²·D. Errors: relative L2 against float32 on the first two heads (FP8: of the e4m3 values).", "",
         "| variant | Hkv | N | twill TFLOP/s | FA4 TFLOP/s | cuDNN TFLOP/s | twill / FA4 | twill / cuDNN | twill err | FA4 err | cuDNN err | ok |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t, a, c = r.get("twill_tflops"), r.get("fa4_tflops"), r.get("cudnn_tflops")
        L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["variant"], r.get("Hkv", "—"), r["N"], f(t) if t else "failed: " + r.get("twill_error", "?"),
            f(a) if a else r.get("fa4_error", "—"), f(c) if c else r.get("cudnn_error", "—"),
            f(t / a, "%.2fx") if t and a else "—", f(t / c, "%.2fx") if t and c else "—",
            f(r.get("rel_err"), "%.1e"), f(r.get("fa4_rel_err"), "%.1e"), f(r.get("cudnn_rel_err"), "%.1e"),
            "yes" if r.get("ok") else "**no**"))
    return L
