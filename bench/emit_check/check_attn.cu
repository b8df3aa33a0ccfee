// Checks an emitted kernel against a naive reference (see run.sh). KERNEL, NS, NAME: -D flags.
// O = softmax(Q K^T / sqrt(d)) V per batch; Q [B][Sq][D], K [B][Skv][D], V [B][Skv][D]
#include KERNEL
#include "common.h"
__global__ void ref_attn(const __half* Q, const __half* K, const __half* V, float* O, int Sq, int Skv, int D, float scale) {
  int b = blockIdx.y, r = blockIdx.x * blockDim.x + threadIdx.x; if (r >= Sq) return;
  const __half* q = Q + ((size_t)b*Sq + r)*D; float m = -INFINITY, l = 0; float acc[128];
  for (int d = 0; d < D; ++d) acc[d] = 0;
  for (int j = 0; j < Skv; ++j) { const __half* k = K + ((size_t)b*Skv + j)*D; float s = 0; for (int d=0; d<D; ++d) s += __half2float(q[d])*__half2float(k[d]); s *= scale;
    float mn = fmaxf(m, s); float al = expf(m - mn); float pj = expf(s - mn); l = l*al + pj; const __half* v = V + ((size_t)b*Skv + j)*D; for (int d=0; d<D; ++d) acc[d] = acc[d]*al + pj*__half2float(v[d]); m = mn; }
  for (int d=0; d<D; ++d) O[((size_t)b*Sq + r)*D + d] = acc[d]/l;
}
int main() {
  using namespace NS;
  Problem p; p.tiles_m = 4; p.tiles_n = 1; p.iters = 9; p.batch = 3;
  int D = 128, Sq = p.tiles_m*TILE_M, Skv = p.iters*128, B = p.batch;
  auto q = rand_half((size_t)B*Sq*D, 1, 2.f), k = rand_half((size_t)B*Skv*D, 2, 2.f), v = rand_half((size_t)B*Skv*D, 3);
  __half *dq = upload(q), *dk = upload(k), *dv = upload(v);
  float *dO, *dR; CK(cudaMalloc(&dO, (size_t)B*Sq*D*4)); CK(cudaMalloc(&dR, (size_t)B*Sq*D*4)); CK(cudaMemset(dO, 0xff, (size_t)B*Sq*D*4));
  float *dm, *dl; CK(cudaMalloc(&dm, (size_t)B*Sq*4)); CK(cudaMalloc(&dl, (size_t)B*Sq*4));
  SET_POINTERS
  p.exp2_scale = 1.44269504f / sqrtf((float)D);
  CK(launch(p)); CK(cudaDeviceSynchronize());
  ref_attn<<<dim3(Sq/64, B), 64>>>(dq, dk, dv, dR, Sq, Skv, D, 1.f/sqrtf((float)D)); CK(cudaDeviceSynchronize());
  report(NAME, download(dO, (size_t)B*Sq*D), download(dR, (size_t)B*Sq*D));
  {  // m (unscaled row max of S) and l = sum exp2((s - m) * scale), on the host
    auto hm = download(dm, (size_t)B*Sq), hl = download(dl, (size_t)B*Sq);
    std::vector<float> rm(hm.size()), rl(hl.size());
    float sc = 1.44269504f / sqrtf((float)D);
    for (int b = 0; b < B; ++b) for (int r = 0; r < Sq; ++r) {
      std::vector<float> s(Skv); float m = -INFINITY;
      for (int j = 0; j < Skv; ++j) { float a = 0; for (int d = 0; d < D; ++d) a += __half2float(q[((size_t)b*Sq+r)*D+d]) * __half2float(k[((size_t)b*Skv+j)*D+d]); s[j] = a; m = fmaxf(m, a); }
      float l = 0; for (int j = 0; j < Skv; ++j) l += exp2f((s[j]-m)*sc);
      rm[(size_t)b*Sq+r] = m; rl[(size_t)b*Sq+r] = l; }
    report(NAME "_m", hm, rm); report(NAME "_l", hl, rl);
  }
  // timing: B*H = 128, N = 4096
  Problem t = p; t.batch = 128; t.tiles_m = 4096/TILE_M; t.iters = 4096/128;
  size_t nq = (size_t)t.batch*4096*D;
  auto Q2 = rand_half(nq, 5), K2 = rand_half(nq, 6), V2 = rand_half(nq, 7);
  dq = upload(Q2); dk = upload(K2); dv = upload(V2); CK(cudaMalloc(&dO, nq*4)); CK(cudaMalloc(&dm, (size_t)t.batch*4096*4)); CK(cudaMalloc(&dl, (size_t)t.batch*4096*4));
  { Problem& p = t; SET_POINTERS }
  CK(launch(t)); CK(cudaDeviceSynchronize());
  cudaEvent_t s0, s1; cudaEventCreate(&s0); cudaEventCreate(&s1); cudaEventRecord(s0);
  for (int i = 0; i < 10; ++i) launch(t);
  cudaEventRecord(s1); CK(cudaEventSynchronize(s1)); float ms; cudaEventElapsedTime(&ms, s0, s1); ms /= 10;
  printf("%s B*H=128 N=4096 D=128: %.3f ms, %.1f TFLOP/s\n", NAME, ms, 4.0*128*4096.0*4096*128/ms/1e9);
  return 0;
}
