// causal_mask (ragged.py), in kernels that have one: element (r, c) of f is query q0 + r and key
// k0 + c; a key after its query becomes -inf, which rowmax skips and exp2 turns into 0. Every
// tile is tested, also those left of the diagonal, where nothing changes: skipping them with one
// test (k0 + N - 1 <= q0) made ptxas spill 4 bytes in the imported Triton kernel (8 in the FA3
// one either way). The per-thread offset goes through an empty asm, as in mask_past: otherwise the
// compiler may keep each element's test in registers across the loop.
template <int MB, int N>
__device__ __forceinline__ void mask_causal(Frag<MB, N>& f, int q0, int k0) {
  const int lane = threadIdx.x % 32;
  int d = k0 + 2 * (lane % 4) - q0 - 16 * ((threadIdx.x / 32) % 4) - lane / 4;  // key - query of element 0
  asm volatile("" : "+r"(d));
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int i = 0; i < Frag<MB, N>::kElems; ++i)
      if (d + 8 * (i >> 2) + (i & 1) - 64 * b - 8 * ((i >> 1) & 1) > 0) f.x[b][i] = -INFINITY;
}
