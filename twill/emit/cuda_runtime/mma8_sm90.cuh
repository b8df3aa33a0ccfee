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
