// Shared by every calibration microbenchmark: error checks, clocks, mbarriers, TMA, JSON output.
// Each benchmark is one .cu file with a main() that prints one JSON object on stdout (raw samples:
// twill.calibrate computes the spread). Exit 0 on success, 3 when there is no CUDA device.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <string>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); exit(1); } } while (0)
#define LAUNCHED() do { CK(cudaGetLastError()); CK(cudaDeviceSynchronize()); } while (0)

namespace cal {

// ---- device side -------------------------------------------------------------------------------------
__device__ __forceinline__ long long clk() {
  long long c; asm volatile("mov.u64 %0, %%clock64;" : "=l"(c) :: "memory"); return c;
}
__device__ __forceinline__ unsigned long long gtime() {
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory"); return t;
}
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("{\n\t.reg .b64 st;\n\tmbarrier.arrive.shared::cta.b64 st, [%0];\n\t}" :: "r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("{\n\t.reg .b64 st;\n\tmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n\t}"
               :: "r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile("{\n\t.reg .pred p;\n\tW_%=:\n\t"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t@!p bra W_%=;\n\t}"
               :: "r"(smem_addr(bar)), "r"(parity) : "memory");
}
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(threads) : "memory");
}

// ---- host side ---------------------------------------------------------------------------------------
inline int device_or_exit() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("{\"error\": \"no CUDA device\"}\n");
    exit(3);
  }
  CK(cudaSetDevice(0));
  return n;
}
inline int sm_count() { int v; CK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0)); return v; }

// A JSON object written field by field (keys in the order given; numbers as %.6g or integers).
struct Json {
  std::string s = "{";
  bool first = true;
  void key(const char* k) { s += first ? "" : ", "; first = false; s += "\""; s += k; s += "\": "; }
  void num(const char* k, double v) { char b[64]; snprintf(b, sizeof b, "%.9g", v); key(k); s += b; }
  void str(const char* k, const char* v) { key(k); s += "\""; s += v; s += "\""; }
  void raw(const char* k, const std::string& v) { key(k); s += v; }
  template <class T> void arr(const char* k, const std::vector<T>& v) {
    key(k); s += "[";
    for (size_t i = 0; i < v.size(); ++i) { char b[64]; snprintf(b, sizeof b, "%.9g", (double)v[i]); s += i ? ", " : ""; s += b; }
    s += "]";
  }
  std::string done() const { return s + "}"; }
};

// One record of a measurement: name, its parameters, and its samples (cycles, or a rate).
inline std::string record(const char* name, const std::string& params, const char* unit, const std::vector<double>& v) {
  Json j; j.str("name", name); j.raw("params", params); j.str("unit", unit); j.arr("samples", v); return j.done();
}

struct Records {
  std::vector<std::string> items;
  void add(const std::string& r) { items.push_back(r); }
  void print(const char* bench) const {
    printf("{\"bench\": \"%s\", \"records\": [\n", bench);
    for (size_t i = 0; i < items.size(); ++i) printf("  %s%s\n", items[i].c_str(), i + 1 < items.size() ? "," : "");
    printf("]}\n");
  }
};

inline std::string params1(const char* k, double v) { Json j; j.num(k, v); return j.done(); }

}  // namespace cal
