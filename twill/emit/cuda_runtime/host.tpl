#ifndef TWILL_NO_HOST
// ==== host side ===================================================================================
#include <cudaTypedefs.h>
#include <atomic>
#include <stdio.h>
#include <stdlib.h>

namespace {{ns}} {

// What a caller supplies. Extents are counted in tiles; every tensor is row-major
// [batch][rows][cols] in global memory, contiguous but for a tensor read or written through TMA
// (one with NAME_row_stride): its rows lie NAME_row_stride elements apart and its batch entries
// NAME_batch_stride (0, the default: contiguous, cols and rows x the row stride). The tile of a
// tensor that CTA b reads or writes along a grid axis starts at b * NAME_rows_step +
// NAME_rows_offset (cols likewise). The defaults make each tensor its own array; sub-tiles of one
// matrix share it by a step of the whole tile and an offset of their part (q0, q1 = rows 0-63 and
// 64-127 of each 128-row tile of Q: step 128, offsets 0, 64).
struct Problem {
  int tiles_m = 1;  // output tiles along the rows
  int tiles_n = 1;  // output tiles along the columns
  int iters = kStages;  // loop iterations, at least kStages
  // Elements along the loop axis (keys, a GEMM's K), where not iters * kLoopStep: the loop then runs
  // ceil(loop_extent / kLoopStep) iterations (iters is not read), and the last tile may be partial
  // where kRagged (TMA fills the rows past the end with zeros; rowmax and exp2 skip them).
  int loop_extent = 0;
  int batch = 1;  // independent problems
  // 1: one CTA per SM, each computing several tiles in a row (kernel<true>: the next tile's
  // loads overlap the last one's epilogue), where the kernel allows it (kPersistent), for any
  // iters (the rings' positions continue across a CTA's tiles, TileIdx::pos; a causal loop's
  // tiles each run their own count); 0: one CTA per tile. -1: persistent when the loop is short
  // (iters <= 32; a causal loop's longest tile), where a tile's pipeline fill and drain weigh
  // most; on an H200 it was +8% for 16-iteration attention tiles, and -1% to -5% for 64 and 128
  // (docs/gpu-results.md).
  int persistent = -1;
  float exp2_scale = 1.0f;  // exp2 computes exp2((x - b) * exp2_scale): log2(e)/sqrt(d) for attention
  {{problem_fields}}
};

// The loop's iterations, and its elements along the loop axis.
inline int loop_iters(const Problem& p) {
  {{loop_iters}}
}
inline uint64_t loop_elements(const Problem& p, int step) {
  return p.loop_extent > 0 ? static_cast<uint64_t>(p.loop_extent) : static_cast<uint64_t>(p.iters) * step;
}

// ---- what launch() keeps between calls (a call's host time is a short kernel's latency) ---------
// cuTensorMapEncodeTiled's map is a function of its arguments alone (the address and the layout; no
// device or context state), and encoding one costs microseconds, so each thread keeps the last
// kMapCache maps it encoded, keyed by all of those arguments: a call with the same tensors and sizes
// copies them, any other pointer, extent or box encodes anew. Per thread: no lock, no sharing.
// The state below has internal linkage (static, at namespace scope): a function-local static of an
// inline function is one symbol (STB_GNU_UNIQUE) for every library of this kernel's name loaded in a
// process, so two builds of one kernel would share it.
constexpr int kMapCache = 16;
struct MapKey {
  const void* ptr;
  uint64_t rows, cols, batch, esize, row_stride, batch_stride;
  uint32_t box_rows, box_cols;
  int swizzle, type;
  bool operator==(const MapKey& o) const {
    return ptr == o.ptr && rows == o.rows && cols == o.cols && batch == o.batch && esize == o.esize &&
           row_stride == o.row_stride && batch_stride == o.batch_stride && box_rows == o.box_rows &&
           box_cols == o.box_cols && swizzle == o.swizzle && type == o.type;
  }
};
struct MapCache {
  MapKey keys[kMapCache];
  CUtensorMap maps[kMapCache];
  int filled = 0, next = 0;  // entries in use; the one to replace next (the oldest)
  const CUtensorMap* find(const MapKey& key) const {
    for (int i = 0; i < filled; ++i)
      if (keys[i] == key) return &maps[i];
    return nullptr;
  }
  void put(const MapKey& key, const CUtensorMap& map) {
    keys[next] = key;
    maps[next] = map;
    next = (next + 1) % kMapCache;
    filled = filled < kMapCache ? filled + 1 : kMapCache;
  }
};

// `once(device)` at most once per device while it succeeds (bit d of `done`; every time on a device
// past 63): what stays set in a device's context, as a kernel's shared-memory limit. Threads that
// race may each do it; it is idempotent.
template <class F>
inline cudaError_t once_per_device(std::atomic<uint64_t>& done, int device, F&& once) {
  const bool tracked = device >= 0 && device < 64;
  const uint64_t bit = tracked ? uint64_t(1) << device : 0;
  if (tracked && (done.load(std::memory_order_acquire) & bit)) return cudaSuccess;
  const cudaError_t err = once(device);
  if (err == cudaSuccess && tracked) done.fetch_or(bit, std::memory_order_release);
  return err;
}

static thread_local MapCache map_cache;  // this thread's last tensor maps
static std::atomic<uint64_t> smem_raised[4];  // per kernel variant: the devices whose limit launch() raised
static std::atomic<int> sm_counts[64];  // per device: its SMs, 0 until asked

// The SMs of a device, asked once per device.
static inline cudaError_t sm_count(int device, int* sms) {
  const bool tracked = device >= 0 && device < 64;
  if (tracked && (*sms = sm_counts[device].load(std::memory_order_relaxed)) > 0) return cudaSuccess;
  const cudaError_t err = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, device);
  if (err == cudaSuccess && tracked) sm_counts[device].store(*sms, std::memory_order_relaxed);
  return err;
}

