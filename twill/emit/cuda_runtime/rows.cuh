// ---- rows TMA cannot read as boxes (emit/unaligned.py) --------------------------------------------
// A tensor whose row or batch stride is not a multiple of 16 bytes, or whose data starts off a 16-byte
// boundary (50257 bf16 logits a row; a view x[:, :N]), has no 2-d tensor map. launch() encodes a flat
// one instead (the tensor as one row of elements from the 16-byte boundary at or below its start, boxes
// of one 128-byte row) and sets `flat`; the load warp then reads a tile row by row (load_rows).
struct RowPitch {
  int rs, bs;  // row and batch strides, in elements (bs 0 for one batch entry; the flat row is under 2^31)
  int rows, cols;  // the 2-d map's extents: rows per batch entry, elements per row
  int lead;  // elements from the flat map's 16-byte boundary to the tensor's first element
  int flat;  // 1: read row by row through the flat map; 0: the 2-d map, as boxes
};

template <int B> struct RowBits;
template <> struct RowBits<1> { using type = uint8_t; };
template <> struct RowBits<2> { using type = uint16_t; };
template <> struct RowBits<4> { using type = uint32_t; };

__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}

// One box of a flat map (tma_load's, with shared addresses: the load warp runs on few registers).
__device__ __forceinline__ void tma_load_flat(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, 0, 0}], [%2];"
      :: "r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0) : "memory");
}

// One tile of kRows rows and kCols columns of T from (c0, r0) of batch entry b into a ring slot `dst`, laid
// out as the 2-d map's boxes would (blocks of 128-byte rows, 128-byte swizzle), by the whole load warp
// (every lane calls it, after lane 0 found the slot free). Each row of a block inside the extents is one box
// of the flat map, written at the row's own shared address (TMA swizzles by that address, so the bytes land
// where a 2-d box puts them); the rest (rows past the extent, a block reaching past the last column) the
// lanes write with ordinary loads, zeros outside the extents, as a 2-d box's bounds would. Lane 0
// announces the boxes' bytes first and arrives last, after every lane's stores: one arrival, as
// expect_full's, so the full barrier and its readers are those of the 2-d map.
template <typename T, int kRows, int kCols>
__device__ __forceinline__ void load_rows(void* dst, const CUtensorMap* flat, uint64_t* bar, int c0, int r0, int b,
                                          const T* ptr, const RowPitch& p) {
  constexpr int kBlock = 128 / static_cast<int>(sizeof(T));  // a block's columns
  constexpr int kBlocks = kCols / kBlock, kChunk = 16 / static_cast<int>(sizeof(T));
  static_assert(kCols % kBlock == 0 && kRows % 8 == 0, "load_rows reads whole 128-byte swizzle blocks");
  using U = typename RowBits<sizeof(T)>::type;
  const int lane = threadIdx.x % 32;
  const int left = p.rows - r0, in_rows = left < kRows ? (left > 0 ? left : 0) : kRows;
  const int past = p.cols - c0 > 0 ? (p.cols - c0) / kBlock : 0;
  const int boxed = past < kBlocks ? past : kBlocks;  // the blocks inside the row, read as boxes
  const uint32_t base = smem_addr(dst), full = smem_addr(bar);
  if (lane == 0) mbar_expect_tx(full, static_cast<uint32_t>(boxed * in_rows * 128));
  __syncwarp();
  const int first = p.lead + b * p.bs + r0 * p.rs + c0;  // row r0's element c0 in the flat row (under 2^31)
  for (int r = lane; r < in_rows; r += 32) {
#pragma unroll
    for (int blk = 0; blk < kBlocks; ++blk)
      if (blk < boxed) tma_load_flat(base + blk * kRows * 128 + r * 128, flat, full, first + r * p.rs + blk * kBlock);
  }
  if (boxed < kBlocks || in_rows < kRows) {  // the rest, in 16-byte chunks: rows past the extent, blocks past the row
    const U* src = reinterpret_cast<const U*>(ptr) + (first - p.lead - c0);
    for (int i = lane; i < kBlocks * kRows * 8; i += 32) {
      const int blk = i / (kRows * 8), r = i / 8 % kRows, ch = i % 8;
      if (blk < boxed && r < in_rows) continue;  // a box's
      const int c = c0 + blk * kBlock + ch * kChunk;
      uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
      for (int e = 0; e < kChunk; ++e)
        if (r < in_rows && c + e < p.cols)
          w[e * sizeof(U) / 4] |= static_cast<uint32_t>(src[r * p.rs + c + e]) << (8 * (e * sizeof(U) % 4));
      uint32_t a = base + blk * kRows * 128 + r * 128 + ch * 16;
      a ^= ((a >> 7) & 7u) << 4;  // the 128-byte swizzle, by address (twill::Tile)
      asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" :: "r"(a), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                   : "memory");
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the stores, for readers through the async proxy
  }
  __syncwarp();
  if (lane == 0) mbar_arrive(bar);  // release: the lanes' stores, ordered before it by __syncwarp
}
