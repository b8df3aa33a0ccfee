#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <type_traits>

namespace twill {

// A tensor's extent along a grid axis in elements: the caller's (Problem::m_extent, n_extent; the
// last tile partial), else `tiles` whole tiles of `step`.
__host__ __device__ __forceinline__ uint64_t grid_extent(int extent, int tiles, int step) {
  return extent > 0 ? static_cast<uint64_t>(extent) : static_cast<uint64_t>(tiles) * static_cast<uint64_t>(step);
}

// ---- shared memory and mbarriers -------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_addr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("{\n\t.reg .b64 state;\n\tmbarrier.arrive.shared::cta.b64 state, [%0];\n\t}"
               :: "r"(smem_addr(bar)) : "memory");
}
// A whole warp is done: one arrival for it (on barriers that count warps).
__device__ __forceinline__ void warp_arrive(uint64_t* bar) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) mbar_arrive(bar);
}

// The producer's arrival that also announces how many bytes the TMA will deliver.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("{\n\t.reg .b64 state;\n\tmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n\t}"
               :: "r"(smem_addr(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
               "selp.u32 %0, 1, 0, p;\n\t}"
               : "=r"(done) : "r"(smem_addr(bar)), "r"(parity) : "memory");
  return done != 0;
}

__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

// A ring of DEPTH slots with a full and an empty mbarrier each. The value at ring position i lives
// in slot i % DEPTH; its pass through the ring is i / DEPTH, whose parity is the phase bit. A
// consumer waits on full with that parity; the producer waits on empty with the opposite one, so
// the first pass through the ring never blocks. Position i is instance i of the CTA's first tile;
// a later tile's instance k is at tile.pos + k (TileIdx::pos), the positions continuing across
// the CTA's tiles, so every tile may run its own number of iterations.
template <int DEPTH>
struct Ring {
  uint64_t full[DEPTH];
  uint64_t empty[DEPTH];

  __device__ __forceinline__ void init(uint32_t full_count, uint32_t empty_count) {
    for (int s = 0; s < DEPTH; ++s) {
      mbar_init(&full[s], full_count);
      mbar_init(&empty[s], empty_count);
    }
  }
  __device__ __forceinline__ static int slot(int i) { return i % DEPTH; }
  __device__ __forceinline__ static uint32_t phase(int i) { return static_cast<uint32_t>(i / DEPTH) & 1u; }
  __device__ __forceinline__ void wait_full(int i) { mbar_wait(&full[slot(i)], phase(i)); }
  __device__ __forceinline__ void wait_empty(int i) { mbar_wait(&empty[slot(i)], phase(i) ^ 1u); }
  __device__ __forceinline__ void arrive_full(int i) { mbar_arrive(&full[slot(i)]); }
  __device__ __forceinline__ void arrive_empty(int i) { mbar_arrive(&empty[slot(i)]); }
  // A whole warp is done with instance i: one arrival for it (the empty barrier counts warps).
  __device__ __forceinline__ void release_by_warp(int i) { warp_arrive(&empty[slot(i)]); }
  __device__ __forceinline__ void expect_full(int i, uint32_t bytes) { mbar_arrive_expect_tx(&full[slot(i)], bytes); }
};

// ---- which output tiles a CTA computes -----------------------------------------------------------
// The tiles (tiles_m x tiles_n per batch) are numbered t = 0, 1, ...; CTA c computes t = c, c + G,
// c + 2G, ... for a grid of G CTAs: one tile each when G is the number of tiles, several when the
// grid is persistent (G = the SMs), so a CTA's next tile fills the pipeline while the last one drains.
// Numbering the tiles `group` rows at a time, column by column within a group, lets the CTAs that
// run together share their row and column tiles of the inputs in L2 (Triton's GROUP_M); group <= 0
// or >= tiles_m numbers them row-fastest.
struct TileIdx {
  int m, n, b;  // tile row, tile column, batch index
  int round;    // tiles this CTA computed before this one
  bool last;    // this CTA's last tile
  // The ring position of this tile's instance 0: the iterations of the CTA's earlier tiles, modulo
  // kPhasePeriod (every ring's slot and parity repeat after that many); 0 for a CTA's first tile.
  int pos = 0;
};
__device__ __forceinline__ TileIdx tile_of(int t, int round, bool last, int tiles_m, int tiles_n, int group) {
  const int per_batch = tiles_m * tiles_n;
  const int b = t / per_batch, pid = t % per_batch;
  if (group <= 0 || group >= tiles_m) return TileIdx{pid % tiles_m, pid / tiles_m, b, round, last};
  const int per_group = group * tiles_n;
  const int first = pid / per_group * group;
  const int rows = min(tiles_m - first, group);
  return TileIdx{first + pid % per_group % rows, pid % per_group / rows, b, round, last};
}

