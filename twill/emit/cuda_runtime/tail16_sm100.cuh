
// tail_sm100.cuh's mask_tail of a 16-bit row (a tile loaded with {fill = -inf} that a rowmax or an exp2 reads
// from shared memory, masked in the register copy it reads it into: ragged.py; only in kernels with such a
// read): word k holds columns 2k (its low half) and 2k + 1.
template <int DIM, int N, typename H, int R>
__device__ __forceinline__ void mask_tail(TRow16<N, H, R>& f, int row0, int valid, float fill) {
  asm volatile("" : "+r"(valid), "+r"(row0));
  const uint32_t bits = pack2<H>(fill, fill);
#pragma unroll
  for (int k = 0; k < N / 2; ++k) {
    const int at = DIM == 0 ? row0 + trow<R>() : 2 * k;
    if (at >= valid) f.x[k] = bits;
    else if (DIM == 1 && at + 1 >= valid) f.x[k] = (f.x[k] & 0xffffu) | (bits & 0xffff0000u);
  }
}
