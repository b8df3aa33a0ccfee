// TMA (cp.async.bulk.tensor) loads of f16 tiles [ROWS, COLS] from a [4M, 128] f16 tensor (1 GiB,
// 256-byte rows, as K or V of head dimension 128), 128-byte swizzle, one box per 64 columns, as the
// emitted kernels issue them. Each load's latency is thread 0's clock64 from the issue to the
// mbarrier's completion. Modes: "idle" (one CTA, one load at a time), "loaded" (a CTA per SM, one
// load at a time each), "stream" (a CTA per SM, DEPTH loads in flight each: latency under
// throughput, and bytes per cycle per SM); footprint "hbm" (tiles spread over the whole tensor) or
// "l2" (within 8 MiB, which stays in L2).
#include "bench.cuh"

typedef CUresult (*EncodeTiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

constexpr long long ROWS_TOTAL = 4ll << 20, COLS_TOTAL = 128;
constexpr int SAMPLES = 64, DEPTH = 4, MAX_TILE = 32768;

__device__ __forceinline__ void tma_load2d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
               :: "r"(cal::smem_addr(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(cal::smem_addr(bar)), "r"(c0), "r"(c1)
               : "memory");
}

template <int ROWS>
__global__ void loads(const __grid_constant__ CUtensorMap map, int cols, int depth, long long tiles, long long* lat,
                      long long* span) {
  extern __shared__ __align__(1024) unsigned char raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  __shared__ uint64_t bar[DEPTH];
  const int bytes = ROWS * cols * 2;
  if (threadIdx.x == 0) {
    for (int s = 0; s < DEPTH; ++s) cal::mbar_init(&bar[s], 1);
    cal::mbar_fence_init();
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  long long start[DEPTH];
  uint32_t phase = 0;
  auto issue = [&](int s, int i) {
    const long long t = ((long long)i * 7919 + (long long)blockIdx.x * 104729) % tiles;
    cal::mbar_expect_tx(&bar[s], bytes);
    start[s] = cal::clk();
    for (int c = 0; c < cols; c += 64) tma_load2d(smem + s * MAX_TILE + c * ROWS * 2, &map, &bar[s], c, (int)(t * ROWS));
  };
  const int total = SAMPLES + depth;  // the first `depth` loads warm up
  long long t0 = 0;
  for (int i = 0; i < depth; ++i) issue(i, i);
  for (int i = 0; i < total; ++i) {
    const int s = i % depth;
    cal::mbar_wait(&bar[s], (phase >> s) & 1u);
    phase ^= 1u << s;
    const long long done = cal::clk();
    if (i == depth - 1) t0 = done;
    if (i >= depth) lat[(long long)blockIdx.x * SAMPLES + i - depth] = done - start[s];
    if (i + depth < total) issue(s, i + depth);
  }
  span[blockIdx.x] = cal::clk() - t0;  // SAMPLES loads' bytes, after the warm-up
}

template <int ROWS>
void measure(cal::Records& out, EncodeTiled encode, void* buf, int cols, int sms, long long* lat, long long* span) {
  CUtensorMap map;
  cuuint64_t dims[2] = {COLS_TOTAL, ROWS_TOTAL}, strides[1] = {COLS_TOTAL * 2};
  cuuint32_t box[2] = {64, ROWS}, es[2] = {1, 1};
  if (encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, buf, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
    fprintf(stderr, "cuTensorMapEncodeTiled failed\n"); exit(1);
  }
  const int smem = DEPTH * MAX_TILE + 1024;
  CK(cudaFuncSetAttribute(loads<ROWS>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  struct Mode { const char* name; int grid, depth; };
  const Mode modes[] = {{"idle", 1, 1}, {"loaded", sms, 1}, {"stream", sms, DEPTH}};
  const char* prints[] = {"hbm", "l2"};
  std::vector<long long> hl((size_t)sms * SAMPLES), hs(sms);
  for (int f = 0; f < 2; ++f) {
    const long long tiles = f == 0 ? ROWS_TOTAL / ROWS : (8ll << 20) / (ROWS * COLS_TOTAL * 2);
    for (const Mode& m : modes) {
      std::vector<double> v, rate;
      double ms_total = 0;
      for (int rep = 0; rep < 3; ++rep) {
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
        CK(cudaEventRecord(e0));
        loads<ROWS><<<m.grid, 32, smem>>>(map, cols, m.depth, tiles, lat, span);
        CK(cudaEventRecord(e1)); LAUNCHED();
        float ms = 0; CK(cudaEventElapsedTime(&ms, e0, e1));
        if (rep == 0) continue;  // warm-up (and, for l2, the fill)
        ms_total += ms;
        CK(cudaMemcpy(hl.data(), lat, 8ull * m.grid * SAMPLES, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hs.data(), span, 8ull * m.grid, cudaMemcpyDeviceToHost));
        for (int b = 0; b < m.grid; b += (m.grid > 1 ? 22 : 1))
          for (int i = 0; i < SAMPLES; ++i) v.push_back((double)hl[(size_t)b * SAMPLES + i]);
        for (int b = 0; b < m.grid; b += (m.grid > 1 ? 22 : 1))
          rate.push_back((double)SAMPLES * ROWS * cols * 2 / (double)hs[b]);
      }
      char p[200];
      snprintf(p, sizeof p, "{\"rows\": %d, \"cols\": %d, \"bytes\": %d, \"mode\": \"%s\", \"footprint\": \"%s\", \"depth\": %d}",
               ROWS, cols, ROWS * cols * 2, m.name, prints[f], m.depth);
      out.add(cal::record("tma_load_latency", p, "cycles", v));
      out.add(cal::record("tma_load_rate", p, "bytes_per_clk_per_sm", rate));
      (void)ms_total;
    }
  }
}

int main() {
  cal::device_or_exit();
  int sms = cal::sm_count();
  EncodeTiled encode = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&encode), 12000, cudaEnableDefault, &q));
  if (!encode) { fprintf(stderr, "no cuTensorMapEncodeTiled\n"); return 1; }
  void* buf; long long *lat, *span;
  const size_t bytes = (size_t)ROWS_TOTAL * COLS_TOTAL * 2;
  CK(cudaMalloc(&buf, bytes)); CK(cudaMemset(buf, 0x3c, bytes));
  CK(cudaMalloc(&lat, 8ull * sms * SAMPLES)); CK(cudaMalloc(&span, 8ull * sms));
  cal::Records out;
  measure<64>(out, encode, buf, 64, sms, lat, span);
  measure<128>(out, encode, buf, 64, sms, lat, span);
  measure<256>(out, encode, buf, 64, sms, lat, span);
  measure<64>(out, encode, buf, 128, sms, lat, span);
  measure<128>(out, encode, buf, 128, sms, lat, span);
  out.print("tma");
  return 0;
}
