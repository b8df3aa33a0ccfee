// Checks an emitted kernel against a naive reference (see run.sh). KERNEL, NS, NAME: -D flags.
// fig1: O = sum over iters of exp2(q k^T * scale) v ; q [B][tm*64][64], k [B][64][64], v [B][64][tn*64]
#include KERNEL
#include "common.h"
__global__ void ref_fig1(const __half* q, const __half* k, const __half* v, float* O, int rows, int cols, int iters) {
  int b = blockIdx.z, r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;
  if (r >= rows || c >= cols) return;
  float o = 0;
  for (int j = 0; j < 64; ++j) { float s = 0; for (int d = 0; d < 64; ++d) s += __half2float(q[((size_t)b*rows + r)*64 + d]) * __half2float(k[((size_t)b*64 + j)*64 + d]);
    float p = __half2float(__float2half(exp2f(s))); o += p * __half2float(v[((size_t)b*64 + j)*cols + c]); }
  O[((size_t)b*rows + r)*cols + c] = o * iters;
}
int main() {
  using namespace NS;
  Problem p; p.tiles_m = 2; p.tiles_n = 3; p.iters = 5; p.batch = 2;
  int rows = p.tiles_m*64, cols = p.tiles_n*64, B = p.batch;
  auto q = rand_half((size_t)B*rows*64, 1), k = rand_half((size_t)B*64*64, 2), v = rand_half((size_t)B*64*cols, 3);
  p.q = upload(q); p.k = upload(k); p.v = upload(v); float *dO, *dR; CK(cudaMalloc(&dO, (size_t)B*rows*cols*4)); CK(cudaMalloc(&dR, (size_t)B*rows*cols*4));
  p.out_o = dO;
  CK(launch(p)); CK(cudaDeviceSynchronize());
  ref_fig1<<<dim3(cols/16, rows/16, B), dim3(16,16)>>>(p.q, p.k, p.v, dR, rows, cols, p.iters); CK(cudaDeviceSynchronize());
  report(NAME, download(dO, (size_t)B*rows*cols), download(dR, (size_t)B*rows*cols));
  return 0;
}
