"""The binding's call keeps what depends only on its arguments' shapes (twill/emit/binding_runtime.py:
`_plan`, `_outputs_type`; call's fast path: `_key`, `_prepare`, `_block`), so a call's host time is not
spent resolving the same shapes again."""
import math
import re
import struct

import pytest

from test_binding import GOLDEN, meta, module


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
    assert mod._plan(mod.SPEC, good, None)["layouts"][1][0] == "as is"
    for bad, words in (({"device": "cuda:1"}, "on cuda:1"), ({"dtype": "float32"}, "expected torch.float16")):
        with pytest.raises(mod.ArgumentError, match=words):
            mod._plan(mod.SPEC, {**good, "b": meta(mod, (640, 512), **bad)}, None)
    # a start off 16 bytes is staged, not refused: another plan
    assert mod._plan(mod.SPEC, {**good, "b": meta(mod, (640, 512), ptr=(1 << 20) + 8)}, None)["layouts"][1][0] == "stage"


def test_the_outputs_named_tuple_is_made_once_per_kernel():
    mod = module("attention_fwd_hopper.h100")
    names = tuple(a["name"] for a in mod.SPEC["args"] if a["output"])
    kind = mod._outputs_type(mod.SPEC["kernel"], names)
    assert kind is mod._outputs_type(mod.SPEC["kernel"], names) and kind._fields == names


def test_outputs_take_any_argument_name():
    """Triton's tutorial LayerNorm names an argument `_mean`, which a named tuple refuses (it failed on the
    GPU, session 31): the outputs are a tuple whose items are also attributes of every such name."""
    mod = module("attention_fwd_hopper.h100")
    kind = mod._outputs_type("layer_norm_fwd", ("Y", "_mean", "_rstd"))
    out = kind("y", "m", "r")
    assert tuple(out) == ("y", "m", "r") and (out.Y, out._mean, out._rstd) == ("y", "m", "r")
    assert out._asdict() == {"Y": "y", "_mean": "m", "_rstd": "r"} and "_mean='m'" in repr(out)
    with pytest.raises(AttributeError, match="no output 'mean'"):
        out.mean


# -- call's fast path: _key, _prepare, _block (no torch: tensors here are plain objects that answer
# what the runtime asks of a torch.Tensor) ------------------------------------------------------------

class DType:
    """A dtype object, one per name as torch's are (compared by identity)."""
    known = {}

    def __new__(cls, name):
        if name not in cls.known:
            cls.known[name] = super().__new__(cls)
            cls.known[name].name = name
        return cls.known[name]

    def __str__(self):
        return f"torch.{self.name}"


class Device(tuple):
    def __new__(cls, kind="cuda", index=0):
        return super().__new__(cls, (kind, index))

    @property
    def index(self):
        return self[1]

    def __str__(self):
        return f"{self[0]}:{self[1]}"


class Tensor:
    """Strides: given, else row-major where contiguous, else column-major (a transpose's)."""

    def __init__(self, shape, dtype="float16", device=Device(), contiguous=True, ptr=1 << 20, strides=None):
        self.shape, self.dtype, self.device = tuple(shape), DType(dtype), device
        self.contiguous, self.ptr = contiguous, ptr
        dense = lambda dims: tuple(math.prod(dims[i + 1:]) for i in range(len(dims)))  # noqa: E731
        self.strides = strides or (dense(self.shape) if contiguous else dense(self.shape[::-1])[::-1])

    def is_contiguous(self):
        return self.contiguous

    def stride(self):
        return self.strides

    def data_ptr(self):
        return self.ptr


def gemm(mod, acc=None, **a_kw):
    return {"a": Tensor((384, 640), **a_kw), "b": Tensor((640, 512), ptr=3 << 20), "acc": acc}


def test_one_key_for_one_kind_of_tensors_at_any_aligned_address():
    mod = module("gemm_hopper.h100")
    key, ptrs = mod._key(mod.SPEC, gemm(mod), None, Tensor)
    again, other = mod._key(mod.SPEC, gemm(mod, ptr=5 << 20), None, Tensor)
    assert key == again and hash(key) == hash(again)
    assert ptrs == [1 << 20, 3 << 20, None] and other == [5 << 20, 3 << 20, None]


