// Checks an emitted kernel against a naive reference (see run.sh). KERNEL, NS, NAME: -D flags.
// FA3-style sub-tiled attention: q0, q1 are independent 64-row halves; out_acc0/1 = softmax(q K^T/sqrt(d)) V
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
  int D = 128, Sq = p.tiles_m*64, Skv = p.iters*128, B = p.batch;
  auto q0 = rand_half((size_t)B*Sq*D, 1, 2.f), q1 = rand_half((size_t)B*Sq*D, 11, 2.f), k = rand_half((size_t)B*Skv*D, 2, 2.f), v = rand_half((size_t)B*Skv*D, 3);
  __half *dq0 = upload(q0), *dq1 = upload(q1), *dk = upload(k), *dv = upload(v);
  float *o0, *o1, *r0, *r1, *m0, *m1, *l0, *l1; size_t no = (size_t)B*Sq*D*4, nr = (size_t)B*Sq*4;
  CK(cudaMalloc(&o0, no)); CK(cudaMalloc(&o1, no)); CK(cudaMalloc(&r0, no)); CK(cudaMalloc(&r1, no));
  CK(cudaMalloc(&m0, nr)); CK(cudaMalloc(&m1, nr)); CK(cudaMalloc(&l0, nr)); CK(cudaMalloc(&l1, nr));
  CK(cudaMemset(o0, 0xff, no)); CK(cudaMemset(o1, 0xff, no));
  p.q0 = dq0; p.q1 = dq1; p.k = dk; p.v = dv; p.out_acc0 = o0; p.out_acc1 = o1; p.out_m0 = m0; p.out_m1 = m1; p.out_l0 = l0; p.out_l1 = l1;
  p.exp2_scale = 1.44269504f / sqrtf((float)D);
  CK(launch(p)); CK(cudaDeviceSynchronize());
  ref_attn<<<dim3(Sq/64, B), 64>>>(dq0, dk, dv, r0, Sq, Skv, D, 1.f/sqrtf((float)D));
  ref_attn<<<dim3(Sq/64, B), 64>>>(dq1, dk, dv, r1, Sq, Skv, D, 1.f/sqrtf((float)D)); CK(cudaDeviceSynchronize());
  report(NAME "_half0", download(o0, (size_t)B*Sq*D), download(r0, (size_t)B*Sq*D));
  report(NAME "_half1", download(o1, (size_t)B*Sq*D), download(r1, (size_t)B*Sq*D));
  Problem t = p; t.batch = 128; t.tiles_m = 4096/128; t.iters = 4096/128;
  size_t nh = (size_t)t.batch*2048*D, nk = (size_t)t.batch*4096*D;
  t.q0 = upload(rand_half(nh, 5)); t.q1 = upload(rand_half(nh, 6)); t.k = upload(rand_half(nk, 7)); t.v = upload(rand_half(nk, 8));
  float* big; CK(cudaMalloc(&big, nh*4*2 + (size_t)t.batch*2048*4*4));
  t.out_acc0 = big; t.out_acc1 = big + nh; t.out_m0 = big + 2*nh; t.out_m1 = t.out_m0 + t.batch*2048; t.out_l0 = t.out_m1 + t.batch*2048; t.out_l1 = t.out_l0 + t.batch*2048;
  CK(launch(t)); CK(cudaDeviceSynchronize());
  cudaEvent_t s0, s1; cudaEventCreate(&s0); cudaEventCreate(&s1); cudaEventRecord(s0);
  for (int i = 0; i < 10; ++i) launch(t);
  cudaEventRecord(s1); CK(cudaEventSynchronize(s1)); float ms; cudaEventElapsedTime(&ms, s0, s1); ms /= 10;
  printf("%s B*H=128 N=4096 D=128: %.3f ms, %.1f TFLOP/s\n", NAME, ms, 4.0*128*4096.0*4096*128/ms/1e9);
  return 0;
}
