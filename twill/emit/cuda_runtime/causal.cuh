// causal_mask (ragged.py), in kernels that have one: element (r, c) of f is query q0 + r and key
// k0 + c; a key after its query becomes -inf, which rowmax skips and exp2 turns into 0. A tile
// left of the diagonal (its last key at or before its first query row: every element kept) is left
// as it is by one uniform test, so only the diagonal block(s) of a query tile pay the per-element
// compare and select (FlashAttention's masking steps). The per-thread offset goes through an empty
// asm, as in mask_past: otherwise the compiler may keep each element's test in registers across
// the loop.
template <int MB, int N>
__device__ __forceinline__ void mask_causal(Frag<MB, N>& f, int q0, int k0) {
  const int lane = threadIdx.x % 32;
  int d = k0 + 2 * (lane % 4) - q0 - 16 * ((threadIdx.x / 32) % 4) - lane / 4;  // key - query of element 0
  asm volatile("" : "+r"(d));
  if (d + N - 7 <= 0) return;  // this thread's last key is at or before its first query: nothing to mask
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int i = 0; i < Frag<MB, N>::kElems; ++i)
      if (d + 8 * (i >> 2) + (i & 1) - 64 * b - 8 * ((i >> 1) & 1) > 0) f.x[b][i] = -INFINITY;
}
