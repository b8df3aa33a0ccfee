
// ==== a bound of each row's columns (ragged.py, masks.py): only in kernels with a tail_mask x, b, a rem or a ====
// position of one value a row (Megatron's causal softmax: b = row % seq_len, read by tail_mask {offset = 1}).
// rem x, y: x - trunc(x / y) * y (arith.remsi of integers held as floats, exact below 2^24).
template <typename Out, typename X, typename Y>
__device__ __forceinline__ void op_rem(Out& out, const X& x, const Y& y) {
  constexpr bool R = is_rows<Out>::value;
  for_each(out, [&](auto... e) { return fmodf(at<R>(x, e...), at<R>(y, e...)); });
}
// position of one value a row (a rank-1 [M], the thread's row): ROWS * r + base.
template <int ROWS, int COLS, int R>
__device__ __forceinline__ void op_position(TScalR<R>& out, int base, int row0) {
  out.x = static_cast<float>(ROWS * (row0 + trow<R>()) + base);
}
// tail_mask x, b: the thread's row's elements whose column col0 + i is at or past the row's bound become `fill`,
// on every iteration (col0 = the tile's first column along the loop less the op's offset).
template <int N, int R, typename B>
__device__ __forceinline__ void mask_bound(TRow<N, R>& f, const B& bound, int col0, float fill) {
  const float last = at<false>(bound, 0);
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (static_cast<float>(col0 + i) >= last) f.x[i] = fill;
}
