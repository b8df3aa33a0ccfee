
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

// A tail_mask with a bound of each row's own (tail_mask x, b: ragged.py): the thread's row's elements whose
// column col0 + i is at or past the row's bound b become `fill`, on every iteration (col0 = the tile's first
// column along the loop less the op's offset; b a per-row vector held as exact floats).
template <int N, int R, typename B>
__device__ __forceinline__ void mask_bound(TRow<N, R>& f, const B& bound, int col0, float fill) {
  const float last = at<false>(bound, 0);
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (static_cast<float>(col0 + i) >= last) f.x[i] = fill;
}
