// ---- the known opcodes' math ---------------------------------------------------------------------
// exp2: exp2((x - b) * scale), b broadcast along rows (the softmax numerator, or the rescale factor
// exp2(m_old - m_new)); an empty row's -inf maximum counts as 0. scale folds in log2(e)/sqrt(d).
template <typename Out, typename X, typename B>
__device__ __forceinline__ void op_exp2(Out& out, const X& x, const B& b, float scale) {
  constexpr bool R = is_rows<Out>::value;
  for_each(out, [&](auto... e) {
    return exp2_shifted(at<R>(x, e...), at<R>(b, e...), scale);
  });
}
template <typename Out, typename X>
__device__ __forceinline__ void op_exp2(Out& out, const X& x, float scale) {
  constexpr bool R = is_rows<Out>::value;
  for_each(out, [&](auto... e) { return fast_exp2(at<R>(x, e...) * scale); });
}

// rowmax: the maximum of each row, and of a running maximum when given.
template <typename Out, typename X>
__device__ __forceinline__ void op_rowmax(Out& out, const X& x) {
  row_reduce(out, x, -INFINITY, [](float a, float v) { return fmaxf(a, v); }, false);
}
template <typename Out, typename X, typename M>
__device__ __forceinline__ void op_rowmax(Out& out, const X& x, const M& m) {
  Out r;  // the result may be the very buffer that holds m
  op_rowmax(r, x);
  for_each(out, [&](auto... e) { return fmaxf(at<true>(r, e...), at<true>(m, e...)); });
}

// rowsum: the sum of each row, plus a running sum, itself first scaled by alpha when given.
template <typename Out, typename X>
__device__ __forceinline__ void op_rowsum(Out& out, const X& x) {
  row_reduce(out, x, 0.f, [](float a, float v) { return a + v; }, true);
}
template <typename Out, typename X, typename L>
__device__ __forceinline__ void op_rowsum(Out& out, const X& x, const L& l) {
  Out r;  // the result may be the very buffer that holds l
  op_rowsum(r, x);
  for_each(out, [&](auto... e) { return at<true>(r, e...) + at<true>(l, e...); });
}
template <typename Out, typename X, typename L, typename A>
__device__ __forceinline__ void op_rowsum(Out& out, const X& x, const L& l, const A& alpha) {
  Out r;
  op_rowsum(r, x);
  for_each(out, [&](auto... e) { return fmaf(at<true>(l, e...), at<true>(alpha, e...), at<true>(r, e...)); });
}

// rescale: x * alpha, alpha per row (the accumulator's correction by exp2(m_old - m_new)).
// In place (an accumulator rescaled where it lies), a warp whose rows all kept their running
// maximum (alpha == 1 exactly) has nothing to multiply: once a row's maximum settles, which
// happens after a few tiles, most iterations skip the tile's multiplies.
template <typename A>
__device__ __forceinline__ bool warp_rows_all_one(const A&) { return false; }
template <typename Out, typename X, typename A>
__device__ __forceinline__ void op_rescale(Out& out, const X& x, const A& alpha) {
  constexpr bool R = is_rows<Out>::value;
  if constexpr (std::is_same<Out, X>::value && !R) {
    if (static_cast<const void*>(&out) == static_cast<const void*>(&x) && warp_rows_all_one(alpha)) return;
  }
  for_each(out, [&](auto... e) { return at<R>(x, e...) * at<R>(alpha, e...); });
}

// convert: to the result's dtype (the fragment types pack and unpack).
template <typename Out, typename X>
__device__ __forceinline__ void op_convert(Out& out, const X& x) {
  constexpr bool R = is_rows<Out>::value;
  for_each(out, [&](auto... e) { return at<R>(x, e...); });
}

// Elementwise arithmetic, per-row operands broadcast.
template <typename Out, typename X, typename Y>
__device__ __forceinline__ void op_mul(Out& out, const X& x, const Y& y) {
  constexpr bool R = is_rows<Out>::value;
  for_each(out, [&](auto... e) { return at<R>(x, e...) * at<R>(y, e...); });
}
template <typename Out, typename X, typename Y>
__device__ __forceinline__ void op_add(Out& out, const X& x, const Y& y) {
  constexpr bool R = is_rows<Out>::value;
  for_each(out, [&](auto... e) { return at<R>(x, e...) + at<R>(y, e...); });
}
template <typename Out, typename X, typename Y>
__device__ __forceinline__ void op_sub(Out& out, const X& x, const Y& y) {
  constexpr bool R = is_rows<Out>::value;
  for_each(out, [&](auto... e) { return at<R>(x, e...) - at<R>(y, e...); });
}
// sub with a third operand scales the difference: dS = P * (dP - Delta) of attention's backward.
template <typename Out, typename X, typename Y, typename Z>
__device__ __forceinline__ void op_sub(Out& out, const X& x, const Y& y, const Z& z) {
  constexpr bool R = is_rows<Out>::value;
  for_each(out, [&](auto... e) { return (at<R>(x, e...) - at<R>(y, e...)) * at<R>(z, e...); });
}
template <typename Out, typename X, typename Y>
__device__ __forceinline__ void op_max(Out& out, const X& x, const Y& y) {
  constexpr bool R = is_rows<Out>::value;
  for_each(out, [&](auto... e) { return fmaxf(at<R>(x, e...), at<R>(y, e...)); });
}

// The final division of an online-softmax accumulator by its running sum, as a multiply by the
// reciprocal of each row's sum, taken once per row the thread holds. A division per element (IEEE,
// with its slow path) took 6500 cycles of a 64 x 128 tile's epilogue on an H200, a tenth of a
// 16-iteration tile's time (docs/gpu-results.md, session 10).
template <typename Out, typename L>
__device__ __forceinline__ void op_normalize(Out& out, const L& l) {
  L inv = l;
  for_each(inv, [&](auto... e) {
    const float s = at<true>(l, e...);
    return s == 0.f ? 0.f : 1.f / s;
  });
  for_each(out, [&](auto... e) { return at<false>(out, e...) * at<false>(inv, e...); });
}

}  // namespace twill
