// One element a row (the epilogue's gather, emit/gather.py): v's row r is ptr[r * ld + idx[r]], r = row0 +
// the row the thread holds, ld the row stride; 0, with nothing read, where idx[r] is outside [0, cols) or r
// at or past rows_left.
template <typename T, int MB>
__device__ __forceinline__ void gather_rows(Rows<MB>& v, const Rows<MB>& idx, const T* ptr, int row0, int cols,
                                            size_t ld, int rows_left) {
  for_each(v, [&](int b, int h) {
    const int r = row0 + rows_row(b, h);
    const float c = idx.x[b][h];
    return r < rows_left && c >= 0.f && c < static_cast<float>(cols)
               ? to_float<T>(ptr[static_cast<size_t>(r) * ld + static_cast<int>(c)]) : 0.f;
  });
}
