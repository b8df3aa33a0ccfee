
// ==== column vectors, row minima and scans on sm_90a (the op vocabulary) =====================
namespace twill {

// One value per column of a tile, [1, N]: the columns of the thread's fragment elements (frag_col).
template <int N>
struct Cols {
  static constexpr int kBlocks = 1, kElems = N / 2;
  float x[N / 2];
};
// A [1, N] tile in shared memory (laid out as Tile<T, 1, N>), read where it is used; with a stride S,
// column j is element S * j + O of a loaded [1, N * S] row (a strided view of one argument: a load's
// {col_stride = S, col_offset = O}).
template <int N, typename T, int S = 1, int O = 0>
struct ColsView {
  static constexpr int kBlocks = 1, kElems = N / 2;
  const void* p;
};
template <bool ROWS, int N>
__device__ __forceinline__ float at(const Cols<N>& c, int, int i) { return c.x[i]; }
template <bool ROWS, int N, typename T, int S, int O>
__device__ __forceinline__ float at(const ColsView<N, T, S, O>& v, int, int i) {
  return to_float<T>(*reinterpret_cast<const T*>(static_cast<const char*>(v.p) +
                                                 Tile<T, 1, N * S>::offset(0, frag_col(i) * S + O)));
}
template <int N>
__device__ __forceinline__ void put2(Cols<N>& c, int, int i, float v0, float v1) { c.x[i] = v0; c.x[i + 1] = v1; }
template <typename T, int ROWS, int COLS, int N>
__device__ __forceinline__ void tile_to_frag(Cols<N>& c, const void* tile, int) {
  const ColsView<N, T> v{tile};
  for_each(c, [&](int b, int i) { return at<false>(v, b, i); });
}
// A [1, N] vector of global memory, clamped to its first cols_left columns (a partial last tile along N).
template <typename T, int N>
__device__ __forceinline__ void global_to_frag_clip(Cols<N>& v, const T* ptr, int, int, int, int cols_left) {
  for_each(v, [&](int, int i) { return to_float<T>(ptr[min(frag_col(i), cols_left - 1)]); });
}

// A fold of each row by `op` from `identity` (reduce_min, reduce_prod along the last axis): the thread's elements
// of the row, then the 4 threads that hold it.
template <int MB, typename X, typename Op>
__device__ __forceinline__ void row_fold(Rows<MB>& out, const X& x, float identity, Op op) {
#pragma unroll
  for (int b = 0; b < MB; ++b) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float v = identity;
#pragma unroll
      for (int i = 0; i < X::kElems; ++i)
        if (((i >> 1) & 1) == h) v = op(v, at<false>(x, b, i));
      v = op(v, __shfl_xor_sync(0xffffffffu, v, 1));
      out.x[b][h] = op(v, __shfl_xor_sync(0xffffffffu, v, 2));
    }
  }
}
// The minimum of each row (reduce_min along the last axis).
template <int MB, typename X>
__device__ __forceinline__ void row_min(Rows<MB>& out, const X& x) {
  row_fold(out, x, INFINITY, [](float a, float v) { return fminf(a, v); });
}
// The product of each row (reduce_prod along the last axis).
template <int MB, typename X>
__device__ __forceinline__ void row_prod(Rows<MB>& out, const X& x) {
  row_fold(out, x, 1.f, [](float a, float v) { return a * v; });
}

// rowargmax / rowargmin (tl.argmax / tl.argmin along the last axis): each row's index (idx's element) of its
// largest (smallest) value, ties to the smaller index; the thread's elements of the row, then the 4 threads that
// hold it. A NaN is never taken (every comparison with it is false): the index of the row's largest number.
template <bool MAX>
__device__ __forceinline__ bool arg_better(float e, float j, float v, float k) {
  return (MAX ? e > v : e < v) || (e == v && j < k);
}
template <bool MAX, int MB, typename X, typename I>
__device__ __forceinline__ void row_arg(Rows<MB>& out, const X& x, const I& idx) {
#pragma unroll
  for (int b = 0; b < MB; ++b) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float v = MAX ? -INFINITY : INFINITY, k = INFINITY;
#pragma unroll
      for (int i = 0; i < X::kElems; ++i) {
        if (((i >> 1) & 1) != h) continue;
        const float e = at<false>(x, b, i), j = at<false>(idx, b, i);
        if (arg_better<MAX>(e, j, v, k)) { v = e; k = j; }
      }
#pragma unroll
      for (int d = 1; d < 4; d *= 2) {
        const float e = __shfl_xor_sync(0xffffffffu, v, d), j = __shfl_xor_sync(0xffffffffu, k, d);
        if (arg_better<MAX>(e, j, v, k)) { v = e; k = j; }
      }
      out.x[b][h] = k;
    }
  }
}
template <typename Out, typename X, typename I>
__device__ __forceinline__ void op_rowargmax(Out& out, const X& x, const I& idx) { row_arg<true>(out, x, idx); }
template <typename Out, typename X, typename I>
__device__ __forceinline__ void op_rowargmin(Out& out, const X& x, const I& idx) { row_arg<false>(out, x, idx); }

