// ==== 8-bit tensor-core inputs (sm_100a): tcgen05.mma kind::f8f6f4 and kind::i8 ====================
// Included only by kernels with 8-bit mma inputs or i32 tiles. One instruction is M x N x 32 (32
// bytes of each operand row, as kind::f16's x 16), both operands K-major from shared memory.
//
// Instruction descriptor (PTX ISA, tcgen05 instruction descriptor, kinds f16 / f8f6f4 / i8): D format
// in bits 4-5 (F32 = 1, S32 = 2), A and B formats in bits 7-9 and 10-12 (kind::f8f6f4: E4M3 = 0,
// E5M2 = 1; kind::i8: unsigned = 0, signed = 1), K-major A and B (bits 15, 16 clear), N >> 3 in
// bits 17-22, M >> 4 in bits 24-28.
template <int M, int N, int DFMT, int AFMT, int BFMT>
__host__ __device__ constexpr uint32_t umma_idesc8() {
  return (static_cast<uint32_t>(DFMT) << 4) | (static_cast<uint32_t>(AFMT) << 7) | (static_cast<uint32_t>(BFMT) << 10) |
         (static_cast<uint32_t>(N >> 3) << 17) | (static_cast<uint32_t>(M >> 4) << 24);
}

// D (tensor memory) (+)= A (shared, descriptor) x B (shared, descriptor); issued by one thread.
__device__ __forceinline__ void umma_ss_f8f6f4(uint32_t d, uint64_t a, uint64_t b, uint32_t idesc, uint32_t accumulate) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
               "tcgen05.mma.cta_group::1.kind::f8f6f4 [%0], %1, %2, %3, p;\n\t}"
               :: "r"(d), "l"(a), "l"(b), "r"(idesc), "r"(accumulate) : "memory");
}
__device__ __forceinline__ void umma_ss_i8(uint32_t d, uint64_t a, uint64_t b, uint32_t idesc, uint32_t accumulate) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
               "tcgen05.mma.cta_group::1.kind::i8 [%0], %1, %2, %3, p;\n\t}"
               :: "r"(d), "l"(a), "l"(b), "r"(idesc), "r"(accumulate) : "memory");
}

// An i32 tile read out of tensor memory (the s32 accumulator of kind::i8): TRow's layout, the bits
// kept as integers (tcgen05.ld moves 32-bit words; a float on the way would round above 2^24).
template <int N, int R = 128>
struct TRowS32 {
  static constexpr int kElems = N, kRows = R;
  int32_t x[N];
};

template <bool ROWS, int N, int R>
__device__ __forceinline__ float at(const TRowS32<N, R>& f, int i) { return static_cast<float>(f.x[i]); }
template <int N, int R>
__device__ __forceinline__ void put2(TRowS32<N, R>& f, int i, float v0, float v1) {
  f.x[i] = static_cast<int32_t>(v0);
  f.x[i + 1] = static_cast<int32_t>(v1);
}

template <int N, int R>
__device__ __forceinline__ void tmem_to_frag(TRowS32<N, R>& f, uint32_t taddr) {
  static_assert(N % 32 == 0, "tensor-memory tiles are read 32 columns at a time");
  const uint32_t base = tmem_lane_base(taddr);
#pragma unroll
  for (int c = 0; c < N; c += 32) tmem_ld32(base + c, reinterpret_cast<float*>(&f.x[c]));
  tmem_wait_ld();
}

// Element i as a T: an integer exactly, a float converted once.
template <typename T, int N, int R>
__device__ __forceinline__ T elem_as(const TRowS32<N, R>& f, int i) {
  if constexpr (std::is_integral<T>::value) return static_cast<T>(f.x[i]);
  else return from_float<T>(static_cast<float>(f.x[i]));
}

template <typename T, int ROWS, int COLS, int CB, int NB, int N, int R>
__device__ __forceinline__ void frag_to_tile_blocks(void* tile, const TRowS32<N, R>& f, int row0) {
  using L = Tile<T, ROWS, COLS>;
  char* base = static_cast<char*>(tile) - CB * ROWS * L::kSw;
  if (!row_ok<R>()) return;
#pragma unroll
  for (int i = CB * L::kBlockCols; i < N && i < (CB + NB) * L::kBlockCols; ++i)
    *reinterpret_cast<T*>(base + L::offset(row0 + trow<R>(), i)) = elem_as<T>(f, i);
}
template <typename T, int N, int R>
__device__ __forceinline__ void frag_to_buffer(T* buf, const TRowS32<N, R>& f, int row0, int ld) {
  if (!row_ok<R>()) return;
#pragma unroll
  for (int i = 0; i < N; ++i) buf[(row0 + trow<R>()) * ld + i] = elem_as<T>(f, i);
}
template <typename T, int N, int R>
__device__ __forceinline__ void frag_to_global_clip(T* ptr, const TRowS32<N, R>& f, int row0, int col0, int ld,
                                                    int rows_left, int col_end) {
  const int r = row0 + trow<R>();
  if (!row_ok<R>() || r >= rows_left) return;
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (col0 + i < col_end) ptr[static_cast<size_t>(r) * ld + col0 + i] = elem_as<T>(f, i);
}
