
// ==== the mask and position ops of the vocabulary (twill/emit/masks.py), in kernels that have one: sm_100a ====
// mask (twill/emit/masks.py): does an element's index v = rows * r + cols * c + offset satisfy
// v PRED 0 (PRED 0..5: eq ne lt le gt ge)?
template <int PRED>
__device__ __forceinline__ bool index_holds(int v) {
  return PRED == 0 ? v == 0 : PRED == 1 ? v != 0 : PRED == 2 ? v < 0 : PRED == 3 ? v <= 0 : PRED == 4 ? v > 0 : v >= 0;
}
// mask x, y: element (r, c) of the tile (r = row0 + the thread's row) is x's where
// ROWS * r + COLS * c + OFFSET PRED 0 (index_holds), else y's (a tile, or a float: the fill).
template <int PRED, int ROWS, int COLS, int OFFSET, typename Out, typename X, typename Y>
__device__ __forceinline__ void op_mask(Out& out, const X& x, const Y& y, int row0) {
  const int r = row0 + trow<Out::kRows>();
  for_each(out, [&](int i) {
    const int v = ROWS * r + COLS * i + OFFSET;
    return index_holds<PRED>(v) ? at<false>(x, i) : at<false>(y, i);
  });
}

// position (twill/emit/masks.py): element (r, c) of the tile (r = row0 + the thread's row) is
// ROWS * r + COLS * c + base, base the tile origin's part (P * g0 + Q * l0 + K).
template <int ROWS, int COLS, typename Out>
__device__ __forceinline__ void op_position(Out& out, int base, int row0) {
  const int r = ROWS * (row0 + trow<Out::kRows>()) + base;
  for_each(out, [&](int i) { return static_cast<float>(r + COLS * i); });
}
