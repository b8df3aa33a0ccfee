// A split's partial row vector (another SM's, read from L2) into the row this thread holds.
template <int R>
__device__ __forceinline__ void partial_to_frag(TScalR<R>& r, const float* buf, int row0) {
  r.x = __ldcg(buf + row0 + trow<R>());
}
