// ==== Blackwell (sm_100a): tcgen05 and tensor memory ===============================================
// A warpgroup's share of an R x N tile read out of tensor memory (tcgen05.ld 32x32b: thread t of the
// warpgroup reads lane t, every column). R = 128: thread t holds row t. R = 64 (the layout of an
// M = 64 tcgen05.mma, "data path F"): row r lies in lane 32 * (r / 16) + r % 16, so lanes 0-15 of
// each warp hold rows 16w .. 16w + 15 and lanes 16-31 hold nothing (they compute on copies of
// rows they never write: see row_ok).
template <int N, int R = 128>
struct TRow {
  static constexpr int kElems = N, kRows = R;
  float x[N];
};

template <int N, typename H, int R = 128>
struct TRow16 {
  static constexpr int kElems = N, kRows = R;
  uint32_t x[N / 2];
};

// One value per row: the thread's row.
template <int R = 128>
struct TScalR {
  static constexpr int kElems = 1, kRows = R;
  float x;
};
using TScal = TScalR<128>;

template <typename F> struct is_rows { static constexpr bool value = false; };
template <int R> struct is_rows<TScalR<R>> { static constexpr bool value = true; };

// A tile another role staged in shared memory (row-major, N columns), read where it is used.
template <int N, typename T, int R = 128>
struct View {
  static constexpr int kElems = N, kRows = R;
  const T* p;
  int row0;
};
template <typename T, int R = 128>
struct RowsView {
  static constexpr int kElems = 1, kRows = R;
  const T* p;
  int row0;
};

// The row of an R-row tile this thread holds, and whether it holds one (else it holds a copy of
// the row 16 lanes below, to read, never to write).
template <int R>
__device__ __forceinline__ int trow() {
  static_assert(R == 128 || R == 64, "tensor-memory tiles have 128 or 64 rows");
  return R == 128 ? static_cast<int>(threadIdx.x % 128) : static_cast<int>(16 * ((threadIdx.x / 32) % 4) + threadIdx.x % 16);
}
template <int R>
__device__ __forceinline__ bool row_ok() { return R == 128 || threadIdx.x % 32 < 16; }

template <bool ROWS, int N, int R>
__device__ __forceinline__ float at(const TRow<N, R>& f, int i) { return f.x[i]; }
template <bool ROWS, int N, typename H, int R>
__device__ __forceinline__ float at(const TRow16<N, H, R>& f, int i) { return unpack<H>(f.x[i / 2], i & 1); }
template <bool ROWS, int R>
__device__ __forceinline__ float at(const TScalR<R>& r, int) { return r.x; }
template <bool ROWS>
__device__ __forceinline__ float at(float s, int) { return s; }
template <bool ROWS, int N, typename T, int R>
__device__ __forceinline__ float at(const View<N, T, R>& v, int i) { return to_float<T>(v.p[(v.row0 + trow<R>()) * N + i]); }
template <bool ROWS, typename T, int R>
__device__ __forceinline__ float at(const RowsView<T, R>& v, int) { return to_float<T>(v.p[v.row0 + trow<R>()]); }

template <int N, int R>
__device__ __forceinline__ void put2(TRow<N, R>& f, int i, float v0, float v1) { f.x[i] = v0; f.x[i + 1] = v1; }
template <int N, typename H, int R>
__device__ __forceinline__ void put2(TRow16<N, H, R>& f, int i, float v0, float v1) { f.x[i / 2] = pack2<H>(v0, v1); }

template <typename Out, typename Fn>
__device__ __forceinline__ void for_each(Out& out, Fn fn) {
#pragma unroll
  for (int i = 0; i < Out::kElems; i += 2) put2(out, i, fn(i), fn(i + 1));
}
template <int R, typename Fn>
__device__ __forceinline__ void for_each(TScalR<R>& out, Fn fn) { out.x = fn(0); }

template <typename Out>
__device__ __forceinline__ void fill(Out& out, float v) {
  for_each(out, [&](int) { return v; });
}

template <int R, typename X, typename Red>
__device__ __forceinline__ void row_reduce(TScalR<R>& out, const X& x, float init, Red red, bool) {
  float v = init;
#pragma unroll
  for (int i = 0; i < X::kElems; ++i) v = red(v, at<false>(x, i));
  out.x = v;
}

