// ==== Hopper (sm_90a): wgmma ======================================================================
// A warpgroup's share of a (64*MB) x N tile in the wgmma accumulator layout: for each 64-row block,
// thread t of warp w holds rows 16w + t/4 and 16w + t/4 + 8, columns 8c + 2(t%4) and +1. The f16 /
// bf16 version packs those pairs and is exactly wgmma's A-from-registers layout.
template <int MB, int N>
struct Frag {
  static constexpr int kBlocks = MB, kElems = N / 2;
  float x[MB][N / 2];
};

template <int MB, int N, typename H>
struct Frag16 {
  static constexpr int kBlocks = MB, kElems = N / 2;
  uint32_t x[MB][N / 4];
};

// One value per row the thread holds (the two rows of each 64-row block).
template <int MB>
struct Rows {
  static constexpr int kBlocks = MB, kElems = 2;
  float x[MB][2];
};

template <typename F> struct is_rows { static constexpr bool value = false; };
template <int MB> struct is_rows<Rows<MB>> { static constexpr bool value = true; };
// Every row value the warp holds is 1 (a warp-uniform answer; the whole warp calls it).
template <int MB>
__device__ __forceinline__ bool warp_rows_all_one(const Rows<MB>& r) {
  bool one = true;
#pragma unroll
  for (int b = 0; b < MB; ++b) one = one && r.x[b][0] == 1.f && r.x[b][1] == 1.f;
  return __all_sync(0xffffffffu, one);
}

// A tile another role staged in shared memory (row-major, N columns), read element by element where
// it is used rather than copied into registers first; row0 is this warpgroup's first row.
template <int MB, int N, typename T>
struct View {
  static constexpr int kBlocks = MB, kElems = N / 2;
  const T* p;
  int row0;
};
template <int MB, typename T>
struct RowsView {
  static constexpr int kBlocks = MB, kElems = 2;
  const T* p;
  int row0;
};

__device__ __forceinline__ int frag_row(int b, int i) {
  return 64 * b + 16 * ((threadIdx.x / 32) % 4) + (threadIdx.x % 32) / 4 + 8 * ((i >> 1) & 1);
}
__device__ __forceinline__ int frag_col(int i) { return 8 * (i >> 2) + 2 * (threadIdx.x % 4) + (i & 1); }
__device__ __forceinline__ int rows_row(int b, int h) {
  return 64 * b + 16 * ((threadIdx.x / 32) % 4) + (threadIdx.x % 32) / 4 + 8 * h;
}

// The partial last tile of a loop whose extent is not a multiple of its step (Problem::loop_extent):
// the elements of f at or past `valid` along dimension DIM (0: rows, counted from row0; 1: columns)
// are absent, and become -inf for the rowmax and exp2 that read f (exp2 of -inf is 0). The empty asm
// hides `valid` from the compiler, which would otherwise hoist each element's loop-invariant test
// out of the loop into registers (in the FA3 kernels: spills).
template <int DIM, int MB, int N>
__device__ __forceinline__ void mask_past(Frag<MB, N>& f, int row0, int valid) {
  asm volatile("" : "+r"(valid), "+r"(row0));
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int i = 0; i < Frag<MB, N>::kElems; ++i)
      if ((DIM == 0 ? row0 + frag_row(b, i) : frag_col(i)) >= valid) f.x[b][i] = -INFINITY;
}

// Element i of block b, as seen by an op whose result is a tile (ROWS = false) or rows (true):
// a per-row operand is broadcast along the row.
template <bool ROWS, int MB, int N>
__device__ __forceinline__ float at(const Frag<MB, N>& f, int b, int i) { return f.x[b][i]; }
template <bool ROWS, int MB, int N, typename H>
__device__ __forceinline__ float at(const Frag16<MB, N, H>& f, int b, int i) { return unpack<H>(f.x[b][i / 2], i & 1); }
template <bool ROWS, int MB>
__device__ __forceinline__ float at(const Rows<MB>& r, int b, int i) { return ROWS ? r.x[b][i] : r.x[b][(i >> 1) & 1]; }
template <bool ROWS>
__device__ __forceinline__ float at(float s, int, int) { return s; }
template <bool ROWS, int MB, int N, typename T>
__device__ __forceinline__ float at(const View<MB, N, T>& v, int b, int i) {
  return to_float<T>(v.p[(v.row0 + frag_row(b, i)) * N + frag_col(i)]);
}
template <bool ROWS, int MB, typename T>
__device__ __forceinline__ float at(const RowsView<MB, T>& v, int b, int i) {
  return to_float<T>(v.p[v.row0 + 64 * b + 16 * ((threadIdx.x / 32) % 4) + (threadIdx.x % 32) / 4 + 8 * (ROWS ? i : (i >> 1) & 1)]);
}

