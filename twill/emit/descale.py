"""Per-tensor descale factors of 8-bit float inputs: a launch-time scalar on the outputs.

An fp8 tensor x stands for x * s_x (s_x its descale factor, a float per tensor the caller keeps
beside it, as FlashAttention-3 and cuDNN take them). A product of two such tensors is then
s_a * s_b times what the tensor core computes. Where a scalar already scales the product, the
caller folds the factors into it: attention's scores go only through exp2, so Q's and K's
descales multiply `exp2_scale` (exp2((s - m) * log2(e) / sqrt(d) * s_q * s_k)). What reaches an
output unscaled gets `Problem::out_scale` (default 1): every output that is the accumulator of an
fp8 mma (attention's O = P V: s_v; an fp8 GEMM's C: s_a * s_b) is multiplied by it as it is
written, after the online softmax's division. An output the graph's epilogue computes takes the
factor earlier: the fp8 carries the epilogue reads are scaled as their last values are read, before
its ops (which need not be linear). sm_90a only; the kernel has the field only where
it has such an output, so nothing else changes.
"""
from __future__ import annotations

from ..mma import FP8
from . import epilogue


def _fp8_mma(model, value: str) -> bool:
    shape = model.mma_shape.get(value)
    return shape is not None and shape.dtype in FP8


def scaled_outputs(model) -> frozenset[str]:
    """The output tensors multiplied by out_scale as they are written: carries whose last value an
    fp8 mma computes, written as they are (not through the epilogue)."""
    if model.target.tensor_memory:  # the scale multiplies a register accumulator at its last value
        return frozenset()
    return frozenset(t.name for t in model.tensors if t.kind == "output" and _fp8_mma(model, t.value)
                     and epilogue.final_values(model, t) is None)


def epilogue_scaled(model) -> frozenset[str]:
    """The body values (fp8 mma carries' sources) multiplied by out_scale as their last values are
    read, because an epilogue output is computed from them."""
    if model.target.tensor_memory:
        return frozenset()
    reads = (v for t in model.tensors if t.kind == "output" for v in epilogue.final_values(model, t) or ())
    return frozenset(v for v in reads if _fp8_mma(model, v))


def has_scale(model) -> bool:
    return bool(scaled_outputs(model) or epilogue_scaled(model))


ARGS_LINE = "float out_scale;  // the fp8 outputs' descale factor (descale.py)"
PROBLEM_LINE = ("float out_scale = 1.0f;  // multiplies the outputs an fp8 mma accumulates (O of FP8 attention: V's "
                "descale; a GEMM's: A's x B's)")


def finalize_line(fin: str) -> str:
    return f"twill::op_scale_by({fin}, args.out_scale);  // the output's descale factor (out_scale)"
