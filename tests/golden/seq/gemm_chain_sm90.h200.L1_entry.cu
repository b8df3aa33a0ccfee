// The C entry point of gemm_chain_sm90.h200.L1.cu for its PyTorch binding gemm_chain_sm90.h200.L1.py, written by
// `twill emit-cuda --binding torch`: plain sizes and one pointer per user tensor (in the binding's
// order), no torch headers. Build: nvcc -std=c++17 -gencode=arch=compute_XX,code=sm_XX -shared
// -Xcompiler -fPIC THIS_FILE (the binding does, on its first call).
#include "gemm_chain_sm90.h200.L1.cu"

extern "C" int twill_launch(int tiles_m, int tiles_n, int iters, int loop_extent, int batch, int m_extent,
                            int n_extent, float exp2_scale, float out_scale,
                            int persistent, int raster_group, void* const* tensors, const int* batch_groups,
                            void* stream) {
  twill_gemm_chain_kernel_L1::Problem p;
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
  (void)raster_group;  // the kernel keeps blockIdx order
  // tensors[0]: h (input; the graph's h)
  p.h = static_cast<decltype(p.h)>(tensors[0]);
  // tensors[1]: C (input; the graph's c)
  p.c = static_cast<decltype(p.c)>(tensors[1]);
  p.c_batch_group = batch_groups[1];
  // tensors[2]: E (input; the graph's e)
  p.e = static_cast<decltype(p.e)>(tensors[2]);
  p.e_batch_group = batch_groups[2];
  // tensors[3]: Y (output; the graph's acc2_new)
  p.out_acc2 = static_cast<decltype(p.out_acc2)>(tensors[3]);
  return static_cast<int>(twill_gemm_chain_kernel_L1::launch(p, static_cast<cudaStream_t>(stream)));
}

extern "C" const char* twill_error_string(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}