template <int MB, int N>
__device__ __forceinline__ void put2(Frag<MB, N>& f, int b, int i, float v0, float v1) { f.x[b][i] = v0; f.x[b][i + 1] = v1; }
template <int MB, int N, typename H>
__device__ __forceinline__ void put2(Frag16<MB, N, H>& f, int b, int i, float v0, float v1) { f.x[b][i / 2] = pack2<H>(v0, v1); }
template <int MB>
__device__ __forceinline__ void put2(Rows<MB>& r, int b, int i, float v0, float v1) { r.x[b][i] = v0; r.x[b][i + 1] = v1; }

// out[e] = fn(block, element) for every element the thread holds.
template <typename Out, typename Fn>
__device__ __forceinline__ void for_each(Out& out, Fn fn) {
#pragma unroll
  for (int b = 0; b < Out::kBlocks; ++b) {
#pragma unroll
    for (int i = 0; i < Out::kElems; i += 2) put2(out, b, i, fn(b, i), fn(b, i + 1));
  }
}

template <typename Out>
__device__ __forceinline__ void fill(Out& out, float v) {
  for_each(out, [&](int, int) { return v; });
}

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Reduce each row the thread holds over the thread's columns, then over the 4 threads sharing it.
template <int MB, typename X, typename Red>
__device__ __forceinline__ void row_reduce(Rows<MB>& out, const X& x, float init, Red red, bool sum) {
#pragma unroll
  for (int b = 0; b < MB; ++b) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float v = init;
#pragma unroll
      for (int i = 0; i < X::kElems; ++i)
        if (((i >> 1) & 1) == h) v = red(v, at<false>(x, b, i));
      out.x[b][h] = sum ? quad_sum(v) : quad_max(v);
    }
  }
}

// exp2 (see op_exp2) that also sums each row of its result in f32 before it is rounded to 16 bits:
// the row sum a later rowsum of this result needs (passed to it as presum(sum)), as FA3 sums the
// unrounded exponentials; the rowsum then neither unpacks the tile nor shuffles.
template <int MB, int N, typename H, typename X, typename B>
__device__ __forceinline__ void op_exp2_sum(Frag16<MB, N, H>& out, Rows<MB>& sum, const X& x, const B& b, float scale) {
#pragma unroll
  for (int blk = 0; blk < MB; ++blk) {
    float s[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < Frag16<MB, N, H>::kElems; i += 2) {
      const float m = at<false>(b, blk, i);  // one row's value for both elements of the pair
      const float v0 = exp2_shifted(at<false>(x, blk, i), m, scale);
      const float v1 = exp2_shifted(at<false>(x, blk, i + 1), m, scale);
      put2(out, blk, i, v0, v1);
      s[(i >> 1) & 1] += v0 + v1;
    }
    sum.x[blk][0] = quad_sum(s[0]);
    sum.x[blk][1] = quad_sum(s[1]);
  }
}
template <int MB>
struct PreSum {
  const Rows<MB>& r;
};
template <int MB>
__device__ __forceinline__ PreSum<MB> presum(const Rows<MB>& r) { return PreSum<MB>{r}; }
// rowsum of a tile whose row sums op_exp2_sum already took (sm_90a).
template <typename Out, int MB>
__device__ __forceinline__ void op_rowsum(Out& out, const PreSum<MB>& x) {
  for_each(out, [&](auto... e) { return at<true>(x.r, e...); });
}
template <typename Out, int MB, typename L>
__device__ __forceinline__ void op_rowsum(Out& out, const PreSum<MB>& x, const L& l) {
  for_each(out, [&](auto... e) { return at<true>(x.r, e...) + at<true>(l, e...); });
}
template <typename Out, int MB, typename L, typename A>
__device__ __forceinline__ void op_rowsum(Out& out, const PreSum<MB>& x, const L& l, const A& alpha) {
  for_each(out, [&](auto... e) { return fmaf(at<true>(l, e...), at<true>(alpha, e...), at<true>(x.r, e...)); });
}