@pytest.mark.parametrize("change", [dict(dtype="float32"), dict(device=Device("cuda", 1)), dict(contiguous=False),
                                    dict(ptr=(1 << 20) + 8), dict(shape=(768, 640)), dict(device=Device("cpu", None))])
def test_whatever_the_checks_read_changes_the_key(change):
    """A tensor that differs in anything resolve reads (shape, dtype, device, contiguity, 16-byte
    alignment) never finds another kind's checked _Launch."""
    mod = module("gemm_hopper.h100")
    key, _ = mod._key(mod.SPEC, gemm(mod), None, Tensor)
    shape = change.pop("shape", (384, 640))
    tensors = {**gemm(mod), "a": Tensor(shape, **change)}
    assert mod._key(mod.SPEC, tensors, None, Tensor)[0] != key


def test_the_key_tells_apart_outputs_given_iters_and_the_order_of_names():
    mod = module("gemm_hopper.h100")
    key, _ = mod._key(mod.SPEC, gemm(mod), None, Tensor)
    assert mod._key(mod.SPEC, gemm(mod, acc=Tensor((384, 512), ptr=7 << 20)), None, Tensor)[0] != key
    assert mod._key(mod.SPEC, gemm(mod), 10, Tensor)[0] != key
    backwards = dict(reversed(list(gemm(mod).items())))
    assert mod._key(mod.SPEC, backwards, None, Tensor)[0] != key
    assert mod._key(mod.SPEC, {**gemm(mod), "b": [1, 2]}, None, Tensor) == (None, None)  # no tensor: no key


def test_prepare_reads_the_plan_resolve_reads():
    mod = module("attention_fwd_hopper.h100")
    tensors = {"q": Tensor((2, 4, 512, 128)), "k": Tensor((2, 1, 1024, 128)), "v": Tensor((2, 1, 1024, 128)),
               "m": None, "l": None, "acc": Tensor((2, 4, 512, 128), ptr=9 << 20)}
    run = mod._prepare(mod.SPEC, tensors, None, Tensor, DType)
    plan = mod.resolve(mod.SPEC, {n: None if t is None else mod.describe(t) for n, t in tensors.items()})
    assert run.plan == plan and run.names == tuple(tensors)
    assert run.head == (4, 1, 8, 1024, 8, 0, 0)  # tiles_m, tiles_n, iters, loop_extent, batch, m_extent, n_extent
    assert run.groups == (1, 4, 4, 1, 1, 1)  # k and v: one head for 4 of q's
    assert run.index == 0 and run.device == Device()
    assert run.allocate == ((3, (2, 4, 512), DType("float32"), False, 512), (4, (2, 4, 512), DType("float32"), False, 512))
    assert run.stage == ()
    assert run.zero == () and run.outputs == (3, 4, 5) and run.outputs_type._fields == ("m", "l", "acc")


def test_prepare_zeroes_an_output_the_ctas_add_into_only_where_it_is_given():
    mod = module("attention_bwd_hopper.h100")
    shapes = {"k": (2, 256, 128), "v": (2, 256, 128), "q": (2, 512, 128), "do": (2, 512, 128), "lse": (2, 512),
              "dlt": (2, 512)}
    ins = {n: Tensor(s, dtype="float32" if n in ("lse", "dlt") else "float16") for n, s in shapes.items()}
    zeroed = [i for i, a in enumerate(mod.SPEC["args"]) if a["zero"]]
    assert zeroed
    allocated = mod._prepare(mod.SPEC, {**ins, **{a["name"]: None for a in mod.SPEC["args"] if a["output"]}}, None,
                             Tensor, DType)
    assert allocated.zero == () and [x[0] for x in allocated.allocate if x[3]] == zeroed
    given = {**ins, **{a["name"]: Tensor(allocated.plan["shapes"][a["name"]], dtype=a["dtype"])
                       for a in mod.SPEC["args"] if a["output"]}}
    assert mod._prepare(mod.SPEC, given, None, Tensor, DType).zero == tuple(zeroed)


