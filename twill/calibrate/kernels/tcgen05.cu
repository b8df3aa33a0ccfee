// tcgen05.mma (sm_100a) latency and issue rate per shape and kind, the Blackwell counterpart of
// wgmma.cu: one thread issues m128nNkK from 128-byte-swizzled K-major shared-memory tiles into
// tensor memory and commits to an mbarrier; latency is one instruction, commit to completion
// (clock64); chain is CHAIN of them into one accumulator, cycles per instruction. The H200 cannot
// run it: it is compile-checked for sm_100a and runs on a Blackwell card.
#include "bench.cuh"

constexpr int CHAIN = 32, REPS = 16;
enum { K_F16, K_BF16, K_E4M3, K_I8 };
static const char* kDtypes[] = {"f16", "bf16", "f8e4m3", "i8"};

__device__ __forceinline__ uint64_t desc_sw128(const void* p) {
  const uint64_t addr = cal::smem_addr(p);
  return ((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((1024ull >> 4) << 32) | (1ull << 46) | (2ull << 61);
}
template <int KIND, int N>
__host__ __device__ constexpr uint32_t idesc() {  // D f32 (s32 for i8), A and B formats, K-major, N, M = 128
  return ((KIND == K_I8 ? 2u : 1u) << 4) | ((KIND == K_BF16 || KIND == K_I8 ? 1u : 0u) << 7) |
         ((KIND == K_BF16 || KIND == K_I8 ? 1u : 0u) << 10) | (static_cast<uint32_t>(N >> 3) << 17) | ((128u >> 4) << 24);
}
template <int KIND>
__device__ __forceinline__ void mma(uint32_t d, uint64_t a, uint64_t b, uint32_t id) {
  if (KIND == K_F16 || KIND == K_BF16)
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, 1, 0;\n\ttcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n\t}"
                 :: "r"(d), "l"(a), "l"(b), "r"(id) : "memory");
  else if (KIND == K_E4M3)
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, 1, 0;\n\ttcgen05.mma.cta_group::1.kind::f8f6f4 [%0], %1, %2, %3, p;\n\t}"
                 :: "r"(d), "l"(a), "l"(b), "r"(id) : "memory");
  else
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, 1, 0;\n\ttcgen05.mma.cta_group::1.kind::i8 [%0], %1, %2, %3, p;\n\t}"
                 :: "r"(d), "l"(a), "l"(b), "r"(id) : "memory");
}
__device__ __forceinline__ void commit(uint64_t* bar) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" :: "r"(cal::smem_addr(bar)) : "memory");
}

constexpr int A_BYTES = 128 * 128, B_BYTES = 256 * 128;

template <int KIND, int N>
__global__ void __launch_bounds__(128, 1) bench(long long* lat, long long* chain) {
  extern __shared__ __align__(1024) unsigned char raw[];
  unsigned char* a = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  unsigned char* b = a + A_BYTES;
  __shared__ uint64_t bar;
  __shared__ uint32_t taddr;
  for (int i = threadIdx.x; i < A_BYTES + B_BYTES; i += blockDim.x) a[i] = 0x30 | (((i + 1) * 2654435761u >> 13) & 0x0f);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  if (threadIdx.x < 32) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 256;" :: "r"(cal::smem_addr(&taddr)) : "memory");
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
  }
  if (threadIdx.x == 0) { cal::mbar_init(&bar, 1); cal::mbar_fence_init(); }
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const uint32_t d = taddr, id = idesc<KIND, N>();
  const uint64_t ad = desc_sw128(a), bd = desc_sw128(b);
  if (threadIdx.x == 0) {
    uint32_t phase = 0;
    for (int r = 0; r < REPS; ++r) {
      long long c0 = cal::clk();
      mma<KIND>(d, ad, bd, id);
      commit(&bar);
      cal::mbar_wait(&bar, phase); phase ^= 1;
      lat[blockIdx.x * REPS + r] = cal::clk() - c0;
    }
    for (int r = 0; r < 4; ++r) {
      long long c0 = cal::clk();
#pragma unroll
      for (int i = 0; i < CHAIN; ++i) mma<KIND>(d, ad, bd, id);
      commit(&bar);
      cal::mbar_wait(&bar, phase); phase ^= 1;
      chain[blockIdx.x * 4 + r] = cal::clk() - c0;
    }
  }
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  if (threadIdx.x < 32) asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 256;" :: "r"(d) : "memory");
}

template <int KIND, int N>
void measure(cal::Records& out, int sms, long long* lat, long long* chain) {
  const int smem = A_BYTES + B_BYTES + 1024;
  CK(cudaFuncSetAttribute(bench<KIND, N>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  std::vector<long long> hl(sms * REPS), hc(sms * 4);
  std::vector<double> vl, vc;
  for (int rep = 0; rep < 3; ++rep) {
    bench<KIND, N><<<sms, 128, smem>>>(lat, chain); LAUNCHED();
    CK(cudaMemcpy(hl.data(), lat, 8 * sms * REPS, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hc.data(), chain, 8 * sms * 4, cudaMemcpyDeviceToHost));
    if (!rep) continue;
    for (int i = 0; i < sms; i += 11) {
      for (int r = 1; r < REPS; ++r) vl.push_back((double)hl[i * REPS + r]);
      for (int r = 1; r < 4; ++r) vc.push_back((double)hc[i * 4 + r] / CHAIN);
    }
  }
  char p[160];
  snprintf(p, sizeof p, "{\"dtype\": \"%s\", \"m\": 128, \"n\": %d, \"k\": %d, \"warpgroups\": 1}", kDtypes[KIND], N,
           KIND == K_F16 || KIND == K_BF16 ? 16 : 32);
  out.add(cal::record("tcgen05_latency", p, "cycles", vl));
  out.add(cal::record("tcgen05_chain", p, "cycles_per_instruction", vc));
}

template <int KIND>
void shapes(cal::Records& out, int sms, long long* lat, long long* chain) {
  measure<KIND, 64>(out, sms, lat, chain);
  measure<KIND, 128>(out, sms, lat, chain);
  measure<KIND, 256>(out, sms, lat, chain);
}

int main() {
  cal::device_or_exit();
  int sms = cal::sm_count();
  long long *lat, *chain;
  CK(cudaMalloc(&lat, 8 * sms * REPS)); CK(cudaMalloc(&chain, 8 * sms * 4));
  cal::Records out;
  shapes<K_F16>(out, sms, lat, chain);
  shapes<K_BF16>(out, sms, lat, chain);
  shapes<K_E4M3>(out, sms, lat, chain);
  shapes<K_I8>(out, sms, lat, chain);
  out.print("tcgen05");
  return 0;
}
