// Rows at any pitch (twill/emit/anypitch.py): a load whose rows are not 16 bytes apart, read with no copy.
// bulk_rows brings ROWS rows of a tile: row r (element first + r * rs of the tensor at `base`) in one
// non-tensor bulk copy (cp.async.bulk) of W elements from the 16-byte boundary at or before it, into dst's
// row r of W (unswizzled). Not a tensor map's box: cp.async.bulk.tensor needs a 128-byte aligned shared
// destination, and rows of W * sizeof(T) bytes (272 for 136 bf16) start at 16-byte multiples only; a bulk
// copy needs 16 bytes of both addresses and a size of a multiple of 16, which rows of W keep. It has no
// zero fill: a copy stops at the tensor's last 16-byte chunk (`end`: its elements from base, a multiple of
// 16 / sizeof(T)), a row wholly past it is not read, and the readers mask what was not brought (rows_to_frag).
// The producer thread arrives on `bar` with the bytes it will deliver (in place of the ring's expect_full).
template <typename T, int ROWS, int W>
__device__ __forceinline__ void bulk_rows(void* dst, const void* base, uint64_t* bar, long long first, long long rs,
                                          long long end) {
  constexpr long long kA = 16 / static_cast<long long>(sizeof(T));
  static_assert((W * sizeof(T)) % 16 == 0, "a bulk copy's size is a multiple of 16 bytes");
  uint32_t bytes = 0;
  long long e = first;
#pragma unroll 1
  for (int r = 0; r < ROWS; ++r, e += rs) {
    const long long n = end - (e & ~(kA - 1));
    bytes += n <= 0 ? 0u : static_cast<uint32_t>((n < W ? n : W) * sizeof(T));
  }
  mbar_arrive_expect_tx(bar, bytes);
  const char* src = static_cast<const char*>(base);
  const uint32_t row = smem_addr(dst), b = smem_addr(bar);
  e = first;
#pragma unroll 1
  for (int r = 0; r < ROWS; ++r, e += rs) {
    const long long a = e & ~(kA - 1), n = end - a;
    if (n <= 0) break;  // this row and the later ones lie past the tensor (rs > 0)
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(row + r * static_cast<uint32_t>(W * sizeof(T))),
                    "l"(reinterpret_cast<uint64_t>(src + a * static_cast<long long>(sizeof(T)))),
                    "r"(static_cast<uint32_t>((n < W ? n : W) * sizeof(T))), "r"(b)
                 : "memory");
  }
}

// The tile's readers shift each row: row r's column c lies at r * W + s_r + c, W = COLS + 16 / sizeof(T), s_r =
// (shift + r * step) mod (16 / sizeof(T)) (shift: the tile's first row's, step: the row stride's). A row at or
// past `rows` or a column at or past `cols` reads 0 (the zero fill of a 2-d map's box past the tensor; bulk_rows
// brings no bytes there). Each element one load of sizeof(T) bytes: a row starts at any sizeof(T) boundary.
template <typename T, int ROWS, int COLS, typename F>
__device__ __forceinline__ void rows_to_frag(F& f, const void* tile, int row0, int shift, int step, int rows, int cols) {
  static_assert(!is_rows<F>::value, "rows_to_frag reads a tile's fragment");
  constexpr int kA = 16 / static_cast<int>(sizeof(T)), kW = COLS + kA;
  const T* base = static_cast<const T*>(tile);
  if (rows >= ROWS && cols >= COLS) {  // every row and column inside: no test per element
    for_each(f, [&](int b, int i) {
      const int r = row0 + frag_row(b, i);
      return to_float<T>(base[r * kW + ((shift + r * step) & (kA - 1)) + frag_col(i)]);
    });
    return;
  }
  for_each(f, [&](int b, int i) {
    const int r = row0 + frag_row(b, i), c = frag_col(i);
    return r < rows && c < cols ? to_float<T>(base[r * kW + ((shift + r * step) & (kA - 1)) + c]) : 0.0f;
  });
}
