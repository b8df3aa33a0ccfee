// A split's partial row vector (another SM's, read from L2) into the rows this thread holds.
template <int MB>
__device__ __forceinline__ void partial_to_frag(Rows<MB>& r, const float* buf, int row0) {
  for_each(r, [&](int b, int h) { return __ldcg(buf + row0 + rows_row(b, h)); });
}