// ---- tensor memory ---------------------------------------------------------------------------
// Addresses: lane (row) in the upper 16 bits, column in the lower. Warp w of a warpgroup may
// touch lanes 32*(w%4) .. +31 only.
__device__ __forceinline__ void tmem_alloc(uint32_t* dst, uint32_t columns) {
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;"
               :: "r"(smem_addr(dst)), "r"(columns) : "memory");
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void tmem_dealloc(uint32_t taddr, uint32_t columns) {
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" :: "r"(taddr), "r"(columns) : "memory");
}
__device__ __forceinline__ void tmem_fence_before() { asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory"); }
__device__ __forceinline__ void tmem_fence_after() { asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory"); }
__device__ __forceinline__ void tmem_wait_ld() { asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void tmem_wait_st() { asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ uint32_t tmem_lane_base(uint32_t taddr) {
  return taddr + ((32u * ((threadIdx.x / 32) % 4)) << 16);
}

@@TMEM_WRAPPERS@@
// ---- tcgen05.mma ---------------------------------------------------------------------------------
// Shared-memory descriptor (sm_100): as sm_90's plus the version bit 46; layout 2, 4, 6 = 128-,
// 64-, 32-byte swizzle.
template <int SW>
__device__ __forceinline__ uint64_t umma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  static_assert(SW == 128 || SW == 64 || SW == 32, "tcgen05.mma reads tiles of 32-, 64- or 128-byte swizzle");
  constexpr uint64_t layout = SW == 128 ? 2 : SW == 64 ? 4 : 6;
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>((lbo >> 4) & 0x3FFF) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3FFF) << 32) | (1ull << 46) | (layout << 61);
}

template <typename T, int ROWS, int COLS>
__device__ __forceinline__ uint64_t desc_kmajor(const void* tile, int r0, int k0) {
  using L = Tile<T, ROWS, COLS>;
  const uint32_t a = smem_addr(tile) + (k0 / L::kBlockCols) * ROWS * L::kSw + r0 * L::kSw + (k0 % L::kBlockCols) * sizeof(T);
  return umma_desc<L::kSw>(a, 16, 8 * L::kSw);
}

template <typename T, int ROWS, int COLS>
__device__ __forceinline__ uint64_t desc_mnmajor(const void* tile, int k0, int n0) {
  using L = Tile<T, ROWS, COLS>;
  const uint32_t a = smem_addr(tile) + (n0 / L::kBlockCols) * ROWS * L::kSw + k0 * L::kSw;
  return umma_desc<L::kSw>(a, ROWS * L::kSw, 8 * L::kSw);
}

// Instruction descriptor of kind::f16: f32 accumulator, f16 or bf16 inputs, majors, N and M.
template <int M, int N, bool BF16, bool A_MN, bool B_MN>
__host__ __device__ constexpr uint32_t umma_idesc() {
  return (1u << 4) | ((BF16 ? 1u : 0u) << 7) | ((BF16 ? 1u : 0u) << 10) | ((A_MN ? 1u : 0u) << 15) |
         ((B_MN ? 1u : 0u) << 16) | (static_cast<uint32_t>(N >> 3) << 17) | (static_cast<uint32_t>(M >> 4) << 24);
}

// D (tensor memory) (+)= A (shared, descriptor) x B (shared, descriptor); issued by one thread.
__device__ __forceinline__ void umma_ss(uint32_t d, uint64_t a, uint64_t b, uint32_t idesc, uint32_t accumulate) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
               "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n\t}"
               :: "r"(d), "l"(a), "l"(b), "r"(idesc), "r"(accumulate) : "memory");
}

// D (+)= A (tensor memory) x B (shared, descriptor).
__device__ __forceinline__ void umma_ts(uint32_t d, uint32_t a, uint64_t b, uint32_t idesc, uint32_t accumulate) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
               "tcgen05.mma.cta_group::1.kind::f16 [%0], [%1], %2, %3, p;\n\t}"
               :: "r"(d), "r"(a), "l"(b), "r"(idesc), "r"(accumulate) : "memory");
}

// Arrive on an mbarrier once every tcgen05 operation this thread issued so far has completed.
__device__ __forceinline__ void umma_commit(uint64_t* bar) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];"
               :: "r"(smem_addr(bar)) : "memory");
}

