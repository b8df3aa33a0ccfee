
// ==== the join op of the vocabulary (twill/vocab.py), in kernels that have one: sm_90a ==========
// join x, y: out [M, 2N], x's column j is column 2j, y's is 2j + 1. Element pair i, i + 1 of out
// (columns 8 * (i >> 2) + 2q and that + 1, q = lane % 4) is column k = 4 * (i >> 2) + q of x and y,
// held by lane q' = 2 * ((i >> 2) & 1) + q / 2 of the same quad, as its element
// 4 * ((i >> 2) >> 1) + 2 * ((i >> 1) & 1) + (q & 1): two shuffles each, one per candidate element.
template <typename Out, typename X, typename Y>
__device__ __forceinline__ void op_join(Out& out, const X& x, const Y& y) {
  const int lane = threadIdx.x % 32, q = lane % 4;
#pragma unroll
  for (int b = 0; b < Out::kBlocks; ++b) {
#pragma unroll
    for (int i = 0; i < Out::kElems; i += 2) {
      const int blk = i >> 2, h = (i >> 1) & 1, e = 4 * (blk >> 1) + 2 * h;
      const int src = (lane & ~3) | (2 * (blk & 1) + q / 2);
      const float x0 = __shfl_sync(0xffffffffu, at<false>(x, b, e), src);
      const float x1 = __shfl_sync(0xffffffffu, at<false>(x, b, e + 1), src);
      const float y0 = __shfl_sync(0xffffffffu, at<false>(y, b, e), src);
      const float y1 = __shfl_sync(0xffffffffu, at<false>(y, b, e + 1), src);
      put2(out, b, i, (q & 1) ? x1 : x0, (q & 1) ? y1 : y0);
    }
  }
}
