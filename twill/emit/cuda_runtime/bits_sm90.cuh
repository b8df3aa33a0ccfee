// A comparison's tile held as one bit an element (emit/bitmasks.py: a comparison whose every reader is a
// select's condition on its role): the (64*MB) x N fragment's elements of a thread, 32 to a word, as the
// cost model counts an i1 tile (1 bit an element) where the float fragment took 32 registers for 32 bits.
template <int MB, int N>
struct Bits {
  static constexpr int kBlocks = MB, kElems = N / 2;
  uint32_t x[MB][(N / 2 + 31) / 32];
};
template <bool ROWS, int MB, int N>
__device__ __forceinline__ float at(const Bits<MB, N>& f, int b, int i) { return (f.x[b][i >> 5] >> (i & 31)) & 1u ? 1.f : 0.f; }
// (for_each writes a word's elements in order from its first: that element starts the word afresh)
template <int MB, int N>
__device__ __forceinline__ void put2(Bits<MB, N>& f, int b, int i, float v0, float v1) {
  const uint32_t w = (i & 31) == 0 ? 0u : f.x[b][i >> 5];
  f.x[b][i >> 5] = w | (v0 != 0.f ? 1u << (i & 31) : 0u) | (v1 != 0.f ? 1u << ((i + 1) & 31) : 0u);
}
