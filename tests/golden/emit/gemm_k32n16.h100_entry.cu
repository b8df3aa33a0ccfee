// The C entry point of gemm_k32n16.h100.cu for its PyTorch binding gemm_k32n16.h100.py, written by
// `twill emit-cuda --binding torch`: plain sizes and one pointer per user tensor (in the binding's
// order), no torch headers. Build: nvcc -std=c++17 -gencode=arch=compute_XX,code=sm_XX -shared
// -Xcompiler -fPIC THIS_FILE (the binding does, on its first call).
#include "gemm_k32n16.h100.cu"

extern "C" int twill_launch(int tiles_m, int tiles_n, int iters, int loop_extent, int batch, int m_extent,
                            int n_extent, float exp2_scale, float out_scale,
                            int persistent, int raster_group, void* const* tensors, const int* batch_groups,
                            void* stream) {
  twill_gemm_k32n16::Problem p;
  p.tiles_m = tiles_m;
  p.tiles_n = tiles_n;
  p.iters = iters;
  p.loop_extent = loop_extent;
  p.m_extent = m_extent;
  p.n_extent = n_extent;
  p.batch = batch;
  p.exp2_scale = exp2_scale;
  p.persistent = persistent;
  (void)out_scale;  // no output of an fp8 mma
  if (raster_group >= 0) p.raster_group = raster_group;
  // tensors[0]: a (input; the graph's a)
  p.a = static_cast<decltype(p.a)>(tensors[0]);
  // tensors[1]: b (input; the graph's b)
  p.b = static_cast<decltype(p.b)>(tensors[1]);
  p.b_batch_group = batch_groups[1];
  // tensors[2]: acc (output; the graph's acc_n)
  p.out_acc = static_cast<decltype(p.out_acc)>(tensors[2]);
  return static_cast<int>(twill_gemm_k32n16::launch(p, static_cast<cudaStream_t>(stream)));
}

extern "C" const char* twill_error_string(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}
