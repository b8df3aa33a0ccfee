// rand (twill/emit/rand.py): element (r, c) of the tile (r = row0 + the thread's row) draws philox_rand
// at counter ROW * r + COL * c + base, base the tile origin's part (twill/counter.py), all mod 2^32 as
// Triton's i32 offsets wrap.
template <int ROUNDS, typename Out>
__device__ __forceinline__ void op_rand(Out& out, unsigned long long seed, uint32_t row, uint32_t col, uint32_t base,
                                        int row0) {
  const uint32_t first = base + row * static_cast<uint32_t>(row0 + trow<Out::kRows>());
  for_each(out, [&](int i) { return philox_rand<ROUNDS>(seed, first + col * static_cast<uint32_t>(i)); });
}
