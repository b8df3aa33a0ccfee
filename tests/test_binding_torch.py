"""The binding's fast path on real torch tensors, where torch is installed (CPU tensors will do: no
GPU, no nvcc). CI has no torch: skipped there. The key (binding_runtime._key) must tell apart what
the checks read of a torch.Tensor; a refused call builds nothing and keeps nothing."""
import os

import pytest

from test_binding import module

torch = pytest.importorskip("torch")


def test_torch_tensors_of_one_kind_share_a_key_and_others_do_not():
    mod = module("gemm_hopper.h100")
    a, b = torch.empty(384, 640, dtype=torch.float16), torch.empty(640, 512, dtype=torch.float16)
    key, ptrs = mod._key(mod.SPEC, {"a": a, "b": b, "acc": None}, None, torch.Tensor)
    a2 = torch.empty(384, 640, dtype=torch.float16)
    again, ptrs2 = mod._key(mod.SPEC, {"a": a2, "b": b, "acc": None}, None, torch.Tensor)
    assert key == again and ptrs[0] == a.data_ptr() and ptrs2[0] == a2.data_ptr() != ptrs[0]
    buf = torch.empty(384 * 640 + 8, dtype=torch.float16)
    for other in (buf[4:-4].view(384, 640),  # 8 bytes in: not 16-byte aligned
                  torch.empty(640, 384, dtype=torch.float16).t(),  # not contiguous
                  torch.empty(384, 640, dtype=torch.bfloat16), torch.empty(384, 656, dtype=torch.float16)):
        assert mod._key(mod.SPEC, {"a": other, "b": b, "acc": None}, None, torch.Tensor)[0] != key
    assert mod._key(mod.SPEC, {"a": buf[8:].view(384, 640), "b": b, "acc": None}, None, torch.Tensor)[0] == key


def test_a_refused_call_builds_nothing_and_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("TWILL_CACHE_DIR", str(tmp_path))
    mod = module("gemm_hopper.h100")
    a, b = torch.empty(384, 640, dtype=torch.float16), torch.empty(640, 512, dtype=torch.float16)
    for _ in range(2):
        with pytest.raises(mod.ArgumentError, match=r"^a: expected torch\.float16 on a CUDA device, got "
                                                    r"torch\.float16 on cpu$"):
            mod.run(a, b)
    with pytest.raises(mod.ArgumentError, match=r"^b: expected a torch\.Tensor, got list$"):
        mod.run(a, [1.0])
    assert mod._LAUNCHES == {} and not os.listdir(tmp_path)
