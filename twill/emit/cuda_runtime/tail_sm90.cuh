
// A tail_mask (ragged.py): the elements of f at or past `valid` along dimension DIM (0: rows, counted
// from row0; 1: columns) become `fill` on the partial last tile of a loop (Triton's
// tl.where(cols < N, v, fill)). The empty asm hides `valid` from the compiler, as in mask_past.
template <int DIM, int MB, int N>
__device__ __forceinline__ void mask_tail(Frag<MB, N>& f, int row0, int valid, float fill) {
  asm volatile("" : "+r"(valid), "+r"(row0));
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int i = 0; i < Frag<MB, N>::kElems; ++i)
      if ((DIM == 0 ? row0 + frag_row(b, i) : frag_col(i)) >= valid) f.x[b][i] = fill;
}
