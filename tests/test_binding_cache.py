"""The binding's call keeps what depends only on its arguments' shapes (twill/emit/binding_runtime.py:
`_plan`, `_outputs_type`), so a call's host time is not spent resolving the same shapes again."""
import pytest

from test_binding import meta, module


def test_the_same_shapes_at_other_addresses_reuse_one_plan():
    mod = module("gemm_hopper.h100")
    first = mod._plan(mod.SPEC, {"a": meta(mod, (384, 640)), "b": meta(mod, (640, 512))}, None)
    again = mod._plan(mod.SPEC, {"a": meta(mod, (384, 640), ptr=7 << 20),
                                 "b": meta(mod, (640, 512), ptr=9 << 20)}, None)
    assert again is first
    assert first == mod.resolve(mod.SPEC, {"a": meta(mod, (384, 640)), "b": meta(mod, (640, 512))})


def test_other_shapes_get_their_own_plan():
    mod = module("gemm_hopper.h100")
    small = mod._plan(mod.SPEC, {"a": meta(mod, (384, 640)), "b": meta(mod, (640, 512))}, None)
    big = mod._plan(mod.SPEC, {"a": meta(mod, (768, 640)), "b": meta(mod, (640, 512))}, None)
    assert (small["tiles_m"], big["tiles_m"]) == (3, 6)


def test_a_cached_shape_is_still_checked_for_its_alignment_device_and_dtype():
    mod = module("gemm_hopper.h100")
    good = {"a": meta(mod, (384, 640)), "b": meta(mod, (640, 512))}
    mod._plan(mod.SPEC, good, None)
    for bad, words in (({"ptr": (1 << 20) + 8}, "16-byte boundary"), ({"device": "cuda:1"}, "on cuda:1"),
                       ({"dtype": "float32"}, "expected torch.float16")):
        with pytest.raises(mod.ArgumentError, match=words):
            mod._plan(mod.SPEC, {**good, "b": meta(mod, (640, 512), **bad)}, None)


def test_the_outputs_named_tuple_is_made_once_per_kernel():
    mod = module("attention_fwd_hopper.h100")
    names = tuple(a["name"] for a in mod.SPEC["args"] if a["output"])
    kind = mod._outputs_type(mod.SPEC["kernel"], names)
    assert kind is mod._outputs_type(mod.SPEC["kernel"], names) and kind._fields == names