// cuTensorMapEncodeTiled, found once (through the runtime: no -lcuda); nullptr where the driver has none.
static inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 found_fn = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return found_fn;
}

// A 3-d tensor map (columns, rows, batch) with the swizzle of the kernel's tile (twill::Tile: 128, 64
// or 32 bytes, the box's row; 16 for none, as for a row vector, read by index), from this thread's
// MapCache where it was encoded before. Rows lie row_stride elements apart and batch entries
// batch_stride (a row pitch: a view x[:, :N] of a wider tensor, or rows padded to 16 bytes); the
// extents stay the logical ones, so TMA still fills a box past the last column with zeros. TMA
// needs both strides to be multiples of 16 bytes and the data to start on a 16-byte boundary.
static inline bool encode(CUtensorMap* map, CUtensorMapDataType type, uint64_t esize, const void* ptr, uint64_t rows,
                          uint64_t cols, uint64_t batch, uint64_t row_stride, uint64_t batch_stride, uint32_t box_rows,
                          uint32_t box_cols, int swizzle) {
  const MapKey key{ptr, rows, cols, batch, esize, row_stride, batch_stride, box_rows, box_cols, swizzle,
                   static_cast<int>(type)};
  if (const CUtensorMap* found = map_cache.find(key)) {
    *map = *found;
    return true;
  }
  const PFN_cuTensorMapEncodeTiled_v12000 encode_tiled = tensor_map_encoder();
  if (encode_tiled == nullptr || (row_stride * esize) % 16 || (batch_stride * esize) % 16 ||
      reinterpret_cast<uintptr_t>(ptr) % 16)
    return false;
  cuuint64_t dims[3] = {cols, rows, batch};
  cuuint64_t strides[2] = {row_stride * esize, batch_stride * esize};
  cuuint32_t box[3] = {box_cols, box_rows, 1};
  cuuint32_t step[3] = {1, 1, 1};
  if (encode_tiled(map, type, 3, const_cast<void*>(ptr), dims, strides, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE,
                   swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                   : swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                   : swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                   : CU_TENSOR_MAP_SWIZZLE_NONE,
                   CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
    return false;
  map_cache.put(key, *map);
  return true;
}

{{launch_head}}
  const int iters = loop_iters(p);
  if (iters < kStages || p.tiles_m < 1 || p.tiles_n < 1 || p.batch < 1) return cudaErrorInvalidValue;
  {{extent_check}}
    return cudaErrorInvalidValue;  // a partial last tile this kernel cannot take (kRagged), or no loop axis
  {{checks}}
  Args args;
  args.iters = iters;
  args.loop_tail = p.loop_extent > 0 ? p.loop_extent - (iters - 1) * kLoopStep : kLoopStep;
  args.tiles_m = p.tiles_m;
  args.tiles_n = p.tiles_n;
  args.tiles = p.tiles_m * p.tiles_n * p.batch;
  args.exp2_scale = p.exp2_scale;
  {{args}}
  const size_t smem = sizeof(Smem) + 1024;
  const bool tiles = kPersistent && (p.persistent > 0 || (p.persistent < 0 && iters <= 32));
  const bool tail = kMasks && args.loop_tail < kLoopStep;  // the kernel with the masks only where needed
  auto* entry = tiles ? (tail ? kernel<kPersistent, kMasks> : kernel<kPersistent, false>)
                      : (tail ? kernel<false, kMasks> : kernel<false, false>);
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  // the shared-memory limit, raised once per kernel variant and device (it stays set in the context)
  err = once_per_device(smem_raised[(tiles ? 2 : 0) + (tail ? 1 : 0)], device, [&](int) {
    return cudaFuncSetAttribute(entry, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  });
  if (err != cudaSuccess) return err;
  int grid = args.tiles;
  if (tiles) {
    int sms = 0;
    if ((err = sm_count(device, &sms)) != cudaSuccess) return err;
    {{persistent_grid}}
  }
  entry<<<grid, kThreads, smem, stream>>>({{launch_args}});
  err = cudaGetLastError();
  if (err != cudaSuccess)  // a context made anew (cudaDeviceReset) lost the limit: raise it on the next call
    for (auto& r : smem_raised) r.fetch_and(~(uint64_t(1) << (device & 63)), std::memory_order_relaxed);
  return err;
}

// Elements of each tensor for a problem (the sizes `launch` expects behind each pointer).
{{elements}}

}  // namespace {{ns}}

{{main}}
#endif  // TWILL_NO_HOST