// ---- tiles between registers, tensor, shared and global memory ------------------------------------
template <int N, int R>
__device__ __forceinline__ void tmem_to_frag(TRow<N, R>& f, uint32_t taddr) {
  static_assert(N % 32 == 0, "tensor-memory tiles are read 32 columns at a time");
  const uint32_t base = tmem_lane_base(taddr);
#pragma unroll
  for (int c = 0; c < N; c += 32) tmem_ld32(base + c, &f.x[c]);
  tmem_wait_ld();
}

template <int N, int R>
__device__ __forceinline__ void frag_to_tmem(uint32_t taddr, const TRow<N, R>& f) {
  static_assert(N % 32 == 0, "tensor-memory tiles are written 32 columns at a time");
  const uint32_t base = tmem_lane_base(taddr);
#pragma unroll
  for (int c = 0; c < N; c += 32) tmem_st32(base + c, &f.x[c]);
  tmem_wait_st();
}

// A packed f16 tile in tensor memory: two values per 32-bit column (the A operand of tcgen05.mma).
template <int N, typename H, int R>
__device__ __forceinline__ void frag_to_tmem(uint32_t taddr, const TRow16<N, H, R>& f) {
  static_assert(N % 64 == 0, "packed tensor-memory tiles are written 32 columns at a time");
  const uint32_t base = tmem_lane_base(taddr);
#pragma unroll
  for (int c = 0; c < N / 2; c += 32) tmem_st32(base + c, reinterpret_cast<const float*>(&f.x[c]));
  tmem_wait_st();
}

template <int N, typename H, int R>
__device__ __forceinline__ void tmem_to_frag(TRow16<N, H, R>& f, uint32_t taddr) {
  static_assert(N % 64 == 0, "packed tensor-memory tiles are read 32 columns at a time");
  const uint32_t base = tmem_lane_base(taddr);
#pragma unroll
  for (int c = 0; c < N / 2; c += 32) tmem_ld32(base + c, reinterpret_cast<float*>(&f.x[c]));
  tmem_wait_ld();
}

// rescale where the tile lies: dst[row][:] = src[row][:] * alpha[row], 32 columns at a time, so a
// 128-column accumulator needs 32 registers, not 128 (FA4's correction warps).
template <int N, typename A>
__device__ __forceinline__ void tmem_rescale(uint32_t dst, uint32_t src, const A& alpha_row) {
  const uint32_t s = tmem_lane_base(src), d = tmem_lane_base(dst);
  const float alpha = at<true>(alpha_row, 0);
  // In place, a warp whose rows all kept their maximum (alpha == 1 exactly) leaves its lanes as
  // they are (as sm_90a's op_rescale; FA4 skips with a threshold, this skip changes no bit).
  if (dst == src && __all_sync(0xffffffffu, alpha == 1.f)) return;
#pragma unroll 1
  for (int c = 0; c < N; c += 32) {
    float r[32];
    tmem_ld32(s + c, r);
    tmem_wait_ld();
#pragma unroll
    for (int i = 0; i < 32; ++i) r[i] *= alpha;
    tmem_st32(d + c, r);
  }
  tmem_wait_st();
}

// The same for a carry's first instance: its initial value, rescaled.
template <int N, typename A>
__device__ __forceinline__ void tmem_rescale_const(uint32_t dst, float init, const A& alpha_row) {
  const uint32_t d = tmem_lane_base(dst);
  const float alpha = at<true>(alpha_row, 0);
  float r[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) r[i] = init * alpha;
#pragma unroll 1
  for (int c = 0; c < N; c += 32) tmem_st32(d + c, r);
  tmem_wait_st();
}

// Only the swizzle blocks [CB, CB + NB), to `tile` where block CB begins (see sm_90a's).
template <typename T, int ROWS, int COLS, int CB, int NB, typename F>
__device__ __forceinline__ void frag_to_tile_blocks(void* tile, const F& f, int row0) {
  using L = Tile<T, ROWS, COLS>;
  char* base = static_cast<char*>(tile) - CB * ROWS * L::kSw;
  if (!row_ok<F::kRows>()) return;
#pragma unroll
  for (int i = CB * L::kBlockCols; i < F::kElems && i < (CB + NB) * L::kBlockCols; ++i)
    *reinterpret_cast<T*>(base + L::offset(row0 + trow<F::kRows>(), i)) = from_float<T>(at<false>(f, i));
}
template <typename T, int ROWS, int COLS, typename F>
__device__ __forceinline__ void frag_to_tile(void* tile, const F& f, int row0) {
  frag_to_tile_blocks<T, ROWS, COLS, 0, Tile<T, ROWS, COLS>::kBlocks>(tile, f, row0);
}