// cumsum along the last axis: a row's 8-column chunks in order, each chunk's pairs scanned over the
// 4 threads that hold the row (a pair of adjacent columns each).
template <typename Out, typename X>
__device__ __forceinline__ void op_cumsum(Out& out, const X& x) {
  const int q = threadIdx.x % 4;
#pragma unroll
  for (int b = 0; b < Out::kBlocks; ++b) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float carry = 0.f;
#pragma unroll
      for (int c = 0; c < Out::kElems / 4; ++c) {
        const int i = 4 * c + 2 * h;
        const float v0 = at<false>(x, b, i), v1 = at<false>(x, b, i + 1), pair = v0 + v1;
        float incl = pair;
#pragma unroll
        for (int d = 1; d < 4; d *= 2) {
          const float n = __shfl_up_sync(0xffffffffu, incl, d, 4);
          if (q >= d) incl += n;
        }
        const float before = carry + incl - pair;
        put2(out, b, i, before + v0, before + pair);
        carry += __shfl_sync(0xffffffffu, incl, 3, 4);
      }
    }
  }
}

// cumprod, cummax, cummin along the last axis: as cumsum, each chunk's pairs combined and scanned over the 4 threads,
// what the pairs before a thread's hold taken from its neighbour's inclusive scan (no inverse: a 0 of a product is
// an element like any).
template <typename Out, typename X, typename Op>
__device__ __forceinline__ void row_scan(Out& out, const X& x, float identity, Op op) {
  const int q = threadIdx.x % 4;
#pragma unroll
  for (int b = 0; b < Out::kBlocks; ++b) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float carry = identity;
#pragma unroll
      for (int c = 0; c < Out::kElems / 4; ++c) {
        const int i = 4 * c + 2 * h;
        const float v0 = at<false>(x, b, i), v1 = at<false>(x, b, i + 1), pair = op(v0, v1);
        float incl = pair;
#pragma unroll
        for (int d = 1; d < 4; d *= 2) {
          const float n = __shfl_up_sync(0xffffffffu, incl, d, 4);
          if (q >= d) incl = op(n, incl);
        }
        const float prev = __shfl_up_sync(0xffffffffu, incl, 1, 4);
        const float before = q == 0 ? carry : op(carry, prev);
        put2(out, b, i, op(before, v0), op(before, pair));
        carry = op(carry, __shfl_sync(0xffffffffu, incl, 3, 4));
      }
    }
  }
}
template <typename Out, typename X>
__device__ __forceinline__ void op_cumprod(Out& out, const X& x) {
  row_scan(out, x, 1.f, [](float a, float v) { return a * v; });
}
template <typename Out, typename X>
__device__ __forceinline__ void op_cummax(Out& out, const X& x) {
  row_scan(out, x, -INFINITY, [](float a, float v) { return fmaxf(a, v); });
}
template <typename Out, typename X>
__device__ __forceinline__ void op_cummin(Out& out, const X& x) {
  row_scan(out, x, INFINITY, [](float a, float v) { return fminf(a, v); });
}

// cumsum down a rank-1 tile in shared memory (laid out as Tile<T, 1, M>): each row the thread holds
// (row0 on) gets the sum of the vector's elements up to it, in order.
template <typename T, int M, int MB>
__device__ __forceinline__ void cumsum_rows(Rows<MB>& out, const void* tile, int row0) {
  const char* base = static_cast<const char*>(tile);
  for_each(out, [&](int b, int h) {
    const int r = row0 + rows_row(b, h);
    float s = 0.f;
    #pragma unroll
    for (int k = 0; k < M; ++k) {  // a bound known at compile time: the loads go out at once, not one per add
      const float e = to_float<T>(*reinterpret_cast<const T*>(base + Tile<T, 1, M>::offset(0, k)));
      s += k <= r ? e : 0.f;
    }
    return s;
  });
}

// A scalar (a reduction of a whole vector, f32[1]): one float, the same in every thread.
template <typename Fn>
__device__ __forceinline__ void for_each(float& out, Fn fn) { out = fn(0, 0); }

}  // namespace twill
