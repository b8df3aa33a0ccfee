// causal_mask with a band (its upper, lower, lower_by and arg: ttgir/band.py): element (r, c) is kept
// where key - query lies in [lo, hi] (a sliding window: lo = 1 - window, hi = 0), else -inf. A thread
// whose elements all lie inside the band (its d range: d0 - 64 (MB - 1) - 8 ... d0 + N - 7) is left
// as it is, so only a tile's blocks at the band's two edges pay the per-element test.
template <int MB, int N>
__device__ __forceinline__ void mask_band(Frag<MB, N>& f, int q0, int k0, int lo, int hi) {
  const int lane = threadIdx.x % 32;
  int d = k0 + 2 * (lane % 4) - q0 - 16 * ((threadIdx.x / 32) % 4) - lane / 4;  // key - query of element 0
  asm volatile("" : "+r"(d));
  if (d + N - 7 <= hi && d - 64 * (MB - 1) - 8 >= lo) return;  // every element of this thread is kept
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int i = 0; i < Frag<MB, N>::kElems; ++i) {
      const int e = d + 8 * (i >> 2) + (i & 1) - 64 * b - 8 * ((i >> 1) & 1);
      if (e > hi || e < lo) f.x[b][i] = -INFINITY;
    }
}
