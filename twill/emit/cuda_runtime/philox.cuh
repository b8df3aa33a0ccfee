
// ==== Triton's random numbers (tl.rand, tl.randint), in kernels with a rand op (twill/emit/rand.py) ====
// Philox-4x32 as triton/language/random.py runs it (twill/philox.py is the same in numpy): the counter
// (c0, c1, c2, c3) = (the element's counter, 0, 0, 0), the key (k0, k1) = the seed's low and high words,
// ROUNDS rounds of c0' = umulhi(B, c2) ^ c1 ^ k0, c2' = umulhi(A, c0) ^ c3 ^ k1, c1' = B * c2, c3' = A * c0
// with the key raised by (KEY_A, KEY_B) after each; tl.randint is the last c0. Host and device alike, so that
// a host build checks it against twill/philox.py (tests/test_rand.py).
__host__ __device__ __forceinline__ uint32_t philox_umulhi(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}
template <int ROUNDS>
__host__ __device__ __forceinline__ uint32_t philox_word(uint32_t c0, uint32_t c1, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kKeyA = 0x9E3779B9u, kKeyB = 0xBB67AE85u, kRoundA = 0xD2511F53u, kRoundB = 0xCD9E8D57u;
  uint32_t c2 = 0, c3 = 0;
#pragma unroll
  for (int r = 0; r < ROUNDS; ++r) {
    const uint32_t a = c0, b = c2;
    c0 = philox_umulhi(kRoundB, b) ^ c1 ^ k0;
    c2 = philox_umulhi(kRoundA, a) ^ c3 ^ k1;
    c1 = kRoundB * b;
    c3 = kRoundA * a;
    k0 += kKeyA;
    k1 += kKeyB;
  }
  return c0;
}
// uint_to_uniform_float of a 32-bit word: as an int32 x, ~x where negative, to f32 (nearest) times the f32
// nearest 4.6566127342e-10 (Triton's scale for 32 bits), in [0, 1).
__host__ __device__ __forceinline__ float philox_uniform(uint32_t w) {
  int32_t x = static_cast<int32_t>(w);
  x = x < 0 ? ~x : x;
  return static_cast<float>(x) * 4.6566127342e-10f;
}
// tl.rand(seed, counter, ROUNDS): the seed as Triton's uint64 (an i32 argument sign-extended).
template <int ROUNDS>
__host__ __device__ __forceinline__ float philox_rand(unsigned long long seed, uint32_t counter) {
  return philox_uniform(philox_word<ROUNDS>(counter, 0u, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)));
}
