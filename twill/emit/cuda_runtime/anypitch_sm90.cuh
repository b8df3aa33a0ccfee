// Rows at any pitch (twill/emit/anypitch.py): a load whose rows are not 16 bytes apart, through a flat map.
// tma_rows brings ROWS rows of a tile from a flat map (one row of every element): row r (element first + r * rs)
// in one box of W elements from the 16-byte boundary at or before it, into dst's row r of W (unswizzled).
// Coordinates stay below 2^31 (launch() checks).
template <typename T, int ROWS, int W>
__device__ __forceinline__ void tma_rows(void* dst, const CUtensorMap* map, uint64_t* bar, long long first, long long rs) {
  constexpr long long kA = 16 / static_cast<long long>(sizeof(T));
  char* row = static_cast<char*>(dst);
#pragma unroll 1
  for (int r = 0; r < ROWS; ++r, first += rs, row += W * sizeof(T))
    tma_load(row, map, bar, static_cast<int>(first & ~(kA - 1)), 0, 0);
}

// The tile's readers shift each row: row r's column c lies at r * W + s_r + c, W = COLS + 16 / sizeof(T), s_r =
// (shift + r * step) mod (16 / sizeof(T)) (shift: the tile's first row's, step: the row stride's). A row at or
// past `rows` or a column at or past `cols` reads 0 (the zero fill of a 2-d map's box past the tensor).
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
