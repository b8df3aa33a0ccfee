// A scalar atomic output (emit/scalar_atomic.py): a tile's rows to one value (then scalar_atomic.cuh).
// The largest of the rows the thread holds (Rows: each row's value, repeated across its quad).
template <int MB>
__device__ __forceinline__ float rows_max(const Rows<MB>& r) {
  float v = -INFINITY;
#pragma unroll
  for (int b = 0; b < MB; ++b) v = fmaxf(v, fmaxf(r.x[b][0], r.x[b][1]));
  return v;
}
