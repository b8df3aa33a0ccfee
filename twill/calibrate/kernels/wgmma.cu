// wgmma (sm_90a) latency and issue rate per shape and dtype. The instructions are the emitter's own
// (wgmma_ops.cuh: twill.emit.runtime's wrappers, generated beside this file at build time), A and B
// from 128-byte-swizzled K-major tiles in shared memory, as the emitted kernels lay them out.
// Latency: one m64nNkK, committed and waited for (thread 0's clock64). Chain: CHAIN of them into one
// accumulator, back to back, then one commit and wait: cycles per instruction, with one warpgroup
// and with two issuing at once (the SM's tensor rate is 2*64*N*K / cycles per instruction).
// Issue: in the same chains, the cycles from before the first instruction to the return of the
// commit, per instruction: how long the issuing warpgroup is held before it can run anything else
// (the tensor core takes a wgmma only as it frees room for it).
#include "bench.cuh"
#include <cuda_fp8.h>
#include "wgmma_ops.cuh"

constexpr int CHAIN = 32, REPS = 16;
enum { D_F16, D_BF16, D_E4M3, D_I8 };
static const char* kDtypes[] = {"f16", "bf16", "f8e4m3", "i8"};

__device__ __forceinline__ uint64_t desc_sw128(const void* p) {
  const uint64_t addr = cal::smem_addr(p);
  return ((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }

template <int DT, int N> struct Mma;
#define MMA16(DT, NN, NAME) template <> struct Mma<DT, NN> { using Acc = float; static constexpr int K = 16; \
  __device__ __forceinline__ static void run(float (&d)[NN / 2], uint64_t a, uint64_t b) { NAME<0, 0>(d, a, b, 1); } };
#define MMA8(DT, NN, NAME, ACC) template <> struct Mma<DT, NN> { using Acc = ACC; static constexpr int K = 32; \
  __device__ __forceinline__ static void run(ACC (&d)[NN / 2], uint64_t a, uint64_t b) { NAME(d, a, b, 1); } };
MMA16(D_F16, 64, wgmma_m64n64k16_ss_f16) MMA16(D_F16, 128, wgmma_m64n128k16_ss_f16) MMA16(D_F16, 256, wgmma_m64n256k16_ss_f16)
MMA16(D_BF16, 64, wgmma_m64n64k16_ss_bf16) MMA16(D_BF16, 128, wgmma_m64n128k16_ss_bf16) MMA16(D_BF16, 256, wgmma_m64n256k16_ss_bf16)
MMA8(D_E4M3, 64, wgmma_m64n64k32_ss_f8e4m3, float) MMA8(D_E4M3, 128, wgmma_m64n128k32_ss_f8e4m3, float)
MMA8(D_E4M3, 256, wgmma_m64n256k32_ss_f8e4m3, float)
MMA8(D_I8, 64, wgmma_m64n64k32_ss_i8, int32_t) MMA8(D_I8, 128, wgmma_m64n128k32_ss_i8, int32_t)
MMA8(D_I8, 256, wgmma_m64n256k32_ss_i8, int32_t)

constexpr int A_BYTES = 64 * 128, B_BYTES = 256 * 128;  // A: 64 rows, B: up to 256 rows, of 128 bytes

