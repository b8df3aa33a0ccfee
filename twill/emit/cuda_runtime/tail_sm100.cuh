
// The partial last tile of a loop (Problem::loop_extent) on a row of a thread: the elements of f at or
// past `valid` along dimension DIM (0: the thread's row, counted from row0; 1: its columns) become
// `fill`: -inf before a rowmax and an exp2 (ragged.py's masks), or a tail_mask's fill (Triton's
// tl.where(cols < N, v, fill)). The empty asm hides `valid` from the compiler, as sm90.cuh's mask_past.
template <int DIM, int N, int R>
__device__ __forceinline__ void mask_tail(TRow<N, R>& f, int row0, int valid, float fill) {
  asm volatile("" : "+r"(valid), "+r"(row0));
#pragma unroll
  for (int i = 0; i < N; ++i)
    if ((DIM == 0 ? row0 + trow<R>() : i) >= valid) f.x[i] = fill;
}
