// ==== 8-bit tensor-core inputs (sm_90a): s32 accumulators ==========================================
// Included only by kernels with 8-bit mma inputs or i32 tiles. fp8 tiles (__nv_fp8_e4m3,
// __nv_fp8_e5m2) need nothing more: they go to the tensor core through descriptors (K-major, 128
// values per 128-byte swizzle row) and convert to float through their own operators. An s8 wgmma
// accumulates in 32-bit integers, in the accumulator layout of Frag: FragS32 holds them as
// integers, so no value is rounded through float on its way out (above 2^24 a float would be).
template <int MB, int N>
struct FragS32 {
  static constexpr int kBlocks = MB, kElems = N / 2;
  int32_t x[MB][N / 2];
};

// The opcodes' math reads and writes it through float, like every other fragment.
template <bool ROWS, int MB, int N>
__device__ __forceinline__ float at(const FragS32<MB, N>& f, int b, int i) { return static_cast<float>(f.x[b][i]); }
template <int MB, int N>
__device__ __forceinline__ void put2(FragS32<MB, N>& f, int b, int i, float v0, float v1) {
  f.x[b][i] = static_cast<int32_t>(v0);
  f.x[b][i + 1] = static_cast<int32_t>(v1);
}

template <int MB, int N>
__device__ __forceinline__ void fence_frag(FragS32<MB, N>& f) {
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) asm volatile("" : "+r"(f.x[b][i])::"memory");
}

// Element i of block b as a T: an integer exactly, a float converted once.
template <typename T, int MB, int N>
__device__ __forceinline__ T elem_as(const FragS32<MB, N>& f, int b, int i) {
  if constexpr (std::is_integral<T>::value) return static_cast<T>(f.x[b][i]);
  else return from_float<T>(static_cast<float>(f.x[b][i]));
}

// Its ways out (the overloads of the Frag ones, which would round through float). A thread's two
// adjacent columns (elements i, i + 1) stay adjacent in a swizzled tile: one 8-byte store of an
// i32 pair, else one store each.
template <typename T, int ROWS, int COLS, int CB, int NB, int MB, int N>
__device__ __forceinline__ void frag_to_tile_blocks(void* tile, const FragS32<MB, N>& f, int row0) {
  using L = Tile<T, ROWS, COLS>;
  char* base = static_cast<char*>(tile) - CB * ROWS * L::kSw;
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int i = 0; i < N / 2; i += 2) {
      if (8 * (i >> 2) / L::kBlockCols < CB || 8 * (i >> 2) / L::kBlockCols >= CB + NB) continue;
      char* at0 = base + L::offset(row0 + frag_row(b, i), frag_col(i));
      if constexpr (std::is_same<T, int32_t>::value) {
        *reinterpret_cast<int2*>(at0) = make_int2(f.x[b][i], f.x[b][i + 1]);
      } else {
        reinterpret_cast<T*>(at0)[0] = elem_as<T>(f, b, i);
        reinterpret_cast<T*>(at0)[1] = elem_as<T>(f, b, i + 1);
      }
    }
}
template <typename T, int MB, int N>
__device__ __forceinline__ void frag_to_buffer(T* buf, const FragS32<MB, N>& f, int row0, int ld) {
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) buf[(row0 + frag_row(b, i)) * ld + frag_col(i)] = elem_as<T>(f, b, i);
}
template <typename T, int MB, int N>
__device__ __forceinline__ void frag_to_global(T* ptr, const FragS32<MB, N>& f, int row0, int col0, int ld) {
  frag_to_buffer(ptr + static_cast<size_t>(col0), f, row0, ld);
}
template <typename T, int MB, int N>
__device__ __forceinline__ void frag_to_global_clip(T* ptr, const FragS32<MB, N>& f, int row0, int col0, int ld,
                                                    int rows_left, int col_end) {
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      const int r = row0 + frag_row(b, i), c = col0 + frag_col(i);
      if (r < rows_left && c < col_end) ptr[static_cast<size_t>(r) * ld + c] = elem_as<T>(f, b, i);
    }
}

// ---- fp8 register tiles (P of FP8 attention) -------------------------------------------------------
// A tile of fp8 values in the accumulator layout (see Frag): word c of block b holds the four values
// of 8-column block c the thread has, byte (i & 3) element i: row g's pair in the low half, row
// g + 8's in the high one. Values are rounded to T (e4m3, e5m2; saturating) as they are put.
template <typename T> struct Fp8Kind;
template <> struct Fp8Kind<__nv_fp8_e4m3> { static constexpr __nv_fp8_interpretation_t value = __NV_E4M3; };
template <> struct Fp8Kind<__nv_fp8_e5m2> { static constexpr __nv_fp8_interpretation_t value = __NV_E5M2; };

template <int MB, int N, typename T>
struct Frag8 {
  static constexpr int kBlocks = MB, kElems = N / 2;
  uint32_t x[MB][N / 8];
};

