"""Build (here) and check (GPU machine) the held-out kernels' twill bindings against their fp32 references.

    python bench/heldout/run.py build [--batch 3] --out DIR NAME ...   # import (t36 prepipe, --split-rows
                                                           # auto), solve --gpu h200, emit-cuda --binding torch
    python bench/heldout/run.py check [--batch 3] --kernels DIR   # GPU: each binding on the inputs
        # of NAME_make_inputs, called with the arguments the Triton launch passes its kernel (outputs
        # filled with NaN first), against NAME_reference; Triton 3.6's own kernel too, as a control;
        # each timed per call (host included) and in a CUDA graph (the kernel alone)

--batch rand: tl.rand's forms (randoms.py, dumps in tests/data/ttgir/randoms; their references draw Triton's stream
in numpy, twill/philox.py). --batch 3: the third batch (kernels3.py, dumps in tests/data/ttgir/heldout3), --batch 4 the fourth (kernels4.py,
heldout4), --batch 5 the fifth (kernels5.py, heldout5), --batch 6 the sixth (kernels6.py, heldout6), --batch 7 the seventh (kernels7.py, heldout7), --batch 8 the eighth (kernels8.py, heldout8), --batch 9 the ninth (kernels9.py, heldout9: the Triton tutorials
not covered before; asin alone imports), --batch 10 the tenth (kernels10.py, heldout10), --batch 11 the eleventh
(kernels11.py, heldout11), --batch 12 the twelfth (kernels12.py, heldout12: column sums), --batch 13 the thirteenth
(kernels13.py, heldout13); default the
second (kernels.py, heldout2). A kernel of loops in sequence has the sequence's binding NAME_sm90.py (its loops' kernels
NAME_sm90.LOOP.cu beside it), which allocates its outputs and returns them: those are checked. Writes DIR/check.json. The binding is called with the launch's arguments only: the exp2 scale the
import folds out of a kernel (qk_scale = sm_scale * log2 e; for a softmax written with tl.exp, its
scale times log2 e) is the graph's `knob exp2_scale = ...` line, which the binding computes from them.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import shlex
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))

# per kernel, the sizes checked: the first with M, N whole tiles (the binding's rule) and a ragged loop
# (K = 1000, 1000 keys); the second the kernel's ragged default (a partial last M and N tile, partial.py).
# row_stats: N = 1024 (whole column blocks), then its default N = 1000 (a partial last block of 104)
SIZES = {"mm_tutorial": [{"M": 1024, "N": 1152, "K": 1000}, None], "row_stats": [{"N": 1024}, None],
         "attn_kvlen": [None], "softmax_gemm": [None], "gemm_int8_scaled": [None], "attn_exp": [None],
         "attn_alibi": [None],  # B = 2, H = 8, N = 1024: SLOPES [H] broadcast over the heads of [B, H]
         # batch 3: the defaults (whole tiles); gemm_bp_leaky's default is whole tiles too
         "gemm_bp_leaky": [None], "linear_trans_relu": [None], "swiglu": [None], "attn_splitkv": [None],
         "attn_bf16_d128": [None], "mm_hints": [None], "rmsnorm_gemm": [None],
         # batch 4: GQA decode (grid rows = 16) at its default (B = 8, 4 KV heads, N_KV = 4000, ragged), then one
         # KV head (k [2, 1, N, D] beside q [2, 16, D]: the binding drops the 1) and N_KV = 1000
         "attn_gqa_decode": [None, {"B": 2, "H_KV": 1, "N_KV": 1000}],
         # batch 7: logsumexp_rows loads with other=-inf ({fill = -inf}): whole column tiles (N = 5120), then its
         # ragged default N = 5000, which sm_90a's kernel masks to -inf past N before the rowmax and exp2
         "logsumexp_rows": [{"N": 5120}, None],
         # batch 7, one row a program imported as 64 rows a CTA: RMSNorm at its default (whole tiles), then a partial
         # last row tile and column tile (R = 1000, N = 5000 and 781: sums and a clipped store take TMA's zero fill);
         "rmsnorm_fwd": [None, {"R": 1000, "N": 5000}, {"R": 16384, "N": 4096}, {"R": 1000, "N": 781}],
         # LayerNorm's variance loop sums (x - mean)^2 of `tl.where(cols < N, x - mean, 0.)`: a tail_mask, masked to
         # 0 past N on the partial last tile (ragged.py): whole column tiles (N = 5120), a partial last row tile,
         # then ragged N (its default 4096 x 5000; 1000 x 1000; 1000 x 781)
         "layernorm_fwd": [{"N": 5120}, {"R": 1000, "N": 5120}, None, {"R": 1000, "N": 1000}, {"R": 1000, "N": 781}],
         # batch 7, the online pair (a running max and the sum it rescales, [BLOCK] carries folded into [64] row
         # carries): the default (whole tiles), a partial last row tile, then ragged N (5000, 781): the first loop
         # masks its -inf fill before the rowmax and exp2, the normalizing loop's fill reaches only its clipped store
         "softmax_online": [None, {"R": 1000, "N": 5120}, {"R": 1000, "N": 5000}, {"R": 4096, "N": 781}],
         # batch 7, the tutorial's fused softmax (a persistent loop over rows, each whole in one [1024] f32 tile), as
         # three column loops of 64 rows a CTA: whole column tiles (N = 1024; N = 768 < BLOCK, the tail Triton masks,
         # with a partial last row tile), a ragged 1000 x 1000 (its tail_mask -inf past N), then its default 4096 x 781,
         # f32 rows of 3124 bytes (TMA needs a multiple of 16): the binding stages them into rows of 784
         "softmax_fused": [{"N": 1024}, {"M": 1000, "N": 768}, {"M": 1000, "N": 1000}, None],
         # batches 7 and 6, a cross-entropy forward: the online logsumexp of 64 rows a CTA, then the target's logit an
         # epilogue `gather x, TARGET` (one ld.global a row): the default 4096 x 32000, a partial last row tile, a ragged
         # V = 32008 (its -inf fill masked before the rowmax and exp2), Llama 3's V = 128256; GPT-2's 50257 (bf16 rows
         # of 100514 bytes: TMA needs a multiple of 16): staged by the binding into rows of 50264 (bench/pitch_check.py)
         "xent_scalar": [None, {"R": 1000}, {"R": 1000, "V": 32008}, {"R": 1024, "V": 128256}, {"R": 1000, "V": 50257}],
         "cross_entropy_fwd": [None, {"R": 1000}, {"R": 1000, "V": 32008}, {"R": 1024, "V": 128256},
                               {"R": 1000, "V": 50257}],
         # batch 8, one row a program with no loop (the row whole in one tile), as column loops of 64 rows a CTA: the
         # defaults (4096 x 4096, whole tiles), a partial last row tile (M = 1000); softmax_row's N = 781 (f32 rows of
         # 3124 bytes: TMA needs a multiple of 16) is staged by the binding into rows of 784; ragged N runs: rms_norm_fwd's 5000
         # (sums and a clipped store take the zero fill), layer_norm_fwd's 5000 (x - mean through its tail_mask). swiglu_fwd and
         # geglu_fwd take n_cols as a constexpr (Liger): their dumps are of n_cols = 4096 alone
         "rms_norm_fwd": [None, {"M": 1000, "N": 5000}], "layer_norm_fwd": [None, {"M": 1000}, {"N": 5000}],
         "softmax_row": [None, {"M": 1000, "N": 768}, {"N": 781}], "swiglu_fwd": [None, {"M": 1000}],
         "geglu_fwd": [None, {"M": 1000}],
         # batch 8's vector add, a flat map over elements viewed as [n / 128, 128] rows (grid flat): the tutorial's
         # 98432 (769 rows, a partial last row tile), 2^24, and 98433, not a multiple of 128: the binding must refuse it
         "vector_add": [None, {"N": 1 << 24}, {"N": 98433}],
         # batch 10: the defaults (4096 x 4096 whole tiles), then a partial last row tile and a ragged N (add_rmsnorm's
         # residual is written in place: the binding returns it as RES); kl_logits at a ragged 1000 x 1000 (-inf fill:
         # masked in the register copies of its rowmax and exp2 since session 40, its loss through its tail_mask); kldiv_rows at Liger's vocabulary 32000 and a ragged 1000; gelu_erf flat: 2^22 elements, then
         # 98433, not a multiple of 128, which the binding must refuse
         "add_rmsnorm": [None, {"M": 1000, "N": 5000}], "softmax_bwd": [None, {"M": 1000, "N": 1000}],
         "kl_logits": [None, {"M": 1000, "N": 1000}], "kldiv_rows": [None, {"M": 1000, "N": 1000}],
         "gelu_erf": [None, {"N": 98433}],
         # bias_gelu's 2-D grid of blocks as one row a program (block2d.py): the defaults, a partial last row tile and
         # a ragged N (the bias row [N] read in every row tile), then N = 1001 (f16 rows of 2002 bytes: TMA needs a
         # multiple of 16), which the binding must refuse
         "bias_gelu": [None, {"M": 1000, "N": 1000}, {"N": 1001}],
         # batch 9's seeded dropout (tl.rand, a `rand` op): the tutorial's 98432 (769 rows of 128), 98433 (its last
         # element a padded row's launch, its counter 98432 through Args::flat_first) and 2^22; batch 6's attention
         # dropout at its default (B = 2, H = 8, N = 1024: the counter's head term bh * N * N)
         "seeded_dropout": [None, {"N": 98433}, {"N": 1 << 22}], "attn_dropout": [None],
         # --batch rand (randoms.py): rows of 1000 (the row's counter its stride), 5000 (a partial column tile), a
         # 2-D grid's blocks; tl.rand of 7 rounds at 98432 and 98433; x + scale * tl.rand of an i64 seed at 2^20
         "dropout_rows": [None], "dropout_rows_loop": [None, {"M": 1000, "N": 1000}], "dropout_2d": [None],
         "rand_rounds7": [None, {"N": 98433}], "noise_flat": [None],
         # batch 11: the GEMMs at whole tiles first (K ragged where the kernel masks it), then their ragged defaults
         # (partial last M and N tiles; W8A8's K = 1040, a partial last 128-deep step); softmax_temp at its default
         # 4096 x 3000 (a partial last column tile: its -inf fill, read from shared memory by the rowmax and exp2, masked
         # in their register copies, session 40), a partial last row tile and the tutorial's 781 (f16 rows of 1562 bytes,
         # staged into rows of 784), then GPT-2's 50257 columns; swiglu_bwd's n_cols is a constexpr
         "gemm_bias_relu_kmask": [{"M": 1024, "N": 1152, "K": 1000}, None],
         "gemm_w8a8_bias": [{"M": 1024, "N": 1536, "K": 1024}, None],
         "linear_wt": [{"M": 1024, "N": 1536, "K": 1024}, None], "baddbmm": [None],
         "softmax_temp": [None, {"M": 1000, "N": 781}, {"N": 50257}], "swiglu_bwd": [None, {"M": 1000}],
         # quant_int8_rows (session 41): its default 4096 x 4096 (whole tiles), then a partial last row tile and column
         # tile (4000: int8 rows of 4000 bytes), then 1000 columns (int8 rows of 1000 bytes: no multiple of 16)
         "quant_int8_rows": [None, {"M": 1000, "N": 4000}, {"M": 1000, "N": 1000}],
         # session 41: a row's cumsum at its default 4096 x 1000 (a partial last column tile: each tile's cumsum plus
         # the carried total), a partial last row tile, a long row (its fp32 sum over 16384 columns against torch's);
         # argmax at its default 1024 x 32000 (250 whole tiles), a ragged 1000 x 1000 (-inf past n_cols), 4096 x 50257
         "cumsum_rows": [None, {"M": 1000, "N": 4096}, {"M": 256, "N": 16384}],
         "argmax_rows": [None, {"M": 1000, "N": 1000}, {"M": 4096, "N": 50264}],
         # Megatron's causal softmax (session 41): 32 x 2048 rows of 2048 (whole tiles), then seq_len 1000 (a partial
         # last column tile, f16 rows of 2000 bytes) over 3 x 1000 rows (a partial last row tile) and 129 over 64 x 129
         "causal_softmax": [None, {"B": 3, "S": 1000}, {"B": 64, "S": 129}],
         # batch 12 (and batch 9's tutorial dw/db): column sums, the argument read transposed (the binding's copy of
         # its .mT); the defaults, then ragged M (the loop: a partial last tile of 128) and N (the grid's rows: a
         # partial last tile of 64)
         "bias_grad": [None, {"M": 1000, "N": 1000}], "ln_dwdb": [None, {"M": 1000, "N": 1000}],
         "bn_stats": [None, {"M": 1000, "N": 777}], "layer_norm_bwd_dwdb": [None, {"M": 100, "N": 1000}],
         # batch 13 (session 42): the GEMMs at their defaults (whole M and N tiles; hardswish's K = 1000 a partial last
         # K step, which its kernel masks), bmm_grouped at whole tiles then its ragged default (1000 x 1100); the row
         # kernels at their defaults (reglu 5000, huber and cosine 4000: partial last column tiles; jsd 32000: whole),
         # then a partial last row tile (and jsd a partial column tile, its -inf fill read by exp: the binding's to take
         # or refuse with the reason)
         "gemm_mish": [None], "gemm_hardswish": [None, {"K": 1024}], "gemm_scale_res_clamp": [None],
         "gemm_sum2": [None], "bmm_grouped": [{"M": 1024, "N": 1152}, None],
         "reglu_fwd": [None, {"M": 1000, "N": 4096}], "jsd_fwd": [None, {"M": 1000, "N": 5000}],
         "huber_rows": [None, {"M": 1000, "N": 4096}], "cosine_rows": [None, {"M": 1000, "N": 4096}],
         "add_rmsnorm_loop": [None, {"M": 1000, "N": 5000}],
         # batch 13b (session 42): tl.clamp (NaN not propagated, then propagated: bench/triton_notes/s42/refused42
         # compares NaN positions) at whole tiles, then ragged; tl.cumprod at whole tiles, then its default 1000 columns
         # (TMA's 0 fill, not the kernel's other=1.0, past n_cols: read by the prefix scan and the carry's product,
         # which no later tile reads), then a partial last row tile
         "clamp_gelu_rows": [{"N": 4096}, None], "leaky_clamp_nan_rows": [{"N": 1024}, None],
         "gemm_clamp": [{"M": 1024, "N": 1152, "K": 1024}, None],
         "cumprod_rows": [{"N": 1024}, None, {"M": 1000, "N": 4096}],
         "cummax_rows": [None, {"M": 1000, "N": 4096}]}
# the held-out kernels that import and have not yet run correct on a GPU: batch -> names. Session 40 (H100) ran
# gemm_tf32, dropout, seeded_dropout, attn_dropout and batch 11's GEMMs and swiglu_bwd correct (docs/triton-results.md);
# attn_bool_mask's binding refused its [N, N] mask and softmax_temp's its ragged rows
PENDING_GPU = {"6": ("attn_bool_mask",), "11": ("softmax_temp", "quant_int8_rows", "cumsum_rows", "argmax_rows", "causal_softmax"),
               "12": ("bias_grad", "ln_dwdb", "bn_stats"),
               "13": ("gemm_mish", "gemm_hardswish", "gemm_scale_res_clamp", "gemm_sum2", "bmm_grouped", "reglu_fwd",
                      "jsd_fwd", "huber_rows", "cosine_rows", "add_rmsnorm_loop"),
               "13b": ("clamp_gelu_rows", "leaky_clamp_nan_rows", "gemm_clamp", "cumprod_rows", "cummax_rows")}
# batch 12 and batch 9's layer_norm_bwd_dwdb (column sums): bench/triton_notes/s40/colsum/run.sh; the rest:
# bench/triton_notes/s40/gpu40.sh
BATCHES = {"2": ("kernels.py", "heldout2"), "3": ("kernels3.py", "heldout3"), "4": ("kernels4.py", "heldout4"),
           "5": ("kernels5.py", "heldout5"), "6": ("kernels6.py", "heldout6"), "7": ("kernels7.py", "heldout7"),
           "8": ("kernels8.py", "heldout8"), "9": ("kernels9.py", "heldout9"), "10": ("kernels10.py", "heldout10"),
           "11": ("kernels11.py", "heldout11"), "12": ("kernels12.py", "heldout12"), "13": ("kernels13.py", "heldout13"),
           "13b": ("kernels13b.py", "heldout13b"), "rand": ("randoms.py", "randoms")}  # tl.rand's forms beyond batches 9 and 6 (references from twill/philox.py)


def _kernels(batch: str = "2"):
    spec = importlib.util.spec_from_file_location("heldout_kernels", HERE / BATCHES[batch][0])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cmd_build(a) -> None:
    from triton_bench import IMPORT_ARGS, build_attempt
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    for name in a.names:
        dump = ROOT / "tests" / "data" / "ttgir" / BATCHES[a.batch][1] / "t36" / "prepipe" / f"{name}_sm90.ttgir"
        rec = build_attempt(dump, out, "h200", "sm_90a", a.time_limit, IMPORT_ARGS,  # the machine's ring depth
                            emit_args=tuple(shlex.split(a.emit_args)))
        records.append(rec)
        print(name, rec.get("stopped", "ok"), rec.get("ii"), rec.get("depth"), rec.get("split_rows"),
              rec.get("stages", {}).get("nvcc"), rec.get("error", "")[-300:], flush=True)
    (out / "build.json").write_text(json.dumps(records, indent=1, sort_keys=True))


def cmd_check(a) -> None:
    import torch
    K = _kernels(a.batch)
    kdir = Path(a.kernels)
    results = {"card": torch.cuda.get_device_name(), "torch": torch.__version__, "kernels": {}}
    from triton_bench import _build_all
    _build_all(sorted(kdir.glob("*_sm90.py")))  # every library at once, on all cores
    for binding in sorted(kdir.glob("*_sm90.py")):
        name = binding.stem[:-len("_sm90")]
        results["kernels"][name] = []
        for size in SIZES.get(name, [None]):
            row = _check_one(K, kdir, binding, name, size)
            results["kernels"][name].append(row)
            print(name, json.dumps(row), flush=True)
    (kdir / "check.json").write_text(json.dumps(results, indent=1, sort_keys=True))


def _check_one(K, kdir, binding, name, size) -> dict:
    import inspect
    import torch
    from gpu_bench import load_binding
    from triton_bench import capture, median_ms, rel_error
    row = {"size": size or "default"}
    try:
        mod = load_binding(binding.stem, str(kdir))
        fns = K.KERNELS[name]
        tensors, params = fns["make_inputs"](size, "cuda")
        ref = fns["reference"](*tensors, **params)
        refs = ref if isinstance(ref, (tuple, list)) else (ref,)
        tri = fns["launch"](*tensors, **params)
        row["triton_rel_error"] = rel_error(tri, ref)
        args, outs = capture(K, name, tensors, params)
        names = [p.name for p in inspect.signature(mod.run).parameters.values()
                 if p.kind == p.POSITIONAL_OR_KEYWORD]
        by_name = dict(zip(fns["kernel"].arg_names, args))  # the launch's arguments by the kernel's names
        # (constexprs, such as a unit stride, are not the binding's; nor the binding's own twill_split_cols, last)
        names = [n for n in names if n in by_name]
        args = tuple(by_name[n] for n in names)
        sequence = not hasattr(mod, "SPEC")  # loops in sequence: the binding returns its outputs
        outputs = set() if sequence else {x["name"] for x in mod.SPEC["args"] if x["output"]}
        for n, x in zip(names, args):
            if n in outputs and isinstance(x, torch.Tensor):
                x.fill_(float("nan"))
        run = lambda: mod.run(*args)  # noqa: E731  (exp2_scale: the binding's, from the graph's knob)
        got = run()
        torch.cuda.synchronize()
        if sequence:  # each returned output in the place of the launch's tensor of that argument
            got = got if isinstance(got, tuple) else (got,)
            place = {id(t): i for i, t in enumerate(outs)}
            outs = list(outs)
            for (ret, _, _), t in zip(mod.OUTPUTS, got):
                outs[place[id(by_name[ret])]] = t
        row["shapes"] = [list(t.shape) for t in tensors]
        row["rel_errors"] = [rel_error(o, r) for o, r in zip(outs, refs)]
        row["rel_error"] = max(row["rel_errors"])
        # the issue's tolerance: 5e-2 where an input or output is fp8 (an fp8 output rounds to 2-3 bits), else 1e-2
        fp8 = any(isinstance(t, torch.Tensor) and t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2)
                  for t in (*tensors, *outs))
        row["tolerance"] = 5e-2 if fp8 else 1e-2
        row["correct"] = row["rel_error"] < row["tolerance"]
        row["twill_ms"] = median_ms(run, reps=10)
        row["triton_ms"] = median_ms(lambda: fns["launch"](*tensors, **params), reps=10)
        try:  # the GPU's time alone (launches in one CUDA graph): a 30-60 us call is mostly host time
            from triton_bench import graph_ms
            row["twill_kernel_ms"] = graph_ms(run)
            row["triton_kernel_ms"] = graph_ms(lambda: fns["launch"](*tensors, **params))
        except Exception as exc:  # a launch that cannot be captured: the per-call times stand
            row["kernel_ms_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    except Exception as exc:  # recorded, the next kernel goes on
        row["error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
    torch.cuda.empty_cache()
    return row


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", required=True)
    b.add_argument("--time-limit", type=float, default=300)
    b.add_argument("--emit-args", default="", help="more arguments of `twill emit-cuda` (a variant: --ctas-per-sm 2; "
                   "--load-rings latency, also TWILL_BENCH_LOAD_RINGS=latency)")
    b.add_argument("names", nargs="+")
    c = sub.add_parser("check")
    c.add_argument("--kernels", required=True)
    for q in (b, c):
        q.add_argument("--batch", choices=sorted(BATCHES), default="2", help="2: kernels.py (heldout2); 3: kernels3.py; 4: kernels4.py; 5: kernels5.py; 6: kernels6.py; "
                       "7: kernels7.py; 8: kernels8.py; 9: kernels9.py; 10: kernels10.py; 11: kernels11.py; 12: kernels12.py; "
                       "13: kernels13.py; 13b: kernels13b.py")
    a = p.parse_args(argv)
    {"build": cmd_build, "check": cmd_check}[a.cmd](a)


if __name__ == "__main__":
    main()
