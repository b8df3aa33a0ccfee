
// ==== column vectors, row minima and scans on sm_100a (the op vocabulary) ====================
namespace twill {

// One value per column of a tile, [1, N]: every column (each thread holds a whole row).
template <int N, int R = 128>
struct TCols {
  static constexpr int kElems = N, kRows = R;
  float x[N];
};
// A [1, N] tile in shared memory (laid out as Tile<T, 1, N>), read where it is used; with a stride S,
// column j is element S * j + O of a loaded [1, N * S] row (a load's {col_stride = S, col_offset = O}).
template <int N, typename T, int S = 1, int O = 0>
struct ColsView {
  static constexpr int kElems = N, kRows = 128;
  const void* p;
};
template <bool ROWS, int N, int R>
__device__ __forceinline__ float at(const TCols<N, R>& c, int i) { return c.x[i]; }
template <bool ROWS, int N, typename T, int S, int O>
__device__ __forceinline__ float at(const ColsView<N, T, S, O>& v, int i) {
  return to_float<T>(*reinterpret_cast<const T*>(static_cast<const char*>(v.p) + Tile<T, 1, N * S>::offset(0, i * S + O)));
}
template <int N, int R>
__device__ __forceinline__ void put2(TCols<N, R>& c, int i, float v0, float v1) { c.x[i] = v0; c.x[i + 1] = v1; }
template <typename T, int ROWS, int COLS, int N, int R>
__device__ __forceinline__ void tile_to_frag(TCols<N, R>& c, const void* tile, int) {
  const ColsView<N, T> v{tile};
  for_each(c, [&](int i) { return at<false>(v, i); });
}
// A [1, N] vector of global memory, clamped to its first cols_left columns (a partial last tile along N).
template <typename T, int N, int R>
__device__ __forceinline__ void global_to_frag_clip(TCols<N, R>& v, const T* ptr, int, int, int, int cols_left) {
  for_each(v, [&](int i) { return to_float<T>(ptr[min(i, cols_left - 1)]); });
}

// The minimum of each row (reduce_min along the last axis): the thread's own row.
template <int R, typename X>
__device__ __forceinline__ void row_min(TScalR<R>& out, const X& x) {
  row_reduce(out, x, INFINITY, [](float a, float v) { return fminf(a, v); }, false);
}

// The product of each row (reduce_prod along the last axis): the thread's own row.
template <int R, typename X>
__device__ __forceinline__ void row_prod(TScalR<R>& out, const X& x) {
  row_reduce(out, x, 1.f, [](float a, float v) { return a * v; }, false);
}

// rowargmax / rowargmin (tl.argmax / tl.argmin along the last axis): the thread's row's index (idx's element) of
// its largest (smallest) value, ties to the smaller index. A NaN is never taken (every comparison with it is
// false): the index of the row's largest number.
template <bool MAX>
__device__ __forceinline__ bool arg_better(float e, float j, float v, float k) {
  return (MAX ? e > v : e < v) || (e == v && j < k);
}
template <bool MAX, int R, typename X, typename I>
__device__ __forceinline__ void row_arg(TScalR<R>& out, const X& x, const I& idx) {
  float v = MAX ? -INFINITY : INFINITY, k = INFINITY;
#pragma unroll
  for (int i = 0; i < X::kElems; ++i) {
    const float e = at<false>(x, i), j = at<false>(idx, i);
    if (arg_better<MAX>(e, j, v, k)) { v = e; k = j; }
  }
  out.x = k;
}
template <typename Out, typename X, typename I>
__device__ __forceinline__ void op_rowargmax(Out& out, const X& x, const I& idx) { row_arg<true>(out, x, idx); }
template <typename Out, typename X, typename I>
__device__ __forceinline__ void op_rowargmin(Out& out, const X& x, const I& idx) { row_arg<false>(out, x, idx); }

// cumsum along the last axis: the thread's row, in order.
template <typename Out, typename X>
__device__ __forceinline__ void op_cumsum(Out& out, const X& x) {
  float run = 0.f;
#pragma unroll
  for (int i = 0; i < Out::kElems; i += 2) {
    const float v0 = run + at<false>(x, i);
    run = v0 + at<false>(x, i + 1);
    put2(out, i, v0, run);
  }
}

// cumprod, cummax, cummin along the last axis: the thread's row, in order.
template <typename Out, typename X, typename Op>
__device__ __forceinline__ void row_scan(Out& out, const X& x, float identity, Op op) {
  float run = identity;
#pragma unroll
  for (int i = 0; i < Out::kElems; i += 2) {
    const float v0 = op(run, at<false>(x, i));
    run = op(v0, at<false>(x, i + 1));
    put2(out, i, v0, run);
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

// cumsum down a rank-1 tile in shared memory (laid out as Tile<T, 1, M>): the thread's row (row0 on)
// gets the sum of the vector's elements up to it, in order.
template <typename T, int M, int R>
__device__ __forceinline__ void cumsum_rows(TScalR<R>& out, const void* tile, int row0) {
  const char* base = static_cast<const char*>(tile);
  const int r = row0 + trow<R>();
  float s = 0.f;
  #pragma unroll
  for (int k = 0; k < M; ++k) {  // a bound known at compile time: the loads go out at once, not one per add
    const float e = to_float<T>(*reinterpret_cast<const T*>(base + Tile<T, 1, M>::offset(0, k)));
    s += k <= r ? e : 0.f;
  }
  out.x = s;
}

// A scalar (a reduction of a whole vector, f32[1]): one float, the same in every thread.
template <typename Fn>
__device__ __forceinline__ void for_each(float& out, Fn fn) { out = fn(0); }

}  // namespace twill
