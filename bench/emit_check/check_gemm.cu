// Checks an emitted kernel against a naive reference (see run.sh). KERNEL, NS, NAME: -D flags.
// C[M,N] = A[M,K] * B[K,N]  (A row-major, B row-major K x N)
#include KERNEL
#include "common.h"
__global__ void ref_gemm(const __half* A, const __half* B, float* C, int M, int N, int K) {
  int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= M || c >= N) return;
  float s = 0; for (int k = 0; k < K; ++k) s += __half2float(A[(size_t)r*K+k]) * __half2float(B[(size_t)k*N+c]);
  C[(size_t)r*N+c] = s;
}
int main() {
  using namespace NS;
  Problem p; p.tiles_m = 3; p.tiles_n = 2; p.iters = 11; p.batch = 1;
  int M = p.tiles_m*128, N = p.tiles_n*128, K = p.iters*64;
  auto a = rand_half((size_t)M*K, 1), b = rand_half((size_t)K*N, 2);
  __half *da = upload(a), *db = upload(b); float* dc; CK(cudaMalloc(&dc, (size_t)M*N*4)); float* dr; CK(cudaMalloc(&dr, (size_t)M*N*4));
  CK(cudaMemset(dc, 0xff, (size_t)M*N*4));
  p.a = da; p.b = db; p.out_acc = dc;
  CK(launch(p)); CK(cudaDeviceSynchronize());
  ref_gemm<<<dim3(N/16, M/16), dim3(16,16)>>>(da, db, dr, M, N, K); CK(cudaDeviceSynchronize());
  report(NAME, download(dc, (size_t)M*N), download(dr, (size_t)M*N));
  // timing at 4096^3
  Problem q; q.tiles_m = 32; q.tiles_n = 32; q.iters = 64;
  auto A2 = rand_half((size_t)4096*4096, 3), B2 = rand_half((size_t)4096*4096, 4);
  q.a = upload(A2); q.b = upload(B2); float* C2; CK(cudaMalloc(&C2, (size_t)4096*4096*4)); q.out_acc = C2;
  CK(launch(q)); CK(cudaDeviceSynchronize());
  cudaEvent_t s0, s1; cudaEventCreate(&s0); cudaEventCreate(&s1); cudaEventRecord(s0);
  for (int i = 0; i < 20; ++i) launch(q);
  cudaEventRecord(s1); CK(cudaEventSynchronize(s1)); float ms; cudaEventElapsedTime(&ms, s0, s1); ms /= 20;
  printf("%s 4096^3: %.3f ms, %.1f TFLOP/s\n", NAME, ms, 2.0*4096.0*4096*4096/ms/1e9);
  return 0;
}