template <int DT, int N>
__global__ void __launch_bounds__(256, 1) bench(int* sink, long long* lat, long long* chain) {
  using M = Mma<DT, N>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int wg = threadIdx.x / 128;
  unsigned char* a = smem + wg * (A_BYTES + B_BYTES);
  unsigned char* b = a + A_BYTES;
  for (int i = threadIdx.x % 128; i < A_BYTES + B_BYTES; i += 128) {
    uint32_t h = (i + 1) * 2654435761u;
    a[i] = 0x30 | ((h >> 13) & 0x0f);  // small non-zero values in every dtype
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  typename M::Acc d[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) d[i] = 0;
  const uint64_t ad = desc_sw128(a), bd = desc_sw128(b);
  for (int r = 0; r < REPS; ++r) {  // latency (read from the launches of one warpgroup)
    wg_fence();
    long long c0 = cal::clk();
    M::run(d, ad, bd);
    wg_commit();
    wg_wait0();
    long long c1 = cal::clk();
    if (threadIdx.x == 0) lat[blockIdx.x * REPS + r] = c1 - c0;
  }
  __syncthreads();
  for (int r = 0; r < 4; ++r) {  // chains: both warpgroups at once when there are two
    cal::named_sync(1, blockDim.x);
    wg_fence();
    long long c0 = cal::clk();
#pragma unroll
    for (int i = 0; i < CHAIN; ++i) M::run(d, ad, bd);
    wg_commit();
    long long ci = cal::clk();
    wg_wait0();
    long long c1 = cal::clk();
    if (threadIdx.x % 128 == 0) {
      chain[(blockIdx.x * 4 + r) * 2 + wg] = c1 - c0;
      chain[gridDim.x * 8 + (blockIdx.x * 4 + r) * 2 + wg] = ci - c0;  // the issue, after the chains
    }
  }
  int s = 0;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) s += (int)d[i];
  if (s == 0x7fffffff) sink[threadIdx.x] = s;
}

template <int DT, int N>
void measure(cal::Records& out, int sms, int* sink, long long* lat, long long* chain) {
  const int smem = 2 * (A_BYTES + B_BYTES) + 1024;
  CK(cudaFuncSetAttribute(bench<DT, N>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  std::vector<long long> hl(sms * REPS), hc(sms * 16);
  for (int groups = 1; groups <= 2; ++groups) {
    std::vector<double> vl, vc, vi;
    for (int rep = 0; rep < 3; ++rep) {
      bench<DT, N><<<sms, 128 * groups, smem>>>(sink, lat, chain); LAUNCHED();
      CK(cudaMemcpy(hl.data(), lat, 8 * sms * REPS, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hc.data(), chain, 8 * sms * 16, cudaMemcpyDeviceToHost));
      if (!rep) continue;
      for (int i = 0; i < sms; i += 11) {
        if (groups == 1) for (int r = 1; r < REPS; ++r) vl.push_back((double)hl[i * REPS + r]);
        for (int r = 1; r < 4; ++r) {
          long long c = hc[(i * 4 + r) * 2];
          if (groups == 2 && hc[(i * 4 + r) * 2 + 1] > c) c = hc[(i * 4 + r) * 2 + 1];
          vc.push_back((double)c / CHAIN);
          long long is = hc[sms * 8 + (i * 4 + r) * 2];
          if (groups == 2 && hc[sms * 8 + (i * 4 + r) * 2 + 1] > is) is = hc[sms * 8 + (i * 4 + r) * 2 + 1];
          vi.push_back((double)is / CHAIN);
        }
      }
    }
    char p[160];
    snprintf(p, sizeof p, "{\"dtype\": \"%s\", \"m\": 64, \"n\": %d, \"k\": %d, \"warpgroups\": %d}",
             kDtypes[DT], N, Mma<DT, N>::K, groups);
    if (groups == 1) out.add(cal::record("wgmma_latency", p, "cycles", vl));
    out.add(cal::record("wgmma_chain", p, "cycles_per_instruction", vc));
    out.add(cal::record("wgmma_issue", p, "cycles_per_instruction", vi));
  }
}

template <int DT>
void shapes(cal::Records& out, int sms, int* sink, long long* lat, long long* chain) {
  measure<DT, 64>(out, sms, sink, lat, chain);
  measure<DT, 128>(out, sms, sink, lat, chain);
  measure<DT, 256>(out, sms, sink, lat, chain);
}

int main() {
  cal::device_or_exit();
  int sms = cal::sm_count();
  int* sink; long long *lat, *chain;
  CK(cudaMalloc(&sink, 4 * 256)); CK(cudaMalloc(&lat, 8 * sms * REPS)); CK(cudaMalloc(&chain, 8 * sms * 16));
  cal::Records out;
  shapes<D_F16>(out, sms, sink, lat, chain);
  shapes<D_BF16>(out, sms, sink, lat, chain);
  shapes<D_E4M3>(out, sms, sink, lat, chain);
  shapes<D_I8>(out, sms, sink, lat, chain);
  out.print("wgmma");
  return 0;
}
