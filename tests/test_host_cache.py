"""What an emitted launch() keeps between calls (twill/emit/cuda_runtime/host.tpl), and the block the
binding packs for twill_launch (K_entry.cu's twill_args), checked by a host-only program that
includes a golden kernel's entry file: nvcc builds it (PTX only), and it runs without a GPU.

- MapCache: a tensor map is found again only for the same encoding arguments, every one of them
  (the pointer, the three extents, the element size, the box, the swizzle, the data type); the
  oldest goes first once kMapCache are kept; encode() reads this thread's cache, not another's.
- once_per_device: done once per device while it succeeds, again where it failed, every time past
  device 63.
- twill_args: the fields C reads off a block that the binding's _block packed are the values packed.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from test_binding import GOLDEN, module, nvcc
from test_binding_cache import DType, Tensor

PROGRAM = r"""
#include "gemm_hopper.h100_entry.cu"
#include <stdio.h>
#include <thread>

namespace ns = twill_gemm_hopper;
static int failures = 0;
#define CHECK(c) do { if (!(c)) { printf("FAIL line %d: %s\n", __LINE__, #c); ++failures; } } while (0)

static bool same(const CUtensorMap* a, const CUtensorMap& b) { return a != nullptr && memcmp(a, &b, sizeof b) == 0; }

