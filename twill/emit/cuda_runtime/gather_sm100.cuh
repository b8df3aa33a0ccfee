// One element a row (the epilogue's gather, emit/gather.py): v's row r is ptr[r * ld + idx[r]], r = row0 +
// the thread's row, ld the row stride; 0, with nothing read, where idx[r] is outside [0, cols) or r at or
// past rows_left.
template <typename T, int R>
__device__ __forceinline__ void gather_rows(TScalR<R>& v, const TScalR<R>& idx, const T* ptr, int row0, int cols,
                                            size_t ld, int rows_left) {
  const int r = row0 + trow<R>();
  const float c = idx.x;
  v.x = r < rows_left && c >= 0.f && c < static_cast<float>(cols)
            ? to_float<T>(ptr[static_cast<size_t>(r) * ld + static_cast<int>(c)]) : 0.f;
}
