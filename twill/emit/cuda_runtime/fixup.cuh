// A column split's fixup (emit/fixup.py): each split of a row tile writes its partial carries to a scratch
// buffer and arrives on the counter of its warp's rows; the last of the splits to arrive combines them.

// Whether this warp's arrival is the last of `splits` on its rows' counter, which the last resets to 0
// for the next launch. Each thread's partials are made visible to the device first (the fence before the
// arrival); the last warp fences again before it reads the others' (partial_to_frag, from L2).
__device__ __forceinline__ bool split_arrive(int* counter, int splits) {
  __threadfence();
  __syncwarp();
  int old = 0;
  if (threadIdx.x % 32 == 0) old = atomicAdd(counter, 1);
  old = __shfl_sync(0xffffffffu, old, 0);
  const bool last = old == splits - 1;
  if (last) {
    if (threadIdx.x % 32 == 0) atomicExch(counter, 0);
    __threadfence();
  }
  return last;
}

// The folds of the partials, element by element (binding_runtime.COMBINE's, in the kernel).
template <typename F>
__device__ __forceinline__ void fold_max(F& acc, const F& x) {
  for_each(acc, [&](auto... e) { return fmaxf(at<true>(acc, e...), at<true>(x, e...)); });
}
template <typename F>
__device__ __forceinline__ void fold_min(F& acc, const F& x) {
  for_each(acc, [&](auto... e) { return fminf(at<true>(acc, e...), at<true>(x, e...)); });
}
template <typename F>
__device__ __forceinline__ void fold_sum(F& acc, const F& x) {
  for_each(acc, [&](auto... e) { return at<true>(acc, e...) + at<true>(x, e...); });
}
// An online pair's sum: l += l_s * exp2((m_s - m) * scale), m the row's max over every split.
template <typename F>
__device__ __forceinline__ void fold_rescaled(F& l, const F& ls, const F& ms, const F& m, float scale) {
  for_each(l, [&](auto... e) {
    return fmaf(at<true>(ls, e...), exp2f((at<true>(ms, e...) - at<true>(m, e...)) * scale), at<true>(l, e...));
  });
}