// A tensor-memory f32 tile that is only stored (a carry's last value with no op after the loop):
// frag_to_tile reads it 32 columns at a time and writes each chunk before the next, so a thread
// never holds its whole row (a 128 x 256 accumulator read out whole is 256 registers per thread,
// more than a role's setmaxnreg budget: the held-out mm_hints spilled 124 bytes doing that).
template <int N, int R = 128>
struct TmemTile {
  static constexpr int kElems = N, kRows = R;
  uint32_t taddr;
};

template <typename T, int ROWS, int COLS, int CB, int NB, int N, int R>
__device__ __forceinline__ void frag_to_tile_blocks(void* tile, const TmemTile<N, R>& f, int row0) {
  using L = Tile<T, ROWS, COLS>;
  static_assert(N % 32 == 0, "tensor-memory tiles are read 32 columns at a time");
  char* base = static_cast<char*>(tile) - CB * ROWS * L::kSw;
  const uint32_t lanes = tmem_lane_base(f.taddr);
  constexpr int lo = CB * L::kBlockCols, hi = (CB + NB) * L::kBlockCols < N ? (CB + NB) * L::kBlockCols : N;
#pragma unroll
  for (int c = lo / 32 * 32; c < hi; c += 32) {
    float v[32];
    tmem_ld32(lanes + c, v);  // every thread of the warp takes part, rows in range or not
    tmem_wait_ld();
    if (!row_ok<R>()) continue;
#pragma unroll
    for (int i = 0; i < 32; ++i)
      if (c + i >= lo && c + i < hi)
        *reinterpret_cast<T*>(base + L::offset(row0 + trow<R>(), c + i)) = from_float<T>(v[i]);
  }
}
template <typename T, int ROWS, int COLS, int N, int R>
__device__ __forceinline__ void frag_to_tile(void* tile, const TmemTile<N, R>& f, int row0) {
  frag_to_tile_blocks<T, ROWS, COLS, 0, Tile<T, ROWS, COLS>::kBlocks>(tile, f, row0);
}

template <typename T, int ROWS, int COLS, typename F>
__device__ __forceinline__ void tile_to_frag(F& f, const void* tile, int row0) {
  const char* base = static_cast<const char*>(tile);
  for_each(f, [&](int i) { return to_float<T>(*reinterpret_cast<const T*>(base + Tile<T, ROWS, COLS>::offset(row0 + trow<F::kRows>(), i))); });
}

template <typename T, int ROWS, int COLS, int R>
__device__ __forceinline__ void tile_to_frag(TScalR<R>& r, const void* tile, int row0) {
  const char* base = static_cast<const char*>(tile);
  r.x = to_float<T>(*reinterpret_cast<const T*>(base + Tile<T, ROWS, COLS>::offset(0, row0 + trow<R>())));
}

template <typename T, typename F>
__device__ __forceinline__ void frag_to_buffer(T* buf, const F& f, int row0, int ld) {
  if (!row_ok<F::kRows>()) return;
#pragma unroll
  for (int i = 0; i < F::kElems; ++i) buf[(row0 + trow<F::kRows>()) * ld + i] = from_float<T>(at<false>(f, i));
}
template <typename T, int R>
__device__ __forceinline__ void frag_to_buffer(T* buf, const TScalR<R>& r, int row0, int) {
  if (row_ok<R>()) buf[row0 + trow<R>()] = from_float<T>(r.x);
}
template <typename T, typename F>
__device__ __forceinline__ void buffer_to_frag(F& f, const T* buf, int row0, int ld) {
  for_each(f, [&](int i) { return to_float<T>(buf[(row0 + trow<F::kRows>()) * ld + i]); });
}
template <typename T, int R>
__device__ __forceinline__ void buffer_to_frag(TScalR<R>& r, const T* buf, int row0, int) {
  r.x = to_float<T>(buf[row0 + trow<R>()]);
}

