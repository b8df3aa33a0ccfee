
// causal_mask on sm_100a (ragged.py), in kernels that have one: S stays in tensor memory, masked
// where it lies (or into another tile) 32 columns at a time, as tmem_rescale streams the
// accumulator. Element (r, c) is query q0 + r and key k0 + c; a key after its query becomes -inf,
// which rowmax skips and exp2 turns into 0. A chunk that no row of the warp masks is left as it is
// (the test is warp-uniform: tcgen05.ld and .st are warp-collective).
template <int N, int R>
__device__ __forceinline__ void tmem_mask_causal(uint32_t dst, uint32_t src, int q0, int k0) {
  const uint32_t s = tmem_lane_base(src), d = tmem_lane_base(dst);
  const int last = q0 + trow<R>() - k0;  // the last column this row keeps
#pragma unroll 1
  for (int c = 0; c < N; c += 32) {
    if (dst == src && __all_sync(0xffffffffu, c + 31 <= last)) continue;
    float r[32];
    tmem_ld32(s + c, r);
    tmem_wait_ld();
#pragma unroll
    for (int i = 0; i < 32; ++i)
      if (c + i > last) r[i] = -INFINITY;
    tmem_st32(d + c, r);
  }
  tmem_wait_st();
}
