// Per-instruction rates and latencies of the ALU and MUFU pipes: FFMA, FADD, FMUL, FMNMX, MUFU.EX2,
// F2F (f32x2 to f16x2), LOP3, SHL (by a register amount, which ptxas cannot fold), I2F. Rate: one CTA of 1024 threads per SM, 8 independent chains
// per thread, results per cycle per SM (clock64 around the loop, between two __syncthreads).
// Latency: one thread, one dependent chain, cycles per instruction.
#include "bench.cuh"


enum { OP_ffma, OP_fadd, OP_fmul, OP_fmnmx, OP_ex2, OP_cvt_f16x2, OP_lop3, OP_shl, OP_i2f, OP_COUNT };
static const char* kNames[] = {"ffma", "fadd", "fmul", "fmnmx", "ex2", "cvt_f16x2", "lop3", "shl", "i2f"};

template <int K> __device__ __forceinline__ void step(float& x, uint32_t& u, float b, float c, uint32_t ub);
template <> __device__ __forceinline__ void step<OP_ffma>(float& x, uint32_t&, float b, float c, uint32_t) { asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x) : "f"(b), "f"(c)); }
template <> __device__ __forceinline__ void step<OP_fadd>(float& x, uint32_t&, float b, float, uint32_t) { asm volatile("add.rn.f32 %0, %0, %1;" : "+f"(x) : "f"(b)); }
template <> __device__ __forceinline__ void step<OP_fmul>(float& x, uint32_t&, float b, float, uint32_t) { asm volatile("mul.rn.f32 %0, %0, %1;" : "+f"(x) : "f"(b)); }
template <> __device__ __forceinline__ void step<OP_fmnmx>(float& x, uint32_t&, float b, float, uint32_t) { asm volatile("max.f32 %0, %0, %1;" : "+f"(x) : "f"(b)); }
template <> __device__ __forceinline__ void step<OP_ex2>(float& x, uint32_t&, float, float, uint32_t) { asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x)); }
template <> __device__ __forceinline__ void step<OP_cvt_f16x2>(float& x, uint32_t& u, float b, float, uint32_t) {
  asm volatile("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(x), "f"(b)); asm volatile("mov.b32 %0, %1;" : "=f"(x) : "r"(u)); }
template <> __device__ __forceinline__ void step<OP_lop3>(float&, uint32_t& u, float, float, uint32_t ub) { asm volatile("lop3.b32 %0, %0, %1, %0, 0x96;" : "+r"(u) : "r"(ub)); }
template <> __device__ __forceinline__ void step<OP_shl>(float&, uint32_t& u, float, float, uint32_t ub) { asm volatile("shl.b32 %0, %0, %1;" : "+r"(u) : "r"(ub & 7u)); }
template <> __device__ __forceinline__ void step<OP_i2f>(float& x, uint32_t& u, float, float, uint32_t) {
  asm volatile("cvt.rn.f32.s32 %0, %1;" : "=f"(x) : "r"(u)); asm volatile("mov.b32 %0, %1;" : "=r"(u) : "f"(x)); }

constexpr int CHAINS = 8, ITERS = 256;

template <int K>
__global__ void rate(float b, float c, uint32_t ub, float* sink, long long* cycles) {
  float x[CHAINS]; uint32_t u[CHAINS];
#pragma unroll
  for (int i = 0; i < CHAINS; ++i) { x[i] = threadIdx.x * 1e-3f + i; u[i] = threadIdx.x + i; }
  __syncthreads();
  long long c0 = cal::clk();
  for (int it = 0; it < ITERS; ++it) {
#pragma unroll
    for (int r = 0; r < 8; ++r)
#pragma unroll
      for (int i = 0; i < CHAINS; ++i) step<K>(x[i], u[i], b, c, ub);
  }
  __syncthreads();
  long long c1 = cal::clk();
  float s = 0; uint32_t t = 0;
#pragma unroll
  for (int i = 0; i < CHAINS; ++i) { s += x[i]; t ^= u[i]; }
  if (s == 1234.5f || t == 0xdeadbeefu) sink[threadIdx.x] = s;
  if (threadIdx.x == 0) cycles[blockIdx.x] = c1 - c0;
}

template <int K>
__global__ void latency(float b, float c, uint32_t ub, float* sink, long long* cycles) {
  float x = threadIdx.x * 1e-3f + 0.5f; uint32_t u = threadIdx.x + 7;
  long long c0 = cal::clk();
#pragma unroll
  for (int i = 0; i < 512; ++i) step<K>(x, u, b, c, ub);
  long long c1 = cal::clk();
  if (x == 1234.5f || u == 0xdeadbeefu) sink[0] = x;
  cycles[0] = c1 - c0;
}

template <int K>
void measure(cal::Records& out, int sms, float* sink, long long* cyc) {
  std::vector<long long> h(sms);
  std::vector<double> rates, lats;
  double ops = 1024.0 * CHAINS * ITERS * 8;
  for (int rep = 0; rep < 6; ++rep) {
    rate<K><<<sms, 1024>>>(1.0001f, 0.25f, 0x5a5a5a5au, sink, cyc); LAUNCHED();
    CK(cudaMemcpy(h.data(), cyc, 8 * sms, cudaMemcpyDeviceToHost));
    if (rep) for (int i = 0; i < sms; i += 11) rates.push_back(ops / (double)h[i]);
    latency<K><<<1, 1>>>(1.0001f, 0.25f, 0x5a5a5a5au, sink, cyc); LAUNCHED();
    CK(cudaMemcpy(h.data(), cyc, 8, cudaMemcpyDeviceToHost));
    if (rep) lats.push_back((double)h[0] / 512.0);
  }
  std::string p = "{\"op\": \"" + std::string(kNames[K]) + "\"}";
  out.add(cal::record("alu_rate", p, "per_clk_per_sm", rates));
  out.add(cal::record("alu_latency", p, "cycles", lats));
}

int main() {
  cal::device_or_exit();
  int sms = cal::sm_count();
  float* sink; long long* cyc;
  CK(cudaMalloc(&sink, 4 * 1024)); CK(cudaMalloc(&cyc, 8 * sms));
  cal::Records out;
  measure<OP_ffma>(out, sms, sink, cyc);
  measure<OP_fadd>(out, sms, sink, cyc);
  measure<OP_fmul>(out, sms, sink, cyc);
  measure<OP_fmnmx>(out, sms, sink, cyc);
  measure<OP_ex2>(out, sms, sink, cyc);
  measure<OP_cvt_f16x2>(out, sms, sink, cyc);
  measure<OP_lop3>(out, sms, sink, cyc);
  measure<OP_shl>(out, sms, sink, cyc);
  measure<OP_i2f>(out, sms, sink, cyc);
  out.print("alu");
  return 0;
}
