// causal_mask with a band on sm_100a (ttgir/band.py): element (r, c) is kept where key - query lies
// in [lo, hi], else -inf; a chunk of 32 columns every row of the warp keeps is left as it is.
template <int N, int R>
__device__ __forceinline__ void tmem_mask_band(uint32_t dst, uint32_t src, int q0, int k0, int lo, int hi) {
  const uint32_t s = tmem_lane_base(src), d = tmem_lane_base(dst);
  const int row = q0 + trow<R>() - k0;  // the column of this row's own query
  const int first = row + lo, last = row + hi;  // the columns this row keeps
#pragma unroll 1
  for (int c = 0; c < N; c += 32) {
    if (dst == src && __all_sync(0xffffffffu, c + 31 <= last && c >= first)) continue;
    float r[32];
    tmem_ld32(s + c, r);
    tmem_wait_ld();
#pragma unroll
    for (int i = 0; i < 32; ++i)
      if (c + i > last || c + i < first) r[i] = -INFINITY;
    tmem_st32(d + c, r);
  }
  tmem_wait_st();
}