// ---- TMA ---------------------------------------------------------------------------------------
// Tensor maps are 3-d: (columns, rows, batch). The map itself is a __grid_constant__ kernel parameter.
__device__ __forceinline__ void tma_prefetch(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" :: "l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];"
      :: "r"(smem_addr(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// TMA stores from shared memory (the same swizzle as the loads), as bulk groups of the
// issuing thread: it commits a group after its stores, and waits until at most N of its groups are
// still reading shared memory before that memory is written again.
__device__ __forceinline__ void tma_store(const CUtensorMap* map, const void* src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];"
               :: "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
// ... adding the tile into global memory instead (several CTAs reduce into one tile).
__device__ __forceinline__ void tma_reduce_add(const CUtensorMap* map, const void* src, int c0, int c1, int c2) {
  asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];"
               :: "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory"); }
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// Ordinary stores to shared memory become visible to the async proxy (TMA, wgmma, tcgen05).
__device__ __forceinline__ void fence_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// ---- named barriers and register reallocation ---------------------------------------------------
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(threads) : "memory");
}

template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(REGS));
}

template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(REGS));
}

// ---- tiles in shared memory ------------------------------------------------------------------
// The layout TMA writes with a swizzled tensor map, which wgmma and tcgen05 read through
// descriptors. The swizzle width kSw is the widest of 128, 64 and 32 bytes that divides a row
// (16: none, for row vectors and for tiles whose rows are not a multiple of 8: TMA swizzles by
// the shared-memory address, which matches the row only where blocks and slots start on a whole
// 8-row atom): columns cut into kSw-byte blocks, each block ROWS rows of kSw bytes,
// and in every row the 16-byte chunks permuted by XOR with bits 7.. of the row's byte offset in
// its block (row % 8 for 128 bytes, (row / 2) % 4 for 64, (row / 4) % 2 for 32). Tiles are
// 1024-byte aligned.
template <typename T, int ROWS, int COLS>
struct Tile {
  static constexpr int kLine = COLS * static_cast<int>(sizeof(T));
  static constexpr int kSw = ROWS % 8 != 0    ? 16
                             : kLine % 128 == 0 ? 128
                             : kLine % 64 == 0  ? 64
                             : kLine % 32 == 0  ? 32
                                                : 16;
  static constexpr int kBlockCols = kSw / static_cast<int>(sizeof(T));
  static constexpr int kBlocks = COLS / kBlockCols;
  static constexpr int kBytes = kBlocks * ROWS * kSw;
  static_assert(kLine % 16 == 0, "a tile's rows must be a whole number of 16-byte chunks");

  __device__ __forceinline__ static int offset(int r, int c) {
    const int block = c / kBlockCols;
    const int byte = (c % kBlockCols) * static_cast<int>(sizeof(T));
    const int chunk = (byte >> 4) ^ (((r * kSw) >> 7) & (kSw / 16 - 1));
    return block * ROWS * kSw + r * kSw + (chunk << 4) + (byte & 15);
  }
};

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// exp2((x - b) * scale) for a row value b (op_exp2, op_exp2_sum); an empty row's -inf maximum counts as 0.
__device__ __forceinline__ float exp2_shifted(float x, float b, float scale) {
  return fast_exp2(fmaf(x, scale, -(b == -INFINITY ? 0.f : b * scale)));
}

template <typename H>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);

template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}

template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}

template <typename H>
__device__ __forceinline__ float unpack(uint32_t w, int hi);

template <>
__device__ __forceinline__ float unpack<__half>(uint32_t w, int hi) {
  __half2 h = *reinterpret_cast<__half2*>(&w);
  return hi ? __high2float(h) : __low2float(h);
}

template <>
__device__ __forceinline__ float unpack<__nv_bfloat16>(uint32_t w, int hi) {
  __nv_bfloat162 h = *reinterpret_cast<__nv_bfloat162*>(&w);
  return hi ? __high2float(h) : __low2float(h);
}

template <typename T>
__device__ __forceinline__ T from_float(float v) { return static_cast<T>(v); }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T>
__device__ __forceinline__ float to_float(T v) { return static_cast<float>(v); }
template <>
__device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

__device__ __forceinline__ float max_or_init(float a, float b) { return fmaxf(a, b); }
