#pragma once
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cmath>
#include <cuda_fp16.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(1);} } while (0)
template <typename T> T* upload(const std::vector<T>& h) { T* d; CK(cudaMalloc(&d, h.size()*sizeof(T))); CK(cudaMemcpy(d, h.data(), h.size()*sizeof(T), cudaMemcpyHostToDevice)); return d; }
template <typename T> std::vector<T> download(const T* d, size_t n) { std::vector<T> h(n); CK(cudaMemcpy(h.data(), d, n*sizeof(T), cudaMemcpyDeviceToHost)); return h; }
inline std::vector<__half> rand_half(size_t n, unsigned seed, float scale=1.f) { std::vector<__half> v(n); for (size_t i=0;i<n;++i){ seed = seed*1664525u+1013904223u; v[i] = __float2half(scale*(((seed>>9)&0xffff)/65536.f - 0.5f)); } return v; }
inline void report(const char* name, const std::vector<float>& got, const std::vector<float>& ref) {
  double num=0, den=0, maxerr=0; size_t bad=0;
  for (size_t i=0;i<got.size();++i){ double d = got[i]-ref[i]; num += d*d; den += ref[i]*ref[i]; maxerr = fmax(maxerr, fabs(d)); if (!std::isfinite(got[i])) bad++; }
  printf("%s: rel_l2=%.3e max_abs_err=%.3e nonfinite=%zu n=%zu ref_rms=%.3e\n", name, sqrt(num/(den+1e-30)), maxerr, bad, got.size(), sqrt(den/got.size()));
}
