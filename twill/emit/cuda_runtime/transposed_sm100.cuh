// The tile written transposed (a {column_major = true} output, C^T): element (r, c) at ptr[c * ld + r],
// ptr the tile's origin in the [cols][rows] row-major argument (stores.py, _transposed_store); a warp's
// 32 rows are 32 adjacent elements of each of the argument's rows.
template <typename T, typename F>
__device__ __forceinline__ void frag_to_global_t(T* ptr, const F& f, int row0, int ld) {
  if (!row_ok<F::kRows>()) return;
  T* col = ptr + row0 + trow<F::kRows>();
#pragma unroll
  for (int i = 0; i < F::kElems; ++i) col[static_cast<size_t>(i) * ld] = from_float<T>(at<false>(f, i));
}
// ... only the elements of the value's rows below rows_left and columns below cols_left: a partial last tile.
template <typename T, typename F>
__device__ __forceinline__ void frag_to_global_t_clip(T* ptr, const F& f, int row0, int ld, int rows_left,
                                                      int cols_left) {
  const int r = row0 + trow<F::kRows>();
  if (!row_ok<F::kRows>() || r >= rows_left) return;
#pragma unroll
  for (int i = 0; i < F::kElems; ++i)
    if (i < cols_left) ptr[static_cast<size_t>(i) * ld + r] = from_float<T>(at<false>(f, i));
}