template <typename T, typename F>
__device__ __forceinline__ void frag_to_global(T* ptr, const F& f, int row0, int col0, int ld) {
  frag_to_buffer(ptr + static_cast<size_t>(col0), f, row0, ld);
}
// A thread's row goes four columns at a time in float4 atomicAdds (sm_90 and later) where aligned.
template <typename F>
__device__ __forceinline__ void frag_add_global(float* ptr, const F& f, int row0, int col0, int ld) {
  if (!row_ok<F::kRows>()) return;
  float* row = ptr + static_cast<size_t>(row0 + trow<F::kRows>()) * ld + col0;
  if (F::kElems % 4 == 0 && reinterpret_cast<uintptr_t>(row) % sizeof(float4) == 0) {
#pragma unroll
    for (int i = 0; i < F::kElems; i += 4)
      atomicAdd(reinterpret_cast<float4*>(row + i),
                make_float4(at<false>(f, i), at<false>(f, i + 1), at<false>(f, i + 2), at<false>(f, i + 3)));
    return;
  }
#pragma unroll
  for (int i = 0; i < F::kElems; ++i)
    atomicAdd(row + i, at<false>(f, i));
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
  const int r = row0 + trow<F::kRows>();
  if (!row_ok<F::kRows>() || r >= rows_left) return;
#pragma unroll
  for (int i = 0; i < F::kElems; ++i)
    if (col0 + i < col_end) ptr[static_cast<size_t>(r) * ld + col0 + i] = from_float<T>(at<false>(f, i));
}
template <typename F>
__device__ __forceinline__ void frag_add_global_clip(float* ptr, const F& f, int row0, int col0, int ld, int rows_left,
                                                     int col_end) {
  const int r = row0 + trow<F::kRows>();
  if (!row_ok<F::kRows>() || r >= rows_left) return;
#pragma unroll
  for (int i = 0; i < F::kElems; ++i)
    if (col0 + i < col_end) atomicAdd(ptr + static_cast<size_t>(r) * ld + col0 + i, at<false>(f, i));
}
// A row vector's elements below n (counted from buf).
template <typename T, int R>
__device__ __forceinline__ void frag_to_buffer_clip(T* buf, const TScalR<R>& r, int row0, int n) {
  if (row_ok<R>() && row0 + trow<R>() < n) buf[row0 + trow<R>()] = from_float<T>(r.x);
}
// A tile of global memory into a fragment, element (r, c) at ptr[r * ld + c] (ptr: the tile's
// origin), clamped to the first rows_left rows and cols_left columns: a partial last tile along a grid
// axis (partial.py) reads the last element inside for those past the end, which are never written.
template <typename T, typename F>
__device__ __forceinline__ void global_to_frag_clip(F& f, const T* ptr, int row0, int ld, int rows_left, int cols_left) {
  const int r = min(row0 + trow<F::kRows>(), rows_left - 1);
  for_each(f, [&](int c) { return to_float<T>(ptr[static_cast<size_t>(r) * ld + min(c, cols_left - 1)]); });
}
// A packed 16-bit tile of its own element type: two columns a 32-bit load where the thread's row lies
// whole inside the tensor and 4-byte aligned (the unpacked loads hold a register per element: baddbmm's
// epilogue, C read beside a 128-column accumulator, spilled 8 bytes); elsewhere clamped as above.
template <typename T, int N, int R>
__device__ __forceinline__ void global_to_frag_clip(TRow16<N, T, R>& f, const T* ptr, int row0, int ld, int rows_left,
                                                    int cols_left) {
  const T* row = ptr + static_cast<size_t>(min(row0 + trow<R>(), rows_left - 1)) * ld;
  if (cols_left >= N && reinterpret_cast<uintptr_t>(row) % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) f.x[i] = reinterpret_cast<const uint32_t*>(row)[i];
    return;
  }
  for_each(f, [&](int c) { return to_float<T>(row[min(c, cols_left - 1)]); });
}
template <typename T, int R>
__device__ __forceinline__ void global_to_frag_clip(TScalR<R>& v, const T* ptr, int row0, int, int rows_left, int) {
  v.x = to_float<T>(ptr[min(row0 + trow<R>(), rows_left - 1)]);
}