// ---- wgmma ---------------------------------------------------------------------------------------
// Shared-memory matrix descriptor of a Tile (its swizzle: layout 1, 2, 3 = 128, 64, 32 bytes).
// K-major operand: LBO unused (16), SBO = 8 rows of a swizzle block. MN-major operand: LBO = the
// stride between column blocks, SBO = 8 rows.
//
// The address goes through an empty asm: it keeps the compiler from hoisting the descriptors of a
// loop-invariant tile (K and V, 8 of them per wgmma chain) out of the loop, where they occupy 16
// registers each for the whole loop and, in a tight budget, spill. A wgmma chain takes its tile's
// descriptor once (desc_tile) and each wgmma adds its constant offset to it: one integer add.
template <int SW>
__device__ __forceinline__ uint64_t gmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  static_assert(SW == 128 || SW == 64 || SW == 32, "wgmma reads tiles of 32-, 64- or 128-byte swizzle");
  constexpr uint64_t layout = SW == 128 ? 1 : SW == 64 ? 2 : 3;
  asm volatile("" : "+r"(addr));
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>((lbo >> 4) & 0x3FFF) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3FFF) << 32) | (layout << 62);
}

// The descriptor of a whole tile, K-major or MN-major (see below).
template <typename T, int ROWS, int COLS, bool KMAJOR>
__device__ __forceinline__ uint64_t desc_tile(const void* tile) {
  using L = Tile<T, ROWS, COLS>;
  return gmma_desc<L::kSw>(smem_addr(tile), KMAJOR ? 16 : ROWS * L::kSw, 8 * L::kSw);
}

// A tile's descriptor `bytes` further: the address field (bits 0-13, the address / 16) plus
// bytes / 16. Inside shared memory (below 256 KB) the field does not carry into the next.
__device__ __forceinline__ uint64_t desc_plus(uint64_t d, uint32_t bytes) {
  return (d & 0xFFFFFFFF00000000ull) | static_cast<uint32_t>(static_cast<uint32_t>(d) + (bytes >> 4));
}

// K-major tile [ROWS x COLS] (a, or b stored N x K) of descriptor d: rows r0.., the 16 columns from k0.
template <typename T, int ROWS, int COLS>
__device__ __forceinline__ uint64_t desc_kmajor(uint64_t d, int r0, int k0) {
  using L = Tile<T, ROWS, COLS>;
  return desc_plus(d, (k0 / L::kBlockCols) * ROWS * L::kSw + r0 * L::kSw + (k0 % L::kBlockCols) * sizeof(T));
}

// MN-major tile [ROWS = K x COLS = N] (b stored K x N) of descriptor d: the 16 rows from k0, columns n0.. .
template <typename T, int ROWS, int COLS>
__device__ __forceinline__ uint64_t desc_mnmajor(uint64_t d, int k0, int n0) {
  using L = Tile<T, ROWS, COLS>;
  return desc_plus(d, (n0 / L::kBlockCols) * ROWS * L::kSw + k0 * L::kSw);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

// The compiler does not know that a wgmma in flight owns its registers: pin a fragment's registers
// here (after a wait, before reading; before an issue, after writing) so no instruction moves across.
template <int MB, int N>
__device__ __forceinline__ void fence_frag(Frag<MB, N>& f) {
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) asm volatile("" : "+f"(f.x[b][i])::"memory");
}
template <int MB, int N, typename H>
__device__ __forceinline__ void fence_frag(Frag16<MB, N, H>& f) {
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int i = 0; i < N / 4; ++i) asm volatile("" : "+r"(f.x[b][i])::"memory");
}
// ptxas (CUDA 12.8 to 13.0) gives the registers of a loop-invariant register A fragment to other
// values inside the loop: gemm_chain's second loop had its convert written over h, the first wgmma's
// A, so every iteration after the first read the last convert (docs/triton-results.md, session 33).
// A fragment the loop does not redefine is re-made before each wgmma that reads it, through a shuffle
// from the lane itself (an empty asm or a mov is folded away; a shuffle is not).
template <class F>
__device__ __forceinline__ void remake_frag(F& f) {
  constexpr int kBlocks = sizeof(f.x) / sizeof(f.x[0]), kWords = sizeof(f.x[0]) / sizeof(uint32_t);
#pragma unroll
  for (int b = 0; b < kBlocks; ++b)
#pragma unroll
    for (int i = 0; i < kWords; ++i) f.x[b][i] = __shfl_sync(0xffffffffu, f.x[b][i], threadIdx.x % 32);
}
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }

// ---- tiles between registers, shared and global memory ------------------------------------------------
// row0: the first row of the tile this warpgroup holds.
template <typename T> struct Pair { using type = void; };
template <> struct Pair<float> { using type = float2; };
template <> struct Pair<__half> { using type = __half2; };
template <> struct Pair<__nv_bfloat16> { using type = __nv_bfloat162; };
// Elements i and i + 1 of block b (a thread's two adjacent columns) as one 2-element T value.
template <typename T, typename F>
__device__ __forceinline__ typename Pair<T>::type pair_of(const F& f, int b, int i) {
  typename Pair<T>::type v;
  reinterpret_cast<T*>(&v)[0] = from_float<T>(at<false>(f, b, i));
  reinterpret_cast<T*>(&v)[1] = from_float<T>(at<false>(f, b, i + 1));
  return v;
}
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
               :: "r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}
// The k-th pair of adjacent columns a thread holds in block b, as two packed 16-bit T.
template <typename T, int MB, int N, typename H>
__device__ __forceinline__ uint32_t packed_pair(const Frag16<MB, N, H>& f, int b, int k) {
  if constexpr (std::is_same<T, H>::value) return f.x[b][k];
  else return pack2<T>(at<false>(f, b, 2 * k), at<false>(f, b, 2 * k + 1));
}
template <typename T, int MB, int N>
__device__ __forceinline__ uint32_t packed_pair(const Frag<MB, N>& f, int b, int k) {
  return pack2<T>(f.x[b][2 * k], f.x[b][2 * k + 1]);
}
// A 16-bit tile goes out with stmatrix: a warp's 16-row slab, 16 columns (four 8x8 matrices) per
// instruction and one address per thread, in the layout the wgmma accumulator already has (pair
// k = 2j + h of a thread is row h*8 + lane/4, columns 8j + 2*(lane%4)). Other tiles: a thread holds
// each row's columns in adjacent pairs (frag_col), which a swizzle keeps adjacent: one store per pair.
//
// frag_to_tile_blocks writes only the swizzle blocks (columns) [CB, CB + NB) of the tile, to `tile`
// where block CB begins (an output staged for TMA a block at a time); which block a column falls
// in is known at compile time (a thread's columns differ from 8c by less than 8).
template <typename T, int ROWS, int COLS, int CB, int NB, typename F>
__device__ __forceinline__ void frag_to_tile_blocks(void* tile, const F& f, int row0) {
  using L = Tile<T, ROWS, COLS>;
  char* base = static_cast<char*>(tile) - CB * ROWS * L::kSw;
  auto wanted = [](int col8) { return col8 / L::kBlockCols >= CB && col8 / L::kBlockCols < CB + NB; };
  using P = typename Pair<T>::type;
  if constexpr (!is_rows<F>::value && sizeof(T) == 2 && F::kElems % 8 == 0) {
    const int lane = threadIdx.x % 32, q = lane / 8;
    const int r = row0 + 16 * ((threadIdx.x / 32) % 4) + 8 * (q & 1) + lane % 8;
#pragma unroll
    for (int b = 0; b < F::kBlocks; ++b)
#pragma unroll
      for (int j = 0; j < F::kElems / 4; j += 2)
        if (wanted(8 * j))
          stmatrix_x4(smem_addr(base + L::offset(r + 64 * b, 8 * (j + (q >> 1)))),
                      packed_pair<T>(f, b, 2 * j), packed_pair<T>(f, b, 2 * j + 1),
                      packed_pair<T>(f, b, 2 * j + 2), packed_pair<T>(f, b, 2 * j + 3));
  } else if constexpr (!is_rows<F>::value && !std::is_void<P>::value) {
#pragma unroll
    for (int b = 0; b < F::kBlocks; ++b)
#pragma unroll
      for (int i = 0; i < F::kElems; i += 2)
        if (wanted(8 * (i >> 2)))
          *reinterpret_cast<P*>(base + L::offset(row0 + frag_row(b, i), frag_col(i))) = pair_of<T>(f, b, i);
  } else {
#pragma unroll
    for (int b = 0; b < F::kBlocks; ++b)
#pragma unroll
      for (int i = 0; i < F::kElems; ++i)
        if (wanted(8 * (i >> 2)))
          *reinterpret_cast<T*>(base + L::offset(row0 + frag_row(b, i), frag_col(i))) = from_float<T>(at<false>(f, b, i));
  }
}
template <typename T, int ROWS, int COLS, typename F>
__device__ __forceinline__ void frag_to_tile(void* tile, const F& f, int row0) {
  frag_to_tile_blocks<T, ROWS, COLS, 0, Tile<T, ROWS, COLS>::kBlocks>(tile, f, row0);
}