int main(int argc, char** argv) {
  // the block the binding packed
  unsigned char buf[4096];
  FILE* f = fopen(argv[1], "rb");
  const size_t got = fread(buf, 1, sizeof buf, f);
  fclose(f);
  CHECK(got == sizeof(twill_args) && twill_args_bytes() == static_cast<int>(sizeof(twill_args)));
  twill_args a;
  memcpy(&a, buf, sizeof a);
  printf("fields %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %g %g %llu", (long long)a.tiles_m,
         (long long)a.tiles_n, (long long)a.iters, (long long)a.loop_extent, (long long)a.batch,
         (long long)a.m_extent, (long long)a.n_extent, (long long)a.persistent, (long long)a.raster_group,
         (long long)a.device, a.exp2_scale, a.out_scale, (unsigned long long)(uintptr_t)a.stream);
  for (void* t : a.tensors) printf(" %llu", (unsigned long long)(uintptr_t)t);
  for (int64_t g : a.batch_groups) printf(" %lld", (long long)g);
  printf("\n");

  // MapCache: every argument is part of the key
  ns::MapCache cache;
  const ns::MapKey key{reinterpret_cast<const void*>(0x100000), 384, 640, 1, 2, 640, 384 * 640, 64, 64, 128, 6};
  CUtensorMap map;
  memset(&map, 7, sizeof map);
  CHECK(cache.find(key) == nullptr);
  cache.put(key, map);
  CHECK(same(cache.find(key), map));
  ns::MapKey other[11] = {key, key, key, key, key, key, key, key, key, key, key};
  other[0].ptr = reinterpret_cast<const void*>(0x100010);
  other[1].rows = 385;
  other[2].cols = 641;
  other[3].batch = 2;
  other[4].esize = 4;
  other[5].box_rows = 128;
  other[6].box_cols = 32;
  other[7].swizzle = 64;
  other[8].type = 7;
  other[9].row_stride = 648;  // a row pitch
  other[10].batch_stride = 385 * 640;
  for (const ns::MapKey& k : other) CHECK(cache.find(k) == nullptr);
  // the oldest goes first: kMapCache more keys push `key` out, and the last kMapCache stay
  for (int i = 0; i < ns::kMapCache; ++i) {
    ns::MapKey k = key;
    k.rows = 1000 + i;
    CUtensorMap m;
    memset(&m, i, sizeof m);
    cache.put(k, m);
  }
  CHECK(cache.find(key) == nullptr);
  for (int i = 0; i < ns::kMapCache; ++i) {
    ns::MapKey k = key;
    k.rows = 1000 + i;
    CUtensorMap m;
    memset(&m, i, sizeof m);
    CHECK(same(cache.find(k), m));
  }

  // encode() copies this thread's map where it holds one; another thread holds none of its own
  ns::map_cache.put(key, map);
  CUtensorMap out;
  CHECK(ns::encode(&out, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, key.ptr, 384, 640, 1, 640, 384 * 640, 64, 64, 128) &&
        memcmp(&out, &map, sizeof map) == 0);
  // a row stride off 16 bytes (641 f16) is refused before any driver call, as TMA would
  CHECK(!ns::encode(&out, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, key.ptr, 384, 640, 1, 641, 384 * 641, 64, 64, 128));
  std::thread([&] {
    CUtensorMap there;
    memset(&there, 7, sizeof there);
    // without a driver the encoding fails; with one it encodes a real map, never this thread's
    if (ns::encode(&there, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, key.ptr, 384, 640, 1, 640, 384 * 640, 64, 64, 128))
      CHECK(memcmp(&there, &map, sizeof map) != 0);
  }).join();

  // once_per_device
  std::atomic<uint64_t> done{0};
  int calls = 0;
  auto ok = [&](int) { ++calls; return cudaSuccess; };
  CHECK(ns::once_per_device(done, 0, ok) == cudaSuccess && calls == 1);
  CHECK(ns::once_per_device(done, 0, ok) == cudaSuccess && calls == 1);
  CHECK(ns::once_per_device(done, 3, ok) == cudaSuccess && calls == 2);
  CHECK(ns::once_per_device(done, 3, ok) == cudaSuccess && calls == 2);
  CHECK(ns::once_per_device(done, 64, ok) == cudaSuccess && ns::once_per_device(done, 64, ok) == cudaSuccess &&
        calls == 4);
  std::atomic<uint64_t> failed{0};
  auto bad = [&](int) { ++calls; return cudaErrorInvalidValue; };
  CHECK(ns::once_per_device(failed, 1, bad) == cudaErrorInvalidValue && calls == 5);
  CHECK(ns::once_per_device(failed, 1, bad) == cudaErrorInvalidValue && calls == 6);
  CHECK(ns::once_per_device(failed, 1, ok) == cudaSuccess && calls == 7 && failed.load() == 2);
  printf(failures ? "FAILED\n" : "ok\n");
  return failures ? 1 : 0;
}
"""


@pytest.mark.slow
@pytest.mark.skipif(nvcc() is None, reason="nvcc not found")
def test_launch_caches_and_the_packed_block_on_the_host(tmp_path):
    for suffix in (".cu", "_entry.cu"):
        (tmp_path / f"gemm_hopper.h100{suffix}").write_text((GOLDEN / f"gemm_hopper.h100{suffix}").read_text())
    (tmp_path / "check.cu").write_text(PROGRAM)
    build = subprocess.run([nvcc(), "-std=c++17", "-gencode=arch=compute_90a,code=compute_90a", "check.cu", "-o",
                            "check"], cwd=tmp_path, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]

    mod = module("gemm_hopper.h100")
    run = mod._prepare(mod.SPEC, {"a": Tensor((2, 2, 300, 640)), "b": Tensor((2, 1, 640, 512), ptr=3 << 20),
                                  "acc": None}, None, Tensor, DType)
    assert run.head == (3, 2, 10, 640, 4, 300, 0)  # m_extent: a partial last row tile
    assert run.groups == (1, 2, 1)  # b: one batch entry for two of a's
    ptrs = [1 << 20, 3 << 20, (1 << 40) + 16]
    (tmp_path / "block").write_bytes(mod._block(run, ptrs, 0xDEADBEEF0, 0.25, 3.5, 0, 4, ()))
    proc = subprocess.run(["./check", "block"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.endswith("ok\n"), proc.stdout + proc.stderr
    fields = proc.stdout.splitlines()[0].split()[1:]
    assert fields == [str(x) for x in (*run.head, 0, 4, 0)] + ["0.25", "3.5", str(0xDEADBEEF0)] \
        + [str(p) for p in ptrs] + [str(g) for g in run.groups]
