// The card: its name and limits as the runtime reports them, and the SM clock under load
// (clock64 cycles over %globaltimer nanoseconds, every SM busy with FMAs for about 50 ms).
#include "bench.cuh"

__global__ void spin(unsigned long long ns, float* sink, long long* cycles, unsigned long long* elapsed) {
  float a = threadIdx.x, b = 1.0001f, c = 0.5f;
  __syncthreads();
  long long c0 = cal::clk();
  unsigned long long t0 = cal::gtime(), t = t0;
  while (t - t0 < ns) {
#pragma unroll
    for (int i = 0; i < 64; ++i) asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(a) : "f"(b), "f"(c));
    t = cal::gtime();
  }
  long long c1 = cal::clk();
  if (a == 12345.f) sink[0] = a;
  if (threadIdx.x == 0) { cycles[blockIdx.x] = c1 - c0; elapsed[blockIdx.x] = t - t0; }
}

int main() {
  cal::device_or_exit();
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  int sms = p.multiProcessorCount, optin = 0, regs_block = 0;
  CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  CK(cudaDeviceGetAttribute(&regs_block, cudaDevAttrMaxRegistersPerBlock, 0));
  float* sink; long long* cyc; unsigned long long* ela;
  CK(cudaMalloc(&sink, 4)); CK(cudaMalloc(&cyc, 8 * sms)); CK(cudaMalloc(&ela, 8 * sms));
  spin<<<sms, 512>>>(20000000ull, sink, cyc, ela); LAUNCHED();  // warm-up: the clock ramps
  std::vector<double> ghz;
  std::vector<long long> hc(sms); std::vector<unsigned long long> he(sms);
  for (int rep = 0; rep < 5; ++rep) {
    spin<<<sms, 512>>>(50000000ull, sink, cyc, ela); LAUNCHED();
    CK(cudaMemcpy(hc.data(), cyc, 8 * sms, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(he.data(), ela, 8 * sms, cudaMemcpyDeviceToHost));
    for (int i = 0; i < sms; i += 11) ghz.push_back((double)hc[i] / (double)he[i]);
  }
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv); cudaRuntimeGetVersion(&rt);
  cal::Json j;
  j.str("bench", "device");
  j.str("name", p.name);
  j.num("cc_major", p.major); j.num("cc_minor", p.minor);
  j.num("sms", sms);
  j.num("smem_per_block_optin", optin);
  j.num("smem_per_sm", p.sharedMemPerMultiprocessor);
  j.num("regs_per_sm", p.regsPerMultiprocessor);
  j.num("regs_per_block", regs_block);
  j.num("max_threads_per_sm", p.maxThreadsPerMultiProcessor);
  j.num("l2_bytes", p.l2CacheSize);
  j.num("global_bytes", (double)p.totalGlobalMem);
  j.num("driver", drv); j.num("runtime", rt);
  j.arr("clock_ghz", ghz);
  printf("%s\n", j.done().c_str());
  return 0;
}