template <typename T, int ROWS, int COLS, typename F>
__device__ __forceinline__ void tile_to_frag(F& f, const void* tile, int row0) {
  const char* base = static_cast<const char*>(tile);
  for_each(f, [&](int b, int i) {
    return to_float<T>(*reinterpret_cast<const T*>(base + Tile<T, ROWS, COLS>::offset(row0 + frag_row(b, i), frag_col(i))));
  });
}

template <typename T, int ROWS, int COLS, int MB>
__device__ __forceinline__ void tile_to_frag(Rows<MB>& r, const void* tile, int row0) {
  const char* base = static_cast<const char*>(tile);
  for_each(r, [&](int b, int h) {
    return to_float<T>(*reinterpret_cast<const T*>(base + Tile<T, ROWS, COLS>::offset(0, row0 + rows_row(b, h))));
  });
}

// Plain row-major staging of a fragment (values handed between roles): buffer[row][col].
template <typename T, typename F>
__device__ __forceinline__ void frag_to_buffer(T* buf, const F& f, int row0, int ld) {
#pragma unroll
  for (int b = 0; b < F::kBlocks; ++b)
#pragma unroll
    for (int i = 0; i < F::kElems; ++i) buf[(row0 + frag_row(b, i)) * ld + frag_col(i)] = from_float<T>(at<false>(f, b, i));
}
template <typename T, int MB>
__device__ __forceinline__ void frag_to_buffer(T* buf, const Rows<MB>& r, int row0, int) {
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if (threadIdx.x % 4 == 0) buf[row0 + rows_row(b, h)] = from_float<T>(r.x[b][h]);
}
template <typename T, typename F>
__device__ __forceinline__ void buffer_to_frag(F& f, const T* buf, int row0, int ld) {
  for_each(f, [&](int b, int i) { return to_float<T>(buf[(row0 + frag_row(b, i)) * ld + frag_col(i)]); });
}
template <typename T, int MB>
__device__ __forceinline__ void buffer_to_frag(Rows<MB>& r, const T* buf, int row0, int) {
  for_each(r, [&](int b, int h) { return to_float<T>(buf[row0 + rows_row(b, h)]); });
}

