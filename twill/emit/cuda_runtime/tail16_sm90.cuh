
// The partial last tile's mask (sm90.cuh's mask_past) of a 16-bit tile: a tile loaded with {fill = -inf}
// that a rowmax or an exp2 reads from shared memory, masked in the register copy it reads it into (ragged.py;
// only in kernels with such a read). Each 32-bit word holds a row's columns frag_col(2k) (its low half) and
// frag_col(2k) + 1.
template <int DIM, int MB, int N, typename H>
__device__ __forceinline__ void mask_past(Frag16<MB, N, H>& f, int row0, int valid) {
  asm volatile("" : "+r"(valid), "+r"(row0));
  const uint32_t inf = pack2<H>(-INFINITY, -INFINITY);
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int k = 0; k < N / 4; ++k) {
      const int at = DIM == 0 ? row0 + frag_row(b, 2 * k) : frag_col(2 * k);
      if (at >= valid) f.x[b][k] = inf;
      else if (DIM == 1 && at + 1 >= valid) f.x[b][k] = (f.x[b][k] & 0xffffu) | (inf & 0xffff0000u);
    }
}
