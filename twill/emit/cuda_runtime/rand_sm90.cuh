// rand (twill/emit/rand.py): element (r, c) of the tile (r from row0, this warpgroup's first row) draws
// philox_rand at counter ROW * r + COL * c + base, base the tile origin's part (twill/counter.py), all
// mod 2^32 as Triton's i32 offsets wrap.
template <int ROUNDS, typename Out>
__device__ __forceinline__ void op_rand(Out& out, unsigned long long seed, uint32_t row, uint32_t col, uint32_t base,
                                        int row0) {
  for_each(out, [&](int b, int i) {
    const uint32_t counter = base + row * static_cast<uint32_t>(row0 + frag_row(b, i)) + col * static_cast<uint32_t>(frag_col(i));
    return philox_rand<ROUNDS>(seed, counter);
  });
}
