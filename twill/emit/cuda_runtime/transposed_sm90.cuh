// The tile written transposed (a {column_major = true} output, C^T): element (r, c) at ptr[c * ld + r],
// ptr the tile's origin in the [cols][rows] row-major argument (stores.py, _transposed_store).
template <typename T, typename F>
__device__ __forceinline__ void frag_to_global_t(T* ptr, const F& f, int row0, int ld) {
#pragma unroll
  for (int b = 0; b < F::kBlocks; ++b)
#pragma unroll
    for (int i = 0; i < F::kElems; ++i)
      ptr[static_cast<size_t>(frag_col(i)) * ld + row0 + frag_row(b, i)] = from_float<T>(at<false>(f, b, i));
}
// ... only the elements of the value's rows below rows_left and columns below cols_left: a partial last tile.
template <typename T, typename F>
__device__ __forceinline__ void frag_to_global_t_clip(T* ptr, const F& f, int row0, int ld, int rows_left,
                                                      int cols_left) {
#pragma unroll
  for (int b = 0; b < F::kBlocks; ++b)
#pragma unroll
    for (int i = 0; i < F::kElems; ++i) {
      const int r = row0 + frag_row(b, i), c = frag_col(i);
      if (r < rows_left && c < cols_left) ptr[static_cast<size_t>(c) * ld + r] = from_float<T>(at<false>(f, b, i));
    }
}
