
// ==== a bound of each row's columns (ragged.py, masks.py): only in kernels with a tail_mask x, b, a rem or a ====
// position of one value a row (Megatron's causal softmax: b = row % seq_len, read by tail_mask {offset = 1}).
// rem x, y: x - trunc(x / y) * y (arith.remsi of integers held as floats, exact below 2^24).
template <typename Out, typename X, typename Y>
__device__ __forceinline__ void op_rem(Out& out, const X& x, const Y& y) {
  constexpr bool R = is_rows<Out>::value;
  for_each(out, [&](auto... e) { return fmodf(at<R>(x, e...), at<R>(y, e...)); });
}
// position of one value a row (a rank-1 [M], Rows): ROWS * r + base, r the row from row0.
template <int ROWS, int COLS, int MB>
__device__ __forceinline__ void op_position(Rows<MB>& out, int base, int row0) {
  for_each(out, [&](int b, int h) { return static_cast<float>(ROWS * (row0 + rows_row(b, h)) + base); });
}
// tail_mask x, b: the elements of f whose column col0 + c is at or past its row's bound b[r] become `fill`, on
// every iteration (col0 = the tile's first column along the loop less the op's offset).
template <int MB, int N, typename B>
__device__ __forceinline__ void mask_bound(Frag<MB, N>& f, const B& bound, int col0, float fill) {
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int i = 0; i < Frag<MB, N>::kElems; ++i)
      if (static_cast<float>(col0 + frag_col(i)) >= at<false>(bound, b, i)) f.x[b][i] = fill;
}