// Global memory: element (row, col) of a row-major [rows x ld] matrix at ptr. A thread holds the
// elements i, i + 1 of a fragment in adjacent columns: one 2-element store each, when aligned.
template <typename T, typename F>
__device__ __forceinline__ void frag_to_global(T* ptr, const F& f, int row0, int col0, int ld) {
  using P = typename Pair<T>::type;
  T* base = ptr + static_cast<size_t>(col0);
  if constexpr (!is_rows<F>::value && !std::is_void<P>::value) {
    if (ld % 2 == 0 && reinterpret_cast<uintptr_t>(base) % sizeof(P) == 0) {
#pragma unroll
      for (int b = 0; b < F::kBlocks; ++b)
#pragma unroll
        for (int i = 0; i < F::kElems; i += 2)
          *reinterpret_cast<P*>(base + static_cast<size_t>(row0 + frag_row(b, i)) * ld + frag_col(i)) = pair_of<T>(f, b, i);
      return;
    }
  }
  frag_to_buffer(base, f, row0, ld);
}
// ... added to it instead: several CTAs reduce into one tile.
// A thread's two adjacent columns go in one float2 atomicAdd (sm_90) where aligned.
template <typename F>
__device__ __forceinline__ void frag_add_global(float* ptr, const F& f, int row0, int col0, int ld) {
  float* base = ptr + col0;
  if (ld % 2 == 0 && reinterpret_cast<uintptr_t>(base) % sizeof(float2) == 0) {
#pragma unroll
    for (int b = 0; b < F::kBlocks; ++b)
#pragma unroll
      for (int i = 0; i < F::kElems; i += 2)
        atomicAdd(reinterpret_cast<float2*>(base + static_cast<size_t>(row0 + frag_row(b, i)) * ld + frag_col(i)),
                  pair_of<float>(f, b, i));
    return;
  }
#pragma unroll
  for (int b = 0; b < F::kBlocks; ++b)
#pragma unroll
    for (int i = 0; i < F::kElems; ++i)
      atomicAdd(base + static_cast<size_t>(row0 + frag_row(b, i)) * ld + frag_col(i), at<false>(f, b, i));
}
template <typename T, typename F>
__device__ __forceinline__ void global_to_frag(F& f, const T* ptr, int row0, int col0, int ld) {
  buffer_to_frag(f, ptr + static_cast<size_t>(col0), row0, ld);
}
// The same, clipped at a tensor's end (a partial last tile along a grid axis, partial.py): only the
// elements of rows below rows_left (counted from ptr) and columns below col_end are written.
template <typename T, typename F>
__device__ __forceinline__ void frag_to_global_clip(T* ptr, const F& f, int row0, int col0, int ld, int rows_left,
                                                    int col_end) {
#pragma unroll
  for (int b = 0; b < F::kBlocks; ++b)
#pragma unroll
    for (int i = 0; i < F::kElems; ++i) {
      const int r = row0 + frag_row(b, i), c = col0 + frag_col(i);
      if (r < rows_left && c < col_end) ptr[static_cast<size_t>(r) * ld + c] = from_float<T>(at<false>(f, b, i));
    }
}
template <typename F>
__device__ __forceinline__ void frag_add_global_clip(float* ptr, const F& f, int row0, int col0, int ld, int rows_left,
                                                     int col_end) {
#pragma unroll
  for (int b = 0; b < F::kBlocks; ++b)
#pragma unroll
    for (int i = 0; i < F::kElems; ++i) {
      const int r = row0 + frag_row(b, i), c = col0 + frag_col(i);
      if (r < rows_left && c < col_end) atomicAdd(ptr + static_cast<size_t>(r) * ld + c, at<false>(f, b, i));
    }
}
// A row vector's elements below n (counted from buf).
template <typename T, int MB>
__device__ __forceinline__ void frag_to_buffer_clip(T* buf, const Rows<MB>& r, int row0, int n) {
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if (threadIdx.x % 4 == 0 && row0 + rows_row(b, h) < n) buf[row0 + rows_row(b, h)] = from_float<T>(r.x[b][h]);
}
// A tile of global memory into a fragment, element (r, c) at ptr[r * ld + c] (ptr: the tile's
// origin), for a partial last tile along a grid axis (partial.py): a tile reads 0 past rows_left rows
// and cols_left columns, a row vector its last element inside. The padded elements are never written;
// each form is the one that cost no register where the epilogue holds the most (measured: a GEMM's
// residual tile, a softmax's row sums).
template <typename T, typename F>
__device__ __forceinline__ void global_to_frag_clip(F& f, const T* ptr, int row0, int ld, int rows_left, int cols_left) {
  for_each(f, [&](int b, int i) {
    const int r = row0 + frag_row(b, i), c = frag_col(i);
    return r < rows_left && c < cols_left ? to_float<T>(ptr[static_cast<size_t>(r) * ld + c]) : 0.f;
  });
}
template <typename T, int MB>
__device__ __forceinline__ void global_to_frag_clip(Rows<MB>& v, const T* ptr, int row0, int, int rows_left, int) {
  for_each(v, [&](int b, int h) {
    return to_float<T>(ptr[min(row0 + rows_row(b, h), rows_left - 1)]);
  });
}