@pytest.mark.parametrize("change, message", [
    (dict(dtype="float32"), r"^a: expected torch\.float16 on a CUDA device, got torch\.float32 on cuda:0$"),
    (dict(device=Device("cpu", None)), r"^a: expected torch\.float16 on a CUDA device, got torch\.float16 on cpu:None$"),
    (dict(device=Device("cuda", 1)), r"^b: on cuda:0, but the other tensors are on cuda:1$"),
])
def test_prepare_raises_resolves_errors_after_a_kind_was_cached(change, message):
    """The fast path's cache holds only kinds that passed the checks; a tensor of a cached shape
    that fails one is a new key, and _prepare raises resolve's ArgumentError for it."""
    mod = module("gemm_hopper.h100")
    mod._prepare(mod.SPEC, gemm(mod), None, Tensor, DType)
    with pytest.raises(mod.ArgumentError, match=message):
        mod._prepare(mod.SPEC, gemm(mod, **change), None, Tensor, DType)
    with pytest.raises(mod.ArgumentError, match=r"^b: expected a torch\.Tensor, got list$"):
        mod._prepare(mod.SPEC, {**gemm(mod), "b": [1, 2]}, None, Tensor, DType)


def test_the_block_holds_twill_args_fields_in_order():
    """_block packs K_entry.cu's twill_args: the plan's sizes, the knobs, the device, the scales,
    the stream, a pointer and a batch group per tensor, then the epilogue's scalars."""
    mod = module("attention_fwd_hopper.h100")
    tensors = {"q": Tensor((2, 4, 512, 128)), "k": Tensor((2, 1, 1024, 128)), "v": Tensor((2, 1, 1024, 128)),
               "m": None, "l": None, "acc": None}
    run = mod._prepare(mod.SPEC, tensors, None, Tensor, DType)
    ptrs = [16 * (i + 1) for i in range(6)]
    block = mod._block(run, ptrs, 0xABC0, 0.5, 2.0, 1, 8, ())
    fields = struct.unpack(mod.args_format(mod.SPEC), block)
    # row strides, then batch strides: q, k, v and acc through TMA (k's batch [2, 1] flattens to 2 entries), m and l
    # written with plain stores (0: contiguous)
    strides = (128, 128, 128, 0, 0, 128, 512 * 128, 1024 * 128, 1024 * 128, 0, 0, 512 * 128)
    assert fields == (4, 1, 8, 1024, 8, 0, 0, 1, 8, 0, 0.5, 2.0, 0xABC0, *ptrs, 1, 4, 4, 1, 1, 1, *strides)
    assert len(block) == 8 * (13 + 4 * 6)


def test_prepare_stages_what_tma_cannot_read_and_passes_a_views_strides():
    """K = 781 f16 rows (1562 bytes): a is staged into rows of 784 (position, buffer shape, output, zeroed,
    columns, transposed: tests/test_tf32.py); N = 1001: acc is allocated with rows of 1008 and returned as its view; a view of a [384, 1024]
    tensor passes its row stride, no copy."""
    mod = module("gemm_hopper.h100")
    run = mod._prepare(mod.SPEC, {"a": Tensor((384, 781)), "b": Tensor((781, 1001), strides=(1008, 1)), "acc": None},
                       None, Tensor, DType)
    assert run.stage == ((0, (384, 784), False, False, 781, False),)
    assert run.allocate == ((2, (384, 1008), DType("float16"), False, 1001),)
    assert run.strides == (784, 1008, 1008, 384 * 784, 781 * 1008, 384 * 1008)
    run = mod._prepare(mod.SPEC, {"a": Tensor((384, 640), contiguous=False, strides=(1024, 1)),
                                  "b": Tensor((640, 500), contiguous=False, strides=(512, 1)),
                                  "acc": Tensor((384, 500), ptr=5 << 20)}, None, Tensor, DType)
    assert run.stage == ((2, (384, 504), True, False, 500, False),)  # 1000 bytes a row: staged, copied back after
    assert run.strides == (1024, 512, 504, 384 * 1024, 640 * 512, 384 * 504)  # b: a view, taken as it lies


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*_entry.cu")), ids=lambda p: p.name)
def test_every_entry_reads_the_block_the_binding_packs(path):
    """K_entry.cu's twill_args is as long as args_format says (its static_assert counts 8-byte fields)."""
    mod = module(path.name[:-len("_entry.cu")])
    fields = int(re.search(r"sizeof\(twill_args\) == 8 \* (\d+)", path.read_text())[1])
    assert 8 * fields == struct.calcsize(mod.args_format(mod.SPEC))
    assert f"void* tensors[{len(mod.SPEC['args'])}];" in path.read_text()
