
// ==== the join op of the vocabulary (twill/vocab.py), in kernels that have one: sm_100a =========
// join x, y: out [M, 2N], x's column j is column 2j, y's is 2j + 1 (each thread holds its whole row).
template <typename Out, typename X, typename Y>
__device__ __forceinline__ void op_join(Out& out, const X& x, const Y& y) {
#pragma unroll
  for (int i = 0; i < Out::kElems; i += 2) put2(out, i, at<false>(x, i / 2), at<false>(y, i / 2));
}