template <bool ROWS, int MB, int N, typename T>
__device__ __forceinline__ float at(const Frag8<MB, N, T>& f, int b, int i) {
  const auto byte = static_cast<__nv_fp8_storage_t>((f.x[b][i >> 2] >> (8 * (i & 3))) & 0xffu);
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(byte, Fp8Kind<T>::value)));
}
// Elements i, i + 1 (i even); the low half of a word (i % 4 == 0) is put before its high half, as
// for_each does.
template <int MB, int N, typename T>
__device__ __forceinline__ void put2(Frag8<MB, N, T>& f, int b, int i, float v0, float v1) {
  const uint32_t pair = __nv_cvt_float2_to_fp8x2(make_float2(v0, v1), __NV_SATFINITE, Fp8Kind<T>::value);
  uint32_t& w = f.x[b][i >> 2];
  w = (i & 2) ? ((w & 0xffffu) | (pair << 16)) : pair;
}
template <int MB, int N, typename T>
__device__ __forceinline__ void fence_frag(Frag8<MB, N, T>& f) {
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int i = 0; i < N / 8; ++i) asm volatile("" : "+r"(f.x[b][i])::"memory");
}

// exp2 with the row sums of the unrounded values (op_exp2_sum of sm90.cuh, for an fp8 result).
template <int MB, int N, typename T, typename X, typename B>
__device__ __forceinline__ void op_exp2_sum(Frag8<MB, N, T>& out, Rows<MB>& sum, const X& x, const B& b, float scale) {
#pragma unroll
  for (int blk = 0; blk < MB; ++blk) {
    float s[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < Frag8<MB, N, T>::kElems; i += 2) {
      const float m = at<false>(b, blk, i);
      const float v0 = exp2_shifted(at<false>(x, blk, i), m, scale);
      const float v1 = exp2_shifted(at<false>(x, blk, i + 1), m, scale);
      put2(out, blk, i, v0, v1);
      s[(i >> 1) & 1] += v0 + v1;
    }
    sum.x[blk][0] = quad_sum(s[0]);
    sum.x[blk][1] = quad_sum(s[1]);
  }
}

// wgmma's A operand of 8-bit values from registers (m64nNk32): per 32-column slice kk of block b,
// x[b][4kk .. 4kk + 3] = (row g, columns 4t..4t+3), (row g + 8, the same), (row g, 16 + 4t..),
// (row g + 8, 16 + 4t..), t = lane % 4: the byte layout of the f16 A fragment.
template <int MB, int N>
struct FragA8 {
  uint32_t x[MB][N / 8];
};
template <int MB, int N>
__device__ __forceinline__ void fence_frag(FragA8<MB, N>& f) {
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int i = 0; i < N / 8; ++i) asm volatile("" : "+r"(f.x[b][i])::"memory");
}
// An fp8 tile from the accumulator layout into it. Thread t holds columns 2t, 2t + 1 of each
// 8-column block and needs 4t .. 4t + 3 of the slice, which threads 2(t%2) and 2(t%2) + 1 of its
// quad hold (blocks t/2 and 2 + t/2): two shuffles per row and slice, each thread sending the
// blocks (0, 2) or (1, 3) by its parity and reading the two lanes in the order that gives every
// receiver its block (FA3's permute_Aregs_fp8 does the like).
template <int MB, int N, typename T>
__device__ __forceinline__ void frag8_to_a(FragA8<MB, N>& a, const Frag8<MB, N, T>& p) {
  const int t = threadIdx.x % 4;
  const bool odd = t & 1, upper = t >> 1;
  const int la = 2 * (t & 1) + (t >> 1), lb = 2 * (t & 1) + 1 - (t >> 1);
#pragma unroll
  for (int b = 0; b < MB; ++b)
#pragma unroll
    for (int kk = 0; kk < N / 32; ++kk)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t sel = h ? 0x7632u : 0x5410u;  // row g's pairs, or row g + 8's
        const uint32_t w02 = __byte_perm(p.x[b][4 * kk], p.x[b][4 * kk + 2], sel);
        const uint32_t w13 = __byte_perm(p.x[b][4 * kk + 1], p.x[b][4 * kk + 3], sel);
        const uint32_t ra = __shfl_sync(0xffffffffu, odd ? w13 : w02, la, 4);
        const uint32_t rb = __shfl_sync(0xffffffffu, odd ? w02 : w13, lb, 4);
        const uint32_t lo = upper ? rb : ra, hi = upper ? ra : rb;  // columns 4t, 4t+1 come from lo
        a.x[b][4 * kk + h] = __byte_perm(lo, hi, 0x5410);
        a.x[b][4 * kk + 2 + h] = __byte_perm(lo, hi, 0x7632);
      }
}

// A register tile times a launch-time scalar (an output's descale factor).
template <typename F>
__device__ __forceinline__ void op_scale_by(F& f, float s) {
  for_each(f, [&](int b, int i) { return at<false>(f, b, i) * s; });
}
